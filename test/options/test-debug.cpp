/* ----------------------------------------------------------------------------
  test-debug.cpp -- what the debug build detects,
  each provoked in a child process with the default error handler, checking
  the exact message on stderr and how the child ends:

    buffer overflow      "buffer overflow in heap block <p> of size <n>:
                         write after <k> bytes", then abort (EFAULT)
    double free          "double free detected of block <p> with size <s>",
                         the free is ignored and the program goes on
    corrupted free list  "corrupted free list entry of size <s>b at <p>:
                         value 0x...", then abort (EFAULT)
    foreign pointer      "mi_free: invalid pointer (not allocated by
                         mimalloc): <p>", ignored
    unaligned pointer    "mi_free: invalid (unaligned) pointer: <p>", ignored
    mi_usable_size       the same checks under its own name
    fill patterns        fresh blocks 0xD0, the padding after the request
                         0xDE, freed blocks 0xDF

  Release builds have none of these checks: the tests skip there (detected
  at run time: only debug builds make mi_usable_size exact).
-----------------------------------------------------------------------------*/
#include <gtest/gtest.h>
#include <mimalloc.h>

#include <cstdint>
#include <string>
#include <thread>

#include "options-util.h"

using namespace mitest;

#define SKIP_IN_RELEASE()                                                        \
  do {                                                                           \
    if (!is_debug_build()) GTEST_SKIP() << "a debug-build check (release builds do not detect this)"; \
  } while (0)

namespace {

// The size class a debug build uses for a request of n bytes (n + padding).
size_t debug_block_size(size_t n) { return mi_good_size(n + kPaddingSize); }

std::string error_line(const std::string& text) { return "mimalloc: error: " + text + "\n"; }

bool aborted(const ChildResult& r) { return r.aborted(); }

uint64_t g_static_words[64];

}  // namespace

// ------------------------------------------------------
// Child scenarios
// ------------------------------------------------------

// Write one byte at offset argv[0] of a 13-byte block, then free it
// (argv[1] == "remote": free it from another thread).
MI_CHILD(overflow) {
  const size_t at = (size_t)(argc > 0 ? strtol(argv[0], nullptr, 10) : 13);
  const bool remote = (argc > 1 && strcmp(argv[1], "remote") == 0);
  void* keep = mi_malloc(dyn(13));
  uint8_t* p = opaque((uint8_t*)mi_malloc(dyn(13)));
  emit_ptr("p", p);
  p[dyn(at)] = 'x';
  if (remote) {
    std::thread t([p] { mi_free(p); });
    t.join();
  }
  else {
    mi_free(p);
  }
  emit("survived", 1);
  mi_free(keep);
  return 0;
}

MI_CHILD(double_free) {
  (void)argc; (void)argv;
  void* keep = mi_malloc(dyn(32));
  void* p = mi_malloc(dyn(32));
  emit_ptr("p", p);
  mi_free(p);
  mi_free(p);
  // ignored: the block is on the free list once, so two allocations differ
  void* a = mi_malloc(dyn(32));
  void* b = mi_malloc(dyn(32));
  emit("distinct", opaque(a) != opaque(b));
  emit("continued", 1);
  mi_free(a);
  mi_free(b);
  mi_free(keep);
  return 0;
}

// Write into a freed block (over its free-list link), then allocate until
// the block comes back.
MI_CHILD(corrupt_free_list) {
  (void)argc; (void)argv;
  const size_t size = 200;
  void* keep = mi_malloc(dyn(size));
  uint64_t* p = opaque((uint64_t*)mi_malloc(dyn(size)));
  emit_ptr("p", p);
  mi_free(p);
  p[0] = 0x4141414141414141ULL;   // use after free
  static void* blocks[20000];
  for (size_t i = 0; i < 20000; i++) blocks[i] = mi_malloc(dyn(size));
  emit("survived", 1);
  for (size_t i = 0; i < 20000; i++) mi_free(blocks[i]);
  mi_free(keep);
  return 0;
}

// argv[0]: "static" (a pointer into our own data) or "mapped" (into a private
// mapping at a 4 MiB-aligned address, safe to free even in release builds).
MI_CHILD(foreign_free) {
  const bool mapped = (argc > 0 && strcmp(argv[0], "mapped") == 0);
  uint8_t* p;
  if (mapped) {
    const size_t size = 12 * MiB;
    void* base = map_private(size);
    if (base == nullptr) return 2;
    p = (uint8_t*)(((uintptr_t)base + 4 * MiB - 1) & ~(uintptr_t)(4 * MiB - 1)) + 64;
  }
  else {
    p = (uint8_t*)&g_static_words[8];
  }
  memset(p - 64, 0x77, 128);
  emit_ptr("p", p);
  mi_free(p);
  bool untouched = true;
  for (int i = -64; i < 64; i++) untouched = untouched && (p[i] == 0x77);
  emit("untouched", untouched);
  emit("continued", 1);
  return 0;
}

