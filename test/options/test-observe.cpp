/* ----------------------------------------------------------------------------
  test-observe.cpp -- statistics as data and the heap profiler, in process:

  - mi_stats_get: version and size, a smaller (older) caller gets a prefix
    and nothing past it is written;
  - mi_stats_get_json: a buffer too small is ERANGE (and an empty string),
    NULL gives a block to mi_free, the object has its fields;
  - the profiler (mi_option_prof_sample, read by a heap at its first
    allocation): sampled blocks are tracked until freed, by the allocating
    thread or another one; mi_heap_destroy forgets the samples of its pages;
    nothing is sampled while the option is 0; mi_prof_dump reports bad paths.
  The profile's content and `go tool pprof` are tested by test/observe.
-----------------------------------------------------------------------------*/
#include <gtest/gtest.h>
#include <mimalloc.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "options-util.h"

using namespace mitest;

namespace {

TEST(StatsGet, FillsVersionAndSize) {
  void* p = mi_malloc(dyn(100000));
  mi_stats_snapshot_t st;
  memset(&st, 0, sizeof(st));
  mi_stats_get(sizeof(st), &st);
  EXPECT_EQ(st.version, MI_STATS_VERSION);
  EXPECT_EQ(st.size, sizeof(st));
  EXPECT_GT(st.reserved.current, 0);
  EXPECT_GE(st.reserved.current, st.committed.current);
  EXPECT_GT(st.segments.current, 0);
  EXPECT_LE(st.segments.current, st.segments.peak);
  EXPECT_GT(st.elapsed_msecs + st.current_rss, 0u);
  EXPECT_EQ(st.per_allocation, is_debug_build());
  EXPECT_EQ(st.bin_block_size[0], 8u);
  EXPECT_EQ(st.bin_block_size[MI_STATS_BINS - 1], 0u);   // the huge class has no one size
  mi_free(p);
}

TEST(StatsGet, AnOlderCallerGetsAPrefix) {
  const size_t older = offsetof(mi_stats_snapshot_t, committed);   // a caller that knows fewer fields
  std::vector<unsigned char> buf(sizeof(mi_stats_snapshot_t) + 16, 0xAB);
  mi_stats_get(older, reinterpret_cast<mi_stats_snapshot_t*>(buf.data()));
  mi_stats_snapshot_t st;
  memcpy(&st, buf.data(), sizeof(st));
  EXPECT_EQ(st.version, MI_STATS_VERSION);
  EXPECT_EQ(st.size, older);
  for (size_t i = older; i < buf.size(); i++) ASSERT_EQ(buf[i], 0xAB) << "byte " << i << " written";
  mi_stats_get(0, nullptr);   // nothing to fill: no crash
}

TEST(StatsJson, TooSmallABufferIsErange) {
  char buf[64];
  memset(buf, 'x', sizeof(buf));
  errno = 0;
  EXPECT_EQ(mi_stats_get_json(sizeof(buf), buf), nullptr);
  EXPECT_EQ(errno, ERANGE);
  EXPECT_EQ(buf[0], 0);
  errno = 0;
  EXPECT_EQ(mi_stats_get_json(0, buf), nullptr);
  EXPECT_EQ(errno, ERANGE);
}

TEST(StatsJson, NullBufferGivesABlockToFree) {
  char* json = mi_stats_get_json(0, nullptr);
  ASSERT_NE(json, nullptr);
  const std::string s(json);
  EXPECT_TRUE(mi_check_owned(json));
  EXPECT_EQ(s.substr(0, 2), "{\n");
  EXPECT_EQ(s.substr(s.size() - 2), "}\n");
  for (const char* field : { "\"version\": 1", "\"reserved\": {\"unit\": \"bytes\", \"current\": ", "\"bins\": [",
                             "\"process\": {\"pid\": ", "\"prof\": {\"sample_bytes\": " }) {
    EXPECT_NE(s.find(field), std::string::npos) << field << "\n" << s;
  }
  mi_free(json);
}

// Sets mi_option_prof_sample for a test; heaps created meanwhile (new
// threads' heaps, mi_heap_new) read it at their first allocation.
class ProfSample : public ::testing::Test {
 protected:
  // (the background purge thread is kept from starting meanwhile: creating
  // it allocates, through malloc, blocks that live on and may be sampled)
  void SetUp() override {
    saved_ = mi_option_get(mi_option_prof_sample);
    saved_purge_ = mi_option_get(mi_option_background_purge);
    mi_option_disable(mi_option_background_purge);
  }
  void TearDown() override {
    mi_option_set(mi_option_prof_sample, saved_);
    mi_option_set(mi_option_background_purge, saved_purge_);
  }
  long saved_ = 0;
  long saved_purge_ = 0;
};

// Statistics of the profiler: sampled blocks not yet freed.
size_t live_samples() {
  mi_stats_snapshot_t st;
  mi_stats_get(sizeof(st), &st);
  return st.prof_live_samples;
}

TEST_F(ProfSample, BlocksAreTrackedUntilFreedByAnyThread) {
  mi_option_set(mi_option_prof_sample, 4096);
  const size_t before = live_samples();
  std::vector<void*> blocks(2000);
  std::thread([&] {
    for (auto& p : blocks) p = mi_malloc(dyn(1024));   // ~500 samples expected
  }).join();
  const size_t during = live_samples();
  EXPECT_GT(during, before + 100) << "expected about 500 samples";
  EXPECT_LT(during, before + 1000);
  std::thread([&] {
    for (size_t i = 0; i < blocks.size(); i += 2) mi_free(blocks[i]);   // half by a third thread
  }).join();
  for (size_t i = 1; i < blocks.size(); i += 2) mi_free(blocks[i]);     // half by this one
  EXPECT_EQ(live_samples(), before);
}

TEST_F(ProfSample, HeapDestroyForgetsItsSamples) {
  mi_option_set(mi_option_prof_sample, 4096);
  const size_t before = live_samples();
  std::thread([&] {
    mi_heap_t* heap = mi_heap_new();
    ASSERT_NE(heap, nullptr);
    for (int i = 0; i < 2000; i++) ASSERT_NE(mi_heap_malloc(heap, dyn(1024)), nullptr);
    EXPECT_GT(live_samples(), before + 100);
    mi_heap_destroy(heap);   // frees every block without a free call
    EXPECT_EQ(live_samples(), before);
  }).join();
}

TEST_F(ProfSample, NothingIsSampledWhileOff) {
  mi_option_set(mi_option_prof_sample, 0);
  const size_t before = live_samples();
  std::vector<void*> blocks(4000);
  std::thread([&] {
    for (auto& p : blocks) p = mi_malloc(dyn(1024));
    EXPECT_EQ(live_samples(), before);
    for (auto& p : blocks) mi_free(p);
  }).join();
}

TEST(ProfDump, BadPathsAreReported) {
  errno = 0;
  EXPECT_EQ(mi_prof_dump(nullptr), EINVAL);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(mi_prof_dump(""), EINVAL);
  errno = 0;
  EXPECT_EQ(mi_prof_dump("/nonexistent-directory/profile.pb.gz"), ENOENT);
  EXPECT_EQ(errno, ENOENT);
}

}  // namespace
