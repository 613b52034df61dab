// iris.cu: the CUDA kernels of Iris's GPU engine (core/internal/ml/cuda). Matrix products
// are cuBLAS calls made from Go; everything between them is here.
//
// Every kernel exists for two storage types, named by a suffix: _f32 (float activations and
// weights: the exact-parity mode) and _bf16 (__nv_bfloat16 storage, float arithmetic). The bf16
// kernels round where transformers 5.17 rounds in a bf16 model (the PyTorch lines are quoted next
// to each kernel), so that greedy tokens agree as often as
// rounding allows.
//
// Built by `just kernels` (nvcc 13.0, sm_90 SASS + compute_90 PTX) into build/iris.fatbin, which
// kernels_cuda.go embeds.
#include <cuda_bf16.h>
#include <float.h>
#include <mma.h>
#include <stdint.h>

typedef __nv_bfloat16 bf16;

// ---------------------------------------------------------------------------------------------
// storage <-> float

__device__ __forceinline__ float ld(float x) { return x; }
__device__ __forceinline__ float ld(bf16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T st(float x);
template <> __device__ __forceinline__ float st<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16 st<bf16>(float x) { return __float2bfloat16_rn(x); }
// rnd rounds a float to what T can hold, keeping it a float.
template <typename T> __device__ __forceinline__ float rnd(float x) { return ld(st<T>(x)); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// block_sum reduces over a block of up to 1024 threads; every thread gets the result.
__device__ float block_sum(float v) {
    __shared__ float part[32];
    __shared__ float total;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    __syncthreads(); // part may still be read by a previous call
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        int nw = (blockDim.x + 31) >> 5;
        float s = lane < nw ? part[lane] : 0.f;
        s = warp_sum(s);
        if (lane == 0) total = s;
    }
    __syncthreads();
    return total;
}

__device__ float block_max(float v) {
    __shared__ float part[32];
    __shared__ float total;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        int nw = (blockDim.x + 31) >> 5;
        float s = lane < nw ? part[lane] : -INFINITY;
        s = warp_max(s);
        if (lane == 0) total = s;
    }
    __syncthreads();
    return total;
}

// Programmatic dependent launch (sm_90, gpu.Function.LaunchDependent): a kernel launched that
// way may start before the previous kernel of its stream has finished. pdl_wait blocks until
// that kernel has completed and its writes are visible: nothing it writes may be read, and
// nothing it reads may be written, before. pdl_launch lets the next kernel start early. Both
// are no-ops for a plain launch.
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_launch() { asm volatile("griddepcontrol.launch_dependents;" :::); }

#define GRID_STRIDE(i, n) for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < (long)(n); i += (long)gridDim.x * blockDim.x)

// ---------------------------------------------------------------------------------------------
// conversions (weights at load, pixels, logits)

extern "C" __global__ void iris_bf16_to_f32(float *out, const bf16 *in, long n) {
    pdl_wait(); // no-op unless launched dependent (enq.launchDep)
    GRID_STRIDE(i, n) out[i] = __bfloat162float(in[i]);
}

extern "C" __global__ void iris_f32_to_bf16(bf16 *out, const float *in, long n) {
    pdl_wait(); // no-op unless launched dependent (enq.launchDep)
    GRID_STRIDE(i, n) out[i] = __float2bfloat16_rn(in[i]);
}

// ---------------------------------------------------------------------------------------------
// embeddings

// inputs_embeds = self.get_input_embeddings()(input_ids): out[i] = table[ids[i]] (table rows at
// stride ldt), one block a row.
template <typename T> __device__ void embed(T *out, const T *table, int ldt, const int *ids, int H) {
    pdl_wait(); // no-op unless launched dependent (enq.launchDep)
    const T *src = table + (size_t)ids[blockIdx.x] * ldt;
    T *dst = out + (size_t)blockIdx.x * H;
    for (int j = threadIdx.x; j < H; j += blockDim.x) dst[j] = src[j];
}
extern "C" __global__ void iris_embed_f32(float *out, const float *table, int ldt, const int *ids, int H) { embed(out, table, ldt, ids, H); }
extern "C" __global__ void iris_embed_bf16(bf16 *out, const bf16 *table, int ldt, const int *ids, int H) { embed(out, table, ldt, ids, H); }

// A learned position table resampled to the patch grid ((pos_embed(idx) * weight[:, :, None])
// summed over the taps, added to the patch embeddings): out[i] += sum over k < K of w[i, k] *
// table[ids[i*K + k]], the sum in F32 and rounded to T before the add (the interpolated table is
// a T tensor). w is F32 at row stride ldw; rows of H values, one block a row.
template <typename T>
__device__ void embed_bag_add(T *out, int ldo, const T *table, int ldt, const int *ids, const float *w, int ldw, int K, int H) {
    pdl_wait(); // no-op unless launched dependent (enq.launchDep)
    const int *id = ids + (size_t)blockIdx.x * K;
    const float *wr = w + (size_t)blockIdx.x * ldw;
    T *dst = out + (size_t)blockIdx.x * ldo;
    for (int j = threadIdx.x; j < H; j += blockDim.x) {
        float acc = 0.f;
        for (int k = 0; k < K; k++) acc += wr[k] * ld(table[(size_t)id[k] * ldt + j]);
        dst[j] = st<T>(ld(dst[j]) + rnd<T>(acc));
    }
}
#define EMBED_BAG_ARGS(T) T *out, int ldo, const T *table, int ldt, const int *ids, const float *w, int ldw, int K, int H
extern "C" __global__ void iris_embed_bag_add_f32(EMBED_BAG_ARGS(float)) { embed_bag_add(out, ldo, table, ldt, ids, w, ldw, K, H); }
extern "C" __global__ void iris_embed_bag_add_bf16(EMBED_BAG_ARGS(bf16)) { embed_bag_add(out, ldo, table, ldt, ids, w, ldw, K, H); }

// Row moves (the vision tower's window order and its reverse, an image's rows into the prompt,
// the keys and values of a batch into the KV pool, the last row of each sequence): gather:
// out[i] = in[index[i]]; scatter: out[index[i]] = in[i]; rows of W values at the given strides,
// a block a row.
template <typename T> __device__ void gather(T *out, int ldo, const T *in, int ldi, const int *index, int W) {
    pdl_wait(); // no-op unless launched dependent (enq.launchDep)
    const T *s = in + (size_t)index[blockIdx.x] * ldi;
    T *d = out + (size_t)blockIdx.x * ldo;
    for (int j = threadIdx.x; j < W; j += blockDim.x) d[j] = s[j];
}
template <typename T> __device__ void scatter(T *out, int ldo, const T *in, int ldi, const int *index, int W) {
    pdl_wait(); // no-op unless launched dependent (enq.launchDep)
    const T *s = in + (size_t)blockIdx.x * ldi;
    T *d = out + (size_t)index[blockIdx.x] * ldo;
    for (int j = threadIdx.x; j < W; j += blockDim.x) d[j] = s[j];
}
extern "C" __global__ void iris_gather_f32(float *out, int ldo, const float *in, int ldi, const int *index, int W) {
    gather(out, ldo, in, ldi, index, W);
}
extern "C" __global__ void iris_gather_bf16(bf16 *out, int ldo, const bf16 *in, int ldi, const int *index, int W) {
    gather(out, ldo, in, ldi, index, W);
}
extern "C" __global__ void iris_scatter_f32(float *out, int ldo, const float *in, int ldi, const int *index, int W) {
    scatter(out, ldo, in, ldi, index, W);
}
extern "C" __global__ void iris_scatter_bf16(bf16 *out, int ldo, const bf16 *in, int ldi, const int *index, int W) {
    scatter(out, ldo, in, ldi, index, W);
}

// Features added at some positions of a residual stream (hidden_states[mask] + features):
// out[index[i]] += in[i], in F32 and rounded once to T. A block a row, so the indexes must be
// distinct (the Go side checks).
template <typename T> __device__ void scatter_add(T *out, int ldo, const T *in, int ldi, const int *index, int W) {
    pdl_wait(); // no-op unless launched dependent (enq.launchDep)
    const T *s = in + (size_t)blockIdx.x * ldi;
    T *d = out + (size_t)index[blockIdx.x] * ldo;
    for (int j = threadIdx.x; j < W; j += blockDim.x) d[j] = st<T>(ld(d[j]) + ld(s[j]));
}
extern "C" __global__ void iris_scatter_add_f32(float *out, int ldo, const float *in, int ldi, const int *index, int W) {
    scatter_add(out, ldo, in, ldi, index, W);
}
extern "C" __global__ void iris_scatter_add_bf16(bf16 *out, int ldo, const bf16 *in, int ldi, const int *index, int W) {
    scatter_add(out, ldo, in, ldi, index, W);
}

// ---------------------------------------------------------------------------------------------
// normalisation and elementwise steps

// RMSNorm.forward (transformers' *RMSNorm modules):
//   hidden_states = hidden_states.to(torch.float32)
//   variance = hidden_states.pow(2).mean(-1, keepdim=True)
//   hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
//   return self.weight * hidden_states.to(input_dtype)
// The residual add before it is fused: xout = x + delta (hidden_states = residual + hidden_states,
// rounded to T; x alone when delta is NULL), and the norm reads xout. xout may be x. One block a
// row.
template <typename T>
__device__ void rmsnorm(T *out, T *xout, const T *x, const T *delta, const T *w, int n, float eps) {
    pdl_wait(); // no-op unless launched dependent (enq.launchDep)
    const T *row = x + (size_t)blockIdx.x * n;
    T *xrow = xout + (size_t)blockIdx.x * n;
    const T *drow = delta ? delta + (size_t)blockIdx.x * n : nullptr;
    T *orow = out + (size_t)blockIdx.x * n;
    bool write = drow || xrow != row;
    constexpr int V = 16 / sizeof(T);
    int nv = n / V, bs = blockDim.x;
    if (n % V == 0 && nv <= 4 * bs) {
        // A row of at most 4 chunks a thread, held in registers: every load is issued before
        // the first store (a loop of load-store round trips cost more than the data).
        uint4 xu[4], du[4], wu[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int c = threadIdx.x + j * bs;
            if (c < nv) {
                xu[j] = ((const uint4 *)row)[c];
                if (drow) du[j] = ((const uint4 *)drow)[c];
                wu[j] = ((const uint4 *)w)[c];
            }
        }
        float ss = 0.f;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            if (threadIdx.x + j * bs >= nv) break;
            T *xv = (T *)&xu[j];
            const T *dv = (const T *)&du[j];
#pragma unroll
            for (int e = 0; e < V; e++) {
                float v = ld(xv[e]);
                if (drow) {
                    v = rnd<T>(v + ld(dv[e]));
                    xv[e] = st<T>(v);
                }
                ss += v * v;
            }
        }
        ss = block_sum(ss);
        float inv = rsqrtf(ss / (float)n + eps);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int c = threadIdx.x + j * bs;
            if (c >= nv) break;
            if (write) ((uint4 *)xrow)[c] = xu[j];
            const T *xv = (const T *)&xu[j], *wv = (const T *)&wu[j];
            uint4 o;
            T *ov = (T *)&o;
#pragma unroll
            for (int e = 0; e < V; e++) ov[e] = st<T>(ld(wv[e]) * rnd<T>(ld(xv[e]) * inv));
            ((uint4 *)orow)[c] = o;
        }
        return;
    }
    float ss = 0.f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float v = ld(row[j]);
        if (drow) v = rnd<T>(v + ld(drow[j]));
        if (write) xrow[j] = st<T>(v);
        ss += v * v;
    }
    ss = block_sum(ss);
    float inv = rsqrtf(ss / (float)n + eps);
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float h = rnd<T>(ld(xrow[j]) * inv);
        orow[j] = st<T>(ld(w[j]) * h);
    }
}
extern "C" __global__ void iris_rmsnorm_f32(float *out, float *xout, const float *x, const float *delta, const float *w, int n,
                                            float eps) {
    rmsnorm(out, xout, x, delta, w, n, eps);
}
extern "C" __global__ void iris_rmsnorm_bf16(bf16 *out, bf16 *xout, const bf16 *x, const bf16 *delta, const bf16 *w, int n,
                                             float eps) {
    rmsnorm(out, xout, x, delta, w, n, eps);
}

// nn.LayerNorm (PyTorch's layer_norm kernel: statistics in float, the result cast once):
//   out = (weight * ((x - mean) * rstd) + bias).to(input_dtype), rstd = rsqrt(var + eps)
// with the biased variance, here in two passes over the row (no cancellation of a large mean).
// The residual add before it is fused as in rmsnorm (xout = x + delta rounded to T; xout may be
// x); bias may be NULL. One block a row.
template <typename T>
__device__ void layernorm(T *out, T *xout, const T *x, const T *delta, const T *w, const T *bias, int n, float eps) {
    pdl_wait(); // no-op unless launched dependent (enq.launchDep)
    const T *row = x + (size_t)blockIdx.x * n;
    T *xrow = xout + (size_t)blockIdx.x * n;
    const T *drow = delta ? delta + (size_t)blockIdx.x * n : nullptr;
    T *orow = out + (size_t)blockIdx.x * n;
    bool write = drow || xrow != row;
    constexpr int V = 16 / sizeof(T);
    int nv = n / V, bs = blockDim.x;
    uintptr_t addrs = (uintptr_t)row | (uintptr_t)xrow | (uintptr_t)drow | (uintptr_t)orow | (uintptr_t)w | (uintptr_t)bias;
    if (n % V == 0 && nv <= 4 * bs && addrs % 16 == 0) {
        // rmsnorm's register path: the row (at most 4 chunks a thread) is read once
        uint4 xu[4], du[4], wu[4], bu[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int c = threadIdx.x + j * bs;
            if (c < nv) {
                xu[j] = ((const uint4 *)row)[c];
                if (drow) du[j] = ((const uint4 *)drow)[c];
                wu[j] = ((const uint4 *)w)[c];
                if (bias) bu[j] = ((const uint4 *)bias)[c];
            }
        }
        float s = 0.f;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            if (threadIdx.x + j * bs >= nv) break;
            T *xv = (T *)&xu[j];
            const T *dv = (const T *)&du[j];
#pragma unroll
            for (int e = 0; e < V; e++) {
                float v = ld(xv[e]);
                if (drow) {
                    v = rnd<T>(v + ld(dv[e]));
                    xv[e] = st<T>(v);
                }
                s += v;
            }
        }
        float mean = block_sum(s) / (float)n, q = 0.f;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            if (threadIdx.x + j * bs >= nv) break;
            const T *xv = (const T *)&xu[j];
#pragma unroll
            for (int e = 0; e < V; e++) {
                float d = ld(xv[e]) - mean;
                q += d * d;
            }
        }
        float rstd = rsqrtf(block_sum(q) / (float)n + eps);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int c = threadIdx.x + j * bs;
            if (c >= nv) break;
            if (write) ((uint4 *)xrow)[c] = xu[j];
            const T *xv = (const T *)&xu[j], *wv = (const T *)&wu[j], *bv = (const T *)&bu[j];
            uint4 o;
            T *ov = (T *)&o;
#pragma unroll
            for (int e = 0; e < V; e++) ov[e] = st<T>(ld(wv[e]) * ((ld(xv[e]) - mean) * rstd) + (bias ? ld(bv[e]) : 0.f));
            ((uint4 *)orow)[c] = o;
        }
        return;
    }
    // other widths and alignments: each thread reads back the elements it wrote
    float s = 0.f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float v = ld(row[j]);
        if (drow) v = rnd<T>(v + ld(drow[j]));
        if (write) xrow[j] = st<T>(v);
        s += v;
    }
    float mean = block_sum(s) / (float)n, q = 0.f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float d = ld(xrow[j]) - mean;
        q += d * d;
    }
    float rstd = rsqrtf(block_sum(q) / (float)n + eps);
    for (int j = threadIdx.x; j < n; j += blockDim.x)
        orow[j] = st<T>(ld(w[j]) * ((ld(xrow[j]) - mean) * rstd) + (bias ? ld(bias[j]) : 0.f));
}
#define LAYERNORM_ARGS(T) T *out, T *xout, const T *x, const T *delta, const T *w, const T *bias, int n, float eps
extern "C" __global__ void iris_layernorm_f32(LAYERNORM_ARGS(float)) { layernorm(out, xout, x, delta, w, bias, n, eps); }
extern "C" __global__ void iris_layernorm_bf16(LAYERNORM_ARGS(bf16)) { layernorm(out, xout, x, delta, w, bias, n, eps); }

