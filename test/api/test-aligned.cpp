/* ----------------------------------------------------------------------------
  test-aligned.cpp -- API tests: aligned allocation.

  Every power-of-two alignment from 1 byte to 16 MiB must work for every
  aligned entry point (plain, zeroed, calloc, `_at` with offsets, heap
  versions): the pointer (plus offset) is aligned, the usable size covers the
  request and is sane, the whole usable area is writable, and the block can be
  freed. 1.6.7 broke for alignments >= 4 MiB (wrong segment lookup on free);
  we promise they work. Invalid alignments fail with EINVAL.
-----------------------------------------------------------------------------*/
#include <gtest/gtest.h>
#include <mimalloc.h>

#include <algorithm>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api-util.h"

using namespace mitest;

namespace {

constexpr size_t kMaxAlignment = 16 * MiB;

std::vector<size_t> all_alignments() {
  std::vector<size_t> v;
  for (size_t a = 1; a <= kMaxAlignment; a *= 2) v.push_back(a);
  return v;
}

// Word-multiple offsets (an odd offset would produce a pointer that is not word
// aligned, which debug builds refuse to free). Offsets may exceed the size.
const size_t kOffsets[] = {0, 8, 16, 40, 1000};

std::string where(const char* fn, size_t size, size_t alignment, size_t offset) {
  return std::string(fn) + "(size " + std::to_string(size) + ", alignment " + std::to_string(alignment) +
         ", offset " + std::to_string(offset) + ")";
}

// Checks an aligned block and frees it with mi_free.
void check_aligned(void* p, size_t size, size_t alignment, size_t offset, bool zeroed, const std::string& ctx) {
  ASSERT_NE(p, nullptr) << ctx;
  p = opaque(p);
  EXPECT_EQ(((uintptr_t)p + offset) % alignment, 0u) << ctx;
  const size_t usable = mi_usable_size(p);
  EXPECT_GE(usable, size) << ctx;
  // sane: at most the over-allocation for the alignment plus size-class/huge rounding
  EXPECT_LE(usable, 2 * (size + alignment + offset) + 4 * MiB) << ctx;
  if (zeroed) {
    EXPECT_TRUE(is_zero(p, usable)) << ctx << ": not zeroed";
  }
  fill_pattern(p, usable, (unsigned)(size + alignment));
  EXPECT_TRUE(has_pattern(p, usable, (unsigned)(size + alignment))) << ctx;
  mi_free(p);
}

}  // namespace

// ------------------------------------------------------
// All power-of-two alignments
// ------------------------------------------------------

TEST(Aligned, MallocAlignedAllPowersOfTwo) {
  for (size_t alignment : all_alignments()) {
    for (size_t size : {(size_t)0, (size_t)1, (size_t)100, alignment, alignment + 8}) {
      void* p = mi_malloc_aligned(size, dyn(alignment));
      check_aligned(p, size, alignment, 0, false, where("mi_malloc_aligned", size, alignment, 0));
    }
  }
}

TEST(Aligned, MallocAlignedKeepsManyLiveBlocks) {
  // several live aligned blocks at once (not only alloc/free pairs), including the big alignments
  std::vector<void*> blocks;
  std::vector<size_t> aligns;
  for (size_t alignment : all_alignments()) {
    for (int i = 0; i < 3; i++) {
      void* p = mi_malloc_aligned(dyn(256), dyn(alignment));
      ASSERT_NE(p, nullptr) << alignment;
      EXPECT_TRUE(is_aligned(p, alignment)) << alignment;
      fill_pattern(p, 256, (unsigned)(alignment + (size_t)i));
      blocks.push_back(p);
      aligns.push_back(alignment);
    }
  }
  for (size_t i = 0; i < blocks.size(); i++) {
    EXPECT_TRUE(has_pattern(blocks[i], 256, (unsigned)(aligns[i] + i % 3))) << aligns[i];
    EXPECT_GE(mi_usable_size(blocks[i]), 256u) << aligns[i];
    mi_free(blocks[i]);
  }
}

TEST(Aligned, MallocAlignedAtAllPowersOfTwo) {
  for (size_t alignment : all_alignments()) {
    for (size_t offset : kOffsets) {
      for (size_t size : {(size_t)8, (size_t)100}) {
        void* p = mi_malloc_aligned_at(size, dyn(alignment), dyn(offset));
        check_aligned(p, size, alignment, offset, false, where("mi_malloc_aligned_at", size, alignment, offset));
      }
    }
  }
}

