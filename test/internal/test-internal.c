/* ----------------------------------------------------------------------------
  test-internal.c -- unit tests of internal functions, on states the public
  API cannot (or cannot reliably) produce: synthetic addresses for the
  segment map, a page without a heap for the delayed free, signal handlers
  that interrupt the locks of the free path. Linked with the
  static library and compiled with the library's own defines, so that the
  internal header describes the same structures.
-----------------------------------------------------------------------------*/
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mimalloc-internal.h"
#include "prim/prim.h"

// ---------------------------------------------------------------------------
// The segment map: the whole 48-bit user address space (arm64 hands out
// addresses up to 2^48; the map covered 2^47), nothing above it
// ---------------------------------------------------------------------------

static mi_segment_t* synthetic(uintptr_t address) { return (mi_segment_t*)address; }

static void test_segment_map_covers_48_bits(void** state) {
  (void)state;
  const uintptr_t addresses[] = {
    (uintptr_t)1 << 46, ((uintptr_t)1 << 47) - MI_SEGMENT_SIZE,   // below 2^47
    (uintptr_t)1 << 47, ((uintptr_t)1 << 47) + 5 * MI_SEGMENT_SIZE,  // above: arm64 only
    ((uintptr_t)1 << 48) - MI_SEGMENT_SIZE,                         // the last unit
  };
  for (size_t i = 0; i < sizeof(addresses) / sizeof(addresses[0]); i++) {
    mi_segment_t* s = synthetic(addresses[i]);
    assert_false(_mi_segment_map_contains(s));
    _mi_segment_map_allocated_at(s);
    assert_true(_mi_segment_map_contains(s));
    assert_false(_mi_segment_map_contains((uint8_t*)s + 4096));        // not a segment start
    assert_false(_mi_segment_map_contains((uint8_t*)s + MI_SEGMENT_SIZE));
    _mi_segment_map_freed_at(s);
    assert_false(_mi_segment_map_contains(s));
  }
}

static void test_segment_map_refuses_above_48_bits(void** state) {
  (void)state;
  const uintptr_t addresses[] = { (uintptr_t)1 << 48, ((uintptr_t)1 << 56) + MI_SEGMENT_SIZE, UINTPTR_MAX & ~MI_SEGMENT_MASK };
  for (size_t i = 0; i < sizeof(addresses) / sizeof(addresses[0]); i++) {
    mi_segment_t* s = synthetic(addresses[i]);
    assert_false(_mi_segment_map_allocated_at(s));
    assert_false(_mi_segment_map_contains(s));
    _mi_segment_map_freed_at(s);   // harmless
  }
}

typedef struct visit_s {
  const mi_segment_t* wanted[3];
  int seen[3];
  size_t total;
} visit_t;

static void visit_fn(mi_segment_t* segment, void* arg) {
  visit_t* v = (visit_t*)arg;
  v->total++;
  for (int i = 0; i < 3; i++) {
    if (segment == v->wanted[i]) v->seen[i]++;
  }
}

static void test_segment_map_visits_every_segment(void** state) {
  (void)state;
  void* real = mi_malloc(100);   // a real segment is visited too
  visit_t v = { { synthetic((uintptr_t)3 << 40), synthetic(((uintptr_t)1 << 47) + MI_SEGMENT_SIZE), (mi_segment_t*)_mi_ptr_segment(real) }, { 0, 0, 0 }, 0 };
  assert_true(_mi_segment_map_allocated_at(v.wanted[0]));
  assert_true(_mi_segment_map_allocated_at(v.wanted[1]));
  _mi_segment_map_visit(&visit_fn, &v);
  assert_int_equal(v.seen[0], 1);
  assert_int_equal(v.seen[1], 1);
  assert_int_equal(v.seen[2], 1);
  _mi_segment_map_freed_at(v.wanted[0]);
  _mi_segment_map_freed_at(v.wanted[1]);
  const size_t total = v.total;
  v.total = 0; v.seen[0] = v.seen[1] = v.seen[2] = 0;
  _mi_segment_map_visit(&visit_fn, &v);
  assert_int_equal(v.total, total - 2);
  assert_int_equal(v.seen[0] + v.seen[1], 0);
  mi_free(real);
}

