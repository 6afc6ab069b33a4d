/* ----------------------------------------------------------------------------
  test-fork.c -- run with LD_PRELOAD=libmimalloc.so. The parent keeps several
  threads allocating, freeing and handing blocks to each other while it forks
  again and again; each child allocates and frees heavily from several
  threads of its own, frees blocks it inherited, forks a grandchild, and must
  exit cleanly: no lock or list may be left broken by the fork.
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

static void* churn(void* arg) {
  uint64_t x = (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ULL + 1;
  long iterations = 0;
  while (!atomic_load(&stop)) {
    size_t size = 8 + next_rand(&x) % ((next_rand(&x) % 16 == 0) ? 100000 : 1000);
    void* p = malloc(size);
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

// In the child: heavy allocation from several new threads, then clean up.
static int child_main(int depth) {
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
  pthread_t t[3];
  for (int i = 0; i < 3; i++) t[i] = start_churn(i + 1);
  for (int round = 0; round < 20; round++) {
    usleep(5 * 1000);
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
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_fork_while_threads_allocate),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
