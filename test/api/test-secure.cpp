// Secure builds (docs/secure.md): each misuse the build detects stops the
// process with a one-line message naming it (death tests: the misuse runs in
// a child process), or, with MIMALLOC_SECURE_CONTINUE=1, is reported and the
// process goes on. Guard pages stop linear overflows out of a page at once.
// In other builds these tests are skipped (MI_TEST_SECURE is the build's
// secure profile, 1 = ON or 2 = FULL, set by test/CMakeLists.txt).
// A stop is abort(), a guard page's fault is a fault: on Linux SIGABRT and
// SIGSEGV, on Windows exit code 3 and STATUS_ACCESS_VIOLATION (api-util.h's
// ended_by_abort and ended_by_fault).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <vector>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "api-util.h"

#ifndef MI_TEST_SECURE
#define MI_TEST_SECURE 0
#endif

namespace {

using namespace mitest;

// The profiles (MI_TEST_SECURE): 1 = ON, 2 = FULL (which has all of ON).
#define ON    1
#define FULL  2
#define REQUIRE_SECURE(profile) \
  if (MI_TEST_SECURE < (profile)) GTEST_SKIP() << "needs a secure build of profile " #profile

int global_word;

// Die the way a secure build stops on a detected misuse.
#define EXPECT_STOPS(statement, message) \
  EXPECT_EXIT({ statement; std::_Exit(0); }, ended_by_abort(), message)

TEST(Secure, DoubleFreeRightAway) {
  REQUIRE_SECURE(ON);
  EXPECT_STOPS({ void* p = mi_malloc(dyn(40)); mi_free(p); mi_free(p); }, "double free detected of block");
}

TEST(Secure, DoubleFreeAfterOtherFrees) {
  REQUIRE_SECURE(ON);
  EXPECT_STOPS({
    void* a = mi_malloc(dyn(40)); void* b = mi_malloc(dyn(40)); void* c = mi_malloc(dyn(40));
    mi_free(a); mi_free(b); mi_free(c); mi_free(a);
  }, "double free detected");
}

// (`keep` holds the page of `a` in use. Without it a heap with no other
// pages of these sizes, as a fresh thread's, or the Windows test program's,
// whose own allocations are the C runtime's, frees the emptied page after a
// few rounds and builds a page of another size in its memory: `a` then lies
// inside a block of that size, and the second free is reported, and stops,
// as "not the start of a block")
TEST(Secure, DoubleFreeInterleavedWithAllocations) {
  REQUIRE_SECURE(ON);
  EXPECT_STOPS({
    void* keep = mi_malloc(dyn(200));
    void* a = mi_malloc(dyn(200));
    mi_free(a);
    for (int i = 0; i < 100; i++) mi_free(mi_malloc(dyn(16 + (size_t)i * 8)));
    mi_free(a);
    mi_free(keep);
  }, "double free detected");
}

// A thread that is not the owner frees a block twice while the owner goes on
// without collecting: the second free finds it on the page's thread_free list
// (ON's link probe; FULL's trailer reads free).
TEST(Secure, DoubleFreeByAThreadThatIsNotTheOwner) {
  REQUIRE_SECURE(ON);
  EXPECT_STOPS({
    std::atomic<void*> x{nullptr};
    std::atomic<bool> done{false};
    std::thread owner([&] {   // a fresh heap: the block's page is not full
      x.store(mi_malloc(dyn(40)));
      while (!done.load()) std::this_thread::yield();
    });
    while (x.load() == nullptr) std::this_thread::yield();
    mi_free(x.load());
    mi_free(x.load());
    done.store(true);
    owner.join();
  }, "double free detected");
}

// (the trailer reads free after the first free, whichever thread frees: FULL;
// ON's probe cannot look in the owner's own lists from another thread, nor in
// the owner heap's delayed list)
TEST(Secure, DoubleFreeByAnotherThread) {
  REQUIRE_SECURE(FULL);
  EXPECT_STOPS({
    void* x = mi_malloc(dyn(40));
    std::thread t([&] { mi_free(x); mi_free(x); });
    t.join();
  }, "double free detected");
  EXPECT_STOPS({
    void* x = mi_malloc(dyn(40));
    mi_free(x);
    std::thread t([&] { mi_free(x); });   // freed by its owner, then by another thread
    t.join();
  }, "double free detected");
  // a huge block freed by another thread has its memory purged at once: its
  // trailer must still say "free" to the second free
  EXPECT_STOPS({
    void* x = mi_malloc(dyn(5 * MiB));
    memset(x, 1, 5 * MiB);
    std::thread t([&] { mi_free(x); });
    t.join();
    mi_free(x);
  }, "double free detected");
}

TEST(Secure, DoubleFreeAfterTheBlockWasReused) {
  REQUIRE_SECURE(ON);
  // p freed, its block handed out again (maybe as q), then p and q freed:
  // whichever order, the block is freed twice
  EXPECT_STOPS({
    void* p = mi_malloc(dyn(64));
    mi_free(p);
    void* q = nullptr;
    for (int i = 0; i < 100000 && q != p; i++) q = mi_malloc(dyn(64));   // until the block comes back
    mi_free(opaque(p));
    mi_free(opaque(q));
  }, "double free detected");
}

TEST(Secure, FreeOfAnAllocaAddress) {
  REQUIRE_SECURE(ON);
  EXPECT_STOPS({ void* a = MITEST_ALLOCA(dyn(64)); mi_free(opaque(a)); }, "invalid pointer");
}

// C++: delete and delete[] are told apart, a sized delete gives the size
TEST(Secure, DeleteOfANewArrayBlock) {
  REQUIRE_SECURE(FULL);
  EXPECT_STOPS({ void* p = ::operator new[](dyn(100)); ::operator delete(opaque(p)); },
               "delete of a block allocated by new\\[\\]");
}

TEST(Secure, ArrayDeleteOfANewBlock) {
  REQUIRE_SECURE(FULL);
  EXPECT_STOPS({ void* p = ::operator new(dyn(100)); ::operator delete[](opaque(p)); },
               "delete\\[\\] of a block not allocated by new\\[\\]");
}

TEST(Secure, SizedDeleteWithAWrongSize) {
  REQUIRE_SECURE(FULL);
  EXPECT_STOPS({ void* p = ::operator new(dyn(100)); ::operator delete(opaque(p), dyn(120)); },
               "sized delete of block .* with the wrong size 120 \\(it was allocated with 100\\)");
  EXPECT_STOPS({ void* p = ::operator new[](dyn(100)); ::operator delete[](opaque(p), dyn(96)); },
               "with the wrong size 96");
}

// ON lets a delete of a new[] block pass (undefined behaviour, but common in
// real programs for trivially destructible types); FULL stops it (above).
TEST(Secure, OnLetsDeleteOfANewArrayBlockPass) {
  REQUIRE_SECURE(ON);
  if (MI_TEST_SECURE >= FULL) GTEST_SKIP() << "FULL stops it";
  for (size_t n : { 1, 100, 5000, 300000 }) {
    void* p = ::operator new[](dyn(n));
    ::operator delete(opaque(p));
    void* q = ::operator new[](dyn(n));
    ::operator delete(opaque(q), dyn(n + 8));   // sized, with the wrong size: not checked in ON
  }
}

// The C++ checks above see new and delete only where they are the library's:
// with the override the static library defines them (on Windows, only them,
// and malloc stays the C runtime's), so a new block is in our heap region.
TEST(Secure, NewAndDeleteAreTheLibrarys) {
  REQUIRE_SECURE(ON);
#if !defined(MI_TEST_OVERRIDE)
  GTEST_SKIP() << "needs the override (MI_OVERRIDE)";
#endif
  void* a = ::operator new(dyn(100));
  void* b = ::operator new[](dyn(100));
  void* c = ::operator new(dyn(100), std::align_val_t(64));
  void* d = ::operator new[](dyn(100), std::nothrow);
  EXPECT_TRUE(mi_is_in_heap_region(a)) << "operator new";
  EXPECT_TRUE(mi_is_in_heap_region(b)) << "operator new[]";
  EXPECT_TRUE(mi_is_in_heap_region(c)) << "operator new (aligned)";
  EXPECT_TRUE(mi_is_in_heap_region(d)) << "operator new[] (nothrow)";
  ::operator delete(opaque(a));
  ::operator delete[](opaque(b));
  ::operator delete(opaque(c), std::align_val_t(64));
  ::operator delete[](opaque(d));
}

TEST(Secure, MatchingDeletesPass) {
  REQUIRE_SECURE(ON);
  for (size_t n : { 1, 24, 100, 5000, 300000 }) {
    void* a = ::operator new(dyn(n));
    ::operator delete(opaque(a));
    void* b = ::operator new[](dyn(n));
    ::operator delete[](opaque(b));
    void* c = ::operator new(dyn(n));
    ::operator delete(opaque(c), n);
    void* d = ::operator new[](dyn(n));
    ::operator delete[](opaque(d), n);
    void* e = ::operator new[](dyn(n), std::align_val_t(64));
    ::operator delete[](opaque(e), n, std::align_val_t(64));
    char* r = (char*)mi_malloc(dyn(n));   // a realloc in place keeps the trailer true
    r = (char*)mi_realloc(r, n - n / 4);
    memset(r, 1, n - n / 4);
    mi_free(r);
  }
}

TEST(Secure, FreeOfAStackAddress) {
  REQUIRE_SECURE(ON);
  EXPECT_STOPS({ int local = 0; mi_free(opaque(&local)); }, "invalid pointer");
}

TEST(Secure, FreeOfAGlobal) {
  REQUIRE_SECURE(ON);
  EXPECT_STOPS(mi_free(opaque(&global_word)), "invalid pointer");
}

TEST(Secure, FreeOfAFarAwayAddress) {
  REQUIRE_SECURE(ON);
  EXPECT_STOPS(mi_free(opaque((void*)(uintptr_t)0x123456789000)), "invalid pointer");
}

TEST(Secure, FreeInsideABlock) {
  REQUIRE_SECURE(ON);
  // (a fresh heap: its pages hold no aligned blocks, where any address inside
  // a block names the block, see docs/secure.md)
  EXPECT_STOPS({ char* p = (char*)mi_heap_malloc(mi_heap_new(), dyn(100)); mi_free(p + 16); }, "not the start of a block");
  EXPECT_STOPS({ char* p = (char*)mi_heap_malloc(mi_heap_new(), dyn(300000)); mi_free(p + 65536); }, "not the start of a block");
  EXPECT_STOPS({ char* p = (char*)mi_heap_malloc(mi_heap_new(), dyn(100)); mi_free(p + 3); }, "invalid \\(unaligned\\) pointer");
  EXPECT_STOPS({ char* p = (char*)mi_heap_malloc(mi_heap_new(), dyn(100)); mi_free(p + 8); }, "not the start of a block");
  EXPECT_STOPS({ char* p = (char*)mi_heap_malloc(mi_heap_new(), dyn(5000)); mi_free(p + 4000); }, "not the start of a block");
}

// Of `n` fresh blocks of `size`, the one at the highest address: it has a
// block below it in its page.
char* highest_block(size_t size, int n = 16) {
  char* high = nullptr;
  for (int i = 0; i < n; i++) {
    char* p = (char*)mi_malloc(dyn(size));
    if (p > high) high = p;
  }
  return (char*)opaque(high);
}

TEST(Secure, OverflowIsCaughtOnFree) {
  REQUIRE_SECURE(FULL);   // (the trailer's fill)
  // by one byte, right after the request (a write that changes the byte: at 24 bytes it is
  // the trailer's first, a random value that a constant matched once in 256 runs)
  for (size_t size : { 24, 100, 1000, 5000 }) {
    EXPECT_STOPS({ char* p = (char*)opaque(mi_malloc(dyn(size))); p[size] ^= 1; mi_free(p); }, "buffer overflow in heap block .* write after");
  }
  EXPECT_STOPS({ char* p = (char*)opaque(mi_malloc(dyn(104))); memset(p + 104, 0, 8); mi_free(p); }, "buffer overflow in heap block");
  EXPECT_STOPS({ char* p = (char*)opaque(mi_malloc(dyn(100))); memset(p, 1, 132); mi_free(p); }, "buffer overflow in heap block");   // by 32
  EXPECT_STOPS({ char* p = (char*)opaque(mi_malloc(dyn(100))); p[100] = 1; mi_free(p); }, "buffer overflow in heap block");
  EXPECT_STOPS({ char* p = (char*)opaque(mi_malloc(dyn(100))); memset(p + 100, 7, 32); mi_free(p); }, "buffer overflow in heap block");
  EXPECT_STOPS({ static char src[4000]; char* p = (char*)opaque(mi_malloc(dyn(3000))); memcpy(p + 1000, opaque(src), 2001); mi_free(p); }, "buffer overflow .*heap block");   // (by memcpy, or gcc inlines the copy and the free catches it; one pattern: GoogleTest's regular expressions on Windows have no alternatives)
}

TEST(Secure, UnderflowIsCaughtOnFree) {
  REQUIRE_SECURE(FULL);
  EXPECT_STOPS({ char* p = highest_block(100); memset(p - 32, 0, 32); mi_free(p); }, "buffer underflow in heap block");
  // an overflow out of the block below is caught by the free of either
  EXPECT_STOPS({ char* p = highest_block(100); memset(p - 4, 9, 4); mi_free(p); }, "buffer underflow in heap block");
  EXPECT_STOPS({ char* p = highest_block(100); p[-1] = 1; mi_free(p); }, "buffer underflow in heap block");
  EXPECT_STOPS({ char* p = highest_block(100); memset(p - 8, 0, 8); mi_free(p); }, "buffer underflow in heap block");
}

TEST(Secure, OverflowByAPageStops) {
  REQUIRE_SECURE(ON);
  // FULL stops at the block's own free (its trailer is overwritten). ON has no
  // trailer: the overflow runs over the free neighbours' list links and stops
  // when the list reaches one of them. So the block is chosen with 65 free
  // neighbours after it (blocks of one page come in random order: sort them),
  // and allocation goes on until the page's free blocks must all be used.
  EXPECT_DEATH({
    mi_heap_t* heap = mi_heap_new();
    std::vector<char*> blocks(2048);
    for (auto& b : blocks) b = (char*)opaque(mi_heap_malloc(heap, dyn(64)));
    std::vector<char*> sorted(blocks);
    std::sort(sorted.begin(), sorted.end());
    size_t stride = SIZE_MAX;   // the block size (FULL's blocks hold a trailer too)
    for (size_t i = 1; i < sorted.size(); i++) stride = std::min(stride, (size_t)(sorted[i] - sorted[i - 1]));
    size_t first = 0;           // the start of a run of 66 adjacent blocks
    for (size_t i = 1; i < sorted.size() && i - first < 66; i++) {
      if (sorted[i] != sorted[i - 1] + stride) first = i;
    }
    char* p = sorted[first];
    for (char* b : blocks) if (b != p) mi_free(b);
    memset(p, 0x41, 4096 + 64);
    mi_free(p);
    for (int i = 0; i < 100000; i++) opaque(mi_heap_malloc(heap, dyn(64)));
    std::_Exit(0);
  }, "");
}

TEST(Secure, OverwrittenFreeListLinkIsCaught) {
  REQUIRE_SECURE(ON);
  // a write after free over the link word of a free block: caught when the
  // list reaches it, at the latest when the block would be handed out
  // (fresh blocks may come first: allocate until the freed ones must be used).
  // The link is the block's first word (ON), or, in FULL, its trailer: the
  // word after its usable bytes (48 + the trailer: blocks of 64 bytes)
  const size_t link = (MI_TEST_SECURE >= FULL ? mi_good_size(48 + sizeof(void*)) - sizeof(void*) : 0);
  EXPECT_STOPS({
    mi_heap_t* heap = mi_heap_new();
    void* blocks[64];
    for (auto& b : blocks) b = mi_heap_malloc(heap, dyn(48));
    for (auto& b : blocks) mi_free(b);
    for (auto& b : blocks) memset((char*)opaque(b) + link, 0x41, sizeof(void*));
    for (int i = 0; i < 100000; i++) opaque(mi_heap_malloc(heap, dyn(48)));
  }, "corrupted free list entry");
}

TEST(Secure, ReportAndContinueWhenAsked) {
  REQUIRE_SECURE(ON);
  EXPECT_EXIT({
    mi_option_enable(mi_option_secure_continue);   // MIMALLOC_SECURE_CONTINUE=1
    mi_option_set(mi_option_show_errors, 0);      // the misuse is said whatever show_errors says
    void* p = mi_malloc(dyn(40));
    mi_free(p);
    mi_free(p);
    void* q = mi_malloc(dyn(40));
    mi_free(q);
    std::_Exit(7);
  }, testing::ExitedWithCode(7), "double free detected");
}

// A huge block starts its segment's only page, right after the header's
// guard, and its area ends at the segment's end guard (rounded up to OS pages
// and allocation granularity beyond the usable size).
TEST(Secure, OverflowAndUnderflowIntoAGuardPageFault) {
  REQUIRE_SECURE(ON);
  EXPECT_EXIT({
    char* p = (char*)mi_malloc(dyn(9 * MiB));
    for (size_t i = mi_usable_size(p); i < 16 * MiB; i++) ((volatile char*)p)[i] = 1;
    std::_Exit(0);
  }, ended_by_fault(), "");
  EXPECT_EXIT({
    char* p = (char*)opaque(mi_malloc(dyn(9 * MiB)));
    *(volatile char*)opaque(p - 1) = 1;
    std::_Exit(0);
  }, ended_by_fault(), "");
}

TEST(Secure, EveryPageEndsInAGuard) {
  REQUIRE_SECURE(ON);
  // run off the end of a small page: 64 KiB of 1 KiB blocks, written in
  // address order from the lowest block of a fresh heap's page
  EXPECT_EXIT({
    mi_heap_t* heap = mi_heap_new();
    char* lowest = (char*)mi_heap_malloc(heap, dyn(1000));
    for (int i = 0; i < 200; i++) {
      char* p = (char*)mi_heap_malloc(heap, dyn(1000));
      if (p < lowest) lowest = p;
    }
    for (size_t i = 0; i < 128 * KiB; i++) ((volatile char*)lowest)[i] = 1;
    std::_Exit(0);
  }, ended_by_fault(), "");
}

// Can the byte at p be read (without faulting)?
bool readable(const void* p) { return os_readable(p); }

// A segment freed into its region keeps its guards there, and the next
// segment built in that memory keeps them when it has the same page kind or
// removes them first: either way each page of the new segment ends in a
// guard. Threads that end and start again build their segments anew: small
// ones with more pages each round and, every third round, medium ones; the
// rounds must reuse memory. Every block must have a guard above it within
// a page.
TEST(Secure, PagesEndInAGuardWhenASegmentIsBuiltAgainInTheSameMemory) {
  REQUIRE_SECURE(ON);
  std::vector<uintptr_t> seen;
  bool reused = false;
  for (int round = 0; round < 12; round++) {
    const bool medium = (round % 3 == 2);
    const size_t size = (medium ? 20000 : 1000);   // medium pages of 512 KiB, small ones of 64 KiB
    const size_t page = (medium ? 512 * KiB : 64 * KiB);
    const int count = (medium ? 60 : 60 * (round + 1));
    uintptr_t segment = 0;
    const char* unguarded = nullptr;
    const char* unreadable = nullptr;   // (a live block the check cannot read: it would see guards everywhere)
    std::thread([&] {
      std::vector<char*> blocks;
      for (int i = 0; i < count; i++) blocks.push_back((char*)mi_malloc(dyn(size)));
      segment = (uintptr_t)*std::min_element(blocks.begin(), blocks.end()) & ~(uintptr_t)(4 * MiB - 1);
      for (const char* b : blocks) {
        if (!readable(b) && unreadable == nullptr) unreadable = b;
        bool guard = false;
        for (size_t d = 0; d <= page && !guard; d += 4 * KiB) guard = !readable(b + d);
        if (!guard && unguarded == nullptr) unguarded = b;
      }
      for (char* b : blocks) mi_free(b);
    }).join();
    ASSERT_EQ(unreadable, nullptr) << "round " << round << ": a live block reads as no access";
    EXPECT_EQ(unguarded, nullptr) << "round " << round << ": no guard within a page above the block of size " << size;
    if (std::find(seen.begin(), seen.end(), segment) != seen.end()) reused = true;
    seen.push_back(segment);
  }
  EXPECT_TRUE(reused) << "no segment was built twice in the same memory: the case is not tested";
}

TEST(Secure, AJustFreedBlockIsNotTheNextOne) {
  REQUIRE_SECURE(ON);
  for (size_t size : { 16, 48, 200, 1000, 5000 }) {
    mi_heap_t* heap = mi_heap_new();
    for (int i = 0; i < 20000; i++) {
      void* p = mi_heap_malloc(heap, dyn(size));
      mi_free(p);
      void* q = mi_heap_malloc(heap, dyn(size));
      ASSERT_NE(p, q) << "size " << size << ", round " << i;
      mi_free(q);
    }
    mi_heap_destroy(heap);
  }
}

// The same for blocks another thread freed: the owner takes their list over
// (without walking it) and still does not hand out the block freed last first.
TEST(Secure, ABlockFreedLastByAnotherThreadIsNotTheNextOne) {
  REQUIRE_SECURE(ON);
  for (size_t size : { 16, 48, 200, 1000, 5000 }) {
    for (size_t count : { 2, 3, 50, 2000 }) {
      std::vector<void*> blocks;
      for (int round = 0; round < 20; round++) {
        blocks.clear();
        for (size_t i = 0; i < count; i++) blocks.push_back(mi_malloc(dyn(size)));
        std::thread([&] { for (void* b : blocks) mi_free(b); }).join();
        void* q = mi_malloc(dyn(size));
        ASSERT_NE(q, blocks.back()) << "size " << size << ", " << count << " blocks, round " << round;
        mi_free(q);
      }
    }
  }
}

// Allocate blocks of `size` from `heap` until `p` comes back (NULL if it
// does not within `max` allocations).
static void* allocate_until(mi_heap_t* heap, size_t size, const void* p, int max = 100000) {
  for (int i = 0; i < max; i++) {
    void* q = mi_heap_malloc(heap, dyn(size));
    if (q == p) return q;
  }
  return nullptr;
}

// A freed block of up to 256 usable bytes reads zero whole; a larger one in
// its first 64 bytes (and the block's last word, past the bytes asked for
// here), and whole one free in about 8 (below).
TEST(Secure, FreedMemoryReadsZero) {
  REQUIRE_SECURE(FULL);
  for (size_t size : { 24, 200, 5000, 100000 }) {
    char* p = (char*)mi_malloc(dyn(size));
    const size_t usable = mi_usable_size(p);
    memset(p, 0x5A, usable);
    char* keep = (char*)mi_malloc(dyn(size));   // the page stays in use
    mi_free(p);
    size_t nonzero = 0;
    for (size_t i = 0; i < usable; i++) {
      if (usable <= 256 || i < 64) nonzero += (((volatile char*)p)[i] != 0);
    }
    EXPECT_EQ(nonzero, 0u) << "size " << size << ": freed bytes that do not read zero";
    mi_free(keep);
  }
}

// Blocks of up to 256 usable bytes are checked whole when they are reused,
// larger ones always in their first 64 bytes and their last word.
TEST(Secure, WriteAfterFreeIsCaughtWhenTheBlockIsReused) {
  REQUIRE_SECURE(FULL);
  for (size_t size : { 32, 100, 256, 3000, 60000 }) {
    const size_t usable = mi_good_size(size + sizeof(void*)) - sizeof(void*);   // (the trailer word)
    for (size_t at : { (size_t)0, sizeof(void*), size / 2, size - 1, (size_t)63, usable - 1 }) {
      if (at >= size || (usable > 256 && at >= 64 && at < usable - 8)) continue;
      SCOPED_TRACE(testing::Message() << "size " << size << ", byte " << at);
      EXPECT_STOPS({
        mi_heap_t* heap = mi_heap_new();
        char* p = (char*)mi_heap_malloc(heap, dyn(size));
        mi_free(p);
        ((volatile char*)p)[at] = 1;   // a write into the freed block
        allocate_until(heap, size, p);
      }, "write after free in heap block .* was written after the block was freed");
    }
  }
}

// Elsewhere in a block over 256 bytes, a write after free is caught when the
// free zeroed the block whole: one free in about 8 by its owner, at random
// (at most 15 apart).
TEST(Secure, WriteAfterFreeInTheMiddleOfALargeBlockIsCaughtSoon) {
  REQUIRE_SECURE(FULL);
  for (size_t size : { 3000, 60000 }) {
    EXPECT_STOPS({
      mi_heap_t* heap = mi_heap_new();
      for (int round = 0; round < 400; round++) {
        char* p = (char*)mi_heap_malloc(heap, dyn(size));
        mi_free(p);
        ((volatile char*)p)[size / 2] = 1;
        if (allocate_until(heap, size, p) == nullptr) break;
      }
    }, "write after free in heap block .* was written after the block was freed");
  }
}

TEST(Secure, ReusedBlocksAreZeroForCalloc) {
  REQUIRE_SECURE(FULL);
  mi_heap_t* heap = mi_heap_new();
  for (int round = 0; round < 200; round++) {
    void* blocks[16];
    for (void*& b : blocks) {
      b = mi_heap_calloc(heap, 1, dyn(24 + (size_t)round * 8));
      ASSERT_TRUE(is_zero(b, 24 + (size_t)round * 8)) << "round " << round;
      memset(b, 0xEE, 24 + (size_t)round * 8);
    }
    for (void* b : blocks) mi_free(b);
  }
  for (size_t size : { 3000, 60000 }) {   // (blocks over 256 bytes are not zeroed whole on every free)
    for (int round = 0; round < 20; round++) {
      char* b = (char*)mi_heap_calloc(heap, 1, dyn(size));
      ASSERT_TRUE(is_zero(b, size)) << "size " << size << ", round " << round;
      memset(b, 0xEE, size);
      mi_free(b);
    }
  }
  mi_heap_destroy(heap);
}

// The steps between consecutive fresh blocks of one page (of 32 bytes each),
// in allocation order, from a new heap.
static std::vector<intptr_t> fresh_steps(size_t n) {
  mi_heap_t* heap = mi_heap_new();
  std::vector<uintptr_t> addrs;
  for (size_t i = 0; i < n; i++) addrs.push_back((uintptr_t)mi_heap_malloc(heap, dyn(32)));
  std::vector<intptr_t> steps;
  for (size_t i = 1; i < n; i++) {
    if (addrs[i] / (64 * 1024) == addrs[i - 1] / (64 * 1024)) steps.push_back((intptr_t)(addrs[i] - addrs[i - 1]));
  }
  mi_heap_destroy(heap);
  return steps;
}

TEST(Secure, FreshBlocksComeInRandomOrder) {
  REQUIRE_SECURE(ON);
  const std::vector<intptr_t> a = fresh_steps(1024), b = fresh_steps(1024);
  size_t back = 0, neighbours = 0;
  for (intptr_t step : a) {
    back += (step < 0);
    neighbours += (step == 32 || step == -32);
  }
  EXPECT_GE(back, a.size() / 64) << "fresh blocks in address order";
  EXPECT_LT(neighbours, a.size() / 16) << "consecutive fresh blocks are neighbours";
  EXPECT_NE(a, b) << "two heaps hand out their fresh blocks in the same order";
}

TEST(Secure, AFreshBlockHoldsNoLink) {
  REQUIRE_SECURE(ON);
  void* a = mi_malloc(dyn(24));
  void* b = mi_malloc(dyn(24));
  mi_free(a);
  mi_free(b);
  for (int i = 0; i < 2; i++) {
    uintptr_t* p = (uintptr_t*)opaque(mi_malloc(dyn(24)));
    EXPECT_EQ(p[0], 0u);
  }
}

TEST(Secure, MallocZeroIsAUniquePointerWhoseAccessFaults) {
  REQUIRE_SECURE(ON);
  std::vector<void*> zeros;
  for (int i = 0; i < 1000; i++) {
    void* p = mi_malloc(dyn(0));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(mi_usable_size(p), 0u);
    zeros.push_back(p);
  }
  zeros.push_back(mi_calloc(dyn(0), 8));
  zeros.push_back(mi_zalloc(dyn(0)));
  zeros.push_back(mi_malloc_aligned(dyn(0), 16));
  zeros.push_back(::operator new(dyn(0)));
  std::vector<void*> sorted = zeros;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "two live malloc(0) pointers are equal";
  char* grown = (char*)mi_realloc(zeros[0], dyn(10));   // a zero-size block grows like any other
  ASSERT_NE(grown, nullptr);
  memset(grown, 1, 10);
  zeros[0] = grown;
  ::operator delete(zeros.back());
  zeros.pop_back();
  for (void* p : zeros) mi_free(p);
  EXPECT_EXIT({ volatile char* p = (volatile char*)mi_malloc(dyn(0)); char c = p[0]; std::_Exit(c); },
              ended_by_fault(), "");
  EXPECT_EXIT({ volatile char* p = (volatile char*)mi_malloc(dyn(0)); p[0] = 1; std::_Exit(0); },
              ended_by_fault(), "");
  EXPECT_STOPS({ void* p = mi_malloc(dyn(0)); mi_free(p); mi_free(p); }, "double free detected of block .* with size 0");
}

// With the override (the static library defines them), memcpy, memmove and
// memset check writes into our blocks: against the size asked for (FULL, from
// the trailer), against the block (ON: malloc(64)'s block is 64 bytes).
TEST(Secure, MemcpyMemmoveMemsetAreBoundsChecked) {
  REQUIRE_SECURE(ON);
#if !defined(MI_TEST_OVERRIDE)
  GTEST_SKIP() << "needs the override (MI_OVERRIDE)";
#endif
  if (kWindows) GTEST_SKIP() << "Linux only: the checked memcpy, memmove and memset replace glibc's; "
                                "on Windows the static library defines only the C++ operators";
  static char src[16384];
  EXPECT_STOPS({ char* p = (char*)mi_malloc(dyn(64)); memcpy(opaque(p), opaque(src), dyn(65)); },   // (opaque: clang makes a copy of a never-written array a memset)
               "buffer overflow by memcpy: 65 bytes at .* run 1 bytes past the end of heap block .* of size 64");
  EXPECT_STOPS({ char* p = (char*)mi_malloc(dyn(64)); memmove(opaque(p) + 32, p, dyn(33)); }, "buffer overflow by memmove");
  const size_t big = mi_good_size(5000);   // (the block of malloc(5000): its exact size)
  EXPECT_STOPS({ char* p = (char*)mi_malloc(dyn(big)); memset(opaque(p) + 1000, 0, dyn(big - 1000 + 32)); }, "buffer overflow by memset");
  EXPECT_STOPS({ char* p = (char*)mi_malloc(dyn(64)); memset(opaque(p), 0, dyn(64 + 4096)); }, "buffer overflow by memset");   // by a page
  if (MI_TEST_SECURE >= FULL) {
    // the size asked for, not the block's, and freed blocks
    EXPECT_STOPS({ char* p = (char*)mi_malloc(dyn(100)); memcpy(opaque(p), opaque(src), dyn(101)); },
                 "buffer overflow by memcpy: 101 bytes at .* run 1 bytes past the end of heap block .* of size 100");
    EXPECT_STOPS({ char* p = (char*)mi_malloc(dyn(100)); memmove(opaque(p) + 50, p, dyn(60)); }, "buffer overflow by memmove");
    EXPECT_STOPS({ char* p = (char*)mi_malloc(dyn(5000)); memset(opaque(p) + 1000, 0, dyn(4032)); }, "buffer overflow by memset");
    EXPECT_STOPS({ char* p = (char*)mi_malloc(dyn(64)); mi_free(p); memset(opaque(p), 0, dyn(16)); }, "write after free: memset of 16 bytes");
  }
  for (size_t n : { 1, 24, 100, 5000, 300000 }) {   // within bounds: nothing to say
    char* p = (char*)mi_malloc(dyn(n));
    memset(opaque(p), 1, dyn(n));
    memcpy(p, src, dyn(n < sizeof(src) ? n : sizeof(src)));
    memmove(p + n / 2, p, dyn(n - n / 2));
    char* a = (char*)mi_malloc_aligned(dyn(n), 64);
    memset(opaque(a), 2, dyn(n));
    mi_free(a);
    mi_free(p);
  }
}

// Heap memory is never executable (any build).
TEST(Secure, HeapMemoryIsNotExecutable) {
  void* small = mi_malloc(dyn(64));
  void* huge = mi_malloc(dyn(8 * MiB));
  for (void* p : { small, huge }) {
    const std::string perms = os_mapping_perms(p);   // ("rw-p": /proc/self/maps, or VirtualQuery)
    ASSERT_EQ(perms.size(), 4u) << p << " is not mapped";
    EXPECT_EQ(perms[2], '-') << p << ": " << perms;
  }
  mi_free(small);
  mi_free(huge);
}

}  // namespace
