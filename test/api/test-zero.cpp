/* ----------------------------------------------------------------------------
  test-zero.cpp -- API tests: zero-initialised allocation.

  Every zeroing entry point must return memory whose whole usable area is zero,
  also when it recycles dirty memory: each check first fills blocks of the same
  size class with garbage and frees them, then allocates zeroed. The zeroing
  reallocations (rezalloc/recalloc and their aligned, heap and Microsoft
  variants) must zero the new tail when they grow, in place or moving.
-----------------------------------------------------------------------------*/
#include <gtest/gtest.h>
#include <mimalloc.h>

#include <functional>
#include <string>
#include <vector>

#include "api-util.h"

using namespace mitest;

namespace {

const size_t kZeroSizes[] = {1, 8, 24, 100, 1000, 5000, 40000, 300000, 3 * MiB};

// `alloc(size)` must return zeroed memory of at least `size` bytes, even after
// dirty blocks of that size class (and of `size + extra_dirty`, for aligned
// over-allocation) were freed. Allocation happens in a fresh default heap;
// the heap argument is that heap (for the mi_heap_ functions).
void check_zeroing(const char* name, size_t extra_dirty, const std::function<void*(mi_heap_t*, size_t)>& alloc) {
  ScopedDefaultHeap scoped;
  ASSERT_NE(scoped.get(), nullptr);
  for (size_t size : kZeroSizes) {
    const size_t n = blocks_for(size);
    dirty_size_class(size, n);
    if (extra_dirty != 0) dirty_size_class(size + extra_dirty, n);
    std::vector<void*> blocks;
    size_t not_zero = 0, first_bad_byte = 0, first_bad_usable = 0;
    for (size_t i = 0; i < n; i++) {
      void* p = alloc(scoped.get(), size);
      ASSERT_NE(p, nullptr) << name << " size " << size;
      const size_t usable = mi_usable_size(p);
      EXPECT_GE(usable, size) << name;
      const size_t nz = first_nonzero(p, usable);
      if (nz != usable && not_zero++ == 0) {
        first_bad_byte = nz;
        first_bad_usable = usable;
      }
      blocks.push_back(p);
    }
    EXPECT_EQ(not_zero, 0u) << name << "(" << size << "): " << not_zero << " of " << n << " blocks not zero, e.g. byte "
                            << first_bad_byte << " of " << first_bad_usable;
    for (void* p : blocks) mi_free(p);
  }
}

}  // namespace

// ------------------------------------------------------
// Zeroed allocation
// ------------------------------------------------------

TEST(Zero, Zalloc) {
  check_zeroing("mi_zalloc", 0, [](mi_heap_t*, size_t s) { return mi_zalloc(s); });
}

TEST(Zero, Calloc) {
  check_zeroing("mi_calloc", 0, [](mi_heap_t*, size_t s) { return s % 8 == 0 ? mi_calloc(s / 8, 8) : mi_calloc(1, s); });
}

TEST(Zero, ZallocSmall) {
  ScopedDefaultHeap scoped;
  ASSERT_NE(scoped.get(), nullptr);
  for (size_t size = 0; size <= MI_SMALL_SIZE_MAX; size += 8) {
    dirty_size_class(size, 64);
    std::vector<void*> blocks;
    for (int i = 0; i < 64; i++) {
      void* p = mi_zalloc_small(size);
      ASSERT_NE(p, nullptr);
      EXPECT_TRUE(is_zero(p, mi_usable_size(p))) << "mi_zalloc_small " << size;
      blocks.push_back(p);
    }
    for (void* p : blocks) mi_free(p);
  }
}

TEST(Zero, HeapZallocAndCalloc) {
  check_zeroing("mi_heap_zalloc", 0, [](mi_heap_t* h, size_t s) { return mi_heap_zalloc(h, s); });
  check_zeroing("mi_heap_calloc", 0, [](mi_heap_t* h, size_t s) { return mi_heap_calloc(h, 1, s); });
}

