/* The benchmark's driver (not the project's code): for each seed read from stdin, it makes
   the input from that seed, times one box_sum over it, and writes the time and the output. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "stencil.h"

static uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

int main(int argc, char **argv) {
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 0;
    uint32_t *in = malloc(n * sizeof *in), *out = malloc(n * sizeof *out);
    uint64_t seed;
    if (n == 0 || in == NULL || out == NULL) return 2;
    while (fread(&seed, sizeof seed, 1, stdin) == 1) {
        for (size_t i = 0; i < n; i++) in[i] = (uint32_t)splitmix64(seed + i);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        box_sum(in, out, n);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double seconds = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
        if (fwrite(&seconds, sizeof seconds, 1, stdout) != 1) return 3;
        if (fwrite(out, sizeof *out, n, stdout) != n) return 3;
        fflush(stdout);
    }
    return 0;
}
