// kernels.c: the matrix products. By far the most time is spent in the micro-kernels below.
//
// y[i, j] = sum_k x[i, k] * w[j, k] (+ b[j]), with w as torch.nn.Linear stores it (out, in). BF16
// weights are read straight from the mapping and widened to F32 (exact: a bf16 is the top half of
// an f32); every product and sum is F32, as in the reference run in float32.
//
// Two regimes:
//   - a few rows of x (decode): reading w from memory is the cost. Each w row is streamed once
//     through a dot product (rowdot); one stream at a time keeps the hardware prefetcher on it.
//   - many rows (prefill, vision): arithmetic is the cost. As in BLAS, a block of w (NB rows by
//     KB of k) is packed once into F32 panels of PW columns, [k][PW], and a micro-kernel adds the
//     outer products of MR rows of x with a panel into MR x PW accumulators held in registers
//     (8x32 with AVX-512, 6x16 with AVX2, 2x16 portable). The block stays in L2, a panel streams
//     from it, the rows of x stay in L1.
// The SIMD kernels are compiled with target attributes and chosen at run time; the portable
// ones are the same loops in C with GCC's vector extension (what the compiler targets: SSE2,
// NEON).
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define HAVE_X86 1
#define AVX2 __attribute__((target("avx2,fma")))
#define AVX512 __attribute__((target("avx512f,avx2,fma")))
#else
#define HAVE_X86 0
#endif

enum {
    KB = 512,  // k block
    NB = 64,   // w rows per packed block
    CHUNK = 32 // w rows per task, a multiple of every panel width
};
_Static_assert(NB * KB <= KERNELS_WBUF, "a packed block exceeds the scratch");

kernels kernels_detect(iris_kernels cap) {
    kernels k = {.level = IRIS_KERNELS_GENERIC, .wbuf = NULL};
#if HAVE_X86
    if (cap == IRIS_KERNELS_BEST) cap = IRIS_KERNELS_AVX512;
    __builtin_cpu_init();
    if (cap >= IRIS_KERNELS_AVX2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        k.level = IRIS_KERNELS_AVX2;
        if (cap >= IRIS_KERNELS_AVX512 && __builtin_cpu_supports("avx512f")) k.level = IRIS_KERNELS_AVX512;
    }
#else
    (void)cap;
#endif
    return k;
}

const char *kernels_name(const kernels *kn) {
    switch (kn->level) {
    case IRIS_KERNELS_AVX512: return "avx512";
    case IRIS_KERNELS_AVX2: return "avx2";
    default: return "generic";
    }
}

// mr and pw are the micro-kernel's rows of x and panel width.
static int mr(const kernels *kn) { return kn->level == IRIS_KERNELS_AVX512 ? 8 : kn->level == IRIS_KERNELS_AVX2 ? 6 : 2; }
static int pw(const kernels *kn) { return kn->level == IRIS_KERNELS_AVX512 ? 32 : 16; }

static inline float bf16f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// wmat is a read-only view of w: F32 or BF16, row stride ld. Linear weights are (n, k): row j is
// output j. kmajor marks a (k, n) matrix instead (row k is input k): the values of attention.
typedef struct {
    const void *data;
    dtype dt;
    size_t ld;
    int kmajor;
} wmat;

static inline float wat(const wmat *w, size_t row, size_t col) {
    size_t o = row * w->ld + col;
    return w->dt == DT_BF16 ? bf16f(((const uint16_t *)w->data)[o]) : ((const float *)w->data)[o];
}

// ----------------------------------------------------------------------------
// decode: rowdot streams one w row

