// iris_engine.c: the API of iris_engine.h: load (map shards, bind weights by name, check shapes),
// sequences, and the argument checks in front of vision.c and decoder.c.
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

const char *iris_status_string(iris_status s) {
    switch (s) {
    case IRIS_OK: return "ok";
    case IRIS_ERR_INVALID: return "invalid argument";
    case IRIS_ERR_IO: return "cannot read weight file";
    case IRIS_ERR_FORMAT: return "malformed safetensors file";
    case IRIS_ERR_MISSING_TENSOR: return "missing tensor";
    case IRIS_ERR_SHAPE: return "tensor shape does not match the config";
    case IRIS_ERR_DTYPE: return "unsupported tensor dtype";
    case IRIS_ERR_NOMEM: return "out of memory";
    case IRIS_ERR_CAPACITY: return "sequence capacity exceeded";
    case IRIS_ERR_THREADS: return "cannot start worker threads";
    }
    return "unknown status";
}

iris_model_params iris_model_params_default(void) {
    iris_model_params p;
    memset(&p, 0, sizeof(p));
    p.rms_eps = 1e-6f;
    p.v_eps = 1e-6f;
    p.qkv_bias = 1;
    p.threads = 0;
    return p;
}

const char *iris_model_kernels(const iris_model *m) { return kernels_name(&m->kn); }

// ----------------------------------------------------------------------------
// loading

typedef struct {
    iris_model *m;
    char *err;
    size_t err_len;
} binder;

static iris_status failf(binder *b, iris_status s, const char *fmt, ...) {
    if (b->err && b->err_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(b->err, b->err_len, fmt, ap);
        va_end(ap);
    }
    return s;
}

static void *own(iris_model *m, size_t bytes) {
    if (m->n_owned == m->cap_owned) {
        int cap = m->cap_owned ? m->cap_owned * 2 : 256;
        void **n = realloc(m->owned, (size_t)cap * sizeof(void *));
        if (!n) return NULL;
        m->owned = n;
        m->cap_owned = cap;
    }
    void *p = malloc(bytes ? bytes : 1);
    if (p) m->owned[m->n_owned++] = p;
    return p;
}

// find looks a tensor up under each prefix in turn (HF hub names first, then transformers 5
// module paths), e.g. "model." + "layers.0.mlp.up_proj.weight".
static const st_tensor *find(iris_model *m, const char *const *prefixes, const char *name, char *full, size_t full_len) {
    for (int p = 0; prefixes[p]; p++) {
        snprintf(full, full_len, "%s%s", prefixes[p], name);
        for (int f = 0; f < m->n_files; f++)
            for (int i = 0; i < m->files[f].n; i++)
                if (strcmp(m->files[f].tensors[i].name, full) == 0) return &m->files[f].tensors[i];
    }
    snprintf(full, full_len, "%s%s", prefixes[0], name);
    return NULL;
}

static const char *const TEXT[] = {"model.", "model.language_model.", NULL};
static const char *const VISION[] = {"visual.", "model.visual.", NULL};
static const char *const ROOT[] = {"", NULL};

