/* The box filter, written plainly: every cell sums its whole window, wrapping each index. */
#include "stencil.h"

void box_sum(const uint32_t *in, uint32_t *out, size_t n) {
    const long m = (long)n;
    for (long i = 0; i < m; i++) {
        uint32_t s = 0;
        for (long d = -STENCIL_RADIUS; d <= STENCIL_RADIUS; d++) {
            s += in[((i + d) % m + m) % m];
        }
        out[i] = s;
    }
}