static float rowdot_generic(const float *x, const void *w, dtype dt, int K) {
    float acc[8] = {0};
    int k = 0;
    if (dt == DT_BF16) {
        const uint16_t *wb = w;
        for (; k + 8 <= K; k += 8)
            for (int l = 0; l < 8; l++) acc[l] += x[k + l] * bf16f(wb[k + l]);
        for (; k < K; k++) acc[0] += x[k] * bf16f(wb[k]);
    } else {
        const float *wf = w;
        for (; k + 8 <= K; k += 8)
            for (int l = 0; l < 8; l++) acc[l] += x[k + l] * wf[k + l];
        for (; k < K; k++) acc[0] += x[k] * wf[k];
    }
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

#if HAVE_X86
static inline AVX2 __m256 load_bf16(const uint16_t *p) {
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static inline AVX2 float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#define IDENT(v) (v)
#define ROWDOT(NAME, WT, LOADW, SCALAR)                                                                    \
    static AVX2 float NAME(const float *x, const WT *w, int K) {                                          \
        __m256 a = _mm256_setzero_ps(), b = a, c = a, d = a;                                              \
        int k = 0;                                                                                        \
        for (; k + 32 <= K; k += 32) {                                                                    \
            a = _mm256_fmadd_ps(_mm256_loadu_ps(x + k), LOADW(w + k), a);                                 \
            b = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 8), LOADW(w + k + 8), b);                         \
            c = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 16), LOADW(w + k + 16), c);                       \
            d = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 24), LOADW(w + k + 24), d);                       \
        }                                                                                                 \
        for (; k + 8 <= K; k += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(x + k), LOADW(w + k), a);          \
        float s = hsum(_mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d)));                         \
        for (; k < K; k++) s += x[k] * SCALAR(w[k]);                                                      \
        return s;                                                                                         \
    }
ROWDOT(rowdot_f32, float, _mm256_loadu_ps, IDENT)
ROWDOT(rowdot_bf16, uint16_t, load_bf16, bf16f)

static AVX2 void axpy_avx2(float *y, float a, const float *x, int n) {
    __m256 av = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}
#endif

static float rowdot(const kernels *kn, const float *x, const void *w, dtype dt, int K) {
#if HAVE_X86
    if (kn->level >= IRIS_KERNELS_AVX2) return dt == DT_BF16 ? rowdot_bf16(x, w, K) : rowdot_f32(x, w, K);
#endif
    (void)kn;
    return rowdot_generic(x, w, dt, K);
}

