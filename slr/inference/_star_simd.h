/* Vectorised max-marginals of a star update (AVX2 + FMA, 4 doubles per vector; for two states
 * also AVX-512F, 8 doubles per vector).
 *
 * A star update at node v needs, for each incident edge k and each state a of v, the smoothed
 * max-marginal  mt[k L + a] = eps * logsumexp_b(x_k(a, b) / eps),  x_k(a, b) the edge's
 * potential plus the message on the other side (see _star.pyx). The functions here compute all
 * of them for one star: they gather the operands and evaluate exp and log a whole vector at a
 * time. With two states the whole star update is done here, with L states the rest of it is
 * left to the caller; either way the star updates give the scalar kernels' messages (the
 * two-state code updates stars without an edge between them at once, which changes nothing).
 *
 * exp and log are polynomials written here, with FMA and no -ffast-math; their errors against
 * the correctly rounded results are stated at each function. They are compiled for AVX2 + FMA by
 * a function attribute, so the module still builds for the x86-64 baseline: the caller runs them
 * only when slr_simd_supported() says the CPU has both (the AVX-512 code: when
 * slr_avx512_supported() says it also has AVX-512F). Elsewhere (other architectures or
 * compilers) both are 0 and the kernels stay scalar.
 */
#ifndef SLR_STAR_SIMD_H
#define SLR_STAR_SIMD_H

/* Most independent stars the two-state AVX-512 code updates at once (slr_binary_stars_avx512) */
#define SLR_GROUP 8

#include <math.h>
#include <stdint.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define SLR_AVX2 __attribute__((target("avx2,fma"))) static inline