MI_CHILD(unaligned_free) {
  (void)argc; (void)argv;
  void* keep = mi_malloc(dyn(32));
  uint8_t* p = opaque((uint8_t*)mi_malloc(dyn(32)));
  memset(p, 0x33, 32);
  emit_ptr("q", p + 1);
  mi_free(p + 1);
  emit("continued", 1);
  // the block is still allocated: intact, and its own free is no double free
  bool intact = true;
  for (int i = 0; i < 32; i++) intact = intact && (p[i] == 0x33);
  emit("intact", intact);
  emit("usable", (long long)mi_usable_size(p));
  mi_free(p);
  mi_free(keep);
  return 0;
}

// mi_usable_size of an unaligned pointer (argv[0] == "unaligned") or of a
// pointer into our own data ("static").
MI_CHILD(usable_size_invalid) {
  const bool unaligned = (argc > 0 && strcmp(argv[0], "unaligned") == 0);
  void* keep = mi_malloc(dyn(32));
  uint8_t* p = opaque((uint8_t*)mi_malloc(dyn(32)));
  uint8_t* q = (unaligned ? p + 1 : (uint8_t*)&g_static_words[8]);
  emit_ptr("q", q);
  emit("usable", (long long)mi_usable_size(q));
  emit("continued", 1);
  mi_free(p);
  mi_free(keep);
  return 0;
}

// ------------------------------------------------------
// Tests
// ------------------------------------------------------

TEST(DebugDetect, BufferOverflowRightAfterTheRequest) {
  SKIP_IN_RELEASE();
  ChildResult r = run_child("overflow", {}, { "13" });
  EXPECT_TRUE(aborted(r)) << r.describe();
  EXPECT_FALSE(r.has("survived")) << r.describe();
  const std::string msg = error_line("buffer overflow in heap block " + r.str("p") + " of size 13: write after 13 bytes");
  EXPECT_EQ(count_occurrences(r.err, msg), 1u) << msg << r.describe();
}

TEST(DebugDetect, BufferOverflowFurtherOn) {
  SKIP_IN_RELEASE();
  ChildResult r = run_child("overflow", {}, { "20" });
  EXPECT_TRUE(aborted(r)) << r.describe();
  const std::string msg = error_line("buffer overflow in heap block " + r.str("p") + " of size 13: write after 20 bytes");
  EXPECT_EQ(count_occurrences(r.err, msg), 1u) << msg << r.describe();
}

TEST(DebugDetect, BufferOverflowFreedByAnotherThread) {
  SKIP_IN_RELEASE();
  ChildResult r = run_child("overflow", {}, { "13", "remote" });
  EXPECT_TRUE(aborted(r)) << r.describe();
  const std::string msg = error_line("buffer overflow in heap block " + r.str("p") + " of size 13: write after 13 bytes");
  EXPECT_EQ(count_occurrences(r.err, msg), 1u) << msg << r.describe();
}

TEST(DebugDetect, NoOverflowNoMessage) {
  // writing every requested byte is fine (and the control for the above)
  SKIP_IN_RELEASE();
  ChildResult r = run_child("overflow", {}, { "12" });
  EXPECT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(r.err, "") << r.describe();
}

TEST(DebugDetect, DoubleFreeIsReportedAndIgnored) {
  SKIP_IN_RELEASE();
  ChildResult r = run_child("double_free");
  EXPECT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(r.num("continued"), 1) << r.describe();
  EXPECT_EQ(r.num("distinct"), 1) << r.describe();
  const std::string msg = error_line("double free detected of block " + r.str("p") + " with size " +
                                     std::to_string(debug_block_size(32)));
  EXPECT_EQ(r.err, msg) << r.describe();
}

TEST(DebugDetect, CorruptedFreeList) {
  SKIP_IN_RELEASE();
  ChildResult r = run_child("corrupt_free_list");
  EXPECT_TRUE(aborted(r)) << r.describe();
  EXPECT_FALSE(r.has("survived")) << r.describe();
  const std::string msg = "mimalloc: error: corrupted free list entry of size " + std::to_string(debug_block_size(200)) +
                          "b at " + r.str("p") + ": value 0x";
  EXPECT_NE(r.err.find(msg), std::string::npos) << msg << "\n" << r.describe();
}

TEST(DebugDetect, ForeignPointerIsReportedAndIgnored) {
  SKIP_IN_RELEASE();   // a release build may read the pointer's segment address
  ChildResult r = run_child("foreign_free", {}, { "static" });
  EXPECT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(r.num("untouched"), 1) << r.describe();
  EXPECT_EQ(r.err, error_line("mi_free: invalid pointer (not allocated by mimalloc): " + r.str("p"))) << r.describe();
}