// y += a * x
static void axpy(const kernels *kn, float *y, float a, const float *x, int n) {
#if HAVE_X86
    if (kn->level >= IRIS_KERNELS_AVX2) {
        axpy_avx2(y, a, x, n);
        return;
    }
#endif
    (void)kn;
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

// ----------------------------------------------------------------------------
// prefill: packed panels and micro-kernels

#if HAVE_X86
// pack8_avx2 transposes 8 rows of w (8 outputs, k in [k0, k0+kc), kc a multiple of 8) into the
// panel columns dst[k*p + 0..7], 8x8 at a time: a scalar transpose cost a fifth of a prefill.
static AVX2 void pack8_avx2(const wmat *w, size_t j, int k0, int kc, int p, float *dst) {
    for (int k = 0; k < kc; k += 8) {
        __m256 r[8];
        for (int t = 0; t < 8; t++) {
            size_t o = (j + t) * w->ld + (size_t)(k0 + k);
            r[t] = w->dt == DT_BF16 ? load_bf16((const uint16_t *)w->data + o) : _mm256_loadu_ps((const float *)w->data + o);
        }
        __m256 a0 = _mm256_unpacklo_ps(r[0], r[1]), a1 = _mm256_unpackhi_ps(r[0], r[1]);
        __m256 a2 = _mm256_unpacklo_ps(r[2], r[3]), a3 = _mm256_unpackhi_ps(r[2], r[3]);
        __m256 a4 = _mm256_unpacklo_ps(r[4], r[5]), a5 = _mm256_unpackhi_ps(r[4], r[5]);
        __m256 a6 = _mm256_unpacklo_ps(r[6], r[7]), a7 = _mm256_unpackhi_ps(r[6], r[7]);
        __m256 b0 = _mm256_shuffle_ps(a0, a2, 0x44), b1 = _mm256_shuffle_ps(a0, a2, 0xee);
        __m256 b2 = _mm256_shuffle_ps(a1, a3, 0x44), b3 = _mm256_shuffle_ps(a1, a3, 0xee);
        __m256 b4 = _mm256_shuffle_ps(a4, a6, 0x44), b5 = _mm256_shuffle_ps(a4, a6, 0xee);
        __m256 b6 = _mm256_shuffle_ps(a5, a7, 0x44), b7 = _mm256_shuffle_ps(a5, a7, 0xee);
        float *d = dst + (size_t)k * p;
        _mm256_storeu_ps(d + 0 * p, _mm256_permute2f128_ps(b0, b4, 0x20));
        _mm256_storeu_ps(d + 1 * p, _mm256_permute2f128_ps(b1, b5, 0x20));
        _mm256_storeu_ps(d + 2 * p, _mm256_permute2f128_ps(b2, b6, 0x20));
        _mm256_storeu_ps(d + 3 * p, _mm256_permute2f128_ps(b3, b7, 0x20));
        _mm256_storeu_ps(d + 4 * p, _mm256_permute2f128_ps(b0, b4, 0x31));
        _mm256_storeu_ps(d + 5 * p, _mm256_permute2f128_ps(b1, b5, 0x31));
        _mm256_storeu_ps(d + 6 * p, _mm256_permute2f128_ps(b2, b6, 0x31));
        _mm256_storeu_ps(d + 7 * p, _mm256_permute2f128_ps(b3, b7, 0x31));
    }
}
#endif

// pack copies w's outputs [j0, j0+n) over k in [k0, k0+kc) into panels of width p: panel q holds
// outputs j0 + q*p + c at buf[q*kc*p + k*p + c], zero past n.
static void pack(const kernels *kn, const wmat *w, int j0, int n, int k0, int kc, int p, float *buf) {
    (void)kn;
    for (int q = 0; q * p < n; q++) {
        float *dst = buf + (size_t)q * kc * p;
        int cols = n - q * p < p ? n - q * p : p;
        if (w->kmajor) { // rows of w run along the outputs: copy them
            for (int k = 0; k < kc; k++) {
                float *d = dst + (size_t)k * p;
                for (int c = 0; c < cols; c++) d[c] = wat(w, (size_t)(k0 + k), (size_t)(j0 + q * p + c));
                for (int c = cols; c < p; c++) d[c] = 0;
            }
            continue;
        }
        int c = 0;
#if HAVE_X86
        if (kn->level >= IRIS_KERNELS_AVX2 && kc % 8 == 0)
            for (; c + 8 <= cols; c += 8) pack8_avx2(w, (size_t)(j0 + q * p + c), k0, kc, p, dst + c);
#endif
        for (; c < p; c++) { // rows of w run along k: transpose them
            if (c >= cols) {
                for (int k = 0; k < kc; k++) dst[(size_t)k * p + c] = 0;
                continue;
            }
            size_t j = (size_t)(j0 + q * p + c);
            if (w->dt == DT_BF16) {
                const uint16_t *src = (const uint16_t *)w->data + j * w->ld + k0;
                for (int k = 0; k < kc; k++) dst[(size_t)k * p + c] = bf16f(src[k]);
            } else {
                const float *src = (const float *)w->data + j * w->ld + k0;
                for (int k = 0; k < kc; k++) dst[(size_t)k * p + c] = src[k];
            }
        }
    }
}

// A micro-kernel adds x[0:R, 0:kc] @ panel[0:kc, 0:p] into y[0:R, 0:cols]: on the first k block
// it writes the sum plus the bias (b may be NULL), later it accumulates.
typedef struct {
    const float *x;
    size_t ldx;
    const float *panel;
    int kc;
    float *y;
    size_t ldy;
    int cols;
    const float *b;
    int first;
} micro_args;

// epilogue writes a micro-kernel's sums acc (R rows of stride p) into y.
static void epilogue(const micro_args *a, int R, const float *acc, int p) {
    for (int r = 0; r < R; r++) {
        float *yr = a->y + (size_t)r * a->ldy;
        const float *ar = acc + (size_t)r * p;
        if (!a->first) {
            for (int c = 0; c < a->cols; c++) yr[c] += ar[c];
        } else if (a->b) {
            for (int c = 0; c < a->cols; c++) yr[c] = ar[c] + a->b[c];
        } else {
            memcpy(yr, ar, (size_t)a->cols * sizeof(float));
        }
    }
}

// The portable micro-kernel for R rows (R <= 2): the panel's 16 columns as four vectors of four
// (GCC's vector extension: SSE2 on x86-64, NEON on arm64), 4R accumulators held in registers, each
// output summed over k in order as the scalar loop would (the shape sweeps' generic level took
// 30.9 s of CPU time with a 4-row scalar loop whose accumulators lived in memory, 11.3 s so).
typedef float v4f __attribute__((vector_size(16)));
static inline v4f load4(const float *p) {
    v4f v;
    memcpy(&v, p, sizeof(v));
    return v;
}
static inline void store4(float *p, v4f v) { memcpy(p, &v, sizeof(v)); }
#define MICRO_GENERIC(R)                                                                                   \
    static void micro_generic_##R(const micro_args *a) {                                                  \
        v4f c00 = {0, 0, 0, 0}, c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00, c12 = c00, c13 = c00; \
        const float *x = a->x, *pk = a->panel;                                                            \
        const size_t ldx = a->ldx;                                                                        \
        for (int k = a->kc; k > 0; k--, pk += 16, x++) {                                                  \
            v4f w0 = load4(pk), w1 = load4(pk + 4), w2 = load4(pk + 8), w3 = load4(pk + 12);              \
            v4f x0 = {x[0], x[0], x[0], x[0]};                                                            \
            c00 += x0 * w0, c01 += x0 * w1, c02 += x0 * w2, c03 += x0 * w3;                               \
            if (R > 1) {                                                                                  \
                v4f x1 = {x[ldx], x[ldx], x[ldx], x[ldx]};                                                \
                c10 += x1 * w0, c11 += x1 * w1, c12 += x1 * w2, c13 += x1 * w3;                           \
            }                                                                                             \
        }                                                                                                 \
        float acc[2][16];                                                                                 \
        store4(acc[0], c00), store4(acc[0] + 4, c01), store4(acc[0] + 8, c02), store4(acc[0] + 12, c03); \
        store4(acc[1], c10), store4(acc[1] + 4, c11), store4(acc[1] + 8, c12), store4(acc[1] + 12, c13); \
        epilogue(a, R, &acc[0][0], 16);                                                                   \
    }
