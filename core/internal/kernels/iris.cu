// iris.cu: the CUDA kernels of Iris's GPU engine (core/internal/engine/cuda). Matrix products
// are cuBLAS calls made from Go; everything between them is here.
//
// Every kernel exists for two storage types, named by a suffix: _f32 (float activations and
// weights: the exact-parity mode) and _bf16 (__nv_bfloat16 storage, float arithmetic). The bf16
// kernels round where transformers 5.17 rounds in a bf16 model (models/qwen2_5_vl/
// modeling_qwen2_5_vl.py), quoted next to each kernel, so that greedy tokens agree as often as
// rounding allows.
//
// Built by `just kernels` (nvcc 13.0, sm_90 SASS + compute_90 PTX) into build/iris.fatbin, which
// kernels_cuda.go embeds.
#include <cuda_bf16.h>
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

// The per-step state of a sequence, in device memory so that one captured decode graph serves
// every step and every sequence (the host rewrites it before each launch). Mirrored by
// stepArgs in core/internal/engine/cuda.
struct Step {
    int past;  // tokens already in the KV cache
    int token; // decode: the input token
    int pos;   // decode: its rotary position (all three axes)
    int cap;   // rows per layer in the caches
    unsigned long long kcache; // the sequence's K cache: (layers, cap, kv_heads*head_dim)
    unsigned long long vcache;
};

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

#define GRID_STRIDE(i, n) for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < (long)(n); i += (long)gridDim.x * blockDim.x)

// ---------------------------------------------------------------------------------------------
// conversions (weights at load, pixels, logits)

extern "C" __global__ void iris_bf16_to_f32(float *out, const bf16 *in, long n) {
    GRID_STRIDE(i, n) out[i] = __bfloat162float(in[i]);
}

extern "C" __global__ void iris_f32_to_bf16(bf16 *out, const float *in, long n) {
    GRID_STRIDE(i, n) out[i] = __float2bfloat16_rn(in[i]);
}

extern "C" __global__ void iris_f32_copy(float *out, const float *in, long n) {
    GRID_STRIDE(i, n) out[i] = in[i];
}

// ---------------------------------------------------------------------------------------------
// embeddings

// inputs_embeds = self.get_input_embeddings()(input_ids): out[i] = table[ids[i]], one block a row.
// ids may be Step.token (decode).
template <typename T> __device__ void embed(T *out, const T *table, const int *ids, int H) {
    const T *src = table + (size_t)ids[blockIdx.x] * H;
    T *dst = out + (size_t)blockIdx.x * H;
    for (int j = threadIdx.x; j < H; j += blockDim.x) dst[j] = src[j];
}
extern "C" __global__ void iris_embed_f32(float *out, const float *table, const int *ids, int H) { embed(out, table, ids, H); }
extern "C" __global__ void iris_embed_bf16(bf16 *out, const bf16 *table, const int *ids, int H) { embed(out, table, ids, H); }

// inputs_embeds.masked_scatter(image_mask, image_embeds): row r of src (float, from the host) goes
// to row slots[r] of out, one block a row.
template <typename T> __device__ void scatter_f32(T *out, const float *src, const int *slots, int H) {
    const float *s = src + (size_t)blockIdx.x * H;
    T *d = out + (size_t)slots[blockIdx.x] * H;
    for (int j = threadIdx.x; j < H; j += blockDim.x) d[j] = st<T>(s[j]);
}
extern "C" __global__ void iris_scatter_f32_f32(float *out, const float *src, const int *slots, int H) { scatter_f32(out, src, slots, H); }
extern "C" __global__ void iris_scatter_f32_bf16(bf16 *out, const float *src, const int *slots, int H) { scatter_f32(out, src, slots, H); }

