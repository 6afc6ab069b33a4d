/* ----------------------------------------------------------------------------
  test-glibc-ext.c -- glibc's malloc extensions answered for our heap:
  mallinfo2/mallinfo, malloc_trim, malloc_stats, malloc_info and mallopt.

  Built three ways (test/CMakeLists.txt): run with the shared library
  preloaded, linked with the object file mimalloc.o first, and linked with
  the static library. `mimalloc-test-glibc-ext GROUP` runs one group of
  tests in its own process (resident-set figures must not see the others'
  memory): mallinfo, trim, reach, stats, mallopt; `xml` prints malloc_info's
  document for check_glibc_xml.py. CTest runs every group with
  MIMALLOC_RESET_DELAY=3600000 and MIMALLOC_BACKGROUND_PURGE=0, so memory goes
  back only when a test makes it.

  Without our extensions (the program run without the preload) every group
  fails: glibc answers for its own empty heap.
-----------------------------------------------------------------------------*/
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <dlfcn.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <mimalloc.h>

// The mi_ API is used where it is there: weak, so that the preloaded build
// (not linked with the library) binds it to the preloaded library at run time.
#pragma weak mi_is_in_heap_region
#pragma weak mi_stats_get
#pragma weak mi_option_get

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"   // mallinfo (glibc deprecates it: we test it)

#define MiB  ((size_t)1024 * 1024)
#define GiB  (1024 * MiB)

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

static size_t rss(void) {
  FILE* f = fopen("/proc/self/statm", "r");
  if (f == NULL) return 0;
  unsigned long size = 0, resident = 0;
  if (fscanf(f, "%lu %lu", &size, &resident) != 2) resident = 0;
  fclose(f);
  return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void* volatile sink;   // (keeps the compiler from eliding a malloc/free pair)

static void assert_ours(void) {
  assert_non_null(mi_is_in_heap_region);   // (preloaded: the library is there)
  void* p = malloc(16);
  assert_true(mi_is_in_heap_region(p));
  free(p);
}

#define BLOCK      1000                       // the measured case's block size
#define BLOCKS(n)  ((n) / BLOCK)              // blocks of BLOCK bytes in n bytes

static void** alloc_blocks(size_t count, size_t size) {
  void** blocks = (void**)malloc(count * sizeof(void*));
  assert_non_null(blocks);
  for (size_t i = 0; i < count; i++) {
    blocks[i] = malloc(size);
    assert_non_null(blocks[i]);
    memset(blocks[i], 0x5A, size);
  }
  return blocks;
}

static void free_blocks(void** blocks, size_t count) {
  for (size_t i = 0; i < count; i++) free(blocks[i]);
  free(blocks);
}

// ---------------------------------------------------------------------------
// mallinfo2 / mallinfo
// ---------------------------------------------------------------------------

static void assert_consistent(const struct mallinfo2* m) {
  assert_true(m->uordblks <= m->arena);
  assert_int_equal(m->fordblks, m->arena - m->uordblks);
  assert_true(m->keepcost <= m->fordblks);
  assert_int_equal(m->smblks, 0);
  assert_int_equal(m->fsmblks, 0);
  assert_int_equal(m->usmblks, 0);
}

// 62 MiB in 1000-byte blocks: uordblks follows them up and down
static void test_mallinfo2_tracks_live_blocks(void** state) {
  (void)state;
  assert_ours();
  const size_t count = BLOCKS(62 * MiB);
  void** blocks = (void**)malloc(count * sizeof(void*));
  const struct mallinfo2 m0 = mallinfo2();
  assert_consistent(&m0);
  for (size_t i = 0; i < count; i++) { blocks[i] = malloc(BLOCK); memset(blocks[i], 1, BLOCK); }
  const struct mallinfo2 m1 = mallinfo2();
  assert_consistent(&m1);
  const size_t grew = m1.uordblks - m0.uordblks;
  printf("mallinfo2: 62 MiB of %d-byte blocks: uordblks +%.1f MiB, arena %.1f MiB, fordblks %.1f MiB, ordblks %zu\n",
         BLOCK, (double)grew / MiB, (double)m1.arena / MiB, (double)m1.fordblks / MiB, m1.ordblks);
  // (each block is 1024 bytes: its size class)
  assert_true(grew >= 62 * MiB);
  assert_true(grew <= 62 * MiB * 11 / 10);
  assert_true(m1.arena >= m1.uordblks);   // (arena may not grow as much: freed memory that was still resident is used again)
  assert_int_equal(m1.hblks, m0.hblks);
  assert_int_equal(m1.hblkhd, m0.hblkhd);
  for (size_t i = 0; i < count; i++) free(blocks[i]);
  const struct mallinfo2 m2 = mallinfo2();
  assert_consistent(&m2);
  assert_true(m2.uordblks < m0.uordblks + MiB);
  free(blocks);
}

static void* free_all(void* arg) {
  void** blocks = (void**)arg;
  for (size_t i = 0; blocks[i] != NULL; i++) free(blocks[i]);
  return NULL;
}

// Blocks freed by another thread are not in use, though their owner (this
// thread, which makes no allocator call meanwhile) has not collected them.
static void test_mallinfo2_remote_frees(void** state) {
  (void)state;
  const size_t count = BLOCKS(20 * MiB);
  void** blocks = (void**)calloc(count + 1, sizeof(void*));
  for (size_t i = 0; i < count; i++) { blocks[i] = malloc(BLOCK); memset(blocks[i], 1, BLOCK); }
  const struct mallinfo2 m1 = mallinfo2();
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, &free_all, blocks), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  const struct mallinfo2 m2 = mallinfo2();
  printf("mallinfo2: 20 MiB freed by another thread: uordblks %.1f -> %.1f MiB\n", (double)m1.uordblks / MiB, (double)m2.uordblks / MiB);
  assert_true(m1.uordblks >= m2.uordblks + 19 * MiB);
  free(blocks);
}