MICRO_GENERIC(1)
MICRO_GENERIC(2)
typedef void (*micro_generic_fn)(const micro_args *);
static const micro_generic_fn MICRO_GENERIC_R[3] = {NULL, micro_generic_1, micro_generic_2};

#if HAVE_X86
// The AVX2 micro-kernel for R rows (R <= 6): per k, two panel loads, R broadcasts, 2R FMAs into
// 12 named accumulators (as an array, GCC stored them to memory on every k).
#define FMA2_AVX2(r)                                                                                       \
    if (ROWS > r) {                                                                                       \
        __m256 xv = _mm256_broadcast_ss(x + r * ldx);                                                     \
        c##r##a = _mm256_fmadd_ps(xv, w0, c##r##a);                                                       \
        c##r##b = _mm256_fmadd_ps(xv, w1, c##r##b);                                                       \
    }
#define STORE_AVX2(r)                                                                                      \
    if (ROWS > r) {                                                                                       \
        _mm256_storeu_ps(acc[r], c##r##a);                                                                \
        _mm256_storeu_ps(acc[r] + 8, c##r##b);                                                            \
    }
#define MICRO_AVX2(R)                                                                                      \
    static AVX2 void micro_avx2_##R(const micro_args *a) {                                                \
        enum { ROWS = R };                                                                                \
        __m256 c0a = _mm256_setzero_ps(), c0b = c0a, c1a = c0a, c1b = c0a, c2a = c0a, c2b = c0a;          \
        __m256 c3a = c0a, c3b = c0a, c4a = c0a, c4b = c0a, c5a = c0a, c5b = c0a;                          \
        const float *x = a->x, *pk = a->panel;                                                            \
        const size_t ldx = a->ldx;                                                                        \
        for (int k = a->kc; k > 0; k--, pk += 16, x++) {                                                  \
            __m256 w0 = _mm256_loadu_ps(pk), w1 = _mm256_loadu_ps(pk + 8);                                \
            FMA2_AVX2(0) FMA2_AVX2(1) FMA2_AVX2(2) FMA2_AVX2(3) FMA2_AVX2(4) FMA2_AVX2(5)                 \
        }                                                                                                 \
        float acc[6][16];                                                                                 \
        STORE_AVX2(0) STORE_AVX2(1) STORE_AVX2(2) STORE_AVX2(3) STORE_AVX2(4) STORE_AVX2(5)               \
        epilogue(a, R, &acc[0][0], 16);                                                                   \
    }
MICRO_AVX2(1)
MICRO_AVX2(2)
MICRO_AVX2(3)
MICRO_AVX2(4)
MICRO_AVX2(5)
MICRO_AVX2(6)

// The AVX-512 micro-kernel for R rows (R <= 8): 16 named accumulators of 16 lanes, 16 FMAs per k.
#define FMA2_AVX512(r)                                                                                     \
    if (ROWS > r) {                                                                                       \
        __m512 xv = _mm512_set1_ps(x[r * ldx]);                                                           \
        c##r##a = _mm512_fmadd_ps(xv, w0, c##r##a);                                                       \
        c##r##b = _mm512_fmadd_ps(xv, w1, c##r##b);                                                       \
    }
#define STORE_AVX512(r)                                                                                    \
    if (ROWS > r) {                                                                                       \
        _mm512_storeu_ps(acc[r], c##r##a);                                                                \
        _mm512_storeu_ps(acc[r] + 16, c##r##b);                                                           \
    }
#define MICRO_AVX512(R)                                                                                    \
    static AVX512 void micro_avx512_##R(const micro_args *a) {                                            \
        enum { ROWS = R };                                                                                \
        __m512 c0a = _mm512_setzero_ps(), c0b = c0a, c1a = c0a, c1b = c0a, c2a = c0a, c2b = c0a;          \
        __m512 c3a = c0a, c3b = c0a, c4a = c0a, c4b = c0a, c5a = c0a, c5b = c0a, c6a = c0a, c6b = c0a;    \
        __m512 c7a = c0a, c7b = c0a;                                                                      \
        const float *x = a->x, *pk = a->panel;                                                            \
        const size_t ldx = a->ldx;                                                                        \
        for (int k = a->kc; k > 0; k--, pk += 32, x++) {                                                  \
            __m512 w0 = _mm512_loadu_ps(pk), w1 = _mm512_loadu_ps(pk + 16);                               \
            FMA2_AVX512(0) FMA2_AVX512(1) FMA2_AVX512(2) FMA2_AVX512(3)                                   \
            FMA2_AVX512(4) FMA2_AVX512(5) FMA2_AVX512(6) FMA2_AVX512(7)                                   \
        }                                                                                                 \
        float acc[8][32];                                                                                 \
        STORE_AVX512(0) STORE_AVX512(1) STORE_AVX512(2) STORE_AVX512(3)                                   \
        STORE_AVX512(4) STORE_AVX512(5) STORE_AVX512(6) STORE_AVX512(7)                                   \
        epilogue(a, R, &acc[0][0], 32);                                                                   \
    }
MICRO_AVX512(1)
MICRO_AVX512(2)
MICRO_AVX512(3)
MICRO_AVX512(4)
MICRO_AVX512(5)
MICRO_AVX512(6)
MICRO_AVX512(7)
MICRO_AVX512(8)

typedef void (*micro_fn)(const micro_args *);
static const micro_fn MICRO_AVX2_R[7] = {NULL, micro_avx2_1, micro_avx2_2, micro_avx2_3,
                                         micro_avx2_4, micro_avx2_5, micro_avx2_6};
static const micro_fn MICRO_AVX512_R[9] = {NULL, micro_avx512_1, micro_avx512_2, micro_avx512_3, micro_avx512_4,
                                           micro_avx512_5, micro_avx512_6, micro_avx512_7, micro_avx512_8};
#endif

static void micro(const kernels *kn, const micro_args *a, int R) {
#if HAVE_X86
    if (kn->level == IRIS_KERNELS_AVX512) {
        MICRO_AVX512_R[R](a);
        return;
    }
    if (kn->level == IRIS_KERNELS_AVX2) {
        MICRO_AVX2_R[R](a);
        return;
    }
#endif
    (void)kn;
    MICRO_GENERIC_R[R](a);
}

// gemm computes outputs [j0, j1) of y = x w^T (+ b) for the M rows of x (K columns). wbuf is
// KERNELS_WBUF floats of scratch for the packed block.
static void gemm(const kernels *kn, float *wbuf, const float *x, size_t ldx, int M, int K, const wmat *w,
                 const float *b, float *y, size_t ldy, int j0, int j1) {
    const int MR = mr(kn), PW = pw(kn);
    if (M < MR) {
        if (!w->kmajor) { // stream each w row once, for every row of x
            for (int j = j0; j < j1; j++) {
                const void *wj = w->dt == DT_BF16 ? (const void *)((const uint16_t *)w->data + (size_t)j * w->ld)
                                                  : (const void *)((const float *)w->data + (size_t)j * w->ld);
                for (int i = 0; i < M; i++) {
                    float v = rowdot(kn, x + (size_t)i * ldx, wj, w->dt, K);
                    y[(size_t)i * ldy + j] = b ? v + b[j] : v;
                }
            }
            return;
        }
        for (int i = 0; i < M; i++) { // (k, n) F32: a sum of scaled rows
            float *yi = y + (size_t)i * ldy + j0;
            for (int j = j0; j < j1; j++) yi[j - j0] = b ? b[j] : 0;
            for (int k = 0; k < K; k++)
                axpy(kn, yi, x[(size_t)i * ldx + k], (const float *)w->data + (size_t)k * w->ld + j0, j1 - j0);
        }
        return;
    }
    for (int kb = 0; kb < K; kb += KB) {
        int kc = K - kb < KB ? K - kb : KB;
        for (int jb = j0; jb < j1; jb += NB) {
            int nb = j1 - jb < NB ? j1 - jb : NB;
            pack(kn, w, jb, nb, kb, kc, PW, wbuf);
            for (int i = 0; i < M; i += MR) {
                int R = M - i < MR ? M - i : MR;
                for (int q = 0; q * PW < nb; q++) {
                    int cols = nb - q * PW < PW ? nb - q * PW : PW;
                    micro_args a = {x + (size_t)i * ldx + kb, ldx, wbuf + (size_t)q * kc * PW, kc,
                                    y + (size_t)i * ldy + jb + q * PW, ldy, cols, b ? b + jb + q * PW : NULL, kb == 0};
                    micro(kn, &a, R);
                }
            }
        }
    }
}

// ----------------------------------------------------------------------------
// linear: split the rows of every output matrix into chunks and run them on the pool

typedef struct {
    const kernels *kn;
    const float *x;
    int ldx, M;
    const linear_out *outs;
    int n_outs;
    int chunk;
    int task_start[16]; // first task of each output
} linear_ctx;

static void linear_task(void *arg, int task, int thread) {
    linear_ctx *c = arg;
    int o = 0;
    while (o + 1 < c->n_outs && task >= c->task_start[o + 1]) o++;
    const linear_out *out = &c->outs[o];
    int j0 = (task - c->task_start[o]) * c->chunk;
    int j1 = j0 + c->chunk < out->w->rows ? j0 + c->chunk : out->w->rows;
    wmat w = {out->w->data, out->w->dt, (size_t)out->w->cols, 0};
    gemm(c->kn, c->kn->wbuf + (size_t)thread * KERNELS_WBUF, c->x, (size_t)c->ldx, c->M, out->w->cols, &w, out->b,
         out->y, (size_t)out->ldy, j0, j1);
}

void linear(pool *p, const kernels *kn, const float *x, int ldx, int M, const linear_out *outs, int n_outs) {
    if (M <= 0 || n_outs <= 0) return;
    linear_ctx c = {kn, x, ldx, M, outs, n_outs > 16 ? 16 : n_outs, 0, {0}};
    long rows = 0;
    for (int o = 0; o < c.n_outs; o++) rows += outs[o].w->rows;
    // About eight tasks per thread balance uneven matrices without slicing w too thin.
    long per = rows / ((long)pool_threads(p) * 8);
    int chunk = per < CHUNK ? CHUNK : (int)((per + CHUNK - 1) / CHUNK * CHUNK);
    c.chunk = chunk;
    int tasks = 0;
    for (int o = 0; o < c.n_outs; o++) {
        c.task_start[o] = tasks;
        tasks += (outs[o].w->rows + chunk - 1) / chunk;
    }
    pool_run(p, tasks, linear_task, &c);
}

// ----------------------------------------------------------------------------
// attention: softmax(q k^T * scale) v, one task per (head, block of queries), both products
// through gemm: the keys are (n, k) "weights", the values (k, n) ones.

enum { QB = 16 };

typedef struct {
    const kernels *kn;
    const attn_job *j;
    int q_blocks;
    float *scores; // (threads, QB, nk)
} attn_ctx;

static void attn_task(void *arg, int task, int thread) {
    attn_ctx *c = arg;
    const attn_job *j = c->j;
    int h = task / c->q_blocks;
    int i0 = (task % c->q_blocks) * QB;
    int i1 = i0 + QB < j->nq ? i0 + QB : j->nq;
    int kvh = h / (j->heads / j->kv_heads);
    int hd = j->head_dim;
    // keys visible to the last query of the block
    int nk = j->causal ? (j->q_off + i1 > j->prefix ? j->q_off + i1 : j->prefix) : j->nk;
    if (nk > j->nk) nk = j->nk;
    float *s = c->scores + (size_t)thread * QB * j->nk;
    float *wbuf = c->kn->wbuf + (size_t)thread * KERNELS_WBUF;

    wmat keys = {j->k + (size_t)kvh * hd, DT_F32, (size_t)j->ldk, 0};
    gemm(c->kn, wbuf, j->q + (size_t)i0 * j->ldq + (size_t)h * hd, (size_t)j->ldq, i1 - i0, hd, &keys, NULL, s,
         (size_t)j->nk, 0, nk);
    for (int i = i0; i < i1; i++) {
        float *si = s + (size_t)(i - i0) * j->nk;
        int n = j->causal ? (j->q_off + i + 1 > j->prefix ? j->q_off + i + 1 : j->prefix) : j->nk;
        if (n > nk) n = nk;
        for (int t = 0; t < n; t++) si[t] *= j->scale;
        if (j->rel) {
            // attn_weights + decomposed_rel_pos, the bias rel_h[..., None] + rel_w[..., None, :]
            // summed first (transformers' get_decomposed_rel_pos)
            const iris_rel_pos *r = j->rel;
            const float *rh = r->h_bias + (size_t)i * r->ld_h + (size_t)h * r->height;
            const float *rw = r->w_bias + (size_t)i * r->ld_w + (size_t)h * r->width;
            for (int t = 0; t < n; t++) si[t] += rh[t / r->width] + rw[t % r->width];
        }
        if (j->kmask) {
            // a masked key's score becomes the most negative float, then its probability exactly 0
            // (what the reference's additive mask gives); with every key masked, every score
            // the same (a plain mean of the values, as that mask gives too)
            int seen = 0;
            for (int t = 0; t < n; t++) seen |= j->kmask[t] != 0;
            for (int t = 0; t < n; t++) si[t] = !seen ? 0 : j->kmask[t] ? si[t] : -FLT_MAX;
            softmax(c->kn, si, n);
            for (int t = 0; t < n; t++)
                if (seen && !j->kmask[t]) si[t] = 0;
        } else {
            softmax(c->kn, si, n);
        }
        for (int t = n; t < nk; t++) si[t] = 0; // the causal mask
    }
    wmat values = {j->v + (size_t)kvh * hd, DT_F32, (size_t)j->ldv, 1};
    gemm(c->kn, wbuf, s, (size_t)j->nk, i1 - i0, nk, &values, NULL, j->out + (size_t)i0 * j->ldo + (size_t)h * hd,
         (size_t)j->ldo, 0, hd);
}

iris_status attention(pool *p, const kernels *kn, const attn_job *job) {
    if (job->nq <= 0) return IRIS_OK;
    attn_ctx c = {kn, job, (job->nq + QB - 1) / QB, NULL};
    c.scores = malloc((size_t)pool_threads(p) * QB * (size_t)job->nk * sizeof(float));
    if (!c.scores) return IRIS_ERR_NOMEM;
    pool_run(p, job->heads * c.q_blocks, attn_task, &c);
    free(c.scores);
    return IRIS_OK;
}