// Row permutations of the vision tower (permute_input_for_window_attn and merged[reverse]):
// gather: out[i] = in[index[i]]; scatter: out[index[i]] = in[i]; rows of W values, a block a row.
template <typename T> __device__ void gather(T *out, const T *in, const int *index, int W) {
    const T *s = in + (size_t)index[blockIdx.x] * W;
    T *d = out + (size_t)blockIdx.x * W;
    for (int j = threadIdx.x; j < W; j += blockDim.x) d[j] = s[j];
}
template <typename T> __device__ void scatter(T *out, const T *in, const int *index, int W) {
    const T *s = in + (size_t)blockIdx.x * W;
    T *d = out + (size_t)index[blockIdx.x] * W;
    for (int j = threadIdx.x; j < W; j += blockDim.x) d[j] = s[j];
}
extern "C" __global__ void iris_gather_f32(float *out, const float *in, const int *index, int W) { gather(out, in, index, W); }
extern "C" __global__ void iris_gather_bf16(bf16 *out, const bf16 *in, const int *index, int W) { gather(out, in, index, W); }
extern "C" __global__ void iris_scatter_f32(float *out, const float *in, const int *index, int W) { scatter(out, in, index, W); }
extern "C" __global__ void iris_scatter_bf16(bf16 *out, const bf16 *in, const int *index, int W) { scatter(out, in, index, W); }

// ---------------------------------------------------------------------------------------------
// normalisation and elementwise steps

// Qwen2_5_VLRMSNorm.forward:
//   hidden_states = hidden_states.to(torch.float32)
//   variance = hidden_states.pow(2).mean(-1, keepdim=True)
//   hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
//   return self.weight * hidden_states.to(input_dtype)
// With delta != NULL the residual add before it is fused: x = x + delta (hidden_states =
// residual + hidden_states, rounded to T), and x is written back. One block a row.
template <typename T>
__device__ void rmsnorm(T *out, T *x, const T *delta, const T *w, int n, float eps) {
    T *row = x + (size_t)blockIdx.x * n;
    const T *drow = delta ? delta + (size_t)blockIdx.x * n : nullptr;
    T *orow = out + (size_t)blockIdx.x * n;
    float ss = 0.f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float v = ld(row[j]);
        if (drow) {
            v = rnd<T>(v + ld(drow[j]));
            row[j] = st<T>(v);
        }
        ss += v * v;
    }
    ss = block_sum(ss);
    float inv = rsqrtf(ss / (float)n + eps);
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float h = rnd<T>(ld(row[j]) * inv);
        orow[j] = st<T>(ld(w[j]) * h);
    }
}
extern "C" __global__ void iris_rmsnorm_f32(float *out, float *x, const float *delta, const float *w, int n, float eps) {
    rmsnorm(out, x, delta, w, n, eps);
}
extern "C" __global__ void iris_rmsnorm_bf16(bf16 *out, bf16 *x, const bf16 *delta, const bf16 *w, int n, float eps) {
    rmsnorm(out, x, delta, w, n, eps);
}

// y = y + x (hidden_states = residual + hidden_states), n values.
template <typename T> __device__ void add(T *y, const T *x, long n) {
    GRID_STRIDE(i, n) y[i] = st<T>(ld(y[i]) + ld(x[i]));
}
extern "C" __global__ void iris_add_f32(float *y, const float *x, long n) { add(y, x, n); }
extern "C" __global__ void iris_add_bf16(bf16 *y, const bf16 *x, long n) { add(y, x, n); }

// Fills rows x n of out (row stride ld) with the bias b. A following GEMM with beta = 1 then
// rounds acc + b once, as addmm does for nn.Linear with a bias.
template <typename T> __device__ void bias_rows(T *out, const T *b, int rows, int n, int ldo) {
    GRID_STRIDE(i, (long)rows * n) {
        long r = i / n, j = i % n;
        out[r * ldo + j] = b[j];
    }
}
extern "C" __global__ void iris_bias_f32(float *out, const float *b, int rows, int n, int ldo) { bias_rows(out, b, rows, n, ldo); }
extern "C" __global__ void iris_bias_bf16(bf16 *out, const bf16 *b, int rows, int n, int ldo) { bias_rows(out, b, rows, n, ldo); }