static int slr_simd_supported(void)
{
    __builtin_cpu_init();
    /* libgcc and compiler-rt report AVX2 only when the OS saves the YMM registers */
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* exp(x) for x <= 0 (0 below -708, where exp is subnormal or 0: absolute error < 4e-308).
 *
 * x = k ln2 + r with |r| <= ln2 / 2 (Cody-Waite, ln2 in two parts), exp(r) by its Taylor
 * polynomial of degree 13 (truncation below 6e-18 relative, 0.06 ulp), 2^k through the exponent
 * bits. Measured against long double expl on 5.3e6 points of [-708, 0]: at most 1.06 ulp. */
SLR_AVX2 __m256d slr_exp_nonpos_v4(__m256d x)
{
    const __m256d shift = _mm256_set1_pd(0x1.8p52);   /* adding it rounds to an integer */
    const __m256d lowest = _mm256_set1_pd(-708.0);
    /* below -708 the exponent bits wrap (or x is -inf): those lanes are cleared at the end */
    const __m256d underflow = _mm256_cmp_pd(x, lowest, _CMP_LT_OQ);
    __m256d kd = _mm256_fmadd_pd(x, _mm256_set1_pd(0x1.71547652b82fep0), shift);  /* 1/ln2 */
    const __m256i kbits = _mm256_castpd_si256(kd);     /* k in the low mantissa bits */
    kd = _mm256_sub_pd(kd, shift);
    __m256d r = _mm256_fnmadd_pd(kd, _mm256_set1_pd(0x1.62e42fefa39efp-1), x);
    r = _mm256_fnmadd_pd(kd, _mm256_set1_pd(0x1.abc9e3b39803fp-56), r);
    /* exp(r) = 1 + r + r^2 q(r), q(r) = sum_{n=2}^{13} r^(n-2) / n!, by Estrin's scheme */
    const __m256d r2 = _mm256_mul_pd(r, r);
    const __m256d r4 = _mm256_mul_pd(r2, r2);
    const __m256d r8 = _mm256_mul_pd(r4, r4);
    const __m256d q01 = _mm256_fmadd_pd(r, _mm256_set1_pd(1.0 / 6), _mm256_set1_pd(1.0 / 2));
    const __m256d q23 = _mm256_fmadd_pd(r, _mm256_set1_pd(1.0 / 120), _mm256_set1_pd(1.0 / 24));
    const __m256d q45 = _mm256_fmadd_pd(r, _mm256_set1_pd(1.0 / 5040), _mm256_set1_pd(1.0 / 720));
    const __m256d q67 = _mm256_fmadd_pd(r, _mm256_set1_pd(1.0 / 362880),
                                        _mm256_set1_pd(1.0 / 40320));
    const __m256d q89 = _mm256_fmadd_pd(r, _mm256_set1_pd(1.0 / 39916800),
                                        _mm256_set1_pd(1.0 / 3628800));
    const __m256d q1011 = _mm256_fmadd_pd(r, _mm256_set1_pd(1.0 / 6227020800.0),
                                          _mm256_set1_pd(1.0 / 479001600));
    const __m256d q03 = _mm256_fmadd_pd(r2, q23, q01);
    const __m256d q47 = _mm256_fmadd_pd(r2, q67, q45);
    const __m256d q811 = _mm256_fmadd_pd(r2, q1011, q89);
    const __m256d q = _mm256_fmadd_pd(r8, q811, _mm256_fmadd_pd(r4, q47, q03));
    /* 2^k for -1021 <= k <= 0: (k + 1023) in the exponent field */
    const __m256d scale = _mm256_castsi256_pd(_mm256_add_epi64(
        _mm256_slli_epi64(kbits, 52), _mm256_set1_epi64x(INT64_C(1023) << 52)));
    /* 2^k (1 + r + r^2 q), rounded once */
    return _mm256_andnot_pd(underflow,
                            _mm256_fmadd_pd(_mm256_fmadd_pd(r2, q, r), scale, scale));
}

/* p(z) = sum_{n=1}^{9} 2 z^(n-1) / (2 n + 1) by Estrin's scheme: with z = s^2,
 * log((1 + s) / (1 - s)) = 2 atanh(s) = 2 s + s z p(z) to s^19, the series of both logs below. */
SLR_AVX2 __m256d slr_atanh_series_v4(__m256d z)
{
    const __m256d z2 = _mm256_mul_pd(z, z);
    const __m256d z4 = _mm256_mul_pd(z2, z2);
    const __m256d p01 = _mm256_fmadd_pd(z, _mm256_set1_pd(2.0 / 5), _mm256_set1_pd(2.0 / 3));
    const __m256d p23 = _mm256_fmadd_pd(z, _mm256_set1_pd(2.0 / 9), _mm256_set1_pd(2.0 / 7));
    const __m256d p45 = _mm256_fmadd_pd(z, _mm256_set1_pd(2.0 / 13), _mm256_set1_pd(2.0 / 11));
    const __m256d p67 = _mm256_fmadd_pd(z, _mm256_set1_pd(2.0 / 17), _mm256_set1_pd(2.0 / 15));
    const __m256d p03 = _mm256_fmadd_pd(z2, p23, p01);
    const __m256d p47 = _mm256_fmadd_pd(z2, p67, p45);
    return _mm256_fmadd_pd(z4, _mm256_fmadd_pd(z4, _mm256_set1_pd(2.0 / 19), p47), p03);
}

/* log(x + c) for x in [1, 2^1023] and a correction |c| <= ulp(x) / 2 (0 for plain log(x)).
 *
 * x = 2^k m with m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact), s = (f + c 2^-k) / (2 + f),
 * log(m) = 2 atanh(s) by its Taylor series to s^19 (|s| <= 0.172: truncation below 3e-17
 * relative, 0.2 ulp), plus k ln2 with ln2 in two parts. Measured against long double logl on
 * 1.6e7 points of [1, 26] and [1, e^700]: at most 1.94 ulp (near x = 1). */
SLR_AVX2 __m256d slr_log_v4(__m256d x, __m256d c)
{
    const __m256i one = _mm256_set1_epi64x(INT64_C(0x3ff0000000000000));
    const __m256i bits = _mm256_castpd_si256(x);
    /* k = floor(log2(x / sqrt(1/2))) >= 0, so a logical shift does */
    const __m256i k = _mm256_srli_epi64(
        _mm256_sub_epi64(bits, _mm256_set1_epi64x(INT64_C(0x3fe6a09e667f3bcd))), 52);
    const __m256i kshift = _mm256_slli_epi64(k, 52);
    const __m256d m = _mm256_castsi256_pd(_mm256_sub_epi64(bits, kshift));
    const __m256d down = _mm256_castsi256_pd(_mm256_sub_epi64(one, kshift));    /* 2^-k */
    const __m256d two52 = _mm256_set1_pd(0x1p52);
    const __m256d kd = _mm256_sub_pd(
        _mm256_castsi256_pd(_mm256_or_si256(k, _mm256_castpd_si256(two52))), two52);
    const __m256d f = _mm256_sub_pd(m, _mm256_set1_pd(1.0));
    const __m256d s = _mm256_div_pd(_mm256_fmadd_pd(c, down, f),
                                    _mm256_add_pd(f, _mm256_set1_pd(2.0)));
    /* log(m) = 2 s + s z p(z), z = s^2 */
    const __m256d z = _mm256_mul_pd(s, s);
    const __m256d p = slr_atanh_series_v4(z);
    const __m256d low = _mm256_fmadd_pd(kd, _mm256_set1_pd(0x1.abc9e3b39803fp-56),
                                        _mm256_mul_pd(_mm256_mul_pd(s, z), p));
    return _mm256_fmadd_pd(kd, _mm256_set1_pd(0x1.62e42fefa39efp-1),
                           _mm256_fmadd_pd(_mm256_set1_pd(2.0), s, low));
}

/* log(1 + u) for u in [0, 1], without forming 1 + u: f = u (k = 0), or f = (u - 1) / 2 (k = 1)
 * once 1 + u >= sqrt(2), then log(1 + f) as in slr_log_v4. Shorter than slr_log_v4 on the
 * critical path of a star update, which waits for it. */
SLR_AVX2 __m256d slr_log1p_unit_v4(__m256d u)
{
    const __m256d halve = _mm256_cmp_pd(u, _mm256_set1_pd(0x1.a827999fcef32p-2), _CMP_GE_OQ);
    const __m256d half = _mm256_set1_pd(0.5);
    /* (u - 1) / 2 is exact for u >= 1/2 and within 2^-55 below */
    const __m256d f = _mm256_blendv_pd(u, _mm256_fmsub_pd(u, half, half), halve);
    const __m256d kd = _mm256_and_pd(halve, _mm256_set1_pd(1.0));
    const __m256d s = _mm256_div_pd(f, _mm256_add_pd(f, _mm256_set1_pd(2.0)));
    const __m256d z = _mm256_mul_pd(s, s);
    const __m256d p = slr_atanh_series_v4(z);
    /* k ln2 + 2 s, ready while p is evaluated */
    const __m256d lead = _mm256_fmadd_pd(
        kd, _mm256_set1_pd(0x1.62e42fefa39efp-1),
        _mm256_fmadd_pd(kd, _mm256_set1_pd(0x1.abc9e3b39803fp-56), _mm256_add_pd(s, s)));
    return _mm256_fmadd_pd(_mm256_mul_pd(s, z), p, lead);
}

/* log(1 + exp(x)) for x <= 0. Measured against long double log1pl(expl(x)) on 1.6e7 points of
 * [-708, 0]: at most 2.7 ulp. */
SLR_AVX2 __m256d slr_softplus_nonpos_v4(__m256d x)
{
    return slr_log1p_unit_v4(slr_exp_nonpos_v4(x));
}

/* Lanes i < n of a vector (0 <= n <= 4), as a mask for maskload/maskstore and blends. */
SLR_AVX2 __m256i slr_first_lanes(int64_t n)
{
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), _mm256_setr_epi64x(0, 1, 2, 3));
}

