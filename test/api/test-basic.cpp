/* ----------------------------------------------------------------------------
  test-basic.cpp -- API tests: basic and extended allocation.

  mi_malloc / mi_calloc / mi_zalloc / mi_free, sizes and size classes, failure semantics (errno), the `_small` functions,
  string helpers, mi_expand, mi_collect, process/thread init, version, and the
  typed convenience macros.
-----------------------------------------------------------------------------*/
#include <gtest/gtest.h>
#include <mimalloc.h>

#include <climits>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "api-util.h"

using namespace mitest;

// ------------------------------------------------------
// Version and initialisation
// ------------------------------------------------------

TEST(Basic, VersionIs167) {
  EXPECT_EQ(MI_MALLOC_VERSION, 167);
  EXPECT_EQ(mi_version(), 167);
}

TEST(Basic, ProcessInitIsIdempotent) {
  mi_process_init();
  mi_process_init();
  void* p = mi_malloc(dyn(100));
  ASSERT_NE(p, nullptr);
  fill_pattern(p, 100, 1);
  mi_process_init();
  EXPECT_TRUE(has_pattern(p, 100, 1));
  mi_free(p);
}

TEST(Basic, ThreadInitIsIdempotentOnMainThread) {
  // mi_thread_done on the main thread is exercised in test-threads.cpp on worker
  // threads only: tearing down the main thread's heaps would disturb gtest itself.
  mi_thread_init();
  mi_thread_init();
  void* p = mi_malloc(dyn(64));
  ASSERT_NE(p, nullptr);
  fill_pattern(p, 64, 2);
  mi_thread_init();
  EXPECT_TRUE(has_pattern(p, 64, 2));
  mi_free(p);
}

// ------------------------------------------------------
// malloc / free
// ------------------------------------------------------

TEST(Basic, FreeNullIsNoop) {
  mi_free(nullptr);
  mi_free(opaque<void>(nullptr));
  SUCCEED();
}

TEST(Basic, UsableSizeOfNullIsZero) {
  EXPECT_EQ(mi_usable_size(nullptr), 0u);
}

TEST(Basic, MallocZeroGivesUniqueBlocks) {
  void* p = mi_malloc(dyn(0));
  void* q = mi_malloc(dyn(0));
  ASSERT_NE(p, nullptr);
  ASSERT_NE(q, nullptr);
  EXPECT_FALSE(same_ptr(p, q));
  EXPECT_TRUE(is_aligned(p, sizeof(void*)));
  if (usable_size_is_size_class()) {
    EXPECT_EQ(mi_usable_size(p), secure_zero_area() ? 0u : 8u);   // (secure builds: an address of no access)
  }
  mi_free(p);
  mi_free(q);
}

TEST(Basic, MallocAlignmentAndUsableSize) {
  // Blocks are 16-byte aligned when size > 8 (8-byte aligned otherwise); the
  // whole usable area is writable.
  std::vector<size_t> sizes;
  for (size_t s = 0; s <= 2100; s++) sizes.push_back(s);
  for (size_t s : std::initializer_list<size_t>{4095, 4096, 4097, 16384, 16385, 65536, 100000, 131073, 500000,
                                                 1048576, 2 * MiB - 8, 2 * MiB, 2 * MiB + 1, 3000000, 9 * MiB}) {
    sizes.push_back(s);
  }
  for (size_t size : sizes) {
    void* p = mi_malloc(size);
    ASSERT_NE(p, nullptr) << "size " << size;
    EXPECT_TRUE(is_aligned(p, sizeof(void*))) << "size " << size;
    if (size > 8) {
      EXPECT_TRUE(is_aligned(p, 16)) << "size " << size;
    }
    const size_t usable = mi_usable_size(p);
    EXPECT_GE(usable, size);
    EXPECT_LE(usable, size + size / 4 + 4 * MiB) << "size " << size;  // sane
    fill_pattern(p, usable, (unsigned)size);
    EXPECT_TRUE(has_pattern(p, usable, (unsigned)size)) << "size " << size;
    mi_free(p);
  }
}

