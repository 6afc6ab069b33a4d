/* ----------------------------------------------------------------------------
  test-visit.cpp -- API tests: heap introspection.

  mi_heap_visit_blocks must report exactly the live blocks of a heap (huge
  blocks included: unlike 1.6.7, our huge blocks belong to the heap that
  allocated them), with consistent area information.
  mi_heap_contains_block, mi_heap_check_owned / mi_check_owned (safe for any
  pointer) and mi_is_in_heap_region (true for all our blocks, huge ones too).
-----------------------------------------------------------------------------*/
#include <gtest/gtest.h>
#include <mimalloc.h>

#include <algorithm>
#include <iterator>
#include <set>
#include <thread>
#include <vector>

#include "api-util.h"

using namespace mitest;

namespace {

struct Block {
  void* p;
  size_t size;
};

// Allocate a known set of blocks of many size classes in `h`.
std::vector<Block> allocate_known_set(mi_heap_t* h, bool with_huge) {
  std::vector<Block> blocks;
  std::vector<size_t> sizes;
  for (size_t i = 0; i < 600; i++) sizes.push_back(1 + (i * 13) % 1024);
  for (size_t i = 0; i < 40; i++) sizes.push_back(1025 + i * 400);
  for (size_t size : std::initializer_list<size_t>{20000, 70000, 130000, 300000, 1 * MiB, 2 * MiB}) sizes.push_back(size);
  if (with_huge) {
    sizes.push_back(2 * MiB + 1);
    sizes.push_back(5 * MiB);
  }
  for (size_t size : sizes) {
    void* p = mi_heap_malloc(h, size);
    if (p == nullptr) return {};
    blocks.push_back({p, size});
  }
  return blocks;
}

// Free every third block (and the first huge one); returns the live ones.
std::vector<Block> free_some(const std::vector<Block>& blocks) {
  std::vector<Block> live;
  bool freed_huge = false;
  for (size_t i = 0; i < blocks.size(); i++) {
    const bool huge = blocks[i].size > kHugeThreshold;
    if ((!huge && i % 3 == 0) || (huge && !freed_huge)) {
      if (huge) freed_huge = true;
      mi_free(blocks[i].p);
    }
    else {
      live.push_back(blocks[i]);
    }
  }
  return live;
}

void expect_walk_matches(const mi_heap_t* h, const std::vector<Block>& live) {
  HeapWalk w = walk_heap(h, true);
  EXPECT_TRUE(w.result);
  EXPECT_FALSE(w.overflow);
  EXPECT_EQ(w.problems, 0u) << "blocks outside their area, wrong block size, or count != area->used";
  std::vector<void*> expected;
  for (const Block& b : live) expected.push_back(b.p);
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(w.blocks.size(), expected.size());
  EXPECT_EQ(w.area_used_total, expected.size());
  // exactly the same set
  std::vector<void*> missing, extra;
  std::set_difference(expected.begin(), expected.end(), w.blocks.begin(), w.blocks.end(), std::back_inserter(missing));
  std::set_difference(w.blocks.begin(), w.blocks.end(), expected.begin(), expected.end(), std::back_inserter(extra));
  EXPECT_TRUE(missing.empty()) << missing.size() << " live blocks not visited, e.g. " << (missing.empty() ? nullptr : missing[0]);
  EXPECT_TRUE(extra.empty()) << extra.size() << " visited blocks are not live, e.g. " << (extra.empty() ? nullptr : extra[0]);
  for (const Block& b : live) {
    const size_t bs = w.block_size_of(b.p);
    if (bs != 0) {
      EXPECT_GE(bs, b.size) << "block size reported for a " << b.size << "-byte block";
    }
  }
}

}  // namespace

// ------------------------------------------------------
// Visiting
// ------------------------------------------------------