// Huge blocks are hblks/hblkhd (as the statistics count them), not arena;
// mallinfo's int fields saturate: a huge block of 2 GiB + 64 MiB (untouched
// in release builds) and 2100 blocks of 1 MiB (large pages: each touched in
// its first OS page only)
static void test_mallinfo_huge_and_saturation(void** state) {
  (void)state;
  const struct mallinfo2 m0 = mallinfo2();
  void* huge = malloc(16 * MiB);
  assert_non_null(huge);
  sink = huge;
  const struct mallinfo2 m1 = mallinfo2();
  assert_consistent(&m1);
  assert_int_equal(m1.hblks, m0.hblks + 1);
  // (a huge block is rounded up by 12.5% at most, plus the segment header; debug builds add a trailer)
  assert_true(m1.hblkhd >= m0.hblkhd + 16 * MiB && m1.hblkhd <= m0.hblkhd + 16 * MiB + 2 * MiB + MiB);
  assert_true(m1.uordblks < m0.uordblks + MiB);
  if (mi_stats_get != NULL) {
    mi_stats_snapshot_t st;
    mi_stats_get(sizeof(st), &st);
    assert_int_equal(m1.hblkhd, (size_t)(st.huge.current + st.giant.current));
  }
  const size_t big = 2 * GiB + 64 * MiB;
  void* giant = malloc(big);
  assert_non_null(giant);
  sink = giant;
  const struct mallinfo2 m2 = mallinfo2();
  const struct mallinfo mi = mallinfo();
  printf("mallinfo2: hblkhd %zu, mallinfo: hblkhd %d\n", m2.hblkhd, mi.hblkhd);
  assert_true(m2.hblkhd >= big + 16 * MiB);
  assert_int_equal(m2.hblks, m0.hblks + 2);
  assert_int_equal(mi.hblkhd, INT_MAX);
  assert_int_equal(mi.hblks, (int)m2.hblks);
  free(giant);
  free(huge);
  #if !defined(MI_TEST_DEBUG)   // (debug builds fill every new block: 2 GiB resident)
  const size_t count = 2100;
  void** blocks = (void**)malloc(count * sizeof(void*));
  for (size_t i = 0; i < count; i++) { blocks[i] = malloc(MiB); assert_non_null(blocks[i]); sink = blocks[i]; }
  const struct mallinfo2 m3 = mallinfo2();
  const struct mallinfo m3i = mallinfo();
  printf("mallinfo2: 2100 blocks of 1 MiB: uordblks %zu, arena %zu; mallinfo: uordblks %d, arena %d\n",
         m3.uordblks, m3.arena, m3i.uordblks, m3i.arena);
  assert_true(m3.uordblks >= count * MiB);
  assert_int_equal(m3i.uordblks, INT_MAX);
  assert_int_equal(m3i.arena, INT_MAX);
  assert_true(m3i.fordblks >= 0 && m3i.keepcost >= 0 && m3i.ordblks >= 0);
  for (size_t i = 0; i < count; i++) free(blocks[i]);
  free(blocks);
  #endif
}

