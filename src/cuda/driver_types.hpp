#pragma once
// Our own declarations of the few CUDA driver API types, constants and entry
// points we call, written from the public driver API documentation. cuda.h is
// deliberately not included so the library builds without the toolkit; these
// live in fabric::cuda, so they never clash with cuda.h in another file.

#include <cstddef>

namespace fabric::cuda {

using CUresult = int;
using CUdevice = int;
struct CUctx_st;  // opaque
using CUcontext = CUctx_st*;
using CUdeviceptr = unsigned long long;  // 64-bit builds only
using CUmemRangeHandleType = int;

inline constexpr CUresult kCudaSuccess = 0;
inline constexpr CUresult kCudaErrorStubLibrary = 34;
inline constexpr CUresult kCudaErrorInsufficientDriver = 35;
inline constexpr CUresult kCudaErrorNoDevice = 100;
inline constexpr CUresult kCudaErrorNotSupported = 801;

inline constexpr unsigned kMemHostAllocPortable = 0x01;
inline constexpr unsigned kMemHostAllocDeviceMap = 0x02;

inline constexpr CUmemRangeHandleType kMemRangeHandleTypeDmaBufFd = 0x1;

// Entry points, by the name the driver exports (several carry a _v2 suffix;
// the loader tries that first).
struct DriverApi {
  CUresult (*cuInit)(unsigned flags) = nullptr;
  CUresult (*cuDeviceGetCount)(int* count) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal) = nullptr;
  CUresult (*cuCtxGetCurrent)(CUcontext* ctx) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext ctx) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* ctx, CUdevice device) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice device) = nullptr;
  CUresult (*cuMemHostAlloc)(void** host, std::size_t bytes, unsigned flags) = nullptr;
  CUresult (*cuMemFreeHost)(void* host) = nullptr;
  CUresult (*cuMemHostGetDevicePointer)(CUdeviceptr* device, void* host, unsigned flags) = nullptr;
  CUresult (*cuMemGetAddressRange)(CUdeviceptr* base, std::size_t* size, CUdeviceptr ptr) = nullptr;
  // Optional: drivers before CUDA 11.7 lack it.
  CUresult (*cuMemGetHandleForAddressRange)(void* handle, CUdeviceptr ptr, std::size_t size,
                                            CUmemRangeHandleType type,
                                            unsigned long long flags) = nullptr;
  CUresult (*cuGetErrorString)(CUresult error, const char** text) = nullptr;
  // Optional: where it is missing, GPU memory is routed by ordinal (engine/group_plan.hpp).
  CUresult (*cuDeviceGetPCIBusId)(char* bus_id, int length, CUdevice device) = nullptr;
};

}  // namespace fabric::cuda