// A per-head RMSNorm of q or k before RoPE (an RMSNorm module over head_dim, applied to
// q_proj(x).view(..., head_dim)), in place on the heads of every row of x (row stride ldx: q or k
// inside a fused q/k/v matrix), with rmsnorm's roundings: the normalised value rounded to T, then
// weight * it rounded to T. A warp a head and blockDim/32 heads a block (grid.x over heads,
// grid.y over rows): a decode step's few rows are one small launch.
template <typename T> __device__ void head_norm(T *x, int ldx, int rows, int heads, int hd, const T *w, float eps) {
    pdl_wait(); // no-op unless launched dependent (enq.launchDep)
    int lane = threadIdx.x & 31, h = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (h >= heads) return; // the whole warp: its shuffles below stay full
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        T *p = x + (size_t)r * ldx + (size_t)h * hd;
        float ss = 0.f;
        for (int j = lane; j < hd; j += 32) {
            float v = ld(p[j]);
            ss += v * v;
        }
        float inv = rsqrtf(warp_sum(ss) / (float)hd + eps);
        for (int j = lane; j < hd; j += 32) p[j] = st<T>(ld(w[j]) * rnd<T>(ld(p[j]) * inv));
    }
}
extern "C" __global__ void iris_head_norm_f32(float *x, int ldx, int rows, int heads, int hd, const float *w, float eps) {
    head_norm(x, ldx, rows, heads, hd, w, eps);
}
extern "C" __global__ void iris_head_norm_bf16(bf16 *x, int ldx, int rows, int heads, int hd, const bf16 *w, float eps) {
    head_norm(x, ldx, rows, heads, hd, w, eps);
}

// ROWS(r, j, rows, n) walks a rows x n matrix with a 2-D grid: grid.y over rows, grid.x and the
// block over columns. No 64-bit division per element (a flat index split with i / n cost more
// than the memory traffic of these passes).
#define ROWS(r, j, rows, n)                                                  \
    for (int r = blockIdx.y; r < (rows); r += gridDim.y)                     \
        for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < (n); j += gridDim.x * blockDim.x)

// Fills rows x n of out (row stride ld) with the bias b. A following GEMM with beta = 1 then
// rounds acc + b once, as addmm does for nn.Linear with a bias.
template <typename T> __device__ void bias_rows(T *out, const T *b, int rows, int n, int ldo) {
    pdl_wait(); // no-op unless launched dependent (enq.launchDep)
    ROWS(r, j, rows, n) out[(size_t)r * ldo + j] = b[j];
}
extern "C" __global__ void iris_bias_f32(float *out, const float *b, int rows, int n, int ldo) { bias_rows(out, b, rows, n, ldo); }
extern "C" __global__ void iris_bias_bf16(bf16 *out, const bf16 *b, int rows, int n, int ldo) { bias_rows(out, b, rows, n, ldo); }

// A per-column scale (LayerScale: a learned vector times an op's output): column j of each of the
// rows x n of x (row stride ldx) times w[j], the product in F32 rounded once to T (as torch's
// elementwise mul of two T tensors).
template <typename T> __device__ void scale_cols(T *x, const T *w, int rows, int n, int ldx) {
    pdl_wait(); // no-op unless launched dependent (enq.launchDep)
    ROWS(r, j, rows, n) {
        size_t at = (size_t)r * ldx + j;
        x[at] = st<T>(ld(x[at]) * ld(w[j]));
    }
}
extern "C" __global__ void iris_scale_cols_f32(float *x, const float *w, int rows, int n, int ldx) { scale_cols(x, w, rows, n, ldx); }
extern "C" __global__ void iris_scale_cols_bf16(bf16 *x, const bf16 *w, int rows, int n, int ldx) { scale_cols(x, w, rows, n, ldx); }

// silu(x) = x * sigmoid(x) in F32, rounded to T: exact for F32 (the fp32 parity); for bf16 the
// hardware exponential and division, a few F32 ulps off, far under bf16's step (torch computes
// it in F32 and rounds once, as here). The exact forms made the tower's SwiGLU bound by the SM's
// pipes rather than by memory (Nsight Compute on the H200, 2026-12-03; docs/results).
template <typename T> __device__ __forceinline__ float silu(float x) {
    if constexpr (sizeof(T) == 4)
        return rnd<T>(x / (1.0f + expf(-x)));
    else
        return rnd<T>(__fdividef(x, 1.0f + __expf(-x)));
}

// silu_mul_vec is silu_mul (below) over vectors of N values at columns j = N*c: the gate's and
// the output's aligned (2*I and ldo multiples of N), the up half's too when I is a multiple of N,
// else (I a multiple of N/2: the vision MLP's 3,420 in bf16) loaded as two half vectors. A
// vector's values past I are zero (the output's padding columns); the grid covers ldo/N columns.
template <typename T, int N> __device__ __forceinline__ void silu_mul_vec(T *out, const T *gu, int rows, int I, int ldo) {
    struct alignas(N * sizeof(T)) vec { T v[N]; };
    struct alignas(N / 2 * sizeof(T)) half { T v[N / 2]; };
    ROWS(r, c, rows, ldo / N) {
        int j = N * c;
        const T *row = gu + (size_t)r * 2 * I;
        vec o;
        if (j < I) {
            // the gate's vector may run past I into the up half: within the row, then zeroed
            vec g = *(const vec *)(row + j), u;
            if (I % N == 0) {
                u = *(const vec *)(row + I + j);
            } else {
                half lo = *(const half *)(row + I + j), hi = {};
                if (j + N / 2 < I) hi = *(const half *)(row + I + j + N / 2);
#pragma unroll
                for (int e = 0; e < N / 2; e++) u.v[e] = lo.v[e], u.v[N / 2 + e] = hi.v[e];
            }
#pragma unroll
            for (int e = 0; e < N; e++) o.v[e] = st<T>(j + e < I ? silu<T>(ld(g.v[e])) * ld(u.v[e]) : 0.f);
        } else {
#pragma unroll
            for (int e = 0; e < N; e++) o.v[e] = st<T>(0.f);
        }
        *(vec *)(out + (size_t)r * ldo + j) = o;
    }
}

// a gated MLP: self.act_fn(self.gate_proj(x)) * self.up_proj(x), act_fn = silu. gu holds the gate
// and up projections side by side ([rows, 2*I]); out is [rows, I] at row stride ldo >= I, the
// columns past I set to zero (they meet the zero padding of a weight whose row is padded to a
// 16-byte multiple for the tensor cores). silu and the product each round to T.
template <typename T> __device__ void silu_mul(T *out, const T *gu, int rows, int I, int ldo) {
    pdl_wait(); // no-op unless launched dependent (enq.launchDep)
    constexpr int V = 16 / sizeof(T);
    if (I % (V / 2) == 0 && ldo % V == 0) { // 16-byte vectors (the up half's in two 8-byte halves at 3,420 bf16)
        silu_mul_vec<T, V>(out, gu, rows, I, ldo);
        return;
    }
    if (I % 2 == 0 && ldo % 2 == 0) { // pairs
        silu_mul_vec<T, 2>(out, gu, rows, I, ldo);
        return;
    }
    ROWS(r, j, rows, ldo) {
        const T *row = gu + (size_t)r * 2 * I;
        float v = 0.f;
        if (j < I) v = silu<T>(ld(row[j])) * ld(row[I + j]);
        out[(size_t)r * ldo + j] = st<T>(v);
    }
}
extern "C" __global__ void iris_silu_mul_f32(float *out, const float *gu, int rows, int I, int ldo) { silu_mul(out, gu, rows, I, ldo); }
extern "C" __global__ void iris_silu_mul_bf16(bf16 *out, const bf16 *gu, int rows, int I, int ldo) { silu_mul(out, gu, rows, I, ldo); }

// Copies rows x n of in (packed) to out at row stride ldo, zeroing the columns past n: a weight
// padded at load (silu_mul above).
template <typename T> __device__ void pad_rows(T *out, const T *in, int rows, int n, int ldo) {
    pdl_wait(); // no-op unless launched dependent (enq.launchDep)
    ROWS(r, j, rows, ldo) out[(size_t)r * ldo + j] = j < n ? in[(size_t)r * n + j] : st<T>(0.f);
}
extern "C" __global__ void iris_pad_rows_f32(float *out, const float *in, int rows, int n, int ldo) { pad_rows(out, in, rows, n, ldo); }
extern "C" __global__ void iris_pad_rows_bf16(bf16 *out, const bf16 *in, int rows, int n, int ldo) { pad_rows(out, in, rows, n, ldo); }

// nn.GELU() (approximate="none"): x * 0.5 * (1 + erf(x / sqrt(2))); with Tanh, gelu_pytorch_tanh
// (approximate="tanh"), as PyTorch's GeluCUDAKernelImpl writes it:
//   0.5 * x * (1 + tanh(kBeta * (x + kKappa * x^3))), kBeta = sqrt(2/pi), kKappa = 0.044715
// Both in F32, rounded once to T.
template <typename T, bool Tanh> __device__ void gelu(T *x, long n) {
    pdl_wait(); // no-op unless launched dependent (enq.launchDep)
    GRID_STRIDE(i, n) {
        float v = ld(x[i]);
        if (Tanh) {
            float inner = 0.7978845608028654f * (v + 0.044715f * (v * v * v));
            x[i] = st<T>(0.5f * v * (1.0f + tanhf(inner)));
        } else {
            x[i] = st<T>(v * 0.5f * (1.0f + erff(v * 0.70710678118654752f)));
        }
    }
}
extern "C" __global__ void iris_gelu_f32(float *x, long n) { gelu<float, false>(x, n); }
extern "C" __global__ void iris_gelu_bf16(bf16 *x, long n) { gelu<bf16, false>(x, n); }
extern "C" __global__ void iris_gelu_tanh_f32(float *x, long n) { gelu<float, true>(x, n); }
extern "C" __global__ void iris_gelu_tanh_bf16(bf16 *x, long n) { gelu<bf16, true>(x, n); }

// ---------------------------------------------------------------------------------------------
// rotary embeddings

// rope_pair is apply_rotary_pos_emb on one pair (x[f], x[f + half]) of a head with angle (c, s):
// x*cos + rotate_half(x)*sin. once: in F32, rounded to T once (apply_rotary_pos_emb_vision);
// otherwise cos and sin cast to T and each product and the sum rounding to T (a decoder's
// apply_rotary_pos_emb in a bf16 model). Equal in F32.
template <typename T> __device__ __forceinline__ void rope_pair(T &lo, T &hi, float a, float b, float c, float s, int once) {
    if (once) {
        lo = st<T>(__fadd_rn(__fmul_rn(a, c), __fmul_rn(-b, s)));
        hi = st<T>(__fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s)));
    } else {
        c = rnd<T>(c), s = rnd<T>(s);
        lo = st<T>(__fadd_rn(rnd<T>(__fmul_rn(a, c)), rnd<T>(__fmul_rn(-b, s))));
        hi = st<T>(__fadd_rn(rnd<T>(__fmul_rn(b, c)), rnd<T>(__fmul_rn(a, s))));
    }
}

// rope_chunk rotates the 16 bytes of pairs [f, f + V) of the head at src into dst (which may be
// src), every load issued before the first store (the element loop's 2-byte loads and stores:
// rope_kv 10.9 us a 5-prompt prefill layer of the 3B, 9.7 in chunks; docs/gpu.md).
template <typename T>
__device__ __forceinline__ void rope_chunk(T *dst, const T *src, const float *cr, const float *sr, int f, int half, int once) {
    constexpr int V = 16 / sizeof(T);
    uint4 ua = *(const uint4 *)(src + f), ub = *(const uint4 *)(src + f + half);
    float4 c[V / 4], s[V / 4];
#pragma unroll
    for (int u = 0; u < V / 4; u++) c[u] = ((const float4 *)(cr + f))[u], s[u] = ((const float4 *)(sr + f))[u];
    const T *a = (const T *)&ua, *b = (const T *)&ub;
    const float *cf = (const float *)c, *sf = (const float *)s;
    uint4 ulo, uhi;
    T *lo = (T *)&ulo, *hi = (T *)&uhi;
#pragma unroll
    for (int e = 0; e < V; e++) rope_pair(lo[e], hi[e], ld(a[e]), ld(b[e]), cf[e], sf[e], once);
    *(uint4 *)(dst + f) = ulo;
    *(uint4 *)(dst + f + half) = uhi;
}

// rope_vec reports whether rope_chunk serves rows of these pointers and strides (in elements):
// whole 16-byte chunks a half head, every row and angle row 16-byte aligned.
template <typename T> __device__ __forceinline__ bool rope_vec(int half, uintptr_t addrs, long strides) {
    constexpr int V = 16 / sizeof(T);
    return half % V == 0 && addrs % 16 == 0 && strides % 16 == 0;
}

// apply_rotary_pos_emb on the heads of each row of x (row stride ldx; heads hd values apart), one
// block a row, with the row's angles (cos and sin: rd/2 F32 values a row at stride ldc; the
// duplicated halves are implied), rounded as rope_pair says: the first rd dimensions of each head
// rotate, the rest stay (a partial rotary embedding; rd = hd rotates the whole head).
template <typename T>
__device__ void rope_rows(T *x, int ldx, int heads, int hd, int rd, const float *cos, const float *sin, int ldc, int once) {
    pdl_wait(); // no-op unless launched dependent (enq.launchDep)
    int i = blockIdx.x, half = rd / 2;
    const float *cr = cos + (size_t)i * ldc, *sr = sin + (size_t)i * ldc;
    T *row = x + (size_t)i * ldx;
    constexpr int V = 16 / sizeof(T);
    if (rope_vec<T>(half, (uintptr_t)row | (uintptr_t)cr | (uintptr_t)sr, (long)ldx * sizeof(T) | (long)ldc * 4)) {
        int per = half / V;
        for (int t = threadIdx.x; t < heads * per; t += blockDim.x) {
            T *p = row + (size_t)(t / per) * hd;
            rope_chunk(p, p, cr, sr, (t % per) * V, half, once);
        }
        return;
    }
    for (int t = threadIdx.x; t < heads * half; t += blockDim.x) {
        int h = t / half, f = t % half;
        T *p = row + (size_t)h * hd;
        rope_pair(p[f], p[f + half], ld(p[f]), ld(p[f + half]), cr[f], sr[f], once);
    }
}
extern "C" __global__ void iris_rope_rows_f32(float *x, int ldx, int heads, int hd, int rd, const float *cos, const float *sin, int ldc,
                                              int once) {
    rope_rows(x, ldx, heads, hd, rd, cos, sin, ldc, once);
}
extern "C" __global__ void iris_rope_rows_bf16(bf16 *x, int ldx, int heads, int hd, int rd, const float *cos, const float *sin, int ldc,
                                               int once) {
    rope_rows(x, ldx, heads, hd, rd, cos, sin, ldc, once);
}

// The prefill's half of ml.RopeCachedAttention, one block a row: q rotated in place (rope_rows'
// roundings), k rotated into row slots[i] of the key pool and v copied into the value pool's
// (pool rows of kvh*hd values).
template <typename T>
__device__ void rope_kv(T *q, int ldq, const T *k, int ldk, const T *v, int ldv, const float *cos, const float *sin, int ldc, int once,
                        T *kpool, T *vpool, const int *slots, int heads, int kvh, int hd) {
    pdl_wait(); // no-op unless launched dependent (enq.launchDep)
    int i = blockIdx.x, half = hd / 2, kvd = kvh * hd;
    const float *cr = cos + (size_t)i * ldc, *sr = sin + (size_t)i * ldc;
    T *qr = q + (size_t)i * ldq;
    const T *kr = k + (size_t)i * ldk, *vr = v + (size_t)i * ldv;
    T *kw = kpool + (size_t)slots[i] * kvd, *vw = vpool + (size_t)slots[i] * kvd;
    constexpr int V = 16 / sizeof(T);
    uintptr_t addrs = (uintptr_t)qr | (uintptr_t)kr | (uintptr_t)vr | (uintptr_t)kw | (uintptr_t)vw | (uintptr_t)cr | (uintptr_t)sr;
    if (rope_vec<T>(half, addrs, ((long)ldq | ldk | ldv | kvd) * sizeof(T) | (long)ldc * 4)) {
        // the heads' chunks, then v's
        int per = half / V, rot = (heads + kvh) * per;
        for (int t = threadIdx.x; t < rot + kvd / V; t += blockDim.x) {
            if (t >= rot) {
                ((uint4 *)vw)[t - rot] = ((const uint4 *)vr)[t - rot];
                continue;
            }
            int h = t / per, f = (t % per) * V;
            if (h < heads)
                rope_chunk(qr + (size_t)h * hd, qr + (size_t)h * hd, cr, sr, f, half, once);
            else
                rope_chunk(kw + (size_t)(h - heads) * hd, kr + (size_t)(h - heads) * hd, cr, sr, f, half, once);
        }
        return;
    }
    for (int t = threadIdx.x; t < (heads + kvh) * half; t += blockDim.x) {
        int h = t / half, f = t % half;
        const T *src = h < heads ? qr + (size_t)h * hd : kr + (size_t)(h - heads) * hd;
        T *dst = h < heads ? qr + (size_t)h * hd : kw + (size_t)(h - heads) * hd;
        rope_pair(dst[f], dst[f + half], ld(src[f]), ld(src[f + half]), cr[f], sr[f], once);
    }
    for (int j = threadIdx.x; j < kvd; j += blockDim.x) vw[j] = vr[j];
}
#define ROPE_KV_ARGS(T)                                                                                                              \
    T *q, int ldq, const T *k, int ldk, const T *v, int ldv, const float *cos, const float *sin, int ldc, int once, T *kpool, T *vpool, \
        const int *slots, int heads, int kvh, int hd