// ---------------------------------------------------------------------------
// malloc_trim: threads that block after freeing
// ---------------------------------------------------------------------------

typedef struct blocked_s {
  pthread_mutex_t lock;
  pthread_cond_t  cond;
  size_t          threads;   // threads started
  size_t          allocated; // threads that allocated (they free once all did)
  size_t          ready;     // threads that freed and now block
  bool            release;   // the main thread lets them go
  bool            keep_one;  // keep one block per segment (its segments stay the thread's)
} blocked_t;

static blocked_t blocked = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, false, false };

static void* alloc_free_block(void* arg) {
  (void)arg;
  const size_t count = BLOCKS(32 * MiB);
  void** blocks = alloc_blocks(count, BLOCK);
  pthread_mutex_lock(&blocked.lock);   // (all allocate first: none reuses the memory another freed)
  blocked.allocated++;
  pthread_cond_broadcast(&blocked.cond);
  while (blocked.allocated < blocked.threads) pthread_cond_wait(&blocked.cond, &blocked.lock);
  pthread_mutex_unlock(&blocked.lock);
  void* kept[64];
  size_t nkept = 0;
  uintptr_t last_segment = 0;
  for (size_t i = 0; i < count; i++) {
    const uintptr_t segment = (uintptr_t)blocks[i] & ~(4 * MiB - 1);
    if (blocked.keep_one && segment != last_segment && nkept < 64) {
      kept[nkept++] = blocks[i];   // the first block of each segment stays
      last_segment = segment;
      continue;
    }
    free(blocks[i]);
  }
  free(blocks);
  pthread_mutex_lock(&blocked.lock);
  blocked.ready++;
  pthread_cond_broadcast(&blocked.cond);
  while (!blocked.release) pthread_cond_wait(&blocked.cond, &blocked.lock);
  pthread_mutex_unlock(&blocked.lock);
  for (size_t i = 0; i < nkept; i++) free(kept[i]);
  return NULL;
}

static void start_blocked(pthread_t* threads, size_t n, bool keep_one) {
  blocked.threads = n;
  blocked.allocated = 0;
  blocked.ready = 0;
  blocked.release = false;
  blocked.keep_one = keep_one;
  for (size_t i = 0; i < n; i++) assert_int_equal(pthread_create(&threads[i], NULL, &alloc_free_block, NULL), 0);
  pthread_mutex_lock(&blocked.lock);
  while (blocked.ready < n) pthread_cond_wait(&blocked.cond, &blocked.lock);
  pthread_mutex_unlock(&blocked.lock);
}

