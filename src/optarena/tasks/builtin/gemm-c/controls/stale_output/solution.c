/* Wrong: keeps the first output of each shape in static memory (up to 32 shapes) and copies it
 * back whenever that shape comes again (a cache across calls: the inputs are fresh every call). */

#include <stdlib.h>
#include <string.h>

#define SLOTS 32

static struct {
    int m, n, k;
    float *out;
} cache[SLOTS];

static void compute(int m, int n, int k, const float *a, const float *b, float *c)
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

void gemm_f32(int m, int n, int k, const float *a, const float *b, float *c)
{
    size_t bytes = (size_t)m * n * sizeof(float);
    int free_slot = -1;
    for (int s = 0; s < SLOTS; s++) {
        if (cache[s].out != NULL && cache[s].m == m && cache[s].n == n && cache[s].k == k) {
            memcpy(c, cache[s].out, bytes);
            return;
        }
        if (cache[s].out == NULL && free_slot < 0) {
            free_slot = s;
        }
    }
    compute(m, n, k, a, b, c);
    if (free_slot >= 0 && (cache[free_slot].out = malloc(bytes)) != NULL) {
        memcpy(cache[free_slot].out, c, bytes);
        cache[free_slot].m = m;
        cache[free_slot].n = n;
        cache[free_slot].k = k;
    }
}
