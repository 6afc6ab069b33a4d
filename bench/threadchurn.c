/* ----------------------------------------------------------------------------
  threadchurn.c -- threads replaced round after round while their blocks,
  some of them megabytes, live on and are freed by other threads.

  Servers and test drivers whose worker threads come and go (a pool that
  shrinks and grows, a thread per job) end threads while the blocks those
  threads allocated are still in use elsewhere: in a queue, in a cache, in
  the state the next worker takes over. The allocator then has to deal with
  the memory of a thread that is gone while other threads keep allocating
  and freeing into it. Giving that memory back to the OS at every thread exit
  and faulting it in again for the next thread is what this workload shows
  (minor page faults, system time, madvise calls in the runner's tables).

  `threads` lanes run at once (4 per core by default: far more threads than
  cores). A lane owns `live` slots of blocks; each thread working a lane
  does `steps` random steps on them:
  - replace (50%): free the slot's block, allocate a new one;
  - realloc (10%): resize the slot's block within its size group, checking
    that the contents moved along;
  - hand over (20%): exchange the slot's block with a random slot of a
    process-wide transfer array (`transfer` slots, one atomic exchange), so
    the block is freed, reallocated or passed on by whichever thread takes
    it out, often long after its own thread ended;
  - free (20%).
  Sizes: mostly small (98.99%: log-uniform 8 B - 1 KiB), some medium (1%:
  log-uniform 8 - 512 KiB), a few big (1 in 10000: log-uniform 1 - 8 MiB).
  One allocation in eight is a calloc (checked to read zero).
  When a thread has done its steps it frees about half of the lane's blocks
  and ends; the other half stays for the lane's next thread.

  Rounds: the lanes form groups of `replace` lanes. In each of `rounds`
  rounds the main thread waits for the threads of the next group in turn
  to end and starts a new thread on each of their lanes. The first threads of
  the groups get 1/G, 2/G, ... of the steps (G groups), later ones all of
  them, so groups end one after the other while the others work: every
  round some threads end and new ones start. With replace = threads all
  threads end and start together (waves). `threads` + `rounds` x `replace`
  threads run in total.

  Every block carries a pattern that depends on its address and size: one
  word every 512 bytes (so every 4 KiB page of a block is written, as a
  program would use it), and its last word (unless that overlaps the one
  before). It is checked before every free
  and realloc and when the block is taken out of the transfer array; a
  block handed out twice or overwritten makes the run print FAILED and
  exit 1. A transfer slot holds a block and its size in one word (the
  address in the high 48 bits, a size code in the low 16: the size itself
  below 32 KiB, larger sizes are multiples of 256 bytes).

  Each thread's random stream is seeded from its lane and generation, so the
  operations are the same in every run; only the interleaving, and so which
  thread frees a handed-over block, depends on scheduling.

  usage: threadchurn [threads=4*ncpu] [rounds=200] [replace=threads/4]
                     [steps=10000] [live=500] [transfer=1024]
  prints: steps per second (all threads).
-----------------------------------------------------------------------------*/
#include <pthread.h>
#include <stdatomic.h>
#include "bench.h"

#define KiB ((size_t)1024)
#define MiB (KiB * KiB)
#define STRIDE 512                      // one pattern word per STRIDE bytes
#define CODE_EXACT 32768                // sizes below are coded exactly
#define CODE_UNIT 256                   // larger sizes are multiples of this
#define MAX_SIZE (8 * MiB - CODE_UNIT)  // the largest size a 16-bit code holds

typedef struct item_s { void* block; size_t size; } item_t;   // block NULL: empty slot

// Each lane on cache lines of its own (its thread writes `steps_done` often).
typedef struct lane_s {
  _Alignas(BENCH_LINE) item_t* items;   // `live` slots, passed from thread to thread
  long id;
  long generation;                      // threads that have started on the lane
  long steps;                           // the steps of the current thread
  pthread_t thread;
} lane_t;

static size_t live, transfer_slots;
static _Atomic(uint64_t)* transfer;     // 0: empty; else (address << 16) | size code
static _Atomic(long) total_steps;


/* ---------------------------------------------------------------------------
  Sizes and their 16-bit codes
---------------------------------------------------------------------------*/

typedef enum { SMALL, MEDIUM, BIG } group_t;

static group_t group_of(size_t size) {
  return (size <= KiB ? SMALL : size < MiB ? MEDIUM : BIG);
}

static size_t size_in(bench_rng_t* rng, group_t g) {
  if (g == SMALL) return bench_log_range(rng, 8, KiB);
  const size_t size = (g == MEDIUM ? bench_log_range(rng, 8 * KiB, 512 * KiB)
                                   : bench_log_range(rng, MiB, MAX_SIZE));
  return size / CODE_UNIT * CODE_UNIT;   // codable (sizes >= CODE_EXACT)
}

