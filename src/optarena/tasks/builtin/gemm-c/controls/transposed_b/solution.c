/* Wrong: reads b as if it were stored transposed (n x k), i.e. computes a @ b^T for square b.
 * Every index stays inside b's k * n elements, so it is wrong, never out of bounds. */

void gemm_f32(int m, int n, int k, const float *a, const float *b, float *c)
{
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
            float sum = 0.0f;
            for (int p = 0; p < k; p++) {
                sum += a[i * k + p] * b[j * k + p];
            }
            c[i * n + j] = sum;
        }
    }
}
