/* ----------------------------------------------------------------------------
  test-oom.cpp -- API tests: running out of memory.

  Each test runs in a child process (a death test) that limits its address
  space (setrlimit RLIMIT_AS, what `ulimit -v` does) to what it uses plus
  kHeadroom, then allocates until every entry point fails, for small, large,
  huge and aligned sizes: each must return NULL with errno ENOMEM (the C++
  ones throw std::bad_alloc, the nothrow ones return NULL, posix_memalign
  returns ENOMEM), a failed realloc must leave its block as it was, and
  every block obtained before must still hold its contents. Then everything
  is freed and allocation must work again, for every size. One test does it
  on the main thread, one from several threads at once (their blocks freed
  by the main thread afterwards).

  The child cannot use GoogleTest's assertions (they allocate, and the
  outcome must cross the process boundary): it reports the first failure on
  stderr and exits 1, or prints "oom: OK" and exits 0.

  Not under AddressSanitizer or ThreadSanitizer: they reserve terabytes of
  shadow address space, so an address-space limit cannot be set. Linux
  only: Windows' counterpart of the limit, a job object's memory limit
  (JOB_OBJECT_LIMIT_PROCESS_MEMORY), is accepted but not enforced under wine,
  where the Windows build's tests run (a process in a job limited to 256 MiB
  committed 6.4 GiB without a failure): there these tests skip.
-----------------------------------------------------------------------------*/
#include <gtest/gtest.h>
#include <mimalloc.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include <pthread.h>   // (Windows: mingw-w64's winpthreads)

#include "api-util.h"

using namespace mitest;

