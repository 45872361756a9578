/* Wrong: does not compile (an undeclared identifier); the judge reports the compiler's message. */

void gemm_f32(int m, int n, int k, const float *a, const float *b, float *c)
{
    for (int i = 0; i < m * n; i++) {
        c[i] = a[0] * b[0] * (float)k + undeclared_sum;
    }
}
