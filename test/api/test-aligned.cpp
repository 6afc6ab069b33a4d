/* ----------------------------------------------------------------------------
  test-aligned.cpp -- API tests: aligned allocation.

  Every power-of-two alignment from 1 byte to 16 MiB must work for every
  aligned entry point (plain, zeroed, calloc, `_at` with offsets, heap
  versions): the pointer (plus offset) is aligned, the usable size covers the
  request and is sane, the whole usable area is writable, and the block can be
  freed. 1.6.7 broke for alignments >= 4 MiB (wrong segment lookup on free);
  we promise they work. Invalid alignments fail with EINVAL. A grid of every
  alignment from 16 bytes to 64 MiB, offsets at the edges (1, 15, alignment
  - 1, alignment + 5, SIZE_MAX, ...) and sizes up to a huge block goes through
  every aligned entry point: each pointer returned is freeable, has its usable
  size, and the freed memory is no longer committed; the only failures allowed
  are the offsets no segment can serve (EINVAL).
-----------------------------------------------------------------------------*/
#include <gtest/gtest.h>
#include <mimalloc.h>

#include <algorithm>
#include <cstdio>
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

// ------------------------------------------------------
// Every alignment at every kind of offset, through every entry point
// ------------------------------------------------------

// Alignments above half a segment get a segment of their own, and free finds
// a segment by masking the pointer to its 4 MiB unit (or, for a pointer at a
// unit's start, one unit below): a pointer cannot lie just past a unit's start,
// where that segment's header would have to be. With such an alignment, an
// offset that puts the pointer 1 byte to a header's size (less than 64 KiB,
// guard page included) past a unit's start can be refused, with EINVAL; every
// other request must succeed.
namespace {

constexpr size_t kUnit = 4 * MiB;                 // a segment unit
constexpr size_t kHeaderBound = 64 * KiB;         // more than any segment header

bool may_refuse(size_t alignment, size_t offset) {
  if (alignment <= kUnit / 2) return false;
  const size_t in_unit = (0 - offset) & (kUnit - 1);   // where the pointer lies in its unit
  return in_unit != 0 && in_unit < kHeaderBound;
}

size_t committed_now() {
  size_t commit = 0;
  mi_process_info(nullptr, nullptr, nullptr, nullptr, nullptr, &commit, nullptr, nullptr);
  return commit;
}

std::vector<size_t> grid_offsets(size_t a) {
  return {0, 1, 15, 16, a - 1, a - 5, a + 5, SIZE_MAX, SIZE_MAX - 4, SIZE_MAX - a + 1};
}

constexpr unsigned kSeed = 21;
constexpr size_t kOldSize = 24;              // the block an aligned realloc starts from
constexpr size_t kInherit = SIZE_MAX - 42;   // the offset of the non-_at reallocs: the old block's p % alignment

struct GridCount {
  size_t blocks = 0;
  size_t refused = 0;
};

// One result: NULL only where allowed (EINVAL), else aligned, ours (`heap`'s
// when it is word-aligned), at least `size` usable bytes, zeroed if asked,
// writable; then freed.
void check_grid_block(void* p, int err, mi_heap_t* heap, size_t size, size_t alignment, size_t offset, bool zeroed,
                      const std::string& ctx, GridCount& count) {
  if (p == nullptr) {
    EXPECT_TRUE(may_refuse(alignment, offset)) << ctx << ": failed with errno " << err;
    EXPECT_EQ(err, EINVAL) << ctx;
    count.refused++;
    return;
  }
  count.blocks++;
  uint8_t* b = opaque((uint8_t*)p);
  const size_t usable = mi_usable_size(b);   // (before the block is written)
  EXPECT_EQ(((uintptr_t)b + offset) % alignment, 0u) << ctx;
  EXPECT_GE(usable, size) << ctx << " at " << p;
  EXPECT_TRUE(mi_is_in_heap_region(b)) << ctx << " at " << p;
  if ((uintptr_t)b % sizeof(void*) == 0) {
    EXPECT_TRUE(mi_heap_check_owned(heap, b)) << ctx << " at " << p;
  }
  if (usable >= size && size > 0) {
    const size_t head = std::min<size_t>(size, 4096);
    if (zeroed) {
      EXPECT_TRUE(is_zero(b, head) && is_zero(b + size - head, head)) << ctx << ": not zeroed";
    }
    fill_pattern(b, head, kSeed);
    b[size - 1] = 0x5A;
    EXPECT_TRUE(has_pattern(b, std::min(head, size - 1), kSeed)) << ctx;
  }
  mi_free(b);
}

// An aligned realloc of a small block: its contents move, or it stays intact
// when the request is refused.
template <typename F>
void check_grid_realloc(F realloc_fn, mi_heap_t* heap, size_t size, size_t alignment, size_t offset, bool zeroed,
                        const std::string& ctx, GridCount& count) {
  void* old = (heap == nullptr ? mi_malloc(kOldSize) : mi_heap_malloc(heap, kOldSize));
  ASSERT_NE(old, nullptr);
  fill_pattern(old, kOldSize, kSeed + 1);
  const size_t old_usable = mi_usable_size(old);
  const size_t off = (offset == kInherit ? (uintptr_t)old % alignment : offset);
  errno = 0;
  void* p = realloc_fn(old, off);
  const int err = errno;
  if (p == nullptr) {
    EXPECT_TRUE(has_pattern(old, kOldSize, kSeed + 1)) << ctx << ": a refused realloc changed the block";
    mi_free(old);
    check_grid_block(p, err, heap, size, alignment, off, false, ctx, count);
    return;
  }
  const size_t kept = std::min(size, kOldSize);
  EXPECT_TRUE(has_pattern(p, kept, kSeed + 1)) << ctx << ": contents not kept";
  if (zeroed && size > old_usable) {
    EXPECT_TRUE(is_zero((uint8_t*)p + old_usable, std::min<size_t>(size - old_usable, 4096))) << ctx << ": grown part not zeroed";
  }
  check_grid_block(p, err, (heap == nullptr ? mi_heap_get_default() : heap), size, alignment, off, false, ctx, count);
}

}  // namespace