// per 100000 allocations: 10 big, 1000 medium, the others small
#define BIG_RATE 10
#define MEDIUM_RATE 1000

static size_t random_size(bench_rng_t* rng) {
  const size_t r = bench_below(rng, 100000);
  return size_in(rng, r < BIG_RATE ? BIG : r < BIG_RATE + MEDIUM_RATE ? MEDIUM : SMALL);
}

static uint64_t size_code(size_t size) {
  return (size < CODE_EXACT ? size : 0x8000u | (size / CODE_UNIT));
}

static size_t code_size(uint64_t code) {
  return ((code & 0x8000u) == 0 ? (size_t)code : (size_t)(code & 0x7FFFu) * CODE_UNIT);
}

static uint64_t pack(item_t it) {
  const uint64_t addr = (uint64_t)(uintptr_t)it.block;
  if ((addr >> 48) != 0) bench_fail("threadchurn: address %p does not fit in 48 bits", it.block);
  return (addr << 16) | size_code(it.size);
}

static item_t unpack(uint64_t w) {
  item_t it;
  it.block = (void*)(uintptr_t)(w >> 16);
  it.size = code_size(w & 0xFFFFu);
  return it;
}

/* ---------------------------------------------------------------------------
  The pattern: the word at byte offset `off` of the block first placed at
  `addr` with `size` bytes (after a realloc the old pattern is checked over
  the preserved prefix, then the block gets the one of its new place).
---------------------------------------------------------------------------*/