TEST(Zero, ZallocAligned) {
  for (size_t a : {16, 64, 4096}) {
    check_zeroing("mi_zalloc_aligned", a, [a](mi_heap_t*, size_t s) { return mi_zalloc_aligned(s, dyn(a)); });
    check_zeroing("mi_zalloc_aligned_at", a, [a](mi_heap_t*, size_t s) { return mi_zalloc_aligned_at(s, dyn(a), 8); });
  }
}

TEST(Zero, CallocAligned) {
  for (size_t a : {16, 256}) {
    check_zeroing("mi_calloc_aligned", a, [a](mi_heap_t*, size_t s) { return mi_calloc_aligned(1, s, dyn(a)); });
    check_zeroing("mi_calloc_aligned_at", a, [a](mi_heap_t*, size_t s) { return mi_calloc_aligned_at(s, 1, dyn(a), 16); });
  }
}

TEST(Zero, HeapZallocCallocAligned) {
  size_t a = dyn(128);  // (not a constant: captured by the lambdas below)
  check_zeroing("mi_heap_zalloc_aligned", a, [a](mi_heap_t* h, size_t s) { return mi_heap_zalloc_aligned(h, s, dyn(a)); });
  check_zeroing("mi_heap_zalloc_aligned_at", a, [a](mi_heap_t* h, size_t s) { return mi_heap_zalloc_aligned_at(h, s, dyn(a), 8); });
  check_zeroing("mi_heap_calloc_aligned", a, [a](mi_heap_t* h, size_t s) { return mi_heap_calloc_aligned(h, 1, s, dyn(a)); });
  check_zeroing("mi_heap_calloc_aligned_at", a, [a](mi_heap_t* h, size_t s) { return mi_heap_calloc_aligned_at(h, s, 1, dyn(a), 24); });
}

TEST(Zero, ZeroingReallocOfNullAllocatesZeroed) {
  check_zeroing("mi_rezalloc(NULL)", 0, [](mi_heap_t*, size_t s) { return mi_rezalloc(nullptr, s); });
  check_zeroing("mi_recalloc(NULL)", 0, [](mi_heap_t*, size_t s) { return mi_recalloc(nullptr, 1, s); });
  check_zeroing("mi_heap_rezalloc(NULL)", 0, [](mi_heap_t* h, size_t s) { return mi_heap_rezalloc(h, nullptr, s); });
  check_zeroing("mi_heap_recalloc(NULL)", 0, [](mi_heap_t* h, size_t s) { return mi_heap_recalloc(h, nullptr, s, 1); });
  size_t a = dyn(64);  // (not a constant: captured by the lambdas below)
  check_zeroing("mi_rezalloc_aligned(NULL)", a, [a](mi_heap_t*, size_t s) { return mi_rezalloc_aligned(nullptr, s, dyn(a)); });
  check_zeroing("mi_rezalloc_aligned_at(NULL)", a, [a](mi_heap_t*, size_t s) { return mi_rezalloc_aligned_at(nullptr, s, dyn(a), 8); });
  check_zeroing("mi_recalloc_aligned(NULL)", a, [a](mi_heap_t*, size_t s) { return mi_recalloc_aligned(nullptr, 1, s, dyn(a)); });
  check_zeroing("mi_recalloc_aligned_at(NULL)", a, [a](mi_heap_t*, size_t s) { return mi_recalloc_aligned_at(nullptr, s, 1, dyn(a), 16); });
  check_zeroing("mi_heap_rezalloc_aligned(NULL)", a, [a](mi_heap_t* h, size_t s) { return mi_heap_rezalloc_aligned(h, nullptr, s, dyn(a)); });
  check_zeroing("mi_heap_rezalloc_aligned_at(NULL)", a, [a](mi_heap_t* h, size_t s) { return mi_heap_rezalloc_aligned_at(h, nullptr, s, dyn(a), 8); });
  check_zeroing("mi_heap_recalloc_aligned(NULL)", a, [a](mi_heap_t* h, size_t s) { return mi_heap_recalloc_aligned(h, nullptr, 1, s, dyn(a)); });
  check_zeroing("mi_heap_recalloc_aligned_at(NULL)", a, [a](mi_heap_t* h, size_t s) { return mi_heap_recalloc_aligned_at(h, nullptr, s, 1, dyn(a), 8); });
  check_zeroing("mi_aligned_recalloc(NULL)", a, [a](mi_heap_t*, size_t s) { return mi_aligned_recalloc(nullptr, 1, s, dyn(a)); });
  check_zeroing("mi_aligned_offset_recalloc(NULL)", a, [a](mi_heap_t*, size_t s) { return mi_aligned_offset_recalloc(nullptr, s, 1, dyn(a), 16); });
}