TEST(Visit, ReportsExactlyTheLiveBlocks) {
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  std::vector<Block> blocks = allocate_known_set(h, false);
  ASSERT_FALSE(blocks.empty());
  expect_walk_matches(h, blocks);
  std::vector<Block> live = free_some(blocks);
  expect_walk_matches(h, live);
  // after collecting, still the same
  mi_heap_collect(h, true);
  expect_walk_matches(h, live);
  for (const Block& b : live) mi_free(b.p);
  HeapWalk w = walk_heap(h, true);
  EXPECT_TRUE(w.blocks.empty());
  mi_heap_delete(h);
}

TEST(Visit, ReportsHugeBlocks) {
  // Our huge blocks (> 2 MiB) belong to their heap and are visited (1.6.7 did
  // not visit them; this is a deliberate improvement).
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  std::vector<Block> blocks = allocate_known_set(h, true);
  ASSERT_FALSE(blocks.empty());
  expect_walk_matches(h, blocks);
  std::vector<Block> live = free_some(blocks);
  size_t huge_live = 0;
  for (const Block& b : live) huge_live += (b.size > kHugeThreshold) ? 1 : 0;
  ASSERT_EQ(huge_live, 1u);
  expect_walk_matches(h, live);
  for (const Block& b : live) mi_free(b.p);
  mi_heap_delete(h);
}

TEST(Visit, CrossThreadFreesAreNotReported) {
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  std::vector<Block> blocks = allocate_known_set(h, false);
  ASSERT_FALSE(blocks.empty());
  std::vector<Block> live, remote;
  for (size_t i = 0; i < blocks.size(); i++) (i % 2 == 0 ? remote : live).push_back(blocks[i]);
  std::thread t([&remote] {
    for (const Block& b : remote) mi_free(b.p);
  });
  t.join();
  // Before the owner collects, remotely freed blocks may still be counted as
  // used, but every live block must be visited.
  {
    HeapWalk w = walk_heap(h, true);
    size_t missing = 0;
    for (const Block& b : live) missing += w.contains(b.p) ? 0 : 1;
    EXPECT_EQ(missing, 0u) << "live blocks not visited";
  }
  // After collecting (which processes pending remote frees): exactly the live set.
  mi_heap_collect(h, true);
  expect_walk_matches(h, live);
  for (const Block& b : live) mi_free(b.p);
  mi_heap_delete(h);
}

TEST(Visit, AreasOnlyWithoutVisitAllBlocks) {
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  std::vector<Block> blocks = allocate_known_set(h, false);
  ASSERT_FALSE(blocks.empty());
  std::vector<Block> live = free_some(blocks);
  HeapWalk w = walk_heap(h, false);
  EXPECT_TRUE(w.result);
  EXPECT_TRUE(w.blocks.empty()) << "blocks visited without visit_all_blocks";
  EXPECT_EQ(w.area_used_total, live.size());
  // at least one area per distinct block size in use
  std::set<size_t> classes;
  for (const Block& b : live) classes.insert(mi_good_size(b.size));
  std::set<size_t> area_sizes(w.area_block_sizes.begin(), w.area_block_sizes.end());
  EXPECT_GE(w.areas, area_sizes.size());
  EXPECT_GE(area_sizes.size(), classes.size() / 2);  // debug padding may merge or shift classes
  for (const Block& b : live) mi_free(b.p);
  mi_heap_delete(h);
}

TEST(Visit, VisitorCanStopTheWalk) {
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  std::vector<void*> blocks;
  for (int i = 0; i < 100; i++) {
    void* p = mi_heap_malloc(h, dyn(48));
    ASSERT_NE(p, nullptr);
    blocks.push_back(p);
  }
  HeapWalk w = walk_heap(h, true, 1);  // stop after the first block
  EXPECT_FALSE(w.result);
  EXPECT_EQ(w.blocks.size(), 1u);
  HeapWalk w5 = walk_heap(h, true, 5);
  EXPECT_FALSE(w5.result);
  EXPECT_EQ(w5.blocks.size(), 5u);
  for (void* p : blocks) mi_free(p);
  mi_heap_delete(h);
}

