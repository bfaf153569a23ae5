/* bench_rng.h — the dump generators' seeded PRNG (splitmix64): the same seed writes the same
 * dump, byte for byte, on every machine. Header-only: two small generators share it. */
#ifndef LW_BENCH_RNG_H
#define LW_BENCH_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct rng { uint64_t s; } rng;

static inline uint64_t rnext(rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* [0, n); 0 when n is 0 */
static inline uint64_t rbelow(rng *r, uint64_t n) { return n ? rnext(r) % n : 0; }

/* [0, 1) */
static inline double runif(rng *r) { return (double)(rnext(r) >> 11) * (1.0 / 9007199254740992.0); }

/* log-uniform integer in [lo, hi] (lo >= 1) */
static inline uint64_t rlog(rng *r, uint64_t lo, uint64_t hi) {
    if (hi <= lo) return lo;
    double v = exp(log((double)lo) + runif(r) * (log((double)hi + 1.0) - log((double)lo)));
    uint64_t n = (uint64_t)v;
    return n < lo ? lo : n > hi ? hi : n;
}

#endif