// Qwen2MLP: self.act_fn(self.gate_proj(x)) * self.up_proj(x), act_fn = silu. gu holds the gate
// and up projections side by side ([rows, 2*I]); out is [rows, I]. silu and the product each
// round to T.
template <typename T> __device__ void silu_mul(T *out, const T *gu, int rows, int I) {
    GRID_STRIDE(i, (long)rows * I) {
        long r = i / I, j = i % I;
        float g = ld(gu[r * 2 * I + j]), u = ld(gu[r * 2 * I + I + j]);
        float a = rnd<T>(g / (1.0f + expf(-g)));
        out[i] = st<T>(a * u);
    }
}
extern "C" __global__ void iris_silu_mul_f32(float *out, const float *gu, int rows, int I) { silu_mul(out, gu, rows, I); }
extern "C" __global__ void iris_silu_mul_bf16(bf16 *out, const bf16 *gu, int rows, int I) { silu_mul(out, gu, rows, I); }

// nn.GELU() (approximate="none") in Qwen2_5_VLPatchMerger.mlp: x * 0.5 * (1 + erf(x / sqrt(2)))
template <typename T> __device__ void gelu(T *x, long n) {
    GRID_STRIDE(i, n) {
        float v = ld(x[i]);
        x[i] = st<T>(v * 0.5f * (1.0f + erff(v * 0.70710678118654752f)));
    }
}
extern "C" __global__ void iris_gelu_f32(float *x, long n) { gelu(x, n); }
extern "C" __global__ void iris_gelu_bf16(bf16 *x, long n) { gelu(x, n); }

// ---------------------------------------------------------------------------------------------
// rotary embeddings

// Text M-RoPE and the KV-cache write, one block a token, for the fused q/k/v projection output
// qkv [n, qd + 2*kvd]:
//   Qwen2_5_VLRotaryEmbedding: freqs = inv_freq x position (F32), frequency f taking the t, h or w
//   position by mrope_section (f < s0: t, f < s0+s1: h, else w); cos/sin cast to the model dtype;
//   apply_rotary_pos_emb: q_embed = (q * cos) + (rotate_half(q) * sin), each product and the sum
//   rounding to T.
// q goes to q_out [n, qd]; k and v to the caches at rows past + i of layer `layer`. pos is [3, n] (t, h, w rows) or NULL for a decode step,
// which takes Step.pos on every axis.
template <typename T>
__device__ void rope_text(T *q_out, const T *qkv, const Step *step, const int *pos, const float *inv_freq, int n,
                          int heads, int kvh, int hd, int s0, int s1, int layer) {
    int i = blockIdx.x;
    int half = hd / 2, qd = heads * hd, kvd = kvh * hd;
    int past = step->past;
    size_t layer_off = (size_t)layer * step->cap * kvd;
    T *kc = (T *)step->kcache + layer_off + (size_t)(past + i) * kvd;
    T *vc = (T *)step->vcache + layer_off + (size_t)(past + i) * kvd;
    const T *row = qkv + (size_t)i * (qd + 2 * kvd);
    extern __shared__ float cs[]; // cos[half], sin[half]
    for (int f = threadIdx.x; f < half; f += blockDim.x) {
        int axis = f < s0 ? 0 : (f < s0 + s1 ? 1 : 2);
        int p = pos ? pos[axis * n + i] : step->pos;
        float a = __fmul_rn((float)p, inv_freq[f]);
        cs[f] = rnd<T>(cosf(a));
        cs[half + f] = rnd<T>(sinf(a));
    }
    __syncthreads();
    int total = (heads + kvh) * half;
    for (int t = threadIdx.x; t < total; t += blockDim.x) {
        int h = t / half, f = t % half;
        const T *src = row + (size_t)h * hd; // q heads, then k heads (k starts at column qd)
        float a = ld(src[f]), b = ld(src[f + half]);
        float c = cs[f], s = cs[half + f];
        float lo = rnd<T>(__fadd_rn(rnd<T>(__fmul_rn(a, c)), rnd<T>(__fmul_rn(-b, s))));
        float hi = rnd<T>(__fadd_rn(rnd<T>(__fmul_rn(b, c)), rnd<T>(__fmul_rn(a, s))));
        T *dst = h < heads ? q_out + (size_t)i * qd + (size_t)h * hd : kc + (size_t)(h - heads) * hd;
        dst[f] = st<T>(lo);
        dst[f + half] = st<T>(hi);
    }
    const T *v = row + qd + kvd;
    for (int j = threadIdx.x; j < kvd; j += blockDim.x) vc[j] = v[j];
}
extern "C" __global__ void iris_rope_text_f32(float *q_out, const float *qkv, const Step *step, const int *pos, const float *inv_freq,
                                              int n, int heads, int kvh, int hd, int s0, int s1, int layer) {
    rope_text(q_out, qkv, step, pos, inv_freq, n, heads, kvh, hd, s0, s1, layer);
}
extern "C" __global__ void iris_rope_text_bf16(bf16 *q_out, const bf16 *qkv, const Step *step, const int *pos, const float *inv_freq,
                                               int n, int heads, int kvh, int hd, int s0, int s1, int layer) {
    rope_text(q_out, qkv, step, pos, inv_freq, n, heads, kvh, hd, s0, s1, layer);
}

