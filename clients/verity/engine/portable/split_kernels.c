/* CPU fast path of the exact matmul's splitting and finishing (matmul.py), loaded by ckernels.py.
 *
 * Each function computes exactly what matmul.py's torch path computes, bit for bit
 * (tests/engine/test_portable_kernels.py compares them on every layout, with inf, NaN,
 * zeros and subnormals), in one or two passes over memory instead of about ten torch
 * kernels. Only IEEE basic operations on float32/float64 values, each rounded once:
 * this file must be compiled with -ffp-contract=off and without -ffast-math (ckernels.py
 * does), so that no FMA contraction or reassociation changes a bit. Vectorising an
 * elementwise loop does not change its results; the only reduction here is a max,
 * which is exact in any order.
 *
 * Layouts: a tensor is P batches of L lines of K elements (a line is a row of `a` or a
 * column of `b`); element (p, i, j) is at p*sb + i*sl + j*sk (element strides).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VERITY_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VERITY_CLONES
#endif

static inline double sigma_of(int e, int quantum_shift) {
    /* 1.5 * 2**(e + quantum_shift) from its bits, as matmul._sigma_bits builds it */
    uint64_t b = ((uint64_t)(int64_t)(e + 1023 + quantum_shift) << 52) | ((uint64_t)1 << 51);
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

static inline int exponent_of(float amax) {
    /* torch.frexp's exponent: amax < 2**e, 0 for 0 */
    int e = 0;
    frexpf(amax, &e);
    return e;
}

/* Round v to its quanta slice by slice: slice s = remainder rounded at sigma_s (add, then
 * subtract: exact), remainder -= slice; the last slice is the rounded remainder. */
static inline void split_value(double v, double sigma, double step, int slices, double *outs, long os) {
    double rest = v;
    for (int s = 0; s < slices; s++) {
        double part = (rest + sigma) - sigma;
        outs[s * os] = part;
        rest = rest - part;
        sigma = sigma * step;
    }
}

/* Maxima of |x| along lines, and whether a line holds inf or NaN: amax[p*L+i], bad[p*L+i].
 * On the bits: |x|'s float32 pattern (sign cleared) orders as the magnitudes do, and every inf or
 * NaN pattern is at least 0x7f800000, so one unsigned integer max (exact, vectorises) gives both. */
#define ABS_BITS 0x7fffffffu
#define INF_BITS 0x7f800000u

VERITY_CLONES
static void line_maxima(const float *x, long P, long L, long K, long sb, long sl, long sk,
                        float *amax, unsigned char *bad) {
    uint32_t *mb = (uint32_t *)amax;                   /* bit patterns first, floats on return */
    for (long p = 0; p < P; p++) {
        const uint32_t *xp = (const uint32_t *)(x + p * sb);
        uint32_t *mp = mb + p * L;
        if (sk == 1) {                                 /* lines contiguous: one pass per line */
            for (long i = 0; i < L; i++) {
                const uint32_t *xi = xp + i * sl;
                uint32_t m = 0;
                for (long j = 0; j < K; j++) {
                    uint32_t a = xi[j] & ABS_BITS;
                    m = a > m ? a : m;
                }
                mp[i] = m;
            }
        } else {                                       /* across lines: walk each line's j-th elements together */
            for (long i = 0; i < L; i++) mp[i] = 0;
            for (long j = 0; j < K; j++) {
                const uint32_t *xj = xp + j * sk;
                for (long i = 0; i < L; i++) {
                    uint32_t a = xj[i * sl] & ABS_BITS;
                    mp[i] = a > mp[i] ? a : mp[i];
                }
            }
        }
        for (long i = 0; i < L; i++) {
            bad[p * L + i] = (unsigned char)(mp[i] >= INF_BITS);
            if (mp[i] >= INF_BITS) mp[i] = 0;
        }
    }
}

/* Split x into `slices` float64 slices of `bits` bits per line (matmul.split_into).
 * Slice s of element (p, i, j) goes to out[s*os + p*ob + i*ol + j*ok].
 * amax and bad are scratch of P*L entries; on return bad[p*L+i] says line (p, i) held
 * inf or NaN. Returns how many lines did. */
VERITY_CLONES
static long split_lines(const float *x, long P, long L, long K, long sb, long sl, long sk,
                  double *out, long os, long ob, long ol, long ok, int slices, int bits,
                  float *amax, unsigned char *bad) {
    line_maxima(x, P, L, K, sb, sl, sk, amax, bad);
    long nbad = 0;
    double step;
    {
        uint64_t b = (uint64_t)(1023 - bits) << 52;   /* 2**-bits */
        memcpy(&step, &b, sizeof step);
    }
    for (long p = 0; p < P; p++) {
        const float *xp = x + p * sb;
        double *op = out + p * ob;
        for (long i = 0; i < L; i++) {
            unsigned char isbad = bad[p * L + i];
            nbad += isbad;
            double sigma = sigma_of(isbad ? 0 : exponent_of(amax[p * L + i]), 52 - bits);
            const float *xi = xp + i * sl;
            double *oi = op + i * ol;
            if (isbad) {                               /* non-finite elements become 0, as in the torch path */
                for (long j = 0; j < K; j++) {
                    float v = xi[j * sk];
                    double d = (fabsf(v) <= 3.4028234663852886e38f) ? (double)v : 0.0;
                    split_value(d, sigma, step, slices, oi + j * ok, os);
                }
            } else if (slices == 1 && sk == 1 && ok == 1) {
                for (long j = 0; j < K; j++) {
                    double d = (double)xi[j];
                    oi[j] = (d + sigma) - sigma;
                }
            } else if (slices == 2 && sk == 1 && ok == 1) {
                double sigma2 = sigma * step;
                double *o2 = oi + os;
                for (long j = 0; j < K; j++) {
                    double d = (double)xi[j];
                    double part = (d + sigma) - sigma;
                    oi[j] = part;
                    double rest = d - part;
                    o2[j] = (rest + sigma2) - sigma2;
                }
            } else {
                for (long j = 0; j < K; j++)
                    split_value((double)xi[j * sk], sigma, step, slices, oi + j * ok, os);
            }
        }
    }
    return nbad;
}

