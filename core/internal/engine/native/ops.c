// ops.c: the small steps between the matrix products, each next to the PyTorch line it mirrors
// (transformers 5.17, models/qwen2_5_vl/modeling_qwen2_5_vl.py). All in F32.
#include <math.h>
#include <string.h>

#include "internal.h"

// Qwen2_5_VLRMSNorm.forward:
//   variance = hidden_states.pow(2).mean(-1, keepdim=True)
//   hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
//   return self.weight * hidden_states
void rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    double ss = 0; // a double sum stays closer to torch's cascaded float sum than a naive float one
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float inv = 1.0f / sqrtf((float)(ss / n) + eps);
    for (int i = 0; i < n; i++) out[i] = w[i] * (x[i] * inv);
}

// Qwen2MLP / Qwen2_5_VLMLP: self.act_fn(self.gate_proj(x)) * self.up_proj(x), act_fn = silu
void silu_mul(float *gate, const float *up, int n) {
    for (int i = 0; i < n; i++) {
        float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

// nn.GELU() (approximate="none") in Qwen2_5_VLPatchMerger.mlp: x * 0.5 * (1 + erf(x / sqrt(2)))
void gelu_erf(float *x, int n) {
    for (int i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * (float)M_SQRT1_2));
}

// nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32)
void softmax(float *x, int n) {
    if (n <= 0) return;
    float mx = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > mx) mx = x[i];
    float sum = 0;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    float inv = 1.0f / sum;
    for (int i = 0; i < n; i++) x[i] *= inv;
}

// apply_rotary_pos_emb: q_embed = (q * cos) + (rotate_half(q) * sin), rotate_half(q) = [-q2, q1];
// cos and sin are the first halves of the duplicated tables.
void rope_rotate(float *q, const float *cos, const float *sin, int d) {
    int half = d / 2;
    for (int i = 0; i < half; i++) {
        float a = q[i], b = q[i + half];
        q[i] = a * cos[i] - b * sin[i];
        q[i + half] = b * cos[i] + a * sin[i];
    }
}

void bf16_to_f32(float *dst, const uint16_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)src[i] << 16;
        memcpy(&dst[i], &u, 4);
    }
}

void f16_to_f32(float *dst, const uint16_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t h = src[i];
        uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
        if (exp == 0) {
            if (man == 0) {
                u = sign;
            } else { // subnormal: renormalise
                exp = 127 - 15 + 1;
                while (!(man & 0x400)) {
                    man <<= 1;
                    exp--;
                }
                u = sign | exp << 23 | (man & 0x3ff) << 13;
            }
        } else if (exp == 31) {
            u = sign | 0x7f800000u | man << 13;
        } else {
            u = sign | (exp + 127 - 15) << 23 | man << 13;
        }
        memcpy(&dst[i], &u, 4);
    }
}

// ----------------------------------------------------------------------------
// the same steps over many rows, on the pool (prefill and the vision tower apply them to
// hundreds of rows; expf and erff are not free)

typedef enum { OP_RMSNORM, OP_SILU_MUL, OP_GELU, OP_ADD } row_op;

typedef struct {
    row_op op;
    float *out;
    const float *x, *w;
    int rows, n;
    float eps;
    int rows_per_task;
} rows_ctx;

static void rows_task(void *arg, int task, int thread) {
    (void)thread;
    rows_ctx *c = arg;
    int r0 = task * c->rows_per_task;
    int r1 = r0 + c->rows_per_task < c->rows ? r0 + c->rows_per_task : c->rows;
    for (int r = r0; r < r1; r++) {
        size_t o = (size_t)r * c->n;
        switch (c->op) {
        case OP_RMSNORM: rmsnorm(c->out + o, c->x + o, c->w, c->n, c->eps); break;
        case OP_SILU_MUL: silu_mul(c->out + o, c->x + o, c->n); break;
        case OP_GELU: gelu_erf(c->out + o, c->n); break;
        case OP_ADD:
            for (int i = 0; i < c->n; i++) c->out[o + i] += c->x[o + i];
            break;
        }
    }
}

static void run_rows(pool *p, rows_ctx *c) {
    if (c->rows <= 0) return;
    // tasks of at least ~16K elements, about four per thread
    int per = c->rows / (pool_threads(p) * 4);
    int min_rows = 16384 / (c->n > 0 ? c->n : 1);
    if (per < min_rows) per = min_rows;
    if (per < 1) per = 1;
    c->rows_per_task = per;
    pool_run(p, (c->rows + per - 1) / per, rows_task, c);
}

void rmsnorm_rows(pool *p, float *out, const float *x, const float *w, int rows, int n, float eps) {
    rows_ctx c = {OP_RMSNORM, out, x, w, rows, n, eps, 0};
    run_rows(p, &c);
}

void silu_mul_rows(pool *p, float *gate, const float *up, int rows, int n) {
    rows_ctx c = {OP_SILU_MUL, gate, up, NULL, rows, n, 0, 0};
    run_rows(p, &c);
}

void gelu_rows(pool *p, float *x, int rows, int n) {
    rows_ctx c = {OP_GELU, x, NULL, NULL, rows, n, 0, 0};
    run_rows(p, &c);
}

void add_rows(pool *p, float *y, const float *x, int rows, int n) {
    rows_ctx c = {OP_ADD, y, x, NULL, rows, n, 0, 0};
    run_rows(p, &c);
}
