/* ----------------------------------------------------------------------------
  batch.c -- allocate a big batch of small blocks, then free the whole batch.

  Parsers, compilers and per-request arenas built on malloc allocate many
  small objects, use them, and release them all together. One thread
  `rounds` times allocates a batch of `blocks` blocks and then frees all of
  them. Rounds alternate between two kinds of batch:
  - random sizes in [min, max] (16 to 256 bytes), or
  - one fixed size (`fixed`, 64 bytes);
  and cycle through three orders of freeing:
  - in allocation order (first in, first out),
  - in reverse order (last in, first out),
  - in a random order (a fresh shuffle every time),
  so every combination comes up every six rounds. A batch of 50000 blocks is
  far more than any thread cache holds: the allocator fills whole pages and
  then finds them empty again, in an order it does not choose.

  Every block carries a tag (bench.h) checked before it is freed. The result
  is deterministic: `check` hashes the sizes and tags read back.

  usage: batch [rounds=600] [blocks=50000] [min=16] [max=256] [fixed=64]
  prints: blocks (malloc+free) per second.
-----------------------------------------------------------------------------*/
#include "bench.h"

int main(int argc, char** argv) {
  const long rounds = bench_arg(argc, argv, 1, 600);
  const size_t blocks = (size_t)bench_arg(argc, argv, 2, 50000);
  const size_t min = (size_t)bench_arg(argc, argv, 3, 16);
  const size_t max = (size_t)bench_arg(argc, argv, 4, 256);
  const size_t fixed = (size_t)bench_arg(argc, argv, 5, 64);
  if (rounds < 1 || blocks < 1 || min < 8 || max < min || fixed < 8) bench_fail("bad arguments");

  bench_rng_t rng;
  bench_rng_init(&rng, 7);
  void** ptrs = (void**)bench_malloc(blocks * sizeof(void*));
  size_t* sizes = (size_t*)bench_malloc(blocks * sizeof(size_t));
  size_t* order = (size_t*)bench_malloc(blocks * sizeof(size_t));
  uint64_t check = 0;

  const double start = bench_now();
  for (long r = 0; r < rounds; r++) {
    const int random_sizes = (r % 2 == 0);
    const int how = (int)(r % 3);   // 0: in order, 1: reverse, 2: random
    for (size_t i = 0; i < blocks; i++) {
      const size_t size = (random_sizes ? bench_range(&rng, min, max) : fixed);
      sizes[i] = size;
      ptrs[i] = bench_malloc(size);
      bench_mark(ptrs[i], size, i);
    }
    for (size_t i = 0; i < blocks; i++) order[i] = (how == 1 ? blocks - 1 - i : i);
    if (how == 2) {
      for (size_t i = blocks - 1; i > 0; i--) {
        const size_t j = bench_below(&rng, i + 1);
        const size_t t = order[i]; order[i] = order[j]; order[j] = t;
      }
    }
    for (size_t i = 0; i < blocks; i++) {
      const size_t k = order[i];
      bench_check(ptrs[k], sizes[k], k, "batch");
      uint64_t tag;
      memcpy(&tag, ptrs[k], sizeof tag);
      if ((i & 1023) == 0) check = bench_hash(check, tag);
      free(ptrs[k]);
    }
  }
  const double secs = bench_now() - start;
  free(order);
  free(sizes);
  free(ptrs);
  printf("batch: %ld rounds x %zu blocks, %.2f Mblocks/s check=%016llx\n", rounds, blocks,
         (double)rounds * (double)blocks / secs / 1e6, (unsigned long long)check);
  return 0;
}