static int64_t numel(const st_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

// bind_mat binds a (rows, cols) weight; trailing dimensions are flattened into cols (the Conv3d
// patch kernel). BF16 and F32 stay in the mapping; F16 is widened once.
static iris_status bind_mat(binder *b, mat *out, const char *const *pre, int rows, int cols, const char *fmt, ...) {
    char name[256], full[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    const st_tensor *t = find(b->m, pre, name, full, sizeof full);
    if (!t) return failf(b, IRIS_ERR_MISSING_TENSOR, "missing tensor %s", full);
    if (t->ndim < 2 || t->shape[0] != rows || numel(t) != (int64_t)rows * cols)
        return failf(b, IRIS_ERR_SHAPE, "tensor %s: shape does not match (%d, %d)", full, rows, cols);
    out->rows = rows;
    out->cols = cols;
    if (t->dt == DT_F16) {
        float *f = own(b->m, (size_t)rows * cols * sizeof(float));
        if (!f) return IRIS_ERR_NOMEM;
        f16_to_f32(f, t->data, (size_t)rows * cols);
        out->dt = DT_F32;
        out->data = f;
    } else {
        out->dt = t->dt;
        out->data = t->data;
    }
    return IRIS_OK;
}

// bind_vec copies a (n) vector (a bias or a norm weight) into F32.
static iris_status bind_vec(binder *b, float **out, const char *const *pre, int n, const char *fmt, ...) {
    char name[256], full[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    const st_tensor *t = find(b->m, pre, name, full, sizeof full);
    if (!t) return failf(b, IRIS_ERR_MISSING_TENSOR, "missing tensor %s", full);
    if (t->ndim != 1 || t->shape[0] != n) return failf(b, IRIS_ERR_SHAPE, "tensor %s: shape does not match (%d)", full, n);
    float *f = own(b->m, (size_t)n * sizeof(float));
    if (!f) return IRIS_ERR_NOMEM;
    if (t->dt == DT_F32)
        memcpy(f, t->data, (size_t)n * sizeof(float));
    else if (t->dt == DT_BF16)
        bf16_to_f32(f, t->data, (size_t)n);
    else
        f16_to_f32(f, t->data, (size_t)n);
    *out = f;
    return IRIS_OK;
}

#define TRY(x)                                                                                                   \
    do {                                                                                                         \
        iris_status s_ = (x);                                                                                    \
        if (s_ != IRIS_OK) return s_;                                                                            \
    } while (0)

static iris_status check_params(binder *b, const iris_model_params *p) {
    if (p->hidden <= 0 || p->layers <= 0 || p->heads <= 0 || p->kv_heads <= 0 || p->head_dim <= 0 ||
        p->intermediate <= 0 || p->vocab <= 0)
        return failf(b, IRIS_ERR_INVALID, "text sizes must be positive");
    if (p->heads % p->kv_heads != 0) return failf(b, IRIS_ERR_INVALID, "heads %d not a multiple of kv_heads %d", p->heads, p->kv_heads);
    if (p->head_dim % 2 != 0) return failf(b, IRIS_ERR_INVALID, "head_dim %d is odd", p->head_dim);
    int sec = 0;
    for (int i = 0; i < 3; i++) {
        if (p->mrope_section[i] < 0) return failf(b, IRIS_ERR_INVALID, "negative mrope section");
        sec += p->mrope_section[i];
    }
    if (sec != p->head_dim / 2)
        return failf(b, IRIS_ERR_INVALID, "mrope sections sum to %d, want head_dim/2 = %d", sec, p->head_dim / 2);
    if (!(p->rms_eps > 0) || !(p->rope_theta > 0)) return failf(b, IRIS_ERR_INVALID, "rms_eps and rope_theta must be positive");
    if (p->kernels < IRIS_KERNELS_BEST || p->kernels > IRIS_KERNELS_AVX512) return failf(b, IRIS_ERR_INVALID, "unknown kernels %d", p->kernels);
    if (p->v_depth == 0) return IRIS_OK;
    if (p->v_depth < 0 || p->v_depth > IRIS_MAX_BLOCKS || p->v_hidden <= 0 || p->v_heads <= 0 || p->v_intermediate <= 0 ||
        p->v_in_channels <= 0 || p->v_patch <= 0 || p->v_temporal_patch <= 0 || p->v_merge <= 0 || p->v_out_hidden <= 0 ||
        p->v_window < 0)
        return failf(b, IRIS_ERR_INVALID, "vision sizes out of range");
    if (p->v_hidden % p->v_heads != 0 || (p->v_hidden / p->v_heads) % 4 != 0)
        return failf(b, IRIS_ERR_INVALID, "vision head_dim must be a multiple of 4");
    if (p->v_window > 0 && p->v_window % (p->v_patch * p->v_merge) != 0)
        return failf(b, IRIS_ERR_INVALID, "window %d is not a multiple of patch*merge", p->v_window);
    if (p->v_out_hidden != p->hidden) return failf(b, IRIS_ERR_INVALID, "vision output width %d != hidden %d", p->v_out_hidden, p->hidden);
    if (!(p->v_eps > 0) || !(p->v_rope_theta > 0)) return failf(b, IRIS_ERR_INVALID, "vision eps and rope_theta must be positive");
    return IRIS_OK;
}

// inv_freq mirrors compute_default_rope_parameters in F32:
//   inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))
static void inv_freqs(float *out, int n, int dim, float base) {
    for (int i = 0; i < n; i++) {
        float e = (float)(2 * i) / (float)dim;
        out[i] = 1.0f / (float)pow((double)base, (double)e);
    }
}

static iris_status bind(binder *b) {
    iris_model *m = b->m;
    const iris_model_params *p = &m->p;
    int H = p->hidden, hd = p->head_dim, I = p->intermediate;
    int q_dim = p->heads * hd, kv_dim = p->kv_heads * hd;

    TRY(bind_mat(b, &m->embed, TEXT, p->vocab, H, "embed_tokens.weight"));
    if (p->tie_embeddings) {
        m->lm_head = m->embed;
    } else {
        TRY(bind_mat(b, &m->lm_head, ROOT, p->vocab, H, "lm_head.weight"));
    }
    m->layers = own(m, (size_t)p->layers * sizeof(text_layer));
    if (!m->layers) return IRIS_ERR_NOMEM;
    memset(m->layers, 0, (size_t)p->layers * sizeof(text_layer));
    for (int l = 0; l < p->layers; l++) {
        text_layer *L = &m->layers[l];
        TRY(bind_vec(b, &L->attn_norm, TEXT, H, "layers.%d.input_layernorm.weight", l));
        TRY(bind_mat(b, &L->wq, TEXT, q_dim, H, "layers.%d.self_attn.q_proj.weight", l));
        TRY(bind_mat(b, &L->wk, TEXT, kv_dim, H, "layers.%d.self_attn.k_proj.weight", l));
        TRY(bind_mat(b, &L->wv, TEXT, kv_dim, H, "layers.%d.self_attn.v_proj.weight", l));
        TRY(bind_mat(b, &L->wo, TEXT, H, q_dim, "layers.%d.self_attn.o_proj.weight", l));
        if (p->qkv_bias) {
            TRY(bind_vec(b, &L->bq, TEXT, q_dim, "layers.%d.self_attn.q_proj.bias", l));
            TRY(bind_vec(b, &L->bk, TEXT, kv_dim, "layers.%d.self_attn.k_proj.bias", l));
            TRY(bind_vec(b, &L->bv, TEXT, kv_dim, "layers.%d.self_attn.v_proj.bias", l));
        }
        TRY(bind_vec(b, &L->mlp_norm, TEXT, H, "layers.%d.post_attention_layernorm.weight", l));
        TRY(bind_mat(b, &L->gate, TEXT, I, H, "layers.%d.mlp.gate_proj.weight", l));
        TRY(bind_mat(b, &L->up, TEXT, I, H, "layers.%d.mlp.up_proj.weight", l));
        TRY(bind_mat(b, &L->down, TEXT, H, I, "layers.%d.mlp.down_proj.weight", l));
    }
    TRY(bind_vec(b, &m->final_norm, TEXT, H, "norm.weight"));

    m->inv_freq = own(m, (size_t)(hd / 2) * sizeof(float));
    m->freq_axis = own(m, (size_t)(hd / 2) * sizeof(int));
    if (!m->inv_freq || !m->freq_axis) return IRIS_ERR_NOMEM;
    inv_freqs(m->inv_freq, hd / 2, hd, p->rope_theta);
    // Qwen2_5_VLRotaryEmbedding.recomposition_frequencies: freq.split(mrope_section) takes chunk i
    // from position row i % 3.
    for (int i = 0, f = 0; i < 3; i++)
        for (int j = 0; j < p->mrope_section[i]; j++) m->freq_axis[f++] = i;

    if (p->v_depth == 0) return IRIS_OK;
    int VH = p->v_hidden, VI = p->v_intermediate, vhd = VH / p->v_heads;
    int patch_in = p->v_in_channels * p->v_temporal_patch * p->v_patch * p->v_patch;
    int unit = p->v_merge * p->v_merge;
    TRY(bind_mat(b, &m->patch_embed, VISION, VH, patch_in, "patch_embed.proj.weight"));
    m->blocks = own(m, (size_t)p->v_depth * sizeof(vision_block));
    if (!m->blocks) return IRIS_ERR_NOMEM;
    memset(m->blocks, 0, (size_t)p->v_depth * sizeof(vision_block));
    for (int l = 0; l < p->v_depth; l++) {
        vision_block *B = &m->blocks[l];
        TRY(bind_vec(b, &B->norm1, VISION, VH, "blocks.%d.norm1.weight", l));
        TRY(bind_vec(b, &B->norm2, VISION, VH, "blocks.%d.norm2.weight", l));
        TRY(bind_mat(b, &B->qkv, VISION, 3 * VH, VH, "blocks.%d.attn.qkv.weight", l));
        TRY(bind_vec(b, &B->qkv_b, VISION, 3 * VH, "blocks.%d.attn.qkv.bias", l));
        TRY(bind_mat(b, &B->proj, VISION, VH, VH, "blocks.%d.attn.proj.weight", l));
        TRY(bind_vec(b, &B->proj_b, VISION, VH, "blocks.%d.attn.proj.bias", l));
        TRY(bind_mat(b, &B->gate, VISION, VI, VH, "blocks.%d.mlp.gate_proj.weight", l));
        TRY(bind_vec(b, &B->gate_b, VISION, VI, "blocks.%d.mlp.gate_proj.bias", l));
        TRY(bind_mat(b, &B->up, VISION, VI, VH, "blocks.%d.mlp.up_proj.weight", l));
        TRY(bind_vec(b, &B->up_b, VISION, VI, "blocks.%d.mlp.up_proj.bias", l));
        TRY(bind_mat(b, &B->down, VISION, VH, VI, "blocks.%d.mlp.down_proj.weight", l));
        TRY(bind_vec(b, &B->down_b, VISION, VH, "blocks.%d.mlp.down_proj.bias", l));
    }
    TRY(bind_vec(b, &m->merger_norm, VISION, VH, "merger.ln_q.weight"));
    TRY(bind_mat(b, &m->merger_fc1, VISION, unit * VH, unit * VH, "merger.mlp.0.weight"));
    TRY(bind_vec(b, &m->merger_b1, VISION, unit * VH, "merger.mlp.0.bias"));
    TRY(bind_mat(b, &m->merger_fc2, VISION, p->v_out_hidden, unit * VH, "merger.mlp.2.weight"));
    TRY(bind_vec(b, &m->merger_b2, VISION, p->v_out_hidden, "merger.mlp.2.bias"));
    // Qwen2_5_VLVisionRotaryEmbedding: dim = head_dim // 2, inv_freq over arange(0, dim, 2)
    m->v_inv_freq = own(m, (size_t)(vhd / 4) * sizeof(float));
    if (!m->v_inv_freq) return IRIS_ERR_NOMEM;
    inv_freqs(m->v_inv_freq, vhd / 4, vhd / 2, p->v_rope_theta);
    return IRIS_OK;
}

iris_status iris_model_load(const char *const *paths, int n_paths, const iris_model_params *p, iris_model **out,
                            char *err, size_t err_len) {
    if (!out) return IRIS_ERR_INVALID;
    *out = NULL;
    if (err && err_len) err[0] = 0;
    if (!paths || n_paths <= 0 || !p) return IRIS_ERR_INVALID;
    iris_model *m = calloc(1, sizeof(*m));
    if (!m) return IRIS_ERR_NOMEM;
    m->p = *p;
    binder b = {m, err, err_len};
    iris_status s = check_params(&b, p);
    if (s == IRIS_OK) {
        m->files = calloc((size_t)n_paths, sizeof(st_file));
        if (!m->files) s = IRIS_ERR_NOMEM;
    }
    for (int i = 0; s == IRIS_OK && i < n_paths; i++) {
        s = st_open(paths[i], &m->files[i], err, err_len);
        if (s == IRIS_OK) m->n_files++;
    }
    if (s == IRIS_OK) s = bind(&b);
    if (s == IRIS_OK) {
        m->kn = kernels_detect((iris_kernels)p->kernels);
        int threads = p->threads;
        if (threads <= 0) {
            long n = sysconf(_SC_NPROCESSORS_ONLN);
            threads = n > 0 ? (int)n : 1;
        }
        m->pool = pool_new(threads);
        if (!m->pool) s = failf(&b, IRIS_ERR_THREADS, "cannot start %d threads", threads);
        if (s == IRIS_OK && !(m->kn.wbuf = own(m, (size_t)threads * KERNELS_WBUF * sizeof(float)))) s = IRIS_ERR_NOMEM;
    }
    if (s != IRIS_OK) {
        if (err && err_len && !err[0]) snprintf(err, err_len, "%s", iris_status_string(s));
        iris_model_free(m);
        return s;
    }
    *out = m;
    return IRIS_OK;
}

void iris_model_free(iris_model *m) {
    if (!m) return;
    pool_free(m->pool);
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    for (int i = 0; i < m->n_files; i++) st_close(&m->files[i]);
    free(m->files);
    free(m);
}

// ----------------------------------------------------------------------------
// running

iris_status iris_vision_encode(iris_model *m, const float *pixels, int rows, int cols, int grid_t, int grid_h,
                               int grid_w, float *out) {
    if (!m || !pixels || !out) return IRIS_ERR_INVALID;
    const iris_model_params *p = &m->p;
    if (p->v_depth == 0) return IRIS_ERR_INVALID;
    if (grid_t <= 0 || grid_h <= 0 || grid_w <= 0 || grid_h % p->v_merge || grid_w % p->v_merge) return IRIS_ERR_INVALID;
    if ((int64_t)grid_t * grid_h * grid_w != rows) return IRIS_ERR_INVALID;
    if (cols != p->v_in_channels * p->v_temporal_patch * p->v_patch * p->v_patch) return IRIS_ERR_INVALID;
    return vision_forward(m, pixels, rows, cols, grid_t, grid_h, grid_w, out);
}

iris_status iris_seq_new(iris_model *m, int capacity, iris_seq **out) {
    if (!out) return IRIS_ERR_INVALID;
    *out = NULL;
    if (!m || capacity <= 0) return IRIS_ERR_INVALID;
    iris_seq *s = calloc(1, sizeof(*s));
    if (!s) return IRIS_ERR_NOMEM;
    size_t n = (size_t)m->p.layers * (size_t)capacity * (size_t)(m->p.kv_heads * m->p.head_dim);
    s->k = malloc(n * sizeof(float));
    s->v = malloc(n * sizeof(float));
    if (!s->k || !s->v) {
        iris_seq_free(s);
        return IRIS_ERR_NOMEM;
    }
    s->m = m;
    s->cap = capacity;
    *out = s;
    return IRIS_OK;
}

void iris_seq_free(iris_seq *s) {
    if (!s) return;
    free(s->k);
    free(s->v);
    free(s);
}

int iris_seq_len(const iris_seq *s) { return s ? s->len : 0; }

void iris_seq_reset(iris_seq *s) {
    if (s) s->len = 0;
}

iris_status iris_prefill(iris_model *m, iris_seq *s, const int32_t *ids, int n, const float *embeds,
                         const int32_t *embed_pos, int n_embeds, const int32_t *pos, float *logits) {
    if (!m || !s || s->m != m || !ids || n <= 0 || !pos || !logits || n_embeds < 0) return IRIS_ERR_INVALID;
    if (n_embeds > 0 && (!embeds || !embed_pos)) return IRIS_ERR_INVALID;
    if (n > s->cap - s->len) return IRIS_ERR_CAPACITY;
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->p.vocab) return IRIS_ERR_INVALID;
    for (int i = 0; i < n_embeds; i++)
        if (embed_pos[i] < 0 || embed_pos[i] >= n || (i > 0 && embed_pos[i] <= embed_pos[i - 1])) return IRIS_ERR_INVALID;
    return decoder_forward(m, s, ids, n, embeds, embed_pos, n_embeds, pos, logits);
}

iris_status iris_decode(iris_model *m, iris_seq *s, int32_t token, int32_t pos, float *logits) {
    if (!m || !s || s->m != m || !logits || token < 0 || token >= m->p.vocab) return IRIS_ERR_INVALID;
    if (s->len >= s->cap) return IRIS_ERR_CAPACITY;
    int32_t p3[3] = {pos, pos, pos};
    return decoder_forward(m, s, &token, 1, NULL, NULL, 0, p3, logits);
}