extern "C" __global__ void iris_rope_kv_f32(ROPE_KV_ARGS(float)) {
    rope_kv(q, ldq, k, ldk, v, ldv, cos, sin, ldc, once, kpool, vpool, slots, heads, kvh, hd);
}
extern "C" __global__ void iris_rope_kv_bf16(ROPE_KV_ARGS(bf16)) {
    rope_kv(q, ldq, k, ldk, v, ldv, cos, sin, ldc, once, kpool, vpool, slots, heads, kvh, hd);
}

// ---------------------------------------------------------------------------------------------
// attention

// Flash-style attention on CUDA cores for packed variable-length segments (the vision tower's
// windows and frames, the decoder's prefill): softmax(q k^T * scale [+ causal mask]) v, never
// materialising the scores.
//   segment s: queries [qseg[s], qseg[s+1]) of q, keys [kseg[s], kseg[s+1]) of k and v;
//   causal: local query i sees local keys j <= i + (nk - nq) (a prefill after `past` cached tokens)
//   GQA: query head h reads kv head h / (heads / kvh)
// grid (query tiles of BQ, heads, segments), 4*BQ threads: 4 threads share a query, each owning
// HD/4 of its dimensions. K and V tiles of BK keys are staged in shared memory as float.
// In bf16 the probabilities multiply V after rounding to bf16, as the flash/efficient SDPA kernels
// do; the softmax itself is F32 (softmax(..., dtype=torch.float32)).
#define ATT_BQ 64
#define ATT_BK 32
template <typename T, int HD>
__device__ void attn_flash(T *out, const T *q, const T *k, const T *v, int ldq, int ldk, int ldv, int ldo,
                           const int *qseg, const int *kseg, int heads, int kvh, int causal, float scale) {
    pdl_wait(); // no-op unless launched dependent (enq.launchDep)
    constexpr int D = HD / 4;
    __shared__ float Ks[ATT_BK][HD];
    __shared__ float Vs[ATT_BK][HD];
    int s = blockIdx.z, h = blockIdx.y;
    int q0 = qseg[s], nq = qseg[s + 1] - q0;
    int k0 = kseg[s], nk = kseg[s + 1] - k0;
    int tile = blockIdx.x * ATT_BQ;
    if (tile >= nq) return;
    int g = h / (heads / kvh);
    int qi = tile + (threadIdx.x >> 2), sub = threadIdx.x & 3;
    bool valid = qi < nq;
    int off = nk - nq;

    float qr[D], acc[D];
    const T *qrow = q + (size_t)(q0 + (valid ? qi : 0)) * ldq + (size_t)h * HD + sub * D;
#pragma unroll
    for (int d = 0; d < D; d++) {
        qr[d] = valid ? ld(qrow[d]) : 0.f;
        acc[d] = 0.f;
    }
    float m = -INFINITY, l = 0.f;
    int kend = nk;
    if (causal) kend = min(nk, tile + ATT_BQ - 1 + off + 1);
    const T *kbase = k + (size_t)k0 * ldk + (size_t)g * HD;
    const T *vbase = v + (size_t)k0 * ldv + (size_t)g * HD;
    for (int kt = 0; kt < kend; kt += ATT_BK) {
        __syncthreads();
        for (int e = threadIdx.x; e < ATT_BK * HD; e += blockDim.x) {
            int j = e / HD, d = e % HD;
            bool in = kt + j < nk;
            Ks[j][d] = in ? ld(kbase[(size_t)(kt + j) * ldk + d]) : 0.f;
            Vs[j][d] = in ? ld(vbase[(size_t)(kt + j) * ldv + d]) : 0.f;
        }
        __syncthreads();
        float sc[ATT_BK];
        float tmax = -INFINITY;
#pragma unroll
        for (int j = 0; j < ATT_BK; j++) {
            float p = 0.f;
#pragma unroll
            for (int d = 0; d < D; d++) p = fmaf(qr[d], Ks[j][sub * D + d], p);
            p += __shfl_xor_sync(0xffffffffu, p, 1);
            p += __shfl_xor_sync(0xffffffffu, p, 2);
            int kj = kt + j;
            bool masked = kj >= nk || (causal && kj > qi + off);
            sc[j] = masked ? -INFINITY : p * scale;
            tmax = fmaxf(tmax, sc[j]);
        }
        float mnew = fmaxf(m, tmax);
        if (mnew == -INFINITY) continue; // every key of the tile masked for this query so far
        float corr = expf(m - mnew);
        l *= corr;
#pragma unroll
        for (int d = 0; d < D; d++) acc[d] *= corr;
#pragma unroll
        for (int j = 0; j < ATT_BK; j++) {
            float p = expf(sc[j] - mnew);
            l += p;
            float pv = rnd<T>(p);
#pragma unroll
            for (int d = 0; d < D; d++) acc[d] = fmaf(pv, Vs[j][sub * D + d], acc[d]);
        }
        m = mnew;
    }
    if (!valid) return;
    T *orow = out + (size_t)(q0 + qi) * ldo + (size_t)h * HD + sub * D;
    float inv = l > 0.f ? 1.0f / l : 0.f;
#pragma unroll
    for (int d = 0; d < D; d++) orow[d] = st<T>(acc[d] * inv);
}

#define ATTN_FLASH(HD)                                                                                               \
    extern "C" __global__ void __launch_bounds__(4 * ATT_BQ) iris_attn_flash_f32_##HD(                              \
        float *out, const float *q, const float *k, const float *v, int ldq, int ldk, int ldv, int ldo,            \
        const int *qseg, const int *kseg, int heads, int kvh, int causal, float scale) {                            \
        attn_flash<float, HD>(out, q, k, v, ldq, ldk, ldv, ldo, qseg, kseg, heads, kvh, causal, scale);             \
    }                                                                                                                \
    extern "C" __global__ void __launch_bounds__(4 * ATT_BQ) iris_attn_flash_bf16_##HD(                             \
        bf16 *out, const bf16 *q, const bf16 *k, const bf16 *v, int ldq, int ldk, int ldv, int ldo,                \
        const int *qseg, const int *kseg, int heads, int kvh, int causal, float scale) {                            \
        attn_flash<bf16, HD>(out, q, k, v, ldq, ldk, ldv, ldo, qseg, kseg, heads, kvh, causal, scale);              \
    }
ATTN_FLASH(8)
ATTN_FLASH(16)
ATTN_FLASH(32)
ATTN_FLASH(64)
ATTN_FLASH(80)
ATTN_FLASH(128)

// Window attention of the vision tower on tensor cores (bf16 only): each segment holds at most
// WIN_MAX rows (a window of 8x8 patches), so one block computes a (segment, head) whole: Q, K
// and V in shared memory, S = Q K^T with WMMA (f32 accumulate), a row softmax in f32 with the
// keys past the segment masked, P = exp(S - max) rounded to bf16 (as attn_flash), O = P V with
// WMMA, and O / sum(exp) rounded once. grid (segments, heads), 4 warps (one 16-row tile each).
// Shared memory: K | S (reused for O) | Q (reused for P) | V.
// With cs (the rope table of iris_rope_vision, N rows) the tiles of Q and K get the tower's 2-D
// RoPE first, with rope_vision's arithmetic (q and k are not read again after the attention, so
// they need not be written back): one launch fewer a window block.
// A thread loads all its 16-byte chunks before it stores any: a loop of load-then-store ran them
// as dependent round trips.
#define WIN_MAX 64
#define WIN_THREADS 128
template <int HD>
__device__ void attn_window(bf16 *out, const bf16 *q, const bf16 *k, const bf16 *v, int ldq, int ldk, int ldv, int ldo,
                            const int *seg, float scale, const float *cs, int N) {
    pdl_wait(); // no-op unless launched dependent (enq.launchDep)
    using namespace nvcuda;
    static_assert(HD % 16 == 0 && HD * 64 * 4 <= HD * 64 * 2 + WIN_MAX * WIN_MAX * 4, "O must fit over K and S");
    // one buffer, carved: O spans K and S, so they must be adjacent; P needs WIN_MAX^2 values
    // where Q was (more than Q when HD < WIN_MAX)
    constexpr int QP = (HD > WIN_MAX ? HD : WIN_MAX) * WIN_MAX * 2;
    __shared__ __align__(32) unsigned char sm[WIN_MAX * HD * 2 * 2 + WIN_MAX * WIN_MAX * 4 + QP];
    __shared__ float rowsum[WIN_MAX];
    bf16 *Ks = (bf16 *)sm;
    float *S = (float *)(sm + WIN_MAX * HD * 2);
    bf16 *Qs = (bf16 *)(sm + WIN_MAX * HD * 2 + WIN_MAX * WIN_MAX * 4);
    bf16 *Vs = (bf16 *)(sm + WIN_MAX * HD * 2 + WIN_MAX * WIN_MAX * 4 + QP);
    float *O = (float *)Ks; // [WIN_MAX][HD] over Ks and S once both are spent
    bf16 *P = Qs;           // [WIN_MAX][WIN_MAX] over Qs once S is computed
    int s = blockIdx.x, h = blockIdx.y;
    int r0 = seg[s], n = seg[s + 1] - r0;
    int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    constexpr int C = HD / 8; // 16-byte chunks a row
    constexpr int PER = WIN_MAX * C / WIN_THREADS;
    static_assert(WIN_MAX * C % WIN_THREADS == 0, "whole chunks a thread");
    uint4 zq[PER], zk[PER], zv[PER];
#pragma unroll
    for (int u = 0; u < PER; u++) {
        int e = tid + u * WIN_THREADS, i = e / C, c = e % C;
        zq[u] = zk[u] = zv[u] = make_uint4(0, 0, 0, 0);
        if (i < n) {
            zq[u] = *(const uint4 *)(q + (size_t)(r0 + i) * ldq + (size_t)h * HD + c * 8);
            zk[u] = *(const uint4 *)(k + (size_t)(r0 + i) * ldk + (size_t)h * HD + c * 8);
            zv[u] = *(const uint4 *)(v + (size_t)(r0 + i) * ldv + (size_t)h * HD + c * 8);
        }
    }
#pragma unroll
    for (int u = 0; u < PER; u++) {
        int e = tid + u * WIN_THREADS, i = e / C, c = e % C;
        *(uint4 *)(Qs + i * HD + c * 8) = zq[u];
        *(uint4 *)(Ks + i * HD + c * 8) = zk[u];
        *(uint4 *)(Vs + i * HD + c * 8) = zv[u];
    }
    __syncthreads();
    if (cs) {
        constexpr int HALF = HD / 2;
        for (int e = tid; e < 2 * n * HALF; e += WIN_THREADS) {
            int i = (e / HALF) % n, f = e % HALF;
            bf16 *x = (e < n * HALF ? Qs : Ks) + i * HD;
            float a = ld(x[f]), b = ld(x[f + HALF]);
            float c = cs[(size_t)(r0 + i) * HALF + f], sn = cs[(size_t)(N + r0 + i) * HALF + f];
            x[f] = __float2bfloat16_rn(__fadd_rn(__fmul_rn(a, c), __fmul_rn(-b, sn)));
            x[f + HALF] = __float2bfloat16_rn(__fadd_rn(__fmul_rn(b, c), __fmul_rn(a, sn)));
        }
        __syncthreads();
    }
    // S = Q K^T: warp w, rows [16w, 16w+16)
    for (int ct = 0; ct < WIN_MAX / 16; ct++) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::fill_fragment(acc, 0.f);
        for (int kt = 0; kt < HD / 16; kt++) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> b;
            wmma::load_matrix_sync(a, Qs + warp * 16 * HD + kt * 16, HD);
            wmma::load_matrix_sync(b, Ks + ct * 16 * HD + kt * 16, HD);
            wmma::mma_sync(acc, a, b, acc);
        }
        wmma::store_matrix_sync(S + warp * 16 * WIN_MAX + ct * 16, acc, WIN_MAX, wmma::mem_row_major);
    }
    __syncthreads(); // every warp's S before P overwrites Q
    // softmax: warp w, its 16 rows; lane covers keys lane and lane + 32
    for (int i = warp * 16; i < warp * 16 + 16; i++) {
        float a = lane < n ? S[i * WIN_MAX + lane] * scale : -INFINITY;
        float b = lane + 32 < n ? S[i * WIN_MAX + lane + 32] * scale : -INFINITY;
        float mx = warp_max(fmaxf(a, b));
        float pa = lane < n ? expf(a - mx) : 0.f, pb = lane + 32 < n ? expf(b - mx) : 0.f;
        float sum = warp_sum(pa + pb);
        P[i * WIN_MAX + lane] = __float2bfloat16_rn(i < n ? pa : 0.f);
        P[i * WIN_MAX + lane + 32] = __float2bfloat16_rn(i < n ? pb : 0.f);
        if (lane == 0) rowsum[i] = sum;
    }
    __syncthreads();
    // O = P V, into the spent K and S
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> o[HD / 16];
    for (int ct = 0; ct < HD / 16; ct++) wmma::fill_fragment(o[ct], 0.f);
    for (int kt = 0; kt < WIN_MAX / 16; kt++) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a;
        wmma::load_matrix_sync(a, P + warp * 16 * WIN_MAX + kt * 16, WIN_MAX);
        for (int ct = 0; ct < HD / 16; ct++) {
            wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> b;
            wmma::load_matrix_sync(b, Vs + kt * 16 * HD + ct * 16, HD);
            wmma::mma_sync(o[ct], a, b, o[ct]);
        }
    }
    __syncthreads(); // S and K are read by no warp any more
    for (int ct = 0; ct < HD / 16; ct++) wmma::store_matrix_sync(O + warp * 16 * HD + ct * 16, o[ct], HD, wmma::mem_row_major);
    __syncthreads();
    for (int e = tid; e < n * HD; e += blockDim.x) {
        int i = e / HD, d = e % HD;
        out[(size_t)(r0 + i) * ldo + (size_t)h * HD + d] = __float2bfloat16_rn(O[i * HD + d] / rowsum[i]);
    }
}
#define ATTN_WINDOW(HD)                                                                                           \
    extern "C" __global__ void __launch_bounds__(WIN_THREADS) iris_attn_window_bf16_##HD(                       \
        bf16 *out, const bf16 *q, const bf16 *k, const bf16 *v, int ldq, int ldk, int ldv, int ldo, const int *seg, \
        float scale, const float *cs, int N) {                                                                    \
        attn_window<HD>(out, q, k, v, ldq, ldk, ldv, ldo, seg, scale, cs, N);                                     \
    }
ATTN_WINDOW(16)
ATTN_WINDOW(32)
ATTN_WINDOW(64)
ATTN_WINDOW(80)

