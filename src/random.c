/* ----------------------------------------------------------------------------
  random.c -- the allocator's random generator.

  Randomness seeds the segment cookies, the heap cookies and keys, the
  free-list keys and, in secure builds, the order of fresh blocks. Release
  builds use xoshiro256** (fast, 256-bit state, good statistical quality);
  secure builds use ChaCha20's key stream (20 rounds, 256-bit key, 64-bit
  block counter, the state's address as the nonce), so that outputs seen by
  an attacker do not tell the next ones. The main heap is seeded from the OS
  once; every other heap (including new threads' heaps) is seeded from an
  existing generator (*split*), so creating a thread costs no `getrandom`.
-----------------------------------------------------------------------------*/
#include "mimalloc-internal.h"
#include "prim/prim.h"

static uint64_t mi_splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// A cheap mix of one word into another (a splitmix64 finalizer): to stretch
// one random word over several decisions (the secure free-list shuffle).
uintptr_t _mi_random_shuffle(uintptr_t x) {
  uint64_t state = (uint64_t)x;
  return (uintptr_t)mi_splitmix64(&state);
}

// ChaCha20's block function: 20 rounds over the 16-word input, plus the
// input (as in RFC 8439, section 2.3).
static inline uint32_t mi_rotl32(uint32_t x, unsigned n) {
  return (x << n) | (x >> (32 - n));
}

#define MI_QUARTER_ROUND(x, a, b, c, d) do { \
    x[a] += x[b]; x[d] = mi_rotl32(x[d] ^ x[a], 16); \
    x[c] += x[d]; x[b] = mi_rotl32(x[b] ^ x[c], 12); \
    x[a] += x[b]; x[d] = mi_rotl32(x[d] ^ x[a], 8);  \
    x[c] += x[d]; x[b] = mi_rotl32(x[b] ^ x[c], 7);  \
  } while (0)

void _mi_chacha20_block(const uint32_t input[16], uint32_t output[16]) {
  uint32_t x[16];
  for (int i = 0; i < 16; i++) x[i] = input[i];
  for (int i = 0; i < 10; i++) {
    MI_QUARTER_ROUND(x, 0, 4, 8, 12); MI_QUARTER_ROUND(x, 1, 5, 9, 13);
    MI_QUARTER_ROUND(x, 2, 6, 10, 14); MI_QUARTER_ROUND(x, 3, 7, 11, 15);
    MI_QUARTER_ROUND(x, 0, 5, 10, 15); MI_QUARTER_ROUND(x, 1, 6, 11, 12);
    MI_QUARTER_ROUND(x, 2, 7, 8, 13); MI_QUARTER_ROUND(x, 3, 4, 9, 14);
  }
  for (int i = 0; i < 16; i++) output[i] = x[i] + input[i];
}

#if MI_SECURE_RANDOM

// Seed with a 256-bit key; the nonce is the state's own address.
static void mi_random_seed_words(mi_random_ctx_t* ctx, const uint64_t seed[4]) {
  static const uint32_t sigma[4] = { 0x61707865, 0x3320646e, 0x79622d32, 0x6b206574 };   // "expand 32-byte k"
  for (int i = 0; i < 4; i++) ctx->input[i] = sigma[i];
  for (int i = 0; i < 4; i++) {
    ctx->input[4 + 2*i] = (uint32_t)seed[i];
    ctx->input[5 + 2*i] = (uint32_t)(seed[i] >> 32);
  }
  const uint64_t nonce = (uint64_t)(uintptr_t)ctx;
  ctx->input[12] = 0;
  ctx->input[13] = 0;
  ctx->input[14] = (uint32_t)nonce;
  ctx->input[15] = (uint32_t)(nonce >> 32);
  ctx->output_available = 0;
}

static uintptr_t mi_random_next(mi_random_ctx_t* ctx) {
  if (ctx->output_available < 2) {
    _mi_chacha20_block(ctx->input, ctx->output);
    ctx->output_available = 16;
    if (++ctx->input[12] == 0) ctx->input[13]++;   // the 64-bit block counter
  }
  const int i = 16 - ctx->output_available;
  const uint64_t x = ((uint64_t)ctx->output[i] << 32) | ctx->output[i + 1];
  ctx->output[i] = ctx->output[i + 1] = 0;   // a used output does not stay in memory
  ctx->output_available -= 2;
  return (uintptr_t)x;
}

#else

static void mi_random_seed_words(mi_random_ctx_t* ctx, const uint64_t seed[4]) {
  uint64_t mix = seed[0] ^ mi_rotl(seed[1], 16) ^ mi_rotl(seed[2], 32) ^ mi_rotl(seed[3], 48);
  for (int i = 0; i < 4; i++) ctx->s[i] = seed[i] ^ mi_splitmix64(&mix);
  if ((ctx->s[0] | ctx->s[1] | ctx->s[2] | ctx->s[3]) == 0) ctx->s[0] = 1;
}

static uintptr_t mi_random_next(mi_random_ctx_t* ctx) {
  uint64_t* s = ctx->s;
  const uint64_t result = mi_rotl(s[1] * 5, 7) * 9;
  const uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = mi_rotl(s[3], 45);
  return (uintptr_t)result;
}

#endif

// A weak random value from time and address-space layout: used only when the
// OS cannot give randomness, and to seed before the OS layer is ready.
uintptr_t _mi_os_random_weak(uintptr_t extra_seed) {
  uintptr_t x = (uintptr_t)&_mi_os_random_weak ^ extra_seed;
  x ^= (uintptr_t)_mi_prim_clock_now();
  uint64_t state = x;
  return (uintptr_t)mi_splitmix64(&state);
}

void _mi_random_init(mi_random_ctx_t* ctx) {
  uint64_t seed[4];
  if (!_mi_prim_random_buf(seed, sizeof(seed))) {
    _mi_warning_message("unable to use secure randomness\n");
    for (int i = 0; i < 4; i++) seed[i] = _mi_os_random_weak((uintptr_t)i ^ (uintptr_t)ctx);
  }
  mi_random_seed_words(ctx, seed);
}

// Seed from 256 bits the caller derived from secret state.
void _mi_random_init_seed(mi_random_ctx_t* ctx, const uint64_t seed[4]) {
  mi_random_seed_words(ctx, seed);
}

static uint64_t mi_random_next64(mi_random_ctx_t* ctx) {
  #if (MI_INTPTR_SIZE >= 8)
  return (uint64_t)mi_random_next(ctx);
  #else
  return ((uint64_t)mi_random_next(ctx) << 32) | (uint64_t)mi_random_next(ctx);
  #endif
}

void _mi_random_split(mi_random_ctx_t* ctx, mi_random_ctx_t* new_ctx) {
  uint64_t seed[4];
  for (int i = 0; i < 4; i++) seed[i] = mi_random_next64(ctx);
  seed[0] ^= (uint64_t)(uintptr_t)new_ctx;
  mi_random_seed_words(new_ctx, seed);
}

uintptr_t _mi_heap_random_next(mi_heap_t* heap) {
  return mi_random_next(&heap->random);
}

#if MI_SECURE_RANDOM_EXTEND
// A coin: one random bit, 63 of them from each draw of the generator (the
// bits wait above a marker bit, which the last shift leaves alone).
bool _mi_heap_random_coin(mi_heap_t* heap) {
  if (heap->coins <= 1) heap->coins = (uint64_t)_mi_heap_random_next(heap) | ((uint64_t)1 << 63);
  const bool coin = ((heap->coins & 1) != 0);
  heap->coins >>= 1;
  return coin;
}
#endif
