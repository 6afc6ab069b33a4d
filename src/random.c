/* ----------------------------------------------------------------------------
  random.c -- the allocator's random generator.

  Randomness seeds the segment cookies, the heap cookies and keys, and the
  address hint of the OS layer. We use xoshiro256** (fast, 256-bit state,
  good statistical quality); the main heap is seeded from the OS once, and
  every other heap (including new threads' heaps) is *split* from an existing
  generator, so creating a thread costs no `getrandom` call.

  Secure mode (a later issue) replaces this with a cryptographic generator
  behind the same four functions.
-----------------------------------------------------------------------------*/
#include "mimalloc-internal.h"
#include "prim/prim.h"

static uint64_t mi_splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uintptr_t _mi_random_next(mi_random_ctx_t* ctx) {
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

static void mi_random_seed(mi_random_ctx_t* ctx, uint64_t seed) {
  for (int i = 0; i < 4; i++) ctx->s[i] = mi_splitmix64(&seed);
}

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
  for (int i = 0; i < 4; i++) ctx->s[i] = seed[i];
  if ((ctx->s[0] | ctx->s[1] | ctx->s[2] | ctx->s[3]) == 0) mi_random_seed(ctx, 1);
}

void _mi_random_split(mi_random_ctx_t* ctx, mi_random_ctx_t* new_ctx) {
  mi_random_seed(new_ctx, (uint64_t)_mi_random_next(ctx) ^ (uint64_t)(uintptr_t)new_ctx);
}

uintptr_t _mi_heap_random_next(mi_heap_t* heap) {
  return _mi_random_next(&heap->random);
}
