/* The judge's turn between two timed calls, compiled (`_turn.py` builds and loads it; the
 * hot path of `_calls.CallRun` calls it; docs/measurement.md, "The judge's turn, compiled").
 *
 * Why C: the turn runs on the worker's CPU while the worker waits, and the next call pays for
 * what it took of the caches. The same steps in Python walk the interpreter's objects, frames
 * and allocator between every two calls; here they touch the call's own bytes and a few
 * hundred bytes of state.
 *
 * What it trusts: the run's plan, from the judge (the copies, the go frames, the fds, the
 * layout offsets the hello probe checked). What it does not: everything it reads from the
 * worker, the reply head and the output object's fields, which the candidate can forge. It
 * reads them into fixed buffers of the sizes it asked for, checks each before it is used,
 * and on anything it does not take (a frame that is not a reference, an object that is not
 * a plain C-contiguous array within the limit, a read the kernel refuses) it stops and hands
 * the call back to the Python reader, which does the full checks and names the finding. So
 * this code never judges anything the Python path would refuse: it only takes the one shape
 * of answer the Python path takes without asking.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define OA_ABI 2
#define OA_MAX_NDIM 32
#define OA_SLICE_MS 50 /* the Python waiter's slice: it looks at the worker between slices */

enum { OA_DONE = 0, OA_SENT = 1, OA_HEAD = 2 };

typedef struct { /* one array of a call (`_arena.Copy`) */
    int64_t which, offset, source, nbytes;
} oa_copy;

typedef struct { /* a plain dtype the output may have (`_objects._PLAIN`) */
    uint8_t type_char, byteorder, pad[6];
    int64_t itemsize;
} oa_dtype;

typedef struct { /* the run's plan: the judge's own */
    uint8_t *inputs;
    const oa_copy *copies;
    const int64_t *copy_start; /* call i's copies: [copy_start[i], copy_start[i + 1]) */
    const uint8_t *frames;
    const int64_t *frame_start; /* call i's go frame: [frame_start[i], frame_start[i + 1]) */
    const oa_dtype *dtypes;
    const uint64_t *key;    /* the run's secret key (`oa_hash`), OA_LANES values below OA_P */
    const uint64_t *expect; /* copy k's source hashed under it: [OA_LANES * k, ...) */
    int64_t ndtypes;
    int64_t head;         /* the object head's size (`object.__basicsize__`) */
    int64_t ndarray_type; /* the ndarray type's address, from the probe */
    int64_t max_bytes;
    int32_t to_fd, from_fd, pid, cpu_fd; /* cpu_fd < 0: no CPU count */
    int32_t cpu_v1;                      /* cpuacct.usage (ns) rather than cpu.stat (us) */
    int32_t pad;
} oa_plan;

typedef struct { /* what one call gave, as the hot path takes it */
    int64_t t_go, answered, wall_now, cpu_now; /* cpu_now < 0: not read */
    int64_t changed;                           /* -1: the inputs are the judge's bytes */
    int64_t address, nbytes, dtype, nd;
    int64_t data; /* malloc'd copy of the output's bytes (0: none); the caller frees it */
    int64_t dims[OA_MAX_NDIM];
} oa_call;

typedef struct { /* where a run stopped */
    int64_t status;   /* OA_DONE, or the call `index` is handed back: */
    int64_t index;    /* OA_SENT: `got` bytes of its go frame were written */
    int64_t got;      /* OA_HEAD: the frame is sent, `got` bytes of its head are in `head` */
    int64_t answered; /* OA_HEAD with a whole head: when it arrived */
    uint8_t head[16];
} oa_stop;

int64_t oa_abi(void) { return OA_ABI; }

/* The input compare of a small array, by a keyed hash: four polynomials over GF(2**61 - 1),
 * one per lane of 32-bit words, evaluated at a secret point per lane, the length last. Why
 * not memcmp: the compare against the judge's copy of the inputs read that copy back between
 * two calls, and the next call ran that much colder (rmsnorm decode's 2x ratio 1.70 with it,
 * 1.79 with no compare at all); the hash reads only the area, which the call itself has just
 * read, and the source's hash is taken before the run. Any change to the area is found unless
 * the key is known (a polynomial of degree d has at most d roots: the chance per lane is
 * below d / 2**61), and the key lives in the judge's memory, which no worker can read.
 * Arrays over OA_HASH_MAX are compared exactly, with memcmp: for an array far larger than
 * the caches the hash bought nothing (rmsnorm prefill's 8 MiB input, 2x ratio 1.665 hashed
 * against 1.670 compared, four runs each) and it takes longer than the compare. Small ones
 * gained (rmsnorm decode's 256 KiB: 1.767 against 1.702, four runs each, the same tree). */
