// decoder.c: the Qwen2 text decoder (Qwen2_5_VLTextModel + lm_head) over a sequence's KV cache.
// One function runs both prefill (n tokens) and decode (n = 1).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct {
    float *x;    // (n, hidden) residual stream
    float *xn;   // (n, hidden) normed input of a sublayer, then its output
    float *q;    // (n, heads*hd)
    float *att;  // (n, heads*hd)
    float *gate; // (n, inter)
    float *up;   // (n, inter)
    float *cos;  // (n, hd/2)
    float *sin;  // (n, hd/2)
} run_state;

static void free_state(run_state *r) {
    free(r->x);
    free(r->xn);
    free(r->q);
    free(r->att);
    free(r->gate);
    free(r->up);
    free(r->cos);
    free(r->sin);
}

static iris_status alloc_state(run_state *r, const iris_model_params *p, int n) {
    memset(r, 0, sizeof(*r));
    size_t N = (size_t)n, qd = (size_t)p->heads * p->head_dim;
    r->x = malloc(N * p->hidden * sizeof(float));
    r->xn = malloc(N * p->hidden * sizeof(float));
    r->q = malloc(N * qd * sizeof(float));
    r->att = malloc(N * qd * sizeof(float));
    r->gate = malloc(N * p->intermediate * sizeof(float));
    r->up = malloc(N * p->intermediate * sizeof(float));
    r->cos = malloc(N * (p->head_dim / 2) * sizeof(float));
    r->sin = malloc(N * (p->head_dim / 2) * sizeof(float));
    if (!r->x || !r->xn || !r->q || !r->att || !r->gate || !r->up || !r->cos || !r->sin) {
        free_state(r);
        return IRIS_ERR_NOMEM;
    }
    return IRIS_OK;
}

static void embed_row(const mat *e, int id, float *out) {
    if (e->dt == DT_BF16)
        bf16_to_f32(out, (const uint16_t *)e->data + (size_t)id * e->cols, (size_t)e->cols);
    else
        memcpy(out, (const float *)e->data + (size_t)id * e->cols, (size_t)e->cols * sizeof(float));
}

iris_status decoder_forward(iris_model *m, iris_seq *s, const int32_t *ids, int n, const float *embeds,
                            const int32_t *embed_pos, int n_embeds, const int32_t *pos, float *logits) {
    const iris_model_params *p = &m->p;
    const int H = p->hidden, hd = p->head_dim, half = hd / 2, I = p->intermediate;
    const int qd = p->heads * hd, kvd = p->kv_heads * hd;
    const int past = s->len;
    run_state r;
    iris_status st = alloc_state(&r, p, n);
    if (st != IRIS_OK) return st;

    // inputs_embeds = self.get_input_embeddings()(input_ids);
    // inputs_embeds = inputs_embeds.masked_scatter(image_mask, image_embeds)
    for (int i = 0; i < n; i++) embed_row(&m->embed, ids[i], r.x + (size_t)i * H);
    for (int e = 0; e < n_embeds; e++)
        memcpy(r.x + (size_t)embed_pos[e] * H, embeds + (size_t)e * H, (size_t)H * sizeof(float));

    // Qwen2_5_VLRotaryEmbedding: freqs = inv_freq @ position_ids (F32), frequency f driven by
    // position row freq_axis[f]; cos/sin of the duplicated half are implied by rope_rotate.
    for (int i = 0; i < n; i++) {
        for (int f = 0; f < half; f++) {
            float angle = (float)pos[m->freq_axis[f] * n + i] * m->inv_freq[f];
            r.cos[(size_t)i * half + f] = cosf(angle);
            r.sin[(size_t)i * half + f] = sinf(angle);
        }
    }

    const float scale = (float)(1.0 / sqrt((double)hd)); // self.scaling = self.head_dim**-0.5
    for (int l = 0; l < p->layers; l++) {
        const text_layer *L = &m->layers[l];
        float *kc = s->k + (size_t)l * s->cap * kvd; // this layer's cache, rows [0, past + n)
        float *vc = s->v + (size_t)l * s->cap * kvd;
        float *knew = kc + (size_t)past * kvd, *vnew = vc + (size_t)past * kvd;

        // hidden_states = self.input_layernorm(hidden_states)
        rmsnorm_rows(m->pool, r.xn, r.x, L->attn_norm, n, H, p->rms_eps);
        // q/k/v = self.{q,k,v}_proj(hidden_states); k and v go straight into the cache
        linear_out qkv[3] = {{&L->wq, L->bq, r.q, qd}, {&L->wk, L->bk, knew, kvd}, {&L->wv, L->bv, vnew, kvd}};
        linear(m->pool, &m->kn, r.xn, H, n, qkv, 3);
        // query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        for (int i = 0; i < n; i++) {
            const float *c = r.cos + (size_t)i * half, *sn = r.sin + (size_t)i * half;
            for (int h = 0; h < p->heads; h++) rope_rotate(r.q + (size_t)i * qd + (size_t)h * hd, c, sn, hd);
            for (int h = 0; h < p->kv_heads; h++) rope_rotate(knew + (size_t)i * kvd + (size_t)h * hd, c, sn, hd);
        }
        // attn_output = softmax(q k^T * scaling + causal_mask) v, keys repeated per KV group
        attn_job aj = {r.q, kc, vc, r.att, qd, kvd, kvd, qd, n, past + n, p->heads, p->kv_heads, hd, 1, past, scale};
        st = attention(m->pool, &m->kn, &aj);
        if (st != IRIS_OK) break;
        // hidden_states = residual + self.o_proj(attn_output)
        linear_out o = {&L->wo, NULL, r.xn, H};
        linear(m->pool, &m->kn, r.att, qd, n, &o, 1);
        add_rows(m->pool, r.x, r.xn, n, H);

        // hidden_states = residual + self.mlp(self.post_attention_layernorm(hidden_states))
        rmsnorm_rows(m->pool, r.xn, r.x, L->mlp_norm, n, H, p->rms_eps);
        linear_out gu[2] = {{&L->gate, NULL, r.gate, I}, {&L->up, NULL, r.up, I}};
        linear(m->pool, &m->kn, r.xn, H, n, gu, 2);
        silu_mul_rows(m->pool, &m->kn, r.gate, r.up, n, I);
        linear_out d = {&L->down, NULL, r.xn, H};
        linear(m->pool, &m->kn, r.gate, I, n, &d, 1);
        add_rows(m->pool, r.x, r.xn, n, H);
    }

    if (st == IRIS_OK) {
        // hidden_states = self.norm(hidden_states); logits = self.lm_head(hidden_states[:, -1:, :])
        float *last = r.xn + (size_t)(n - 1) * H;
        rmsnorm(last, r.x + (size_t)(n - 1) * H, m->final_norm, H, p->rms_eps);
        linear_out lo = {&m->lm_head, NULL, logits, p->vocab};
        linear(m->pool, &m->kn, last, H, 1, &lo, 1);
        s->len = past + n;
    }
    free_state(&r);
    return st;
}
