// cpu.c: the API of iris_cpu.h: the backend handle, and the row ops and moves over strided rows
// on the pool. The products and attention are in kernels.c, the per-row arithmetic in ops.c.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

struct iris_cpu {
    pool *pool;
    kernels kn;
};

const char *iris_status_string(iris_status s) {
    switch (s) {
    case IRIS_OK: return "ok";
    case IRIS_ERR_INVALID: return "invalid argument";
    case IRIS_ERR_NOMEM: return "out of memory";
    case IRIS_ERR_THREADS: return "cannot start worker threads";
    }
    return "unknown status";
}

iris_status iris_cpu_new(int threads, int kernel_cap, iris_cpu **out) {
    if (!out || kernel_cap < IRIS_KERNELS_BEST || kernel_cap > IRIS_KERNELS_AVX512) return IRIS_ERR_INVALID;
    *out = NULL;
    if (threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (int)n : 1;
    }
    iris_cpu *c = calloc(1, sizeof(*c));
    if (!c) return IRIS_ERR_NOMEM;
    c->kn = kernels_detect((iris_kernels)kernel_cap);
    c->kn.wbuf = malloc((size_t)threads * KERNELS_WBUF * sizeof(float));
    c->pool = pool_new(threads);
    if (!c->kn.wbuf || !c->pool) {
        iris_status s = c->pool ? IRIS_ERR_NOMEM : IRIS_ERR_THREADS;
        iris_cpu_free(c);
        return s;
    }
    *out = c;
    return IRIS_OK;
}

void iris_cpu_free(iris_cpu *c) {
    if (!c) return;
    pool_free(c->pool);
    free(c->kn.wbuf);
    free(c);
}

const char *iris_cpu_kernels(const iris_cpu *c) { return kernels_name(&c->kn); }

void iris_linears(iris_cpu *c, const float *x, int ldx, int M, const iris_out *outs, int n_outs) {
    mat w[16];
    linear_out lo[16];
    if (n_outs > 16) n_outs = 16;
    for (int i = 0; i < n_outs; i++) {
        w[i] = (mat){(dtype)outs[i].dt, outs[i].w, outs[i].rows, outs[i].cols};
        lo[i] = (linear_out){&w[i], outs[i].b, outs[i].y, outs[i].ldy};
    }
    linear(c->pool, &c->kn, x, ldx, M, lo, n_outs);
}

iris_status iris_moe_forward(iris_cpu *c, float *y, int ldy, const float *x, int ldx, const float *add, int ldadd,
                             int rows, int hidden, const iris_moe *m) {
    return moe_forward(c->pool, &c->kn, y, ldy, x, ldx, add, ldadd, rows, hidden, m);
}

// ----------------------------------------------------------------------------
// row ops: prefill and the vision tower apply them to hundreds of rows (expf and erff are not
// free), so they run on the pool in chunks of rows

typedef enum { OP_RMSNORM, OP_LAYERNORM, OP_HEAD_RMSNORM, OP_SILU_MUL, OP_GELU, OP_GELU_TANH, OP_SCALE_COLS, OP_ROPE } row_op;

typedef struct {
    row_op op;
    const kernels *kn;
    float *y;
    int ldy;
    float *x;
    int ldx;
    const float *a; // delta, up, cos
    int lda;
    const float *w; // norm weight, sin
    const float *b; // norm bias
    float *xo;      // the norm's residual output
    int ldxo;
    int rows, n;
    int heads, hd;
    int rd; // rope: the leading dimensions of a head that rotate
    float eps;
    int rows_per_task;
} rows_ctx;