/* The operands of edge e's two-state max-marginals at its side `side`: lanes (a = 0, a = 1) of
 * first and second are x(a, 0) and x(a, 1), x(a, b) = theta[a, b] + other[b] at side 0 and
 * theta[b, a] + other[b] at side 1, other the message on the edge's far side. The edge's table
 * is theta_edges + 4 e edge_stride (edge_stride 0: one table for every edge). */
SLR_AVX2 void slr_binary_operands(const double *theta_edges, int64_t edge_stride, const double *lam,
                                  int64_t e, int64_t side, __m128d *first, __m128d *second)
{
    const double *theta = theta_edges + 4 * edge_stride * e;
    const __m128d row0 = _mm_loadu_pd(theta);       /* theta[0, 0], theta[0, 1] */
    const __m128d row1 = _mm_loadu_pd(theta + 2);   /* theta[1, 0], theta[1, 1] */
    const double *other = lam + 4 * e + 2 * (1 - side);
    /* a branch, not a blend: each call site sees the same side at nearly every node */
    if (side == 0) {
        *first = _mm_unpacklo_pd(row0, row1);
        *second = _mm_unpackhi_pd(row0, row1);
    } else {
        *first = row0;
        *second = row1;
    }
    *first = _mm_add_pd(*first, _mm_set1_pd(other[0]));
    *second = _mm_add_pd(*second, _mm_set1_pd(other[1]));
}

/* Max-marginals of two edges at a node, as lanes (edge 0: a = 0, 1; edge 1: a = 0, 1) from
 * their operands, with eps log(exp(hi / eps) + exp(lo / eps)) = hi + eps log(1 + exp((lo - hi)
 * / eps)). Lanes whose eps is 0 and operands are 0 (absent edges) give 0. */
SLR_AVX2 __m256d slr_binary_pair(__m128d first0, __m128d second0, __m128d first1,
                                 __m128d second1, __m256d veps, __m256d vinv)
{
    const __m256d first = _mm256_set_m128d(first1, first0);
    const __m256d second = _mm256_set_m128d(second1, second0);
    const __m256d hi = _mm256_max_pd(first, second);
    const __m256d gap = _mm256_mul_pd(_mm256_sub_pd(_mm256_min_pd(first, second), hi), vinv);
    return _mm256_fmadd_pd(veps, slr_softplus_nonpos_v4(gap), hi);
}

/* lam[e, side, :] = t - m; raises *change to the change's |d0 - d1| (beyond a constant shift). */
SLR_AVX2 void slr_binary_store(double *lam, int64_t e, int64_t side, __m128d t, __m128d m,
                               __m128d *change)
{
    double *mine = lam + 4 * e + 2 * side;
    const __m128d updated = _mm_sub_pd(t, m);
    const __m128d d = _mm_sub_pd(updated, _mm_loadu_pd(mine));
    _mm_storeu_pd(mine, updated);
    *change = _mm_max_sd(*change, _mm_andnot_pd(_mm_set_sd(-0.0),
                                                _mm_sub_sd(d, _mm_unpackhi_pd(d, d))));
}

/* The end of a two-state star update at node v, once the max-marginals of its deg edges are in
 * mt (lanes 2 k, 2 k + 1 for edge k) and summed as sum (lanes 0, 1 plus lanes 2, 3) and big
 * (their magnitudes, lane by lane): t = (theta_v + sum_k m_k) / (1 + deg), the messages
 * lam[e, side, :] = t - m_k. Returns the largest change beyond a constant shift and raises *size
 * to the largest magnitude computed. */
SLR_AVX2 double slr_binary_finish(int64_t v, const double *theta_nodes, double *lam,
                                  const int64_t *edge, const int64_t *side, int64_t deg,
                                  const double *mt, __m256d sum, __m256d big, double *size)
{
    const __m128d magnitude = _mm_castsi128_pd(_mm_set1_epi64x(INT64_MAX));
    const __m128d scale = _mm_set1_pd(1.0 / (1 + deg));
    const __m128d t = _mm_fmadd_pd(
        _mm_add_pd(_mm256_castpd256_pd128(sum), _mm256_extractf128_pd(sum, 1)), scale,
        _mm_mul_pd(_mm_loadu_pd(theta_nodes + 2 * v), scale));
    const __m128d big2 = _mm_max_pd(
        _mm_max_pd(_mm256_castpd256_pd128(big), _mm256_extractf128_pd(big, 1)),
        _mm_and_pd(t, magnitude));
    const double largest = _mm_cvtsd_f64(_mm_max_sd(big2, _mm_unpackhi_pd(big2, big2)));
    __m128d change = _mm_setzero_pd();
    *size = largest > *size ? largest : *size;
    for (int64_t k = 0; k < deg; k++)
        slr_binary_store(lam, edge[k], side[k], t, _mm_loadu_pd(mt + 2 * k), &change);
    return _mm_cvtsd_f64(change);
}

