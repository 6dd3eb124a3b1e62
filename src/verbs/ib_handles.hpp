#pragma once
// Move-only owners for ibverbs handles, each released by its own destroy call.

#include <infiniband/verbs.h>

#include <memory>

#include "common/log.hpp"

namespace fabric::verbs {

template <typename T, int (*Destroy)(T*)>
struct IbDeleter {
  void operator()(T* handle) const noexcept {
    if (int rc = Destroy(handle); rc != 0) log::warn("ibverbs destroy failed: errno {}", rc);
  }
};

template <typename T, int (*Destroy)(T*)>
using IbPtr = std::unique_ptr<T, IbDeleter<T, Destroy>>;

using ContextPtr = IbPtr<ibv_context, ibv_close_device>;
using PdPtr = IbPtr<ibv_pd, ibv_dealloc_pd>;
using CqPtr = IbPtr<ibv_cq, ibv_destroy_cq>;
using QpPtr = IbPtr<ibv_qp, ibv_destroy_qp>;
using SrqPtr = IbPtr<ibv_srq, ibv_destroy_srq>;
using MrPtr = IbPtr<ibv_mr, ibv_dereg_mr>;
using AhPtr = IbPtr<ibv_ah, ibv_destroy_ah>;

struct DeviceListDeleter {
  void operator()(ibv_device** list) const noexcept { ibv_free_device_list(list); }
};
using DeviceListPtr = std::unique_ptr<ibv_device*, DeviceListDeleter>;

}  // namespace fabric::verbs
