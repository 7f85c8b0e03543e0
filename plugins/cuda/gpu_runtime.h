// The HIP shim: the plugin's sources are written against the CUDA runtime
// API; built as the ROCm plugin (SPORA_GPU_HIP, set by plugins/rocm), the
// names below map one to one onto HIP's. Nothing else in the sources knows
// which toolchain built them, except the few lines marked SPORA_GPU_HIP
// (device properties, cuBLAS, the probe's driver check).
//
// .cpp files see only the runtime API; .cu files (kernels) include this too,
// after the toolchain's own device headers (gpu_device.h).
#pragma once

#if defined(SPORA_GPU_HIP)
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#include <hip/hip_runtime_api.h>

#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaErrorNotReady hipErrorNotReady
#define cudaErrorNoDevice hipErrorNoDevice
#define cudaErrorInsufficientDriver hipErrorInsufficientDriver
#define cudaErrorMemoryAllocation hipErrorOutOfMemory
#define cudaErrorInvalidValue hipErrorInvalidValue
#define cudaErrorInvalidDevice hipErrorInvalidDevice
#define cudaGetErrorString hipGetErrorString
#define cudaGetErrorName hipGetErrorName
#define cudaGetLastError hipGetLastError
#define cudaErrorIllegalAddress hipErrorIllegalAddress
#define cudaErrorLaunchFailure hipErrorLaunchFailure
#define cudaErrorAssert hipErrorAssert
#define cudaErrorLaunchTimeout hipErrorLaunchTimeOut
#define cudaErrorECCUncorrectable hipErrorECCNotCorrectable
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaSetDevice hipSetDevice
#define cudaGetDevice hipGetDevice
#define cudaDeviceProp hipDeviceProp_t
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaDeviceSynchronize hipDeviceSynchronize
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaHostAlloc hipHostMalloc
#define cudaHostAllocDefault hipHostMallocDefault
#define cudaFreeHost hipHostFree
#define cudaMemcpy hipMemcpy
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemcpy2DAsync hipMemcpy2DAsync
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaMemset hipMemset
#define cudaMemsetAsync hipMemsetAsync
#define cudaStream_t hipStream_t
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaStreamQuery hipStreamQuery
#define cudaStreamWaitEvent hipStreamWaitEvent
#define cudaEvent_t hipEvent_t
#define cudaEventCreate hipEventCreate
#define cudaEventDestroy hipEventDestroy
#define cudaEventRecord hipEventRecord
#define cudaEventQuery hipEventQuery
#define cudaEventSynchronize hipEventSynchronize
#define cudaEventElapsedTime hipEventElapsedTime
#define cudaRuntimeGetVersion hipRuntimeGetVersion
// Stream-ordered memory pools (gpu_alloc.cpp).
#define cudaMemPool_t hipMemPool_t
#define cudaMemPoolProps hipMemPoolProps
#define cudaMemAllocationTypePinned hipMemAllocationTypePinned
#define cudaMemHandleTypeNone hipMemHandleTypeNone
#define cudaMemLocationTypeDevice hipMemLocationTypeDevice
#define cudaMemPoolCreate hipMemPoolCreate
#define cudaMemPoolSetAttribute hipMemPoolSetAttribute
#define cudaMemPoolGetAttribute hipMemPoolGetAttribute
#define cudaMemPoolAttrReleaseThreshold hipMemPoolAttrReleaseThreshold
#define cudaMemPoolAttrReservedMemCurrent hipMemPoolAttrReservedMemCurrent
#define cudaMemPoolAttrReservedMemHigh hipMemPoolAttrReservedMemHigh
#define cudaMallocFromPoolAsync hipMallocFromPoolAsync
#define cudaFreeAsync hipFreeAsync
#define cudaDeviceGetAttribute hipDeviceGetAttribute
#define cudaDevAttrMemoryPoolsSupported hipDeviceAttributeMemoryPoolsSupported
#define cudaEventCreateWithFlags hipEventCreateWithFlags
#define cudaEventDisableTiming hipEventDisableTiming
#define cudaStreamIsCapturing hipStreamIsCapturing
#define cudaStreamCaptureStatus hipStreamCaptureStatus
#define cudaStreamCaptureStatusNone hipStreamCaptureStatusNone
#define cudaDriverGetVersion hipDriverGetVersion
#define cudaGraph_t hipGraph_t
#define cudaGraphExec_t hipGraphExec_t
#define cudaStreamBeginCapture hipStreamBeginCapture
#define cudaStreamEndCapture hipStreamEndCapture
#define cudaStreamCaptureModeThreadLocal hipStreamCaptureModeThreadLocal
#define cudaGraphDestroy hipGraphDestroy
#define cudaGraphExecDestroy hipGraphExecDestroy
#define cudaGraphLaunch hipGraphLaunch

#else
#include <cuda_runtime_api.h>
#endif

namespace spora::gpu {

#if defined(SPORA_GPU_HIP)
constexpr const char* kPluginName = "rocm";
constexpr const char* kRuntimeName = "HIP";
#else
constexpr const char* kPluginName = "cuda";
constexpr const char* kRuntimeName = "CUDA";
#endif

}  // namespace spora::gpu