#define OA_P 0x1FFFFFFFFFFFFFFFULL
#define OA_LANES 4
#define OA_HASH_MAX (1 << 20)

int64_t oa_hash_max(void) { return OA_HASH_MAX; }

static inline uint64_t red(unsigned __int128 z) { /* z < 2**123 */
    uint64_t s = ((uint64_t)z & OA_P) + (uint64_t)(z >> 61);
    s = (s & OA_P) + (s >> 61);
    return s >= OA_P ? s - OA_P : s;
}

void oa_hash(const uint8_t *p, int64_t n, const uint64_t *key, uint64_t *out) {
    uint64_t h[OA_LANES] = {0, 0, 0, 0};
    int64_t i = 0;
    uint32_t w[OA_LANES];
    for (; i + 16 <= n; i += 16) {
        memcpy(w, p + i, 16);
        for (int l = 0; l < OA_LANES; l++)
            h[l] = red((unsigned __int128)(h[l] + w[l]) * key[l]);
    }
    if (i < n) {
        memset(w, 0, sizeof w);
        memcpy(w, p + i, (size_t)(n - i));
        for (int l = 0; l < OA_LANES; l++)
            h[l] = red((unsigned __int128)(h[l] + w[l]) * key[l]);
    }
    for (int l = 0; l < OA_LANES; l++)
        out[l] = red((unsigned __int128)(h[l] + (uint64_t)n) * key[l]);
}

int64_t oa_sizes(int64_t which) {
    switch (which) {
    case 0: return sizeof(oa_copy);
    case 1: return sizeof(oa_dtype);
    case 2: return sizeof(oa_plan);
    case 3: return sizeof(oa_call);
    case 4: return sizeof(oa_stop);
    default: return -1;
    }
}