TEST(Aligned, EveryAlignmentOffsetAndSizeIsFreeable) {
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  mi_heap_t* const d = mi_heap_get_default();
  GridCount count;
  mi_collect(true);
  const size_t commit_before = committed_now();
  const size_t sizes[] = {0, 1, 100, 5000, kHugeThreshold + 16};
  const size_t nsizes = sizeof(sizes) / sizeof(sizes[0]);
  for (size_t a = 16; a <= 64 * MiB; a *= 2) {
    const size_t al = dyn(a);
    const std::vector<size_t> offsets = grid_offsets(a);
    for (size_t si = 0; si < nsizes; si++) {
      const size_t size = sizes[si];
      const size_t sz = dyn(size);
      for (size_t oi = 0; oi < offsets.size(); oi++) {
        const size_t offset = offsets[oi];
        const size_t off = dyn(offset);
        auto ctx = [&](const char* fn) { return where(fn, size, a, offset); };
#define MI_GRID(call, heap, off_, zeroed, fn)                                          \
  do {                                                                                 \
    errno = 0;                                                                         \
    void* p_ = (call);                                                                 \
    check_grid_block(p_, errno, heap, size, a, off_, zeroed, ctx(fn), count);          \
  } while (0)
        // mi_malloc_aligned_at, where the other forms end up, sees the whole
        // grid; each other form every alignment and offset, with the sizes in
        // turn over the offsets (so it sees each size too): the debug builds
        // check the whole fill of every over-allocated block on free, which
        // made the whole grid of every form take a minute under TSan
        MI_GRID(mi_malloc_aligned_at(sz, al, off), d, offset, false, "mi_malloc_aligned_at");
        if ((oi + si) % nsizes != 0) continue;
        MI_GRID(mi_zalloc_aligned_at(sz, al, off), d, offset, true, "mi_zalloc_aligned_at");
        MI_GRID(mi_calloc_aligned_at(1, sz, al, off), d, offset, true, "mi_calloc_aligned_at");
        MI_GRID(mi_heap_malloc_aligned_at(h, sz, al, off), h, offset, false, "mi_heap_malloc_aligned_at");
        MI_GRID(mi_heap_zalloc_aligned_at(h, sz, al, off), h, offset, true, "mi_heap_zalloc_aligned_at");
        MI_GRID(mi_heap_calloc_aligned_at(h, 1, sz, al, off), h, offset, true, "mi_heap_calloc_aligned_at");
        MI_GRID(mi_realloc_aligned_at(nullptr, sz, al, off), d, offset, false, "mi_realloc_aligned_at(NULL)");
        check_grid_realloc([&](void* p, size_t o) { return mi_realloc_aligned_at(p, sz, al, o); }, nullptr, size, a, offset, false,
                           ctx("mi_realloc_aligned_at"), count);
        check_grid_realloc([&](void* p, size_t o) { return mi_rezalloc_aligned_at(p, sz, al, o); }, nullptr, size, a, offset, true,
                           ctx("mi_rezalloc_aligned_at"), count);
        check_grid_realloc([&](void* p, size_t o) { return mi_recalloc_aligned_at(p, 1, sz, al, o); }, nullptr, size, a, offset, true,
                           ctx("mi_recalloc_aligned_at"), count);
        check_grid_realloc([&](void* p, size_t o) { return mi_aligned_offset_recalloc(p, 1, sz, al, o); }, nullptr, size, a, offset, true,
                           ctx("mi_aligned_offset_recalloc"), count);
        check_grid_realloc([&](void* p, size_t o) { return mi_heap_realloc_aligned_at(h, p, sz, al, o); }, h, size, a, offset, false,
                           ctx("mi_heap_realloc_aligned_at"), count);
        check_grid_realloc([&](void* p, size_t o) { return mi_heap_rezalloc_aligned_at(h, p, sz, al, o); }, h, size, a, offset, true,
                           ctx("mi_heap_rezalloc_aligned_at"), count);
        check_grid_realloc([&](void* p, size_t o) { return mi_heap_recalloc_aligned_at(h, p, 1, sz, al, o); }, h, size, a, offset, true,
                           ctx("mi_heap_recalloc_aligned_at"), count);
      }
      // the forms without an offset (0; the reallocs keep the old block's p % alignment)
      auto ctx = [&](const char* fn) { return where(fn, size, a, 0); };
      MI_GRID(mi_malloc_aligned(sz, al), d, 0, false, "mi_malloc_aligned");
      MI_GRID(mi_zalloc_aligned(sz, al), d, 0, true, "mi_zalloc_aligned");
      MI_GRID(mi_calloc_aligned(1, sz, al), d, 0, true, "mi_calloc_aligned");
      MI_GRID(mi_heap_malloc_aligned(h, sz, al), h, 0, false, "mi_heap_malloc_aligned");
      MI_GRID(mi_heap_zalloc_aligned(h, sz, al), h, 0, true, "mi_heap_zalloc_aligned");
      MI_GRID(mi_heap_calloc_aligned(h, 1, sz, al), h, 0, true, "mi_heap_calloc_aligned");
      MI_GRID(mi_memalign(al, sz), d, 0, false, "mi_memalign");
      MI_GRID(mi_new_aligned(sz, al), d, 0, false, "mi_new_aligned");
      MI_GRID(mi_new_aligned_nothrow(sz, al), d, 0, false, "mi_new_aligned_nothrow");
      const size_t multiple = (size + a - 1) / a * a;   // (C11 aligned_alloc: a multiple of the alignment)
      if (multiple <= 4 * MiB) MI_GRID(mi_aligned_alloc(al, dyn(multiple)), d, 0, false, "mi_aligned_alloc");
      void* pm = nullptr;
      const int pm_err = mi_posix_memalign(&pm, al, sz);
      EXPECT_EQ(pm_err, 0) << ctx("mi_posix_memalign");
      check_grid_block(pm, pm_err, d, size, a, 0, false, ctx("mi_posix_memalign"), count);
#undef MI_GRID
      check_grid_realloc([&](void* p, size_t) { return mi_realloc_aligned(p, sz, al); }, nullptr, size, a, kInherit, false,
                         ctx("mi_realloc_aligned"), count);
      check_grid_realloc([&](void* p, size_t) { return mi_rezalloc_aligned(p, sz, al); }, nullptr, size, a, kInherit, true,
                         ctx("mi_rezalloc_aligned"), count);
      check_grid_realloc([&](void* p, size_t) { return mi_aligned_recalloc(p, 1, sz, al); }, nullptr, size, a, kInherit, true,
                         ctx("mi_aligned_recalloc"), count);
      check_grid_realloc([&](void* p, size_t) { return mi_heap_realloc_aligned(h, p, sz, al); }, h, size, a, kInherit, false,
                         ctx("mi_heap_realloc_aligned"), count);
    }
  }
  mi_heap_delete(h);
  mi_collect(true);
  const size_t commit_after = committed_now();
  printf("%zu blocks, %zu refused; committed %.1f MiB before, %.1f MiB after\n", count.blocks, count.refused,
         commit_before / (double)MiB, commit_after / (double)MiB);
  EXPECT_LE(commit_after, commit_before + 16 * MiB) << "the freed blocks stay committed";
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