/* The max-marginals of node v's deg <= 4 edges, edges 0 and 1 in low, 2 and 3 in high (lanes
 * 2 k, 2 k + 1 of each: edge k, a = 0, 1; absent edges give 0). */
SLR_AVX2 void slr_binary_marginals_v4(const double *theta_edges, int64_t edge_stride,
                                      const double *lam, const int64_t *edge, const int64_t *side,
                                      int64_t deg, __m256d veps, __m256d vinv, __m256d *low,
                                      __m256d *high)
{
    const __m128d zero = _mm_setzero_pd();
    __m128d f0, s0, f1 = zero, s1 = zero, f2 = zero, s2 = zero, f3 = zero, s3 = zero;
    slr_binary_operands(theta_edges, edge_stride, lam, edge[0], side[0], &f0, &s0);
    if (deg > 1)
        slr_binary_operands(theta_edges, edge_stride, lam, edge[1], side[1], &f1, &s1);
    if (deg > 2)
        slr_binary_operands(theta_edges, edge_stride, lam, edge[2], side[2], &f2, &s2);
    if (deg > 3)
        slr_binary_operands(theta_edges, edge_stride, lam, edge[3], side[3], &f3, &s3);
    /* absent edges: eps 0 in their lanes (off the critical path, unlike masking m) */
    *low = slr_binary_pair(f0, s0, f1, s1,
                           _mm256_and_pd(veps, _mm256_castsi256_pd(slr_first_lanes(2 * deg))),
                           vinv);
    *high = deg > 2 ? slr_binary_pair(f2, s2, f3, s3, _mm256_and_pd(
                          veps, _mm256_castsi256_pd(slr_first_lanes(2 * deg - 4))), vinv)
                    : _mm256_setzero_pd();
}

/* The two-state star update at node v (see _update_binary_node in _star.pyx, which it replaces
 * for eps > 0), two edges per vector. Returns the largest message change beyond a constant
 * shift and raises *size to the largest magnitude computed. mt holds max(2 deg + 2, 8)
 * doubles. Edge e's table starts at theta_edges + 4 e edge_stride (0: one shared table).
 *
 * Up to four edges (grids, chains) take a path with one copy of the code per edge: the message
 * the previous star update wrote is then always read by the same load instruction, which the
 * CPU learns to make wait for that store while the loads of the other edges go ahead. */
__attribute__((target("avx2,fma"))) static double slr_binary_star_avx2(
    int64_t v, const double *theta_nodes, const double *theta_edges, int64_t edge_stride,
    double *lam, const int64_t *inc_ptr, const int64_t *inc_edge, const int64_t *inc_side,
    double eps, double inv_eps, double *mt, double *size)
{
    const int64_t start = inc_ptr[v], deg = inc_ptr[v + 1] - start;
    const int64_t *edge = inc_edge + start, *side = inc_side + start;
    const __m256d veps = _mm256_set1_pd(eps), vinv = _mm256_set1_pd(inv_eps);
    const __m256d magnitude = _mm256_castsi256_pd(_mm256_set1_epi64x(INT64_MAX));
    const __m128d zero = _mm_setzero_pd();
    __m256d sum = _mm256_setzero_pd(), big = _mm256_setzero_pd();
    __m256d low = _mm256_setzero_pd(), high = _mm256_setzero_pd();
    if (deg == 0)
        return 0.0;
    if (deg <= 4) {
        slr_binary_marginals_v4(theta_edges, edge_stride, lam, edge, side, deg, veps, vinv, &low,
                                &high);
        _mm256_storeu_pd(mt, low);
        _mm256_storeu_pd(mt + 4, high);
        sum = _mm256_add_pd(low, high);
        big = _mm256_max_pd(_mm256_and_pd(low, magnitude), _mm256_and_pd(high, magnitude));
    } else {
        for (int64_t k = 0; k < deg; k += 2) {
            __m128d first0, second0, first1 = zero, second1 = zero;
            slr_binary_operands(theta_edges, edge_stride, lam, edge[k], side[k], &first0, &second0);
            if (k + 1 < deg)
                slr_binary_operands(theta_edges, edge_stride, lam, edge[k + 1], side[k + 1],
                                    &first1, &second1);
            const __m256d m = slr_binary_pair(
                first0, second0, first1, second1,
                _mm256_and_pd(veps, _mm256_castsi256_pd(slr_first_lanes(2 * (deg - k)))), vinv);
            _mm256_storeu_pd(mt + 2 * k, m);
            sum = _mm256_add_pd(sum, m);
            big = _mm256_max_pd(big, _mm256_and_pd(m, magnitude));
        }
    }
    return slr_binary_finish(v, theta_nodes, lam, edge, side, deg, mt, sum, big, size);
}

/* slr_binary_stars_avx512 (below) on AVX2: the star updates at the count <= SLR_GROUP nodes
 * nodes[g], no two of them joined by an edge, all operands gathered before any store. */
