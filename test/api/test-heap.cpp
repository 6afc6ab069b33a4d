/* ----------------------------------------------------------------------------
  test-heap.cpp -- API tests: first-class heaps.

  mi_heap_new / delete / destroy / set_default / get_default / get_backing /
  collect and every mi_heap_ allocation function. Deleting a heap keeps its
  blocks valid (they migrate to the backing heap); destroying it frees all its
  blocks at once without touching other heaps.
-----------------------------------------------------------------------------*/
#include <gtest/gtest.h>
#include <mimalloc.h>

#include <climits>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api-util.h"

using namespace mitest;

// ------------------------------------------------------
// Creating heaps and the default heap
// ------------------------------------------------------

TEST(Heap, NewHeapsAreDistinct) {
  mi_heap_t* backing = mi_heap_get_backing();
  ASSERT_NE(backing, nullptr);
  mi_heap_t* a = mi_heap_new();
  mi_heap_t* b = mi_heap_new();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  EXPECT_NE(a, backing);
  EXPECT_NE(b, backing);
  EXPECT_NE(a, mi_heap_get_default());
  // a new heap is empty
  HeapWalk w = walk_heap(a);
  EXPECT_TRUE(w.blocks.empty());
  mi_heap_delete(a);
  mi_heap_delete(b);
}

TEST(Heap, BackingHeapIsStableAndInitiallyDefault) {
  mi_heap_t* backing = mi_heap_get_backing();
  ASSERT_NE(backing, nullptr);
  EXPECT_EQ(mi_heap_get_backing(), backing);
  EXPECT_EQ(mi_heap_get_default(), backing);  // no test leaves another default behind
  void* p = mi_malloc(dyn(100));
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(mi_heap_contains_block(backing, p));
  mi_free(p);
}

TEST(Heap, SetDefaultRedirectsMalloc) {
  mi_heap_t* backing = mi_heap_get_backing();
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  mi_heap_t* prev = mi_heap_set_default(h);
  EXPECT_EQ(prev, backing);
  EXPECT_EQ(mi_heap_get_default(), h);
  EXPECT_EQ(mi_heap_get_backing(), backing);  // the backing heap does not change
  void* p = mi_malloc(dyn(100));
  void* q = mi_zalloc(dyn(5000));
  void* r = mi_calloc(dyn(3), dyn(1000));
  mi_heap_t* back = mi_heap_set_default(prev);
  EXPECT_EQ(back, h);
  EXPECT_EQ(mi_heap_get_default(), backing);
  ASSERT_NE(p, nullptr);
  ASSERT_NE(q, nullptr);
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(mi_heap_contains_block(h, p));
  EXPECT_TRUE(mi_heap_contains_block(h, q));
  EXPECT_TRUE(mi_heap_contains_block(h, r));
  EXPECT_FALSE(mi_heap_contains_block(backing, p));
  void* s = mi_malloc(dyn(100));
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(mi_heap_contains_block(backing, s));
  EXPECT_FALSE(mi_heap_contains_block(h, s));
  mi_free(p);
  mi_free(q);
  mi_free(r);
  mi_free(s);
  mi_heap_delete(h);
}

// ------------------------------------------------------
// Every mi_heap_ allocation function allocates in its heap
// ------------------------------------------------------

