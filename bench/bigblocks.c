/* ----------------------------------------------------------------------------
  bigblocks.c -- zeroed buffers of many megabytes, replaced over and over.

  Image, audio and matrix code, decompressors and the like keep a few big
  zeroed buffers and replace them as their input changes. One thread keeps
  `live` buffers and `replacements` times replaces a random one with a new
  calloc of a random size in [min, max] (5 to 25 MiB): it checks that the new
  buffer reads as zero (one word per 4 KiB page, and the first and the last
  word), writes one word into every 4 KiB page and the tags, then checks the
  tags and one written word of the buffer it replaces and frees that one.
  So this measures how an allocator gets big zeroed memory: fresh from the OS
  (already zero, but every page faults), or reused (no faults, but calloc
  must clear it), and whether it gives memory back (the peak RSS).

  Every buffer carries a tag (bench.h) checked before it is freed; the page
  words are checked too.

  usage: bigblocks [replacements=300] [live=20] [min=5242880] [max=26214400]
  prints: replacements per second.
-----------------------------------------------------------------------------*/
#include "bench.h"

#define PAGE 4096

typedef struct buffer_s { char* block; size_t size; uint64_t salt; } buffer_t;

static uint64_t page_word(uint64_t salt, size_t page) {
  return bench_hash(salt, (uint64_t)page);
}

static buffer_t buffer_new(bench_rng_t* rng, size_t min, size_t max, uint64_t salt) {
  buffer_t b;
  b.size = bench_range(rng, min, max);
  b.salt = salt;
  b.block = (char*)calloc(1, b.size);
  if (b.block == NULL) bench_fail("calloc(1, %zu) returned NULL", b.size);
  uint64_t w, any = 0;
  for (size_t off = 0; off + sizeof w <= b.size; off += PAGE) {
    memcpy(&w, b.block + off, sizeof w);
    any |= w;
  }
  memcpy(&w, b.block + b.size - sizeof w, sizeof w);
  any |= w;
  if (any != 0) bench_fail("bigblocks: calloc(1, %zu) returned memory that is not zero", b.size);
  for (size_t off = PAGE, page = 1; off + sizeof w <= b.size - sizeof w; off += PAGE, page++) {
    w = page_word(salt, page);
    memcpy(b.block + off, &w, sizeof w);
  }
  bench_mark(b.block, b.size, salt);
  return b;
}

static void buffer_free(buffer_t b, bench_rng_t* rng) {
  bench_check(b.block, b.size, b.salt, "bigblocks");
  // and one of the page words
  const size_t pages = (b.size - 2 * sizeof(uint64_t)) / PAGE;
  if (pages > 1) {
    const size_t page = 1 + bench_below(rng, pages - 1);
    uint64_t w;
    memcpy(&w, b.block + page * PAGE, sizeof w);
    if (w != page_word(b.salt, page)) bench_fail("bigblocks: page %zu of a buffer of %zu bytes was corrupted", page, b.size);
  }
  free(b.block);
}

int main(int argc, char** argv) {
  const long replacements = bench_arg(argc, argv, 1, 300);
  const size_t live = (size_t)bench_arg(argc, argv, 2, 20);
  const size_t min = (size_t)bench_arg(argc, argv, 3, 5 << 20);
  const size_t max = (size_t)bench_arg(argc, argv, 4, 25 << 20);
  if (live < 1 || min < PAGE || max < min) bench_fail("bad arguments");
  bench_rng_t rng;
  bench_rng_init(&rng, 42);
  buffer_t* buffers = (buffer_t*)bench_malloc(live * sizeof(buffer_t));

  const double start = bench_now();
  for (size_t i = 0; i < live; i++) buffers[i] = buffer_new(&rng, min, max, i);
  uint64_t check = 0;
  for (long r = 0; r < replacements; r++) {
    const size_t k = bench_below(&rng, live);
    buffer_free(buffers[k], &rng);
    buffers[k] = buffer_new(&rng, min, max, live + (uint64_t)r);
    check = bench_hash(check, buffers[k].size);
  }
  for (size_t i = 0; i < live; i++) buffer_free(buffers[i], &rng);
  const double secs = bench_now() - start;
  free(buffers);
  printf("bigblocks: %ld replacements of %zu buffers of %zu-%zu bytes, %.1f replacements/s check=%016llx\n",
         replacements, live, min, max, (double)replacements / secs, (unsigned long long)check);
  return 0;
}
