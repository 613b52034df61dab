// iris_engine.h: the narrow C interface of Iris's CPU engine for vision-language models.
//
// Conventions (llama2.c / mtmd.h style):
//   - opaque handles with *_load/*_free and *_new/*_free pairs; every call returns an iris_status;
//   - no model family name appears here: the graph is described by iris_model_params, which the
//     caller fills from the checkpoint's config.json;
//   - the library never exits, never prints, and never keeps a pointer to caller memory after a
//     call returns;
//   - one call at a time per iris_model: the model owns a thread pool that each call uses fully.
//     Different models may be used from different threads at once.
#ifndef IRIS_ENGINE_H
#define IRIS_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct iris_model iris_model;
typedef struct iris_seq iris_seq;

// Status codes. 0 is success; every other value names one class of failure.
typedef enum {
    IRIS_OK = 0,
    IRIS_ERR_INVALID = 1,        // an argument is out of range (a bug in the caller)
    IRIS_ERR_IO = 2,             // a weight file could not be opened or mapped
    IRIS_ERR_FORMAT = 3,         // a weight file is not valid safetensors
    IRIS_ERR_MISSING_TENSOR = 4, // a tensor the graph needs is absent
    IRIS_ERR_SHAPE = 5,          // a tensor's shape disagrees with the params
    IRIS_ERR_DTYPE = 6,          // a tensor's dtype is not F32, BF16 or F16
    IRIS_ERR_NOMEM = 7,          // an allocation failed
    IRIS_ERR_CAPACITY = 8,       // the sequence has no room for the tokens
    IRIS_ERR_THREADS = 9,        // worker threads could not be started
} iris_status;

// iris_status_string returns a static, lowercase description of s.
const char *iris_status_string(iris_status s);

#define IRIS_MAX_BLOCKS 256

// The graph of a Qwen2-VL-style model: a ViT with 2-D RoPE, optional window attention and a
// patch merger, feeding a GQA decoder with sectioned multimodal RoPE.
typedef struct {
    // text decoder
    int hidden;           // d_model
    int layers;           // decoder layers
    int heads;            // query heads
    int kv_heads;         // key/value heads (GQA)
    int head_dim;         // per head; heads*head_dim need not equal hidden
    int intermediate;     // SwiGLU width
    int vocab;            // embedding rows
    float rms_eps;        // RMSNorm epsilon
    float rope_theta;     // RoPE base
    int mrope_section[3]; // frequencies per axis (t, h, w); sum = head_dim/2
    int tie_embeddings;   // 1: lm_head is embed_tokens (lm_head.weight may be absent)
    int qkv_bias;         // 1: q/k/v projections have a bias

    // vision tower (v_depth = 0: no vision tower)
    int v_depth;          // ViT blocks
    int v_hidden;         // ViT width
    int v_heads;          // ViT heads
    int v_intermediate;   // ViT SwiGLU width
    int v_in_channels;    // 3
    int v_patch;          // patch side in pixels (14)
    int v_temporal_patch; // frames per patch (2)
    int v_merge;          // merger side (2: 2x2 patches -> 1 token)
    int v_window;         // window side in pixels (112); 0: no window attention
    int v_out_hidden;     // merger output width (= hidden)
    float v_rope_theta;   // 2-D RoPE base
    float v_eps;          // ViT RMSNorm epsilon
    unsigned char v_fullatt[IRIS_MAX_BLOCKS]; // 1 where the block attends over the whole image

    // execution
    int threads; // worker threads incl. the caller; <= 0: one per online CPU
    int kernels; // the best matmul kernels allowed: one of iris_kernels
} iris_model_params;

// Matmul kernel sets, in increasing order; a model uses the best its CPU has, up to the cap
// given in iris_model_params.kernels (tests pin each one).
typedef enum {
    IRIS_KERNELS_BEST = 0,    // whatever the CPU has
    IRIS_KERNELS_GENERIC = 1, // portable C
    IRIS_KERNELS_AVX2 = 2,    // AVX2 + FMA
    IRIS_KERNELS_AVX512 = 3,  // AVX-512F
} iris_kernels;

// iris_model_params_default returns params with every size zero and threads/kernels at their
// defaults; the caller fills the graph.
iris_model_params iris_model_params_default(void);

// iris_model_load maps the safetensors shards and binds the weights the params describe. BF16
// and F32 matrices are used in place; F16 matrices and all vectors are converted to F32. On
// failure *out is NULL and err (if not NULL) holds a message naming the tensor or file.
iris_status iris_model_load(const char *const *paths, int n_paths, const iris_model_params *p,
                            iris_model **out, char *err, size_t err_len);

// iris_model_free releases everything the model owns. NULL is allowed.
void iris_model_free(iris_model *m);

// iris_model_kernels names the matmul kernels in use: "avx512", "avx2" or "generic".
const char *iris_model_kernels(const iris_model *m);

// iris_vision_encode runs the vision tower on one image.
//   pixels: [rows, cols] float32, rows = t*h*w patches in merge-block order (as the HF
//           processor emits them), cols = in_channels*temporal_patch*patch*patch
//   out:    [rows/(merge*merge), v_out_hidden] float32, in the same order as the placeholder
//           tokens of the prompt
iris_status iris_vision_encode(iris_model *m, const float *pixels, int rows, int cols, int grid_t,
                               int grid_h, int grid_w, float *out);

// iris_seq_new allocates a sequence (its KV cache) with room for capacity tokens.
iris_status iris_seq_new(iris_model *m, int capacity, iris_seq **out);
void iris_seq_free(iris_seq *s);
int iris_seq_len(const iris_seq *s);
void iris_seq_reset(iris_seq *s);

// iris_prefill appends n tokens to the sequence and returns the logits of the last one.
//   ids:     [n] token ids; their embeddings are looked up
//   embeds:  [n_embeds, hidden] rows that replace the embeddings at positions embed_pos
//            (e.g. image features at the image placeholder tokens); may be NULL when n_embeds=0
//   pos:     [3, n] rotary positions (t, h, w rows)
//   logits:  [vocab]
iris_status iris_prefill(iris_model *m, iris_seq *s, const int32_t *ids, int n, const float *embeds,
                         const int32_t *embed_pos, int n_embeds, const int32_t *pos, float *logits);

// iris_decode appends one token at rotary position pos (all three axes) and returns its logits.
iris_status iris_decode(iris_model *m, iris_seq *s, int32_t token, int32_t pos, float *logits);

#ifdef __cplusplus
}
#endif

#endif // IRIS_ENGINE_H