static int64_t now_ns(void) { /* time.perf_counter_ns() on Linux */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int64_t cpu_read(const oa_plan *p) {
    char buf[4096];
    ssize_t n = pread(p->cpu_fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    char *end = NULL;
    if (p->cpu_v1) {
        long long v = strtoll(buf, &end, 10);
        return end == buf || v < 0 ? -1 : (int64_t)v;
    }
    for (char *line = buf; line && *line;) {
        char *next = strchr(line, '\n');
        if (strncmp(line, "usage_usec ", 11) == 0) {
            long long v = strtoll(line + 11, &end, 10);
            if (end == line + 11 || v < 0 || v > INT64_MAX / 1000)
                return -1;
            return (int64_t)v * 1000;
        }
        line = next ? next + 1 : NULL;
    }
    return -1;
}

static int vm_read(int pid, void *into, uint64_t address, size_t n) {
    struct iovec local = {into, n}, remote = {(void *)(uintptr_t)address, n};
    return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : -1;
}

static uint64_t u64_at(const uint8_t *b) {
    uint64_t v;
    memcpy(&v, b, 8);
    return v;
}

static int32_t i32_at(const uint8_t *b) {
    int32_t v;
    memcpy(&v, b, 4);
    return v;
}

/* The output the reference names, read as `ObjectReader.read` would take it, its bytes
 * copied into fresh memory; 0 when taken, -1 for anything else (the caller hands it back). */
static int take_output(const oa_plan *p, uint64_t ref, oa_call *c) {
    /* ob_type, data, nd, (pad), dimensions, strides, base, descr, flags: from head - 8 */
    uint8_t obj[160];
    int64_t h = p->head;
    if (h < 16 || h + 52 > (int64_t)sizeof obj)
        return -1;
    if (vm_read(p->pid, obj, ref, (size_t)(h + 52)))
        return -1;
    uint64_t typ = u64_at(obj + h - 8), data = u64_at(obj + h), dims = u64_at(obj + h + 16);
    uint64_t descr = u64_at(obj + h + 40);
    int32_t nd = i32_at(obj + h + 8), flags = i32_at(obj + h + 48);
    if (typ != (uint64_t)p->ndarray_type || nd < 0 || nd > OA_MAX_NDIM || !(flags & 1))
        return -1;
    /* (typeobj), kind, type, byteorder */
    uint8_t d[160];
    if (h + 11 > (int64_t)sizeof d || vm_read(p->pid, d, descr, (size_t)(h + 11)))
        return -1;
    int64_t dt = -1;
    for (int64_t k = 0; k < p->ndtypes; k++)
        if (p->dtypes[k].type_char == d[h + 9] && p->dtypes[k].byteorder == d[h + 10]) {
            dt = k;
            break;
        }
    if (dt < 0)
        return -1;
    if (nd && vm_read(p->pid, c->dims, dims, 8 * (size_t)nd))
        return -1;
    /* `shape_fits`: sizes >= 0, product of the non-zero ones times the item < 2**62 */
    int64_t itemsize = p->dtypes[dt].itemsize, fit = itemsize > 1 ? itemsize : 1, count = 1;
    for (int32_t k = 0; k < nd; k++) {
        int64_t s = c->dims[k];
        if (s < 0)
            return -1;
        if (s > 1 && fit > ((int64_t)1 << 62) / s)
            return -1;
        fit *= s > 1 ? s : 1;
        count *= s; /* <= fit / itemsize: cannot overflow */
    }
    if (fit >= ((int64_t)1 << 62))
        return -1;
    int64_t nbytes = count * itemsize;
    if (nbytes > p->max_bytes)
        return -1;
    uint8_t *buf = NULL;
    if (nbytes) {
        buf = malloc((size_t)nbytes);
        if (!buf)
            return -1;
        if (vm_read(p->pid, buf, data, (size_t)nbytes)) {
            free(buf);
            return -1;
        }
    }
    c->address = (int64_t)data;
    c->nbytes = nbytes;
    c->dtype = dt;
    c->nd = nd;
    c->data = (int64_t)(uintptr_t)buf;
    return 0;
}

/* Calls [first, end) of the plan (one segment of the run); `sent` > 0: call `first`'s go
 * frame is already out. Each call taken here is complete (inputs written, answer read, inputs
 * compared, clocks read); the call it stops at, if any, is described in `stop` and finished by
 * the caller. */
void oa_run(const oa_plan *p, int64_t first, int64_t end, int64_t sent, oa_call *calls,
            oa_stop *stop) {
    memset(stop, 0, sizeof *stop);
    for (int64_t i = first; i < end; i++) {
        oa_call *c = &calls[i];
        int64_t c0 = p->copy_start[i], c1 = p->copy_start[i + 1];
        if (!(i == first && sent)) {
            for (int64_t k = c0; k < c1; k++) {
                const oa_copy *cp = &p->copies[k];
                memcpy(p->inputs + cp->offset, (const void *)(uintptr_t)cp->source,
                       (size_t)cp->nbytes);
            }
            c->t_go = now_ns();
            const uint8_t *go = p->frames + p->frame_start[i];
            ssize_t len = p->frame_start[i + 1] - p->frame_start[i];
            ssize_t w = write(p->to_fd, go, (size_t)len);
            if (w != len) {
                stop->status = OA_SENT, stop->index = i, stop->got = w > 0 ? w : 0;
                return;
            }
        }
        struct pollfd pf = {p->from_fd, POLLIN, 0};
        int ready;
        do
            ready = poll(&pf, 1, OA_SLICE_MS);
        while (ready < 0 && errno == EINTR);
        if (ready != 1 || !(pf.revents & POLLIN)) {
            /* no answer within a slice: the caller waits, looking at the worker */
            stop->status = OA_SENT, stop->index = i;
            stop->got = p->frame_start[i + 1] - p->frame_start[i];
            return;
        }
        ssize_t n = read(p->from_fd, stop->head, sizeof stop->head);
        int64_t answered = now_ns();
        uint32_t index;
        memcpy(&index, stop->head + 4, 4);
        if (n != (ssize_t)sizeof stop->head || memcmp(stop->head, "OAR1", 4) != 0 ||
            index != (uint32_t)i || /* the plan is one segment: a call's index is its place */
            take_output(p, u64_at(stop->head + 8), c) != 0) {
            stop->status = OA_HEAD, stop->index = i, stop->got = n > 0 ? n : 0;
            stop->answered = answered;
            return;
        }
        c->answered = answered;
        c->changed = -1;
        for (int64_t k = c0; k < c1; k++) {
            const oa_copy *cp = &p->copies[k];
            const uint8_t *area = p->inputs + cp->offset;
            int same;
            if (cp->nbytes <= OA_HASH_MAX) {
                uint64_t got[OA_LANES];
                oa_hash(area, cp->nbytes, p->key, got);
                same = memcmp(got, p->expect + OA_LANES * k, sizeof got) == 0;
            } else {
                same = memcmp(area, (const void *)(uintptr_t)cp->source, (size_t)cp->nbytes) == 0;
            }
            if (!same) {
                c->changed = cp->which;
                break;
            }
        }
        c->cpu_now = p->cpu_fd >= 0 ? cpu_read(p) : -1;
        c->wall_now = now_ns();
    }
    memset(stop->head, 0, sizeof stop->head);
    stop->status = OA_DONE, stop->index = end;
}