TEST(DebugDetect, ForeignMappedPointerInEveryBuild) {
  // the segment map check of the generic free path exists in release builds
  // too (secure builds stop at it unless told to go on)
  ChildResult r = run_child("foreign_free", { "MIMALLOC_SHOW_ERRORS=1", "MIMALLOC_SECURE_CONTINUE=1" }, { "mapped" });
  EXPECT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(r.num("untouched"), 1) << r.describe();
  EXPECT_EQ(r.err, error_line("mi_free: invalid pointer (not allocated by mimalloc): " + r.str("p"))) << r.describe();
}

TEST(DebugDetect, UnalignedPointerIsReportedAndIgnored) {
  SKIP_IN_RELEASE();
  ChildResult r = run_child("unaligned_free");
  EXPECT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(r.num("continued"), 1) << r.describe();
  EXPECT_EQ(r.num("intact"), 1) << r.describe();
  EXPECT_EQ(r.num("usable"), 32) << r.describe();
  EXPECT_EQ(r.err, error_line("mi_free: invalid (unaligned) pointer: " + r.str("q"))) << r.describe();
}

// In debug builds mi_usable_size and mi_free_size run the same checks, with
// their own function names in the messages.
TEST(DebugDetect, UsableSizeOfAnUnalignedPointer) {
  SKIP_IN_RELEASE();
  ChildResult r = run_child("usable_size_invalid", {}, { "unaligned" });
  EXPECT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(r.num("usable"), 0) << r.describe();
  EXPECT_EQ(r.err, error_line("mi_usable_size: invalid (unaligned) pointer: " + r.str("q"))) << r.describe();
}

TEST(DebugDetect, UsableSizeOfAForeignPointer) {
  SKIP_IN_RELEASE();
  ChildResult r = run_child("usable_size_invalid", {}, { "static" });
  EXPECT_TRUE(r.exited && r.code == 0) << "must not crash\n" << r.describe();
  EXPECT_EQ(r.num("usable"), 0) << r.describe();
  EXPECT_TRUE(starts_with(r.err, "mimalloc: error: mi_usable_size: ")) << r.describe();
  EXPECT_NE(r.err.find(r.str("q")), std::string::npos) << r.describe();
}

TEST(DebugFill, FreshBlocksRead0xD0) {
  SKIP_IN_RELEASE();
  const size_t sizes[] = { 1, 8, 13, 64, 1000, 5000, 20000, 100 * KiB, 1 * MiB };
  for (size_t n : sizes) {
    uint8_t* p = opaque((uint8_t*)mi_malloc(dyn(n)));
    ASSERT_NE(p, nullptr);
    size_t bad = n;
    for (size_t i = 0; i < n; i++) {
      if (p[i] != 0xD0) { bad = i; break; }
    }
    EXPECT_EQ(bad, n) << "size " << n << ": byte " << bad << " is not 0xD0";
    mi_free(p);
  }
}

TEST(DebugFill, PaddingAfterTheRequestReads0xDE) {
  SKIP_IN_RELEASE();
  // 13 bytes in a 32-byte block: 24 usable, 8 trailer; bytes 13..23 are fill
  uint8_t* p = opaque((uint8_t*)mi_malloc(dyn(13)));
  ASSERT_EQ(debug_block_size(13), 32u);
  for (size_t i = 13; i < 24; i++) EXPECT_EQ(p[i], 0xDE) << "byte " << i;
  mi_free(p);
}

TEST(DebugFill, FreedBlocksRead0xDF) {
  SKIP_IN_RELEASE();
  const size_t sizes[] = { 64, 1000, 5000, 100 * KiB };
  for (size_t n : sizes) {
    void* keep = mi_malloc(dyn(n));   // the page stays in use
    uint8_t* p = opaque((uint8_t*)mi_malloc(dyn(n)));
    memset(p, 0x11, n);
    mi_free(p);
    // the first word is the free-list link
    size_t bad = n;
    for (size_t i = sizeof(void*); i < n; i++) {
      if (p[i] != 0xDF) { bad = i; break; }
    }
    EXPECT_EQ(bad, n) << "size " << n << ": byte " << bad << " is not 0xDF";
    mi_free(keep);
  }
}

TEST(DebugFill, ZeroedAllocationsAreZero) {
  // the fill never leaks into calloc/zalloc (in every build)
  const size_t sizes[] = { 8, 64, 1000, 5000, 100 * KiB };
  for (size_t n : sizes) {
    uint8_t* p = opaque((uint8_t*)mi_zalloc(dyn(n)));
    uint8_t* q = opaque((uint8_t*)mi_calloc(dyn(n), 1));
    bool zero = true;
    for (size_t i = 0; i < n; i++) zero = zero && p[i] == 0 && q[i] == 0;
    EXPECT_TRUE(zero) << "size " << n;
    mi_free(p);
    mi_free(q);
  }
}