TEST(Heap, AllocationFunctionsAllocateInHeap) {
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  mi_heap_t* backing = mi_heap_get_backing();
  struct Alloc {
    const char* name;
    void* p;
    size_t size;
  };
  std::vector<Alloc> allocs = {
      {"mi_heap_malloc", mi_heap_malloc(h, dyn(100)), 100},
      {"mi_heap_malloc(0)", mi_heap_malloc(h, dyn(0)), 0},
      {"mi_heap_malloc(large)", mi_heap_malloc(h, dyn(500000)), 500000},
      {"mi_heap_zalloc", mi_heap_zalloc(h, dyn(300)), 300},
      {"mi_heap_calloc", mi_heap_calloc(h, dyn(7), dyn(9)), 63},
      {"mi_heap_mallocn", mi_heap_mallocn(h, dyn(7), dyn(9)), 63},
      {"mi_heap_malloc_small", mi_heap_malloc_small(h, dyn(MI_SMALL_SIZE_MAX)), MI_SMALL_SIZE_MAX},
      {"mi_heap_malloc_small(0)", mi_heap_malloc_small(h, dyn(0)), 0},
      {"mi_heap_realloc", mi_heap_realloc(h, nullptr, dyn(40)), 40},
      {"mi_heap_reallocn", mi_heap_reallocn(h, nullptr, dyn(4), dyn(10)), 40},
      {"mi_heap_reallocf", mi_heap_reallocf(h, nullptr, dyn(40)), 40},
      {"mi_heap_rezalloc", mi_heap_rezalloc(h, nullptr, dyn(40)), 40},
      {"mi_heap_recalloc", mi_heap_recalloc(h, nullptr, dyn(4), dyn(10)), 40},
      {"mi_heap_malloc_aligned", mi_heap_malloc_aligned(h, dyn(40), dyn(64)), 40},
      {"mi_heap_malloc_aligned_at", mi_heap_malloc_aligned_at(h, dyn(40), dyn(64), dyn(8)), 40},
      {"mi_heap_zalloc_aligned", mi_heap_zalloc_aligned(h, dyn(40), dyn(64)), 40},
      {"mi_heap_zalloc_aligned_at", mi_heap_zalloc_aligned_at(h, dyn(40), dyn(64), dyn(8)), 40},
      {"mi_heap_calloc_aligned", mi_heap_calloc_aligned(h, dyn(4), dyn(10), dyn(64)), 40},
      {"mi_heap_calloc_aligned_at", mi_heap_calloc_aligned_at(h, dyn(4), dyn(10), dyn(64), dyn(8)), 40},
      {"mi_heap_realloc_aligned", mi_heap_realloc_aligned(h, nullptr, dyn(40), dyn(64)), 40},
      {"mi_heap_realloc_aligned_at", mi_heap_realloc_aligned_at(h, nullptr, dyn(40), dyn(64), dyn(8)), 40},
      {"mi_heap_rezalloc_aligned", mi_heap_rezalloc_aligned(h, nullptr, dyn(40), dyn(64)), 40},
      {"mi_heap_rezalloc_aligned_at", mi_heap_rezalloc_aligned_at(h, nullptr, dyn(40), dyn(64), dyn(8)), 40},
      {"mi_heap_recalloc_aligned", mi_heap_recalloc_aligned(h, nullptr, dyn(4), dyn(10), dyn(64)), 40},
      {"mi_heap_recalloc_aligned_at", mi_heap_recalloc_aligned_at(h, nullptr, dyn(4), dyn(10), dyn(64), dyn(8)), 40},
  };
  for (const Alloc& a : allocs) {
    ASSERT_NE(a.p, nullptr) << a.name;
    // (secure builds: a 0-byte block lives in the no-access area, in no heap)
    const bool in_heap = !(a.size == 0 && secure_zero_area());
    EXPECT_EQ(mi_heap_contains_block(h, a.p), in_heap) << a.name;
    EXPECT_FALSE(mi_heap_contains_block(backing, a.p)) << a.name;
    EXPECT_EQ(mi_heap_check_owned(h, a.p), in_heap) << a.name;
    EXPECT_GE(mi_usable_size(a.p), a.size) << a.name;
    fill_pattern(a.p, a.size, 40);
  }
  for (const Alloc& a : allocs) {
    EXPECT_TRUE(has_pattern(a.p, a.size, 40)) << a.name;
    mi_free(a.p);
  }
  mi_heap_delete(h);
}