// Vision 2-D RoPE in place on q and k of qkv [N, 3*VH] (q at column 0, k at VH), one block a
// patch. apply_rotary_pos_emb_vision computes in F32 and casts back: q_embed = (q * cos) +
// (rotate_half(q) * sin). cs holds cos [N, hd/2] then sin [N, hd/2] (the duplicated halves are
// implied).
template <typename T> __device__ void rope_vision(T *qkv, const float *cs, int N, int heads, int hd) {
    int i = blockIdx.x, half = hd / 2, VH = heads * hd;
    const float *cosr = cs + (size_t)i * half, *sinr = cs + (size_t)N * half + (size_t)i * half;
    T *row = qkv + (size_t)i * 3 * VH;
    for (int t = threadIdx.x; t < 2 * heads * half; t += blockDim.x) {
        int h = t / half, f = t % half; // h < heads: q head h; else k head h - heads
        T *x = row + (h < heads ? 0 : VH) + (size_t)(h % heads) * hd;
        float a = ld(x[f]), b = ld(x[f + half]), c = cosr[f], s = sinr[f];
        x[f] = st<T>(__fadd_rn(__fmul_rn(a, c), __fmul_rn(-b, s)));
        x[f + half] = st<T>(__fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s)));
    }
}
extern "C" __global__ void iris_rope_vision_f32(float *qkv, const float *cs, int N, int heads, int hd) { rope_vision(qkv, cs, N, heads, hd); }
extern "C" __global__ void iris_rope_vision_bf16(bf16 *qkv, const float *cs, int N, int heads, int hd) { rope_vision(qkv, cs, N, heads, hd); }

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

// Row softmax for attention through cuBLAS (long segments): S [rows, nk] F32 scores (already
// scaled), row r being query r % nq of a head; causal masks keys j > (r % nq) + (nk - nq).
// P [rows, nk] gets the probabilities in T. One block a row.
template <typename T> __device__ void softmax_rows(T *P, const float *S, int nq, int nk, int causal) {
    long r = blockIdx.x;
    const float *srow = S + r * nk;
    T *prow = P + r * nk;
    int lim = causal ? (int)(r % nq) + (nk - nq) : nk - 1;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j <= lim && j < nk; j += blockDim.x) mx = fmaxf(mx, srow[j]);
    mx = block_max(mx);
    float sum = 0.f;
    for (int j = threadIdx.x; j <= lim && j < nk; j += blockDim.x) sum += expf(srow[j] - mx);
    sum = block_sum(sum);
    float inv = 1.0f / sum;
    for (int j = threadIdx.x; j < nk; j += blockDim.x) prow[j] = st<T>(j <= lim ? expf(srow[j] - mx) * inv : 0.f);
}
extern "C" __global__ void iris_softmax_f32(float *P, const float *S, int nq, int nk, int causal) { softmax_rows(P, S, nq, nk, causal); }
extern "C" __global__ void iris_softmax_bf16(bf16 *P, const float *S, int nq, int nk, int causal) { softmax_rows(P, S, nq, nk, causal); }