// ---------------------------------------------------------------------------
// A remote free into a page in MI_USE_DELAYED_FREE that has no heap: the
// block goes on the page's thread_free list, not on no list at all
// ---------------------------------------------------------------------------

static void* free_in_thread(void* p) {
  mi_free(p);
  return NULL;
}

static void test_delayed_free_without_heap_keeps_the_block(void** state) {
  (void)state;
  void* p = mi_malloc(3 * MiB);   // a huge block: its page is always in MI_USE_DELAYED_FREE
  assert_non_null(p);
  mi_page_t* page = _mi_ptr_page_of(p);
  assert_int_equal(mi_tf_delayed(mi_atomic_load_relaxed(&page->xthread_free)), MI_USE_DELAYED_FREE);
  mi_heap_t* heap = mi_page_heap(page);
  mi_page_set_heap(page, NULL);   // what a weakly ordered CPU could show the freeing thread
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, &free_in_thread, p), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  const mi_thread_free_t tf = mi_atomic_load_acquire(&page->xthread_free);
  mi_page_set_heap(page, heap);
  assert_ptr_equal(mi_tf_block(tf), p);
  assert_int_equal(mi_tf_delayed(tf), MI_NO_DELAYED_FREE);
  mi_collect(true);   // the owner collects it and gives the segment back
  assert_false(mi_is_in_heap_region(p));
}

// NUMA: the detected node count matches sysfs, the option overrides it, the
// thread's node is below the count, and preferring node 0 for a mapping
// (mbind MPOL_PREFERRED) succeeds.
static void test_numa_detect_override_and_prefer(void** state) {
  (void)state;
  size_t sysfs = 0;
  for (;; sysfs++) {
    char path[64];
    snprintf(path, sizeof(path), "/sys/devices/system/node/node%zu", sysfs);
    if (access(path, F_OK) != 0) break;
  }
  if (sysfs == 0) sysfs = 1;
  const long saved = mi_option_get(mi_option_use_numa_nodes);
  mi_option_set(mi_option_use_numa_nodes, 0);
  assert_int_equal(_mi_os_numa_node_count(), sysfs);
  assert_true(_mi_os_numa_node() < sysfs);
  mi_option_set(mi_option_use_numa_nodes, 3);
  assert_int_equal(_mi_os_numa_node_count(), 3);
  assert_true(_mi_os_numa_node() < 3);
  mi_option_set(mi_option_use_numa_nodes, saved);
  void* p = _mi_os_alloc(4 * MiB);
  assert_non_null(p);
  assert_true(_mi_os_numa_prefer(p, 4 * MiB, 0));
  memset(p, 1, 4 * MiB);
  _mi_os_free(p, 4 * MiB);
}

// ---------------------------------------------------------------------------
// Signal handlers that free: `free` may wake the purge thread and tell the
// heap profiler about a sampled block, and a signal handler that frees may
// interrupt exactly that on its own thread. Neither may take a lock the
// interrupted code holds (it would wait forever). Each case runs in a child
// process, its code interrupted by SIGALRM 20,000 times a second for half a
// second; a child that has not finished within 10 s hangs.
// ---------------------------------------------------------------------------

static volatile sig_atomic_t handler_calls;

static int64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void run_interrupted(void (*body)(int64_t until), void (*handler)(int)) {
  const pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = handler;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval every = { { 0, 50 }, { 0, 50 } };
    setitimer(ITIMER_REAL, &every, NULL);
    body(now_ms() + 500);
    struct itimerval off;
    memset(&off, 0, sizeof(off));
    setitimer(ITIMER_REAL, &off, NULL);
    _exit(handler_calls >= 100 ? 0 : 2);
  }
  for (int i = 0; i < 1000; i++) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      assert_true(WIFEXITED(status));
      assert_int_equal(WEXITSTATUS(status), 0);   // (2: too few signals arrived to tell)
      return;
    }
    usleep(10000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  fail_msg("the child hung: a signal handler waited for a lock its own thread held");
}

