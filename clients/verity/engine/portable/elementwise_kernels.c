/* CPU fast paths of transcendental.exp, transcendental.erf and reduce.tree_sum, loaded by ckernels.py.
 *
 * Each function evaluates exactly the float32 operations of its torch twin, in the same order,
 * one element at a time (tests/engine/test_portable_kernels.py compares the bits of both paths
 * on ordinary, extreme, subnormal and non-finite inputs). Compiled with -ffp-contract=off and
 * without -ffast-math: every +, -, * is one correctly rounded IEEE float32 operation, never an
 * FMA, never reassociated. Coefficients are passed in from transcendental.py (already float32),
 * so the two paths cannot drift apart.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VERITY_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VERITY_CLONES
#endif

#define CANONICAL_NAN_BITS 0x7fc00000u                 /* what torch fills for float('nan') */

static inline float from_bits(uint32_t b) { float f; memcpy(&f, &b, sizeof f); return f; }

static inline float pow2i(int32_t e) {                 /* 2**e for integer e in [-126, 127] */
    return from_bits((uint32_t)(e + 127) << 23);
}

static inline float horner(float t, const float *c, int n) {   /* transcendental.horner */
    float p = t * c[0];
    p = p + c[1];
    for (int i = 2; i < n; i++) {
        p = p * t;
        p = p + c[i];
    }
    return p;
}

/* Round half to even for |f| < 2**22 (exp's |r * log2e| < 151): adding and subtracting 1.5 * 2**23 puts
 * the units at the sum's last bit, so the add rounds to an integer (IEEE ties to even); the subtract is
 * exact. The same value as torch.round / nearbyintf, without a library call. NaN stays NaN. */
static inline float round_even(float f) { return (f + 12582912.0f) - 12582912.0f; }

#define EXP_DEGREE 6                                   /* coefficients: len(EXP_P), len(ERF_SMALL_P), len(ERF_MID_P); */
#define ERF_SMALL_DEGREE 7                             /* fixed here so the loops unroll and vectorise */
#define ERF_MID_DEGREE 13

/* transcendental.exp; consts = {LOG2E, LN2_HI, LN2_LO, X_LO, X_HI}, poly = EXP_P.
 * Branch-free, so it vectorises. The scaling by 2**k is always bits.scale_f32_'s two exact halves
 * (k is in [-151, 129] after the clamp); for k in [-126, 127] that rounds y * 2**k once, exactly
 * like the torch path's one multiply (y is in [0.7, 1.5], so y * 2**floor(k/2) is exact). */
VERITY_CLONES
int verity_exp(const float *x, float *out, long n, const float *consts, const float *poly, int npoly) {
    if (npoly != EXP_DEGREE) return -1;
    const float log2e = consts[0], ln2_hi = consts[1], ln2_lo = consts[2], lo = consts[3], hi = consts[4];
    const float nan = from_bits(CANONICAL_NAN_BITS);
    for (long i = 0; i < n; i++) {
        float v = x[i];
        float r = v < lo ? lo : (v > hi ? hi : v);
        float k = round_even(r * log2e);
        k = k == k ? k : 0.0f;                         /* NaN: any finite k (the result is NaN anyway) */
        r = r - k * ln2_hi;
        r = r - k * ln2_lo;
        float z = r * r;
        float y = horner(r, poly, EXP_DEGREE);
        y = y * z;
        y = y + r;
        y = y + 1.0f;
        int32_t ki = (int32_t)k;                       /* exact: k is an integer in [-151, 129] */
        int32_t half = ki >> 1;                        /* floor(k / 2) (arithmetic shift), as scale_f32_ */
        y = y * pow2i(half);
        y = y * pow2i(ki - half);
        out[i] = v != v ? nan : y;
    }
    return 0;
}

/* transcendental.erf; consts = {MID_CENTER, MID_INV_HALF, SAT}; small, mid: the two polynomials.
 * Both polynomials are evaluated for every element (branch-free, vectorised), then selected. */
VERITY_CLONES
int verity_erf(const float *x, float *out, long n, const float *consts,
               const float *small, int nsmall, const float *mid, int nmid) {
    if (nsmall != ERF_SMALL_DEGREE || nmid != ERF_MID_DEGREE) return -1;
    const float center = consts[0], inv_half = consts[1], sat = consts[2];
    const float nan = from_bits(CANONICAL_NAN_BITS);
    for (long i = 0; i < n; i++) {
        float v = x[i];
        float z = fabsf(v);
        float t = z * z;
        float lo = horner(t, small, ERF_SMALL_DEGREE) * z;
        float u = z - center;
        u = u * inv_half;
        float m = horner(u, mid, ERF_MID_DEGREE);
        m = m > 1.0f ? 1.0f : m;
        m = z >= sat ? 1.0f : m;
        float o = z < 1.0f ? lo : m;
        o = copysignf(o, v);
        out[i] = v != v ? nan : o;
    }
    return 0;
}

/* reduce.tree_sum over the middle axis of a contiguous (outer, len, inner) tensor into (outer, inner):
 * rows padded with zeros to p = 2**ceil(log2 len), then row i += row i + h for h = p/2, p/4, ..., 1.
 * scratch holds p * inner floats. */
VERITY_CLONES
void verity_tree_sum(const float *x, float *out, long outer, long len, long inner, long p, float *scratch) {
    for (long o = 0; o < outer; o++) {
        const float *xo = x + o * len * inner;
        memcpy(scratch, xo, (size_t)(len * inner) * sizeof(float));
        for (long i = len * inner; i < p * inner; i++) scratch[i] = 0.0f;
        for (long h = p / 2; h >= 1; h /= 2) {
            float *a = scratch, *b = scratch + h * inner;
            for (long i = 0; i < h * inner; i++) a[i] = a[i] + b[i];
        }
        memcpy(out + o * inner, scratch, (size_t)inner * sizeof(float));
    }
}