// Decode attention over the KV cache (one query token), split over the keys so that a long cache
// spreads over many blocks: grid (heads, splits), DEC_THREADS threads; split sp covers keys
// [sp*DEC_SK, (sp+1)*DEC_SK) of the past+1 keys (the new token's k/v were written by rope_text).
// Each thread scores one key (its loads are independent, so many are in flight); then each warp
// accumulates p*v over a quarter of the keys, lanes across dimensions, and the warps' sums are
// added in shared memory. Each split writes its max, sum and unnormalised output to part
// [heads, splits, hd + 2]; attn_decode_combine merges them. Splits past the end write an empty
// partial.
#define DEC_SK 128
#define DEC_THREADS 128
template <typename T>
__device__ void attn_decode(float *part, const T *q, const Step *step, int layer, int heads, int kvh, int hd,
                            float scale) {
    __shared__ float qs[256];
    __shared__ float sc[DEC_SK];
    __shared__ float red[DEC_THREADS / 32][256];
    int h = blockIdx.x, sp = blockIdx.y, splits = gridDim.y;
    int L = step->past + 1;
    int j0 = sp * DEC_SK, j1 = min(L, j0 + DEC_SK);
    float *pp = part + ((size_t)h * splits + sp) * (hd + 2);
    if (j0 >= L) {
        if (threadIdx.x == 0) {
            pp[hd] = -INFINITY;
            pp[hd + 1] = 0.f;
        }
        return;
    }
    int g = h / (heads / kvh), kvd = kvh * hd;
    size_t layer_off = (size_t)layer * step->cap * kvd;
    const T *kc = (const T *)step->kcache + layer_off + (size_t)g * hd;
    const T *vc = (const T *)step->vcache + layer_off + (size_t)g * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) qs[d] = ld(q[(size_t)h * hd + d]);
    __syncthreads();
    int j = j0 + threadIdx.x;
    float s = -INFINITY;
    if (j < j1) {
        const T *kr = kc + (size_t)j * kvd;
        float a = 0.f;
#pragma unroll 16
        for (int d = 0; d < hd; d++) a = fmaf(qs[d], ld(kr[d]), a);
        s = a * scale;
    }
    float mx = block_max(s);
    float p = j < j1 ? expf(s - mx) : 0.f;
    float sum = block_sum(p);
    sc[threadIdx.x] = rnd<T>(p);
    __syncthreads();
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    float acc[8];
#pragma unroll
    for (int u = 0; u < 8; u++) acc[u] = 0.f;
    int n = j1 - j0;
#pragma unroll 4
    for (int jj = warp; jj < n; jj += nw) {
        float pj = sc[jj];
        const T *vr = vc + (size_t)(j0 + jj) * kvd;
#pragma unroll
        for (int u = 0; u < 8; u++) {
            int d = lane + 32 * u;
            if (d < hd) acc[u] = fmaf(pj, ld(vr[d]), acc[u]);
        }
    }