// Flash attention on tensor cores (bf16 only; FlashAttention-2's scheme on mma.sync m16n8k16)
// for the prefill's prompts and the tower's frames: one launch for all of a pass's segments,
// whatever their lengths, without materialising the scores.
//   segment s: seg[4s .. 4s+3] = q0, nq, k0, nk: queries [q0, q0+nq) of q attend keys
//   [k0, k0+nk) of k and v (a sequence's keys in the KV pool, a frame's rows)
//   causal: local query i sees local keys j <= i + (nk - nq) (a chunk after cached tokens)
//   GQA: query head h reads kv head h / (heads / kvh)
// grid (heads, segments, query tiles of MMA_BQ: mmaGrid), 4 warps of 16 query rows. Q's fragments stay in
// registers; K and V tiles of MMA_BK keys come through shared memory by cp.async (V's load
// overlaps the scores); S = Q K^T and O += P V accumulate in f32 on tensor cores; the softmax runs
// online in f32, and P is rounded to bf16 before P V, as attn_flash and the flash SDPA kernels do.
// With cs (the rope table of iris_rope_vision, N rows; frames and windows, whose queries and keys
// are the same rows) the staged tiles of Q and K get the tower's 2-D RoPE first, as in
// attn_window: no rope pass over q and k. The backend passes it for windows of one key tile only
// (a longer frame's blocks would each rotate every key tile again).
#define MMA_BQ 64
#define MMA_BK 64
#define MMA_THREADS 128 // 4 warps of 16 query rows
__device__ __forceinline__ void ldsm_x4(uint32_t r[4], const bf16 *p) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t r[4], const bf16 *p) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
// c += a b for a 16x16 bf16 A (row-major fragment), a 16x8 B (b0, b1), f32 C
__device__ __forceinline__ void mma_16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi); // .x = lo (the lower address)
    return *(uint32_t *)&v;
}
__device__ __forceinline__ void cp_async16(void *dst, const void *src) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(a), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

// mma_hdp is the head dim a tensor-core tile holds: HD rounded up to whole k16 steps (72 -> 80;
// the columns past HD are zeros).
template <int HD> __host__ __device__ constexpr int mma_hdp() { return (HD + 15) / 16 * 16; }
// mma_tile stages rows [r0, r0+MMA_BK) of src (ld values a row, HD of them) into dst (LD a row,
// mma_hdp<HD>() + 8); rows at or past n are zeros (their scores are masked, and 0 x garbage
// could be NaN).
template <int HD>
__device__ __forceinline__ void mma_tile(bf16 *dst, const bf16 *src, int ld, int r0, int n) {
    constexpr int C = HD / 8, LD = mma_hdp<HD>() + 8;
    for (int e = threadIdx.x; e < MMA_BK * C; e += blockDim.x) {
        int i = e / C, c = e % C;
        bf16 *d = dst + i * LD + c * 8;
        if (r0 + i < n)
            cp_async16(d, src + (size_t)(r0 + i) * ld + c * 8);
        else
            *(uint4 *)d = make_uint4(0, 0, 0, 0);
    }
}

// mma_rope rotates rows [0, n) of a staged tile with the tower's 2-D RoPE (rope_vision's
// arithmetic), row i at row r0 + i of cs (N rows of cos, then N of sin, HD/2 values a row), for
// head dims whose table attn_mma does not stage. A thread's cos and sin are loaded in batches of
// B before any is used: a loop of load-then-use ran as PER dependent round trips to L2.
template <int HD>
__device__ __forceinline__ void mma_rope(bf16 *t, int n, int r0, const float *cs, int N) {
    constexpr int LD = HD + 8, HALF = HD / 2;
    constexpr int PER = MMA_BQ * HALF / MMA_THREADS; // values a thread: 16, 20, 32
    constexpr int B = PER % 10 == 0 ? 10 : 8;
    static_assert(MMA_BQ * HALF % MMA_THREADS == 0 && PER % B == 0, "whole batches a thread");
#pragma unroll 1
    for (int u0 = 0; u0 < PER; u0 += B) {
        float c[B], sn[B];
#pragma unroll
        for (int u = 0; u < B; u++) {
            int e = threadIdx.x + (u0 + u) * MMA_THREADS, i = e / HALF, f = e % HALF;
            c[u] = sn[u] = 0.f;
            if (i < n) c[u] = cs[(size_t)(r0 + i) * HALF + f], sn[u] = cs[(size_t)(N + r0 + i) * HALF + f];
        }
#pragma unroll
        for (int u = 0; u < B; u++) {
            int e = threadIdx.x + (u0 + u) * MMA_THREADS, i = e / HALF, f = e % HALF;
            if (i >= n) continue;
            bf16 *x = t + i * LD;
            float a = ld(x[f]), b = ld(x[f + HALF]);
            x[f] = __float2bfloat16_rn(__fadd_rn(__fmul_rn(a, c[u]), __fmul_rn(-b, sn[u])));
            x[f + HALF] = __float2bfloat16_rn(__fadd_rn(__fmul_rn(b, c[u]), __fmul_rn(a, sn[u])));
        }
    }
}

// mma_cs stages rows [r0, r0+n) of cs's cos and of its sin (N rows each, HD/2 values a row) into
// dst, MMA_BQ rows of cos, then MMA_BQ of sin: by cp.async (cs 16-byte aligned), or plainly.
template <int HD>
__device__ __forceinline__ void mma_cs(float *dst, const float *cs, int N, int r0, int n) {
    constexpr int HALF = HD / 2, CH = HALF / 4; // 16-byte chunks a row
    static_assert(HALF % 4 == 0, "whole chunks a row");
    for (int e = threadIdx.x; e < 2 * MMA_BQ * CH; e += MMA_THREADS) {
        int w = e / (MMA_BQ * CH), i = (e / CH) % MMA_BQ, c = e % CH;
        if (i < n) cp_async16(dst + (w * MMA_BQ + i) * HALF + c * 4, cs + ((size_t)w * N + r0 + i) * HALF + c * 4);
    }
}
template <int HD>
__device__ __forceinline__ void mma_cs_plain(float *dst, const float *cs, int N, int r0, int n) {
    constexpr int HALF = HD / 2;
    for (int e = threadIdx.x; e < 2 * MMA_BQ * HALF; e += MMA_THREADS) {
        int w = e / (MMA_BQ * HALF), i = (e / HALF) % MMA_BQ, f = e % HALF;
        if (i < n) dst[(w * MMA_BQ + i) * HALF + f] = cs[((size_t)w * N + r0 + i) * HALF + f];
    }
}

// mma_rope_staged is mma_rope with the rows' cos and sin staged by mma_cs.
template <int HD>
__device__ __forceinline__ void mma_rope_staged(bf16 *t, int n, const float *cst) {
    constexpr int LD = HD + 8, HALF = HD / 2;
    for (int e = threadIdx.x; e < n * HALF; e += MMA_THREADS) {
        int i = e / HALF, f = e % HALF;
        bf16 *x = t + i * LD;
        float a = ld(x[f]), b = ld(x[f + HALF]);
        float c = cst[i * HALF + f], sn = cst[(MMA_BQ + i) * HALF + f];
        x[f] = __float2bfloat16_rn(__fadd_rn(__fmul_rn(a, c), __fmul_rn(-b, sn)));
        x[f + HALF] = __float2bfloat16_rn(__fadd_rn(__fmul_rn(b, c), __fmul_rn(a, sn)));
    }
}

// mma_mask is what attn_mma's masked variants (iris_attn_mma_mask) add to a segment's keys, the
// forms of ml.Mask that the plain kernel does not take:
//   prefix: with causal, every row also sees keys [0, prefix) (ml.Mask.Prefix)
//   lim: when set, local row i of segment s sees keys [0, lim[(q0 + i) * lims]) in place of the
//     causal rule (CachedAttention's per-row key counts: a bidirectional block is rows with one
//     count); lims is the stride (2: the counts of a span table)
//   keys: when set, key j of a segment (k row k0 + j) is seen only if keys[k0 + j] != 0
//     (ml.Mask.Keys); a row that sees none of its keys gets the plain mean of the values it
//     reaches, as the reference's most-negative additive mask gives: a flagged key scores
//     -FLT_MAX, not -inf, so that such a row's scores are all equal
//   rh, rw: a decomposed relative-position bias (ml.Mask.RelPos) added to the scaled scores,
//     rows those of the op's queries: rh[r*ldh + h*gh + j/gw] + rw[r*ldw + h*gw + j%gw], the two
//     summed and rounded to bf16 first (the reference's rel_h + rel_w in the model's dtype)
struct mma_mask {
    int prefix;
    const int *lim;
    int lims;
    const int *keys;
    const bf16 *rh, *rw;
    int ldh, ldw, gh, gw;
};

// attn_mma: see the comment above MMA_BQ. HD is the head dim (a multiple of 8; tiles hold it
// rounded up to whole k16 steps, the padding zeros); MASK compiles mma_mask in (the plain
// kernel's code is unchanged without it).
template <int HD, bool MASK>
__device__ void attn_mma(bf16 *out, const bf16 *q, const bf16 *k, const bf16 *v, int ldq, int ldk, int ldv, int ldo,
                         const int *seg, int heads, int kvh, int causal, float scale, const float *cs, int N, mma_mask mk) {
    pdl_wait(); // no-op unless launched dependent (enq.launchDep)
    constexpr int HDP = mma_hdp<HD>();
    static_assert(HD % 8 == 0, "whole 16-byte chunks a row");
    static_assert(MMA_BQ == MMA_BK, "the query tile is staged as a key tile");
    constexpr int LD = HDP + 8; // padded rows: ldmatrix's eight 16-byte rows fall in distinct banks
    constexpr int NT = MMA_BK / 8; // 8-key tiles of S
    // RoPE inside the kernel: whole k16 head dims of the plain kernel only (the backend rotates
    // first otherwise). The tower's head dims (64, 80) stage the query tile's cos/sin rows too
    // (20 KB at 80: 43 KB in all, under the 48 KB of static shared memory; 128 would need 67)
    constexpr bool ROPE = !MASK && HD == HDP;
    constexpr bool STAGE = ROPE && HD <= 80;
    __shared__ __align__(16) bf16 Ks[MMA_BK * LD];
    __shared__ __align__(16) bf16 Vs[MMA_BK * LD];
    __shared__ __align__(16) float CSs[STAGE ? MMA_BQ * HD : 4];
    __shared__ int kmax; // the last key a tile's rows reach, with per-row limits
    // grid (heads, segments, query tiles), the tiles slowest: blocks start in index order, so a
    // causal pass issues its longest tiles (the last, with the most keys) first and the short
    // ones fill the tail (tiles first had left the last-issued long blocks as the tail: 1.2 waves)
    int h = blockIdx.x, s = blockIdx.y;
    int q0 = seg[4 * s], nq = seg[4 * s + 1], k0 = seg[4 * s + 2], nk = seg[4 * s + 3];
    int tile = (causal ? gridDim.z - 1 - blockIdx.z : blockIdx.z) * MMA_BQ;
    if (tile >= nq) return;
    int g = h / (heads / kvh);
    int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    int off = nk - nq;
    const bf16 *qb = q + (size_t)q0 * ldq + (size_t)h * HD;
    const bf16 *kb = k + (size_t)k0 * ldk + (size_t)g * HD;
    const bf16 *vb = v + (size_t)k0 * ldv + (size_t)g * HD;
    if (!ROPE) cs = nullptr;

    // this thread's rows of the warp's 16: r = 0 (lane / 4) and r = 1 (lane / 4 + 8)
    int qi[2] = {tile + warp * 16 + (lane >> 2), tile + warp * 16 + (lane >> 2) + 8};
    int nqt = min(MMA_BQ, nq - tile);
    int kend = causal ? min(nk, tile + MMA_BQ + off) : nk;
    int hi[2] = {nk, nk}; // MASK: the rows see keys [0, hi) before key flags
    if constexpr (MASK) {
#pragma unroll
        for (int r = 0; r < 2; r++) {
            int i = qi[r];
            if (mk.lim)
                hi[r] = i < nq ? max(0, min(nk, mk.lim[(size_t)(q0 + i) * mk.lims])) : 0;
            else if (causal)
                hi[r] = min(nk, max(mk.prefix, i + off + 1));
        }
        if (mk.lim) {
            if (tid == 0) kmax = 0;
            __syncthreads();
            atomicMax(&kmax, max(hi[0], hi[1]));
            __syncthreads();
            kend = kmax;
        } else if (causal) {
            kend = min(nk, max(mk.prefix, tile + MMA_BQ + off));
        }
    }
    if constexpr (HD != HDP) { // the padding columns: zeros for good (the tiles never write them)
        for (int e = tid; e < 2 * MMA_BK; e += MMA_THREADS) {
            bf16 *t = (e < MMA_BK ? Ks : Vs) + (e % MMA_BK) * LD + HD;
#pragma unroll
            for (int c = 0; c < (HDP - HD) / 8; c++) *(uint4 *)(t + 8 * c) = make_uint4(0, 0, 0, 0);
        }
    }

    // The query tile through Vs into A fragments (warp w holds rows [16w, 16w+16)), with the
    // tower's RoPE its rows' cos and sin, and behind them the first key tile into Ks: all by
    // cp.async before any is waited for (loops of load-use ran as dependent round trips to L2,
    // most of a window's time).
    bool async_cs = STAGE && cs && ((uintptr_t)cs & 15) == 0;
    // a window's (a frame's) first key tile is its query tile's rows: the staged cos/sin serve it
    bool kstaged = k0 == q0 + tile && min(MMA_BK, nk) <= nqt;
    mma_tile<HD>(Vs, qb, ldq, tile, nq);
    if constexpr (STAGE) {
        if (async_cs) mma_cs<HD>(CSs, cs, N, q0 + tile, nqt);
    }
    cp_async_commit();
    if (kend > 0) mma_tile<HD>(Ks, kb, ldk, 0, nk);
    cp_async_commit();
    if constexpr (STAGE) {
        if (cs && !async_cs) mma_cs_plain<HD>(CSs, cs, N, q0 + tile, nqt);
    }
    cp_async_wait<1>(); // the query tile and its cos/sin
    __syncthreads();
    if constexpr (ROPE) {
        if (cs) {
            if constexpr (STAGE)
                mma_rope_staged<HD>(Vs, nqt, CSs);
            else
                mma_rope<HD>(Vs, nqt, q0 + tile, cs, N);
            __syncthreads();
        }
    }
    uint32_t qf[HDP / 16][4];
#pragma unroll
    for (int kk = 0; kk < HDP / 16; kk++) ldsm_x4(qf[kk], Vs + (warp * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8);
    __syncthreads();

    float o[HDP / 8][4];
#pragma unroll
    for (int n = 0; n < HDP / 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    const float sl2 = scale * 1.4426950408889634f; // exp(x) = exp2(x log2 e)
    for (int kt = 0; kt < kend; kt += MMA_BK) {
        if (kt > 0) mma_tile<HD>(Ks, kb, ldk, kt, nk); // the first is on its way
        cp_async_commit();
        mma_tile<HD>(Vs, vb, ldv, kt, nk);
        cp_async_commit();
        cp_async_wait<1>(); // K
        __syncthreads();
        if constexpr (ROPE) {
            if (cs) {
                int nkt = min(MMA_BK, nk - kt);
                if constexpr (STAGE) {
                    if (kt > 0 || !kstaged) { // rows the query tile's cos/sin do not hold (the backend sends none)
                        mma_cs_plain<HD>(CSs, cs, N, k0 + kt, nkt);
                        __syncthreads();
                    }
                    mma_rope_staged<HD>(Ks, nkt, CSs);
                } else {
                    mma_rope<HD>(Ks, nkt, k0 + kt, cs, N);
                }
                __syncthreads();
            }
        }
        float sc[NT][4];
#pragma unroll
        for (int n = 0; n < NT; n++) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < HDP / 16; kk++) {
#pragma unroll
            for (int n2 = 0; n2 < NT / 2; n2++) {
                uint32_t b[4]; // keys [16 n2, +8) then [+8, +16); dims [16 kk, +8) then [+8, +16)
                ldsm_x4(b, Ks + (n2 * 16 + (lane & 7) + ((lane >> 4) << 3)) * LD + kk * 16 + ((lane >> 3) & 1) * 8);
                mma_16816(sc[2 * n2], qf[kk], b[0], b[1]);
                mma_16816(sc[2 * n2 + 1], qf[kk], b[2], b[3]);
            }
        }
        // mask, and the rows' new maxima (a row's values sit in the four lanes of a quad)
        float mx[2] = {m[0], m[1]};
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int key = kt + n * 8 + 2 * (lane & 3) + (e & 1), r = e >> 1;
                if constexpr (MASK) {
                    float x = sc[n][e] * sl2;
                    if (key >= hi[r])
                        x = -INFINITY;
                    else if (mk.keys && mk.keys[k0 + key] == 0)
                        x = -FLT_MAX;
                    else if (mk.rh && qi[r] < nq) {
                        size_t row = (size_t)(q0 + qi[r]);
                        float bias = ld(mk.rh[row * mk.ldh + h * mk.gh + key / mk.gw]) + ld(mk.rw[row * mk.ldw + h * mk.gw + key % mk.gw]);
                        x += rnd<bf16>(bias) * 1.4426950408889634f;
                    }
                    sc[n][e] = x;
                } else {
                    bool masked = key >= nk || (causal && key > qi[r] + off);
                    sc[n][e] = masked ? -INFINITY : sc[n][e] * sl2;
                }
                mx[r] = fmaxf(mx[r], sc[n][e]);
            }
        float corr[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            corr[r] = mx[r] == -INFINITY ? 1.f : exp2f(m[r] - mx[r]);
            m[r] = mx[r];
            l[r] *= corr[r];
        }
#pragma unroll
        for (int n = 0; n < HDP / 8; n++) o[n][0] *= corr[0], o[n][1] *= corr[0], o[n][2] *= corr[1], o[n][3] *= corr[1];
        uint32_t pf[MMA_BK / 16][4]; // P as A fragments: the C layout of two 8-key tiles is A's
#pragma unroll
        for (int n = 0; n < NT; n++) {
            float p[4];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int r = e >> 1;
                p[e] = m[r] == -INFINITY ? 0.f : exp2f(sc[n][e] - m[r]);
                l[r] += p[e];
            }
            pf[n / 2][(n & 1) * 2] = pack_bf16(p[0], p[1]);
            pf[n / 2][(n & 1) * 2 + 1] = pack_bf16(p[2], p[3]);
        }
        cp_async_wait<0>(); // V
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < MMA_BK / 16; kk++) {
#pragma unroll
            for (int d2 = 0; d2 < HDP / 16; d2++) {
                uint32_t b[4]; // keys [16 kk, +16) transposed; dims [16 d2, +8) then [+8, +16)
                ldsm_x4_t(b, Vs + (kk * 16 + (lane & 15)) * LD + d2 * 16 + (lane >> 4) * 8);
                mma_16816(o[2 * d2], pf[kk], b[0], b[1]);
                mma_16816(o[2 * d2 + 1], pf[kk], b[2], b[3]);
            }
        }
        __syncthreads(); // every warp is done with Ks and Vs before the next tile
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        if (qi[r] >= nq) continue;
        float inv = l[r] > 0.f ? 1.0f / l[r] : 0.f;
        bf16 *orow = out + (size_t)(q0 + qi[r]) * ldo + (size_t)h * HD + 2 * (lane & 3);
