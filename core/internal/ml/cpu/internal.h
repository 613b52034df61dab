// internal.h: what the engine's C files share. Nothing here is part of the API.
#ifndef IRIS_INTERNAL_H
#define IRIS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "iris_cpu.h"

// ----------------------------------------------------------------------------
// thread pool (threads.c)

typedef struct pool pool;
// pool_fn runs one task of a parallel loop; ctx is shared by every task and thread (in
// [0, pool_threads)) names the thread running it, for per-thread scratch.
typedef void (*pool_fn)(void *ctx, int task, int thread);

pool *pool_new(int threads);
void pool_free(pool *p);
int pool_threads(const pool *p);
// pool_run calls fn(ctx, t, thread) for every t in [0, tasks) on the pool's threads and the caller, and
// returns when all are done.
void pool_run(pool *p, int tasks, pool_fn fn, void *ctx);

// ----------------------------------------------------------------------------
// kernels (kernels.c): the hot loops, AVX-512 or AVX2/FMA where the CPU has them, portable C
// otherwise

typedef enum { DT_F32 = IRIS_F32, DT_BF16 = IRIS_BF16 } dtype;

// mat is a weight matrix as torch.nn.Linear stores it: rows = out features, cols = in features,
// row-major, used in place from the mapping (F32 or BF16).
typedef struct {
    dtype dt;
    const void *data;
    int rows, cols;
} mat;

// kernels is the chosen kernel set and its scratch; the model owns one.
typedef struct {
    iris_kernels level; // GENERIC, AVX2 or AVX512: never BEST
    float *wbuf;        // (threads, KERNELS_WBUF) per-thread scratch for packed weight blocks
} kernels;

// KERNELS_WBUF is the per-thread scratch (in floats) a prefill packs a block of weights into,
// widened to F32, once for all the rows of x.
#define KERNELS_WBUF (64 * 512)

// kernels_detect picks the best kernels the CPU runs, no better than cap (BEST: no cap).
kernels kernels_detect(iris_kernels cap);
const char *kernels_name(const kernels *kn);

// One output of a linear job: y[i, j] = sum_k x[i, k] * w[j, k] + b[j].
typedef struct {
    const mat *w;
    const float *b; // may be NULL
    float *y;       // [M, w->rows] with row stride ldy
    int ldy;
} linear_out;

// linear runs y = x W^T + b for each output (they share x [M, K], row stride ldx) on the pool.
// This is where the time goes.
void linear(pool *p, const kernels *kn, const float *x, int ldx, int M, const linear_out *outs, int n_outs);

// ----------------------------------------------------------------------------
// ops (ops.c): small elementwise and normalisation steps, each citing its PyTorch line

void rmsnorm(float *out, const float *x, const float *w, int n, float eps);
void silu_mul(const kernels *kn, float *gate, const float *up, int n);
void gelu_erf(float *x, int n);
void gelu_tanh(float *x, int n);
void layernorm(float *out, const float *x, const float *w, const float *b, int n, float eps);
void softmax(const kernels *kn, float *x, int n);
void bf16_to_f32(float *dst, const uint16_t *src, size_t n);
void f16_to_f32(float *dst, const uint16_t *src, size_t n);
// rope_rotate applies q*cos + rotate_half(q)*sin to one head of dim d; cos/sin hold d/2 values
// (the duplicated second half is implied).
void rope_rotate(float *q, const float *cos, const float *sin, int d);

// attention runs softmax(q k^T * scale) v for one sequence chunk on the pool (kernels.c).
//   q: [nq, heads] rows of head_dim at stride ldq; k, v: [nk, kv_heads] rows at ldk, ldv
//   out: [nq, heads*head_dim] at stride ldo
//   causal: query i sees keys [0, max(prefix, q_off + i + 1)); otherwise all nk keys
//   kmask: NULL, or one flag a key: a key flagged 0 is seen by no query (ml.Mask.Keys)
//   rel: NULL, or a decomposed relative-position bias added to the scaled scores (ml.Mask.RelPos)
typedef struct {
    const float *q, *k, *v;
    float *out;
    int ldq, ldk, ldv, ldo;
    int nq, nk, heads, kv_heads, head_dim;
    int causal, q_off, prefix;
    float scale;
    const int32_t *kmask;
    const iris_rel_pos *rel;
} attn_job;
iris_status attention(pool *p, const kernels *kn, const attn_job *job);

// ----------------------------------------------------------------------------
// mixture of experts (moe.c)

iris_status moe_forward(pool *p, const kernels *kn, float *y, int ldy, const float *x, int ldx, const float *add, int ldadd,
                        int rows, int hidden, const iris_moe *m);

#endif // IRIS_INTERNAL_H
