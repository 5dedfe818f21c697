/* The scalar arithmetic floor of a star sweep, compiled by bench_inference.py.
 *
 * A sweep's cost is dominated by exp and log of single doubles from libm, one value at a
 * time (the operands are gathered through the graph's incidence lists). numpy evaluates
 * the same count of calls as whole-array SIMD loops, a floor that no scalar kernel reaches
 * on hosts with wide vector units; this loop gives the scalar one beside it.
 */
#include <math.h>
#include <stddef.h>

/* sum(exp(exp_input)) + sum(log(log_input)) by scalar libm calls */
double scalar_exp_log(const double *exp_input, size_t n_exp, const double *log_input,
                      size_t n_log)
{
    double acc = 0.0;
    for (size_t i = 0; i < n_exp; i++)
        acc += exp(exp_input[i]);
    for (size_t i = 0; i < n_log; i++)
        acc += log(log_input[i]);
    return acc;
}
