// Fresh huge blocks are faulted in at once (one system call) while the program
// uses its huge blocks densely, and left to fault on touch while it uses them
// sparsely: every fourth fresh huge block is a probe, never populated, whose
// resident share when freed decides for the blocks that follow. One decision
// populates at most 64 MiB of a block; the rest of a bigger block is measured
// when it is freed.
//
// Linux only: populating (MADV_POPULATE_WRITE) has no counterpart on Windows,
// where the library's populate answers ENOSYS and fresh pages fault on first
// touch (docs/windows.md); there every test here skips.
#include <gtest/gtest.h>

#include "api-util.h"

namespace {

using namespace mitest;

constexpr size_t kBlock = 24 * MiB;   // a huge block (own segment)

// Resident bytes of the whole pages inside [p, p + n).
size_t resident(void* p, size_t n) { return os_resident_bytes(p, n); }

bool mostly_resident(void* p) { return resident(p, kBlock) >= kBlock / 4 * 3; }

// Skips the test where fresh memory cannot be populated.
#define SKIP_WITHOUT_POPULATE()                                                                   \
  do {                                                                                            \
    if (kWindows) GTEST_SKIP() << "Linux only: fresh huge blocks are populated with "               \
                                  "MADV_POPULATE_WRITE; on Windows the library's populate answers " \
                                  "ENOSYS and fresh pages fault on first touch";                    \
    if (!os_can_populate()) GTEST_SKIP() << "the kernel has no MADV_POPULATE_WRITE (Linux < 5.14)"; \
  } while (0)

// Allocate `n` fresh huge blocks (everything freed before was purged by a
// forced collect, so none reuses resident memory); count those resident at once.
// `populated` (if given) receives the resident ones.
int alloc_fresh(std::vector<void*>& blocks, int n, bool zeroed, std::vector<void*>* populated = nullptr) {
  int count = 0;
  for (int i = 0; i < n; i++) {
    void* p = (zeroed ? mi_calloc(1, kBlock) : mi_malloc(kBlock));
    if (p == nullptr) return -1;
    if (mostly_resident(p)) {
      count++;
      if (populated != nullptr) populated->push_back(p);
    }
    blocks.push_back(p);
  }
  return count;
}

void free_all(std::vector<void*>& blocks) {
  for (void* p : blocks) mi_free(p);
  blocks.clear();
  mi_collect(true);   // the freed blocks' memory is purged: the next ones are fresh
}

TEST(Populate, FollowsHowTheProgramUsesItsHugeBlocks) {
  SKIP_WITHOUT_POPULATE();
  std::vector<void*> blocks;
  mi_collect(true);

  // Four fresh blocks freed untouched: one of them is a probe, so from now
  // on the program counts as sparse.
  ASSERT_GE(alloc_fresh(blocks, 4, false), 0);
  free_all(blocks);

  // Sparse: a fresh block is a probe and not populated.
  void* probe = mi_malloc(kBlock);
  ASSERT_NE(probe, nullptr);
  if (mostly_resident(probe)) {
    mi_free(probe);
    GTEST_SKIP() << "this build writes every block it hands out (debug fill)";
  }
  // The program uses it densely, and frees it.
  memset(opaque(probe), 0x5a, kBlock);
  mi_free(probe);
  mi_collect(true);

  // Dense: of four fresh blocks, the three that are not a probe are resident
  // at once, and calloc's memory still reads as zero (the probe is not read:
  // reading touches its pages).
  std::vector<void*> populated;
  EXPECT_EQ(alloc_fresh(blocks, 4, true, &populated), 3);
  for (void* p : populated) {
    const unsigned char* b = (const unsigned char*)opaque(p);
    for (size_t ofs = 0; ofs < kBlock; ofs += 4093) ASSERT_EQ(b[ofs], 0) << "at offset " << ofs;
    ASSERT_EQ(b[kBlock - 1], 0);
  }
  // Freed untouched (the probe among them unread too): sparse again, and
  // nothing fresh is populated.
  for (void* p : blocks) mi_free(p);
  blocks.clear();
  mi_collect(true);
  EXPECT_EQ(alloc_fresh(blocks, 4, false), 0);
  free_all(blocks);
}

// Make the program count as dense: a fresh block used densely and freed.
// False if this build writes every block it hands out (debug fill).
bool make_dense() {
  std::vector<void*> blocks;
  mi_collect(true);
  void* probe = nullptr;
  // fresh blocks until one is a probe (not resident when handed out)
  for (int i = 0; i < 8 && probe == nullptr; i++) {
    void* p = mi_malloc(kBlock);
    if (p == nullptr) return false;
    if (!mostly_resident(p)) probe = p; else blocks.push_back(p);
  }
  if (probe == nullptr) { free_all(blocks); return false; }
  memset(opaque(probe), 0x5a, kBlock);
  blocks.push_back(probe);
  free_all(blocks);
  return true;
}

// A sparse table after dense buffers: a 1 GiB calloc with a few bytes used
// must not become resident (it was populated whole: 1 GiB resident and a
// third of a second inside calloc; 8 GiB took 8.8 s, or an out-of-memory kill).
TEST(Populate, ABigSparseBlockAfterDenseOnesStaysMostlyLazy) {
  SKIP_WITHOUT_POPULATE();
  if (!make_dense()) GTEST_SKIP() << "this build writes every block it hands out (debug fill)";
  constexpr size_t kBig = 1024 * MiB;
  // four in a row, so that blocks that are not a probe are among them
  std::vector<void*> tables;
  for (int i = 0; i < 4; i++) {
    unsigned char* t = (unsigned char*)mi_calloc(1, kBig);
    ASSERT_NE(t, nullptr);
    t[12345] = 1;   // a few live entries
    t[kBig / 2] = 2;
    EXPECT_LE(resident(t, kBig), 128 * MiB) << "table " << i;
    EXPECT_EQ(t[kBig - 1], 0);
    tables.push_back(t);
  }
  // freed sparse: the program counts as sparse again, nothing fresh is populated
  free_all(tables);
  std::vector<void*> blocks;
  EXPECT_EQ(alloc_fresh(blocks, 4, false), 0);
  free_all(blocks);
}

// A block bigger than what is populated at once tells by its tail. Four
// fresh big blocks while dense: one is a probe (its head is not resident),
// the others have their head populated. The probe is freed first, the others
// after it, so the verdict that follows is their tails'.
void big_blocks_then_freed(bool tails_written) {
  constexpr size_t kBig = 160 * MiB;
  std::vector<void*> big;
  void* probe = nullptr;
  for (int i = 0; i < 4; i++) {
    void* p = mi_malloc(kBig);
    ASSERT_NE(p, nullptr);
    if (probe == nullptr && resident(p, 64 * MiB) < 32 * MiB) probe = p;
    else big.push_back(p);
  }
  ASSERT_NE(probe, nullptr);
  ASSERT_EQ(big.size(), 3u);
  // the probe is used the other way round
  if (!tails_written) memset(opaque(probe), 0x33, kBig);
  mi_free(probe);
  for (void* p : big) if (tails_written) memset(opaque(p), 0x33, kBig);
  free_all(big);
}

TEST(Populate, TheTailOfABigBlockIsMeasured) {
  SKIP_WITHOUT_POPULATE();
  if (!make_dense()) GTEST_SKIP() << "this build writes every block it hands out (debug fill)";
  std::vector<void*> blocks;
  // tails left untouched (the probe written whole): sparse
  big_blocks_then_freed(false);
  EXPECT_EQ(alloc_fresh(blocks, 4, false), 0);
  free_all(blocks);
  // written whole (the probe untouched): dense. While sparse every fresh block
  // is a probe: make the program dense first.
  ASSERT_TRUE(make_dense());
  big_blocks_then_freed(true);
  EXPECT_EQ(alloc_fresh(blocks, 4, false), 3);
  free_all(blocks);
}

}  // namespace