TEST(Basic, ManyLiveBlocksKeepTheirContents) {
  std::vector<void*> blocks;
  std::vector<size_t> sizes;
  for (size_t i = 0; i < 3000; i++) {
    const size_t size = (i * 37) % 3000 + (i % 50 == 0 ? 100000 : 0);
    void* p = mi_malloc(size);
    ASSERT_NE(p, nullptr);
    fill_pattern(p, size, (unsigned)i);
    blocks.push_back(p);
    sizes.push_back(size);
  }
  std::vector<void*> sorted(blocks);
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "duplicate block";
  for (size_t i = 0; i < blocks.size(); i++) {
    EXPECT_TRUE(has_pattern(blocks[i], sizes[i], (unsigned)i)) << "block " << i;
    mi_free(blocks[i]);
  }
}

// Size classes of mimalloc 1.6 on 64-bit.
static const std::pair<size_t, size_t> kSizeClasses[] = {
    {0, 8},       {1, 8},          {8, 8},        {9, 16},        {16, 16},         {17, 32},
    {33, 48},     {48, 48},        {49, 64},      {65, 80},       {100, 112},       {129, 160},
    {1000, 1024}, {1024, 1024},    {1025, 1280},  {4097, 5120},   {16385, 20480},   {131073, 163840},
};

TEST(Basic, GoodSizeMatchesSizeClasses) {
  for (const auto& sc : kSizeClasses) {
    EXPECT_EQ(mi_good_size(dyn(sc.first)), sc.second) << "size " << sc.first;
  }
  // above 2 MiB: rounded up to the OS page size
  const size_t page = os_page_size();
  EXPECT_EQ(mi_good_size(dyn(3000000)), (3000000 + page - 1) / page * page);
  EXPECT_EQ(mi_good_size(dyn(8 * MiB)), 8 * MiB);
  // never smaller than requested
  for (size_t s = 0; s < 70000; s += 7) {
    EXPECT_GE(mi_good_size(s), s);
  }
}

TEST(Basic, UsableSizeMatchesSizeClasses) {
  // In a build with the trailer (debug, secure FULL), mi_usable_size returns
  // the exact requested size (the trailer follows it), so the size-class
  // table only holds for the others (release, secure ON).
  if (!usable_size_is_size_class()) GTEST_SKIP() << "build with the trailer: usable size is the requested size";
  for (const auto& sc : kSizeClasses) {
    if (sc.first == 0 && secure_zero_area()) continue;   // (malloc(0): usable size 0, Basic.MallocZeroGivesUniqueBlocks)
    void* p = mi_malloc(dyn(sc.first));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(mi_usable_size(p), sc.second) << "size " << sc.first;
    EXPECT_EQ(mi_usable_size(p), mi_good_size(sc.first)) << "size " << sc.first;
    mi_free(p);
  }
}

TEST(Basic, UsableSizeIsExactInDebugBuilds) {
  if (usable_size_is_size_class()) GTEST_SKIP() << "release build: usable size is the size-class size";
  for (size_t size : {1, 9, 100, 1000, 5000, 100000}) {
    void* p = mi_malloc(dyn(size));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(mi_usable_size(p), size);
    mi_free(p);
  }
}

// ------------------------------------------------------
// calloc / zalloc / mallocn
// ------------------------------------------------------

TEST(Basic, CallocWithZeroCountOrSize) {
  void* p = mi_calloc(dyn(0), dyn(10));
  void* q = mi_calloc(dyn(10), dyn(0));
  void* r = mi_calloc(dyn(0), dyn(0));
  ASSERT_NE(p, nullptr);
  ASSERT_NE(q, nullptr);
  ASSERT_NE(r, nullptr);
  EXPECT_FALSE(same_ptr(p, q));
  EXPECT_FALSE(same_ptr(q, r));
  EXPECT_LE(mi_usable_size(p), 16u);
  mi_free(p);
  mi_free(q);
  mi_free(r);
}

TEST(Basic, CallocAndZallocAreZero) {
  ScopedDefaultHeap scoped;
  ASSERT_NE(scoped.get(), nullptr);
  for (size_t size : {1, 8, 24, 100, 1000, 5000, 40000, 300000}) {
    const size_t n = blocks_for(size);
    dirty_size_class(size, n);
    std::vector<void*> zs, cs;
    for (size_t i = 0; i < n; i++) {
      void* z = mi_zalloc(size);
      ASSERT_NE(z, nullptr);
      EXPECT_TRUE(is_zero(z, mi_usable_size(z))) << "mi_zalloc " << size;
      zs.push_back(z);
    }
    for (void* z : zs) mi_free(z);
    for (size_t i = 0; i < n; i++) {
      void* c = (size % 4 == 0 ? mi_calloc(size / 4, 4) : mi_calloc(size, 1));
      ASSERT_NE(c, nullptr);
      EXPECT_TRUE(is_zero(c, mi_usable_size(c))) << "mi_calloc " << size;
      cs.push_back(c);
    }
    for (void* c : cs) mi_free(c);
  }
}