// Big alignments (own segment) at offsets that are not a multiple of 16:
// the block underneath stays 16-aligned (free-list links and the padding
// are written at its start), so free, visiting and zeroing work as for any
// aligned block, from the owner and from another thread.
namespace {
bool find_block_of(const mi_heap_t*, const mi_heap_area_t*, void* block, size_t block_size, void* arg) {
  auto* q = static_cast<std::pair<const uint8_t*, const void*>*>(arg);
  if (block != nullptr && q->first >= (uint8_t*)block && q->first < (uint8_t*)block + block_size) q->second = block;
  return true;
}
}  // namespace

TEST(Aligned, BigAlignmentAtAnOddOffset) {
  for (size_t alignment : {4 * MiB, 8 * MiB}) {
    for (size_t offset : {1, 3, 7, 8, 12, 17, 100, 4095}) {
      for (bool zero : {false, true}) {
        SCOPED_TRACE(testing::Message() << "alignment " << alignment << ", offset " << offset << (zero ? ", zeroed" : ""));
        uint8_t* p = (uint8_t*)(zero ? mi_zalloc_aligned_at(1000, alignment, offset) : mi_malloc_aligned_at(1000, alignment, offset));
        ASSERT_NE(p, nullptr);
        EXPECT_TRUE(is_aligned(p + offset, alignment));
        EXPECT_GE(mi_usable_size(p), 1000u);
        if (zero) { EXPECT_TRUE(is_zero(p, mi_usable_size(p))); }
        std::pair<const uint8_t*, const void*> q{p, nullptr};
        EXPECT_TRUE(mi_heap_visit_blocks(mi_heap_get_default(), true, &find_block_of, &q));
        ASSERT_NE(q.second, nullptr) << "not visited";
        EXPECT_TRUE(is_aligned(q.second, 16)) << "the block underneath starts at " << q.second;
        fill_pattern(p, 1000, 3);
        if (offset % 2 == 0) {
          mi_free(p);
        }
        else {
          std::thread t([p] { mi_free(p); });
          t.join();
          mi_collect(true);   // takes the block from the delayed list
        }
        EXPECT_FALSE(mi_is_in_heap_region(p)) << "the block's segment is still mapped after free";
      }
    }
  }
}

TEST(Aligned, ZallocAlignedAllPowersOfTwo) {
  ScopedDefaultHeap scoped;
  ASSERT_NE(scoped.get(), nullptr);
  for (size_t alignment : all_alignments()) {
    const size_t size = 200;
    if (alignment <= 64 * KiB) dirty_size_class(size + alignment, 16);
    void* p = mi_zalloc_aligned(size, dyn(alignment));
    check_aligned(p, size, alignment, 0, true, where("mi_zalloc_aligned", size, alignment, 0));
    void* q = mi_zalloc_aligned_at(size, dyn(alignment), dyn(16));
    check_aligned(q, size, alignment, 16, true, where("mi_zalloc_aligned_at", size, alignment, 16));
  }
}

TEST(Aligned, CallocAlignedAllPowersOfTwo) {
  ScopedDefaultHeap scoped;
  ASSERT_NE(scoped.get(), nullptr);
  for (size_t alignment : all_alignments()) {
    if (alignment <= 64 * KiB) dirty_size_class(3 * 70 + alignment, 16);
    void* p = mi_calloc_aligned(dyn(3), dyn(70), dyn(alignment));
    check_aligned(p, 210, alignment, 0, true, where("mi_calloc_aligned", 210, alignment, 0));
    void* q = mi_calloc_aligned_at(dyn(3), dyn(70), dyn(alignment), dyn(8));
    check_aligned(q, 210, alignment, 8, true, where("mi_calloc_aligned_at", 210, alignment, 8));
  }
}