namespace {
struct DirectVisit {
  const mi_heap_t* expected_heap;
  size_t wrong_heap;
  size_t areas;
  size_t blocks;
  size_t bytes;
};
bool direct_visitor(const mi_heap_t* heap, const mi_heap_area_t* area, void* block, size_t block_size, void* arg) {
  DirectVisit* v = static_cast<DirectVisit*>(arg);
  if (heap != v->expected_heap || area == nullptr) v->wrong_heap++;
  if (block == nullptr) {
    v->areas++;
  }
  else {
    v->blocks++;
    v->bytes += block_size;
  }
  return true;
}
}  // namespace

TEST(Visit, VisitorReceivesHeapAndArgument) {
  // mi_heap_visit_blocks called directly (the other tests go through walk_heap)
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  void* a = mi_heap_malloc(h, dyn(100));   // 112-byte class
  void* b = mi_heap_malloc(h, dyn(100));
  void* c = mi_heap_malloc(h, dyn(5000));  // another class
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NE(c, nullptr);
  DirectVisit v = {h, 0, 0, 0, 0};
  EXPECT_TRUE(mi_heap_visit_blocks(h, true, &direct_visitor, &v));
  EXPECT_EQ(v.wrong_heap, 0u);
  EXPECT_GE(v.areas, 2u);
  EXPECT_EQ(v.blocks, 3u);
  EXPECT_GE(v.bytes, 5200u);
  EXPECT_LE(v.bytes, 5200u + 2048u);
  DirectVisit w = {h, 0, 0, 0, 0};
  EXPECT_TRUE(mi_heap_visit_blocks(h, false, &direct_visitor, &w));
  EXPECT_EQ(w.areas, v.areas);
  EXPECT_EQ(w.blocks, 0u);
  mi_free(a);
  mi_free(b);
  mi_free(c);
  mi_heap_delete(h);
}

TEST(Visit, EmptyHeapVisitsNoBlocks) {
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  HeapWalk w = walk_heap(h, true);  // (1.6.7 returns false here; the result is not checked)
  EXPECT_TRUE(w.blocks.empty());
  EXPECT_EQ(w.area_used_total, 0u);
  mi_heap_delete(h);
}

// ------------------------------------------------------
// contains_block / check_owned
// ------------------------------------------------------

TEST(Visit, ContainsBlock) {
  mi_heap_t* backing = mi_heap_get_backing();
  mi_heap_t* h = mi_heap_new();
  mi_heap_t* g = mi_heap_new();
  ASSERT_NE(h, nullptr);
  ASSERT_NE(g, nullptr);
  for (size_t size : std::initializer_list<size_t>{0, 8, 100, 1000, 20000, 300000, 1 * MiB}) {
    void* p = mi_heap_malloc(h, size);
    void* q = mi_malloc(size);
    ASSERT_NE(p, nullptr);
    ASSERT_NE(q, nullptr);
    // (secure builds: 0-byte blocks live in the no-access area, in no heap)
    const bool in_heap = !(size == 0 && secure_zero_area());
    EXPECT_EQ(mi_heap_contains_block(h, p), in_heap) << size;
    EXPECT_FALSE(mi_heap_contains_block(g, p)) << size;
    EXPECT_FALSE(mi_heap_contains_block(backing, p)) << size;
    EXPECT_EQ(mi_heap_contains_block(backing, q), in_heap) << size;
    EXPECT_FALSE(mi_heap_contains_block(h, q)) << size;
    mi_free(p);
    mi_free(q);
  }
  EXPECT_FALSE(mi_heap_contains_block(h, nullptr));
  mi_heap_delete(h);
  mi_heap_delete(g);
}

namespace {
alignas(64) char g_static_buffer[4096];
}

