/* ----------------------------------------------------------------------------
  test-realloc.cpp -- API tests: realloc and friends.

  In place when the new size fits the usable size and is at least half of it;
  otherwise allocate, copy min(old usable, new size), free the old block.
  Failure returns NULL and leaves the old block intact (mi_reallocf frees it).
  mi_realloc(p, 0) returns a fresh minimal block and frees p.
  (Zeroing reallocation is in test-zero.cpp.)
-----------------------------------------------------------------------------*/
#include <gtest/gtest.h>
#include <mimalloc.h>

#include <vector>

#include "api-util.h"

using namespace mitest;

namespace {
const size_t kSizes[] = {1, 9, 16, 100, 1000, 1025, 4097, 5000, 70000, 300000, 3 * MiB};
}

TEST(Realloc, NullPointerAllocates) {
  void* a = mi_realloc(nullptr, dyn(100));
  void* b = mi_reallocn(nullptr, dyn(10), dyn(10));
  void* c = mi_reallocf(nullptr, dyn(100));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NE(c, nullptr);
  EXPECT_GE(mi_usable_size(a), 100u);
  EXPECT_GE(mi_usable_size(b), 100u);
  EXPECT_GE(mi_usable_size(c), 100u);
  mi_free(a);
  mi_free(b);
  mi_free(c);

  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  void* d = mi_heap_realloc(h, nullptr, dyn(100));
  void* e = mi_heap_reallocn(h, nullptr, dyn(10), dyn(10));
  void* f = mi_heap_reallocf(h, nullptr, dyn(100));
  ASSERT_NE(d, nullptr);
  ASSERT_NE(e, nullptr);
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(mi_heap_contains_block(h, d));
  EXPECT_TRUE(mi_heap_contains_block(h, e));
  EXPECT_TRUE(mi_heap_contains_block(h, f));
  mi_free(d);
  mi_free(e);
  mi_free(f);
  mi_heap_delete(h);
}

TEST(Realloc, ShrinkToAtLeastHalfStaysInPlace) {
  for (size_t size : kSizes) {
    if (size < 16) continue;
    void* p = mi_malloc(size);
    ASSERT_NE(p, nullptr);
    const size_t usable = mi_usable_size(p);
    fill_pattern(p, usable, 20);
    const size_t half = (usable + 1) / 2;  // >= usable/2
    void* q = mi_realloc(p, half);
    EXPECT_EQ(q, p) << "size " << size << " usable " << usable << " -> " << half;
    ASSERT_NE(q, nullptr);
    EXPECT_GE(mi_usable_size(q), half);
    EXPECT_TRUE(has_pattern(q, half, 20)) << "size " << size;
    mi_free(q);
  }
}

TEST(Realloc, GrowWithinUsableStaysInPlace) {
  for (size_t size : kSizes) {
    void* p = mi_malloc(size);
    ASSERT_NE(p, nullptr);
    fill_pattern(p, size, 21);
    const size_t usable = mi_usable_size(p);
    if (usable_size_is_size_class() && size == 100) {
      EXPECT_GT(usable, size);  // 100 -> 112: there is room to grow
    }
    void* q = mi_realloc(p, usable);
    EXPECT_EQ(q, p) << "size " << size << " usable " << usable;
    ASSERT_NE(q, nullptr);
    EXPECT_GE(mi_usable_size(q), usable);
    EXPECT_TRUE(has_pattern(q, size, 21)) << "size " << size;
    fill_pattern(q, usable, 22);  // the whole usable size is writable
    EXPECT_TRUE(has_pattern(q, usable, 22));
    // mi_reallocn within the usable size as well
    void* r = mi_reallocn(q, dyn(1), usable);
    EXPECT_EQ(r, p) << "size " << size;
    mi_free(r != nullptr ? r : q);
  }
}

TEST(Realloc, GrowMovesAndPreservesContents) {
  const size_t chain[] = {8, 100, 1000, 20000, 200000, 1 * MiB, 5 * MiB, 9 * MiB};
  void* p = mi_malloc(chain[0]);
  ASSERT_NE(p, nullptr);
  fill_pattern(p, chain[0], 23);
  for (size_t i = 1; i < sizeof(chain) / sizeof(chain[0]); i++) {
    const size_t old_usable = mi_usable_size(p);
    void* q = mi_realloc(p, chain[i]);
    ASSERT_NE(q, nullptr) << chain[i];
    EXPECT_FALSE(same_ptr(p, q)) << "grew beyond the usable size " << old_usable << " in place to " << chain[i];
    EXPECT_GE(mi_usable_size(q), chain[i]);
    EXPECT_TRUE(has_pattern(q, chain[i - 1], 23)) << "contents lost growing to " << chain[i];
    fill_pattern(q, chain[i], 23);
    p = q;
  }
  mi_free(p);
}