__attribute__((target("avx2,fma"))) static double slr_binary_stars_avx2(
    const int64_t *nodes, int64_t count, const double *theta_nodes, const double *theta_edges,
    int64_t edge_stride, double *lam, const int64_t *inc_ptr, const int64_t *inc_edge,
    const int64_t *inc_side, double eps, double inv_eps, double *mt, double *size)
{
    const __m256d veps = _mm256_set1_pd(eps), vinv = _mm256_set1_pd(inv_eps);
    const __m256d magnitude = _mm256_castsi256_pd(_mm256_set1_epi64x(INT64_MAX));
    __m256d low[SLR_GROUP], high[SLR_GROUP];
    double change = 0.0, one;
    int64_t g;
    for (g = 0; g < count; g++) {
        const int64_t deg = inc_ptr[nodes[g] + 1] - inc_ptr[nodes[g]];
        if (deg == 0 || deg > 4)
            break;
    }
    if (g < count) {
        for (g = 0; g < count; g++) {
            one = slr_binary_star_avx2(nodes[g], theta_nodes, theta_edges, edge_stride, lam,
                                       inc_ptr, inc_edge, inc_side, eps, inv_eps, mt, size);
            change = one > change ? one : change;
        }
        return change;
    }
    for (g = 0; g < count; g++) {
        const int64_t start = inc_ptr[nodes[g]];
        slr_binary_marginals_v4(theta_edges, edge_stride, lam, inc_edge + start, inc_side + start,
                                inc_ptr[nodes[g] + 1] - start, veps, vinv, low + g, high + g);
    }
    for (g = 0; g < count; g++) {
        const int64_t start = inc_ptr[nodes[g]];
        _mm256_storeu_pd(mt + 8 * g, low[g]);
        _mm256_storeu_pd(mt + 8 * g + 4, high[g]);
        one = slr_binary_finish(
            nodes[g], theta_nodes, lam, inc_edge + start, inc_side + start,
            inc_ptr[nodes[g] + 1] - start, mt + 8 * g, _mm256_add_pd(low[g], high[g]),
            _mm256_max_pd(_mm256_and_pd(low[g], magnitude), _mm256_and_pd(high[g], magnitude)),
            size);
        change = one > change ? one : change;
    }
    return change;
}

/* AVX-512: the two-state star update of up to four edges in one vector of 8 doubles.
 *
 * The functions below are those above, 8 lanes wide, with the same operations in the same order
 * lane for lane (masks instead of blends), so both widths give the same bits. Half the vector
 * instructions per star: once several independent stars are updated at once (sweep_order in
 * _star.pyx), the AVX2 code is bound by their throughput, no longer by the wait for the
 * previous star's messages. */
#define SLR_AVX512 __attribute__((target("avx512f,avx2,fma"))) static inline

static int slr_avx512_supported(void)
{
    __builtin_cpu_init();
    /* libgcc and compiler-rt report AVX-512 only when the OS saves the ZMM registers */
    return slr_simd_supported() && __builtin_cpu_supports("avx512f");
}

/* slr_exp_nonpos_v4, 8 lanes */
SLR_AVX512 __m512d slr_exp_nonpos_v8(__m512d x)
{
    const __m512d shift = _mm512_set1_pd(0x1.8p52);
    const __mmask8 normal = _mm512_cmp_pd_mask(x, _mm512_set1_pd(-708.0), _CMP_NLT_UQ);
    __m512d kd = _mm512_fmadd_pd(x, _mm512_set1_pd(0x1.71547652b82fep0), shift);
    const __m512i kbits = _mm512_castpd_si512(kd);
    kd = _mm512_sub_pd(kd, shift);
    __m512d r = _mm512_fnmadd_pd(kd, _mm512_set1_pd(0x1.62e42fefa39efp-1), x);
    r = _mm512_fnmadd_pd(kd, _mm512_set1_pd(0x1.abc9e3b39803fp-56), r);
    const __m512d r2 = _mm512_mul_pd(r, r);
    const __m512d r4 = _mm512_mul_pd(r2, r2);
    const __m512d r8 = _mm512_mul_pd(r4, r4);
    const __m512d q01 = _mm512_fmadd_pd(r, _mm512_set1_pd(1.0 / 6), _mm512_set1_pd(1.0 / 2));
    const __m512d q23 = _mm512_fmadd_pd(r, _mm512_set1_pd(1.0 / 120), _mm512_set1_pd(1.0 / 24));
    const __m512d q45 = _mm512_fmadd_pd(r, _mm512_set1_pd(1.0 / 5040), _mm512_set1_pd(1.0 / 720));
    const __m512d q67 = _mm512_fmadd_pd(r, _mm512_set1_pd(1.0 / 362880),
                                        _mm512_set1_pd(1.0 / 40320));
    const __m512d q89 = _mm512_fmadd_pd(r, _mm512_set1_pd(1.0 / 39916800),
                                        _mm512_set1_pd(1.0 / 3628800));
    const __m512d q1011 = _mm512_fmadd_pd(r, _mm512_set1_pd(1.0 / 6227020800.0),
                                          _mm512_set1_pd(1.0 / 479001600));
    const __m512d q03 = _mm512_fmadd_pd(r2, q23, q01);
    const __m512d q47 = _mm512_fmadd_pd(r2, q67, q45);
    const __m512d q811 = _mm512_fmadd_pd(r2, q1011, q89);
    const __m512d q = _mm512_fmadd_pd(r8, q811, _mm512_fmadd_pd(r4, q47, q03));
    const __m512d scale = _mm512_castsi512_pd(_mm512_add_epi64(
        _mm512_slli_epi64(kbits, 52), _mm512_set1_epi64(INT64_C(1023) << 52)));
    return _mm512_maskz_mov_pd(normal, _mm512_fmadd_pd(_mm512_fmadd_pd(r2, q, r), scale, scale));
}