// The purge thread's wake-up event.
static void signal_event_body(int64_t until) {
  while (now_ms() < until) {
    for (int i = 0; i < 100; i++) _mi_prim_event_signal();
  }
}

static void signal_event_handler(int sig) {
  (void)sig;
  _mi_prim_event_signal();
  handler_calls++;
}

static void test_signal_handler_wakes_the_purge_thread(void** state) {
  (void)state;
  run_interrupted(&signal_event_body, &signal_event_handler);
}

// The heap profiler: every allocation sampled, a handler that forgets sampled
// blocks while the interrupted code samples and forgets others.
#define SAMPLED_POOL 4096
static void* sampled_pool[SAMPLED_POOL];
static volatile size_t sampled_left;

static void profiler_body(int64_t until) {
  while (now_ms() < until) {
    void* p = mi_malloc(32);
    mi_free(p);
  }
}

static void profiler_handler(int sig) {
  (void)sig;
  if (sampled_left > 0) {
    void* p = sampled_pool[--sampled_left];
    _mi_prof_free(_mi_ptr_page_of(p), p);   // what free does for a sampled block
  }
  handler_calls++;
}

static void test_signal_handler_frees_a_sampled_block(void** state) {
  (void)state;
  const long saved = mi_option_get(mi_option_prof_sample);
  mi_option_set(mi_option_prof_sample, 1);   // (mean 1 byte: every allocation is sampled)
  // the heap looks at the option again after 256 MiB of allocations
  for (int i = 0; i < 300; i++) mi_free(mi_malloc(MiB));
  for (size_t i = 0; i < SAMPLED_POOL; i++) sampled_pool[i] = mi_malloc(48);
  sampled_left = SAMPLED_POOL;
  assert_true(mi_page_has_sampled(_mi_ptr_page_of(sampled_pool[0])));
  run_interrupted(&profiler_body, &profiler_handler);
  for (size_t i = 0; i < SAMPLED_POOL; i++) mi_free(sampled_pool[i]);
  mi_option_set(mi_option_prof_sample, saved);
}

// ---------------------------------------------------------------------------
// A region claim whose commit fails lets go of the blocks as they were: a
// freed block in the claimed run keeps its pending purge (the purge marks
// were cleared before the commit was tried: that memory never went back).
// The commit fails for real: in a child process whose regions are not
// committed in advance (eager_region_commit=0), with a data size limit
// (RLIMIT_DATA, which Linux checks when a private mapping becomes
// writable) just above what the process has now.
// ---------------------------------------------------------------------------

// The process's private writable memory (VmData), in bytes; 0 if unknown.
static size_t data_size(void) {
  FILE* f = fopen("/proc/self/status", "r");
  if (f == NULL) return 0;
  char line[256];
  size_t kib = 0;
  while (fgets(line, sizeof(line), f) != NULL) {
    if (strncmp(line, "VmData:", 7) == 0) kib = (size_t)strtoul(line + 7, NULL, 10);
  }
  fclose(f);
  return kib * 1024;
}

static size_t resident_bytes(void* p, size_t size) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  static unsigned char vec[MI_SEGMENT_SIZE / 4096];
  if (mincore(p, size, vec) != 0) return SIZE_MAX;
  size_t n = 0;
  for (size_t i = 0; i < size / page; i++) n += (vec[i] & 1);
  return n * page;
}

