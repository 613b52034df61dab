// vision.c: the Qwen2.5-VL vision tower (Qwen2_5_VisionTransformerPretrainedModel) for one image:
// Conv3d patch embedding as a matmul, 2-D RoPE, window / full attention blocks, 2x2 merger.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

// window_index mirrors vision_utils.get_vision_window_index for one (t, h, w) grid: the merge
// units (2x2 patches) in window order, and the window boundaries in patches. Empty windows (the
// reference pads a whole extra window when a side divides evenly) add no boundary, as
// torch.unique_consecutive drops them. Returns the number of windows.
static int window_index(const iris_model_params *p, int gt, int gh, int gw, int *index, int *bounds) {
    int mh = gh / p->v_merge, mw = gw / p->v_merge, unit = p->v_merge * p->v_merge;
    int ws = p->v_window > 0 ? p->v_window / p->v_merge / p->v_patch : 0;
    int n = 0, nb = 0;
    if (ws <= 0) { // no window attention: one window per frame, identity order
        for (int t = 0; t < gt; t++) {
            for (int u = 0; u < mh * mw; u++) index[n] = n, n++;
            bounds[nb++] = n * unit;
        }
        return nb;
    }
    int nwh = (mh + ws - mh % ws) / ws, nww = (mw + ws - mw % ws) / ws;
    for (int t = 0; t < gt; t++) {
        for (int wh = 0; wh < nwh; wh++) {
            for (int ww = 0; ww < nww; ww++) {
                int before = n;
                for (int r = 0; r < ws; r++) {
                    for (int c = 0; c < ws; c++) {
                        int row = wh * ws + r, col = ww * ws + c;
                        if (row < mh && col < mw) index[n++] = t * mh * mw + row * mw + col;
                    }
                }
                if (n > before) bounds[nb++] = n * unit;
            }
        }
    }
    return nb;
}

typedef struct {
    float *x;     // (N, VH) residual stream, window order
    float *xn;    // (N, VH)
    float *qkv;   // (N, 3*VH)
    float *att;   // (N, VH)
    float *gate;  // (N, VI); reused by the merger
    float *up;    // (N, VI)
    float *cos;   // (N, vhd/2)
    float *sin;   // (N, vhd/2)
    int *index;   // (N/unit) window_index
    int *bounds;  // (N/unit) window ends, in patches
} vstate;

static void vfree(vstate *v) {
    free(v->x);
    free(v->xn);
    free(v->qkv);
    free(v->att);
    free(v->gate);
    free(v->up);
    free(v->cos);
    free(v->sin);
    free(v->index);
    free(v->bounds);
}