TEST(Realloc, ShrinkBelowHalfMovesAndPreservesContents) {
  const size_t chain[] = {9 * MiB, 1 * MiB, 200000, 20000, 1000, 100, 8};
  void* p = mi_malloc(chain[0]);
  ASSERT_NE(p, nullptr);
  fill_pattern(p, chain[0], 24);
  for (size_t i = 1; i < sizeof(chain) / sizeof(chain[0]); i++) {
    const size_t old_usable = mi_usable_size(p);
    void* q = mi_realloc(p, chain[i]);
    ASSERT_NE(q, nullptr) << chain[i];
    EXPECT_FALSE(same_ptr(p, q)) << "shrank " << old_usable << " to " << chain[i] << " in place";
    EXPECT_LT(mi_usable_size(q), old_usable / 2) << chain[i];
    EXPECT_GE(mi_usable_size(q), chain[i]);
    EXPECT_TRUE(has_pattern(q, chain[i], 24)) << "contents lost shrinking to " << chain[i];
    p = q;
  }
  mi_free(p);
}

TEST(Realloc, ManyBlocksGrowAndShrink) {
  std::vector<void*> blocks(200, nullptr);
  std::vector<size_t> sizes(200, 0);
  for (int round = 0; round < 6; round++) {
    for (size_t i = 0; i < blocks.size(); i++) {
      const size_t newsize = ((i * 7919 + (size_t)round * 104729) % 5000) + (i % 37 == 0 ? 100000 : 0);
      void* q = mi_realloc(blocks[i], newsize);
      ASSERT_NE(q, nullptr);
      EXPECT_TRUE(has_pattern(q, std::min(sizes[i], newsize), (unsigned)i)) << "block " << i << " round " << round;
      fill_pattern(q, newsize, (unsigned)i);
      blocks[i] = q;
      sizes[i] = newsize;
    }
  }
  for (void* p : blocks) mi_free(p);
}

TEST(Realloc, ToZeroReturnsFreshBlockAndFreesOld) {
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  void* p = mi_heap_malloc(h, dyn(200));
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(is_live_in(h, p));
  void* q = mi_heap_realloc(h, p, dyn(0));
  ASSERT_NE(q, nullptr);
  EXPECT_FALSE(same_ptr(p, q));
  EXPECT_LE(mi_usable_size(q), 16u);
  HeapWalk w = walk_heap(h);
  EXPECT_FALSE(w.contains(p)) << "old block not freed";
  // (secure builds give a zero-size request an address of no access outside
  // every heap: no block of the heap)
  EXPECT_EQ(w.contains(q), !secure_zero_area());
  EXPECT_EQ(w.blocks.size(), secure_zero_area() ? 0u : 1u);
  mi_free(q);
  mi_heap_delete(h);

  // the default-heap version
  ScopedDefaultHeap scoped;
  ASSERT_NE(scoped.get(), nullptr);
  void* r = mi_malloc(dyn(200));
  ASSERT_NE(r, nullptr);
  void* s = mi_realloc(r, dyn(0));
  HeapWalk w2 = walk_heap(scoped.get());  // before any expectation can allocate a failure message
  ASSERT_NE(s, nullptr);
  EXPECT_FALSE(same_ptr(r, s));
  EXPECT_FALSE(w2.contains(r)) << "old block not freed";
  EXPECT_EQ(w2.contains(s), !secure_zero_area());
  mi_free(s);
}

TEST(Realloc, FailureKeepsOldBlock) {
  for (size_t size : {16, 1000, 300000}) {
    void* p = mi_malloc(dyn(size));
    ASSERT_NE(p, nullptr);
    const size_t usable = mi_usable_size(p);
    fill_pattern(p, size, 25);
    errno = 0;
    EXPECT_EQ(mi_realloc(p, impossible_size()), nullptr);
    EXPECT_EQ(errno, ENOMEM);
    errno = 0;
    EXPECT_EQ(mi_realloc(p, too_large_size()), nullptr);
    EXPECT_EQ(errno, EOVERFLOW);
    errno = 0;
    EXPECT_EQ(mi_reallocn(p, dyn(2), impossible_size() / 2), nullptr);
    EXPECT_EQ(errno, ENOMEM);
    EXPECT_EQ(mi_usable_size(p), usable);
    EXPECT_TRUE(has_pattern(p, size, 25)) << "size " << size;
    // still a valid block: can be resized and freed
    void* q = mi_realloc(p, size * 2);
    ASSERT_NE(q, nullptr);
    EXPECT_TRUE(has_pattern(q, size, 25));
    mi_free(q);
  }
}