/* slr_atanh_series_v4, 8 lanes */
SLR_AVX512 __m512d slr_atanh_series_v8(__m512d z)
{
    const __m512d z2 = _mm512_mul_pd(z, z);
    const __m512d z4 = _mm512_mul_pd(z2, z2);
    const __m512d p01 = _mm512_fmadd_pd(z, _mm512_set1_pd(2.0 / 5), _mm512_set1_pd(2.0 / 3));
    const __m512d p23 = _mm512_fmadd_pd(z, _mm512_set1_pd(2.0 / 9), _mm512_set1_pd(2.0 / 7));
    const __m512d p45 = _mm512_fmadd_pd(z, _mm512_set1_pd(2.0 / 13), _mm512_set1_pd(2.0 / 11));
    const __m512d p67 = _mm512_fmadd_pd(z, _mm512_set1_pd(2.0 / 17), _mm512_set1_pd(2.0 / 15));
    const __m512d p03 = _mm512_fmadd_pd(z2, p23, p01);
    const __m512d p47 = _mm512_fmadd_pd(z2, p67, p45);
    return _mm512_fmadd_pd(z4, _mm512_fmadd_pd(z4, _mm512_set1_pd(2.0 / 19), p47), p03);
}

/* slr_log1p_unit_v4, 8 lanes */
SLR_AVX512 __m512d slr_log1p_unit_v8(__m512d u)
{
    const __mmask8 halve = _mm512_cmp_pd_mask(u, _mm512_set1_pd(0x1.a827999fcef32p-2), _CMP_GE_OQ);
    const __m512d half = _mm512_set1_pd(0.5);
    const __m512d f = _mm512_mask_fmsub_pd(u, halve, half, half);
    const __m512d kd = _mm512_maskz_mov_pd(halve, _mm512_set1_pd(1.0));
    const __m512d s = _mm512_div_pd(f, _mm512_add_pd(f, _mm512_set1_pd(2.0)));
    const __m512d z = _mm512_mul_pd(s, s);
    const __m512d p = slr_atanh_series_v8(z);
    const __m512d lead = _mm512_fmadd_pd(
        kd, _mm512_set1_pd(0x1.62e42fefa39efp-1),
        _mm512_fmadd_pd(kd, _mm512_set1_pd(0x1.abc9e3b39803fp-56), _mm512_add_pd(s, s)));
    return _mm512_fmadd_pd(_mm512_mul_pd(s, z), p, lead);
}

/* The operands of the max-marginals of node v's deg <= 4 edges (slr_binary_operands), edge k in
 * lanes 2 k, 2 k + 1, and the max-marginals from them (slr_binary_pair): absent edges have
 * operands 0 and eps 0, so their lanes give 0. */
SLR_AVX512 __m512d slr_binary_marginals_v8(const double *theta_edges, int64_t edge_stride,
                                           const double *lam, const int64_t *edge,
                                           const int64_t *side, int64_t deg, double eps,
                                           double inv_eps)
{
    const __m128d zero = _mm_setzero_pd();
    __m128d f0, s0, f1 = zero, s1 = zero, f2 = zero, s2 = zero, f3 = zero, s3 = zero;
    slr_binary_operands(theta_edges, edge_stride, lam, edge[0], side[0], &f0, &s0);
    if (deg > 1)
        slr_binary_operands(theta_edges, edge_stride, lam, edge[1], side[1], &f1, &s1);
    if (deg > 2)
        slr_binary_operands(theta_edges, edge_stride, lam, edge[2], side[2], &f2, &s2);
    if (deg > 3)
        slr_binary_operands(theta_edges, edge_stride, lam, edge[3], side[3], &f3, &s3);
    const __m512d first = _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_set_m128d(f1, f0)),
                                             _mm256_set_m128d(f3, f2), 1);
    const __m512d second = _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_set_m128d(s1, s0)),
                                              _mm256_set_m128d(s3, s2), 1);
    const __m512d veps = _mm512_maskz_mov_pd((__mmask8)((1u << (2 * deg)) - 1),
                                             _mm512_set1_pd(eps));
    const __m512d hi = _mm512_max_pd(first, second);
    const __m512d gap = _mm512_mul_pd(_mm512_sub_pd(_mm512_min_pd(first, second), hi),
                                      _mm512_set1_pd(inv_eps));
    return _mm512_fmadd_pd(veps, slr_log1p_unit_v8(slr_exp_nonpos_v8(gap)), hi);
}

/* slr_binary_finish from the max-marginals m of slr_binary_marginals_v8 (mt: 8 doubles). */
SLR_AVX512 double slr_binary_finish_v8(int64_t v, const double *theta_nodes, double *lam,
                                       const int64_t *edge, const int64_t *side, int64_t deg,
                                       double *mt, __m512d m, double *size)
{
    const __m256d magnitude = _mm256_castsi256_pd(_mm256_set1_epi64x(INT64_MAX));
    const __m256d low = _mm512_castpd512_pd256(m), high = _mm512_extractf64x4_pd(m, 1);
    _mm512_storeu_pd(mt, m);
    return slr_binary_finish(
        v, theta_nodes, lam, edge, side, deg, mt, _mm256_add_pd(low, high),
        _mm256_max_pd(_mm256_and_pd(low, magnitude), _mm256_and_pd(high, magnitude)), size);
}

