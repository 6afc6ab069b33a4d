/* ----------------------------------------------------------------------------
  server.c -- worker threads that pass requests of random sizes to each other.

  In a server, the thread that receives a request is often not the one that
  handles it: a request is read into a buffer by one worker and handed to
  another, which processes it and releases it. Here each of `threads`
  workers makes `requests` requests of log-uniform size in [16 B, 32 KiB]:
  it allocates one, fills it (as if read from a socket) and, 7 times in 8,
  hands it to a random other worker through a queue; the 8th it handles
  itself. A worker between its own requests handles what the others sent it:
  it reads the request through (checks the tags and one byte in every 64)
  and frees it. So most frees are remote, of blocks of every size, and
  each worker both allocates and frees all the time.

  The queues: one single-producer single-consumer ring of `ring` slots per
  (sender, receiver) pair, without locks; a worker that finds the ring to a
  receiver full handles its own incoming requests until there is room (and
  backs off, bench_backoff, while there are none).

  Every request carries a tag (bench.h) of its sender and sequence number,
  checked before it is freed.

  usage: server [threads=ncpu] [requests=1500000] [ring=256]
  prints: requests per second (all workers).
-----------------------------------------------------------------------------*/
#include <pthread.h>
#include <stdatomic.h>
#include "bench.h"

#define MIN_SIZE 16
#define MAX_SIZE 32768

typedef struct item_s { unsigned char* block; size_t size; uint64_t salt; } item_t;

typedef struct ring_s {
  _Alignas(64) _Atomic(size_t) head;   // written by the receiver
  _Alignas(64) _Atomic(size_t) tail;   // written by the sender
  _Alignas(64) item_t* slots;
} ring_t;

static long threads, requests;
static size_t ring_size;
static ring_t* rings;                  // rings[from * threads + to]
static _Atomic(long) senders_done;     // workers that have sent all their requests
static long* handled;                  // per worker: requests handled (written at its end)
static _Atomic(uint64_t) sink;         // keeps the reads of the requests

static ring_t* ring_of(long from, long to) { return &rings[from * threads + to]; }

static unsigned char fill_byte(uint64_t salt) { return (unsigned char)(salt * 0x9E3779B97F4A7C15ull >> 56); }

static item_t make_request(bench_rng_t* rng, uint64_t salt) {
  item_t it;
  it.size = bench_log_range(rng, MIN_SIZE, MAX_SIZE);
  it.salt = salt;
  it.block = (unsigned char*)bench_malloc(it.size);
  if (it.size > 16) memset(it.block + 8, fill_byte(salt), it.size - 16);
  bench_mark(it.block, it.size, salt);
  return it;
}

// "process" a request: read it through, then free it
static uint64_t handle(item_t it) {
  bench_check(it.block, it.size, it.salt, "server");
  const unsigned char b = fill_byte(it.salt);
  uint64_t sum = 0;
  for (size_t i = 8; i + 8 < it.size; i += 64) {
    if (it.block[i] != b) bench_fail("server: request of %zu bytes was corrupted at %zu", it.size, i);
    sum += it.block[i];
  }
  free(it.block);
  return sum;
}

static int try_send(ring_t* r, item_t it) {
  const size_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
  if (tail - atomic_load_explicit(&r->head, memory_order_acquire) == ring_size) return 0;
  r->slots[tail % ring_size] = it;
  atomic_store_explicit(&r->tail, tail + 1, memory_order_release);
  return 1;
}

// handle everything waiting for worker `me`; returns how many
static long drain(long me, uint64_t* sum) {
  long n = 0;
  for (long from = 0; from < threads; from++) {
    if (from == me) continue;
    ring_t* r = ring_of(from, me);
    size_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    const size_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
    for (; head != tail; head++) {
      *sum += handle(r->slots[head % ring_size]);
      n++;
      atomic_store_explicit(&r->head, head + 1, memory_order_release);
    }
  }
  return n;
}

static void* worker(void* arg) {
  const long me = (long)(uintptr_t)arg - 1;
  bench_rng_t rng;
  bench_rng_init(&rng, (uint64_t)me + 1);
  uint64_t sum = 0;
  long n = 0;
  for (long i = 0; i < requests; i++) {
    const item_t it = make_request(&rng, ((uint64_t)me << 40) | (uint64_t)i);
    if (threads == 1 || bench_below(&rng, 8) == 0) {
      sum += handle(it);
      n++;
    } else {
      long to = (long)bench_below(&rng, (size_t)threads - 1);
      if (to >= me) to++;
      unsigned spins = 0;
      while (!try_send(ring_of(me, to), it)) {
        const long got = drain(me, &sum);
        n += got;
        if (got == 0) bench_backoff(&spins);
        else spins = 0;
      }
    }
    if ((i & 7) == 0) n += drain(me, &sum);
  }
  // handle what still comes in: once every worker has sent everything (seen
  // before draining), rings found empty stay empty
  atomic_fetch_add_explicit(&senders_done, 1, memory_order_release);
  unsigned spins = 0;
  for (;;) {
    const long done = atomic_load_explicit(&senders_done, memory_order_acquire);
    const long got = drain(me, &sum);
    n += got;
    if (got == 0) {
      if (done == threads) break;
      bench_backoff(&spins);
    } else {
      spins = 0;
    }
  }
  handled[me] = n;
  atomic_fetch_add(&sink, sum);
  return NULL;
}

int main(int argc, char** argv) {
  threads = bench_arg(argc, argv, 1, bench_ncpu());
  requests = bench_arg(argc, argv, 2, 1500000);
  ring_size = (size_t)bench_arg(argc, argv, 3, 256);
  if (threads < 1 || requests < 1 || ring_size < 1) bench_fail("bad arguments");
  handled = (long*)bench_malloc((size_t)threads * sizeof(long));
  rings = (ring_t*)aligned_alloc(64, (size_t)(threads * threads) * sizeof(ring_t));
  if (rings == NULL) bench_fail("aligned_alloc");
  for (long i = 0; i < threads * threads; i++) {
    atomic_init(&rings[i].head, 0);
    atomic_init(&rings[i].tail, 0);
    rings[i].slots = (item_t*)bench_malloc(ring_size * sizeof(item_t));
  }
  const double secs = bench_run_threads(threads, worker);
  long total = 0;
  for (long t = 0; t < threads; t++) total += handled[t];
  if (total != threads * requests) bench_fail("server: %ld requests handled of %ld", total, threads * requests);
  free(handled);
  for (long i = 0; i < threads * threads; i++) free(rings[i].slots);
  free(rings);
  printf("server: %ld threads x %ld requests, %.2f Mrequests/s\n", threads, requests,
         (double)(threads * requests) / secs / 1e6);
  return 0;
}
