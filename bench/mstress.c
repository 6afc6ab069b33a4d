/* ----------------------------------------------------------------------------
  mstress.c -- threads that come and go while their objects live on.

  Larger servers start and stop worker threads, and objects a worker allocated
  often outlive it. Each of `rounds` rounds starts `threads` workers and waits
  for them. A worker runs `steps` random steps on its own list of blocks:
  - allocate (44% of the steps): mostly 1 to 64 words, 1 in 100 up to 4 KiB,
    1 in 10000 up to 256 KiB;
  - realloc a block to a new size (10%), checking the contents moved along;
  - free a block (36%);
  - swap a block with a random slot of a process-wide transfer array (10%),
    so blocks are freed by threads that did not allocate them.
  When a worker ends it frees half of its list and leaves the other half, with
  the transfer array, to the workers of later rounds: those blocks outlive
  the thread that allocated them. The list itself is grown with realloc.

  Every block carries a tag (bench.h) checked on every realloc and free.

  usage: mstress [threads=2*ncpu] [rounds=30] [steps=100000]
  prints: steps per second.
-----------------------------------------------------------------------------*/
#include <pthread.h>
#include <stdatomic.h>
#include "bench.h"

#define TRANSFER 1000

// a block of `size` bytes; its tag (salt 0) is in its first and last word
typedef bench_item_t item_t;

typedef struct list_s {
  item_t* items;
  size_t count, capacity;
} list_t;

static _Atomic(item_t*) transfer[TRANSFER];   // boxed items, swapped atomically
static list_t* survivors;                     // per worker slot: what the last worker left
static long steps;

static size_t random_size(bench_rng_t* rng) {
  const size_t r = bench_below(rng, 10000);
  size_t words;
  if (r == 0) words = bench_range(rng, 512, 32768);      // up to 256 KiB
  else if (r < 100) words = bench_range(rng, 64, 512);   // up to 4 KiB
  else words = bench_range(rng, 1, 64);
  return words * sizeof(uint64_t);
}

static void list_push(list_t* l, item_t it) {
  if (l->count == l->capacity) {
    l->capacity = (l->capacity == 0 ? 64 : 2 * l->capacity);
    l->items = (item_t*)bench_realloc(l->items, l->capacity * sizeof(item_t));
  }
  l->items[l->count++] = it;
}

static item_t item_new(bench_rng_t* rng) {
  return bench_item_new(random_size(rng));
}

static void item_free(item_t it) {
  bench_item_free(it, "mstress free");
}

static void* worker(void* arg) {
  const size_t slot = (size_t)(uintptr_t)arg >> 16;
  bench_rng_t rng;
  bench_rng_init(&rng, (uint64_t)(uintptr_t)arg);
  list_t l = survivors[slot];   // adopt what the previous worker of this slot left
  survivors[slot] = (list_t){ NULL, 0, 0 };
  for (long s = 0; s < steps; s++) {
    const size_t r = bench_below(&rng, 100);
    if (r < 44 || l.count == 0) {
      list_push(&l, item_new(&rng));
    } else if (r < 54) {
      // realloc: the old tag must survive the move, then the block gets the new one
      item_t* it = &l.items[bench_below(&rng, l.count)];
      bench_check(it->block, it->size, 0, "mstress realloc");
      uint64_t first;
      memcpy(&first, it->block, sizeof first);
      const size_t size = random_size(&rng);
      it->block = bench_realloc(it->block, size);
      uint64_t moved;
      memcpy(&moved, it->block, sizeof moved);
      if (moved != first) bench_fail("mstress: realloc lost the contents of a block");
      it->size = size;
      bench_mark(it->block, size, 0);
    } else if (r < 90) {
      const size_t k = bench_below(&rng, l.count);
      item_free(l.items[k]);
      l.items[k] = l.items[--l.count];
    } else {
      // swap one of ours with whatever another thread left in a transfer slot
      const size_t k = bench_below(&rng, l.count);
      item_t* box = (item_t*)bench_malloc(sizeof(item_t));
      *box = l.items[k];
      l.items[k] = l.items[--l.count];
      item_t* got = atomic_exchange(&transfer[bench_below(&rng, TRANSFER)], box);
      if (got != NULL) { list_push(&l, *got); free(got); }
    }
  }
  // free half, leave the rest to a worker of a later round
  size_t kept = 0;
  for (size_t i = 0; i < l.count; i++) {
    if ((i & 1) == 0) item_free(l.items[i]);
    else l.items[kept++] = l.items[i];
  }
  l.count = kept;
  survivors[slot] = l;
  return NULL;
}

int main(int argc, char** argv) {
  const long threads = bench_arg(argc, argv, 1, 2 * bench_ncpu());
  const long rounds = bench_arg(argc, argv, 2, 30);
  steps = bench_arg(argc, argv, 3, 100000);
  survivors = (list_t*)calloc((size_t)threads, sizeof(list_t));
  pthread_t* tids = (pthread_t*)bench_malloc((size_t)threads * sizeof(pthread_t));
  if (survivors == NULL) bench_fail("calloc");

  const double start = bench_now();
  for (long r = 0; r < rounds; r++) {
    for (long t = 0; t < threads; t++) {
      // the slot in the high bits, the round in the low bits (the seed)
      const uintptr_t arg = ((uintptr_t)t << 16) | (uintptr_t)(r + 1);
      if (pthread_create(&tids[t], NULL, worker, (void*)arg) != 0) bench_fail("pthread_create");
    }
    for (long t = 0; t < threads; t++) pthread_join(tids[t], NULL);
  }
  const double secs = bench_now() - start;

  for (long t = 0; t < threads; t++) {
    for (size_t i = 0; i < survivors[t].count; i++) item_free(survivors[t].items[i]);
    free(survivors[t].items);
  }
  for (size_t i = 0; i < TRANSFER; i++) {
    item_t* box = atomic_load(&transfer[i]);
    if (box != NULL) { item_free(*box); free(box); }
  }
  free(survivors);
  free(tids);
  printf("mstress: %ld threads x %ld rounds x %ld steps, %.2f Msteps/s\n", threads, rounds, steps,
         (double)(threads * rounds * steps) / secs / 1e6);
  return 0;
}
