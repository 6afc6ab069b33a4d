/* ----------------------------------------------------------------------------
  prodcons.c -- one producer thread, one consumer thread, a lock-free ring.

  Pipelines pass each message on as it is made: a parser thread allocates
  the objects a worker thread consumes and frees. One producer allocates
  `count` blocks (15 in 16 of 16 to 512 bytes, 1 in 16 up to 4 KiB), writes
  their tags and pushes each pointer through a single-producer
  single-consumer ring of `ring` slots (two indices, no lock) to one consumer
  that checks and frees every block. So every free is a free by another
  thread, one block at a time, while the producer keeps allocating: the
  memory freed by the consumer must find its way back to the producer. The
  producer spins (then yields, then sleeps: bench_backoff) when the ring is
  full, the consumer when it is empty. (xmallocN passes batches of 256 through a locked queue instead.)

  Every block carries a tag (bench.h) made from its sequence number, so the
  consumer also checks that blocks arrive in order, each exactly once.

  usage: prodcons [count=20000000] [ring=4096]
  prints: blocks per second.
-----------------------------------------------------------------------------*/
#include <pthread.h>
#include <stdatomic.h>
#include "bench.h"

typedef struct item_s { void* block; size_t size; } item_t;

// the ring: the producer writes slots[tail % ring] and then publishes the new
// tail; the consumer reads slots[head % ring] and then publishes the new head.
// Each index is written by one thread only, on its own cache line.
static struct {
  _Alignas(64) _Atomic(size_t) head;
  _Alignas(64) _Atomic(size_t) tail;
  _Alignas(64) item_t* slots;
  size_t ring;
} q;

static long count;

static size_t random_size(bench_rng_t* rng) {
  if (bench_below(rng, 16) == 0) return bench_range(rng, 512, 4096);
  return bench_range(rng, 16, 512);
}

static void* producer(void* arg) {
  (void)arg;
  bench_rng_t rng;
  bench_rng_init(&rng, 1);
  size_t tail = 0;
  size_t head = atomic_load_explicit(&q.head, memory_order_acquire);
  for (long i = 0; i < count; i++) {
    item_t it;
    it.size = random_size(&rng);
    it.block = bench_malloc(it.size);
    bench_mark(it.block, it.size, (uint64_t)i);
    unsigned spins = 0;
    while (tail - head == q.ring) {   // full: wait for the consumer
      bench_backoff(&spins);
      head = atomic_load_explicit(&q.head, memory_order_acquire);
    }
    q.slots[tail % q.ring] = it;
    tail++;
    atomic_store_explicit(&q.tail, tail, memory_order_release);
  }
  return NULL;
}

static void* consumer(void* arg) {
  (void)arg;
  size_t head = 0;
  size_t tail = atomic_load_explicit(&q.tail, memory_order_acquire);
  for (long i = 0; i < count; i++) {
    unsigned spins = 0;
    while (head == tail) {   // empty: wait for the producer
      bench_backoff(&spins);
      tail = atomic_load_explicit(&q.tail, memory_order_acquire);
    }
    const item_t it = q.slots[head % q.ring];
    bench_check(it.block, it.size, (uint64_t)i, "prodcons");
    free(it.block);
    head++;
    atomic_store_explicit(&q.head, head, memory_order_release);
  }
  return NULL;
}

int main(int argc, char** argv) {
  count = bench_arg(argc, argv, 1, 20000000);
  q.ring = (size_t)bench_arg(argc, argv, 2, 4096);
  if (count < 1 || q.ring < 1) bench_fail("bad arguments");
  q.slots = (item_t*)bench_malloc(q.ring * sizeof(item_t));
  atomic_init(&q.head, 0);
  atomic_init(&q.tail, 0);

  pthread_t p, c;
  const double start = bench_now();
  if (pthread_create(&c, NULL, consumer, NULL) != 0) bench_fail("pthread_create");
  if (pthread_create(&p, NULL, producer, NULL) != 0) bench_fail("pthread_create");
  pthread_join(p, NULL);
  pthread_join(c, NULL);
  const double secs = bench_now() - start;
  free(q.slots);
  printf("prodcons: %ld blocks through a ring of %zu, %.2f Mblocks/s\n", count, q.ring,
         (double)count / secs / 1e6);
  return 0;
}