TEST(Aligned, HeapAlignedAllPowersOfTwo) {
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  for (size_t alignment : all_alignments()) {
    const size_t size = 120;
    void* a = mi_heap_malloc_aligned(h, size, dyn(alignment));
    void* b = mi_heap_malloc_aligned_at(h, size, dyn(alignment), dyn(24));
    void* c = mi_heap_zalloc_aligned(h, size, dyn(alignment));
    void* d = mi_heap_zalloc_aligned_at(h, size, dyn(alignment), dyn(8));
    void* e = mi_heap_calloc_aligned(h, dyn(4), dyn(30), dyn(alignment));
    void* f = mi_heap_calloc_aligned_at(h, dyn(4), dyn(30), dyn(alignment), dyn(16));
    if (alignment <= 64 * KiB) {
      // interior pointers of small/medium blocks are found in their page
      for (void* p : {a, b, c, d, e, f}) {
        if (p != nullptr) {
          EXPECT_TRUE(mi_heap_contains_block(h, p)) << "alignment " << alignment;
        }
      }
    }
    check_aligned(a, size, alignment, 0, false, where("mi_heap_malloc_aligned", size, alignment, 0));
    check_aligned(b, size, alignment, 24, false, where("mi_heap_malloc_aligned_at", size, alignment, 24));
    check_aligned(c, size, alignment, 0, true, where("mi_heap_zalloc_aligned", size, alignment, 0));
    check_aligned(d, size, alignment, 8, true, where("mi_heap_zalloc_aligned_at", size, alignment, 8));
    check_aligned(e, size, alignment, 0, true, where("mi_heap_calloc_aligned", size, alignment, 0));
    check_aligned(f, size, alignment, 16, true, where("mi_heap_calloc_aligned_at", size, alignment, 16));
  }
  mi_heap_delete(h);
}

TEST(Aligned, LargeSizesWithAlignment) {
  // sizes around the small/medium/large/huge boundaries with moderate alignments
  for (size_t alignment : {16, 64, 4096, 65536}) {
    for (size_t size : std::initializer_list<size_t>{1024, 16 * KiB, 64 * KiB + 8, 512 * KiB, 2 * MiB - 8,
                                                     2 * MiB + 8, 5 * MiB}) {
      void* p = mi_malloc_aligned(size, dyn(alignment));
      check_aligned(p, size, alignment, 0, false, where("mi_malloc_aligned", size, alignment, 0));
    }
  }
}

TEST(Aligned, AlignedFreeVariants) {
  for (size_t alignment : all_alignments()) {
    void* p = mi_malloc_aligned(dyn(100), dyn(alignment));
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(is_aligned(p, alignment));
    mi_free_aligned(p, alignment);
    void* q = mi_malloc_aligned(dyn(100), dyn(alignment));
    ASSERT_NE(q, nullptr);
    EXPECT_TRUE(is_aligned(q, alignment));
    mi_free_size_aligned(q, 100, alignment);
  }
  // the memory was really released: a fresh heap no longer sees the blocks
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  mi_heap_t* prev = mi_heap_set_default(h);
  void* p = mi_malloc_aligned(dyn(100), dyn(64));
  void* q = mi_malloc_aligned(dyn(100), dyn(64));
  mi_heap_set_default(prev);
  ASSERT_NE(p, nullptr);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(walk_heap(h).blocks.size(), 2u);
  mi_free_aligned(p, 64);
  mi_free_size_aligned(q, 100, 64);
  EXPECT_EQ(walk_heap(h).blocks.size(), 0u);
  mi_heap_delete(h);
}

// ------------------------------------------------------
// Invalid input
// ------------------------------------------------------

TEST(Aligned, InvalidAlignmentFailsWithEINVAL) {
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  for (size_t bad : {(size_t)0, (size_t)3, (size_t)24, (size_t)48, (size_t)100, (size_t)4097, SIZE_MAX}) {
    const size_t a = dyn(bad);
    const std::string ctx = "alignment " + std::to_string(bad);
#define MI_EXPECT_EINVAL(call)                       \
  do {                                               \
    errno = 0;                                       \
    void* r_ = (call);                               \
    EXPECT_EQ(r_, nullptr) << #call << " " << ctx;   \
    EXPECT_EQ(errno, EINVAL) << #call << " " << ctx; \
    if (r_ != nullptr) mi_free(r_);                  \
  } while (0)
    MI_EXPECT_EINVAL(mi_malloc_aligned(16, a));
    MI_EXPECT_EINVAL(mi_malloc_aligned_at(16, a, 8));
    MI_EXPECT_EINVAL(mi_zalloc_aligned(16, a));
    MI_EXPECT_EINVAL(mi_zalloc_aligned_at(16, a, 8));
    MI_EXPECT_EINVAL(mi_calloc_aligned(2, 8, a));
    MI_EXPECT_EINVAL(mi_calloc_aligned_at(2, 8, a, 8));
    MI_EXPECT_EINVAL(mi_heap_malloc_aligned(h, 16, a));
    MI_EXPECT_EINVAL(mi_heap_malloc_aligned_at(h, 16, a, 8));
    MI_EXPECT_EINVAL(mi_heap_zalloc_aligned(h, 16, a));
    MI_EXPECT_EINVAL(mi_heap_zalloc_aligned_at(h, 16, a, 8));
    MI_EXPECT_EINVAL(mi_heap_calloc_aligned(h, 2, 8, a));
    MI_EXPECT_EINVAL(mi_heap_calloc_aligned_at(h, 2, 8, a, 8));
    MI_EXPECT_EINVAL(mi_memalign(a, 16));
#undef MI_EXPECT_EINVAL
  }
  mi_heap_delete(h);
}