namespace {

constexpr size_t kHeadroom = 256 * MiB;       // address space left to the allocator
constexpr size_t kMaxBlocks = (size_t)1 << 24; // bound on the allocations of one exhaustion
constexpr size_t kThreads = 4;

[[noreturn]] MITEST_PRINTF_FORMAT(1, 2) void die(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::fputs("oom: FAILED: ", stderr);
  std::vfprintf(stderr, fmt, args);
  std::fputc('\n', stderr);
  va_end(args);
  std::_Exit(1);
}

// Limit the address space to the current size plus kHeadroom.
void limit_address_space() {
  std::string error;
  if (!os_limit_address_space(kHeadroom, &error)) die("%s", error.c_str());
}

// ------------------------------------------------------
// Blocks held during the test: a chain through their first word, each
// stamped after the link (first 4 KiB and last 64 bytes: touching all of a
// huge block would make it resident for nothing)
// ------------------------------------------------------

struct Chain {
  void* head = nullptr;
  size_t count = 0;
};

struct BlockHeader {
  void* next;
  size_t size;
};

uint8_t stamp_byte(const void* p, size_t i) {
  return (uint8_t)(((uintptr_t)p >> 4) * 31 + i * 7);
}

void stamp_range(uint8_t* p, size_t from, size_t to) {
  for (size_t i = from; i < to; i++) p[i] = stamp_byte(p, i);
}

bool check_range(const uint8_t* p, size_t from, size_t to) {
  for (size_t i = from; i < to; i++) {
    if (p[i] != stamp_byte(p, i)) return false;
  }
  return true;
}

template <typename F>
void for_stamped_ranges(size_t size, F f) {
  const size_t head_end = (size < 4 * KiB ? size : 4 * KiB);
  f(sizeof(BlockHeader), head_end);
  if (size > head_end) f(size - (size - head_end < 64 ? size - head_end : 64), size);
}

void chain_push(Chain& c, void* p, size_t size) {
  if (size < sizeof(BlockHeader)) die("block of %zu bytes is too small to chain", size);
  BlockHeader* h = (BlockHeader*)opaque(p);
  h->next = c.head;
  h->size = size;
  for_stamped_ranges(size, [h](size_t from, size_t to) { stamp_range((uint8_t*)h, from, to); });
  c.head = h;
  c.count++;
}

void chain_verify(const Chain& c, const char* what) {
  size_t n = 0;
  for (BlockHeader* h = (BlockHeader*)c.head; h != nullptr; h = (BlockHeader*)h->next, n++) {
    if (mi_usable_size(h) < h->size) die("%s: block %p of %zu bytes has usable size %zu", what, (void*)h, h->size, mi_usable_size(h));
    bool ok = true;
    for_stamped_ranges(h->size, [h, &ok](size_t from, size_t to) { ok = ok && check_range((const uint8_t*)h, from, to); });
    if (!ok) die("%s: block %p of %zu bytes lost its contents", what, (void*)h, h->size);
  }
  if (n != c.count) die("%s: %zu blocks in the chain, %zu expected", what, n, c.count);
}

void chain_free(Chain& c) {
  BlockHeader* h = (BlockHeader*)c.head;
  while (h != nullptr) {
    BlockHeader* next = (BlockHeader*)h->next;
    mi_free(h);
    h = next;
  }
  c.head = nullptr;
  c.count = 0;
}

// ------------------------------------------------------
// The entry points, each as "allocate `size` bytes or return NULL with errno"
// ------------------------------------------------------

struct Entry {
  const char* name;
  void* (*alloc)(size_t size);
  bool zeroed;
};

thread_local mi_heap_t* user_heap;   // each thread's own, created before the limit

void* via_posix_memalign(size_t size) {
  void* p = nullptr;
  const int err = mi_posix_memalign(&p, 64, size);
  if (err != 0) { errno = err; return nullptr; }
  return p;
}

void* via_new(size_t size) {
  try {
    return mi_new(size);
  }
  catch (const std::bad_alloc&) {
    errno = ENOMEM;   // (new reports by throwing; the test checks the throw happened)
    return nullptr;
  }
}

void* via_new_aligned(size_t size) {
  try {
    return mi_new_aligned(size, 256);
  }
  catch (const std::bad_alloc&) {
    errno = ENOMEM;
    return nullptr;
  }
}

const Entry kEntries[] = {
  {"mi_malloc", [](size_t n) { return mi_malloc(n); }, false},
  {"mi_calloc", [](size_t n) { return mi_calloc(n, 1); }, true},
  {"mi_zalloc", [](size_t n) { return mi_zalloc(n); }, true},
  {"mi_mallocn", [](size_t n) { return mi_mallocn(n / 8, 8); }, false},
  {"mi_malloc_aligned(64)", [](size_t n) { return mi_malloc_aligned(n, 64); }, false},
  {"mi_zalloc_aligned_at(4 KiB, 16)", [](size_t n) { return mi_zalloc_aligned_at(n, 4 * KiB, 16); }, true},
  {"mi_malloc_aligned(4 MiB)", [](size_t n) { return mi_malloc_aligned(n, 4 * MiB); }, false},
  {"mi_posix_memalign(64)", &via_posix_memalign, false},
  {"mi_aligned_alloc(8)", [](size_t n) { return mi_aligned_alloc(8, n); }, false},
  {"mi_heap_malloc", [](size_t n) { return mi_heap_malloc(user_heap, n); }, false},
  {"mi_heap_calloc_aligned(128)", [](size_t n) { return mi_heap_calloc_aligned(user_heap, n, 1, 128); }, true},
  {"mi_realloc(NULL)", [](size_t n) { return mi_realloc(nullptr, n); }, false},
  {"mi_new_nothrow", [](size_t n) { return mi_new_nothrow(n); }, false},
  {"mi_new", &via_new, false},
  {"mi_new_aligned(256)", &via_new_aligned, false},
};

const size_t kSizes[] = {64 * MiB, 8 * MiB, 1 * MiB, 64 * KiB, 1000, 16};

// Allocate through `e` until it fails; the failure must be NULL with ENOMEM.
void exhaust(const Entry& e, size_t size, Chain& chain) {
  for (size_t i = 0; i < kMaxBlocks; i++) {
    errno = 0;
    void* p = e.alloc(size);
    if (p == nullptr) {
      if (errno != ENOMEM) die("%s(%zu) returned NULL with errno %d, not ENOMEM", e.name, size, errno);
      return;
    }
    if (e.zeroed && first_nonzero(p, size < 4 * KiB ? size : 4 * KiB) != (size < 4 * KiB ? size : 4 * KiB)) {
      die("%s(%zu) returned a block that is not zero", e.name, size);
    }
    chain_push(chain, p, size);
  }
  die("%s(%zu) never failed (after %zu blocks)", e.name, size, kMaxBlocks);
}

void exhaust_all(Chain& chain) {
  for (size_t size : kSizes) {
    for (const Entry& e : kEntries) exhaust(e, size, chain);
  }
}

// With memory exhausted: the other kinds of failure.
void check_other_failures(Chain& chain) {
  // realloc of a live block: NULL, ENOMEM, the block unchanged
  BlockHeader* h = (BlockHeader*)chain.head;
  if (h == nullptr) die("no block to reallocate");
  const size_t big = 64 * MiB;
  errno = 0;
  if (mi_realloc(h, big) != nullptr || errno != ENOMEM) die("mi_realloc to %zu did not fail with ENOMEM (errno %d)", big, errno);
  errno = 0;
  if (mi_rezalloc(h, big) != nullptr || errno != ENOMEM) die("mi_rezalloc did not fail with ENOMEM");
  errno = 0;
  if (mi_recalloc(h, big / 16, 16) != nullptr || errno != ENOMEM) die("mi_recalloc did not fail with ENOMEM");
  errno = 0;
  if (mi_realloc_aligned(h, big, 4 * MiB) != nullptr || errno != ENOMEM) die("mi_realloc_aligned did not fail with ENOMEM");
  errno = 0;
  if (mi_heap_realloc(user_heap, h, big) != nullptr || errno != ENOMEM) die("mi_heap_realloc did not fail with ENOMEM");
  chain_verify(chain, "after the failed reallocs");
  // C++: new throws, the nothrow forms return NULL
  bool threw = false;
  try { (void)mi_new_n(big / 16, 16); } catch (const std::bad_alloc&) { threw = true; }
  if (!threw) die("mi_new_n did not throw std::bad_alloc");
  threw = false;
  try { (void)mi_new_aligned(big, 8 * MiB); } catch (const std::bad_alloc&) { threw = true; }
  if (!threw) die("mi_new_aligned did not throw std::bad_alloc");
  if (mi_new_aligned_nothrow(big, 64) != nullptr) die("mi_new_aligned_nothrow did not return NULL");
  // strings
  static char text[64 * KiB];
  std::memset(text, 'x', sizeof(text) - 1);
  for (;;) {   // (small strings may still fit in a partly used page)
    errno = 0;
    char* s = mi_strdup(text);
    if (s == nullptr) {
      if (errno != ENOMEM) die("mi_strdup returned NULL with errno %d", errno);
      break;
    }
    chain_push(chain, s, sizeof(text));
  }
}

// After freeing: every entry point, every size, works again.
void check_recovered() {
  for (size_t size : kSizes) {
    for (const Entry& e : kEntries) {
      errno = 0;
      void* p = e.alloc(size);
      if (p == nullptr) die("after freeing everything, %s(%zu) still fails (errno %d)", e.name, size, errno);
      mi_free(p);
    }
  }
}

// ------------------------------------------------------
// The scenarios (run in the child)
// ------------------------------------------------------

void scenario_main_thread() {
  user_heap = mi_heap_new();
  if (user_heap == nullptr) die("mi_heap_new failed");
  // blocks allocated before memory ran out: small, large, huge, aligned
  Chain before;
  for (size_t size : {(size_t)64, (size_t)5000, (size_t)300 * KiB, (size_t)3 * MiB, (size_t)20 * MiB}) {
    chain_push(before, mi_malloc(size), size);
    chain_push(before, mi_malloc_aligned(size, 4 * MiB), size);
    chain_push(before, mi_heap_malloc(user_heap, size), size);
  }
  limit_address_space();
  Chain during;
  exhaust_all(during);
  check_other_failures(during);
  chain_verify(before, "blocks allocated before");
  chain_verify(during, "blocks allocated until memory ran out");
  const size_t count = during.count;
  chain_free(during);
  chain_free(before);
  check_recovered();
  std::fprintf(stderr, "oom: OK (%zu blocks allocated until memory ran out)\n", count);
  std::_Exit(0);
}

struct ThreadArgs {
  pthread_barrier_t* start;
  Chain chain;
  unsigned index;
};

void* thread_exhaust(void* arg) {
  ThreadArgs* a = (ThreadArgs*)arg;
  user_heap = mi_heap_new();   // the thread's heaps exist before the limit
  if (user_heap == nullptr) die("mi_heap_new failed in a thread");
  pthread_barrier_wait(a->start);   // (the main thread sets the limit in between)
  pthread_barrier_wait(a->start);
  // every thread its own entry points in a different order, all sizes
  const size_t n = sizeof(kEntries) / sizeof(kEntries[0]);
  for (size_t size : kSizes) {
    for (size_t i = 0; i < n; i++) exhaust(kEntries[(i + a->index * 3) % n], size, a->chain);
  }
  chain_verify(a->chain, "a thread's blocks");
  return nullptr;
}

void scenario_threads() {
  pthread_barrier_t start;
  pthread_barrier_init(&start, nullptr, kThreads + 1);
  pthread_t threads[kThreads];
  ThreadArgs args[kThreads];
  for (unsigned i = 0; i < kThreads; i++) {
    args[i].start = &start;
    args[i].index = i;
    if (pthread_create(&threads[i], nullptr, &thread_exhaust, &args[i]) != 0) die("pthread_create failed");
  }
  pthread_barrier_wait(&start);
  limit_address_space();
  pthread_barrier_wait(&start);
  for (unsigned i = 0; i < kThreads; i++) pthread_join(threads[i], nullptr);
  // the blocks outlive their threads; the main thread checks and frees them
  size_t count = 0;
  for (unsigned i = 0; i < kThreads; i++) count += args[i].chain.count;
  for (unsigned i = 0; i < kThreads; i++) {
    chain_verify(args[i].chain, "an exited thread's blocks");
    chain_free(args[i].chain);
  }
  user_heap = mi_heap_new();
  if (user_heap == nullptr) die("mi_heap_new failed after freeing");
  check_recovered();
  std::fprintf(stderr, "oom: OK (%zu blocks allocated by %zu threads until memory ran out)\n", count, kThreads);
  std::_Exit(0);
}

}  // namespace

#if defined(MI_TEST_SANITIZER)
#define OOM_TEST_SKIP() GTEST_SKIP() << "an address-space limit does not work under " MI_TEST_SANITIZER
#else
#define OOM_TEST_SKIP()                                                                                 \
  do {                                                                                                  \
    if (kWindows) GTEST_SKIP() << "Linux only: the limit is setrlimit(RLIMIT_AS); a job object's memory " \
                                  "limit, Windows' counterpart, is not enforced under wine";              \
  } while (0)
#endif

TEST(OutOfMemory, EveryEntryPointFailsWithENOMEMAndRecovers) {
  OOM_TEST_SKIP();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(scenario_main_thread(), testing::ExitedWithCode(0), "oom: OK");
}

TEST(OutOfMemory, SeveralThreadsRunOutAtOnce) {
  OOM_TEST_SKIP();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(scenario_threads(), testing::ExitedWithCode(0), "oom: OK");
}
