// iris_cpu.h: the narrow C interface of Iris's CPU backend: the ops of core/internal/ml on
// float32 rows in host memory, run on a thread pool.
//
// Conventions (llama2.c / mtmd.h style):
//   - one opaque handle (iris_cpu: the pool and the chosen kernels) with *_new/*_free;
//   - no model, family or tensor name appears here: a family's forward pass is Go code that
//     calls these ops;
//   - matrices are row-major with an explicit row stride (ld, in elements); activations are
//     F32, weight matrices F32 or BF16 (used in place from a mapped file);
//   - the library never exits, never prints, and never keeps a pointer after a call returns;
//   - one call at a time per iris_cpu: each call uses the whole pool.
#ifndef IRIS_CPU_H
#define IRIS_CPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct iris_cpu iris_cpu;

// Status codes. 0 is success; every other value names one class of failure.
typedef enum {
    IRIS_OK = 0,
    IRIS_ERR_INVALID = 1, // an argument is out of range (a bug in the caller)
    IRIS_ERR_NOMEM = 7,   // an allocation failed
    IRIS_ERR_THREADS = 9, // worker threads could not be started
} iris_status;

// iris_status_string returns a static, lowercase description of s.
const char *iris_status_string(iris_status s);

// Matmul kernel sets, in increasing order; the backend uses the best its CPU has, up to the cap
// given to iris_cpu_new (tests pin each one).
typedef enum {
    IRIS_KERNELS_BEST = 0,    // whatever the CPU has
    IRIS_KERNELS_GENERIC = 1, // portable C
    IRIS_KERNELS_AVX2 = 2,    // AVX2 + FMA
    IRIS_KERNELS_AVX512 = 3,  // AVX-512F
} iris_kernels;

// Weight element types.
enum { IRIS_F32 = 0, IRIS_BF16 = 1 };

// iris_cpu_new starts a pool of threads (<= 0: one per online CPU, the caller included) and
// picks the kernels.
iris_status iris_cpu_new(int threads, int kernels, iris_cpu **out);
void iris_cpu_free(iris_cpu *c);
// iris_cpu_kernels names the matmul kernels in use: "avx512", "avx2" or "generic".
const char *iris_cpu_kernels(const iris_cpu *c);

// One output of iris_linears: y[i, j] = sum_k x[i, k] * w[j, k] + b[j], w (rows, cols) contiguous.
typedef struct {
    int dt;         // IRIS_F32 or IRIS_BF16
    const void *w;
    int rows, cols; // out features, in features
    const float *b; // may be NULL
    float *y;
    int ldy;
} iris_out;

// iris_linears computes every output for the M rows of x (they share x). n_outs <= 16.
void iris_linears(iris_cpu *c, const float *x, int ldx, int M, const iris_out *outs, int n_outs);

// Row ops over rows x n values.
// iris_rmsnorm: xo = x + d (x alone when d is NULL; xo may be x), then y = xo / rms(xo) * w.
void iris_rmsnorm(iris_cpu *c, float *y, int ldy, float *xo, int ldxo, const float *x, int ldx, const float *d, int ldd,
                  const float *w, int rows, int n, float eps);
// iris_layernorm: xo = x + d as iris_rmsnorm, then y = (xo - mean) / sqrt(var + eps) * w + b (b
// may be NULL).
void iris_layernorm(iris_cpu *c, float *y, int ldy, float *xo, int ldxo, const float *x, int ldx, const float *d, int ldd,
                    const float *w, const float *b, int rows, int n, float eps);
// iris_head_rmsnorm: each of the heads (hd values) of every row of x, in place: x / rms(x) * w.
void iris_head_rmsnorm(iris_cpu *c, float *x, int ldx, int rows, int heads, int hd, const float *w, float eps);
// iris_silu_mul: y = silu(g) * u.
void iris_silu_mul(iris_cpu *c, float *y, int ldy, const float *g, int ldg, const float *u, int ldu, int rows, int n);
// iris_gelu: x = gelu(x), the erf form (tanh = 0) or the tanh approximation (tanh = 1).
void iris_gelu(iris_cpu *c, float *x, int ldx, int rows, int n, int tanh);
// iris_scale_cols: x[i, j] *= w[j] (a LayerScale).
void iris_scale_cols(iris_cpu *c, float *x, int ldx, int rows, int n, const float *w);
// iris_rope rotates the heads (hd values apart) of each row of x by the row's angles: the first rd
// dimensions of each head (cos, sin: rd/2 values each), the rest left as they are.
void iris_rope(iris_cpu *c, float *x, int ldx, int rows, int heads, int hd, int rd, const float *cos, const float *sin,
               int ldc);

// Row moves. iris_embed: y row i = table row ids[i] (F32 or BF16, widened). iris_gather: y row i
// = x row idx[i]. iris_scatter: y row idx[i] = x row i. Indexes are not checked.
void iris_embed(float *y, int ldy, int dt, const void *table, int ldt, int n, const int32_t *ids, int rows);
void iris_gather(float *y, int ldy, const float *x, int ldx, int n, const int32_t *idx, int rows);
void iris_scatter(float *y, int ldy, const float *x, int ldx, int n, const int32_t *idx, int rows);
// iris_scatter_add: y row idx[i] += x row i.
void iris_scatter_add(float *y, int ldy, const float *x, int ldx, int n, const int32_t *idx, int rows);
// iris_embed_bag_add: y row i += sum over k < taps of w[i*ldw + k] * table row ids[i*taps + k]
// (table F32 or BF16), the sum in F32.
void iris_embed_bag_add(float *y, int ldy, int dt, const void *table, int ldt, int n, const int32_t *ids, const float *w,
                        int ldw, int taps, int rows);

// A decomposed relative-position bias (ml.RelPos): query row i's bias of key j under head h is
// h_bias[i*ld_h + h*height + j/width] + w_bias[i*ld_w + h*width + j%width].
typedef struct {
    const float *h_bias, *w_bias;
    int ld_h, ld_w, height, width;
} iris_rel_pos;

// iris_attention: out = softmax(q k^T * scale [+ bias] [+ causal mask]) v for every head; q has
// heads of hd values a row, k and v kv_heads (query head h reads key head h / (heads / kv_heads)).
// causal: query i sees keys [0, max(prefix, q_off + i + 1)); otherwise all nk keys. kmask: NULL,
// or nk flags, a key flagged 0 seen by no query (a query that sees none takes the mean of the
// values). rel: NULL, or a bias added to the scaled scores.
iris_status iris_attention(iris_cpu *c, float *out, int ldo, const float *q, int ldq, const float *k, int ldk,
                           const float *v, int ldv, int nq, int nk, int heads, int kv_heads, int hd, int causal,
                           int q_off, int prefix, float scale, const int32_t *kmask, const iris_rel_pos *rel);

// A mixture of experts (ml.MoE): router [experts, hidden] F32; gate_up [experts*2*inter, hidden]
// (expert e's gate rows then its up rows) and down [experts*hidden, inter], both of type dt.
typedef struct {
    const float *router;
    int dt;
    const void *gate_up, *down;
    int experts, topk, inter, groups, topgroups;
    float scale;
} iris_moe;

// iris_moe_forward sets y = the routed experts' weighted sum for each of the rows of x (hidden
// values each) plus add's row (add may be NULL; y may be add), as ml.MoE describes it.
iris_status iris_moe_forward(iris_cpu *c, float *y, int ldy, const float *x, int ldx, const float *add, int ldadd,
                             int rows, int hidden, const iris_moe *m);

#ifdef __cplusplus
}
#endif

#endif // IRIS_CPU_H