static void stop_blocked(pthread_t* threads, size_t n) {
  pthread_mutex_lock(&blocked.lock);
  blocked.release = true;
  pthread_cond_broadcast(&blocked.cond);
  pthread_mutex_unlock(&blocked.lock);
  for (size_t i = 0; i < n; i++) assert_int_equal(pthread_join(threads[i], NULL), 0);
}

// The measured case: 8 threads each free 32 MiB of 1000-byte blocks and
// block; malloc_trim(0) in the main thread brings the resident set below
// 80 MiB within 200 ms, and says it released memory.
static void test_trim_blocked_threads(void** state) {
  (void)state;
  assert_ours();
  pthread_t threads[8];
  start_blocked(threads, 8, false);
  const size_t before = rss();
  const double t0 = now_ms();
  const int released = malloc_trim(0);
  const double t1 = now_ms();
  const int again = malloc_trim(0);   // (nothing allocated or freed in between: nothing to give back)
  size_t after = rss();
  while (after >= 80 * MiB && now_ms() - t0 < 200) { usleep(1000); after = rss(); }
  const double t2 = now_ms();
  printf("malloc_trim(0): returned %d in %.1f ms; resident %.1f MiB before, %.1f MiB after (%.1f ms after the call began)\n",
         released, t1 - t0, (double)before / MiB, (double)after / MiB, t2 - t0);
  assert_int_equal(released, 1);
  assert_int_equal(again, 0);
  assert_true(before >= 256 * MiB);   // (nothing went back before: the delay is an hour)
  assert_true(after < 80 * MiB);
  assert_true(t2 - t0 <= 200);
  stop_blocked(threads, 8);
}

// The reach: one thread keeps a block in each of its segments (they stay its
// own, live), frees the rest and blocks; the free pages inside its segments
// belong to its lists, and only a trim that reaches them returns them.
static void test_trim_reaches_live_segments(void** state) {
  (void)state;
  assert_ours();
  const size_t base = rss();
  pthread_t thread;
  start_blocked(&thread, 1, true);
  const size_t before = rss();
  const int released = malloc_trim(0);
  const size_t after = rss();
  printf("malloc_trim(0) with a blocked thread's segments live: resident +%.1f MiB before, +%.1f MiB after (returned %d)\n",
         ((double)before - (double)base) / MiB, ((double)after - (double)base) / MiB, released);
  assert_true(before >= base + 24 * MiB);
  assert_true(after <= base + 4 * MiB);
  assert_int_equal(released, 1);
  stop_blocked(&thread, 1);
}

// ---------------------------------------------------------------------------
// malloc_stats, malloc_info
// ---------------------------------------------------------------------------

// malloc_stats prints our statistics table on stderr (in a child whose stderr is a pipe)
static void test_malloc_stats(void** state) {
  (void)state;
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  const pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    void* p = malloc(100);
    malloc_stats();
    free(p);
    _exit(0);
  }
  close(fds[1]);
  char buf[16384];
  size_t len = 0;
  ssize_t n;
  while (len < sizeof(buf) - 1 && (n = read(fds[0], buf + len, sizeof(buf) - 1 - len)) > 0) len += (size_t)n;
  buf[len] = 0;
  close(fds[0]);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  assert_non_null(strstr(buf, "heap stats:"));
  assert_non_null(strstr(buf, "reserved:"));
  assert_non_null(strstr(buf, "segments:"));
  assert_non_null(strstr(buf, "process: user:"));
  assert_null(strstr(buf, "Arena 0:"));   // (glibc's)
}

static void test_malloc_info_options(void** state) {
  (void)state;
  errno = 0;
  assert_int_equal(malloc_info(1, stdout), -1);
  assert_int_equal(errno, EINVAL);
  FILE* f = tmpfile();
  assert_non_null(f);
  assert_int_equal(malloc_info(0, f), 0);
  assert_true(ftell(f) > 0);
  rewind(f);
  char buf[4096];
  const size_t len = fread(buf, 1, sizeof(buf) - 1, f);
  buf[len] = 0;
  fclose(f);
  assert_non_null(strstr(buf, "<malloc version=\"1\">"));
  assert_non_null(strstr(buf, "<total type=\"mmap\""));
}

