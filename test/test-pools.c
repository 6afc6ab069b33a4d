/* ----------------------------------------------------------------------------
  test-pools.c -- the pools of shared segments: a thread whose pool has no
  free slices takes another pool's free slices before a new segment is made.

  The shared segments are kept in one pool per processor, each under its own
  lock, and a thread claims its pages in its own pool (docs/design.md, "The
  shared lock"). The slices a thread of one pool gave back must stay as free
  for the threads of every other pool: else a process whose threads take
  turns would fault in new segments while resident free slices wait.

  In a fresh process (the main thread never calls the allocator, so no pool
  holds a segment before the test's threads): thread a allocates 8 blocks of
  200 KiB (a run of 4 slices each) and gives 7 back (the eighth keeps the
  segment); thread b, in the next pool, allocates 7 blocks of the size. Every
  one of them must lie in a's segment (without the look into the other pools,
  b makes a segment of its own pool).

  Linked with the static library and the library's own defines (the
  internal header tells a thread's pool). Exits 0 when it passes, 1 when it
  fails, 77 (the CTest "skipped" convention) on a single processor (one pool).
-----------------------------------------------------------------------------*/
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "mimalloc-internal.h"

#define BLOCKS      (8)
#define BLOCK_SIZE  (200 * 1024)

typedef struct thread_s {
  size_t count;            // blocks to allocate
  size_t keep;             // of them, kept (the rest freed before the thread ends)
  void*  blocks[BLOCKS];
  size_t pool;             // the thread's pool: 1 + its index
} thread_t;

static void* run(void* arg) {
  thread_t* t = (thread_t*)arg;
  for (size_t i = 0; i < t->count; i++) {
    t->blocks[i] = mi_malloc(BLOCK_SIZE);
    if (t->blocks[i] != NULL) memset(t->blocks[i], 1, 4096);
  }
  t->pool = mi_heap_get_default()->tld->segments.shared_pool;
  for (size_t i = t->keep; i < t->count; i++) { mi_free(t->blocks[i]); t->blocks[i] = NULL; }
  return NULL;
}

static bool run_thread(thread_t* t) {
  pthread_t id;
  return (pthread_create(&id, NULL, &run, t) == 0 && pthread_join(id, NULL) == 0);
}

static int failed(const char* what) {
  fprintf(stderr, "test-pools: FAILED: %s\n", what);
  return 1;
}

int main(void) {
  if (_mi_os_cpu_count() < 2) {
    fprintf(stderr, "test-pools: one processor, one pool: skipped\n");
    return 77;
  }
  mi_option_set(mi_option_reset_delay, 100000);   // (slices given back stay resident meanwhile)
  thread_t a = { .count = BLOCKS, .keep = 1 };
  if (!run_thread(&a) || a.blocks[0] == NULL) return failed("thread a");
  const mi_segment_t* const segment = _mi_ptr_segment(a.blocks[0]);
  if (segment->shared != a.pool) return failed("a's block is not in a segment of a's pool");
  thread_t b = { .count = BLOCKS - 1, .keep = BLOCKS - 1 };
  if (!run_thread(&b)) return failed("thread b");
  if (b.pool == a.pool) return failed("b took a's pool (round-robin: the next one)");
  for (size_t i = 0; i < b.count; i++) {
    if (b.blocks[i] == NULL) return failed("b's allocation");
    if (_mi_ptr_segment(b.blocks[i]) != segment) {
      fprintf(stderr, "test-pools: b's block %zu is at %p, in segment %p of pool %u; a's free slices are in %p of pool %zu\n",
              i, b.blocks[i], (void*)_mi_ptr_segment(b.blocks[i]), (unsigned)_mi_ptr_segment(b.blocks[i])->shared,
              (const void*)segment, a.pool);
      return failed("b made a new segment while a's pool had the free slices");
    }
  }
  // given back by the main thread (of neither pool, or of one): into a's pool
  for (size_t i = 0; i < b.count; i++) mi_free(b.blocks[i]);
  mi_free(a.blocks[0]);
  void* again = mi_malloc(BLOCK_SIZE);   // (the slices are free again: a claim anywhere works)
  if (again == NULL) return failed("an allocation after the frees");
  mi_free(again);
  fprintf(stderr, "test-pools: b (pool %zu) took a's free slices (pool %zu): passed\n", b.pool, a.pool);
  return 0;
}
