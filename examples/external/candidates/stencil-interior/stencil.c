/* The box filter with the wrap taken out of the inner loop: cells whose whole window lies
   inside the array index it directly (and the compiler can vectorize that loop). */
#include "stencil.h"

void box_sum(const uint32_t *in, uint32_t *out, size_t n) {
    const long r = STENCIL_RADIUS, m = (long)n;
    for (long i = 0; i < m; i++) {
        uint32_t s = 0;
        if (i >= r && i + r < m) {
            for (long d = -r; d <= r; d++) s += in[i + d];
        } else {
            for (long d = -r; d <= r; d++) s += in[((i + d) % m + m) % m];
        }
        out[i] = s;
    }
}