/* slr_binary_star_avx2 with the max-marginals of up to four edges in one vector; more edges
 * take slr_binary_star_avx2. */
__attribute__((target("avx512f,avx2,fma"))) static double slr_binary_star_avx512(
    int64_t v, const double *theta_nodes, const double *theta_edges, int64_t edge_stride,
    double *lam, const int64_t *inc_ptr, const int64_t *inc_edge, const int64_t *inc_side,
    double eps, double inv_eps, double *mt, double *size)
{
    const int64_t start = inc_ptr[v], deg = inc_ptr[v + 1] - start;
    if (deg == 0 || deg > 4)
        return slr_binary_star_avx2(v, theta_nodes, theta_edges, edge_stride, lam, inc_ptr,
                                    inc_edge, inc_side, eps, inv_eps, mt, size);
    const __m512d m = slr_binary_marginals_v8(theta_edges, edge_stride, lam, inc_edge + start,
                                              inc_side + start, deg, eps, inv_eps);
    return slr_binary_finish_v8(v, theta_nodes, lam, inc_edge + start, inc_side + start, deg, mt,
                                m, size);
}

/* The star updates at the count <= SLR_GROUP nodes nodes[g], no two of them joined by an edge:
 * none reads what another writes, so all gather their operands before any stores its messages,
 * and the CPU computes them at once. mt holds 8 SLR_GROUP doubles. Returns the largest change. */
__attribute__((target("avx512f,avx2,fma"))) static double slr_binary_stars_avx512(
    const int64_t *nodes, int64_t count, const double *theta_nodes, const double *theta_edges,
    int64_t edge_stride, double *lam, const int64_t *inc_ptr, const int64_t *inc_edge,
    const int64_t *inc_side, double eps, double inv_eps, double *mt, double *size)
{
    __m512d m[SLR_GROUP];
    double change = 0.0, one;
    int64_t g;
    for (g = 0; g < count; g++) {
        const int64_t deg = inc_ptr[nodes[g] + 1] - inc_ptr[nodes[g]];
        if (deg == 0 || deg > 4)
            break;
    }
    if (g < count) {   /* a star the vector of 8 does not hold: one at a time */
        for (g = 0; g < count; g++) {
            one = slr_binary_star_avx512(nodes[g], theta_nodes, theta_edges, edge_stride, lam,
                                         inc_ptr, inc_edge, inc_side, eps, inv_eps, mt, size);
            change = one > change ? one : change;
        }
        return change;
    }
    for (g = 0; g < count; g++) {
        const int64_t start = inc_ptr[nodes[g]];
        m[g] = slr_binary_marginals_v8(theta_edges, edge_stride, lam, inc_edge + start,
                                       inc_side + start, inc_ptr[nodes[g] + 1] - start, eps,
                                       inv_eps);
    }
    for (g = 0; g < count; g++) {
        const int64_t start = inc_ptr[nodes[g]];
        one = slr_binary_finish_v8(nodes[g], theta_nodes, lam, inc_edge + start,
                                   inc_side + start, inc_ptr[nodes[g] + 1] - start, mt + 8 * g,
                                   m[g], size);
        change = one > change ? one : change;
    }
    return change;
}

/* Maximum of the four lanes. */
SLR_AVX2 double slr_hmax(__m256d x)
{
    const __m128d half = _mm_max_pd(_mm256_castpd256_pd128(x), _mm256_extractf128_pd(x, 1));
    return _mm_cvtsd_f64(_mm_max_sd(half, _mm_unpackhi_pd(half, half)));
}

/* Sum of the four lanes. */
SLR_AVX2 double slr_hsum(__m256d x)
{
    const __m128d half = _mm_add_pd(_mm256_castpd256_pd128(x), _mm256_extractf128_pd(x, 1));
    return _mm_cvtsd_f64(_mm_add_sd(half, _mm_unpackhi_pd(half, half)));
}

/* max_b x_b and sum_b exp((x_b - max) / eps) of x_b = row[b] + other[b], b < L (a side-0 row). */
SLR_AVX2 void slr_row_reduce(const double *row, const double *other, int64_t L,
                             __m256d vinv, double *largest, double *total)
{
    const int64_t full = L & ~INT64_C(3);
    const __m256i tail = slr_first_lanes(L - full);
    const __m256d minus_inf = _mm256_set1_pd(-INFINITY);
    __m256d hi = minus_inf, sum = _mm256_setzero_pd();
    for (int64_t b = 0; b < full; b += 4)
        hi = _mm256_max_pd(hi, _mm256_add_pd(_mm256_loadu_pd(row + b),
                                             _mm256_loadu_pd(other + b)));
    /* masked-off lanes load 0 and become -inf, whose exp is 0 */
    const __m256d last = _mm256_blendv_pd(
        minus_inf, _mm256_add_pd(_mm256_maskload_pd(row + full, tail),
                                 _mm256_maskload_pd(other + full, tail)),
        _mm256_castsi256_pd(tail));
    const double top = slr_hmax(_mm256_max_pd(hi, last));
    const __m256d vtop = _mm256_set1_pd(top);
    for (int64_t b = 0; b < full; b += 4) {
        const __m256d x = _mm256_add_pd(_mm256_loadu_pd(row + b), _mm256_loadu_pd(other + b));
        sum = _mm256_add_pd(sum, slr_exp_nonpos_v4(_mm256_mul_pd(_mm256_sub_pd(x, vtop), vinv)));
    }
    sum = _mm256_add_pd(sum, slr_exp_nonpos_v4(_mm256_mul_pd(_mm256_sub_pd(last, vtop), vinv)));
    *largest = top;
    *total = slr_hsum(sum);
}