static void rows_task(void *arg, int task, int thread) {
    (void)thread;
    rows_ctx *c = arg;
    int r0 = task * c->rows_per_task;
    int r1 = r0 + c->rows_per_task < c->rows ? r0 + c->rows_per_task : c->rows;
    for (int r = r0; r < r1; r++) {
        float *y = c->y + (size_t)r * c->ldy;
        float *x = c->x ? c->x + (size_t)r * c->ldx : NULL;
        const float *a = c->a ? c->a + (size_t)r * c->lda : NULL;
        switch (c->op) {
        case OP_RMSNORM:
        case OP_LAYERNORM: {
            float *xo = c->xo + (size_t)r * c->ldxo;
            if (a)
                for (int i = 0; i < c->n; i++) xo[i] = x[i] + a[i];
            else if (xo != x)
                memmove(xo, x, (size_t)c->n * sizeof(float));
            if (c->op == OP_LAYERNORM)
                layernorm(y, xo, c->w, c->b, c->n, c->eps);
            else
                rmsnorm(y, xo, c->w, c->n, c->eps);
            break;
        }
        case OP_HEAD_RMSNORM:
            for (int h = 0; h < c->heads; h++) rmsnorm(y + (size_t)h * c->hd, y + (size_t)h * c->hd, c->w, c->hd, c->eps);
            break;
        case OP_SILU_MUL:
            if (y != x) memmove(y, x, (size_t)c->n * sizeof(float));
            silu_mul(c->kn, y, a, c->n);
            break;
        case OP_GELU: gelu_erf(y, c->n); break;
        case OP_GELU_TANH: gelu_tanh(y, c->n); break;
        case OP_SCALE_COLS: // x[r][c] *= w[c]: a per-column scale (LayerScale)
            for (int i = 0; i < c->n; i++) y[i] *= c->w[i];
            break;
        case OP_ROPE: {
            const float *sn = c->w + (size_t)r * c->lda;
            for (int h = 0; h < c->heads; h++) rope_rotate(y + (size_t)h * c->hd, a, sn, c->rd); // the first rd rotate
            break;
        }
        }
    }
}

static void run_rows(iris_cpu *cpu, rows_ctx *c) {
    if (c->rows <= 0) return;
    // tasks of at least ~16K elements, about four per thread
    int per = c->rows / (pool_threads(cpu->pool) * 4);
    int min_rows = 16384 / (c->n > 0 ? c->n : 1);
    if (per < min_rows) per = min_rows;
    if (per < 1) per = 1;
    c->rows_per_task = per;
    c->kn = &cpu->kn;
    pool_run(cpu->pool, (c->rows + per - 1) / per, rows_task, c);
}

void iris_rmsnorm(iris_cpu *c, float *y, int ldy, float *xo, int ldxo, const float *x, int ldx, const float *d, int ldd,
                  const float *w, int rows, int n, float eps) {
    rows_ctx r = {.op = OP_RMSNORM, .y = y, .ldy = ldy, .xo = xo, .ldxo = ldxo, .x = (float *)x, .ldx = ldx, .a = d, .lda = ldd,
                  .w = w, .rows = rows, .n = n, .eps = eps};
    run_rows(c, &r);
}

void iris_layernorm(iris_cpu *c, float *y, int ldy, float *xo, int ldxo, const float *x, int ldx, const float *d, int ldd,
                    const float *w, const float *b, int rows, int n, float eps) {
    rows_ctx r = {.op = OP_LAYERNORM, .y = y, .ldy = ldy, .xo = xo, .ldxo = ldxo, .x = (float *)x, .ldx = ldx, .a = d, .lda = ldd,
                  .w = w, .b = b, .rows = rows, .n = n, .eps = eps};
    run_rows(c, &r);
}

void iris_head_rmsnorm(iris_cpu *c, float *x, int ldx, int rows, int heads, int hd, const float *w, float eps) {
    rows_ctx r = {.op = OP_HEAD_RMSNORM, .y = x, .ldy = ldx, .w = w, .rows = rows, .n = heads * hd, .heads = heads, .hd = hd, .eps = eps};
    run_rows(c, &r);
}

void iris_silu_mul(iris_cpu *c, float *y, int ldy, const float *g, int ldg, const float *u, int ldu, int rows, int n) {
    rows_ctx r = {.op = OP_SILU_MUL, .y = y, .ldy = ldy, .x = (float *)g, .ldx = ldg, .a = u, .lda = ldu, .rows = rows, .n = n};
    run_rows(c, &r);
}