#pragma unroll
        for (int n = 0; n < HD / 8; n++) *(uint32_t *)(orow + n * 8) = pack_bf16(o[n][2 * r] * inv, o[n][2 * r + 1] * inv);
    }
}
#define ATTN_MMA(HD)                                                                                                   \
    extern "C" __global__ void __launch_bounds__(MMA_THREADS) iris_attn_mma_bf16_##HD(                                 \
        bf16 *out, const bf16 *q, const bf16 *k, const bf16 *v, int ldq, int ldk, int ldv, int ldo, const int *seg,   \
        int heads, int kvh, int causal, float scale, const float *cs, int N) {                                         \
        attn_mma<HD, false>(out, q, k, v, ldq, ldk, ldv, ldo, seg, heads, kvh, causal, scale, cs, N, mma_mask{});     \
    }                                                                                                                  \
    extern "C" __global__ void __launch_bounds__(MMA_THREADS) iris_attn_mma_mask_bf16_##HD(                            \
        bf16 *out, const bf16 *q, const bf16 *k, const bf16 *v, int ldq, int ldk, int ldv, int ldo, const int *seg,   \
        int heads, int kvh, int causal, float scale, int prefix, const int *lim, int lims, const int *keys,            \
        const bf16 *rh, const bf16 *rw, int ldh, int ldw, int gh, int gw) {                                            \
        attn_mma<HD, true>(out, q, k, v, ldq, ldk, ldv, ldo, seg, heads, kvh, causal, scale, nullptr, 0,               \
                           mma_mask{prefix, lim, lims, keys, rh, rw, ldh, ldw, gh, gw});                               \
    }
ATTN_MMA(64)
ATTN_MMA(72)
ATTN_MMA(80)
ATTN_MMA(128)

// Row softmax for attention through cuBLAS (long segments): S [rows, nk] F32 scores (already
// scaled), row r being query i = r % nq of head head0 + r / nq; causal masks keys j > i + (nk - nq)
// past the first prefix keys (ml.Mask.Prefix: keys [0, prefix) seen by every query); keys, when
// not null, flags each key (ml.Mask.Keys): one flagged 0 gets probability 0, and a row that sees
// no key at all the plain mean over its keys (the reference's most-negative additive mask); rh
// and rw, when not null, are a decomposed relative-position bias (ml.Mask.RelPos) added to the
// scores: rh[i*ldh + h*gh + j/gw] + rw[i*ldw + h*gw + j%gw], the two summed first. P [rows, nk]
// gets the probabilities in T. One block a row.
template <typename T> struct rel_bias {
    const T *h, *w; // in the activation type, as the reference's rel_h and rel_w
    int ldh, ldw, gh, gw, head0;
};
template <typename T> __device__ __forceinline__ float rel_score(const float *srow, int j, const rel_bias<T> &rb, int i, int h) {
    float s = srow[j];
    if (rb.h) s += rnd<T>(ld(rb.h[(size_t)i * rb.ldh + h * rb.gh + j / rb.gw]) + ld(rb.w[(size_t)i * rb.ldw + h * rb.gw + j % rb.gw]));
    return s;
}
template <typename T>
__device__ void softmax_rows(T *P, const float *S, int nq, int nk, int causal, const int *keys, int prefix, rel_bias<T> rb) {
    pdl_wait(); // no-op unless launched dependent (enq.launchDep)
    long r = blockIdx.x;
    int i = (int)(r % nq), h = rb.head0 + (int)(r / nq);
    const float *srow = S + r * nk;
    T *prow = P + r * nk;
    int lim = causal ? max(i + (nk - nq), prefix - 1) : nk - 1;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j <= lim && j < nk; j += blockDim.x)
        if (!keys || keys[j]) mx = fmaxf(mx, rel_score(srow, j, rb, i, h));
    mx = block_max(mx);
    if (mx == -INFINITY) { // every key masked
        float u = 1.0f / (float)(min(lim, nk - 1) + 1);
        for (int j = threadIdx.x; j < nk; j += blockDim.x) prow[j] = st<T>(j <= lim ? u : 0.f);
        return;
    }
    float sum = 0.f;
    for (int j = threadIdx.x; j <= lim && j < nk; j += blockDim.x)
        if (!keys || keys[j]) sum += expf(rel_score(srow, j, rb, i, h) - mx);
    sum = block_sum(sum);
    float inv = 1.0f / sum;
    for (int j = threadIdx.x; j < nk; j += blockDim.x)
        prow[j] = st<T>(j <= lim && (!keys || keys[j]) ? expf(rel_score(srow, j, rb, i, h) - mx) * inv : 0.f);
}
#define SOFTMAX_ARGS(T)                                                                                               \
    T *P, const float *S, int nq, int nk, int causal, const int *keys, int prefix, const T *rh, const T *rw, int ldh, \
        int ldw, int gh, int gw, int head0
extern "C" __global__ void iris_softmax_f32(SOFTMAX_ARGS(float)) {
    softmax_rows(P, S, nq, nk, causal, keys, prefix, rel_bias<float>{rh, rw, ldh, ldw, gh, gw, head0});
}
extern "C" __global__ void iris_softmax_bf16(SOFTMAX_ARGS(bf16)) {
    softmax_rows(P, S, nq, nk, causal, keys, prefix, rel_bias<bf16>{rh, rw, ldh, ldw, gh, gw, head0});
}

// Decode attention over a KV pool for a batch of new tokens, one a sequence, fused with their
// rotary embedding and KV-pool write (ml.RopeCachedAttention) and with the merge of the key splits
// (flash-decoding). Latency, not bandwidth, bounds it (a few hundred keys), so every phase issues
// all its loads at once:
//   grid (heads, splits, rows), DEC_THREADS threads; block (h, sp, r) serves query head h of
//   batch row r over keys [sp*DEC_SK, (sp+1)*DEC_SK) of the row's L keys, pool rows [start,
//   start+L) (spans[2r], spans[2r+1]); the new token's key is the last, written to pool row
//   slots[r] = start+L-1. Splits past the end return at once, so one captured graph serves every
//   cache length up to splits*DEC_SK.
//   A. q of head h (and the new key) normalised over the head when qnw (knw) is set, as head_norm
//      (a per-head q/k norm); cos/sin of the row (rounded to T, as rope_rows); q of head h
//      rotated with rope_rows' roundings; the split holding the new token also rotates the new key and keeps it and the
//      new value in shared memory, and the first head of each KV group writes them to the pool
//      (the other heads never read that row from memory, so there is no race);
//   B. scores, four threads a key, 16-byte loads;
//   C. softmax statistics of the split, p rounded to T before p*v (as the flash SDPA kernels);
//   D. p*v, threads over (key group, 16 bytes of dimensions), summed over key groups in shared
//      memory; the split writes its max, sum and unnormalised output to part [rows, heads,
//      splits, hd + 2];
//   E. the last split of (row, head) to finish (a ticket each, reset by it for the next step)
//      merges: out[r, h] = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s.
// Needs hd <= 256 and hd a multiple of 8, and 16-byte aligned rows. Four blocks an SM (64
// registers, no spills; 71 unbounded let three fit): a decode step of 54 rows launches 3,456
// blocks, so the blocks resident at once set its time.
#define DEC_SK 64
#define DEC_THREADS 256
// split_merge is flash-decoding's merge of dimension d over a head's nact key splits, ph its
// [splits, hd + 2] partials (unnormalised output, max, sum), read past L1 (other blocks wrote
// them): sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s.
__device__ __forceinline__ float split_merge(const float *ph, int nact, int hd, int d) {
    float M = -INFINITY;
#pragma unroll 8
    for (int s = 0; s < nact; s++) M = fmaxf(M, __ldcg(ph + (size_t)s * (hd + 2) + hd));
    float num = 0.f, den = 0.f;
#pragma unroll 8
    for (int s = 0; s < nact; s++) {
        const float *ps = ph + (size_t)s * (hd + 2);
        float w = expf(__ldcg(ps + hd) - M);
        num += w * __ldcg(ps + d);
        den += w * __ldcg(ps + hd + 1);
    }
    return num / den;
}
template <typename T>
__device__ void attn_pool(T *out, int ldo, float *part, int *ticket, const T *qm, int ldq, const T *km, int ldk, const T *vm,
                          int ldv, const float *cos, const float *sin, int ldc, T *kpool, T *vpool, const int *slots,
                          const int *spans, int heads, int kvh, int hd, float scale, const T *qnw, const T *knw,
                          float eps) {
    constexpr int V = 16 / sizeof(T); // values per 16-byte load
    __shared__ float qs[256], kn[256], vn[256], sc[DEC_SK];
    __shared__ float red[DEC_THREADS * 8]; // D's key-group partial sums: G*hd = blockDim*V values
    static_assert(DEC_THREADS == 4 * DEC_SK, "B: four threads a key");
    __shared__ int last;
    int h = blockIdx.x, sp = blockIdx.y, splits = gridDim.y, br = blockIdx.z;
    int tid = threadIdx.x;
    int start = spans[2 * br], L = spans[2 * br + 1], slot = slots[br]; // written before the graph's first kernel
    pdl_wait(); // q, k and v come from the previous kernel
    pdl_launch();
    int j0 = sp * DEC_SK;
    if (j0 >= L) return;
    int j1 = min(L, j0 + DEC_SK), n = j1 - j0, nact = (L + DEC_SK - 1) / DEC_SK;
    int r = heads / kvh, g = h / r, half = hd / 2, kvd = kvh * hd;
    bool has_new = L - 1 < j1;
    const T *kc = kpool + (size_t)start * kvd + (size_t)g * hd;
    const T *vc = vpool + (size_t)start * kvd + (size_t)g * hd;
    part += (size_t)br * heads * splits * (hd + 2);
    ticket += (size_t)br * heads;
    out += (size_t)br * ldo;

    // A
    int f = tid;
    float qa = 0.f, qb = 0.f, ka = 0.f, kb = 0.f, va = 0.f, vb = 0.f;
    if (tid < half) {
        const T *qr = qm + (size_t)br * ldq + (size_t)h * hd, *kr = km + (size_t)br * ldk + (size_t)g * hd,
                *vr = vm + (size_t)br * ldv + (size_t)g * hd;
        qa = ld(qr[f]), qb = ld(qr[f + half]);
        if (has_new) ka = ld(kr[f]), kb = ld(kr[f + half]), va = ld(vr[f]), vb = ld(vr[f + half]);
    }
    if (qnw) { // the same for every thread of the block: block_sum's barriers are safe
        float inv = rsqrtf(block_sum(qa * qa + qb * qb) / (float)hd + eps);
        if (tid < half) qa = rnd<T>(ld(qnw[f]) * rnd<T>(qa * inv)), qb = rnd<T>(ld(qnw[f + half]) * rnd<T>(qb * inv));
    }
    if (knw && has_new) {
        float inv = rsqrtf(block_sum(ka * ka + kb * kb) / (float)hd + eps);
        if (tid < half) ka = rnd<T>(ld(knw[f]) * rnd<T>(ka * inv)), kb = rnd<T>(ld(knw[f + half]) * rnd<T>(kb * inv));
    }
    if (tid < half) {
        float c = rnd<T>(cos[(size_t)br * ldc + f]), s = rnd<T>(sin[(size_t)br * ldc + f]);
        qs[f] = rnd<T>(__fadd_rn(rnd<T>(__fmul_rn(qa, c)), rnd<T>(__fmul_rn(-qb, s))));
        qs[f + half] = rnd<T>(__fadd_rn(rnd<T>(__fmul_rn(qb, c)), rnd<T>(__fmul_rn(qa, s))));
        if (has_new) {
            float lo = rnd<T>(__fadd_rn(rnd<T>(__fmul_rn(ka, c)), rnd<T>(__fmul_rn(-kb, s))));
            float hi = rnd<T>(__fadd_rn(rnd<T>(__fmul_rn(kb, c)), rnd<T>(__fmul_rn(ka, s))));
            kn[f] = lo, kn[f + half] = hi, vn[f] = va, vn[f + half] = vb;
            if (h % r == 0) {
                T *kw = kpool + (size_t)slot * kvd + (size_t)g * hd;
                T *vw = vpool + (size_t)slot * kvd + (size_t)g * hd;
                kw[f] = st<T>(lo), kw[f + half] = st<T>(hi);
                vw[f] = st<T>(va), vw[f + half] = st<T>(vb);
            }
        }
    }
    __syncthreads();

    // B: thread (key kk, quarter qq) covers the 16-byte chunks qq, qq+4, ... of the key's row
    int nch = hd / V;
    {
        int kk = tid >> 2, qq = tid & 3;
        float acc = 0.f;
        if (kk < n) {
            int j = j0 + kk;
            if (j == L - 1) {
                for (int c = qq; c < nch; c += 4)
#pragma unroll
                    for (int e = 0; e < V; e++) acc = fmaf(qs[c * V + e], kn[c * V + e], acc);
            } else {
                const uint4 *row = (const uint4 *)(kc + (size_t)j * kvd);
                uint4 w[8];
#pragma unroll
                for (int i = 0; i < 8; i++)
                    if (qq + 4 * i < nch) w[i] = row[qq + 4 * i];
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    int c = qq + 4 * i;
                    if (c < nch) {
                        const T *wv = (const T *)&w[i];
#pragma unroll
                        for (int e = 0; e < V; e++) acc = fmaf(qs[c * V + e], ld(wv[e]), acc);
                    }
                }
                for (int c = qq + 32; c < nch; c += 4) { // f32 rows past 128 dims
                    uint4 u = row[c];
                    const T *wv = (const T *)&u;
#pragma unroll
                    for (int e = 0; e < V; e++) acc = fmaf(qs[c * V + e], ld(wv[e]), acc);
                }
            }
        }
        acc += __shfl_xor_sync(0xffffffffu, acc, 1);
        acc += __shfl_xor_sync(0xffffffffu, acc, 2);
        if (qq == 0 && kk < DEC_SK) sc[kk] = kk < n ? acc * scale : -INFINITY;
    }
    __syncthreads();

    // C: one warp
    float mx = -INFINITY, sum = 0.f;
    if (tid < 32) {
        for (int kk = tid; kk < n; kk += 32) mx = fmaxf(mx, sc[kk]);
        mx = warp_max(mx);
        for (int kk = tid; kk < n; kk += 32) {
            float p = expf(sc[kk] - mx);
            sum += p;
            sc[kk] = rnd<T>(p);
        }
        sum = warp_sum(sum);
    }
    __syncthreads();

    // D: thread (key group kg, chunk c); groups stride over the keys
    {
        int c = tid % nch, kg = tid / nch, G = blockDim.x / nch;
        float acc[V];
#pragma unroll
        for (int e = 0; e < V; e++) acc[e] = 0.f;
        if (kg < G) {
            int kmax = (n + G - 1) / G;
            for (int b0 = 0; b0 < kmax; b0 += 4) {
                uint4 w[4];
                float p[4];
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    int kk = kg + G * (b0 + i);
                    p[i] = 0.f;
                    if (b0 + i < kmax && kk < n) {
                        p[i] = sc[kk];
                        if (j0 + kk != L - 1) w[i] = ((const uint4 *)(vc + (size_t)(j0 + kk) * kvd))[c];
                    }
                }
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    int kk = kg + G * (b0 + i);
                    if (b0 + i < kmax && kk < n) {
                        if (j0 + kk == L - 1) {
#pragma unroll
                            for (int e = 0; e < V; e++) acc[e] = fmaf(p[i], vn[c * V + e], acc[e]);
                        } else {
                            const T *wv = (const T *)&w[i];
#pragma unroll
                            for (int e = 0; e < V; e++) acc[e] = fmaf(p[i], ld(wv[e]), acc[e]);
                        }
                    }
                }
            }
        }
        // sum over the key groups
        float *rd = red;
        if (kg < G) {
#pragma unroll
            for (int e = 0; e < V; e++) rd[kg * hd + c * V + e] = acc[e];
        }
        __syncthreads();
        float *pp = part + ((size_t)h * splits + sp) * (hd + 2);
        for (int d = tid; d < hd; d += blockDim.x) {
            float a = 0.f;
            for (int q = 0; q < G; q++) a += rd[q * hd + d];
            pp[d] = a;
        }
        if (tid == 0) {
            pp[hd] = mx;
            pp[hd + 1] = sum;
        }
    }

    // E
    __threadfence();
    __syncthreads();
    if (tid == 0) last = atomicAdd(ticket + h, 1) == nact - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    const float *ph = part + (size_t)h * splits * (hd + 2);
    for (int d = tid; d < hd; d += blockDim.x) out[(size_t)h * hd + d] = st<T>(split_merge(ph, nact, hd, d));
    if (tid == 0) ticket[h] = 0;
}
#define ATTN_POOL_ARGS(T)                                                                                                          \
    T *out, int ldo, float *part, int *ticket, const T *q, int ldq, const T *k, int ldk, const T *v, int ldv, const float *cos,     \
        const float *sin, int ldc, T *kpool, T *vpool, const int *slots, const int *spans, int heads, int kvh, int hd, float scale, \
        const T *qnw, const T *knw, float eps
