/* The project's kernel: a periodic box filter, the sum of each cell's 2R+1 neighbours. */
#ifndef STENCIL_H
#define STENCIL_H
#include <stddef.h>
#include <stdint.h>

#define STENCIL_RADIUS 8

/* out[i] = sum of in[(i + d) mod n] for d in -R..R, wrapping modulo 2^32. */
void box_sum(const uint32_t *in, uint32_t *out, size_t n);

#endif