void iris_gelu(iris_cpu *c, float *x, int ldx, int rows, int n, int tanh) {
    rows_ctx r = {.op = tanh ? OP_GELU_TANH : OP_GELU, .y = x, .ldy = ldx, .rows = rows, .n = n};
    run_rows(c, &r);
}

void iris_scale_cols(iris_cpu *c, float *x, int ldx, int rows, int n, const float *w) {
    rows_ctx r = {.op = OP_SCALE_COLS, .y = x, .ldy = ldx, .w = w, .rows = rows, .n = n};
    run_rows(c, &r);
}

void iris_rope(iris_cpu *c, float *x, int ldx, int rows, int heads, int hd, int rd, const float *cos, const float *sin,
               int ldc) {
    rows_ctx r = {.op = OP_ROPE, .y = x, .ldy = ldx, .a = cos, .lda = ldc, .w = sin, .rows = rows, .n = heads * hd, .heads = heads, .hd = hd,
                  .rd = rd};
    run_rows(c, &r);
}

// ----------------------------------------------------------------------------
// row moves

void iris_embed(float *y, int ldy, int dt, const void *table, int ldt, int n, const int32_t *ids, int rows) {
    for (int i = 0; i < rows; i++) {
        float *dst = y + (size_t)i * ldy;
        if (dt == IRIS_BF16)
            bf16_to_f32(dst, (const uint16_t *)table + (size_t)ids[i] * ldt, (size_t)n);
        else
            memcpy(dst, (const float *)table + (size_t)ids[i] * ldt, (size_t)n * sizeof(float));
    }
}

void iris_gather(float *y, int ldy, const float *x, int ldx, int n, const int32_t *idx, int rows) {
    for (int i = 0; i < rows; i++) memcpy(y + (size_t)i * ldy, x + (size_t)idx[i] * ldx, (size_t)n * sizeof(float));
}

void iris_scatter(float *y, int ldy, const float *x, int ldx, int n, const int32_t *idx, int rows) {
    for (int i = 0; i < rows; i++) memcpy(y + (size_t)idx[i] * ldy, x + (size_t)i * ldx, (size_t)n * sizeof(float));
}

void iris_scatter_add(float *y, int ldy, const float *x, int ldx, int n, const int32_t *idx, int rows) {
    for (int i = 0; i < rows; i++) {
        float *dst = y + (size_t)idx[i] * ldy;
        const float *src = x + (size_t)i * ldx;
        for (int j = 0; j < n; j++) dst[j] += src[j];
    }
}

// a resampled position table: the weighted sum of a few table rows (F32 weights), then added
// to the row
void iris_embed_bag_add(float *y, int ldy, int dt, const void *table, int ldt, int n, const int32_t *ids, const float *w,
                        int ldw, int taps, int rows) {
    for (int i = 0; i < rows; i++) {
        float *dst = y + (size_t)i * ldy;
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int k = 0; k < taps; k++) {
                size_t at = (size_t)ids[(size_t)i * taps + k] * ldt + j;
                float t;
                if (dt == IRIS_BF16) {
                    uint32_t u = (uint32_t)((const uint16_t *)table)[at] << 16;
                    memcpy(&t, &u, 4);
                } else {
                    t = ((const float *)table)[at];
                }
                acc += t * w[(size_t)i * ldw + k];
            }
            dst[j] += acc;
        }
    }
}

iris_status iris_attention(iris_cpu *c, float *out, int ldo, const float *q, int ldq, const float *k, int ldk,
                           const float *v, int ldv, int nq, int nk, int heads, int kv_heads, int hd, int causal,
                           int q_off, int prefix, float scale, const int32_t *kmask, const iris_rel_pos *rel) {
    if (heads <= 0 || kv_heads <= 0 || heads % kv_heads || hd <= 0 || nq < 0 || nk < 0 || prefix < 0) return IRIS_ERR_INVALID;
    if (rel && (rel->height <= 0 || rel->width <= 0 || (long)rel->height * rel->width < nk)) return IRIS_ERR_INVALID;
    attn_job j = {q, k, v, out, ldq, ldk, ldv, ldo, nq, nk, heads, kv_heads, hd, causal, q_off, prefix, scale, kmask, rel};
    return attention(c->pool, &c->kn, &j);
}