#pragma unroll
    for (int u = 0; u < 8; u++) {
        int d = lane + 32 * u;
        if (d < hd) red[warp][d] = acc[u];
    }
    __syncthreads();
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float a = 0.f;
        for (int w = 0; w < nw; w++) a += red[w][d];
        pp[d] = a;
    }
    if (threadIdx.x == 0) {
        pp[hd] = mx;
        pp[hd + 1] = sum;
    }
}
extern "C" __global__ void __launch_bounds__(DEC_THREADS) iris_attn_decode_f32(float *part, const float *q, const Step *step, int layer,
                                                                                int heads, int kvh, int hd, float scale) {
    attn_decode(part, q, step, layer, heads, kvh, hd, scale);
}
extern "C" __global__ void __launch_bounds__(DEC_THREADS) iris_attn_decode_bf16(float *part, const bf16 *q, const Step *step, int layer,
                                                                                 int heads, int kvh, int hd, float scale) {
    attn_decode(part, q, step, layer, heads, kvh, hd, scale);
}

// grid heads, hd threads: out[h] = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s.
template <typename T> __device__ void attn_decode_combine(T *out, const float *part, int splits, int hd) {
    int h = blockIdx.x, d = threadIdx.x;
    const float *p = part + (size_t)h * splits * (hd + 2);
    float M = -INFINITY;
    for (int s = 0; s < splits; s++) M = fmaxf(M, p[(size_t)s * (hd + 2) + hd]);
    float num = 0.f, den = 0.f;
    for (int s = 0; s < splits; s++) {
        const float *ps = p + (size_t)s * (hd + 2);
        if (ps[hd + 1] == 0.f) continue;
        float w = expf(ps[hd] - M);
        num += w * ps[d];
        den += w * ps[hd + 1];
    }
    if (d < hd) out[(size_t)h * hd + d] = st<T>(num / den);
}
extern "C" __global__ void iris_attn_decode_combine_f32(float *out, const float *part, int splits, int hd) {
    attn_decode_combine(out, part, splits, hd);
}
extern "C" __global__ void iris_attn_decode_combine_bf16(bf16 *out, const float *part, int splits, int hd) {
    attn_decode_combine(out, part, splits, hd);
}

// ---------------------------------------------------------------------------------------------
// matrix-vector product of a decode step

// y[N] = W[N, K] x[K] (+ b), nn.Linear on one row: one warp a row, GEMV_ROWS rows a block, x
// staged in shared memory as float (K floats of dynamic shared memory), the weights streamed with
// 16-byte loads when rows allow it. F32 accumulation; the bias is added before the single
// rounding to T, as addmm does.
#define GEMV_ROWS 8
__device__ __forceinline__ void unpack8(uint4 u, float *f) {
    const __nv_bfloat162 *h = (const __nv_bfloat162 *)&u;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 v = __bfloat1622float2(h[i]);
        f[2 * i] = v.x, f[2 * i + 1] = v.y;
    }
}
template <typename T> __device__ void gemv_rows(T *y, const T *W, const float *xs, const T *b, int N, int K) {
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int row = blockIdx.x * (blockDim.x >> 5) + warp;
    if (row >= N) return;
    const T *w = W + (size_t)row * K;
    constexpr int V = 16 / sizeof(T); // elements per 16-byte load
    float acc = 0.f;
    int kv = (K % V == 0 && ((uintptr_t)W & 15) == 0) ? K / V : 0;
    const uint4 *w4 = (const uint4 *)w;
#pragma unroll 4
    for (int i = lane; i < kv; i += 32) {
        uint4 u = __ldg(w4 + i);
        float f[8];
        if (sizeof(T) == 2) {
            unpack8(u, f);
        } else {
            f[0] = __uint_as_float(u.x), f[1] = __uint_as_float(u.y), f[2] = __uint_as_float(u.z), f[3] = __uint_as_float(u.w);
        }
        const float *xv = xs + i * V;
#pragma unroll
        for (int e = 0; e < V; e++) acc = fmaf(f[e], xv[e], acc);
    }
    for (int i = kv * V + lane; i < K; i += 32) acc = fmaf(ld(w[i]), xs[i], acc);
    acc = warp_sum(acc);
    if (lane == 0) y[row] = st<T>(b ? acc + ld(b[row]) : acc);
}

