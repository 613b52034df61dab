/*
 * cudacompat/cuda.h: lets gorgonia.org/cu v0.9.6 (written against the CUDA 10-12 driver API)
 * compile against CUDA 13's cuda.h, unchanged.
 *
 * CUDA 13's header maps five entry points to newer versions with other parameters
 * (cuCtxCreate -> cuCtxCreate_v4 taking CUctxCreateParams*, cuMemAdvise -> _v2 taking
 * CUmemLocation, cuMemPrefetchAsync -> _v2, cuGraphAddDependencies -> _v2 and cuGraphGetEdges ->
 * _v2 with edge data), and no macro selects the old API (CUDA_FORCE_API_VERSION is an #error).
 * The CUDA 13 driver still exports the CUDA 12 symbols, so each name is redirected here to a
 * prototype with the CUDA 12 signature bound to the old symbol through a GCC asm label.
 *
 * This directory must come first on the include path (CGO_CFLAGS=-I.../cudacompat -I<cuda>/include,
 * set by just/gpu.just); #include_next then finds the real header. The symbols named here are
 * checked against the driver by TestCompatSymbols in core/internal/ml/cuda/gpu (cuda tag).
 */
#ifndef IRIS_CUDACOMPAT_CUDA_H
#define IRIS_CUDACOMPAT_CUDA_H

#include_next <cuda.h>

#if CUDA_VERSION >= 13000
#undef cuCtxCreate
#undef cuMemAdvise
#undef cuMemPrefetchAsync
#undef cuGraphAddDependencies
#undef cuGraphGetEdges

#ifdef __cplusplus
extern "C" {
#endif
CUresult CUDAAPI iris_compat_cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev) __asm__("cuCtxCreate_v2");
CUresult CUDAAPI iris_compat_cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device) __asm__("cuMemAdvise");
CUresult CUDAAPI iris_compat_cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream) __asm__("cuMemPrefetchAsync");
CUresult CUDAAPI iris_compat_cuGraphAddDependencies(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to, size_t numDependencies) __asm__("cuGraphAddDependencies");
CUresult CUDAAPI iris_compat_cuGraphGetEdges(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to, size_t *numEdges) __asm__("cuGraphGetEdges");
#ifdef __cplusplus
}
#endif

#define cuCtxCreate iris_compat_cuCtxCreate
#define cuMemAdvise iris_compat_cuMemAdvise
#define cuMemPrefetchAsync iris_compat_cuMemPrefetchAsync
#define cuGraphAddDependencies iris_compat_cuGraphAddDependencies
#define cuGraphGetEdges iris_compat_cuGraphGetEdges
#endif /* CUDA_VERSION >= 13000 */

#endif /* IRIS_CUDACOMPAT_CUDA_H */