static int failed_commit_child(void) {
  mi_option_set(mi_option_eager_region_commit, 0);
  mi_free(mi_malloc(16));
  mi_segments_tld_t* tld = &mi_get_default_heap()->tld->segments;
  // claim single blocks (without committing them) until one is the first
  // block of a region created now, not committed yet: its neighbour is not
  // either. Commit it, use it and free it.
  void* x = NULL;
  mi_memid_t xid = { 0, 0 };
  for (int i = 0; i < 4 * MI_REGION_MAX && x == NULL; i++) {
    bool is_committed, is_large, is_zero;
    mi_memid_t memid;
    uint64_t word;
    void* p = _mi_region_alloc(MI_SEGMENT_SIZE, false, false, &is_committed, &is_large, &is_zero, &word, &memid, tld);
    if (p == NULL) return 10;
    if (memid.region_idx != 0 && memid.block_idx == 0 && !is_committed) { x = p; xid = memid; }
  }
  if (x == NULL) return 11;
  bool commit_zero;
  if (!_mi_os_commit(x, MI_SEGMENT_SIZE, &commit_zero)) return 13;
  memset(x, 0x5a, MI_SEGMENT_SIZE);
  _mi_region_free(x, MI_SEGMENT_SIZE, xid, true, false, 0);   // pending purge, after the delay
  // with no room for more writable memory, a claim of two blocks (x and its
  // uncommitted neighbour, the first room in that region) cannot commit
  struct rlimit saved;
  if (getrlimit(RLIMIT_DATA, &saved) != 0) return 77;
  const size_t data = data_size();
  if (data == 0) return 77;
  struct rlimit limit = { (rlim_t)(data + MiB), saved.rlim_max };
  if (setrlimit(RLIMIT_DATA, &limit) != 0) return 77;
  bool is_committed, is_large, is_zero;
  mi_memid_t memid;
  uint64_t word;
  void* p = _mi_region_alloc(2 * MI_SEGMENT_SIZE, true, false, &is_committed, &is_large, &is_zero, &word, &memid, tld);
  setrlimit(RLIMIT_DATA, &saved);
  if (p != NULL) return 12;   // (the claim did not fail: the test does not test)
  // after the delay, a forced purge gives x back
  usleep((useconds_t)(2 * _mi_purge_delay() + 50) * 1000);
  _mi_region_collect(true, false);
  const size_t resident = resident_bytes(x, MI_SEGMENT_SIZE);
  return (resident == 0 ? 0 : 1);
}

static void test_failed_commit_keeps_pending_purges(void** state) {
  (void)state;
  const pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) _exit(failed_commit_child());
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) skip();
  assert_int_equal(WEXITSTATUS(status), 0);   // 1: the freed block stayed resident
}

// ---------------------------------------------------------------------------
// fork while another thread purges: the purge holds region blocks for a
// moment, and a child forked meanwhile had them claimed for good (memory it
// could never reuse or return). Now a fork waits for such housekeeping. A
// thread purges all the time (forced region collects, which also unmap
// unused regions) while the main thread frees segments and forks; every
// child checks that each claimed region block belongs to a segment.
// ---------------------------------------------------------------------------

static atomic_int purging;

static void* purge_loop(void* arg) {
  (void)arg;
  while (atomic_load(&purging)) _mi_region_collect(true, true);
  return NULL;
}

static void test_fork_while_purging_leaves_no_claims(void** state) {
  (void)state;
  atomic_store(&purging, 1);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, &purge_loop, NULL), 0);
  int bad = 0;
  for (int round = 0; round < 150; round++) {
    void* blocks[24];
    for (int i = 0; i < 24; i++) {
      blocks[i] = mi_malloc((size_t)(1 + i % 3) * MiB);   // large pages: a segment each
      memset(blocks[i], 1, 4096);
    }
    for (int i = 0; i < 24; i++) mi_free(blocks[i]);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(_mi_regions_check_claims() ? 0 : 1);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) != 0) bad++;
  }
  atomic_store(&purging, 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_true(_mi_regions_check_claims());
  assert_int_equal(bad, 0);   // children that had region blocks claimed by no segment
}

// ---------------------------------------------------------------------------
// The trim reach: a forced collect purges the free pages inside the live
// segments of a thread that blocks (their purge waits on that thread's own
// list, which only its next allocator call would run); and the trim and the
// usage walk run while other threads allocate and free (ThreadSanitizer
// checks the trim lock's hand-over and the held segments).
// ---------------------------------------------------------------------------