// ---------------------------------------------------------------------------
// mallopt
// ---------------------------------------------------------------------------

// Every parameter and value answers as glibc's own mallopt does (the C
// library's definition, looked up in it): 1, except M_MXFAST above glibc's largest fast size
// (160 bytes) or negative. The values put back what they changed here.
static void test_mallopt_returns(void** state) {
  (void)state;
  assert_ours();
  void* libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
  assert_non_null(libc);
  int (*glibc_mallopt)(int, int) = (int (*)(int, int))dlsym(libc, "mallopt");
  assert_non_null(glibc_mallopt);
  assert_true(glibc_mallopt != &mallopt);
  const int params[] = { M_MXFAST, M_NLBLKS, M_GRAIN, M_KEEP, M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD,
                         M_MMAP_MAX, M_CHECK_ACTION, M_PERTURB, M_ARENA_TEST, M_ARENA_MAX,
                         0, 5, 100, -9, -100, INT_MAX, INT_MIN };
  const int values[] = { INT_MIN, -1, 0, 1, 64, 160, 161, 1024, 128 * 1024, 32 * 1024 * 1024, 64 * 1024 * 1024, INT_MAX };
  for (size_t i = 0; i < sizeof(params) / sizeof(params[0]); i++) {
    for (size_t j = 0; j < sizeof(values) / sizeof(values[0]); j++) {
      const int ours = mallopt(params[i], values[j]);
      const int glibc = glibc_mallopt(params[i], values[j]);
      if (ours != glibc) fail_msg("mallopt(%d, %d): %d, glibc %d", params[i], values[j], ours, glibc);
    }
  }
  assert_int_equal(mallopt(M_MXFAST, 161), 0);
  assert_int_equal(mallopt(M_MXFAST, 64), 1);
  assert_int_equal(mallopt(12345, 1), 1);
  assert_int_equal(mallopt(M_TRIM_THRESHOLD, 128 * 1024), 1);   // (the delay as before)
  assert_int_equal(mallopt(M_MMAP_THRESHOLD, -1), 1);           // (huge blocks as before)
}

// Free 32 MiB of small blocks in this thread: how much stays resident (the
// delay is an hour, unless mallopt changed it)
static size_t resident_after_free(void) {
  const size_t base = rss();
  const size_t count = BLOCKS(32 * MiB);
  free_blocks(alloc_blocks(count, BLOCK), count);
  const size_t after = rss();
  return (after > base ? after - base : 0);
}

// M_TRIM_THRESHOLD 0 (glibc: trim at once): freed memory goes back at once;
// a positive value puts the delay back (an hour here: it stays); a negative
// one (never trim) makes the delay a day.
static void test_mallopt_trim_threshold(void** state) {
  (void)state;
  const long delay = mi_option_get(mi_option_reset_delay);
  assert_int_equal(delay, 3600000);
  assert_int_equal(mallopt(M_TRIM_THRESHOLD, 0), 1);
  assert_int_equal(mi_option_get(mi_option_reset_delay), 0);
  const size_t at_once = resident_after_free();
  assert_int_equal(mallopt(M_TRIM_THRESHOLD, 128 * 1024), 1);
  assert_int_equal(mi_option_get(mi_option_reset_delay), delay);
  const size_t delayed = resident_after_free();
  printf("mallopt(M_TRIM_THRESHOLD): 32 MiB freed: +%.1f MiB resident with 0, +%.1f MiB with 128 KiB (delay %ld ms)\n",
         (double)at_once / MiB, (double)delayed / MiB, delay);
  assert_true(at_once <= 4 * MiB);
  assert_true(delayed >= 24 * MiB);
  assert_int_equal(mallopt(M_TRIM_THRESHOLD, -1), 1);
  assert_int_equal(mi_option_get(mi_option_reset_delay), 86400000);
  assert_int_equal(mallopt(M_TRIM_THRESHOLD, 1), 1);
  assert_int_equal(mi_option_get(mi_option_reset_delay), delay);
  malloc_trim(0);
}