TEST(Basic, MallocnAllocatesCountTimesSize) {
  void* p = mi_mallocn(dyn(10), dyn(100));
  ASSERT_NE(p, nullptr);
  EXPECT_GE(mi_usable_size(p), 1000u);
  fill_pattern(p, 1000, 3);
  EXPECT_TRUE(has_pattern(p, 1000, 3));
  mi_free(p);
  void* z = mi_mallocn(dyn(0), dyn(100));
  ASSERT_NE(z, nullptr);
  mi_free(z);
}

TEST(Basic, CountTimesSizeOverflowFailsWithEOVERFLOW) {
  const size_t half = dyn(((size_t)1 << (sizeof(size_t) * 4)) + 1);  // half*half overflows
  errno = 0;
  EXPECT_EQ(mi_calloc(half, half), nullptr);
  EXPECT_EQ(errno, EOVERFLOW);
  errno = 0;
  EXPECT_EQ(mi_mallocn(half, half), nullptr);
  EXPECT_EQ(errno, EOVERFLOW);
  errno = 0;
  EXPECT_EQ(mi_calloc(dyn(SIZE_MAX), dyn(2)), nullptr);
  EXPECT_EQ(errno, EOVERFLOW);
  errno = 0;
  EXPECT_EQ(mi_mallocn(dyn(2), dyn(SIZE_MAX / 2 + 1)), nullptr);
  EXPECT_EQ(errno, EOVERFLOW);
}

TEST(Basic, SizeAbovePtrdiffMaxFailsWithEOVERFLOW) {
  const size_t big = too_large_size();
  errno = 0;
  EXPECT_EQ(mi_malloc(big), nullptr);
  EXPECT_EQ(errno, EOVERFLOW);
  errno = 0;
  EXPECT_EQ(mi_zalloc(big), nullptr);
  EXPECT_EQ(errno, EOVERFLOW);
  errno = 0;
  EXPECT_EQ(mi_calloc(dyn(1), big), nullptr);
  EXPECT_EQ(errno, EOVERFLOW);
  errno = 0;
  EXPECT_EQ(mi_mallocn(big, dyn(1)), nullptr);
  EXPECT_EQ(errno, EOVERFLOW);
  errno = 0;
  EXPECT_EQ(mi_malloc(dyn(SIZE_MAX)), nullptr);
  EXPECT_EQ(errno, EOVERFLOW);
}

