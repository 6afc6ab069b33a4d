/* ----------------------------------------------------------------------------
  test-large.cpp -- API tests: large blocks (128 KiB - 2 MiB), and medium
  ones (16 - 128 KiB) where they share the large blocks' segments.

  Each large block is a page of its own: a run of 64 KiB slices of a 4 MiB
  segment that blocks of every large size and every thread share
  (docs/design.md, "Large blocks" and "Shared large segments"). What a user
  relies on: blocks of different sizes do not each hold a segment of their
  own, memory a freed block held serves the next one of any size and of any
  thread (while it is still resident), a block whose thread ended goes back
  when another thread frees it, and a pointer anywhere inside a large block
  (an aligned allocation's, or one into its later slices) is known as that
  block's by every call that takes one. Medium blocks live in pages of a few
  blocks in the same segments: a page a thread left with blocks in use when
  it ended serves the next thread that needs blocks of that size (but never
  a heap that may be destroyed with its pages).
-----------------------------------------------------------------------------*/
#include <gtest/gtest.h>
#include <mimalloc.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "api-util.h"

using namespace mitest;

namespace {

constexpr uintptr_t kSegment = 4 * MiB;

uintptr_t segment_of(const void* p) {
  return reinterpret_cast<uintptr_t>(p) & ~(kSegment - 1);
}

// Runs `f` on a thread of its own: its heap starts without large segments.
template <typename F>
void on_fresh_thread(F f) {
  std::thread t(f);
  t.join();
}

}  // namespace

TEST(Large, BlocksOfDifferentSizesShareASegment) {
  on_fresh_thread([] {
    // eight large size classes, 2.5 MiB in all: one segment holds them
    // (a page per size class took a 4 MiB segment each)
    const size_t sizes[] = {130 * KiB, 160 * KiB, 200 * KiB, 250 * KiB,
                            300 * KiB, 400 * KiB, 500 * KiB, 600 * KiB};
    std::vector<void*> blocks;
    std::set<uintptr_t> segments;
    for (size_t size : sizes) {
      void* p = opaque(mi_malloc(dyn(size)));
      ASSERT_NE(p, nullptr);
      fill_pattern(p, size, (uint8_t)size);
      blocks.push_back(p);
      segments.insert(segment_of(p));
    }
    // (a segment another thread abandoned with room in it may take the first ones)
    EXPECT_LE(segments.size(), 2u);
    for (size_t i = 0; i < blocks.size(); i++) {
      EXPECT_TRUE(has_pattern(blocks[i], sizes[i], (uint8_t)sizes[i]));
      mi_free(blocks[i]);
    }
  });
}

TEST(Large, AFreedBlocksSlicesServeBlocksOfOtherSizes) {
  on_fresh_thread([] {
    void* big = opaque(mi_malloc(dyn(1 * MiB)));
    void* keep = opaque(mi_malloc(dyn(256 * KiB)));   // keeps the segment in use
    ASSERT_NE(big, nullptr);
    ASSERT_NE(keep, nullptr);
    // the slices the 1 MiB block took: its size class (up to a quarter more
    // than 1 MiB) and what rounds it up to slices (secure builds place a run
    // that fits at the end of such a run, where its guard is in place)
    const uintptr_t lo = reinterpret_cast<uintptr_t>(big);
    const uintptr_t hi = lo + MiB + MiB / 4 + 64 * KiB;
    mi_free(big);
    mi_collect(false);   // (the emptied page goes back to its segment now, not after a few allocations)
    void* a = opaque(mi_malloc(dyn(400 * KiB)));
    void* b = opaque(mi_malloc(dyn(500 * KiB)));
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    // both are carved from the slices the 1 MiB block left (still resident: they come first)
    for (void* p : {a, b}) {
      const uintptr_t u = reinterpret_cast<uintptr_t>(p);
      EXPECT_EQ(segment_of(p), segment_of(big));
      EXPECT_GE(u, segment_of(big));
      EXPECT_LE(u + 400 * KiB, hi);
    }
    fill_pattern(a, 400 * KiB, 1);
    fill_pattern(b, 500 * KiB, 2);
    EXPECT_TRUE(has_pattern(a, 400 * KiB, 1));
    EXPECT_TRUE(has_pattern(b, 500 * KiB, 2));
    mi_free(a);
    mi_free(b);
    mi_free(keep);
  });
}