iris_status vision_forward(iris_model *m, const float *pixels, int N, int cols, int gt, int gh, int gw, float *out) {
    const iris_model_params *p = &m->p;
    const int VH = p->v_hidden, VI = p->v_intermediate, heads = p->v_heads, vhd = VH / heads;
    const int unit = p->v_merge * p->v_merge, units = N / unit, half = vhd / 2, quarter = vhd / 4;
    const int frame = gh * gw;

    vstate v = {0};
    size_t n = (size_t)N;
    size_t merged = (size_t)units * unit * VH; // merger input and hidden widths
    v.x = malloc(n * VH * sizeof(float));
    v.xn = malloc(n * VH * sizeof(float));
    v.qkv = malloc(n * 3 * VH * sizeof(float));
    v.att = malloc(n * VH * sizeof(float));
    v.gate = malloc((n * VI > merged ? n * VI : merged) * sizeof(float));
    v.up = malloc((n * VI > merged ? n * VI : merged) * sizeof(float));
    v.cos = malloc(n * half * sizeof(float));
    v.sin = malloc(n * half * sizeof(float));
    v.index = malloc((size_t)units * sizeof(int));
    v.bounds = malloc((size_t)(units + gt) * sizeof(int));
    if (!v.x || !v.xn || !v.qkv || !v.att || !v.gate || !v.up || !v.cos || !v.sin || !v.index || !v.bounds) {
        vfree(&v);
        return IRIS_ERR_NOMEM;
    }
    iris_status st = IRIS_OK;

    // hidden_states = self.patch_embed(hidden_states): Conv3d with kernel = stride = patch, i.e. a
    // matmul of each (C, T, P, P) row with the flattened kernel. Result in xn, original order.
    linear_out pe = {&m->patch_embed, NULL, v.xn, VH};
    linear(m->pool, &m->kn, pixels, cols, N, &pe, 1);

    // window_index, cu_window_seqlens = get_vision_window_index(...)
    int n_windows = window_index(p, gt, gh, gw, v.index, v.bounds);

    // hidden_states = self.permute_input_for_window_attn(hidden_states, window_index, seq_len)
    // and the same for the rotary tables. Positions from get_vision_position_ids: patches come
    // block-major over merge x merge blocks: (block row, block col, row in block, col in block).
    const int bw = gw / p->v_merge;
    for (int u = 0; u < units; u++) {
        int src_unit = v.index[u];
        for (int k = 0; k < unit; k++) {
            int dst = u * unit + k, src = src_unit * unit + k;
            memcpy(v.x + (size_t)dst * VH, v.xn + (size_t)src * VH, (size_t)VH * sizeof(float));
            int q = src % frame, block = q / unit, within = q % unit;
            int hpos = (block / bw) * p->v_merge + within / p->v_merge;
            int wpos = (block % bw) * p->v_merge + within % p->v_merge;
            // Qwen2_5_VLVisionRotaryEmbedding: freqs = position * inv_freq, laid out [h | w]
            for (int f = 0; f < quarter; f++) {
                float ah = (float)hpos * m->v_inv_freq[f], aw = (float)wpos * m->v_inv_freq[f];
                v.cos[(size_t)dst * half + f] = cosf(ah);
                v.sin[(size_t)dst * half + f] = sinf(ah);
                v.cos[(size_t)dst * half + quarter + f] = cosf(aw);
                v.sin[(size_t)dst * half + quarter + f] = sinf(aw);
            }
        }
    }

    const float scale = (float)(1.0 / sqrt((double)vhd));
    for (int l = 0; l < p->v_depth && st == IRIS_OK; l++) {
        const vision_block *B = &m->blocks[l];
        int full = p->v_window <= 0 || p->v_fullatt[l];

        // hidden_states + self.attn(self.norm1(hidden_states), cu_seqlens, position_embeddings)
        rmsnorm_rows(m->pool, v.xn, v.x, B->norm1, N, VH, p->v_eps);
        linear_out qkv = {&B->qkv, B->qkv_b, v.qkv, 3 * VH};
        linear(m->pool, &m->kn, v.xn, VH, N, &qkv, 1);
        // qkv(...).reshape(seq_length, 3, num_heads, -1): q, k, v at column offsets 0, VH, 2*VH
        for (int i = 0; i < N; i++) {
            const float *c = v.cos + (size_t)i * half, *s = v.sin + (size_t)i * half;
            float *row = v.qkv + (size_t)i * 3 * VH;
            for (int h = 0; h < heads; h++) {
                rope_rotate(row + h * vhd, c, s, vhd);
                rope_rotate(row + VH + h * vhd, c, s, vhd);
            }
        }
        // full blocks attend within each frame (cu_seqlens), the others within each window
        int n_chunks = full ? gt : n_windows;
        for (int ch = 0, start = 0; ch < n_chunks && st == IRIS_OK; ch++) {
            int end = full ? (ch + 1) * frame : v.bounds[ch];
            const float *base = v.qkv + (size_t)start * 3 * VH;
            attn_job aj = {base, base + VH, base + 2 * VH, v.att + (size_t)start * VH, 3 * VH, 3 * VH, 3 * VH, VH,
                           end - start, end - start, heads, heads, vhd, 0, 0, scale};
            st = attention(m->pool, &m->kn, &aj);
            start = end;
        }
        if (st != IRIS_OK) break;
        linear_out pr = {&B->proj, B->proj_b, v.xn, VH};
        linear(m->pool, &m->kn, v.att, VH, N, &pr, 1);
        add_rows(m->pool, v.x, v.xn, N, VH);

        // hidden_states + self.mlp(self.norm2(hidden_states)), SwiGLU with biases
        rmsnorm_rows(m->pool, v.xn, v.x, B->norm2, N, VH, p->v_eps);
        linear_out gu[2] = {{&B->gate, B->gate_b, v.gate, VI}, {&B->up, B->up_b, v.up, VI}};
        linear(m->pool, &m->kn, v.xn, VH, N, gu, 2);
        silu_mul_rows(m->pool, &m->kn, v.gate, v.up, N, VI);
        linear_out dn = {&B->down, B->down_b, v.xn, VH};
        linear(m->pool, &m->kn, v.gate, VI, N, &dn, 1);
        add_rows(m->pool, v.x, v.xn, N, VH);
    }

    if (st == IRIS_OK) {
        // Qwen2_5_VLPatchMerger: self.mlp(self.ln_q(x).view(-1, self.hidden_size)), mlp = Linear,
        // GELU, Linear. The unit's patches are adjacent rows, so the view is free.
        rmsnorm_rows(m->pool, v.xn, v.x, m->merger_norm, N, VH, p->v_eps);
        const int MH = unit * VH;
        linear_out f1 = {&m->merger_fc1, m->merger_b1, v.gate, MH};
        linear(m->pool, &m->kn, v.xn, MH, units, &f1, 1);
        gelu_rows(m->pool, v.gate, units, MH);
        linear_out f2 = {&m->merger_fc2, m->merger_b2, v.up, p->v_out_hidden};
        linear(m->pool, &m->kn, v.gate, MH, units, &f2, 1);
        // merged_hidden_states[reverse_indices, :]: unit u of the window order is token index[u]
        for (int u = 0; u < units; u++)
            memcpy(out + (size_t)v.index[u] * p->v_out_hidden, v.up + (size_t)u * p->v_out_hidden,
                   (size_t)p->v_out_hidden * sizeof(float));
    }
    vfree(&v);
    return st;
}