TEST(Heap, OverflowAndFailure) {
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  errno = 0;
  EXPECT_EQ(mi_heap_calloc(h, dyn(SIZE_MAX / 2), dyn(3)), nullptr);
  EXPECT_EQ(errno, EOVERFLOW);
  errno = 0;
  EXPECT_EQ(mi_heap_mallocn(h, dyn(SIZE_MAX / 2), dyn(3)), nullptr);
  EXPECT_EQ(errno, EOVERFLOW);
  errno = 0;
  EXPECT_EQ(mi_heap_malloc(h, too_large_size()), nullptr);
  EXPECT_EQ(errno, EOVERFLOW);
  errno = 0;
  EXPECT_EQ(mi_heap_malloc(h, impossible_size()), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(mi_heap_zalloc(h, impossible_size()), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_TRUE(walk_heap(h).blocks.empty());
  mi_heap_delete(h);
}

TEST(Heap, StringFunctions) {
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  char* s = mi_heap_strdup(h, "heap string");
  ASSERT_NE(s, nullptr);
  EXPECT_STREQ(s, "heap string");
  EXPECT_TRUE(mi_heap_contains_block(h, s));
  EXPECT_EQ(mi_heap_strdup(h, opaque<const char>(nullptr)), nullptr);

  char* n = mi_heap_strndup(h, "heap string", dyn(4));
  ASSERT_NE(n, nullptr);
  EXPECT_STREQ(n, "heap");
  EXPECT_TRUE(mi_heap_contains_block(h, n));
  EXPECT_EQ(mi_heap_strndup(h, opaque<const char>(nullptr), dyn(4)), nullptr);

  const std::string path = roundabout_dir_path();   // (expected: the OS's own resolution)
  char expected[PATH_MAX];
  ASSERT_TRUE(os_realpath(path.c_str(), expected)) << path;
  char* r = mi_heap_realpath(h, path.c_str(), nullptr);
  ASSERT_NE(r, nullptr);
  EXPECT_STREQ(r, expected);
  EXPECT_TRUE(mi_heap_contains_block(h, r));
  char buf[PATH_MAX];
  char* rb = mi_heap_realpath(h, path.c_str(), buf);
  EXPECT_TRUE(same_ptr(rb, buf));  // (opaque: the malloc attribute lets the compiler assume they differ)
  EXPECT_STREQ(buf, expected);
  errno = 0;
  EXPECT_EQ(mi_heap_realpath(h, "/no/such/dir/mimalloc-test", nullptr), nullptr);
  EXPECT_EQ(errno, ENOENT);

  HeapWalk w = walk_heap(h);
  EXPECT_EQ(w.blocks.size(), 3u);
  EXPECT_TRUE(w.contains(s));
  EXPECT_TRUE(w.contains(n));
  EXPECT_TRUE(w.contains(r));
  mi_free(s);
  mi_free(n);
  mi_free(r);
  mi_heap_delete(h);
}

// ------------------------------------------------------
// delete: blocks survive and migrate to the backing heap
// ------------------------------------------------------

TEST(Heap, DeleteKeepsBlocksAndMigratesThemToBacking) {
  mi_heap_t* backing = mi_heap_get_backing();
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  std::vector<void*> blocks;
  std::vector<size_t> sizes;
  for (size_t i = 0; i < 1000; i++) {
    const size_t size = 8 + (i * 53) % 2000 + (i % 97 == 0 ? 200000 : 0);
    void* p = mi_heap_malloc(h, size);
    ASSERT_NE(p, nullptr);
    fill_pattern(p, size, (unsigned)i);
    blocks.push_back(p);
    sizes.push_back(size);
  }
  for (void* p : blocks) {
    ASSERT_TRUE(mi_heap_contains_block(h, p));
    ASSERT_FALSE(mi_heap_contains_block(backing, p));
  }
  mi_heap_delete(h);
  size_t migrated = 0;
  for (size_t i = 0; i < blocks.size(); i++) {
    EXPECT_TRUE(has_pattern(blocks[i], sizes[i], (unsigned)i)) << "block " << i << " damaged by mi_heap_delete";
    if (mi_heap_contains_block(backing, blocks[i])) migrated++;
  }
  EXPECT_EQ(migrated, blocks.size());
  // migrated blocks show up when walking the backing heap
  HeapWalk w = walk_heap(backing);
  size_t seen = 0;
  for (void* p : blocks) seen += w.contains(p) ? 1 : 0;
  EXPECT_EQ(seen, blocks.size());
  // and can be reallocated and freed normally
  for (size_t i = 0; i < blocks.size(); i += 2) {
    blocks[i] = mi_realloc(blocks[i], sizes[i] + 100);
    ASSERT_NE(blocks[i], nullptr);
    EXPECT_TRUE(has_pattern(blocks[i], sizes[i], (unsigned)i));
  }
  for (void* p : blocks) mi_free(p);
}

TEST(Heap, DeleteOfDefaultHeapRestoresBacking) {
  mi_heap_t* backing = mi_heap_get_backing();
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  mi_heap_t* prev = mi_heap_set_default(h);
  EXPECT_EQ(prev, backing);
  void* p = mi_malloc(dyn(100));
  ASSERT_NE(p, nullptr);
  fill_pattern(p, 100, 41);
  mi_heap_delete(h);
  EXPECT_EQ(mi_heap_get_default(), backing);
  EXPECT_TRUE(has_pattern(p, 100, 41));
  EXPECT_TRUE(mi_heap_contains_block(backing, p));
  void* q = mi_malloc(dyn(100));
  ASSERT_NE(q, nullptr);
  EXPECT_TRUE(mi_heap_contains_block(backing, q));
  mi_free(p);
  mi_free(q);
}

// ------------------------------------------------------
// destroy: all blocks of the heap are released at once
// ------------------------------------------------------

TEST(Heap, DestroyFreesEverythingAndLeavesOtherHeapsIntact) {
  mi_heap_t* backing = mi_heap_get_backing();
  mi_heap_t* other = mi_heap_new();
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(other, nullptr);
  ASSERT_NE(h, nullptr);
  // interleave allocations so that the heaps' pages are neighbours
  std::vector<void*> mine, theirs, back;
  std::vector<size_t> sizes;
  for (size_t i = 0; i < 3000; i++) {
    const size_t size = 8 + (i * 31) % 1500;
    void* p = mi_heap_malloc(h, size);
    void* q = mi_heap_malloc(other, size);
    void* r = mi_malloc(size);
    ASSERT_NE(p, nullptr);
    ASSERT_NE(q, nullptr);
    ASSERT_NE(r, nullptr);
    fill_bytes(p, 0xEE, size);
    fill_pattern(q, size, (unsigned)i);
    fill_pattern(r, size, (unsigned)i + 1);
    mine.push_back(p);
    theirs.push_back(q);
    back.push_back(r);
    sizes.push_back(size);
  }
  // some medium, large and huge blocks too
  for (size_t size : std::initializer_list<size_t>{20000, 100000, 400000, 1 * MiB, 3 * MiB, 10 * MiB}) {
    void* p = mi_heap_malloc(h, size);
    ASSERT_NE(p, nullptr);
    fill_bytes(p, 0xEE, size);
    mine.push_back(p);
  }
  // free some of the heap's blocks explicitly first (mixed state)
  for (size_t i = 0; i < 3000; i += 3) mi_free(mine[i]);

  mi_heap_destroy(h);

  for (size_t i = 0; i < theirs.size(); i++) {
    ASSERT_TRUE(has_pattern(theirs[i], sizes[i], (unsigned)i)) << "block of another heap damaged";
    ASSERT_TRUE(has_pattern(back[i], sizes[i], (unsigned)i + 1)) << "block of the backing heap damaged";
    EXPECT_TRUE(mi_heap_contains_block(other, theirs[i]));
    EXPECT_TRUE(mi_heap_contains_block(backing, back[i]));
  }
  // the released memory is reused by a new heap of the same thread
  std::set<uintptr_t> old_pages;
  for (void* p : mine) old_pages.insert((uintptr_t)p / (64 * KiB));
  mi_heap_t* h2 = mi_heap_new();
  ASSERT_NE(h2, nullptr);
  size_t reused = 0;
  std::vector<void*> fresh;
  for (size_t i = 0; i < 3000; i++) {
    void* p = mi_heap_malloc(h2, sizes[i]);
    ASSERT_NE(p, nullptr);
    fill_bytes(p, 0x77, sizes[i]);
    if (old_pages.count((uintptr_t)p / (64 * KiB)) != 0) reused++;
    fresh.push_back(p);
  }
  EXPECT_GT(reused, 0u) << "memory of the destroyed heap was not reused";
  for (size_t i = 0; i < theirs.size(); i++) {
    EXPECT_TRUE(has_pattern(theirs[i], sizes[i], (unsigned)i));
    EXPECT_TRUE(has_pattern(back[i], sizes[i], (unsigned)i + 1));
  }
  mi_heap_destroy(h2);
  for (void* q : theirs) mi_free(q);
  for (void* r : back) mi_free(r);
  mi_heap_delete(other);
}

TEST(Heap, DestroyRepeatedlyDoesNotGrowMemory) {
  // Destroy must really release: 40 rounds of 16 MiB each would need 640 MiB
  // if nothing were returned. Check that the address ranges repeat.
  std::set<uintptr_t> segments;
  for (int round = 0; round < 40; round++) {
    mi_heap_t* h = mi_heap_new();
    ASSERT_NE(h, nullptr);
    for (int i = 0; i < 256; i++) {
      void* p = mi_heap_malloc(h, 64 * KiB - 1024);
      ASSERT_NE(p, nullptr);
      fill_bytes(p, 0x5A, 1024);
      segments.insert((uintptr_t)p / (4 * MiB));
    }
    mi_heap_destroy(h);
  }
  // 16 MiB live per round spans at most ~6 distinct 4 MiB units; allow slack
  EXPECT_LT(segments.size(), 40u) << "every round used new address space";
}

TEST(Heap, DestroyOfDefaultHeapRestoresBacking) {
  mi_heap_t* backing = mi_heap_get_backing();
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  mi_heap_set_default(h);
  void* p = mi_malloc(dyn(100));
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(mi_heap_contains_block(h, p));
  mi_heap_destroy(h);
  EXPECT_EQ(mi_heap_get_default(), backing);
  void* q = mi_malloc(dyn(100));
  ASSERT_NE(q, nullptr);
  EXPECT_TRUE(mi_heap_contains_block(backing, q));
  mi_free(q);
}

// ------------------------------------------------------
// collect
// ------------------------------------------------------

TEST(Heap, CollectKeepsLiveBlocks) {
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  std::vector<void*> blocks;
  for (size_t i = 0; i < 2000; i++) {
    void* p = mi_heap_malloc(h, 32 + (i % 64) * 16);
    ASSERT_NE(p, nullptr);
    fill_pattern(p, 32, (unsigned)i);
    blocks.push_back(p);
  }
  for (size_t i = 0; i < blocks.size(); i += 2) {
    mi_free(blocks[i]);
    blocks[i] = nullptr;
  }
  mi_heap_collect(h, false);
  mi_heap_collect(h, true);
  size_t live = 0;
  for (size_t i = 0; i < blocks.size(); i++) {
    if (blocks[i] == nullptr) continue;
    live++;
    EXPECT_TRUE(has_pattern(blocks[i], 32, (unsigned)i));
    EXPECT_TRUE(mi_heap_contains_block(h, blocks[i]));
  }
  HeapWalk w = walk_heap(h);
  EXPECT_EQ(w.blocks.size(), live);
  // the heap still allocates after collecting
  void* p = mi_heap_malloc(h, dyn(100));
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(mi_heap_contains_block(h, p));
  mi_free(p);
  for (void* b : blocks) mi_free(b);
  mi_heap_collect(h, true);
  EXPECT_TRUE(walk_heap(h).blocks.empty());
  mi_heap_delete(h);
}

// ------------------------------------------------------
// Emptied pages
// ------------------------------------------------------

// A thread that goes round many sizes with one block in use at a time (a
// request handler: allocate a buffer, fill it, free it) keeps a page of each
// size: an emptied page stays retired in its heap until its size comes round
// again, instead of going back to its segment and being claimed and set up
// anew (14 pages per 100 requests before; a few dozen pages in all now).
TEST(Heap, AThreadGoingRoundManySizesKeepsTheirPages) {
  mi_stats_snapshot_t before, after;
  mi_stats_get(sizeof(before), &before);
  std::thread([] {
    std::vector<size_t> sizes;   // 16 B - 32 KiB, 47 sizes
    for (size_t s = 16; s <= 32 * KiB; s += (s < 128 ? 16 : s / 4)) sizes.push_back(s);
    uint64_t x = 42;
    for (int i = 0; i < 100000; i++) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      const size_t size = sizes[(x >> 33) % sizes.size()];
      void* p = opaque(mi_malloc(dyn(size)));
      ASSERT_NE(p, nullptr);
      fill_pattern(p, 16, (uint8_t)i);
      mi_free(p);
    }
  }).join();
  mi_stats_get(sizeof(after), &after);
  const long long claimed = after.pages.allocated - before.pages.allocated;
  EXPECT_LT(claimed, 1000) << "the thread set up a page for " << claimed << " of its 100,000 requests";
}
