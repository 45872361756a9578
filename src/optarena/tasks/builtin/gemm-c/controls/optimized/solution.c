/* Four rows of c at a time in i-k-j order: each row of b is read once for four rows of a, and
   the inner loop walks b and c with unit stride (vectorizable at -O2). A remainder loop takes
   the last m % 4 rows. */
static void rows(int r, int n, int k, const float *a, const float *b, float *c) {
    for (int i = 0; i < r; i++) {
        float *restrict ci = c + (long)i * n;
        for (int j = 0; j < n; j++) ci[j] = 0.0f;
        for (int p = 0; p < k; p++) {
            const float x = a[(long)i * k + p];
            const float *restrict bp = b + (long)p * n;
            for (int j = 0; j < n; j++) ci[j] += x * bp[j];
        }
    }
}

void gemm_f32(int m, int n, int k, const float *a, const float *b, float *c) {
    int i = 0;
    for (; i + 4 <= m; i += 4) {
        float *restrict c0 = c + (long)i * n, *restrict c1 = c0 + n;
        float *restrict c2 = c1 + n, *restrict c3 = c2 + n;
        for (int j = 0; j < n; j++) c0[j] = c1[j] = c2[j] = c3[j] = 0.0f;
        const float *a0 = a + (long)i * k;
        for (int p = 0; p < k; p++) {
            const float x0 = a0[p], x1 = a0[k + p], x2 = a0[2 * k + p], x3 = a0[3 * k + p];
            const float *restrict bp = b + (long)p * n;
            for (int j = 0; j < n; j++) {
                const float y = bp[j];
                c0[j] += x0 * y;
                c1[j] += x1 * y;
                c2[j] += x2 * y;
                c3[j] += x3 * y;
            }
        }
    }
    rows(m - i, n, k, a + (long)i * k, b, c + (long)i * n);
}
