/* ----------------------------------------------------------------------------
  test-fork.c -- run with LD_PRELOAD=libmimalloc.so. The parent keeps several
  threads allocating, freeing and handing blocks to each other while it forks
  again and again; each child allocates and frees heavily from several
  threads of its own, frees blocks it inherited, forks a grandchild, and must
  exit cleanly: no lock or list may be left broken by the fork.

  Besides small blocks the threads pass around huge blocks (from a region),
  blocks aligned to 8 MiB (a segment of their own) and blocks above 64 MiB
  (mapped straight from the OS). A parent thread that stays alive holds one
  of each across every fork; in the child, new threads are started until one
  gets that thread's id (glibc gives a new thread in the child the stack, and
  so the id, of a thread that vanished in the fork), and that one frees the
  held blocks: they belong to a vanished thread, so it must not take them
  for its own (a debug build asserts that a local free goes into a page of
  one of the freeing thread's heaps).
-----------------------------------------------------------------------------*/
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SLOTS 4096
static _Atomic(void*) shared[SLOTS];   // blocks passed between threads
static atomic_bool stop;

static uint64_t next_rand(uint64_t* x) {
  *x ^= *x << 13; *x ^= *x >> 7; *x ^= *x << 17;
  return *x;
}

#define MiB ((size_t)1024 * 1024)
#define BIG_ALIGN (8 * MiB)

// Now and then a huge, a big-aligned or an OS-direct block; else a small one.
static void* alloc_some(uint64_t* x, size_t* psize) {
  const uint64_t r = next_rand(x);
  void* p = NULL;
  if (r % 2048 == 0) {
    *psize = 3 * MiB + (size_t)(r >> 20) % MiB;         // huge, from a region
    p = malloc(*psize);
  }
  else if (r % 2048 == 1) {
    *psize = 64 * 1024;
    p = aligned_alloc(BIG_ALIGN, *psize);                // a segment of its own
  }
  else if (r % 65536 == 2) {
    *psize = 80 * MiB;                                   // mapped straight from the OS
    p = malloc(*psize);
  }
  else {
    *psize = 8 + next_rand(x) % ((next_rand(x) % 16 == 0) ? 100000 : 1000);
    p = malloc(*psize);
  }
  return p;
}

static void* churn(void* arg) {
  uint64_t x = (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ULL + 1;
  long iterations = 0;
  while (!atomic_load(&stop)) {
    size_t size;
    void* p = alloc_some(&x, &size);
    if (p == NULL) abort();
    memset(p, 0x5A, size < 64 ? size : 64);
    void* old = atomic_exchange(&shared[next_rand(&x) % SLOTS], p);
    free(old);   // often a block of another thread
    iterations++;
  }
  return (void*)iterations;
}

static pthread_t start_churn(long seed) {
  pthread_t t;
  if (pthread_create(&t, NULL, &churn, (void*)seed) != 0) abort();
  return t;
}

// A parent thread that holds a huge, a big-aligned and an OS-direct block
// across the forks, blocked meanwhile.
#define HELD 3
static void* held[HELD];
static pthread_t holder_id;
static atomic_bool holder_ready;
static int holder_pipe[2];   // the holder blocks reading it

static void* holder(void* arg) {
  (void)arg;
  held[0] = malloc(5 * MiB);
  held[1] = aligned_alloc(BIG_ALIGN, MiB);
  held[2] = malloc(80 * MiB);
  for (int i = 0; i < HELD; i++) {
    if (held[i] == NULL) abort();
    memset(held[i], 0x3C, 4096);
  }
  atomic_store(&holder_ready, true);
  char c;
  if (read(holder_pipe[0], &c, 1) != 1) abort();       // until the test ends
  return NULL;
}

// In the child: threads that start one by one until one has the holder's id.
typedef struct finder_s {
  atomic_bool go;
  atomic_int  found;      // 1: this thread has the holder's id and freed the held blocks
} finder_t;

static void* finder(void* arg) {
  finder_t* f = (finder_t*)arg;
  void* mine = malloc(64);   // this thread's heap exists before the frees
  if (mine == NULL) abort();
  if (pthread_equal(pthread_self(), holder_id)) {
    for (int i = 0; i < HELD; i++) {
      if (((unsigned char*)held[i])[100] != 0x3C) abort();
      free(held[i]);
    }
    void* again = malloc(5 * MiB);                     // and the allocator still works
    if (again == NULL) abort();
    free(again);
    atomic_store(&f->found, 1);
  }
  else {
    atomic_store(&f->found, -1);
  }
  while (!atomic_load(&f->go)) usleep(100);            // keep this stack (and id) busy
  free(mine);
  return NULL;
}

static int free_held_as_vanished_thread(void) {
  enum { TRIES = 8 };
  finder_t f[TRIES];
  pthread_t t[TRIES];
  int n = 0, matched = 0;
  for (; n < TRIES && !matched; n++) {
    atomic_init(&f[n].go, false);
    atomic_init(&f[n].found, 0);
    if (pthread_create(&t[n], NULL, &finder, &f[n]) != 0) return 3;
    while (atomic_load(&f[n].found) == 0) usleep(100);
    matched = (atomic_load(&f[n].found) == 1);
  }
  if (getenv("TEST_FORK_VERBOSE") != NULL) fprintf(stderr, "child %d: %s the vanished holder's id after %d threads\n", (int)getpid(), matched ? "found" : "did not find", n);
  for (int i = 0; i < n; i++) atomic_store(&f[i].go, true);
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  if (!matched) {
    for (int i = 0; i < HELD; i++) free(held[i]);      // (no id came back: free them remotely)
  }
  return 0;
}

// In the child: heavy allocation from several new threads, then clean up.
static int fork_round;   // the held blocks are freed in every fifth child (debug builds fill 80 MiB on free)

static int child_main(int depth) {
  if (depth == 0 && fork_round % 5 == 0) {
    int err = free_held_as_vanished_thread();
    if (err != 0) return err;
  }
  atomic_store(&stop, false);
  pthread_t t[4];
  for (int i = 0; i < 4; i++) t[i] = start_churn(100 + i + depth);
  usleep(30 * 1000);
  atomic_store(&stop, true);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  if (depth == 0) {
    pid_t pid = fork();   // a grandchild, forked from a process that itself was forked
    if (pid == 0) _exit(child_main(1));
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 2;
  }
  // free everything, inherited blocks included
  for (int i = 0; i < SLOTS; i++) free(atomic_exchange(&shared[i], NULL));
  return 0;
}

static void test_fork_while_threads_allocate(void** state) {
  (void)state;
  assert_int_equal(pipe(holder_pipe), 0);
  assert_int_equal(pthread_create(&holder_id, NULL, &holder, NULL), 0);
  while (!atomic_load(&holder_ready)) usleep(100);
  pthread_t t[3];
  for (int i = 0; i < 3; i++) t[i] = start_churn(i + 1);
  for (int round = 0; round < 20; round++) {
    usleep(5 * 1000);
    fork_round = round;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(child_main(0));
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
  atomic_store(&stop, true);
  long total = 0;
  for (int i = 0; i < 3; i++) {
    void* n = NULL;
    pthread_join(t[i], &n);
    total += (long)n;
  }
  assert_true(total > 0);
  for (int i = 0; i < SLOTS; i++) free(atomic_exchange(&shared[i], NULL));
  assert_int_equal(write(holder_pipe[1], "x", 1), 1);
  assert_int_equal(pthread_join(holder_id, NULL), 0);
  for (int i = 0; i < HELD; i++) free(held[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_fork_while_threads_allocate),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