TEST(Visit, CheckOwned) {
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  std::vector<void*> mine;
  for (size_t size : std::initializer_list<size_t>{8, 100, 1000, 20000, 300000}) {
    void* p = mi_heap_malloc(h, size);
    ASSERT_NE(p, nullptr);
    mine.push_back(p);
  }
  void* d = mi_malloc(dyn(100));  // default heap
  ASSERT_NE(d, nullptr);

  for (void* p : mine) {
    EXPECT_TRUE(mi_heap_check_owned(h, p));
    EXPECT_FALSE(mi_check_owned(p)) << "block of another heap is owned by the default heap";
    EXPECT_FALSE(mi_heap_check_owned(h, (char*)p + 1)) << "unaligned pointer";
    EXPECT_FALSE(mi_heap_check_owned(h, (char*)p + 3)) << "unaligned pointer";
  }
  EXPECT_TRUE(mi_check_owned(d));
  EXPECT_TRUE(mi_heap_check_owned(mi_heap_get_default(), d));
  EXPECT_FALSE(mi_heap_check_owned(h, d));
  EXPECT_FALSE(mi_check_owned((char*)d + 1));

  // foreign memory
  int on_stack[16] = {0};
  EXPECT_FALSE(mi_check_owned(on_stack));
  EXPECT_FALSE(mi_heap_check_owned(h, on_stack));
  EXPECT_FALSE(mi_check_owned(g_static_buffer));
  EXPECT_FALSE(mi_heap_check_owned(h, g_static_buffer));
  EXPECT_FALSE(mi_check_owned(nullptr));
  EXPECT_FALSE(mi_heap_check_owned(h, nullptr));
  const size_t len = 64 * KiB;
  void* mapped = os_map(len);   // (from the OS directly)
  ASSERT_NE(mapped, nullptr);
  EXPECT_FALSE(mi_check_owned(mapped));
  EXPECT_FALSE(mi_heap_check_owned(h, (char*)mapped + 4096));
  os_unmap(mapped, len);
  LibcMalloc libc = libc_malloc();
  if (libc.malloc_fn != nullptr) {
    void* g = libc.malloc_fn(100);
    ASSERT_NE(g, nullptr);
    EXPECT_FALSE(mi_check_owned(g)) << "the C library's block";
    EXPECT_FALSE(mi_heap_check_owned(h, g)) << "the C library's block";
    libc.free_fn(g);
  }
  else {
    ADD_FAILURE() << "could not look up the C library's malloc";
  }

  // freed blocks' memory is still "owned" in the sense of lying in a page of the
  // heap; the API only promises the answer for live blocks, so nothing is checked.
  for (void* p : mine) mi_free(p);
  mi_free(d);
  mi_heap_delete(h);
}

// ------------------------------------------------------
// mi_is_in_heap_region
// ------------------------------------------------------

TEST(Visit, IsInHeapRegion) {
  std::vector<void*> mine;
  for (size_t size : std::initializer_list<size_t>{0, 8, 100, 1000, 20000, 300000, 1 * MiB, 2 * MiB + 1, 5 * MiB, 40 * MiB}) {
    void* p = mi_malloc(size);
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(mi_is_in_heap_region(p)) << "block of " << size << " bytes";
    mine.push_back(p);
  }
  void* a = mi_malloc_aligned(dyn(100), dyn(4 * MiB));
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(mi_is_in_heap_region(a)) << "4 MiB aligned block";
  mine.push_back(a);
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  void* hp = mi_heap_malloc(h, dyn(3 * MiB));
  ASSERT_NE(hp, nullptr);
  EXPECT_TRUE(mi_is_in_heap_region(hp));
  mine.push_back(hp);

  int on_stack = 0;
  EXPECT_FALSE(mi_is_in_heap_region(&on_stack));
  EXPECT_FALSE(mi_is_in_heap_region(nullptr));
  EXPECT_FALSE(mi_is_in_heap_region(g_static_buffer));
  for (void* p : mine) mi_free(p);
  mi_heap_delete(h);
}