static size_t resident_after_huge_free(void) {
  char* p = (char*)malloc(16 * MiB);
  assert_non_null(p);
  memset(p, 1, 16 * MiB);
  const size_t used = rss();
  free(p);
  const size_t after = rss();
  return (used > after ? used - after : 0);
}

// M_MMAP_THRESHOLD: a freed huge block at least that big leaves the resident
// set at once (not after the delay, an hour here)
static void test_mallopt_mmap_threshold(void** state) {
  (void)state;
  assert_int_equal(mallopt(M_MMAP_THRESHOLD, 4 * 1024 * 1024), 1);
  const size_t at_once = resident_after_huge_free();
  assert_int_equal(mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024), 1);   // (above the block: as before)
  const size_t delayed = resident_after_huge_free();
  printf("mallopt(M_MMAP_THRESHOLD): a freed 16 MiB block returns %.1f MiB at once with 4 MiB, %.1f MiB with 32 MiB\n",
         (double)at_once / MiB, (double)delayed / MiB);
  assert_true(at_once >= 15 * MiB);
  assert_true(delayed <= MiB);
  assert_int_equal(mallopt(M_MMAP_THRESHOLD, -1), 1);
  malloc_trim(0);
}

// ---------------------------------------------------------------------------

int main(int argc, char** argv) {
  const char* group = (argc > 1 ? argv[1] : "");
  if (strcmp(group, "xml") == 0) {
    // the document with a few things in it: live small blocks and one huge block
    void** blocks = alloc_blocks(1000, 100);
    void* huge = malloc(8 * MiB);
    sink = huge;
    const int err = malloc_info(0, stdout);
    free(huge);
    free_blocks(blocks, 1000);
    return (err == 0 ? 0 : 1);
  }
  const struct CMUnitTest mallinfo_tests[] = {
    cmocka_unit_test(test_mallinfo2_tracks_live_blocks),
    cmocka_unit_test(test_mallinfo2_remote_frees),
    cmocka_unit_test(test_mallinfo_huge_and_saturation),
  };
  const struct CMUnitTest trim_tests[] = { cmocka_unit_test(test_trim_blocked_threads) };
  const struct CMUnitTest reach_tests[] = { cmocka_unit_test(test_trim_reaches_live_segments) };
  const struct CMUnitTest stats_tests[] = {
    cmocka_unit_test(test_malloc_stats),
    cmocka_unit_test(test_malloc_info_options),
  };
  const struct CMUnitTest mallopt_tests[] = {
    cmocka_unit_test(test_mallopt_returns),
    cmocka_unit_test(test_mallopt_trim_threshold),
    cmocka_unit_test(test_mallopt_mmap_threshold),
  };
  if (strcmp(group, "mallinfo") == 0) return cmocka_run_group_tests_name("mallinfo", mallinfo_tests, NULL, NULL);
  if (strcmp(group, "trim") == 0) return cmocka_run_group_tests_name("trim", trim_tests, NULL, NULL);
  if (strcmp(group, "reach") == 0) return cmocka_run_group_tests_name("reach", reach_tests, NULL, NULL);
  if (strcmp(group, "stats") == 0) return cmocka_run_group_tests_name("stats", stats_tests, NULL, NULL);
  if (strcmp(group, "mallopt") == 0) return cmocka_run_group_tests_name("mallopt", mallopt_tests, NULL, NULL);
  fprintf(stderr, "usage: %s mallinfo|trim|reach|stats|mallopt|xml\n", argv[0]);
  return 2;
}