TEST(Realloc, HeapReallocFailureKeepsOldBlock) {
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  void* p = mi_heap_malloc(h, dyn(500));
  ASSERT_NE(p, nullptr);
  fill_pattern(p, 500, 26);
  errno = 0;
  EXPECT_EQ(mi_heap_realloc(h, p, impossible_size()), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(mi_heap_reallocn(h, p, dyn(SIZE_MAX / 2), dyn(4)), nullptr);
  EXPECT_EQ(errno, EOVERFLOW);
  EXPECT_TRUE(has_pattern(p, 500, 26));
  EXPECT_TRUE(is_live_in(h, p));
  mi_free(p);
  mi_heap_delete(h);
}

TEST(Realloc, ReallocnOverflowFailsWithEOVERFLOW) {
  void* p = mi_malloc(dyn(64));
  ASSERT_NE(p, nullptr);
  fill_pattern(p, 64, 27);
  errno = 0;
  EXPECT_EQ(mi_reallocn(p, dyn(SIZE_MAX / 2), dyn(3)), nullptr);
  EXPECT_EQ(errno, EOVERFLOW);
  EXPECT_TRUE(has_pattern(p, 64, 27));
  void* q = mi_reallocn(p, dyn(100), dyn(40));
  ASSERT_NE(q, nullptr);
  EXPECT_GE(mi_usable_size(q), 4000u);
  EXPECT_TRUE(has_pattern(q, 64, 27));
  mi_free(q);
}

TEST(Realloc, ReallocfSuccessBehavesLikeRealloc) {
  void* p = mi_malloc(dyn(100));
  ASSERT_NE(p, nullptr);
  fill_pattern(p, 100, 28);
  void* q = mi_reallocf(p, dyn(10000));
  ASSERT_NE(q, nullptr);
  EXPECT_GE(mi_usable_size(q), 10000u);
  EXPECT_TRUE(has_pattern(q, 100, 28));
  void* r = mi_reallocf(q, dyn(60));
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(has_pattern(r, 60, 28));
  mi_free(r);
}

TEST(Realloc, ReallocfFailureFreesBlock) {
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  void* p = mi_heap_malloc(h, dyn(300));
  void* keep = mi_heap_malloc(h, dyn(300));
  ASSERT_NE(p, nullptr);
  ASSERT_NE(keep, nullptr);
  ASSERT_TRUE(is_live_in(h, p));
  errno = 0;
  EXPECT_EQ(mi_heap_reallocf(h, p, impossible_size()), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  HeapWalk w = walk_heap(h);
  EXPECT_FALSE(w.contains(p)) << "mi_heap_reallocf did not free the block on failure";
  EXPECT_TRUE(w.contains(keep));
  mi_free(keep);
  mi_heap_delete(h);

  // default-heap version, failing by overflow
  ScopedDefaultHeap scoped;
  ASSERT_NE(scoped.get(), nullptr);
  void* r = mi_malloc(dyn(300));
  ASSERT_NE(r, nullptr);
  ASSERT_TRUE(is_live_in(scoped.get(), r));
  errno = 0;
  void* res = mi_reallocf(r, too_large_size());
  const int err = errno;
  // look before any expectation can fail: a failure message would be allocated in this heap
  const bool still_live = is_live_in(scoped.get(), r);
  EXPECT_EQ(res, nullptr);
  EXPECT_EQ(err, EOVERFLOW);
  EXPECT_FALSE(still_live) << "mi_reallocf did not free the block on failure";
}

TEST(Realloc, HeapReallocMovesIntoHeap) {
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  void* p = mi_malloc(dyn(100));  // default heap
  ASSERT_NE(p, nullptr);
  ASSERT_FALSE(mi_heap_contains_block(h, p));
  fill_pattern(p, 100, 29);
  void* q = mi_heap_realloc(h, p, dyn(50000));
  ASSERT_NE(q, nullptr);
  EXPECT_TRUE(mi_heap_contains_block(h, q));
  EXPECT_TRUE(has_pattern(q, 100, 29));
  void* r = mi_heap_reallocn(h, q, dyn(30), dyn(10000));
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(mi_heap_contains_block(h, r));
  EXPECT_TRUE(has_pattern(r, 100, 29));
  void* s = mi_heap_reallocf(h, r, dyn(20));
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(mi_heap_contains_block(h, s));
  EXPECT_TRUE(has_pattern(s, 20, 29));
  mi_free(s);
  mi_heap_delete(h);
}