static uint64_t pattern(uintptr_t addr, size_t size, size_t off) {
  uint64_t z = (uint64_t)addr ^ ((uint64_t)size << 40) ^ ((uint64_t)off * 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The offset of the block's last word, or SIZE_MAX when that word would
// overlap the last pattern word of the stride (small blocks).
static size_t last_word(size_t size) {
  const size_t off = size - 8;
  return (off >= off / STRIDE * STRIDE + 8 ? off : SIZE_MAX);
}

static void mark(item_t it) {
  char* p = (char*)it.block;
  for (size_t off = 0; off + 8 <= it.size; off += STRIDE) {
    const uint64_t v = pattern((uintptr_t)p, it.size, off);
    memcpy(p + off, &v, 8);
  }
  const size_t end = last_word(it.size);
  if (end != SIZE_MAX) {
    const uint64_t v = pattern((uintptr_t)p, it.size, end);
    memcpy(p + end, &v, 8);
  }
}

// Check the pattern of the block placed at `addr` with `size` bytes over the
// first `n` bytes, now at `p`.
static void check_prefix(const char* p, uintptr_t addr, size_t size, size_t n, const char* where) {
  for (size_t off = 0; off + 8 <= n; off += STRIDE) {
    uint64_t v;
    memcpy(&v, p + off, 8);
    if (v != pattern(addr, size, off)) {
      bench_fail("threadchurn %s: block %p of %zu bytes corrupted at offset %zu", where, (const void*)p, size, off);
    }
  }
  const size_t end = last_word(size);
  if (end != SIZE_MAX && end + 8 <= n) {
    uint64_t v;
    memcpy(&v, p + end, 8);
    if (v != pattern(addr, size, end)) {
      bench_fail("threadchurn %s: block %p of %zu bytes corrupted at its end", where, (const void*)p, size);
    }
  }
}

static void check(item_t it, const char* where) {
  check_prefix((const char*)it.block, (uintptr_t)it.block, it.size, it.size, where);
}

static void item_free(item_t it, const char* where) {
  if (it.block == NULL) return;
  check(it, where);
  free(it.block);
}

static item_t item_new(bench_rng_t* rng) {
  item_t it;
  it.size = random_size(rng);
  if (bench_below(rng, 8) == 0) {
    it.block = calloc(1, it.size);
    if (it.block == NULL) bench_fail("calloc(1, %zu) returned NULL", it.size);
    const char* p = (const char*)it.block;
    for (size_t off = 0; off + 8 <= it.size; off += STRIDE) {
      uint64_t v;
      memcpy(&v, p + off, 8);
      if (v != 0) bench_fail("threadchurn: calloc(1, %zu) returned memory that is not zero", it.size);
    }
  } else {
    it.block = bench_malloc(it.size);
  }
  mark(it);
  return it;
}

static void item_realloc(item_t* it, bench_rng_t* rng) {
  check(*it, "realloc");
  const uintptr_t old_addr = (uintptr_t)it->block;
  const size_t old_size = it->size;
  const size_t size = size_in(rng, group_of(old_size));
  it->block = bench_realloc(it->block, size);
  it->size = size;
  check_prefix((const char*)it->block, old_addr, old_size, (size < old_size ? size : old_size), "realloc (moved)");
  mark(*it);
}

/* ---------------------------------------------------------------------------
  A thread working a lane
---------------------------------------------------------------------------*/

static void* lane_work(void* arg) {
  lane_t* lane = (lane_t*)arg;
  bench_rng_t rng;
  bench_rng_init(&rng, ((uint64_t)lane->id << 32) ^ (uint64_t)lane->generation);
  item_t* items = lane->items;
  for (long s = 0; s < lane->steps; s++) {
    item_t* it = &items[bench_below(&rng, live)];
    const size_t r = bench_below(&rng, 10);
    if (r < 5) {          // replace
      item_free(*it, "replace");
      *it = item_new(&rng);
    } else if (r < 6) {   // realloc
      if (it->block == NULL) *it = item_new(&rng);
      else item_realloc(it, &rng);
    } else if (r < 8) {   // hand over: ours into a transfer slot, whatever was there into ours
      const uint64_t mine = (it->block == NULL ? 0 : pack(*it));
      const uint64_t got = atomic_exchange(&transfer[bench_below(&rng, transfer_slots)], mine);
      if (got != 0) {
        *it = unpack(got);
        check(*it, "transfer");
      } else {
        it->block = NULL;
      }
    } else {              // free
      item_free(*it, "free");
      it->block = NULL;
    }
  }
  // about half of the blocks go now, the others stay for the lane's next thread
  for (size_t i = 0; i < live; i++) {
    if (bench_below(&rng, 2) == 0) {
      item_free(items[i], "thread end");
      items[i].block = NULL;
    }
  }
  atomic_fetch_add(&total_steps, lane->steps);
  return NULL;
}

static void lane_start(lane_t* lane, long steps) {
  lane->steps = steps;
  lane->generation++;
  if (pthread_create(&lane->thread, NULL, lane_work, lane) != 0) bench_fail("pthread_create");
}

int main(int argc, char** argv) {
  const long threads = bench_arg(argc, argv, 1, 4 * bench_ncpu());
  const long rounds = bench_arg(argc, argv, 2, 200);
  const long replace = bench_arg(argc, argv, 3, threads / 4 > 0 ? threads / 4 : 1);
  const long steps = bench_arg(argc, argv, 4, 10000);
  live = (size_t)bench_arg(argc, argv, 5, 500);
  transfer_slots = (size_t)bench_arg(argc, argv, 6, 1024);
  if (threads < 1 || rounds < 0 || replace < 1 || replace > threads || steps < 1 || live < 1 ||
      transfer_slots < 1) {
    bench_fail("bad arguments");
  }
  transfer = (_Atomic(uint64_t)*)calloc(transfer_slots, sizeof(uint64_t));
  lane_t* lanes = (lane_t*)bench_malloc_lines((size_t)threads * sizeof(lane_t));
  if (transfer == NULL) bench_fail("calloc");
  for (long t = 0; t < threads; t++) {
    lanes[t].items = (item_t*)calloc(live, sizeof(item_t));
    if (lanes[t].items == NULL) bench_fail("calloc");
    lanes[t].id = t;
    lanes[t].generation = 0;
  }

  // groups of `replace` lanes (the last one may be smaller); the first
  // threads of group g do (g+1)/G of the steps, so the groups end in turn
  const long groups = (threads + replace - 1) / replace;
  const double start = bench_now();
  for (long t = 0; t < threads; t++) {
    const long g = t / replace;
    const long first = steps * (g + 1) / groups;
    lane_start(&lanes[t], first > 0 ? first : 1);
  }
  for (long r = 0; r < rounds; r++) {
    const long g = r % groups;
    for (long t = g * replace; t < threads && t < (g + 1) * replace; t++) {
      pthread_join(lanes[t].thread, NULL);
      lane_start(&lanes[t], steps);
    }
  }
  for (long t = 0; t < threads; t++) pthread_join(lanes[t].thread, NULL);
  const double secs = bench_now() - start;

  size_t left = 0;
  for (long t = 0; t < threads; t++) {
    for (size_t i = 0; i < live; i++) {
      if (lanes[t].items[i].block != NULL) { item_free(lanes[t].items[i], "main"); left++; }
    }
    free(lanes[t].items);
  }
  for (size_t i = 0; i < transfer_slots; i++) {
    const uint64_t w = atomic_exchange(&transfer[i], 0);
    if (w != 0) { item_free(unpack(w), "main (transfer)"); left++; }
  }
  free(transfer);
  free(lanes);
  printf("threadchurn: %ld threads, %ld rounds x %ld replaced, %ld steps, %zu left at the end, %.2f Msteps/s\n",
         threads, rounds, replace, steps, left, (double)atomic_load(&total_steps) / secs / 1e6);
  return 0;
}
