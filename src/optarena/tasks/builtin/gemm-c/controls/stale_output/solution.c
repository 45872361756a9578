/* Wrong: keeps the first output of each shape in static memory and copies it back whenever the
 * shape comes again (a cache across calls: the inputs are fresh every call). */

#include <stdlib.h>
#include <string.h>

static float *cached;
static int cached_m = -1, cached_n = -1;

void gemm_f32(int m, int n, int k, const float *a, const float *b, float *c)
{
    size_t bytes = (size_t)m * n * sizeof(float);
    if (cached != NULL && cached_m == m && cached_n == n) {
        memcpy(c, cached, bytes);
        return;
    }
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
            float sum = 0.0f;
            for (int p = 0; p < k; p++) {
                sum += a[i * k + p] * b[p * n + j];
            }
            c[i * n + j] = sum;
        }
    }
    free(cached);
    cached = malloc(bytes ? bytes : 1);
    if (cached != NULL) {
        memcpy(cached, c, bytes);
        cached_m = m;
        cached_n = n;
    }
}