/* The same for the L rows a of a side-1 edge, x_a(b) = theta[b, a] + other[b], four values of a
 * at a time (a column of theta is contiguous across a). */
SLR_AVX2 void slr_column_reduce(const double *theta, const double *other, int64_t L,
                                __m256d vinv, double *largest, double *total)
{
    for (int64_t a = 0; a < L; a += 4) {
        const __m256i lanes = slr_first_lanes(L - a < 4 ? L - a : 4);
        __m256d hi = _mm256_set1_pd(-INFINITY), sum = _mm256_setzero_pd();
        for (int64_t b = 0; b < L; b++)
            hi = _mm256_max_pd(hi, _mm256_add_pd(_mm256_maskload_pd(theta + b * L + a, lanes),
                                                 _mm256_set1_pd(other[b])));
        for (int64_t b = 0; b < L; b++) {
            const __m256d x = _mm256_add_pd(_mm256_maskload_pd(theta + b * L + a, lanes),
                                            _mm256_set1_pd(other[b]));
            sum = _mm256_add_pd(sum, slr_exp_nonpos_v4(_mm256_mul_pd(_mm256_sub_pd(x, hi), vinv)));
        }
        _mm256_maskstore_pd(largest + a, lanes, hi);
        _mm256_maskstore_pd(total + a, lanes, sum);
    }
}

/* L states: mt[k L + a] for the deg edges edge[k] at a node on side side[k]. mt and scratch
 * hold deg L rounded up to a multiple of 4 doubles. Edge e's table starts at theta_edges +
 * L L e edge_stride (0: one shared table). */
__attribute__((target("avx2,fma"))) static void slr_general_marginals_avx2(
    const double *theta_edges, int64_t edge_stride, const double *lam, const int64_t *edge,
    const int64_t *side, int64_t deg, int64_t L, double eps, double inv_eps, double *mt,
    double *scratch)
{
    const int64_t n = deg * L, padded = (n + 3) & ~INT64_C(3);
    const __m256d vinv = _mm256_set1_pd(inv_eps);
    double *total = scratch;
    for (int64_t k = 0; k < deg; k++) {
        const double *theta = theta_edges + L * L * edge_stride * edge[k];
        const double *other = lam + L * (2 * edge[k] + 1 - side[k]);
        if (side[k] == 0) {
            for (int64_t a = 0; a < L; a++)
                slr_row_reduce(theta + a * L, other, L, vinv, mt + k * L + a, total + k * L + a);
        } else {
            slr_column_reduce(theta, other, L, vinv, mt + k * L, total + k * L);
        }
    }
    for (int64_t i = n; i < padded; i++) {
        mt[i] = 0.0;
        total[i] = 1.0;
    }
    const __m256d veps = _mm256_set1_pd(eps), zero = _mm256_setzero_pd();
    for (int64_t i = 0; i < padded; i += 4)
        _mm256_storeu_pd(mt + i, _mm256_fmadd_pd(
            veps, slr_log_v4(_mm256_loadu_pd(total + i), zero), _mm256_loadu_pd(mt + i)));
}

#else  /* no x86-64 or no GCC-compatible compiler: the kernels stay scalar */

static int slr_simd_supported(void) { return 0; }

/* never called: slr_simd_supported() is 0 */
static double slr_binary_star_avx2(int64_t v, const double *theta_nodes,
                                   const double *theta_edges, int64_t edge_stride, double *lam,
                                   const int64_t *inc_ptr, const int64_t *inc_edge,
                                   const int64_t *inc_side, double eps, double inv_eps,
                                   double *mt, double *size)
{
    return 0.0;
}

/* never called: slr_simd_supported() is 0 */
static double slr_binary_stars_avx2(const int64_t *nodes, int64_t count,
                                    const double *theta_nodes, const double *theta_edges,
                                    int64_t edge_stride, double *lam, const int64_t *inc_ptr,
                                    const int64_t *inc_edge, const int64_t *inc_side,
                                    double eps, double inv_eps, double *mt, double *size)
{
    return 0.0;
}

static int slr_avx512_supported(void) { return 0; }

/* never called: slr_avx512_supported() is 0 */
static double slr_binary_stars_avx512(const int64_t *nodes, int64_t count,
                                      const double *theta_nodes, const double *theta_edges,
                                      int64_t edge_stride, double *lam, const int64_t *inc_ptr,
                                      const int64_t *inc_edge, const int64_t *inc_side,
                                      double eps, double inv_eps, double *mt, double *size)
{
    return 0.0;
}

static void slr_general_marginals_avx2(const double *theta_edges, int64_t edge_stride,
                                       const double *lam, const int64_t *edge,
                                       const int64_t *side, int64_t deg, int64_t L, double eps,
                                       double inv_eps, double *mt, double *scratch)
{
}

#endif
#endif
