// ops.c: the small steps between the matrix products, each next to the PyTorch line it mirrors
// (transformers 5.17's RMSNorm, MLP and rotary modules). All in F32.
#include <math.h>
#include <string.h>

#include "internal.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define HAVE_X86 1
#define AVX2 __attribute__((target("avx2,fma")))
#else
#define HAVE_X86 0
#endif

// RMSNorm.forward (the *RMSNorm modules of transformers' decoders and towers):
//   variance = hidden_states.pow(2).mean(-1, keepdim=True)
//   hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
//   return self.weight * hidden_states
void rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    double ss = 0; // a double sum stays closer to torch's cascaded float sum than a naive float one
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float inv = 1.0f / sqrtf((float)(ss / n) + eps);
    for (int i = 0; i < n; i++) out[i] = w[i] * (x[i] * inv);
}

// nn.LayerNorm (F32): (x - mean) / sqrt(var + eps) * weight + bias, the biased variance.
void layernorm(float *out, const float *x, const float *w, const float *b, int n, float eps) {
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i];
    float mean = (float)(s / n);
    double v = 0;
    for (int i = 0; i < n; i++) {
        double d = (double)x[i] - mean;
        v += d * d;
    }
    float rstd = 1.0f / sqrtf((float)(v / n) + eps);
    for (int i = 0; i < n; i++) out[i] = (x[i] - mean) * rstd * w[i] + (b ? b[i] : 0.0f);
}

#if HAVE_X86
// exp8 is expf on 8 lanes, within 1-2 ulp (Cephes' polynomial): torch itself vectorises exp with
// SLEEF's 1-ulp expf, so libm's correctly rounded scalar expf is no closer to the reference, only
// slower (a tenth of the vision tower's time went to it in silu and softmax).
static inline AVX2 __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.33654f)), _mm256_set1_ps(88.72283f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    __m256 y = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    // y * 2^n: n into the exponent field (n in [-127, 128] after the clamp; the two halves keep
    // 2^n finite at the ends)
    __m256i e = _mm256_cvtps_epi32(n);
    __m256i h = _mm256_srai_epi32(e, 1);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h, _mm256_set1_epi32(127)), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(e, h), _mm256_set1_epi32(127)), 23));
    return _mm256_mul_ps(_mm256_mul_ps(y, s1), s2);
}

static AVX2 void silu_mul_avx2(float *gate, const float *up, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 g = _mm256_loadu_ps(gate + i);
        __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
        __m256 s = _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
        _mm256_storeu_ps(gate + i, _mm256_mul_ps(s, _mm256_loadu_ps(up + i)));
    }
    for (; i < n; i++) gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

static inline AVX2 float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

static AVX2 void softmax_avx2(float *x, int n) {
    int i = 0;
    __m256 mv = _mm256_set1_ps(x[0]);
    for (; i + 8 <= n; i += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(x + i));
    float mx = hmax8(mv);
    for (; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    __m256 m8 = _mm256_set1_ps(mx), sv = _mm256_setzero_ps();
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), m8));
        _mm256_storeu_ps(x + i, e);
        sv = _mm256_add_ps(sv, e);
    }
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(sv), _mm256_extractf128_ps(sv, 1));
    s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    float sum = _mm_cvtss_f32(_mm_add_ss(s4, _mm_movehdup_ps(s4)));
    for (; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    __m256 inv = _mm256_set1_ps(1.0f / sum);
    for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
    for (; i < n; i++) x[i] *= 1.0f / sum;
}
#endif

// a gated MLP: self.act_fn(self.gate_proj(x)) * self.up_proj(x), act_fn = silu
void silu_mul(const kernels *kn, float *gate, const float *up, int n) {
#if HAVE_X86
    if (kn->level >= IRIS_KERNELS_AVX2) {
        silu_mul_avx2(gate, up, n);
        return;
    }
#endif
    (void)kn;
    for (int i = 0; i < n; i++) {
        float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

// nn.GELU() (approximate="none"): x * 0.5 * (1 + erf(x / sqrt(2)))
void gelu_erf(float *x, int n) {
    for (int i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * (float)M_SQRT1_2));
}

// gelu_pytorch_tanh: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
void gelu_tanh(float *x, int n) {
    const float beta = (float)(M_SQRT2 * M_2_SQRTPI * 0.5), kappa = 0.044715f;
    for (int i = 0; i < n; i++) {
        float v = x[i];
        x[i] = 0.5f * v * (1.0f + tanhf(beta * (v + kappa * v * v * v)));
    }
}

// nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32)
void softmax(const kernels *kn, float *x, int n) {
    if (n <= 0) return;
#if HAVE_X86
    if (kn->level >= IRIS_KERNELS_AVX2) {
        softmax_avx2(x, n);
        return;
    }
#endif
    (void)kn;
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