/* Split where lines run across memory (element (p, i, j) at p*sb + i + j*sk, i.e. sl == 1):
 * row by row, each row's L elements contiguous in x and in every slice (ol == 1). */
VERITY_CLONES
static long split_across(const float *x, long P, long L, long K, long sb, long sk,
                         double *out, long os, long ob, long ok, int slices, int bits,
                         float *amax, unsigned char *bad, double *sigmas) {
    line_maxima(x, P, L, K, sb, 1, sk, amax, bad);
    long nbad = 0;
    double step;
    {
        uint64_t b = (uint64_t)(1023 - bits) << 52;
        memcpy(&step, &b, sizeof step);
    }
    for (long p = 0; p < P; p++) {
        const float *xp = x + p * sb;
        double *op = out + p * ob;
        const unsigned char *bp = bad + p * L;
        long pbad = 0;
        for (long i = 0; i < L; i++) {
            pbad += bp[i];
            sigmas[i] = sigma_of(bp[i] ? 0 : exponent_of(amax[p * L + i]), 52 - bits);
        }
        nbad += pbad;
        for (long j = 0; j < K; j++) {
            const float *xj = xp + j * sk;
            double *oj = op + j * ok;
            if (pbad) {
                for (long i = 0; i < L; i++) {
                    float v = xj[i];
                    double d = (bp[i] && !(fabsf(v) <= 3.4028234663852886e38f)) ? 0.0 : (double)v;
                    split_value(d, sigmas[i], step, slices, oj + i, os);
                }
            } else if (slices == 1) {
                for (long i = 0; i < L; i++) {
                    double d = (double)xj[i];
                    oj[i] = (d + sigmas[i]) - sigmas[i];
                }
            } else if (slices == 2) {
                double *o2 = oj + os;
                for (long i = 0; i < L; i++) {
                    double d = (double)xj[i];
                    double part = (d + sigmas[i]) - sigmas[i];
                    oj[i] = part;
                    double s2 = sigmas[i] * step;
                    double rest = d - part;
                    o2[i] = (rest + s2) - s2;
                }
            } else {
                for (long i = 0; i < L; i++)
                    split_value((double)xj[i], sigmas[i], step, slices, oj + i, os);
            }
        }
    }
    return nbad;
}

/* out[p, m, n] = float32(t_0 + t_1 + ... ) over `terms` float64 terms, added left to right
 * (matmul._finish): term t of element (p, m, n) is at c[t*ts + p*cb + m*cm + n] (rows
 * contiguous); out is contiguous. */
VERITY_CLONES
void verity_finish(const double *c, long P, long M, long N, long cb, long cm, int terms, long ts,
                   float *out) {
    for (long p = 0; p < P; p++) {
        for (long m = 0; m < M; m++) {
            const double *cr = c + p * cb + m * cm;
            float *orow = out + (p * M + m) * N;
            if (terms == 1) {
                for (long n = 0; n < N; n++) orow[n] = (float)cr[n];
            } else if (terms == 2) {
                const double *c2 = cr + ts;
                for (long n = 0; n < N; n++) orow[n] = (float)(cr[n] + c2[n]);
            } else {
                for (long n = 0; n < N; n++) {
                    double s = cr[n];
                    for (int t = 1; t < terms; t++) s = s + cr[t * ts + n];
                    orow[n] = (float)s;
                }
            }
        }
    }
}

/* The entry points: Q outer batches (x stride qx, slices stride qo) of the above, for batch dims
 * that do not flatten into one (attention's q, k, v: views into one (B, T, 3C) tensor). */
long verity_split(const float *x, long Q, long qx, long qo, long P, long L, long K, long sb, long sl, long sk,
                  double *out, long os, long ob, long ol, long ok, int slices, int bits,
                  float *amax, unsigned char *bad) {
    long nbad = 0;
    for (long q = 0; q < Q; q++)
        nbad += split_lines(x + q * qx, P, L, K, sb, sl, sk, out + q * qo, os, ob, ol, ok, slices, bits,
                            amax + q * P * L, bad + q * P * L);
    return nbad;
}

long verity_split_across(const float *x, long Q, long qx, long qo, long P, long L, long K, long sb, long sk,
                         double *out, long os, long ob, long ok, int slices, int bits,
                         float *amax, unsigned char *bad, double *sigmas) {
    long nbad = 0;
    for (long q = 0; q < Q; q++)
        nbad += split_across(x + q * qx, P, L, K, sb, sk, out + q * qo, os, ob, ok, slices, bits,
                             amax + q * P * L, bad + q * P * L, sigmas);
    return nbad;
}