// The decode step's products stage their input row in shared memory, and compute it there from
// the previous step's outputs, so that the small steps between products cost no launch:
//   mode 0: x as it is;
//   mode 1: RMSNorm of the residual stream (rmsnorm above): v = x + delta (delta may be NULL),
//           x_out = v (written by block 0 only: every block reads x, so x is not updated in
//           place), input = w * (v * rsqrt(mean(v^2) + eps)) with the same roundings;
//   mode 2: SwiGLU: x is the [2*K] gate|up row, input = silu(gate) * up (silu_mul above).
template <typename T>
__device__ void gemv(T *y, const T *W, const T *x, const T *b, int N, int K, int mode, const T *delta,
                     const T *nw, T *x_out, float eps) {
    extern __shared__ float xs[];
    if (mode == 1) {
        float ss = 0.f;
        for (int i = threadIdx.x; i < K; i += blockDim.x) {
            float v = ld(x[i]);
            if (delta) v = rnd<T>(v + ld(delta[i]));
            xs[i] = v;
            ss += v * v;
        }
        ss = block_sum(ss);
        float inv = rsqrtf(ss / (float)K + eps);
        for (int i = threadIdx.x; i < K; i += blockDim.x) {
            float v = xs[i];
            if (blockIdx.x == 0) x_out[i] = st<T>(v);
            xs[i] = rnd<T>(ld(nw[i]) * rnd<T>(v * inv));
        }
    } else if (mode == 2) {
        for (int i = threadIdx.x; i < K; i += blockDim.x) {
            float g = ld(x[i]), u = ld(x[K + i]);
            xs[i] = rnd<T>(rnd<T>(g / (1.0f + expf(-g))) * u);
        }
    } else {
        for (int i = threadIdx.x; i < K; i += blockDim.x) xs[i] = ld(x[i]);
    }
    __syncthreads();
    gemv_rows(y, W, xs, b, N, K);
}
extern "C" __global__ void __launch_bounds__(32 * GEMV_ROWS) iris_gemv_f32(float *y, const float *W, const float *x, const float *b, int N, int K,
                                                                           int mode, const float *delta, const float *nw, float *x_out, float eps) {
    gemv(y, W, x, b, N, K, mode, delta, nw, x_out, eps);
}
extern "C" __global__ void __launch_bounds__(32 * GEMV_ROWS) iris_gemv_bf16(bf16 *y, const bf16 *W, const bf16 *x, const bf16 *b, int N, int K,
                                                                            int mode, const bf16 *delta, const bf16 *nw, bf16 *x_out, float eps) {
    gemv(y, W, x, b, N, K, mode, delta, nw, x_out, eps);
}

// ---------------------------------------------------------------------------------------------
// sampling helpers

// Greedy choice over logits [n] F32 in one block of 1024 threads: out[0] = argmax (the first on
// ties, as torch.argmax), out[1] = the runner-up's index; vals[0], vals[1] their logits.
extern "C" __global__ void __launch_bounds__(1024) iris_argmax_top2(int *out, float *vals, const float *logits, int n) {
    __shared__ float bv[1024], sv[1024];
    __shared__ int bi[1024], si[1024];
    float b = -INFINITY, s2 = -INFINITY;
    int ib = 0x7fffffff, is = 0x7fffffff;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float v = logits[i];
        if (v > b) {
            s2 = b, is = ib;
            b = v, ib = i;
        } else if (v > s2) {
            s2 = v, is = i;
        }
    }
    bv[threadIdx.x] = b, bi[threadIdx.x] = ib, sv[threadIdx.x] = s2, si[threadIdx.x] = is;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
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
    if (threadIdx.x == 0) {
        out[0] = bi[0], out[1] = si[0];
        vals[0] = bv[0], vals[1] = sv[0];
    }
}