// Keeps freed memory resident while a test runs (restored when it ends).
struct LongPurgeDelay {
  long saved = mi_option_get(mi_option_reset_delay);
  LongPurgeDelay() { mi_option_set(mi_option_reset_delay, 60000); }
  ~LongPurgeDelay() { mi_option_set(mi_option_reset_delay, saved); }
};

TEST(Large, BlocksOfAThreadThatEndedGoBackWhenAnotherThreadFreesThem) {
  LongPurgeDelay delay;
  constexpr size_t n = 6, size = 700 * KiB;
  std::vector<void*> blocks;
  std::set<uintptr_t> theirs;
  on_fresh_thread([&] {
    for (size_t i = 0; i < n; i++) {
      void* p = opaque(mi_malloc(dyn(size)));
      fill_pattern(p, size, (uint8_t)i);
      blocks.push_back(p);
      theirs.insert(segment_of(p));
    }
  });
  // the thread ended with its blocks in use: they are freed here
  for (size_t i = 0; i < n; i++) {
    EXPECT_TRUE(has_pattern(blocks[i], size, (uint8_t)i));
    mi_free(blocks[i]);
  }
  on_fresh_thread([&] {
    size_t inside = 0;
    std::vector<void*> again;
    for (size_t i = 0; i < n; i++) {
      void* p = opaque(mi_malloc(dyn(size)));
      ASSERT_NE(p, nullptr);
      fill_pattern(p, size, (uint8_t)(i + 100));
      if (theirs.count(segment_of(p)) != 0) inside++;
      again.push_back(p);
    }
    EXPECT_GE(inside, n - 1) << "the freed blocks' slices serve the next thread";
    for (size_t i = 0; i < n; i++) {
      EXPECT_TRUE(has_pattern(again[i], size, (uint8_t)(i + 100)));
      mi_free(again[i]);
    }
  });
}

// A thread ends with a block in use, and room in its page: the next thread
// that allocates blocks of that size takes the page over (within a few pages:
// others of the size may have waited longer), not a heap that may be
// destroyed, and the block survives both. (Pages of small and medium blocks
// are slices of segments no thread owns. A thread's first page of a medium
// size holds one block, its second two or more: the kept block is the
// thread's third of the size, in a page where the second leaves room.)
static void expect_the_next_thread_adopts_the_page(size_t size) {
  LongPurgeDelay delay;
  void* kept = nullptr;
  on_fresh_thread([&] {
    void* first = opaque(mi_malloc(dyn(size)));
    void* second = opaque(mi_malloc(dyn(size)));
    kept = opaque(mi_malloc(dyn(size)));
    fill_pattern(kept, size, 7);
    mi_free(first);
    mi_free(second);
  });
  ASSERT_NE(kept, nullptr);
  on_fresh_thread([&] {
    mi_heap_t* h = mi_heap_new();
    ASSERT_NE(h, nullptr);
    std::vector<void*> own;
    for (size_t i = 0; i < 16; i++) {
      own.push_back(mi_heap_malloc(h, dyn(size)));
      EXPECT_FALSE(mi_heap_contains_block(h, kept)) << "a heap that may be destroyed took another thread's page";
    }
    mi_heap_destroy(h);
    EXPECT_TRUE(has_pattern(kept, size, 7));
    mi_heap_t* const heap = mi_heap_get_default();
    EXPECT_FALSE(mi_heap_contains_block(heap, kept));
    std::vector<void*> again;
    const size_t tries = 16 * (64 * KiB / size + 1);   // (sixteen pages' worth)
    for (size_t i = 0; i < tries && !mi_heap_contains_block(heap, kept); i++) {
      again.push_back(opaque(mi_malloc(dyn(size))));
      fill_pattern(again.back(), size, (uint8_t)i);
    }
    EXPECT_TRUE(mi_heap_contains_block(heap, kept)) << "the page of the ended thread's block was not taken over";
    for (size_t i = 0; i < again.size(); i++) {
      EXPECT_TRUE(has_pattern(again[i], size, (uint8_t)i));
      mi_free(again[i]);
    }
  });
  EXPECT_TRUE(has_pattern(kept, size, 7));
  mi_free(kept);
}