TEST(Aligned, SizeAbovePtrdiffMaxFailsWithEOVERFLOW) {
  const size_t big = too_large_size();
  errno = 0;
  EXPECT_EQ(mi_malloc_aligned(big, dyn(16)), nullptr);
  EXPECT_EQ(errno, EOVERFLOW);
  errno = 0;
  EXPECT_EQ(mi_zalloc_aligned_at(big, dyn(64), dyn(8)), nullptr);
  EXPECT_EQ(errno, EOVERFLOW);
  // count * size overflow
  errno = 0;
  EXPECT_EQ(mi_calloc_aligned(dyn(SIZE_MAX / 2), dyn(3), dyn(16)), nullptr);
  EXPECT_EQ(errno, EOVERFLOW);
  errno = 0;
  EXPECT_EQ(mi_calloc_aligned_at(dyn(SIZE_MAX / 2), dyn(3), dyn(16), dyn(8)), nullptr);
  EXPECT_EQ(errno, EOVERFLOW);
}

TEST(Aligned, ImpossibleSizeFailsWithENOMEM) {
  const size_t big = impossible_size();
  for (size_t alignment : {16, 4096, 1 << 20}) {
    errno = 0;
    EXPECT_EQ(mi_malloc_aligned(big, dyn(alignment)), nullptr) << alignment;
    EXPECT_EQ(errno, ENOMEM) << alignment;
    errno = 0;
    EXPECT_EQ(mi_zalloc_aligned(big, dyn(alignment)), nullptr) << alignment;
    EXPECT_EQ(errno, ENOMEM) << alignment;
  }
}

// ------------------------------------------------------
// Aligned realloc
// ------------------------------------------------------

TEST(Aligned, ReallocAlignedKeepsAlignmentAndContents) {
  for (size_t alignment : std::initializer_list<size_t>{16, 32, 64, 256, 4096, 64 * KiB, 1 * MiB, 4 * MiB}) {
    void* p = mi_malloc_aligned(dyn(100), dyn(alignment));
    ASSERT_NE(p, nullptr);
    fill_pattern(p, 100, 7);
    // grow (moves: 20000 > usable unless the alignment over-allocated a lot)
    p = mi_realloc_aligned(p, dyn(20000), dyn(alignment));
    ASSERT_NE(p, nullptr) << alignment;
    EXPECT_TRUE(is_aligned(p, alignment)) << alignment;
    EXPECT_GE(mi_usable_size(p), 20000u);
    EXPECT_TRUE(has_pattern(p, 100, 7)) << alignment;
    fill_pattern(p, 20000, 8);
    // grow to huge
    p = mi_realloc_aligned(p, dyn(3 * MiB), dyn(alignment));
    ASSERT_NE(p, nullptr) << alignment;
    EXPECT_TRUE(is_aligned(p, alignment)) << alignment;
    EXPECT_GE(mi_usable_size(p), 3 * MiB);
    EXPECT_TRUE(has_pattern(p, 20000, 8)) << alignment;
    fill_bytes((uint8_t*)p + 20000, 0x11, 3 * MiB - 20000);
    // shrink
    p = mi_realloc_aligned(p, dyn(50), dyn(alignment));
    ASSERT_NE(p, nullptr) << alignment;
    EXPECT_TRUE(is_aligned(p, alignment)) << alignment;
    EXPECT_GE(mi_usable_size(p), 50u);
    EXPECT_TRUE(has_pattern(p, 50, 8)) << alignment;
    mi_free(p);
  }
}