TEST(Basic, ImpossibleSizeFailsWithENOMEM) {
  const size_t big = impossible_size();
  errno = 0;
  EXPECT_EQ(mi_malloc(big), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(mi_zalloc(big), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(mi_calloc(dyn(1), big), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(mi_mallocn(dyn(2), big / 2), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  // the allocator keeps working afterwards
  void* p = mi_malloc(dyn(100));
  ASSERT_NE(p, nullptr);
  mi_free(p);
}

// ------------------------------------------------------
// _small variants
// ------------------------------------------------------

TEST(Basic, MallocSmall) {
  EXPECT_EQ(MI_SMALL_SIZE_MAX, 128 * sizeof(void*));
  std::vector<void*> blocks;
  for (size_t size = 0; size <= MI_SMALL_SIZE_MAX; size++) {
    void* p = mi_malloc_small(size);
    ASSERT_NE(p, nullptr) << "size " << size;
    EXPECT_GE(mi_usable_size(p), size);
    EXPECT_TRUE(is_aligned(p, size > 8 ? 16 : 8)) << "size " << size;
    fill_pattern(p, size, (unsigned)size);
    blocks.push_back(p);
  }
  for (size_t size = 0; size <= MI_SMALL_SIZE_MAX; size++) {
    EXPECT_TRUE(has_pattern(blocks[size], size, (unsigned)size)) << "size " << size;
    mi_free(blocks[size]);
  }
}

TEST(Basic, ZallocSmallIsZero) {
  ScopedDefaultHeap scoped;
  ASSERT_NE(scoped.get(), nullptr);
  for (size_t size : {0, 1, 8, 16, 50, 128, 500, 1000, 1024}) {
    const size_t n = blocks_for(size);
    dirty_size_class(size, n);
    std::vector<void*> blocks;
    for (size_t i = 0; i < n; i++) {
      void* p = mi_zalloc_small(size);
      ASSERT_NE(p, nullptr);
      EXPECT_GE(mi_usable_size(p), size);
      EXPECT_TRUE(is_zero(p, mi_usable_size(p))) << "size " << size;
      blocks.push_back(p);
    }
    for (void* p : blocks) mi_free(p);
  }
}

// ------------------------------------------------------
// Strings
// ------------------------------------------------------

TEST(Basic, Strdup) {
  const char* s = "hello mimalloc";
  char* d = mi_strdup(s);
  ASSERT_NE(d, nullptr);
  EXPECT_NE((const void*)d, (const void*)s);
  EXPECT_STREQ(d, s);
  EXPECT_GE(mi_usable_size(d), strlen(s) + 1);
  mi_free(d);

  char* e = mi_strdup("");
  ASSERT_NE(e, nullptr);
  EXPECT_STREQ(e, "");
  mi_free(e);

  EXPECT_EQ(mi_strdup(opaque<const char>(nullptr)), nullptr);

  std::string longstr(100000, 'x');
  char* l = mi_strdup(longstr.c_str());
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(std::string(l), longstr);
  mi_free(l);
}

TEST(Basic, Strndup) {
  const char* s = "hello world";
  char* a = mi_strndup(s, dyn(5));
  ASSERT_NE(a, nullptr);
  EXPECT_STREQ(a, "hello");  // cut at n and NUL terminated
  EXPECT_GE(mi_usable_size(a), 6u);
  mi_free(a);

  char* b = mi_strndup(s, dyn(100));  // n beyond the string: whole string
  ASSERT_NE(b, nullptr);
  EXPECT_STREQ(b, s);
  mi_free(b);

  char* c = mi_strndup(s, dyn(0));
  ASSERT_NE(c, nullptr);
  EXPECT_STREQ(c, "");
  mi_free(c);

  char* d = mi_strndup(s, dyn(strlen(s)));
  ASSERT_NE(d, nullptr);
  EXPECT_STREQ(d, s);
  mi_free(d);

  // stops at the first NUL within n
  const char embedded[] = {'a', 'b', '\0', 'c', 'd', '\0'};
  char* e = mi_strndup(embedded, dyn(5));
  ASSERT_NE(e, nullptr);
  EXPECT_STREQ(e, "ab");
  mi_free(e);

  EXPECT_EQ(mi_strndup(opaque<const char>(nullptr), dyn(5)), nullptr);
}

// The OS's own resolution (realpath(3); Windows: _fullpath) is the expected
// answer, for a directory spelled with "." and ".." (api-util.h).
TEST(Basic, RealpathWithoutBuffer) {
  const std::string path = roundabout_dir_path();
  char expected[PATH_MAX];
  ASSERT_TRUE(os_realpath(path.c_str(), expected)) << path;
  char* r = mi_realpath(path.c_str(), nullptr);
  ASSERT_NE(r, nullptr);
  EXPECT_STREQ(r, expected);
  EXPECT_GE(mi_usable_size(r), strlen(expected) + 1);
  EXPECT_TRUE(mi_check_owned(r));
  mi_free(r);

  char cwd[PATH_MAX];
  ASSERT_TRUE(os_realpath(".", cwd));
  char* d = mi_realpath(".", nullptr);
  ASSERT_NE(d, nullptr);
  EXPECT_STREQ(d, cwd);
  mi_free(d);
}

TEST(Basic, RealpathWithBuffer) {
  const std::string path = roundabout_dir_path();
  char expected[PATH_MAX];
  ASSERT_TRUE(os_realpath(path.c_str(), expected)) << path;
  char buf[PATH_MAX];
  memset(buf, 'x', sizeof(buf));
  char* r = mi_realpath(path.c_str(), buf);
  EXPECT_TRUE(same_ptr(r, buf));  // (opaque: the malloc attribute lets the compiler assume they differ)
  EXPECT_STREQ(buf, expected);
}

TEST(Basic, RealpathFailureSetsErrno) {
  errno = 0;
  EXPECT_EQ(mi_realpath("/this/path/does/not/exist/mimalloc-test", nullptr), nullptr);
  EXPECT_EQ(errno, ENOENT);
  char buf[PATH_MAX];
  errno = 0;
  EXPECT_EQ(mi_realpath("/this/path/does/not/exist/mimalloc-test", buf), nullptr);
  EXPECT_EQ(errno, ENOENT);
}

// ------------------------------------------------------
// expand
// ------------------------------------------------------

TEST(Basic, ExpandNeverMoves) {
  void* p = mi_malloc(dyn(100));
  ASSERT_NE(p, nullptr);
  fill_pattern(p, 100, 4);
  const size_t usable = mi_usable_size(p);
  EXPECT_EQ(mi_expand(p, usable), p);   // up to the usable size: in place
  EXPECT_EQ(mi_expand(p, 50), p);       // shrinking: in place
  EXPECT_EQ(mi_expand(p, usable + 1), nullptr);  // would need to move
  EXPECT_EQ(mi_expand(p, dyn(100000)), nullptr);
  EXPECT_TRUE(has_pattern(p, 100, 4));
  EXPECT_EQ(mi_usable_size(p), usable);
  mi_free(p);

  EXPECT_EQ(mi_expand(nullptr, dyn(10)), nullptr);
  EXPECT_EQ(mi_expand(nullptr, dyn(0)), nullptr);
}

// ------------------------------------------------------
// collect
// ------------------------------------------------------

TEST(Basic, CollectKeepsLiveBlocks) {
  std::vector<void*> blocks;
  for (size_t i = 0; i < 2000; i++) {
    const size_t size = 16 + (i % 200) * 8 + (i % 100 == 0 ? 300000 : 0);
    void* p = mi_malloc(size);
    ASSERT_NE(p, nullptr);
    fill_pattern(p, 16, (unsigned)i);
    blocks.push_back(p);
  }
  // free half locally, and a quarter from another thread (pending remote frees)
  for (size_t i = 0; i < blocks.size(); i += 2) {
    mi_free(blocks[i]);
    blocks[i] = nullptr;
  }
  std::vector<void*> remote;
  for (size_t i = 1; i < blocks.size(); i += 4) {
    remote.push_back(blocks[i]);
    blocks[i] = nullptr;
  }
  std::thread t([&remote] {
    for (void* p : remote) mi_free(p);
  });
  t.join();
  mi_collect(false);
  for (size_t i = 0; i < blocks.size(); i++) {
    if (blocks[i] != nullptr) {
      EXPECT_TRUE(has_pattern(blocks[i], 16, (unsigned)i)) << i;
    }
  }
  mi_collect(true);
  for (size_t i = 0; i < blocks.size(); i++) {
    if (blocks[i] != nullptr) {
      EXPECT_TRUE(has_pattern(blocks[i], 16, (unsigned)i)) << i;
    }
  }
  for (void* p : blocks) mi_free(p);
  mi_collect(true);
  mi_collect(false);
  void* p = mi_malloc(dyn(1000));
  ASSERT_NE(p, nullptr);
  fill_pattern(p, 1000, 5);
  EXPECT_TRUE(has_pattern(p, 1000, 5));
  mi_free(p);
}

// ------------------------------------------------------
// Typed convenience macros: all twelve
// ------------------------------------------------------

namespace {
struct Point3 {
  double x, y, z;
};
static_assert(sizeof(Point3) == 24, "layout");
}  // namespace

TEST(Basic, TypedMacros) {
  Point3* a = mi_malloc_tp(Point3);
  ASSERT_NE(a, nullptr);
  EXPECT_GE(mi_usable_size(a), sizeof(Point3));
  a->x = 1; a->y = 2; a->z = 3;
  EXPECT_EQ(opaque(a)->y, 2.0);
  mi_free(a);

  ScopedDefaultHeap scoped;
  ASSERT_NE(scoped.get(), nullptr);
  dirty_size_class(sizeof(Point3), 64);
  dirty_size_class(10 * sizeof(Point3), 64);

  Point3* z = mi_zalloc_tp(Point3);
  ASSERT_NE(z, nullptr);
  EXPECT_TRUE(is_zero(z, mi_usable_size(z)));

  Point3* c = mi_calloc_tp(Point3, dyn(10));
  ASSERT_NE(c, nullptr);
  EXPECT_GE(mi_usable_size(c), 10 * sizeof(Point3));
  EXPECT_TRUE(is_zero(c, mi_usable_size(c)));

  Point3* n = mi_mallocn_tp(Point3, dyn(10));
  ASSERT_NE(n, nullptr);
  EXPECT_GE(mi_usable_size(n), 10 * sizeof(Point3));
  for (int i = 0; i < 10; i++) n[i] = Point3{(double)i, 0, 0};
  errno = 0;
  EXPECT_EQ(mi_mallocn_tp(Point3, dyn(SIZE_MAX / 8)), nullptr);
  EXPECT_EQ(errno, EOVERFLOW);

  n = mi_reallocn_tp(n, Point3, dyn(1000));
  ASSERT_NE(n, nullptr);
  EXPECT_GE(mi_usable_size(n), 1000 * sizeof(Point3));
  for (int i = 0; i < 10; i++) EXPECT_EQ(opaque(n)[i].x, (double)i);

  for (int i = 0; i < 10; i++) c[i] = Point3{1, 1, 1};
  c = mi_recalloc_tp(c, Point3, dyn(1000));
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < 10; i++) EXPECT_EQ(opaque(c)[i].z, 1.0);
  EXPECT_TRUE(is_zero(c + 10, 990 * sizeof(Point3)));

  mi_free(z);
  mi_free(c);
  mi_free(n);

  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  Point3* ha = mi_heap_malloc_tp(h, Point3);
  Point3* hz = mi_heap_zalloc_tp(h, Point3);
  Point3* hc = mi_heap_calloc_tp(h, Point3, dyn(5));
  Point3* hn = mi_heap_mallocn_tp(h, Point3, dyn(5));
  ASSERT_NE(ha, nullptr);
  ASSERT_NE(hz, nullptr);
  ASSERT_NE(hc, nullptr);
  ASSERT_NE(hn, nullptr);
  EXPECT_TRUE(mi_heap_contains_block(h, ha));
  EXPECT_TRUE(mi_heap_contains_block(h, hz));
  EXPECT_TRUE(mi_heap_contains_block(h, hc));
  EXPECT_TRUE(mi_heap_contains_block(h, hn));
  EXPECT_TRUE(is_zero(hz, sizeof(Point3)));
  EXPECT_TRUE(is_zero(hc, 5 * sizeof(Point3)));
  EXPECT_GE(mi_usable_size(hn), 5 * sizeof(Point3));
  for (int i = 0; i < 5; i++) hn[i] = Point3{(double)i, 7, 7};
  hn = mi_heap_reallocn_tp(h, hn, Point3, dyn(500));
  ASSERT_NE(hn, nullptr);
  EXPECT_TRUE(mi_heap_contains_block(h, hn));
  for (int i = 0; i < 5; i++) EXPECT_EQ(opaque(hn)[i].x, (double)i);
  for (int i = 0; i < 5; i++) hc[i] = Point3{2, 2, 2};
  hc = mi_heap_recalloc_tp(h, hc, Point3, dyn(500));
  ASSERT_NE(hc, nullptr);
  EXPECT_TRUE(mi_heap_contains_block(h, hc));
  for (int i = 0; i < 5; i++) EXPECT_EQ(opaque(hc)[i].y, 2.0);
  EXPECT_TRUE(is_zero(hc + 5, 495 * sizeof(Point3)));
  mi_free(ha);
  mi_free(hz);
  mi_free(hc);
  mi_free(hn);
  mi_heap_delete(h);
}

// free keeps errno (POSIX 2024; glibc since 2.33), also when it reports a
// misuse or returns memory to the OS, and so does a successful realloc.
TEST(Basic, FreeAndReallocKeepErrno) {
  mi_option_enable(mi_option_secure_continue);   // secure builds: report the bad free, go on
  const size_t unit = 4 * MiB;
  uint8_t* area = (uint8_t*)os_map(3 * unit);   // (memory that is not ours, where a segment could be)
  ASSERT_NE(area, nullptr);
  uint8_t* foreign = (uint8_t*)(((uintptr_t)area + unit - 1) & ~(uintptr_t)(unit - 1)) + 4096;
  errno = ERANGE;
  mi_free(opaque(foreign));   // not ours: reported (if shown) and ignored
  EXPECT_EQ(errno, ERANGE);
  os_unmap(area, 3 * unit);

  errno = ERANGE;
  void* p = mi_malloc(dyn(100));
  void* q = mi_realloc(p, dyn(300000));
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(errno, ERANGE);
  mi_free(q);
  void* big = mi_malloc(dyn(64 * MiB));   // a huge block, whose free returns memory
  mi_free(big);
  mi_collect(true);                       // purges now
  EXPECT_EQ(errno, ERANGE);
  mi_option_disable(mi_option_secure_continue);
}
