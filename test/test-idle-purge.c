/* ----------------------------------------------------------------------------
  test-idle-purge.c -- memory goes back while the thread that freed it sleeps.

  Usage: mimalloc-test-idle-purge on|off|disable|nofree

    on       a worker thread allocates 500 MiB (small blocks, 64 KiB - 1 MiB
             blocks, 8 - 32 MiB blocks), touches every byte, frees it all and
             then blocks on a condition variable; nobody calls the allocator
             after the last free. The main thread samples the resident set
             every 50 ms for 1.5 s: it must drop by >= 450 MiB within 1 s of
             the last free (the background purge thread, default on).
    off      the same, run with MIMALLOC_BACKGROUND_PURGE=0: the drop in the
             1 s after the last free must stay below 100 MiB (so the test
             measures the thread; a slow build purges part of it while still
             freeing, which does not count here).
    disable  the same, with the option on at start-up (run with
             MIMALLOC_BACKGROUND_PURGE=always); a first small round starts
             the purge thread, then mi_option_disable stops it: the drop must
             stay below 100 MiB.
    nofree   a program that frees no segment: small blocks allocated and
             freed, 300 ms of sleep; the process must still have one thread.
    single   a single-threaded program allocates and frees 200 MiB (small
             blocks and huge ones) and sleeps past the purge delay: it must
             still have one thread, unshare(CLONE_NEWUSER) (which needs a
             single-threaded caller) must succeed, and its next allocator
             call that takes a segment gives the memory back.
    noclone  a seccomp policy forbids clone, and the purge thread is asked
             for in any process (MIMALLOC_BACKGROUND_PURGE=always): its start
             fails; the memory still goes back on allocator calls, and a
             forced collect does not hang.
    pthread-exit  the purge thread is started (run with
             MIMALLOC_BACKGROUND_PURGE=always), then the main thread leaves
             with pthread_exit: the process must end (CTest's time limit
             catches a purge thread that keeps it alive).

  single, noclone and pthread-exit are Linux's (unshare, seccomp, a process
  that outlives its main thread); elsewhere they report "skipped". The
  figures come from statm.h: /proc/self/statm and /proc/self/status on
  Linux; on Windows the working set and a Toolhelp32 snapshot of the
  process's threads (the thread counts are taken against the count at the
  start of main: a Linux or wine process starts with one thread, a Windows
  process may already have the loader's worker threads).

  Prints the RSS over time (MiB, ms after the last free). Exits 0 on
  success, 1 on failure, 77 (skipped) where the figures cannot be read.
-----------------------------------------------------------------------------*/
#define _GNU_SOURCE   // unshare, CLONE_NEWUSER (and nanosleep, clock_gettime)

#include <mimalloc.h>
#include "statm.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define MiB (1024 * 1024)
#define TOTAL_MIB 500
#define SAMPLES 31          // every 50 ms for 1.5 s

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static bool worker_may_exit = false;
static atomic_int worker_freed;            // 1: the worker freed everything
static size_t rss_peak;                    // before the frees (set by the worker)
static size_t threads_at_start;            // the process's threads when main starts

static int64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void sleep_ms(long ms) {
  struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
  while (nanosleep(&ts, &ts) != 0) { }
}

static size_t rss_now(void) {
  size_t vsize = 0, rss = 0;
  statm_read(&vsize, &rss);
  return rss;
}

// Allocate about `total` bytes in blocks of [lo, hi], chained through their
// first word, every byte touched; returns the chain.
static void* alloc_chain(size_t total, size_t lo, size_t hi, uint32_t* seed) {
  void* head = NULL;
  for (size_t done = 0; done < total; ) {
    *seed = *seed * 1103515245u + 12345u;
    const size_t size = lo + ((*seed >> 8) % (hi - lo + 1));
    void** p = (void**)mi_malloc(size);
    if (p == NULL) break;
    memset(p, 0x5A, size);
    p[0] = head;
    head = p;
    done += size;
  }
  return head;
}

// Free every other block, then the rest (pages first become partly free).
static void free_chain(void* head) {
  void** prev = NULL;
  for (void** p = (void**)head; p != NULL; ) {
    void** next = (void**)p[0];
    if (next != NULL) {
      p[0] = next[0];
      mi_free(next);
    }
    prev = p;
    p = (void**)prev[0];
  }
  for (void** p = (void**)head; p != NULL; ) {
    void** next = (void**)p[0];
    mi_free(p);
    p = next;
  }
}