// ------------------------------------------------------
// Zeroing reallocation: growth zeroes the new tail
// ------------------------------------------------------

namespace {

struct ZeroRealloc {
  const char* name;
  size_t alignment;  // 0: not aligned
  size_t offset;
  // first allocation (zeroed) and the zeroing resize
  std::function<void*(mi_heap_t*, size_t)> alloc;
  std::function<void*(mi_heap_t*, void*, size_t)> resize;
};

void check_aligned_result(const ZeroRealloc& z, void* p) {
  if (z.alignment != 0) {
    EXPECT_EQ(((uintptr_t)opaque(p) + z.offset) % z.alignment, 0u) << z.name;
  }
}

// Grow a freshly zeroed block whose first `n` bytes hold data: once within
// the usable size (in place for the plain variants), then to larger sizes
// (moving, into recycled dirty memory). The data must survive and everything
// from `n` up to the new size must read zero. Shrinking keeps the data.
void check_growth_zeroes_tail(const ZeroRealloc& z) {
  ScopedDefaultHeap scoped;
  ASSERT_NE(scoped.get(), nullptr);
  mi_heap_t* h = scoped.get();
  const size_t n = 100;
  {
    void* p = z.alloc(h, n);
    ASSERT_NE(p, nullptr) << z.name;
    check_aligned_result(z, p);
    fill_pattern(p, n, 30);
    const size_t usable = mi_usable_size(p);
    p = z.resize(h, p, usable);
    ASSERT_NE(p, nullptr) << z.name;
    check_aligned_result(z, p);
    EXPECT_TRUE(has_pattern(p, n, 30)) << z.name;
    EXPECT_TRUE(is_zero((uint8_t*)p + n, usable - n)) << z.name << ": tail not zero after growing to " << usable;
    mi_free(p);
  }
  for (size_t newsize : std::initializer_list<size_t>{1000, 30000, 300000, 3 * MiB}) {
    void* p = z.alloc(h, n);
    ASSERT_NE(p, nullptr) << z.name;
    fill_pattern(p, n, 30);
    dirty_size_class(newsize, blocks_for(newsize));
    if (z.alignment != 0) dirty_size_class(newsize + z.alignment, blocks_for(newsize));
    p = z.resize(h, p, newsize);
    ASSERT_NE(p, nullptr) << z.name << " " << newsize;
    check_aligned_result(z, p);
    EXPECT_GE(mi_usable_size(p), newsize);
    EXPECT_TRUE(has_pattern(p, n, 30)) << z.name << ": data lost growing to " << newsize;
    const size_t nz = first_nonzero((uint8_t*)p + n, newsize - n);
    EXPECT_EQ(nz, newsize - n) << z.name << ": byte " << (n + nz) << " not zero after growing 100 -> " << newsize;
    p = z.resize(h, p, 50);
    ASSERT_NE(p, nullptr) << z.name;
    check_aligned_result(z, p);
    EXPECT_TRUE(has_pattern(p, 50, 30)) << z.name;
    mi_free(p);
  }
}

// Grow the same block step by step. Each step must zero its whole new tail,
// also when the previous step moved the block into a larger size-class block:
// the bytes between the previous requested size and that block's usable size
// were never written by the user and must not leak into the next tail.
// (1.6.7 and 2.0.9 leak them: a moving growth only zeroes up to the requested
// size, and the next growth copies the whole old usable area.)
void check_chained_growth_zeroes_tail(const ZeroRealloc& z) {
  ScopedDefaultHeap scoped;
  ASSERT_NE(scoped.get(), nullptr);
  mi_heap_t* h = scoped.get();
  const size_t n = 100;
  void* p = z.alloc(h, n);
  ASSERT_NE(p, nullptr) << z.name;
  fill_pattern(p, n, 33);
  size_t prev = n;
  for (size_t newsize : std::initializer_list<size_t>{1000, 30000, 300000, 3 * MiB}) {
    dirty_size_class(newsize, blocks_for(newsize));
    if (z.alignment != 0) dirty_size_class(newsize + z.alignment, blocks_for(newsize));
    p = z.resize(h, p, newsize);
    ASSERT_NE(p, nullptr) << z.name << " " << newsize;
    check_aligned_result(z, p);
    EXPECT_TRUE(has_pattern(p, n, 33)) << z.name << ": data lost growing to " << newsize;
    const size_t nz = first_nonzero((uint8_t*)p + n, newsize - n);
    EXPECT_EQ(nz, newsize - n) << z.name << ": byte " << (n + nz) << " not zero after growing " << prev << " -> "
                               << newsize;
    prev = newsize;
  }
  mi_free(p);
}

std::vector<ZeroRealloc> all_zero_reallocs() {
  std::vector<ZeroRealloc> v;
  v.push_back({"mi_rezalloc", 0, 0, [](mi_heap_t*, size_t s) { return mi_zalloc(s); },
               [](mi_heap_t*, void* p, size_t s) { return mi_rezalloc(p, s); }});
  v.push_back({"mi_recalloc", 0, 0, [](mi_heap_t*, size_t s) { return mi_calloc(s, 1); },
               [](mi_heap_t*, void* p, size_t s) { return mi_recalloc(p, s, 1); }});
  v.push_back({"mi_heap_rezalloc", 0, 0, [](mi_heap_t* h, size_t s) { return mi_heap_zalloc(h, s); },
               [](mi_heap_t* h, void* p, size_t s) { return mi_heap_rezalloc(h, p, s); }});
  v.push_back({"mi_heap_recalloc", 0, 0, [](mi_heap_t* h, size_t s) { return mi_heap_calloc(h, 1, s); },
               [](mi_heap_t* h, void* p, size_t s) { return mi_heap_recalloc(h, p, 1, s); }});
  size_t a = dyn(64);  // (not a constant: captured by the lambdas below)
  v.push_back({"mi_rezalloc_aligned", a, 0, [a](mi_heap_t*, size_t s) { return mi_zalloc_aligned(s, a); },
               [a](mi_heap_t*, void* p, size_t s) { return mi_rezalloc_aligned(p, s, a); }});
  v.push_back({"mi_recalloc_aligned_at", a, 16, [a](mi_heap_t*, size_t s) { return mi_calloc_aligned_at(s, 1, a, 16); },
               [a](mi_heap_t*, void* p, size_t s) { return mi_recalloc_aligned_at(p, s, 1, a, 16); }});
  v.push_back({"mi_heap_rezalloc_aligned_at", a, 8, [a](mi_heap_t* h, size_t s) { return mi_heap_zalloc_aligned_at(h, s, a, 8); },
               [a](mi_heap_t* h, void* p, size_t s) { return mi_heap_rezalloc_aligned_at(h, p, s, a, 8); }});
  v.push_back({"mi_aligned_recalloc", a, 0, [a](mi_heap_t*, size_t s) { return mi_calloc_aligned(s, 1, a); },
               [a](mi_heap_t*, void* p, size_t s) { return mi_aligned_recalloc(p, s, 1, a); }});
  return v;
}

}  // namespace