extern "C" __global__ void __launch_bounds__(DEC_THREADS, 4) iris_attn_pool_f32(ATTN_POOL_ARGS(float)) {
    attn_pool(out, ldo, part, ticket, q, ldq, k, ldk, v, ldv, cos, sin, ldc, kpool, vpool, slots, spans, heads, kvh, hd, scale, qnw,
              knw, eps);
}
extern "C" __global__ void __launch_bounds__(DEC_THREADS, 4) iris_attn_pool_bf16(ATTN_POOL_ARGS(bf16)) {
    attn_pool(out, ldo, part, ticket, q, ldq, k, ldk, v, ldv, cos, sin, ldc, kpool, vpool, slots, spans, heads, kvh, hd, scale, qnw,
              knw, eps);
}


// Decode attention with one block a KV group (bf16; ml.RopeCachedAttention's decode rows, as
// attn_pool, whose block serves one query head), its products on tensor cores: the group's
// R = heads / kvh <= 16 query heads are the rows of one m16n8k16 tile. The split's keys and values
// are staged once for the group's heads (attn_pool read them R times: 3,456 blocks of a 54-row
// step of the 3B became 432).
//   grid (kvh, splits, rows), DEC_THREADS threads (8 warps);
//   A. the split's keys and values staged (16-byte loads, all issued before any store; rows past
//      the split's keys zeros); q of each head normalised (qnw) and rotated with attn_pool's
//      roundings into the tile's rows (rows past R zeros); the split holding the new token
//      normalises and rotates its key, writes key and value to the pool and into the tile;
//   B. scores: warp w the 16 rows' keys 8w..8w+7, HD/16 products, scaled and masked;
//   C. softmax statistics, a warp two heads, p rounded to bf16; the split's max and sum to part
//      [rows, heads, splits, HD + 2];
//   D. p*v: warp w dimensions 16w..16w+15 (at head dim 64 warps 0-3), four products; the
//      split's unnormalised output to part;
//   E. the last split of (row, group) to finish (a ticket each, reset by it) merges the group's
//      heads as attn_pool does.
// On CUDA cores (a warp a head over all 64 keys, chains of dependent FMAs) a 54-row step of the
// 3B took 30 us a layer for ~11 MB of keys and values (Nsight Compute); on tensor cores the step
// is 3.32 ms against 3.74 (H200, 2026-12-03; docs/results). The scores accumulate in the tensor
// cores' order, not key by key.
#define GQA_MAX 16
__device__ __forceinline__ void ldsm_x2(uint32_t r[2], const bf16 *p) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(a));
}
// gqa_rotate: the group g's R query heads of batch row br, normalised by qnw (when given) and
// rotated with attn_pool's roundings, into Qs's rows (a warp a head); with kt, the last warp
// rotates the new key (knw first) and writes it and its value to the pool's slot and to the tile
// rows kt and vt (iris_attn_pool_gqa and iris_attn_pool_gqa_whole).
template <int HD>
__device__ __forceinline__ void gqa_rotate(bf16 *Qs, int LD, bf16 *kt, bf16 *vt, int g, int R, int br, const bf16 *qm, int ldq,
                                           const bf16 *km, int ldk, const bf16 *vm, int ldv, const float *cos, const float *sin,
                                           int ldc, bf16 *kpool, bf16 *vpool, int slot, int kvd, const bf16 *qnw, const bf16 *knw,
                                           float eps) {
    constexpr int HALF = HD / 2, NW = DEC_THREADS / 32;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float c0 = rnd<bf16>(cos[(size_t)br * ldc + lane]), s0 = rnd<bf16>(sin[(size_t)br * ldc + lane]);
    float c1 = 0.f, s1 = 0.f;
    if (HALF > 32) c1 = rnd<bf16>(cos[(size_t)br * ldc + lane + 32]), s1 = rnd<bf16>(sin[(size_t)br * ldc + lane + 32]);
    // rotate: the pair (f, f + HALF) of x for f = lane (and lane + 32), normalised by w first
    auto rotate = [&](const bf16 *x, const bf16 *w, float out[4]) {
        float a0 = ld(x[lane]), b0 = ld(x[lane + HALF]), a1 = 0.f, b1 = 0.f;
        if (HALF > 32) a1 = ld(x[lane + 32]), b1 = ld(x[lane + 32 + HALF]);
        if (w) {
            float inv = rsqrtf(warp_sum(a0 * a0 + b0 * b0 + a1 * a1 + b1 * b1) / (float)HD + eps);
            a0 = rnd<bf16>(ld(w[lane]) * rnd<bf16>(a0 * inv)), b0 = rnd<bf16>(ld(w[lane + HALF]) * rnd<bf16>(b0 * inv));
            if (HALF > 32)
                a1 = rnd<bf16>(ld(w[lane + 32]) * rnd<bf16>(a1 * inv)), b1 = rnd<bf16>(ld(w[lane + 32 + HALF]) * rnd<bf16>(b1 * inv));
        }
        out[0] = rnd<bf16>(__fadd_rn(rnd<bf16>(__fmul_rn(a0, c0)), rnd<bf16>(__fmul_rn(-b0, s0))));
        out[1] = rnd<bf16>(__fadd_rn(rnd<bf16>(__fmul_rn(b0, c0)), rnd<bf16>(__fmul_rn(a0, s0))));
        out[2] = rnd<bf16>(__fadd_rn(rnd<bf16>(__fmul_rn(a1, c1)), rnd<bf16>(__fmul_rn(-b1, s1))));
        out[3] = rnd<bf16>(__fadd_rn(rnd<bf16>(__fmul_rn(b1, c1)), rnd<bf16>(__fmul_rn(a1, s1))));
    };
    for (int hh = warp; hh < R; hh += NW) {
        float r[4];
        rotate(qm + (size_t)br * ldq + (size_t)(g * R + hh) * HD, qnw, r);
        bf16 *qr = Qs + hh * LD;
        qr[lane] = st<bf16>(r[0]), qr[lane + HALF] = st<bf16>(r[1]);
        if (HALF > 32) qr[lane + 32] = st<bf16>(r[2]), qr[lane + 32 + HALF] = st<bf16>(r[3]);
    }
    if (kt && warp == NW - 1) { // the new key, rotated, and its value: to the pool and the tile
        float r[4];
        rotate(km + (size_t)br * ldk + (size_t)g * HD, knw, r);
        const bf16 *vr = vm + (size_t)br * ldv + (size_t)g * HD;
        bf16 *kw = kpool + (size_t)slot * kvd + (size_t)g * HD, *vw = vpool + (size_t)slot * kvd + (size_t)g * HD;
        for (int f = lane, u = 0; f < HALF; f += 32, u += 2) {
            bf16 lo = st<bf16>(r[u]), hi = st<bf16>(r[u + 1]);
            kw[f] = kt[f] = lo, kw[f + HALF] = kt[f + HALF] = hi;
            vw[f] = vt[f] = vr[f], vw[f + HALF] = vt[f + HALF] = vr[f + HALF];
        }
    }
}
template <int HD>
__device__ void attn_pool_gqa(bf16 *out, int ldo, float *part, int *ticket, const bf16 *qm, int ldq, const bf16 *km,
                                  int ldk, const bf16 *vm, int ldv, const float *cos, const float *sin, int ldc, bf16 *kpool,
                                  bf16 *vpool, const int *slots, const int *spans, int heads, int kvh, float scale,
                                  const bf16 *qnw, const bf16 *knw, float eps) {
    constexpr int LD = HD + 8, PLD = DEC_SK + 8, C = HD / 8, NW = DEC_THREADS / 32;
    constexpr int PER = DEC_SK * C / DEC_THREADS;
    static_assert(DEC_SK * C % DEC_THREADS == 0 && HD % 64 == 0 && DEC_SK == 8 * NW, "a warp an 8-key tile");
    __shared__ __align__(16) bf16 Ks[DEC_SK * LD]; // padded rows: ldmatrix's rows in distinct banks
    __shared__ __align__(16) bf16 Vs[DEC_SK * LD];
    __shared__ __align__(16) bf16 Qs[GQA_MAX * LD];
    __shared__ __align__(16) bf16 Ps[GQA_MAX * PLD];
    __shared__ float Ss[GQA_MAX][DEC_SK + 1];
    __shared__ int last;
    int g = blockIdx.x, sp = blockIdx.y, splits = gridDim.y, br = blockIdx.z;
    int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    int start = spans[2 * br], L = spans[2 * br + 1], slot = slots[br]; // written before the graph's first kernel
    pdl_wait(); // q, k and v come from the previous kernel
    pdl_launch();
    int j0 = sp * DEC_SK;
    if (j0 >= L) return;
    int j1 = min(L, j0 + DEC_SK), n = j1 - j0, nact = (L + DEC_SK - 1) / DEC_SK;
    int R = heads / kvh, kvd = kvh * HD;
    bool has_new = L - 1 < j1;
    const bf16 *kc = kpool + (size_t)start * kvd + (size_t)g * HD;
    const bf16 *vc = vpool + (size_t)start * kvd + (size_t)g * HD;
    part += (size_t)br * heads * splits * (HD + 2);
    ticket += (size_t)br * kvh;
    out += (size_t)br * ldo;

    // A: the tile (rows past n zeros: 0 x garbage could be NaN), the new token's row from the
    // rotated key below; the query heads' rows, rows past R zeros
    {
        uint4 kw[PER], vw[PER];
#pragma unroll
        for (int u = 0; u < PER; u++) {
            int e = tid + u * DEC_THREADS, i = e / C, c = e % C;
            if (i < n && j0 + i != L - 1) {
                kw[u] = *(const uint4 *)(kc + (size_t)(j0 + i) * kvd + c * 8);
                vw[u] = *(const uint4 *)(vc + (size_t)(j0 + i) * kvd + c * 8);
            }
        }
#pragma unroll
        for (int u = 0; u < PER; u++) {
            int e = tid + u * DEC_THREADS, i = e / C, c = e % C;
            if (j0 + i == L - 1) continue;
            uint4 z = make_uint4(0, 0, 0, 0);
            *(uint4 *)(Ks + i * LD + c * 8) = i < n ? kw[u] : z;
            *(uint4 *)(Vs + i * LD + c * 8) = i < n ? vw[u] : z;
        }
        for (int e = tid; e < GQA_MAX * C; e += DEC_THREADS)
            if (e / C >= R) *(uint4 *)(Qs + (e / C) * LD + (e % C) * 8) = make_uint4(0, 0, 0, 0);
    }
    gqa_rotate<HD>(Qs, LD, has_new ? Ks + (L - 1 - j0) * LD : nullptr, has_new ? Vs + (L - 1 - j0) * LD : nullptr, g, R, br, qm, ldq,
                   km, ldk, vm, ldv, cos, sin, ldc, kpool, vpool, slot, kvd, qnw, knw, eps);
    __syncthreads();

    // B: the scores of keys 8w..8w+7 for the 16 head rows, scaled, masked past n
    {
        float c[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) {
            uint32_t a[4], b[2];
            ldsm_x4(a, Qs + (lane & 15) * LD + kk * 16 + (lane >> 4) * 8);
            ldsm_x2(b, Ks + (warp * 8 + (lane & 7)) * LD + kk * 16 + ((lane >> 3) & 1) * 8);
            mma_16816(c, a, b[0], b[1]);
        }
#pragma unroll
        for (int e = 0; e < 4; e++) {
            int row = (lane >> 2) + (e >> 1) * 8, key = warp * 8 + 2 * (lane & 3) + (e & 1);
            Ss[row][key] = key < n ? c[e] * scale : -INFINITY;
        }
    }
    __syncthreads();

    // C: softmax statistics of heads w and w + 8, p rounded to bf16 (rows past R: zeros)
    for (int hh = warp; hh < GQA_MAX; hh += NW) {
        bf16 *pr = Ps + hh * PLD;
        if (hh >= R) {
            pr[lane] = pr[lane + 32] = st<bf16>(0.f);
            continue;
        }
        float a = Ss[hh][lane], b = Ss[hh][lane + 32];
        float mx = warp_max(fmaxf(a, b));
        float p0 = lane < n ? expf(a - mx) : 0.f, p1 = lane + 32 < n ? expf(b - mx) : 0.f;
        float sum = warp_sum(p0 + p1);
        pr[lane] = st<bf16>(p0), pr[lane + 32] = st<bf16>(p1);
        if (lane == 0) {
            float *pp = part + ((size_t)(g * R + hh) * splits + sp) * (HD + 2);
            pp[HD] = mx, pp[HD + 1] = sum;
        }
    }
    __syncthreads();

    // D: p*v for dimensions 16w..16w+15, the split's unnormalised output to part
    if (warp * 16 < HD) {
        float o[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
        for (int kk = 0; kk < DEC_SK / 16; kk++) {
            uint32_t a[4], b[4];
            ldsm_x4(a, Ps + (lane & 15) * PLD + kk * 16 + (lane >> 4) * 8);
            ldsm_x4_t(b, Vs + (kk * 16 + (lane & 15)) * LD + warp * 16 + (lane >> 4) * 8);
            mma_16816(o[0], a, b[0], b[1]);
            mma_16816(o[1], a, b[2], b[3]);
        }
#pragma unroll
        for (int t = 0; t < 2; t++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int hh = (lane >> 2) + (e >> 1) * 8, d = warp * 16 + t * 8 + 2 * (lane & 3) + (e & 1);
                if (hh < R) part[((size_t)(g * R + hh) * splits + sp) * (HD + 2) + d] = o[t][e];
            }
    }

    // E
    __threadfence();
    __syncthreads();
    if (tid == 0) last = atomicAdd(ticket + g, 1) == nact - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int e = tid; e < R * HD; e += DEC_THREADS) {
        int h = g * R + e / HD, d = e % HD;
        out[(size_t)h * HD + d] = st<bf16>(split_merge(part + (size_t)h * splits * (HD + 2), nact, HD, d));
    }
    if (tid == 0) ticket[g] = 0;
}
#define ATTN_POOL_GQA(HD)                                                                                                     \
    extern "C" __global__ void __launch_bounds__(DEC_THREADS, 4) iris_attn_pool_gqa_bf16_##HD(ATTN_POOL_ARGS(bf16)) {       \
        attn_pool_gqa<HD>(out, ldo, part, ticket, q, ldq, k, ldk, v, ldv, cos, sin, ldc, kpool, vpool, slots, spans, heads, \
                          kvh, scale, qnw, knw, eps);                                                                         \
    }