TEST(Aligned, ReallocAlignedInPlace) {
  for (size_t alignment : {16, 64, 1024}) {
    void* p = mi_malloc_aligned(dyn(1000), dyn(alignment));
    ASSERT_NE(p, nullptr);
    fill_pattern(p, 1000, 9);
    const size_t usable = mi_usable_size(p);
    // fits, wastes at most half and stays aligned: in place
    void* q = mi_realloc_aligned(p, usable, dyn(alignment));
    EXPECT_EQ(q, p) << alignment;
    const size_t half = (usable + 1) / 2 + 8;
    void* r = mi_realloc_aligned(q, half, dyn(alignment));
    EXPECT_EQ(r, p) << alignment;
    ASSERT_NE(r, nullptr);
    EXPECT_TRUE(has_pattern(r, std::min<size_t>(half, 1000), 9));
    mi_free(r);
  }
}

TEST(Aligned, ReallocAlignedAtKeepsOffsetAlignment) {
  for (size_t alignment : std::initializer_list<size_t>{16, 64, 4096, 1 * MiB}) {
    for (size_t offset : {8, 16, 48}) {
      void* p = mi_malloc_aligned_at(dyn(64), dyn(alignment), dyn(offset));
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(((uintptr_t)opaque(p) + offset) % alignment, 0u);
      fill_pattern(p, 64, 10);
      p = mi_realloc_aligned_at(p, dyn(10000), dyn(alignment), dyn(offset));
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(((uintptr_t)opaque(p) + offset) % alignment, 0u) << alignment << "/" << offset;
      EXPECT_GE(mi_usable_size(p), 10000u);
      EXPECT_TRUE(has_pattern(p, 64, 10));
      p = mi_realloc_aligned_at(p, dyn(40), dyn(alignment), dyn(offset));
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(((uintptr_t)opaque(p) + offset) % alignment, 0u) << alignment << "/" << offset;
      EXPECT_TRUE(has_pattern(p, 40, 10));
      mi_free(p);
    }
  }
}

TEST(Aligned, ReallocAlignedOfNullAllocates) {
  void* p = mi_realloc_aligned(nullptr, dyn(300), dyn(128));
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(is_aligned(p, 128));
  EXPECT_GE(mi_usable_size(p), 300u);
  mi_free(p);
  void* q = mi_realloc_aligned_at(nullptr, dyn(300), dyn(128), dyn(16));
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(((uintptr_t)opaque(q) + 16) % 128, 0u);
  mi_free(q);
}

TEST(Aligned, ReallocAlignedFailureKeepsBlock) {
  void* p = mi_malloc_aligned(dyn(200), dyn(64));
  ASSERT_NE(p, nullptr);
  fill_pattern(p, 200, 11);
  errno = 0;
  EXPECT_EQ(mi_realloc_aligned(p, impossible_size(), dyn(64)), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(mi_realloc_aligned_at(p, too_large_size(), dyn(64), dyn(0)), nullptr);
  EXPECT_EQ(errno, EOVERFLOW);
  EXPECT_TRUE(has_pattern(p, 200, 11));
  EXPECT_GE(mi_usable_size(p), 200u);
  mi_free(p);
}

TEST(Aligned, HeapReallocAligned) {
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  // from the default heap. (Start aligned: the non-_at realloc keeps the block's
  // current misalignment as its offset, as in mimalloc 1.6.)
  void* p = mi_malloc_aligned(dyn(100), dyn(256));
  ASSERT_NE(p, nullptr);
  ASSERT_FALSE(mi_heap_contains_block(h, p));
  fill_pattern(p, 100, 12);
  void* q = mi_heap_realloc_aligned(h, p, dyn(5000), dyn(256));
  ASSERT_NE(q, nullptr);
  EXPECT_TRUE(is_aligned(q, 256));
  EXPECT_TRUE(mi_heap_contains_block(h, q));  // moved into h
  EXPECT_TRUE(has_pattern(q, 100, 12));
  void* r = mi_heap_realloc_aligned_at(h, q, dyn(40000), dyn(512), dyn(32));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(((uintptr_t)opaque(r) + 32) % 512, 0u);
  EXPECT_TRUE(mi_heap_contains_block(h, r));
  EXPECT_TRUE(has_pattern(r, 100, 12));
  mi_free(r);
  mi_heap_delete(h);
}