// A thread that uses a medium size for a block or two does not hold a run of
// slices sized for four (resident, when earlier pages touched its slices):
// its first page of the size has room for one block (or as many as its one
// slice holds), its second for two or more; a thread that uses the size a
// lot soon gets pages of four, which keep it from claiming a page under the
// shared lock for every block.
TEST(Medium, AThreadsFirstPagesOfASizeAreSmallItsLaterOnesHoldFour) {
  on_fresh_thread([] {
    const size_t size = 44 * KiB;   // (a size no other test uses: no abandoned page of it to adopt)
    std::vector<void*> blocks;
    for (size_t i = 0; i < 12; i++) {
      blocks.push_back(opaque(mi_malloc(dyn(size))));
      ASSERT_NE(blocks.back(), nullptr);
      fill_pattern(blocks.back(), size, (uint8_t)i);
    }
    std::vector<size_t> room;   // blocks each page of the size has room for
    auto visit = [](const mi_heap_t*, const mi_heap_area_t* area, void*, size_t, void* arg) {
      if (area->block_size >= 44 * KiB && area->block_size <= 48 * KiB + 64) {
        static_cast<std::vector<size_t>*>(arg)->push_back(area->reserved / area->block_size);
      }
      return true;
    };
    EXPECT_TRUE(mi_heap_visit_blocks(mi_heap_get_default(), false, visit, &room));
    ASSERT_GE(room.size(), 3u);
    size_t least = SIZE_MAX, most = 0, all = 0;
    for (size_t n : room) { least = std::min(least, n); most = std::max(most, n); all += n; }
    EXPECT_EQ(least, 1u) << "the thread's first page of the size holds more than one block";
    EXPECT_GE(most, 4u) << "a thread that uses the size a lot gets no pages of four";
    EXPECT_GE(all, blocks.size());
    for (size_t i = 0; i < blocks.size(); i++) {
      EXPECT_TRUE(has_pattern(blocks[i], size, (uint8_t)i));
      mi_free(blocks[i]);
    }
  });
}

