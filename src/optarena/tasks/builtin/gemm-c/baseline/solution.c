/* c = a @ b, row-major: a is m x k, b is k x n, c is m x n. The textbook triple loop. */

void gemm_f32(int m, int n, int k, const float *a, const float *b, float *c)
{
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
            float sum = 0.0f;
            for (int p = 0; p < k; p++) {
                sum += a[i * k + p] * b[p * n + j];
            }
            c[i * n + j] = sum;
        }
    }
}
