/* Wrong: adds into c without clearing it first (c holds garbage on entry). */

void gemm_f32(int m, int n, int k, const float *a, const float *b, float *c)
{
    for (int i = 0; i < m; i++) {
        for (int p = 0; p < k; p++) {
            for (int j = 0; j < n; j++) {
                c[i * n + j] += a[i * k + p] * b[p * n + j];
            }
        }
    }
}