ATTN_POOL_GQA(64)
ATTN_POOL_GQA(128)

// Decode attention with one block a KV group over all of a row's keys, for caches of at most
// GQA_WHOLE keys: attn_pool_gqa's stages over the row's 64-key tiles at once. The keys and values
// come by cp.async (one round trip, no registers), the softmax runs over every key, and the block
// writes the output, normalised: no partials, no ticket, no merge by the last split to finish
// (in attn_pool_gqa a chain of round trips through L2 after each split's own). A 54-row step of
// the 3B launches 108 blocks a layer (168 KB of shared memory at head dim 128: one an SM).
//   grid (kvh, 1, rows), DEC_THREADS threads, gqa_whole_smem(HD) bytes of dynamic shared memory;
//   A. keys and values of the row's nk = L rounded up to 64 rows staged (rows past L zeros: 0 x
//      garbage could be NaN), the query heads rotated and the new key written (gqa_rotate);
//   B. scores: warp w the 16 head rows' keys 64t + 8w..64t + 8w + 7 of each tile t, scaled,
//      masked past L;
//   C. softmax, a warp two heads over all nk keys, p rounded to bf16, the sums kept;
//   D. p*v for dimensions 16w..16w+15 over the nk keys, divided by the sum (attn_pool_gqa's merge
//      of one split: o / l), to out.
#define GQA_WHOLE 256
__host__ __device__ constexpr int gqa_whole_smem(int hd) {
    return 2 * GQA_WHOLE * (hd + 8) * 2 + GQA_MAX * (hd + 8) * 2 + GQA_MAX * (GQA_WHOLE + 8) * 2 + GQA_MAX * (GQA_WHOLE + 1) * 4 +
           GQA_MAX * 4;
}
template <int HD>
__device__ void attn_pool_gqa_whole(bf16 *out, int ldo, const bf16 *qm, int ldq, const bf16 *km, int ldk, const bf16 *vm, int ldv,
                                    const float *cos, const float *sin, int ldc, bf16 *kpool, bf16 *vpool, const int *slots,
                                    const int *spans, int heads, int kvh, float scale, const bf16 *qnw, const bf16 *knw, float eps) {
    constexpr int LD = HD + 8, PLD = GQA_WHOLE + 8, SLD = GQA_WHOLE + 1, C = HD / 8, NW = DEC_THREADS / 32;
    static_assert(HD % 64 == 0 && DEC_SK == 8 * NW && GQA_WHOLE % DEC_SK == 0, "a warp an 8-key group of each tile");
    extern __shared__ __align__(16) unsigned char smem[];
    bf16 *Ks = (bf16 *)smem, *Vs = Ks + GQA_WHOLE * LD, *Qs = Vs + GQA_WHOLE * LD, *Ps = Qs + GQA_MAX * LD;
    float *Ss = (float *)(Ps + GQA_MAX * PLD), *Ls = Ss + GQA_MAX * SLD;
    int g = blockIdx.x, br = blockIdx.z;
    int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    int start = spans[2 * br], L = spans[2 * br + 1], slot = slots[br]; // written before the graph's first kernel
    pdl_wait(); // q, k and v come from the previous kernel
    pdl_launch();
    if (L < 1 || L > GQA_WHOLE) return; // the host launches this kernel for such caches only
    int R = heads / kvh, kvd = kvh * HD, nk = (L + DEC_SK - 1) / DEC_SK * DEC_SK;
    const bf16 *kc = kpool + (size_t)start * kvd + (size_t)g * HD;
    const bf16 *vc = vpool + (size_t)start * kvd + (size_t)g * HD;
    out += (size_t)br * ldo;

    // A
    uint4 z = make_uint4(0, 0, 0, 0);
    for (int e = tid; e < nk * C; e += DEC_THREADS) {
        int i = e / C, c = e % C;
        bf16 *kd = Ks + i * LD + c * 8, *vd = Vs + i * LD + c * 8;
        if (i < L - 1) {
            cp_async16(kd, kc + (size_t)i * kvd + c * 8);
            cp_async16(vd, vc + (size_t)i * kvd + c * 8);
        } else if (i >= L) {
            *(uint4 *)kd = z, *(uint4 *)vd = z;
        }
    }
    cp_async_commit();
    for (int e = tid; e < GQA_MAX * C; e += DEC_THREADS)
        if (e / C >= R) *(uint4 *)(Qs + (e / C) * LD + (e % C) * 8) = z;
    gqa_rotate<HD>(Qs, LD, Ks + (L - 1) * LD, Vs + (L - 1) * LD, g, R, br, qm, ldq, km, ldk, vm, ldv, cos, sin, ldc, kpool, vpool, slot,
                   kvd, qnw, knw, eps);
    cp_async_wait<0>();
    __syncthreads();

    // B
    {
        uint32_t a[HD / 16][4];
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) ldsm_x4(a[kk], Qs + (lane & 15) * LD + kk * 16 + (lane >> 4) * 8);
        for (int t = 0; t < nk; t += DEC_SK) {
            float c[4] = {0.f, 0.f, 0.f, 0.f};
            int kb = t + warp * 8;
#pragma unroll
            for (int kk = 0; kk < HD / 16; kk++) {
                uint32_t b[2];
                ldsm_x2(b, Ks + (kb + (lane & 7)) * LD + kk * 16 + ((lane >> 3) & 1) * 8);
                mma_16816(c, a[kk], b[0], b[1]);
            }
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int row = (lane >> 2) + (e >> 1) * 8, key = kb + 2 * (lane & 3) + (e & 1);
                Ss[row * SLD + key] = key < L ? c[e] * scale : -INFINITY;
            }
        }
    }
    __syncthreads();

    // C
    for (int hh = warp; hh < GQA_MAX; hh += NW) {
        bf16 *pr = Ps + hh * PLD;
        if (hh >= R) {
            for (int k = lane; k < nk; k += 32) pr[k] = st<bf16>(0.f);
            continue;
        }
        const float *sr = Ss + hh * SLD;
        float mx = -INFINITY;
        for (int k = lane; k < nk; k += 32) mx = fmaxf(mx, sr[k]);
        mx = warp_max(mx);
        float sum = 0.f;
        for (int k = lane; k < nk; k += 32) {
            float p = k < L ? expf(sr[k] - mx) : 0.f;
            sum += p;
            pr[k] = st<bf16>(p);
        }
        sum = warp_sum(sum);
        if (lane == 0) Ls[hh] = sum;
    }
    __syncthreads();

    // D
    if (warp * 16 < HD) {
        float o[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
        for (int kk = 0; kk < nk; kk += 16) {
            uint32_t a[4], b[4];
            ldsm_x4(a, Ps + (lane & 15) * PLD + kk + (lane >> 4) * 8);
            ldsm_x4_t(b, Vs + (kk + (lane & 15)) * LD + warp * 16 + (lane >> 4) * 8);
            mma_16816(o[0], a, b[0], b[1]);
            mma_16816(o[1], a, b[2], b[3]);
        }
#pragma unroll
        for (int t = 0; t < 2; t++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int hh = (lane >> 2) + (e >> 1) * 8, d = warp * 16 + t * 8 + 2 * (lane & 3) + (e & 1);
                if (hh < R) out[(size_t)(g * R + hh) * HD + d] = st<bf16>(o[t][e] / Ls[hh]);
            }
    }
}
#define ATTN_POOL_GQA_WHOLE(HD)                                                                                                      \
    extern "C" __global__ void __launch_bounds__(DEC_THREADS, 1) iris_attn_pool_gqa_whole_bf16_##HD(ATTN_POOL_ARGS(bf16)) {         \
        attn_pool_gqa_whole<HD>(out, ldo, q, ldq, k, ldk, v, ldv, cos, sin, ldc, kpool, vpool, slots, spans, heads, kvh, scale, qnw, \
                                knw, eps);                                                                                           \
    }
ATTN_POOL_GQA_WHOLE(64)
ATTN_POOL_GQA_WHOLE(128)

// ---------------------------------------------------------------------------------------------
// matrix-vector product of a decode step

// The one-row products of a decode step: y[N] = W[N, K] x[K] (+ b), nn.Linear on one row, F32
// accumulation, the bias added before the single rounding to T (as addmm). Memory-bound: the
// kernel is built to keep as many weight loads in flight as it can.
//   - GEMV_WARPS warps a block, a warp a row (R = 2: the rows j and N + j of the gate/up pair),
//     16-byte loads, U batches of them issued before any is used; warps stride over rows, the
//     first batch of the next row issued before the current one is reduced;
//   - the input row sits in shared memory in T, filled by the block while the first batch of
//     weights is in flight: the weights do not depend on the previous step, the input does.
// Input modes:
//   0: x as it is;
//   1: RMSNorm of the residual stream (rmsnorm above): v = x + delta (delta may be NULL),
//      x_out = v (written by block 0 only: every block reads x, so x is not updated in place),
//      input = w * (v * rsqrt(mean(v^2) + eps)) with the same roundings.
// Outputs: y (T, may be NULL) and yf (F32 of the T-rounded value, may be NULL: the logits). With
// R = 2 the output is SwiGLU, y[j] = silu(gate_j) * up_j (silu_mul above), the bias ignored.
#define GEMV_WARPS 4
__device__ __forceinline__ void dot16(uint4 w, uint4 x, float &acc, bf16) {
    const __nv_bfloat162 *a = (const __nv_bfloat162 *)&w, *b = (const __nv_bfloat162 *)&x;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 u = __bfloat1622float2(a[i]), v = __bfloat1622float2(b[i]);
        acc = fmaf(u.x, v.x, acc);
        acc = fmaf(u.y, v.y, acc);
    }
}
__device__ __forceinline__ void dot16(uint4 w, uint4 x, float &acc, float) {
    acc = fmaf(__uint_as_float(w.x), __uint_as_float(x.x), acc);
    acc = fmaf(__uint_as_float(w.y), __uint_as_float(x.y), acc);
    acc = fmaf(__uint_as_float(w.z), __uint_as_float(x.z), acc);
    acc = fmaf(__uint_as_float(w.w), __uint_as_float(x.w), acc);
}

template <typename T, int R>
__device__ void gemv(T *y, float *yf, const T *W, const T *x, const T *b, int N, int K, int mode, const T *delta,
                     const T *nw, T *x_out, float eps) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    T *xs = (T *)smem_raw;
    constexpr int V = 16 / sizeof(T); // elements per load
    constexpr int U = 8 / R;          // loads in flight per lane and row
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int row = blockIdx.x * GEMV_WARPS + warp, stride = gridDim.x * GEMV_WARPS;
    int nvec = (K % V == 0 && ((uintptr_t)W & 15) == 0) ? K / V : 0;
    uint4 cur[R][U];
    auto issue = [&](uint4(&dst)[R][U], int rw, int base) {
#pragma unroll
        for (int q = 0; q < R; q++) {
            const uint4 *w4 = (const uint4 *)(W + (size_t)(rw + q * N) * K);
#pragma unroll
            for (int u = 0; u < U; u++) {
                int i = base + lane + 32 * u;
                if (i < nvec) dst[q][u] = __ldg(w4 + i);
            }
        }
    };
    if (row < N) issue(cur, row, 0);
    pdl_wait();   // the weights are constant; the input row comes from the previous kernel
    pdl_launch(); // after the wait: at most the next kernel prefetches while this one runs

    // the input row, V values a load (the loads of a pass issued together: a loop of dependent
    // round trips here cost more than the product itself)
    if (K % V == 0) {
        int nv = K / V, bs = blockDim.x;
        if (mode == 1) {
            float ss = 0.f;
            for (int c0 = threadIdx.x; c0 < nv; c0 += 4 * bs) {
                uint4 xu[4], du[4];
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    int c = c0 + j * bs;
                    du[j] = make_uint4(0, 0, 0, 0);
                    if (c < nv) {
                        xu[j] = ((const uint4 *)x)[c];
                        if (delta) du[j] = ((const uint4 *)delta)[c];
                    }
                }
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    int c = c0 + j * bs;
                    if (c >= nv) break;
                    const T *xv = (const T *)&xu[j], *dv = (const T *)&du[j];
                    uint4 o;
                    T *ov = (T *)&o;
#pragma unroll
                    for (int e = 0; e < V; e++) {
                        float v = ld(xv[e]);
                        if (delta) v = rnd<T>(v + ld(dv[e]));
                        ss += v * v;
                        ov[e] = st<T>(v);
                    }
                    ((uint4 *)xs)[c] = o;
                    if (blockIdx.x == 0) ((uint4 *)x_out)[c] = o;
                }
            }
            ss = block_sum(ss);
            float inv = rsqrtf(ss / (float)K + eps);
            for (int c0 = threadIdx.x; c0 < nv; c0 += 4 * bs) { // the chunks this thread wrote
                uint4 wu[4];
#pragma unroll
                for (int j = 0; j < 4; j++)
                    if (c0 + j * bs < nv) wu[j] = ((const uint4 *)nw)[c0 + j * bs];
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    int c = c0 + j * bs;
                    if (c >= nv) break;
                    uint4 vu = ((uint4 *)xs)[c], o;
                    const T *vv = (const T *)&vu, *wv = (const T *)&wu[j];
                    T *ov = (T *)&o;
#pragma unroll
                    for (int e = 0; e < V; e++) ov[e] = st<T>(ld(wv[e]) * rnd<T>(ld(vv[e]) * inv));
                    ((uint4 *)xs)[c] = o;
                }
            }
        } else {
            for (int c0 = threadIdx.x; c0 < nv; c0 += 4 * bs) {
                uint4 xu[4];
#pragma unroll
                for (int j = 0; j < 4; j++)
                    if (c0 + j * bs < nv) xu[j] = ((const uint4 *)x)[c0 + j * bs];
#pragma unroll
                for (int j = 0; j < 4; j++)
                    if (c0 + j * bs < nv) ((uint4 *)xs)[c0 + j * bs] = xu[j];
            }
        }
    } else if (mode == 1) {
        float ss = 0.f;
        for (int i = threadIdx.x; i < K; i += blockDim.x) {
            float v = ld(x[i]);
            if (delta) v = rnd<T>(v + ld(delta[i]));
            ss += v * v;
            xs[i] = st<T>(v);
            if (blockIdx.x == 0) x_out[i] = st<T>(v);
        }
        ss = block_sum(ss);
        float inv = rsqrtf(ss / (float)K + eps);
        for (int i = threadIdx.x; i < K; i += blockDim.x) xs[i] = st<T>(ld(nw[i]) * rnd<T>(ld(xs[i]) * inv));
    } else {
        for (int i = threadIdx.x; i < K; i += blockDim.x) xs[i] = x[i];
    }
    __syncthreads();

    const uint4 *x4 = (const uint4 *)xs;
    for (; row < N; row += stride) {
        float acc[R];
#pragma unroll
        for (int q = 0; q < R; q++) acc[q] = 0.f;
        for (int base = 0; base < nvec; base += 32 * U) {
            uint4 nxt[R][U];
            bool more = base + 32 * U < nvec;
            if (more) issue(nxt, row, base + 32 * U);
#pragma unroll
            for (int u = 0; u < U; u++) {
                int i = base + lane + 32 * u;
                if (i < nvec) {
                    uint4 xv = x4[i];
#pragma unroll
                    for (int q = 0; q < R; q++) dot16(cur[q][u], xv, acc[q], T());
                }
            }
            if (more) {
#pragma unroll
                for (int q = 0; q < R; q++)
#pragma unroll
                    for (int u = 0; u < U; u++) cur[q][u] = nxt[q][u];
            }
        }
        for (int i = nvec * V + lane; i < K; i += 32) {
#pragma unroll
            for (int q = 0; q < R; q++) acc[q] = fmaf(ld(W[(size_t)(row + q * N) * K + i]), ld(xs[i]), acc[q]);
        }
        if (row + stride < N) issue(cur, row + stride, 0);
#pragma unroll
        for (int q = 0; q < R; q++) acc[q] = warp_sum(acc[q]);
        if (lane == 0) {
            float v;
            if (R == 2) {
                float g = rnd<T>(acc[0]), u = rnd<T>(acc[R - 1]);
                v = silu<T>(g) * u;
            } else {
                v = b ? acc[0] + ld(b[row]) : acc[0];
            }
            if (y) y[row] = st<T>(v);
            if (yf) yf[row] = rnd<T>(v);
        }
    }
}
#define GEMV(SFX, T)                                                                                                   \
    extern "C" __global__ void __launch_bounds__(32 * GEMV_WARPS) iris_gemv_##SFX(                                    \
        T *y, float *yf, const T *W, const T *x, const T *b, int N, int K, int mode, const T *delta, const T *nw,     \
        T *x_out, float eps) {                                                                                         \
        gemv<T, 1>(y, yf, W, x, b, N, K, mode, delta, nw, x_out, eps);                                               \
    }                                                                                                                  \
    extern "C" __global__ void __launch_bounds__(32 * GEMV_WARPS) iris_gemv_glu_##SFX(                                \
        T *y, float *yf, const T *W, const T *x, const T *b, int N, int K, int mode, const T *delta, const T *nw,     \
        T *x_out, float eps) {                                                                                         \
        gemv<T, 2>(y, yf, W, x, b, N, K, mode, delta, nw, x_out, eps);                                               \
    }