typedef struct reach_s {
  pthread_mutex_t lock;
  pthread_cond_t  cond;
  int             state;     // 1: the thread freed, 2: it may go
  uint8_t*        freed[2];  // blocks it freed, in pages of their own
} reach_t;

static bool reach_freed_alone(const void* p, void* const* kept, size_t nkept) {
  const uintptr_t page = (uintptr_t)p & ~(uintptr_t)(MI_SMALL_PAGE_SIZE - 1);
  if ((page & MI_SEGMENT_MASK) == 0) return false;
  for (size_t i = 0; i < nkept; i++) {
    if (((uintptr_t)kept[i] & ~(uintptr_t)(MI_SMALL_PAGE_SIZE - 1)) == page) return false;
  }
  return true;
}

static void* reach_thread(void* arg) {
  reach_t* r = (reach_t*)arg;
  const size_t count = 8 * MiB / 1000;
  void** blocks = (void**)mi_malloc(count * sizeof(void*));
  for (size_t i = 0; i < count; i++) { blocks[i] = mi_malloc(1000); memset(blocks[i], 1, 1000); }
  // keep the first block of each segment: the segments stay this thread's
  void* kept[16];
  size_t nkept = 0;
  uintptr_t last = 0;
  for (size_t i = 0; i < count; i++) {
    const uintptr_t segment = (uintptr_t)blocks[i] & ~MI_SEGMENT_MASK;
    if (segment != last && nkept < 16) { kept[nkept++] = blocks[i]; last = segment; continue; }
    mi_free(blocks[i]);
  }
  // (freed blocks whose 64 KiB holds no kept block and no segment header)
  size_t i0 = count / 2, i1 = count * 3 / 4;
  while (!reach_freed_alone(blocks[i0], kept, nkept)) i0++;
  while (!reach_freed_alone(blocks[i1], kept, nkept)) i1++;
  r->freed[0] = (uint8_t*)blocks[i0];
  r->freed[1] = (uint8_t*)blocks[i1];
  mi_free(blocks);
  pthread_mutex_lock(&r->lock);
  r->state = 1;
  pthread_cond_broadcast(&r->cond);
  while (r->state != 2) pthread_cond_wait(&r->cond, &r->lock);
  pthread_mutex_unlock(&r->lock);
  for (size_t i = 0; i < nkept; i++) mi_free(kept[i]);
  return NULL;
}

// the resident bytes of the small page (64 KiB) that holds p
static size_t page_resident(const uint8_t* p) {
  return _mi_os_resident((void*)((uintptr_t)p & ~(MI_SMALL_PAGE_SIZE - 1)), MI_SMALL_PAGE_SIZE);
}

static void test_collect_reaches_a_blocked_threads_pages(void** state) {
  (void)state;
  const long delay = mi_option_get(mi_option_reset_delay);
  mi_option_set(mi_option_reset_delay, 3600000);   // (nothing goes back by itself meanwhile)
  reach_t r = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, { NULL, NULL } };
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, &reach_thread, &r), 0);
  pthread_mutex_lock(&r.lock);
  while (r.state != 1) pthread_cond_wait(&r.cond, &r.lock);
  pthread_mutex_unlock(&r.lock);
  const size_t before = page_resident(r.freed[0]) + page_resident(r.freed[1]);
  mi_collect(true);
  const size_t after = page_resident(r.freed[0]) + page_resident(r.freed[1]);
  pthread_mutex_lock(&r.lock);
  r.state = 2;
  pthread_cond_broadcast(&r.cond);
  pthread_mutex_unlock(&r.lock);
  assert_int_equal(pthread_join(t, NULL), 0);
  mi_option_set(mi_option_reset_delay, delay);
  if (before == SIZE_MAX || after == SIZE_MAX) skip();   // (no mincore)
  assert_true(before >= MI_SMALL_PAGE_SIZE);   // (freed, resident: their purge waits an hour)
  assert_int_equal(after, 0);
}

static atomic_int churning;