TEST(Zero, RezallocGrowthZeroesTail) {
  check_growth_zeroes_tail({"mi_rezalloc", 0, 0, [](mi_heap_t*, size_t s) { return mi_zalloc(s); },
                            [](mi_heap_t*, void* p, size_t s) { return mi_rezalloc(p, s); }});
}

TEST(Zero, RecallocGrowthZeroesTail) {
  check_growth_zeroes_tail({"mi_recalloc", 0, 0, [](mi_heap_t*, size_t s) { return mi_calloc(s, 1); },
                            [](mi_heap_t*, void* p, size_t s) { return mi_recalloc(p, s, 1); }});
  check_growth_zeroes_tail({"mi_recalloc(count)", 0, 0, [](mi_heap_t*, size_t s) { return mi_calloc(1, s); },
                            [](mi_heap_t*, void* p, size_t s) { return s % 2 == 0 ? mi_recalloc(p, s / 2, 2) : mi_recalloc(p, 1, s); }});
}

TEST(Zero, HeapRezallocRecallocGrowthZeroesTail) {
  check_growth_zeroes_tail({"mi_heap_rezalloc", 0, 0, [](mi_heap_t* h, size_t s) { return mi_heap_zalloc(h, s); },
                            [](mi_heap_t* h, void* p, size_t s) { return mi_heap_rezalloc(h, p, s); }});
  check_growth_zeroes_tail({"mi_heap_recalloc", 0, 0, [](mi_heap_t* h, size_t s) { return mi_heap_calloc(h, 1, s); },
                            [](mi_heap_t* h, void* p, size_t s) { return mi_heap_recalloc(h, p, 1, s); }});
}