// A thread that uses a small size for a few blocks (most sizes, in programs
// whose threads each do a short task) does not hold a page of 64 KiB for
// them: its first page of a small size (blocks up to 16 KiB) is a lean page,
// a slice of 16 KiB (two where one block does not fit one) of a segment of
// such slices that takes 1 MiB of its 4 MiB unit (the rest is no block's:
// not in the heap region); its later pages of the size are 64 KiB. Secure
// builds, whose pages end in guard pages, keep pages of 64 KiB. (Except the
// first slice of a segment, which holds the header: its blocks start after
// it, at a multiple of their size, so that of 14 KiB blocks it may hold two,
// 28 KiB. A thread's first page of a size is that one when the thread is the
// first to use a segment, as in the Windows test program, whose own
// allocations are the C runtime's: secure builds measure the other pages.)
static void expect_a_lean_first_page(size_t size, size_t count) {
  on_fresh_thread([=] {
    std::vector<void*> blocks;
    for (size_t i = 0; i < count; i++) {
      blocks.push_back(opaque(mi_malloc(dyn(size))));
      ASSERT_NE(blocks.back(), nullptr);
      fill_pattern(blocks.back(), size, (uint8_t)i);
    }
    struct areas_t { size_t size; std::vector<size_t> bytes; std::vector<uintptr_t> starts; } areas = { size, {}, {} };
    auto visit = [](const mi_heap_t*, const mi_heap_area_t* area, void*, size_t, void* arg) {
      areas_t* const a = static_cast<areas_t*>(arg);   // (the size class: at most an eighth larger, and debug padding)
      if (area->block_size >= a->size && area->block_size <= a->size + a->size / 8 + 64) {
        a->bytes.push_back(area->reserved);
        a->starts.push_back(reinterpret_cast<uintptr_t>(area->blocks));
      }
      return true;
    };
    EXPECT_TRUE(mi_heap_visit_blocks(mi_heap_get_default(), false, visit, &areas));
    ASSERT_GE(areas.bytes.size(), 2u);
    const size_t least = *std::min_element(areas.bytes.begin(), areas.bytes.end());
    const size_t most = *std::max_element(areas.bytes.begin(), areas.bytes.end());
    const size_t lean_max = (size <= 8 * KiB ? 16 * KiB : 32 * KiB);
#if defined(MI_TEST_SECURE) && (MI_TEST_SECURE >= 1)
    size_t least_past_header = SIZE_MAX;   // (pages not in a segment's first slice)
    for (size_t i = 0; i < areas.bytes.size(); i++) {
      if (areas.starts[i] % kSegment >= 64 * KiB) least_past_header = std::min(least_past_header, areas.bytes[i]);
    }
    ASSERT_NE(least_past_header, SIZE_MAX) << "every page of the size is a segment's first";
    EXPECT_GT(least_past_header, 32 * KiB) << "a secure build's page is smaller than 64 KiB";
    (void)least;
    (void)lean_max;
#else
    EXPECT_LE(least, lean_max) << "the thread's first page of the size is not a lean page";
    EXPECT_EQ(std::count_if(areas.bytes.begin(), areas.bytes.end(), [=](size_t a) { return a <= lean_max; }), 1)
        << "more than one lean page of the size";
    const uintptr_t lean = segment_of(blocks[0]);
    EXPECT_TRUE(mi_is_in_heap_region(reinterpret_cast<void*>(lean + 512 * KiB)));
    EXPECT_FALSE(mi_is_in_heap_region(reinterpret_cast<void*>(lean + 2 * MiB)))
        << "the unused rest of a lean segment's unit counts as the heap's";
#endif
    EXPECT_GT(most, 32 * KiB) << "a thread that uses the size a lot gets no page of 64 KiB";
    for (size_t i = 0; i < blocks.size(); i++) {
      EXPECT_TRUE(has_pattern(blocks[i], size, (uint8_t)i));
      mi_free(blocks[i]);
    }
  });
}

// (sizes no other test uses: no abandoned page of them to adopt)
TEST(Small, AThreadsFirstPageOfASizeIsLeanItsLaterOnesAreNot) {
  expect_a_lean_first_page(680, 300);
  expect_a_lean_first_page(12 * KiB + 512, 24);
}

TEST(Medium, APageAThreadLeftServesTheNextThreadsBlocksOfItsSize) {
  expect_the_next_thread_adopts_the_page(40 * KiB);
}

TEST(Small, APageAThreadLeftServesTheNextThreadsBlocksOfItsSize) {
  expect_the_next_thread_adopts_the_page(1000);
  expect_the_next_thread_adopts_the_page(48);
}