static void* churn_thread(void* arg) {
  void* volatile* shared = (void* volatile*)arg;
  uint64_t x = (uint64_t)(uintptr_t)&x;
  void* blocks[256] = { NULL };
  while (atomic_load(&churning)) {
    for (size_t i = 0; i < 256; i++) {
      x ^= x << 13; x ^= x >> 7; x ^= x << 17;
      mi_free(blocks[i]);
      const size_t size = ((x & 1023) == 0 ? 3 * MiB : (x & 63) == 0 ? 20000 + (x >> 40) % 100000 : 8 + (x >> 50) % 1000);
      blocks[i] = mi_malloc(size);
      memset(blocks[i], 1, (size < 64 ? size : 64));
      if ((x & 31) == 0) {   // hand one over to another thread
        void* other = atomic_exchange((_Atomic(void*)*)shared, blocks[i]);
        blocks[i] = other;
      }
    }
  }
  for (size_t i = 0; i < 256; i++) mi_free(blocks[i]);
  return NULL;
}

static void test_trim_and_usage_while_threads_run(void** state) {
  (void)state;
  _Atomic(void*) shared = NULL;
  atomic_store(&churning, 1);
  pthread_t t[3];
  for (int i = 0; i < 3; i++) assert_int_equal(pthread_create(&t[i], NULL, &churn_thread, (void*)&shared), 0);
  size_t in_use_max = 0;
  for (int round = 0; round < 200; round++) {
    mi_usage_t usage;
    _mi_segments_usage(&usage);
    assert_true(usage.in_use <= usage.arena);
    if (usage.in_use > in_use_max) in_use_max = usage.in_use;
    if (round % 4 == 0) mi_collect(true);
    else _mi_segments_trim();
  }
  atomic_store(&churning, 0);
  for (int i = 0; i < 3; i++) assert_int_equal(pthread_join(t[i], NULL), 0);
  mi_free(atomic_load(&shared));
  assert_true(in_use_max > 0);
}


// ---------------------------------------------------------------------------
// Allocation in a signal handler that interrupted the allocator: malloc is
// not async-signal-safe (as POSIX says). A handler that interrupts its thread
// inside the shared lock and needs a new page gets NULL with ENOMEM, at once:
// no wait for a lock its own thread holds, no page from elsewhere. Simulated
// without a signal: the fork handler takes the lock for this thread as the
// interrupted code would hold it.
// ---------------------------------------------------------------------------

static void test_new_page_inside_the_shared_lock_fails_cleanly(void** state) {
  (void)state;
  mi_heap_t* heap = mi_heap_new();   // (no pages yet: the block needs a new one)
  assert_non_null(heap);
  const size_t size = 40 * 1024;     // (a medium size: no stash, no lean page)
  _mi_segments_fork_prepare();       // (this thread holds the shared lock now)
  errno = 0;
  void* inside = mi_heap_malloc(heap, size);
  const int err = errno;
  _mi_segments_fork_parent();
  assert_null(inside);
  assert_int_equal(err, ENOMEM);
  void* outside = mi_heap_malloc(heap, size);   // (the lock let go of: served)
  assert_non_null(outside);
  mi_free(outside);
  mi_heap_delete(heap);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_segment_map_covers_48_bits),
    cmocka_unit_test(test_segment_map_refuses_above_48_bits),
    cmocka_unit_test(test_segment_map_visits_every_segment),
    cmocka_unit_test(test_delayed_free_without_heap_keeps_the_block),
    cmocka_unit_test(test_numa_detect_override_and_prefer),
    cmocka_unit_test(test_signal_handler_wakes_the_purge_thread),
    cmocka_unit_test(test_signal_handler_frees_a_sampled_block),
    cmocka_unit_test(test_failed_commit_keeps_pending_purges),
    cmocka_unit_test(test_fork_while_purging_leaves_no_claims),
    cmocka_unit_test(test_collect_reaches_a_blocked_threads_pages),
    cmocka_unit_test(test_trim_and_usage_while_threads_run),
    cmocka_unit_test(test_new_page_inside_the_shared_lock_fails_cleanly),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