GEMV(f32, float)
GEMV(bf16, bf16)

// ---------------------------------------------------------------------------------------------
// sampling helpers

// Greedy choice over logits [n] F32, in two launches: iris_argmax_part gives each block a
// contiguous chunk and writes the chunk's best and runner-up (value and index) to pv/pi
// [2 * blocks]; iris_argmax_top2 reduces those (ids = pi) or, with ids NULL, a whole logits array
// in one block: out[0] = argmax, out[1] = the runner-up's index; vals[0], vals[1] their logits.
// Ties go to the lower index (the first, as torch.argmax); NaNs are never picked, and with
// nothing else the index stays 0x7fffffff (the host takes 0). One block of 1024 threads over a
// 152k vocabulary took 43 us; 128 blocks and a final block take a few.
#define ARGMAX_MAX_THREADS 1024
__device__ void top2_block(const float *logits, const int *ids, int lo, int hi, float *bv, int *bi, float *sv, int *si) {
    float b = -INFINITY, s2 = -INFINITY;
    int ib = 0x7fffffff, is = 0x7fffffff;
    for (int i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        float v = logits[i];
        int id = ids ? ids[i] : i;
        if (v > b || (v == b && id < ib)) {
            s2 = b, is = ib;
            b = v, ib = id;
        } else if (v > s2 || (v == s2 && id < is)) {
            s2 = v, is = id;
        }
    }
    bv[threadIdx.x] = b, bi[threadIdx.x] = ib, sv[threadIdx.x] = s2, si[threadIdx.x] = is;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) { // blockDim.x is a power of two
        if (threadIdx.x < w) {
            int o = threadIdx.x + w;
            // merge the top-2 of (this, other): ties go to the lower index
            float b1 = bv[threadIdx.x], s1 = sv[threadIdx.x], b2 = bv[o], s2o = sv[o];
            int ib1 = bi[threadIdx.x], is1 = si[threadIdx.x], ib2 = bi[o], is2 = si[o];
            bool firstWins = b1 > b2 || (b1 == b2 && ib1 < ib2);
            float nb = firstWins ? b1 : b2;
            int nib = firstWins ? ib1 : ib2;
            // runner-up: the best of the loser's best and the winner's second
            float c1 = firstWins ? b2 : b1, c2 = firstWins ? s1 : s2o;
            int ic1 = firstWins ? ib2 : ib1, ic2 = firstWins ? is1 : is2;
            bool c1Wins = c1 > c2 || (c1 == c2 && ic1 < ic2);
            bv[threadIdx.x] = nb, bi[threadIdx.x] = nib;
            sv[threadIdx.x] = c1Wins ? c1 : c2, si[threadIdx.x] = c1Wins ? ic1 : ic2;
        }
        __syncthreads();
    }
}
// Both run over gridDim.y rows at once (a decode step's sequences): row y's logits at y * ld,
// its parts at y * 2 * gridDim.x of pv/pi (iris_argmax_part); its inputs at y * n of logits and
// ids and its results at y * ostride of out and vals (iris_argmax_top2).
extern "C" __global__ void __launch_bounds__(ARGMAX_MAX_THREADS) iris_argmax_part(float *pv, int *pi, const float *logits, int n, long ld) {
    pdl_wait(); // no-op unless launched dependent (enq.launchDep)
    __shared__ float bv[ARGMAX_MAX_THREADS], sv[ARGMAX_MAX_THREADS];
    __shared__ int bi[ARGMAX_MAX_THREADS], si[ARGMAX_MAX_THREADS];
    logits += blockIdx.y * ld;
    pv += (size_t)blockIdx.y * 2 * gridDim.x;
    pi += (size_t)blockIdx.y * 2 * gridDim.x;
    int chunk = (n + gridDim.x - 1) / gridDim.x;
    int lo = min(n, blockIdx.x * chunk);
    top2_block(logits, NULL, lo, min(n, lo + chunk), bv, bi, sv, si);
    if (threadIdx.x == 0) {
        pv[2 * blockIdx.x] = bv[0], pi[2 * blockIdx.x] = bi[0];
        pv[2 * blockIdx.x + 1] = sv[0], pi[2 * blockIdx.x + 1] = si[0];
    }
}
extern "C" __global__ void __launch_bounds__(ARGMAX_MAX_THREADS) iris_argmax_top2(int *out, float *vals, const float *logits, const int *ids, int n,
                                                                             int ostride) {
    pdl_wait(); // no-op unless launched dependent (enq.launchDep)
    __shared__ float bv[ARGMAX_MAX_THREADS], sv[ARGMAX_MAX_THREADS];
    __shared__ int bi[ARGMAX_MAX_THREADS], si[ARGMAX_MAX_THREADS];
    logits += (size_t)blockIdx.y * n;
    if (ids) ids += (size_t)blockIdx.y * n;
    out += (size_t)blockIdx.y * ostride;
    vals += (size_t)blockIdx.y * ostride;
    top2_block(logits, ids, 0, n, bv, bi, sv, si);
    if (threadIdx.x == 0) {
        out[0] = bi[0], out[1] = si[0];
        vals[0] = bv[0], vals[1] = sv[0];
    }
}

// ---------------------------------------------------------------------------------------------
// mixture of experts (ml.MoE): transformers 5.17's top-k routed MoE with its default experts path
// (integrations/moe.py, grouped_mm_experts_forward): route each row, group the (row, slot) pairs
// by expert, run each expert's gate/up and down products over its rows as tiles of one grouped
// GEMM, then sum each row's slots in slot order.

#define MOE_MAX_EXPERTS 256
#define MOE_MAX_TOPK 16
#define MOE_BM 64 // rows (pairs) a GEMM tile
#define MOE_BN 64 // output columns a GEMM tile
#define MOE_BK 16 // the reduction's step

// The router, one 128-thread block a row:
//   router_logits = F.linear(hidden_states.float(), self.weight.float())   (a warp an expert)
//   scores = router_logits.softmax(dim=-1, dtype=torch.float32)
//   group_limited_greedy: each group scored by its best expert, the experts outside the
//     topgroups best groups zeroed
//   topk_weights, topk_indices = torch.topk(scores, k=top_k); topk_weights * routed_scaling_factor
// ids and w get the row's K slots, best first (ties: the lower index).
template <typename T>
__device__ void moe_route(const T *x, int ldx, const float *router, int H, int E, int K, int groups, int topgroups, float scale,
                          int *ids, float *w) {
    pdl_wait(); // no-op unless launched dependent (enq.launchDep)
    __shared__ float s[MOE_MAX_EXPERTS];
    __shared__ float gs[MOE_MAX_EXPERTS];
    __shared__ int keep[MOE_MAX_EXPERTS];
    const T *xr = x + (size_t)blockIdx.x * ldx;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
    for (int e = warp; e < E; e += nw) {
        const float *wr = router + (size_t)e * H;
        float acc = 0.f;
        for (int c = lane; c < H; c += 32) acc = fmaf(ld(xr[c]), wr[c], acc);
        acc = warp_sum(acc);
        if (lane == 0) s[e] = acc;
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    float mx = s[0];
    for (int e = 1; e < E; e++) mx = fmaxf(mx, s[e]);
    float sum = 0.f;
    for (int e = 0; e < E; e++) {
        s[e] = expf(s[e] - mx);
        sum += s[e];
    }
    for (int e = 0; e < E; e++) s[e] = s[e] / sum;
    if (groups > 1) {
        int per = E / groups;
        for (int g = 0; g < groups; g++) {
            float b = s[g * per];
            for (int j = 1; j < per; j++) b = fmaxf(b, s[g * per + j]);
            gs[g] = b;
            keep[g] = 0;
        }
        for (int t = 0; t < topgroups; t++) {
            int best = -1;
            for (int g = 0; g < groups; g++)
                if (!keep[g] && (best < 0 || gs[g] > gs[best])) best = g;
            keep[best] = 1;
        }
        for (int e = 0; e < E; e++)
            if (!keep[e / per]) s[e] = 0.f;
    }
    int *id = ids + (size_t)blockIdx.x * K;
    float *wt = w + (size_t)blockIdx.x * K;
    for (int t = 0; t < K; t++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            bool taken = false;
            for (int u = 0; u < t; u++) taken |= id[u] == e;
            if (!taken && (best < 0 || s[e] > s[best])) best = e;
        }
        id[t] = best;
        wt[t] = s[best] * scale;
    }
}
#define MOE_ROUTE_ARGS(T) const T *x, int ldx, const float *router, int H, int E, int K, int groups, int topgroups, float scale, int *ids, float *w
extern "C" __global__ void iris_moe_route_f32(MOE_ROUTE_ARGS(float)) { moe_route(x, ldx, router, H, E, K, groups, topgroups, scale, ids, w); }
extern "C" __global__ void iris_moe_route_bf16(MOE_ROUTE_ARGS(bf16)) { moe_route(x, ldx, router, H, E, K, groups, topgroups, scale, ids, w); }

// The grouping, one block: the pairs (row·K + slot) sorted by expert, stably (perm: sorted
// position -> pair; inv: pair -> sorted position), each expert's first sorted position in
// start[0..E], and the GEMM tiles: tiles[1 + 2t] = (expert, first row of the expert's tile),
// tiles[0] = their count. The counts run on the block; the placement is serial (a few
// thousand pairs at a prefill).
extern "C" __global__ void iris_moe_plan(const int *ids, int pairs, int E, int *perm, int *inv, int *start, int *tiles) {
    pdl_wait(); // no-op unless launched dependent (enq.launchDep)
    __shared__ int cnt[MOE_MAX_EXPERTS + 1];
    for (int e = threadIdx.x; e <= E; e += blockDim.x) cnt[e] = 0;
    __syncthreads();
    for (int p = threadIdx.x; p < pairs; p += blockDim.x) atomicAdd(&cnt[ids[p] + 1], 1);
    __syncthreads();
    if (threadIdx.x != 0) return;
    for (int e = 0; e < E; e++) cnt[e + 1] += cnt[e];
    int nt = 0;
    for (int e = 0; e < E; e++) {
        start[e] = cnt[e];
        for (int r = 0; r < cnt[e + 1] - cnt[e]; r += MOE_BM) {
            tiles[1 + 2 * nt] = e;
            tiles[2 + 2 * nt] = r;
            nt++;
        }
    }
    start[E] = cnt[E];
    tiles[0] = nt;
    for (int p = 0; p < pairs; p++) {
        int q = cnt[ids[p]]++;
        perm[q] = p;
        inv[p] = q;
    }
}

// The grouped product: tile t of the plan is MOE_BM sorted pairs of one expert e, and
// Y[p, n] = sum_k A[row(p), k] * W[e·N + n, k] for its pairs p and a block's MOE_BN columns n,
// accumulated in F32 and rounded once to T (a bf16 nn.Linear). row(p) is perm[p] / K when perm
// is set (the gate/up product reads the rows of x the pairs came from) and p otherwise (the down
// product reads the activations in sorted order). Blocks past the plan's tiles return at once:
// the grid is the most tiles any routing can make.
template <typename T>
__device__ void moe_gemm(const T *A, int lda, const int *perm, int K, const T *W, int N, int Kd, T *Y, int ldy, const int *start,
                         const int *tiles) {
    pdl_wait(); // no-op unless launched dependent (enq.launchDep)
    int t = blockIdx.x;
    if (t >= tiles[0]) return;
    int e = tiles[1 + 2 * t], p0 = start[e] + tiles[2 + 2 * t], pend = start[e + 1];
    int n0 = blockIdx.y * MOE_BN;
    __shared__ float As[MOE_BK][MOE_BM + 1];
    __shared__ float Ws[MOE_BK][MOE_BN + 1];
    __shared__ int rows[MOE_BM];
    int tx = threadIdx.x % 16, ty = threadIdx.x / 16; // 256 threads, 4x4 outputs each
    for (int r = threadIdx.x; r < MOE_BM; r += blockDim.x) {
        int p = p0 + r;
        rows[r] = p < pend ? (perm ? perm[p] / K : p) : -1;
    }
    __syncthreads();
    const T *We = W + (size_t)e * N * Kd;
    float acc[4][4] = {};
    for (int k0 = 0; k0 < Kd; k0 += MOE_BK) {
        for (int i = threadIdx.x; i < MOE_BM * MOE_BK; i += blockDim.x) {
            int r = i / MOE_BK, k = i % MOE_BK;
            As[k][r] = rows[r] >= 0 && k0 + k < Kd ? ld(A[(size_t)rows[r] * lda + k0 + k]) : 0.f;
        }
        for (int i = threadIdx.x; i < MOE_BN * MOE_BK; i += blockDim.x) {
            int n = i / MOE_BK, k = i % MOE_BK;
            Ws[k][n] = n0 + n < N && k0 + k < Kd ? ld(We[(size_t)(n0 + n) * Kd + k0 + k]) : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < MOE_BK; k++) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; i++) a[i] = As[k][ty * 4 + i], b[i] = Ws[k][tx * 4 + i];
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        int p = p0 + ty * 4 + i;
        if (p >= pend) continue;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int n = n0 + tx * 4 + j;
            if (n < N) Y[(size_t)p * ldy + n] = st<T>(acc[i][j]);
        }
    }
}
#define MOE_GEMM_ARGS(T) const T *A, int lda, const int *perm, int K, const T *W, int N, int Kd, T *Y, int ldy, const int *start, const int *tiles
extern "C" __global__ void iris_moe_gemm_f32(MOE_GEMM_ARGS(float)) { moe_gemm(A, lda, perm, K, W, N, Kd, Y, ldy, start, tiles); }
extern "C" __global__ void iris_moe_gemm_bf16(MOE_GEMM_ARGS(bf16)) { moe_gemm(A, lda, perm, K, W, N, Kd, Y, ldy, start, tiles); }

// The sum, one block a row (y may be add):
//   weighted_out = proj_out * sample_weights      (F32: proj_out is T, the weights F32)
//   final_hidden_states = weighted_out.view(num_tokens, num_top_k, hidden_dim).sum(dim=1)
//   .to(hidden_states.dtype), then + shared_experts(residuals) in T.
// The products and sums are rounded one by one (no fused multiply-add), in slot order.
template <typename T>
__device__ void moe_combine(T *y, int ldy, const T *out, int H, const int *inv, const float *w, int K, const T *add, int ldadd) {
    pdl_wait(); // no-op unless launched dependent (enq.launchDep)
    int r = blockIdx.x;
    for (int h = threadIdx.x; h < H; h += blockDim.x) {
        float acc = 0.f;
        for (int k = 0; k < K; k++)
            acc = __fadd_rn(acc, __fmul_rn(ld(out[(size_t)inv[r * K + k] * H + h]), w[r * K + k]));
        float v = rnd<T>(acc);
        if (add) v = v + ld(add[(size_t)r * ldadd + h]);
        y[(size_t)r * ldy + h] = st<T>(v);
    }
}
#define MOE_COMBINE_ARGS(T) T *y, int ldy, const T *out, int H, const int *inv, const float *w, int K, const T *add, int ldadd
extern "C" __global__ void iris_moe_combine_f32(MOE_COMBINE_ARGS(float)) { moe_combine(y, ldy, out, H, inv, w, K, add, ldadd); }
extern "C" __global__ void iris_moe_combine_bf16(MOE_COMBINE_ARGS(bf16)) { moe_combine(y, ldy, out, H, inv, w, K, add, ldadd); }