// Large blocks change hands under one process-wide lock whose waiters sleep
// once they have yielded a few times: many threads allocating and freeing
// large blocks at once (more threads than cores, blocks passed on to be freed
// by other threads) each get blocks of their own, and none waits forever.
TEST(Large, ManyThreadsAllocatingAtOnceEachGetBlocksOfTheirOwn) {
  constexpr size_t threads = 8, rounds = 1500, slots = 16;
  std::atomic<uintptr_t> passed[slots];
  for (auto& s : passed) s.store(0);
  std::atomic<size_t> failed{0}, bad{0};
  // a block holds its size in its first word, and its address and size in
  // its middle and last words
  auto mark = [](uint8_t* p, size_t size) {
    const uint64_t w = (uint64_t)(uintptr_t)p ^ size;
    std::memcpy(p, &size, 8);
    std::memcpy(p + (size / 2 & ~(size_t)7), &w, 8);
    std::memcpy(p + size - 8, &w, 8);
  };
  auto check_free = [&](uint8_t* p) {
    size_t size;
    std::memcpy(&size, p, 8);
    const uint64_t w = (uint64_t)(uintptr_t)p ^ size;
    uint64_t mid, last;
    std::memcpy(&mid, p + (size / 2 & ~(size_t)7), 8);
    std::memcpy(&last, p + size - 8, 8);
    if (mid != w || last != w) bad++;
    mi_free(p);
  };
  std::vector<std::thread> ts;
  for (size_t t = 0; t < threads; t++) {
    ts.emplace_back([&, t] {
      uint64_t r = 0x9E3779B97F4A7C15ull * (t + 1);
      for (size_t i = 0; i < rounds; i++) {
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        const size_t size = (128 + (size_t)(r % 1900)) * KiB;   // 128 KiB - 2 MiB
        uint8_t* p = (uint8_t*)opaque(mi_malloc(dyn(size)));
        if (p == nullptr) { failed++; continue; }
        mark(p, size);
        // pass it on; free what another thread passed on
        const uintptr_t old = passed[(size_t)(r >> 40) % slots].exchange((uintptr_t)p);
        if (old != 0) check_free((uint8_t*)old);
      }
    });
  }
  for (auto& th : ts) th.join();
  for (auto& s : passed) {
    if (s.load() != 0) check_free((uint8_t*)s.load());
  }
  EXPECT_EQ(failed.load(), 0u);
  EXPECT_EQ(bad.load(), 0u) << "a block was handed out while another held it";
}

TEST(Large, PointersIntoLaterSlicesBelongToTheirBlock) {
  mi_heap_t* heap = mi_heap_get_default();
  std::vector<void*> blocks;
  for (size_t i = 0; i < 16; i++) {
    const size_t size = 300 * KiB + i * 37 * KiB;
    void* p = opaque(mi_malloc(dyn(size)));
    ASSERT_NE(p, nullptr);
    blocks.push_back(p);
    // any byte of the block, in every slice it spans
    for (size_t ofs = 0; ofs < size; ofs += 16 * KiB) {
      const uint8_t* q = static_cast<uint8_t*>(p) + ofs;
      EXPECT_TRUE(mi_heap_check_owned(heap, q)) << "offset " << ofs << " of " << size;
      EXPECT_TRUE(mi_check_owned(q));
    }
    EXPECT_TRUE(mi_heap_contains_block(heap, p));
  }
  for (void* p : blocks) mi_free(p);
}

TEST(Large, AlignedBlocksThatStartInALaterSliceAreFreedFromAnyThread) {
  // an alignment of 256 KiB puts the pointer handed out up to 192 KiB into
  // the block: often in a later slice than the block's first
  std::vector<void*> blocks;
  for (size_t i = 0; i < 24; i++) {
    const size_t size = 200 * KiB + i * 29 * KiB;
    void* p = opaque(mi_malloc_aligned(dyn(size), dyn(256 * KiB)));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (256 * KiB), 0u);
    EXPECT_GE(mi_usable_size(p), size);
    EXPECT_TRUE(mi_heap_contains_block(mi_heap_get_default(), p));
    fill_pattern(p, size, (uint8_t)i);
    blocks.push_back(p);
  }
  // half freed here, half by another thread while this one lives
  std::vector<void*> theirs;
  for (size_t i = 0; i < blocks.size(); i++) {
    const size_t size = 200 * KiB + i * 29 * KiB;
    EXPECT_TRUE(has_pattern(blocks[i], size, (uint8_t)i));
    if (i % 2 == 0) mi_free(blocks[i]);
    else theirs.push_back(blocks[i]);
  }
  std::thread t([&] { for (void* p : theirs) mi_free(p); });
  t.join();
  // the slices are usable again (the remote frees reach this heap on its next allocations)
  for (size_t i = 0; i < 8; i++) {
    void* p = opaque(mi_malloc(dyn(700 * KiB)));
    ASSERT_NE(p, nullptr);
    fill_pattern(p, 700 * KiB, 9);
    EXPECT_TRUE(has_pattern(p, 700 * KiB, 9));
    mi_free(p);
  }
}