static void* worker(void* arg) {
  (void)arg;
  uint32_t seed = 42;
  void* small = alloc_chain(100 * (size_t)MiB, 64, 1024, &seed);
  void* medium = alloc_chain(200 * (size_t)MiB, 64 * 1024, 1024 * 1024, &seed);
  void* huge = alloc_chain(200 * (size_t)MiB, 8 * (size_t)MiB, 32 * (size_t)MiB, &seed);
  rss_peak = rss_now();
  free_chain(huge);
  free_chain(medium);
  free_chain(small);
  atomic_store(&worker_freed, 1);
  // block without calling the allocator until the main thread is done
  pthread_mutex_lock(&lock);
  while (!worker_may_exit) pthread_cond_wait(&cond, &lock);
  pthread_mutex_unlock(&lock);
  return NULL;
}

static size_t threads_now(void) {
  return statm_threads();
}

// ---------------------------------------------------------------------------
// The Linux-only modes: single needs unshare(CLONE_NEWUSER), noclone a
// seccomp filter, pthread-exit a process that goes on after its main thread
// left with pthread_exit. Elsewhere they are skipped (CMake lists them so).
// ---------------------------------------------------------------------------
#if defined(__linux__)
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

// Allocate and free about 200 MiB in small and huge blocks, each touched.
static void alloc_free_200(void) {
  uint32_t seed = 7;
  void* small = alloc_chain(100 * (size_t)MiB, 64, 1024, &seed);
  void* huge = alloc_chain(100 * (size_t)MiB, 8 * (size_t)MiB, 16 * (size_t)MiB, &seed);
  free_chain(huge);
  free_chain(small);
}

// After the purge delay: an allocator call that takes a segment (a huge
// block) runs the due purges. Returns the resident set before and after it.
static void purge_on_call(size_t* before, size_t* after) {
  sleep_ms(2 * mi_option_get(mi_option_reset_delay) + 100);
  *before = rss_now();
  void* p = mi_malloc(8 * (size_t)MiB);
  mi_free(p);
  *after = rss_now();
}

static int single_threaded(void) {
  const size_t rss0 = rss_now();
  alloc_free_200();
  size_t before, after;
  purge_on_call(&before, &after);
  const size_t threads = threads_now();
  const int err = (unshare(CLONE_NEWUSER) == 0 ? 0 : errno);
  printf("single: %zu thread(s); unshare(CLONE_NEWUSER): %s; RSS %zu MiB at start, %zu MiB after the frees and the delay, %zu MiB after the next call\n",
         threads, (err == 0 ? "ok" : strerror(err)), rss0 / MiB, before / MiB, after / MiB);
  if (threads != 1) return 1;
  if (err == EINVAL) return 1;   // (the error for a multi-threaded caller)
  if (after > rss0 + 20 * (size_t)MiB) return 1;
  if (err != 0) { printf("single: unshare is not permitted here: skipped\n"); return 77; }
  return 0;
}

// A seccomp filter: clone and clone3 fail with EPERM.
static bool forbid_clone(void) {
  #if defined(__NR_clone3)
  const unsigned clone3_nr = __NR_clone3;
  #else
  const unsigned clone3_nr = 435;
  #endif
  struct sock_filter filter[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 2, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, clone3_nr, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
  };
  struct sock_fprog prog = { (unsigned short)(sizeof(filter) / sizeof(filter[0])), filter };
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  return (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0);
}

static int no_clone(void) {
  if (!forbid_clone()) { printf("noclone: no seccomp here: skipped\n"); return 77; }
  const size_t rss0 = rss_now();
  alloc_free_200();
  void* p = mi_malloc(100);   // a safe point after the frees: the start is tried (and fails)
  mi_free(p);
  size_t before, after;
  purge_on_call(&before, &after);
  alloc_free_200();
  mi_collect(true);   // must not wait for a thread that does not exist
  const size_t collected = rss_now();
  printf("noclone: %zu thread(s); RSS %zu MiB at start, %zu MiB after the frees and the delay, %zu MiB after the next call, %zu MiB after a second round and a forced collect\n",
         threads_now(), rss0 / MiB, before / MiB, after / MiB, collected / MiB);
  if (threads_now() != 1) return 1;
  return (after <= rss0 + 20 * (size_t)MiB && collected <= rss0 + 20 * (size_t)MiB ? 0 : 1);
}

