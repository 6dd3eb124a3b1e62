#pragma once
// Owners for the libfabric objects of the raw baseline. Kept separate from the
// engine's internals on purpose: the baseline must not share code with what it
// measures.

#include <rdma/fabric.h>

#include <memory>
#include <utility>

namespace bench::raw {

template <typename T>
class Owned {
 public:
  Owned() = default;
  Owned(Owned&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  Owned& operator=(Owned&& o) noexcept {
    if (this != &o) {
      close();
      p_ = std::exchange(o.p_, nullptr);
    }
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() { close(); }

  T* get() const noexcept { return p_; }
  T** out() noexcept {
    close();
    return &p_;
  }
  fid_t fid() const noexcept { return &p_->fid; }

 private:
  // A failing close during teardown has nobody left to tell; the process is
  // about to report its figures or exit anyway.
  void close() noexcept {
    if (p_ != nullptr) (void)fi_close(&p_->fid);
    p_ = nullptr;
  }
  T* p_ = nullptr;
};

struct InfoFree {
  void operator()(fi_info* i) const noexcept { fi_freeinfo(i); }
};
using InfoOwner = std::unique_ptr<fi_info, InfoFree>;

}  // namespace bench::raw