TEST(Zero, AlignedRezallocRecallocGrowthZeroesTail) {
  for (size_t a : {16, 64, 4096}) {
    check_growth_zeroes_tail({"mi_rezalloc_aligned", a, 0, [a](mi_heap_t*, size_t s) { return mi_zalloc_aligned(s, a); },
                              [a](mi_heap_t*, void* p, size_t s) { return mi_rezalloc_aligned(p, s, a); }});
    check_growth_zeroes_tail({"mi_rezalloc_aligned_at", a, 8, [a](mi_heap_t*, size_t s) { return mi_zalloc_aligned_at(s, a, 8); },
                              [a](mi_heap_t*, void* p, size_t s) { return mi_rezalloc_aligned_at(p, s, a, 8); }});
    check_growth_zeroes_tail({"mi_recalloc_aligned", a, 0, [a](mi_heap_t*, size_t s) { return mi_calloc_aligned(1, s, a); },
                              [a](mi_heap_t*, void* p, size_t s) { return mi_recalloc_aligned(p, 1, s, a); }});
    check_growth_zeroes_tail({"mi_recalloc_aligned_at", a, 16, [a](mi_heap_t*, size_t s) { return mi_calloc_aligned_at(s, 1, a, 16); },
                              [a](mi_heap_t*, void* p, size_t s) { return mi_recalloc_aligned_at(p, s, 1, a, 16); }});
    check_growth_zeroes_tail({"mi_aligned_recalloc", a, 0, [a](mi_heap_t*, size_t s) { return mi_calloc_aligned(s, 1, a); },
                              [a](mi_heap_t*, void* p, size_t s) { return mi_aligned_recalloc(p, s, 1, a); }});
    check_growth_zeroes_tail({"mi_aligned_offset_recalloc", a, 24, [a](mi_heap_t*, size_t s) { return mi_calloc_aligned_at(1, s, a, 24); },
                              [a](mi_heap_t*, void* p, size_t s) { return mi_aligned_offset_recalloc(p, 1, s, a, 24); }});
  }
}