// The purge thread is started, then the main thread leaves: the process
// must end (CTest's time limit catches a purge thread that keeps it alive).
static int main_thread_exits(void) {
  void* p = mi_malloc(8 * (size_t)MiB);
  memset(p, 1, 8 * (size_t)MiB);
  mi_free(p);
  sleep_ms(300);
  printf("pthread-exit: %zu threads before the main thread leaves\n", threads_now());
  fflush(stdout);
  pthread_exit(NULL);
}

#else

static int linux_only(const char* mode) {
  printf("%s: Linux only: skipped\n", mode);
  return 77;
}
static int single_threaded(void) { return linux_only("single"); }
static int no_clone(void) { return linux_only("noclone"); }
static int main_thread_exits(void) { return linux_only("pthread-exit"); }

#endif

int main(int argc, char** argv) {
  const char* mode = (argc > 1 ? argv[1] : "on");
  size_t vsize, rss0;
  if (!statm_read(&vsize, &rss0)) return 77;
  threads_at_start = threads_now();

  if (strcmp(mode, "nofree") == 0) {
    void* blocks[1000];
    for (int i = 0; i < 1000; i++) blocks[i] = mi_malloc(100);
    for (int i = 0; i < 1000; i++) mi_free(blocks[i]);
    sleep_ms(300);
    const size_t threads = threads_now();
    printf("nofree: %zu thread(s) after 300 ms (%zu at the start)\n", threads, threads_at_start);
    return (threads == threads_at_start ? 0 : 1);
  }
  if (strcmp(mode, "single") == 0) return single_threaded();
  if (strcmp(mode, "noclone") == 0) return no_clone();
  if (strcmp(mode, "pthread-exit") == 0) return main_thread_exits();
  if (strcmp(mode, "disable") == 0) {
    // start the purge thread with a first round of one huge block, then stop it
    void* p = mi_malloc(8 * (size_t)MiB);
    memset(p, 1, 8 * (size_t)MiB);
    mi_free(p);
    sleep_ms(300);
    if (threads_now() != threads_at_start + 1) {
      printf("disable: the purge thread did not start (%zu threads, %zu at the start)\n", threads_now(), threads_at_start);
      return 1;
    }
    mi_option_disable(mi_option_background_purge);
  }

  pthread_t t;
  if (pthread_create(&t, NULL, &worker, NULL) != 0) return 1;
  while (atomic_load(&worker_freed) == 0) sleep_ms(1);
  const int64_t start = now_ms();
  size_t rss[SAMPLES];
  int64_t at[SAMPLES];
  for (int i = 0; i < SAMPLES; i++) {
    const int64_t due = start + 50 * i;
    const int64_t wait = due - now_ms();
    if (wait > 0) sleep_ms((long)wait);
    at[i] = now_ms() - start;
    rss[i] = rss_now();
  }
  pthread_mutex_lock(&lock);
  worker_may_exit = true;
  pthread_cond_signal(&cond);
  pthread_mutex_unlock(&lock);
  pthread_join(t, NULL);

  printf("%s: rss before the frees %zu MiB; after the last free (ms: MiB):", mode, rss_peak / MiB);
  size_t min_1s = rss[0];
  for (int i = 0; i < SAMPLES; i++) {
    printf("%s%lld: %zu", (i % 8 == 0 ? "\n  " : ", "), (long long)at[i], rss[i] / MiB);
    if (at[i] <= 1000 && rss[i] < min_1s) min_1s = rss[i];
  }
  const size_t drop = (rss_peak > min_1s ? rss_peak - min_1s : 0);
  const size_t idle_drop = (rss[0] > min_1s ? rss[0] - min_1s : 0);
  printf("\n%s: dropped by %zu MiB within 1 s of the last free (from before the frees), %zu MiB after the last free\n",
         mode, drop / MiB, idle_drop / MiB);
  if (rss_peak - rss0 < (TOTAL_MIB * 3 / 4) * (size_t)MiB) {
    printf("the worker raised RSS by only %zu MiB: the measurement is broken\n", (rss_peak - rss0) / MiB);
    return 1;
  }
  if (strcmp(mode, "on") == 0) return (drop >= 450 * (size_t)MiB ? 0 : 1);
  // (the freeing thread purges what expired while it was still freeing: a
  // slow build gives some back before the last free, so count from there)
  return (idle_drop < 100 * (size_t)MiB ? 0 : 1);
}
