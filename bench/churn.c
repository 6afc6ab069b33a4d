/* ----------------------------------------------------------------------------
  churn.c -- many short-lived threads whose blocks outlive them.

  Programs that run a thread per task (or whose pools shrink and grow) start
  and end threads all the time, far more threads than cores, and objects
  often outlive the thread that allocated them. Here `threads` lanes (32, even
  on 2 cores) each run `rounds` threads one after the other: a thread does a
  bounded amount of work, then starts its successor on the same lane and
  exits, so `threads` threads are alive at once and the rounds of the lanes
  overlap. A thread
  - allocates a working set of `blocks` blocks: 49 in 50 of 16 B to 1 KiB,
    1 in 50 log-uniform up to 64 KiB;
  - replaces a quarter of them (free + malloc) and frees a quarter;
  - puts the other half, one by one, into a random slot of a process-wide
    transfer array (an atomic exchange per slot), and frees the block it
    gets back from the slot: one that another thread, quite possibly one that
    has exited already, left there;
  - exits, leaving its blocks in the transfer array to later threads.
  At the end the main thread frees what is left in the array. So memory is
  allocated by threads that end before it is freed, by other threads, all
  the time, and an allocator's per-thread state is created and torn down
  `threads` x `rounds` times.

  A transfer slot holds a block and its size in one word (the address in
  the high 48 bits, size - 1 in the low 16), so one exchange moves both.

  Every block carries a tag (bench.h) checked before it is freed.

  usage: churn [threads=32] [rounds=150] [blocks=1000] [transfer=16384]
  prints: malloc+free operations per second (all threads).
-----------------------------------------------------------------------------*/
#include <pthread.h>
#include <stdatomic.h>
#include "bench.h"

#define MAX_SIZE 65536   // fits the 16 bits of a transfer slot (as size - 1)

typedef bench_item_t item_t;

typedef struct lane_s {
  long round;           // the round of the thread now working the lane
  long id;
} lane_t;

static long rounds;
static size_t blocks, transfer_slots;
static _Atomic(uint64_t)* transfer;     // 0: empty; else (address << 16) | (size - 1)
static _Atomic(long) ops;               // mallocs + frees, added up by each thread at exit


static size_t random_size(bench_rng_t* rng) {
  if (bench_below(rng, 50) == 0) return bench_log_range(rng, 1024, MAX_SIZE);
  return bench_range(rng, 16, 1024);
}

static item_t item_new(bench_rng_t* rng) {
  return bench_item_new(random_size(rng));
}

static uint64_t pack(item_t it) {
  const uint64_t addr = (uint64_t)(uintptr_t)it.block;
  if ((addr >> 48) != 0) bench_fail("churn: address %p does not fit in 48 bits", it.block);
  return (addr << 16) | (uint64_t)(it.size - 1);
}

static item_t unpack(uint64_t w) {
  item_t it;
  it.block = (void*)(uintptr_t)(w >> 16);
  it.size = (size_t)(w & 0xFFFF) + 1;
  return it;
}

static void* lane_work(void* arg) {
  lane_t* lane = (lane_t*)arg;
  bench_rng_t rng;
  bench_rng_init(&rng, ((uint64_t)lane->id << 32) ^ (uint64_t)lane->round);
  item_t* items = (item_t*)bench_malloc(blocks * sizeof(item_t));
  long n = 1;   // the malloc of `items`
  for (size_t i = 0; i < blocks; i++) items[i] = item_new(&rng);
  n += (long)blocks;
  // replace a quarter at random
  for (size_t j = 0; j < blocks / 4; j++) {
    const size_t k = bench_below(&rng, blocks);
    bench_item_free(items[k], "churn replace");
    items[k] = item_new(&rng);
    n += 2;
  }
  // free half of the others ourselves, hand the other half on
  for (size_t i = 0; i < blocks; i++) {
    if (bench_below(&rng, 2) == 0) {
      bench_item_free(items[i], "churn free");
      n++;
    } else {
      const uint64_t got = atomic_exchange(&transfer[bench_below(&rng, transfer_slots)], pack(items[i]));
      if (got != 0) {
        bench_item_free(unpack(got), "churn transfer");
        n++;
      }
    }
  }
  free(items);
  n++;
  atomic_fetch_add(&ops, n);

  // a fresh thread takes over the lane; this one ends
  bench_lane_next(lane_work, lane, ++lane->round < rounds);
  return NULL;
}

int main(int argc, char** argv) {
  const long threads = bench_arg(argc, argv, 1, 32);
  rounds = bench_arg(argc, argv, 2, 150);
  blocks = (size_t)bench_arg(argc, argv, 3, 1000);
  transfer_slots = (size_t)bench_arg(argc, argv, 4, 16384);
  if (threads < 1 || rounds < 1 || blocks < 4 || transfer_slots < 1) bench_fail("bad arguments");

  transfer = (_Atomic(uint64_t)*)calloc(transfer_slots, sizeof(uint64_t));
  if (transfer == NULL) bench_fail("calloc");
  for (size_t i = 0; i < transfer_slots; i++) {
    if (atomic_load(&transfer[i]) != 0) bench_fail("churn: calloc returned memory that is not zero");
  }
  lane_t* lanes = (lane_t*)bench_malloc((size_t)threads * sizeof(lane_t));

  const double start = bench_now();
  for (long t = 0; t < threads; t++) {
    lanes[t].round = 0;
    lanes[t].id = t;
    pthread_t first;
    if (pthread_create(&first, NULL, lane_work, &lanes[t]) != 0) bench_fail("pthread_create");
    pthread_detach(first);
  }
  bench_lanes_wait(threads);
  const double secs = bench_now() - start;

  size_t left = 0;
  for (size_t i = 0; i < transfer_slots; i++) {
    const uint64_t w = atomic_exchange(&transfer[i], 0);
    if (w != 0) { bench_item_free(unpack(w), "churn (main)"); left++; }
  }
  free(transfer);
  free(lanes);
  printf("churn: %ld threads x %ld rounds x %zu blocks, %zu left at the end, %.2f Mops/s\n",
         threads, rounds, blocks, left, (double)atomic_load(&ops) / secs / 1e6);
  return 0;
}