TEST(Zero, HeapAlignedRezallocRecallocGrowthZeroesTail) {
  size_t a = dyn(32);  // (not a constant: captured by the lambdas below)
  check_growth_zeroes_tail({"mi_heap_rezalloc_aligned", a, 0, [a](mi_heap_t* h, size_t s) { return mi_heap_zalloc_aligned(h, s, a); },
                            [a](mi_heap_t* h, void* p, size_t s) { return mi_heap_rezalloc_aligned(h, p, s, a); }});
  check_growth_zeroes_tail({"mi_heap_rezalloc_aligned_at", a, 8, [a](mi_heap_t* h, size_t s) { return mi_heap_zalloc_aligned_at(h, s, a, 8); },
                            [a](mi_heap_t* h, void* p, size_t s) { return mi_heap_rezalloc_aligned_at(h, p, s, a, 8); }});
  check_growth_zeroes_tail({"mi_heap_recalloc_aligned", a, 0, [a](mi_heap_t* h, size_t s) { return mi_heap_calloc_aligned(h, s, 1, a); },
                            [a](mi_heap_t* h, void* p, size_t s) { return mi_heap_recalloc_aligned(h, p, s, 1, a); }});
  check_growth_zeroes_tail({"mi_heap_recalloc_aligned_at", a, 16, [a](mi_heap_t* h, size_t s) { return mi_heap_calloc_aligned_at(h, 1, s, a, 16); },
                            [a](mi_heap_t* h, void* p, size_t s) { return mi_heap_recalloc_aligned_at(h, p, 1, s, a, 16); }});
}

TEST(Zero, ChainedGrowthZeroesEveryNewTail) {
  for (const ZeroRealloc& z : all_zero_reallocs()) check_chained_growth_zeroes_tail(z);
}

TEST(Zero, GrowthAfterMovingGrowthInPlaceZeroesTail) {
  // A block that was moved by a zeroing growth may be grown again within its
  // usable size (in place): the bytes past the previous size must be zero.
  ScopedDefaultHeap scoped;
  ASSERT_NE(scoped.get(), nullptr);
  for (size_t target : {1000, 30000, 300000}) {
    void* p = mi_zalloc(dyn(16));
    ASSERT_NE(p, nullptr);
    fill_pattern(p, 16, 34);
    dirty_size_class(target, blocks_for(target));
    p = mi_rezalloc(p, target);
    ASSERT_NE(p, nullptr);
    const size_t usable = mi_usable_size(p);
    p = mi_rezalloc(p, usable);
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(has_pattern(p, 16, 34));
    const size_t nz = first_nonzero((uint8_t*)p + 16, usable - 16);
    EXPECT_EQ(nz, usable - 16) << "byte " << (16 + nz) << " of " << usable << " not zero (grown to " << target << ")";
    mi_free(p);
  }
}

TEST(Zero, RezallocInPlaceGrowthZeroesTail) {
  // release builds: 100 bytes live in a 112-byte block; growing to 112 stays in
  // place and the 12 tail bytes must read zero
  ScopedDefaultHeap scoped;
  ASSERT_NE(scoped.get(), nullptr);
  dirty_size_class(100, 512);
  for (int i = 0; i < 100; i++) {
    void* p = mi_zalloc(dyn(100));
    ASSERT_NE(p, nullptr);
    fill_pattern(p, 100, 31);
    const size_t usable = mi_usable_size(p);
    void* q = mi_rezalloc(p, usable);
    EXPECT_EQ(q, p);
    ASSERT_NE(q, nullptr);
    EXPECT_TRUE(has_pattern(q, 100, 31));
    EXPECT_TRUE(is_zero((uint8_t*)q + 100, usable - 100));
    mi_free(q);
  }
}

TEST(Zero, RecallocOverflowKeepsBlock) {
  void* p = mi_calloc(dyn(10), dyn(10));
  ASSERT_NE(p, nullptr);
  fill_pattern(p, 100, 32);
  errno = 0;
  EXPECT_EQ(mi_recalloc(p, dyn(SIZE_MAX / 2), dyn(3)), nullptr);
  EXPECT_EQ(errno, EOVERFLOW);
  errno = 0;
  EXPECT_EQ(mi_recalloc_aligned(p, dyn(SIZE_MAX / 2), dyn(3), dyn(16)), nullptr);
  EXPECT_EQ(errno, EOVERFLOW);
  errno = 0;
  EXPECT_EQ(mi_aligned_recalloc(p, dyn(SIZE_MAX / 2), dyn(3), dyn(16)), nullptr);
  EXPECT_EQ(errno, EOVERFLOW);
  errno = 0;
  EXPECT_EQ(mi_rezalloc(p, impossible_size()), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_TRUE(has_pattern(p, 100, 32));
  mi_free(p);
}
