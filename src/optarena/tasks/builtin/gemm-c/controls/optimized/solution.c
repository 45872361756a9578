/* c = a @ b, row-major. Loop order i-k-j (the innermost loop runs along rows of b and c, unit
 * stride, which the compiler vectorises at -O2), blocked over k and j so that the block of b in
 * use stays in cache while every row of a passes over it, four rows of c at a time so each
 * loaded element of b is used four times. */

#define BLOCK_K 128
#define BLOCK_J 512

static void rows4(int n, int k, int j0, int j1, int p0, int p1, const float *a,
                  const float *b, float *c)
{
    float *restrict c0 = c, *restrict c1 = c + n, *restrict c2 = c + 2 * n;
    float *restrict c3 = c + 3 * n;
    for (int p = p0; p < p1; p++) {
        const float a0 = a[p], a1 = a[k + p], a2 = a[2 * k + p], a3 = a[3 * k + p];
        const float *restrict bp = b + (long)p * n;
        for (int j = j0; j < j1; j++) {
            const float bv = bp[j];
            c0[j] += a0 * bv;
            c1[j] += a1 * bv;
            c2[j] += a2 * bv;
            c3[j] += a3 * bv;
        }
    }
}

static void row1(int n, int j0, int j1, int p0, int p1, const float *a, const float *b,
                 float *c)
{
    float *restrict ci = c;
    for (int p = p0; p < p1; p++) {
        const float av = a[p];
        const float *restrict bp = b + (long)p * n;
        for (int j = j0; j < j1; j++) {
            ci[j] += av * bp[j];
        }
    }
}

void gemm_f32(int m, int n, int k, const float *a, const float *b, float *c)
{
    for (long i = 0; i < (long)m * n; i++) {
        c[i] = 0.0f;
    }
    for (int j0 = 0; j0 < n; j0 += BLOCK_J) {
        const int j1 = j0 + BLOCK_J < n ? j0 + BLOCK_J : n;
        for (int p0 = 0; p0 < k; p0 += BLOCK_K) {
            const int p1 = p0 + BLOCK_K < k ? p0 + BLOCK_K : k;
            int i = 0;
            for (; i + 4 <= m; i += 4) {
                rows4(n, k, j0, j1, p0, p1, a + (long)i * k, b, c + (long)i * n);
            }
            for (; i < m; i++) {
                row1(n, j0, j1, p0, p1, a + (long)i * k, b, c + (long)i * n);
            }
        }
    }
}
