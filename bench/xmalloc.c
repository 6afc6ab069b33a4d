/* ----------------------------------------------------------------------------
  xmalloc.c -- asymmetric threads: some only allocate, others only free.

  Lever and Boreham's xmalloc-test models servers where producer threads
  create objects and hand them to consumer threads that release them. Here
  `producers` threads allocate blocks of random size in [min, max], fill
  batches of 256 and push each batch on a bounded shared queue; `consumers`
  threads pop batches and free every block (and the batch itself). A producer
  never frees and a consumer never allocates (except the batch, which the
  producer allocates and the consumer frees too), so every free is a free by
  another thread, and memory freed by consumers must find its way back to the
  producers. The queue holds at most 64 batches: producers wait when it is
  full, which bounds the live memory.

  Every block carries a tag (bench.h) checked before it is freed.

  usage: xmalloc [producers=ncpu/2] [consumers=ncpu/2] [blocks=40000000]
                 [min=8] [max=64]
  prints: frees per second.
-----------------------------------------------------------------------------*/
#include <pthread.h>
#include "bench.h"

#define BATCH 256
#define QUEUE 64

typedef struct batch_s {
  size_t count;
  struct { void* block; size_t size; } items[BATCH];
} batch_t;

static struct {
  pthread_mutex_t lock;
  pthread_cond_t not_full, not_empty;
  batch_t* ring[QUEUE];
  size_t head, count;         // ring[head] is the oldest of `count` batches
} queue = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, { 0 }, 0, 0 };

static long per_producer;
static size_t min_size, max_size;

// push a batch (NULL tells a consumer to stop)
static void queue_push(batch_t* b) {
  pthread_mutex_lock(&queue.lock);
  while (queue.count == QUEUE) pthread_cond_wait(&queue.not_full, &queue.lock);
  queue.ring[(queue.head + queue.count) % QUEUE] = b;
  queue.count++;
  pthread_cond_signal(&queue.not_empty);
  pthread_mutex_unlock(&queue.lock);
}

static batch_t* queue_pop(void) {
  pthread_mutex_lock(&queue.lock);
  while (queue.count == 0) pthread_cond_wait(&queue.not_empty, &queue.lock);
  batch_t* b = queue.ring[queue.head];
  queue.head = (queue.head + 1) % QUEUE;
  queue.count--;
  pthread_cond_signal(&queue.not_full);
  pthread_mutex_unlock(&queue.lock);
  return b;
}

static void* producer(void* arg) {
  bench_rng_t rng;
  bench_rng_init(&rng, (uint64_t)(uintptr_t)arg);
  batch_t* b = NULL;
  for (long i = 0; i < per_producer; i++) {
    if (b == NULL) { b = (batch_t*)bench_malloc(sizeof(batch_t)); b->count = 0; }
    const size_t size = bench_range(&rng, min_size, max_size);
    void* p = bench_malloc(size);
    bench_mark(p, size, 0);
    b->items[b->count].block = p;
    b->items[b->count].size = size;
    if (++b->count == BATCH) { queue_push(b); b = NULL; }
  }
  if (b != NULL) queue_push(b);
  return NULL;
}

static void* consumer(void* arg) {
  long* freed = (long*)arg;
  for (;;) {
    batch_t* b = queue_pop();
    if (b == NULL) return NULL;
    for (size_t i = 0; i < b->count; i++) {
      bench_check(b->items[i].block, b->items[i].size, 0, "xmalloc");
      free(b->items[i].block);
    }
    *freed += (long)b->count;
    free(b);
  }
}

int main(int argc, char** argv) {
  const long half = (bench_ncpu() + 1) / 2;
  const long producers = bench_arg(argc, argv, 1, half);
  const long consumers = bench_arg(argc, argv, 2, half);
  const long blocks = bench_arg(argc, argv, 3, 40000000);
  min_size = (size_t)bench_arg(argc, argv, 4, 8);
  max_size = (size_t)bench_arg(argc, argv, 5, 64);
  if (min_size < 8) min_size = 8;   // room for the tag
  per_producer = blocks / producers;

  pthread_t* threads = (pthread_t*)bench_malloc((size_t)(producers + consumers) * sizeof(pthread_t));
  long* freed = (long*)calloc((size_t)consumers, sizeof(long));
  if (freed == NULL) bench_fail("calloc");
  const double start = bench_now();
  for (long i = 0; i < consumers; i++) {
    if (pthread_create(&threads[producers + i], NULL, consumer, &freed[i]) != 0) bench_fail("pthread_create");
  }
  for (long i = 0; i < producers; i++) {
    if (pthread_create(&threads[i], NULL, producer, (void*)(uintptr_t)(i + 1)) != 0) bench_fail("pthread_create");
  }
  for (long i = 0; i < producers; i++) pthread_join(threads[i], NULL);
  for (long i = 0; i < consumers; i++) queue_push(NULL);
  long total = 0;
  for (long i = 0; i < consumers; i++) {
    pthread_join(threads[producers + i], NULL);
    total += freed[i];
  }
  const double secs = bench_now() - start;
  if (total != per_producer * producers) bench_fail("xmalloc: freed %ld of %ld blocks", total, per_producer * producers);
  free(freed);
  free(threads);
  printf("xmalloc: %ld producers, %ld consumers, %ld blocks, %.2f Mfrees/s\n", producers, consumers,
         total, (double)total / secs / 1e6);
  return 0;
}
