/* hash: the project's one byte-string hash and one integer mixer, for every table that needs
 * them (the segment's string table, the analysis's name and index maps, the live-address table,
 * the PyTorch hook's name cache). Header-only and C++-clean: the hook is C++. */
#ifndef TERMSIGHT_HASH_H
#define TERMSIGHT_HASH_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a over n bytes, from seed (0 for the plain hash): short names, no setup cost. */
static inline uint64_t hash_bytes_seeded(const char *p, size_t n, uint64_t seed)
{
    uint64_t h = 1469598103934665603ull ^ seed;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ull;
    }
    return h;
}

static inline uint64_t hash_bytes(const char *p, size_t n)
{
    return hash_bytes_seeded(p, n, 0);
}

/* A 64-bit finalizer (MurmurHash3's fmix64): spreads keys whose low bits repeat (addresses,
 * ids) over a power-of-two table. */
static inline uint64_t hash_mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    return k ^ (k >> 33);
}

#endif
