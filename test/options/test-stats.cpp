/* ----------------------------------------------------------------------------
  test-stats.cpp -- statistics and mi_process_info:

  - the layout of mi_stats_print_out: the header, the per-size-class rows
    and the normal/huge/giant/total block with 'malloc requested' (debug
    builds only), and the rows every build prints, in order, with their
    column widths;
  - the figures add up: nothing negative, peak >= current, freed <= total,
    committed <= reserved, everything allocated comes back;
  - mi_stats_reset, mi_stats_merge, mi_thread_stats_print_out (only the
    calling thread's figures);
  - mi_process_info: any out-pointer may be NULL, rss and commit figures are
    consistent, time grows.
-----------------------------------------------------------------------------*/
#include <gtest/gtest.h>
#include <mimalloc.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "options-util.h"

using namespace mitest;

namespace {

// The rows every build prints after the size-class part, in order.
const char* const kMainRows[] = {
  "  reserved", " committed", "     reset", "   touched", "  segments", "-abandoned", "   -cached",
  "     pages", "-abandoned", " -extended", "  -retired", "     mmaps", "   commits", "   threads",
  "  searches", "numa nodes", "   elapsed", "   process",
};
const char* const kByteRows[] = { "reserved", "committed", "reset", "touched" };
const char* const kCountRows[] = { "segments", "-abandoned", "-cached", "pages", "threads" };   // -abandoned twice
const char* const kCounterRows[] = { "-extended", "-retired", "mmaps", "commits" };

const std::string kHeader = "heap stats:     peak      total      freed       unit      count  ";

const std::regex kByteAmount("^ *(0|[1-9][0-9]*) b$|^ *[0-9]+\\.[0-9] [kmg]b$");
const std::regex kCountAmount("^ *(0|[1-9][0-9]*)$|^ *[0-9]+\\.[0-9] [kmg]$");

// Column `i` (11 characters each) after the 11-character label.
std::string column(const std::string& line, size_t i) {
  const size_t at = 11 + 11 * i;
  return (line.size() >= at + 11 ? line.substr(at, 11) : std::string());
}

// Amounts are printed truncated to one decimal of their magnitude: allow 10%.
bool approx_le(double a, double b) { return a <= b * 1.1 + 1; }

// The statistics of every row of `st` are consistent.
void expect_consistent(const Stats& st, const std::string& what) {
  for (const auto& row : st.rows) {
    EXPECT_FALSE(row.negative) << what << ": negative amount in\n" << row.line;
  }
  for (const char* label : kCountRows) {
    const int count = (std::string(label) == "-abandoned" ? 2 : 1);
    for (int k = 0; k < count; k++) {
      const StatRow* row = st.find(label, k);
      ASSERT_NE(row, nullptr) << what << ": no row " << label << "\n" << st.text;
      ASSERT_GE(row->values.size(), 3u) << row->line;
      const double peak = row->values[0], total = row->values[1], freed = row->values[2];
      EXPECT_GE(total, freed) << what << ": " << row->line;
      EXPECT_GE(peak, total - freed) << what << ": " << row->line;
      EXPECT_GE(peak, 0) << what << ": " << row->line;
      EXPECT_EQ(row->ok, total <= freed) << what << ": " << row->line;
      EXPECT_EQ(row->not_all_freed, total > freed) << what << ": " << row->line;
    }
  }
  for (const char* label : kByteRows) {
    const StatRow* row = st.find(label);
    ASSERT_NE(row, nullptr) << what << ": no row " << label << "\n" << st.text;
    ASSERT_GE(row->values.size(), 4u) << row->line;
    const double peak = row->values[0], total = row->values[1], freed = row->values[2];
    EXPECT_TRUE(approx_le(freed, total)) << what << ": " << row->line;
    // (the table rounds each figure to a tenth of its unit, so a difference of
    // two large figures may be off by 5% of their sum)
    EXPECT_TRUE(approx_le(total - freed - 0.05 * (total + freed), peak)) << what << ": " << row->line;
    EXPECT_EQ(row->values[3], 1) << what << ": unit of " << row->line;
  }
  // committed memory is reserved memory
  EXPECT_TRUE(approx_le(st.get("committed", 0), st.get("reserved", 0))) << what << "\n" << st.text;
  EXPECT_TRUE(approx_le(st.current("committed"), st.current("reserved") + 1e6)) << what << "\n" << st.text;
}

bool run_ok(ChildResult* r, const std::string& scenario, const std::vector<std::string>& env = {},
            const std::vector<std::string>& args = {}) {
  *r = run_child(scenario, env, args);
  EXPECT_TRUE(r->exited && r->code == 0) << r->describe();
  return (r->exited && r->code == 0);
}

// The statistics a child printed between "<<tag>>" and "<</tag>>" on stdout.
Stats child_stats(const ChildResult& r, const std::string& tag) {
  const std::string open = "<<" + tag + ">>\n", close = "<</" + tag + ">>\n";
  const size_t a = r.out.find(open);
  const size_t b = r.out.find(close);
  if (a == std::string::npos || b == std::string::npos || b < a) {
    ADD_FAILURE() << "no statistics '" << tag << "' from the child\n" << r.describe();
    return parse_stats("");
  }
  return parse_stats(r.out.substr(a + open.size(), b - a - open.size()));
}

// A bin row ("normal <bin>") whose unit is `block_size`; nullptr if none.
const StatRow* bin_row(const Stats& st, size_t block_size) {
  for (const auto& row : st.rows) {
    if (starts_with(row.label, "normal ") && row.values.size() >= 5 && row.values[3] == (double)block_size) return &row;
  }
  return nullptr;
}

// Child side: print statistics (taken earlier into `text`) between markers.
void emit_stats(const char* tag, const char* text) {
  printf("<<%s>>\n%s<</%s>>\n", tag, text, tag);
  fflush(stdout);
}

char g_text[6][16384];
std::atomic<int> g_step(0);

void wait_step(int s) {
  while (g_step.load() < s) sleep_ms(1);
}

void capture_into(char* buf, bool thread_only) {
  // into a static buffer: printing must not allocate
  struct Sink { char* buf; size_t len; };
  static Sink sink;
  sink.buf = buf;
  sink.len = 0;
  buf[0] = 0;
  auto fn = [](const char* msg, void* arg) {
    Sink* s = (Sink*)arg;
    const size_t n = strlen(msg);
    if (s->len + n + 1 < 16384) { memcpy(s->buf + s->len, msg, n + 1); s->len += n; }
  };
  if (thread_only) mi_thread_stats_print_out(fn, &sink);
  else mi_stats_print_out(fn, &sink);
}

}  // namespace

// ------------------------------------------------------
// Child scenarios
// ------------------------------------------------------

// Statistics before, during and after a workload of every block kind.
MI_CHILD(stats_figures) {
  (void)argc; (void)argv;
  static void* small[1000];
  static void* medium[100];
  static void* large[10];
  static void* huge[3];
  capture_into(g_text[0], false);
  for (auto& p : small) p = mi_malloc(dyn(64));
  for (auto& p : medium) p = mi_malloc(dyn(50 * KiB));
  for (auto& p : large) p = mi_malloc(dyn(1 * MiB));
  for (auto& p : huge) { p = mi_malloc(dyn(5 * MiB)); memset(opaque(p), 1, 5 * MiB); }
  capture_into(g_text[1], false);
  for (auto& p : small) mi_free(p);
  for (auto& p : medium) mi_free(p);
  for (auto& p : large) mi_free(p);
  for (auto& p : huge) mi_free(p);
  mi_collect(true);
  capture_into(g_text[2], false);
  emit_stats("start", g_text[0]);
  emit_stats("live", g_text[1]);
  emit_stats("done", g_text[2]);
  emit("requested", (long long)(1000 * 64 + 100 * 50 * KiB + 10 * MiB + 3 * 5 * MiB));
  emit("small_block", (long long)mi_good_size(64 + (is_debug_build() ? kPaddingSize : 0)));
  return 0;
}

MI_CHILD(stats_reset) {
  (void)argc; (void)argv;
  static void* blocks[2000];
  for (auto& p : blocks) p = mi_malloc(dyn(1000));
  for (size_t i = 0; i < 2000; i += 2) mi_free(blocks[i]);
  sleep_ms(100);
  capture_into(g_text[0], false);
  mi_stats_reset();
  capture_into(g_text[1], false);
  for (size_t i = 1; i < 2000; i += 2) mi_free(blocks[i]);
  mi_collect(true);
  capture_into(g_text[2], false);
  emit_stats("before", g_text[0]);
  emit_stats("reset", g_text[1]);
  emit_stats("after", g_text[2]);
  return 0;
}

// main allocates 1000 blocks of 100 bytes; a thread that allocates nothing
// (so has no heap of its own) frees them all; then the process's figures.
MI_CHILD(stats_heapless_free) {
  (void)argc; (void)argv;
  static void* blocks[1000];
  for (auto& p : blocks) p = mi_malloc(dyn(100));
  std::thread t([] {
    for (auto& p : blocks) mi_free(p);
  });
  t.join();
  capture_into(g_text[0], false);
  emit_stats("after", g_text[0]);
  emit("block", (long long)mi_good_size(100 + (is_debug_build() ? kPaddingSize : 0)));
  return 0;
}

// A thread allocates (and keeps) blocks of a size nobody else uses; the main
// thread prints the statistics before and after that thread's mi_stats_merge.
MI_CHILD(stats_merge) {
  (void)argc; (void)argv;
  const size_t size = 3000;
  capture_into(g_text[0], false);
  std::thread t([&] {
    static void* blocks[500];
    for (auto& p : blocks) p = mi_malloc(dyn(size));
    g_step.store(1);
    wait_step(2);
    mi_stats_merge();
    g_step.store(3);
    wait_step(4);
    for (auto& p : blocks) mi_free(p);
  });
  wait_step(1);
  capture_into(g_text[1], false);
  g_step.store(2);
  wait_step(3);
  capture_into(g_text[2], false);
  g_step.store(4);
  t.join();
  emit_stats("start", g_text[0]);
  emit_stats("unmerged", g_text[1]);
  emit_stats("merged", g_text[2]);
  emit("block", (long long)mi_good_size(size + (is_debug_build() ? kPaddingSize : 0)));
  return 0;
}

// Two threads, one allocating ~2 MiB in 1000-byte blocks, one a single
// block; each prints its own statistics; main prints the process's while both
// are alive.
MI_CHILD(thread_stats) {
  (void)argc; (void)argv;
  std::thread big([] {
    static void* blocks[2000];
    for (auto& p : blocks) p = mi_malloc(dyn(1000));
    capture_into(g_text[0], true);
    g_step.fetch_add(1);
    wait_step(10);
    for (auto& p : blocks) mi_free(p);
  });
  std::thread small([] {
    wait_step(1);
    void* p = mi_malloc(dyn(24));
    capture_into(g_text[1], true);
    g_step.fetch_add(1);
    wait_step(10);
    mi_free(p);
  });
  wait_step(2);
  capture_into(g_text[2], false);
  capture_into(g_text[3], true);
  g_step.store(10);
  big.join();
  small.join();
  capture_into(g_text[4], false);
  emit_stats("big", g_text[0]);
  emit_stats("small", g_text[1]);
  emit_stats("process", g_text[2]);
  emit_stats("main", g_text[3]);
  emit_stats("joined", g_text[4]);
  emit("block", (long long)mi_good_size(1000 + (is_debug_build() ? kPaddingSize : 0)));
  return 0;
}

// A thread ends with live blocks (its segments are abandoned); the main
// thread then frees them, and once the purge delay has passed the abandoned
// sweep (run by the next call into the allocator) gives the empty pages and
// segments back without the main thread taking the segments over.
MI_CHILD(abandoned_stats) {
  (void)argc; (void)argv;
  static void* blocks[202];
  mi_option_set(mi_option_reset_delay, 20);
  capture_into(g_text[0], false);
  std::thread t([] {
    for (size_t i = 0; i < 200; i++) blocks[i] = mi_malloc(dyn(1000));
    blocks[200] = mi_malloc(dyn(100 * KiB));
    blocks[201] = mi_malloc(dyn(5 * MiB));
  });
  t.join();
  capture_into(g_text[1], false);
  for (auto& p : blocks) mi_free(p);
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  mi_collect(false);
  capture_into(g_text[2], false);
  emit_stats("start", g_text[0]);
  emit_stats("abandoned", g_text[1]);
  emit_stats("reclaimed", g_text[2]);
  return 0;
}

// ------------------------------------------------------
// Layout
// ------------------------------------------------------

TEST(StatsFormat, HeaderAndRowsInOrder) {
  void* keep = mi_malloc(dyn(32));
  const std::string text = stats_text();
  mi_free(keep);
  const std::vector<std::string> lines = split_lines(text);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0], kHeader) << text;
  // the last 18 lines are the main rows, in this order
  const size_t n = sizeof(kMainRows) / sizeof(kMainRows[0]);
  ASSERT_GE(lines.size(), n + 1) << text;
  for (size_t i = 0; i < n; i++) {
    const std::string& line = lines[lines.size() - n + i];
    EXPECT_TRUE(starts_with(line, std::string(kMainRows[i]) + ":")) << "row " << i << ": " << line << "\n" << text;
  }
}

TEST(StatsFormat, ColumnsOfEveryRowKind) {
  const Stats st = parse_stats(stats_text());
  for (const char* label : kByteRows) {
    const StatRow* row = st.find(label);
    ASSERT_NE(row, nullptr) << label << "\n" << st.text;
    for (size_t c = 0; c < 3; c++) {
      EXPECT_TRUE(std::regex_match(column(row->line, c), kByteAmount)) << "column " << c << " of\n" << row->line;
    }
    EXPECT_EQ(column(row->line, 3), "        1 b") << row->line;
    EXPECT_TRUE(std::regex_search(row->line, std::regex("     (ok|not all freed!)$"))) << row->line;
  }
  for (const char* label : kCountRows) {
    const StatRow* row = st.find(label);
    ASSERT_NE(row, nullptr) << label << "\n" << st.text;
    for (size_t c = 0; c < 3; c++) {
      EXPECT_TRUE(std::regex_match(column(row->line, c), kCountAmount)) << "column " << c << " of\n" << row->line;
    }
    EXPECT_TRUE(std::regex_search(row->line, std::regex("^.{44} {22}     (ok|not all freed!)$"))) << row->line;
  }
  for (const char* label : kCounterRows) {
    const StatRow* row = st.find(label);
    ASSERT_NE(row, nullptr) << label << "\n" << st.text;
    EXPECT_TRUE(std::regex_match(row->line.substr(11), kCountAmount)) << row->line;
  }
  EXPECT_TRUE(std::regex_match(st.find("searches")->line, std::regex("^  searches: +[0-9]+\\.[0-9] avg$"))) << st.text;
  EXPECT_TRUE(std::regex_match(st.find("numa nodes")->line, std::regex("^numa nodes: +[1-9][0-9]*$"))) << st.text;
  EXPECT_TRUE(std::regex_match(st.find("elapsed")->line, std::regex("^   elapsed: +[0-9]+\\.[0-9]{3} s$"))) << st.text;
  EXPECT_TRUE(std::regex_match(st.find("process")->line,
                               std::regex("^   process: user: [0-9]+\\.[0-9]{3} s, system: [0-9]+\\.[0-9]{3} s, "
                                          "faults: [0-9]+, rss: [0-9.]+ [kmg]?b, commit: [0-9.]+ [kmg]?b$")))
      << st.text;
}

TEST(StatsFormat, SizeClassRowsOnlyInDebugBuilds) {
  void* keep = mi_malloc(dyn(100));
  const std::string text = stats_text();
  mi_free(keep);
  const Stats st = parse_stats(text);
  if (!is_debug_build()) {
    // release builds print only the main rows
    EXPECT_EQ(count_occurrences(text, "heap stats:"), 1u) << text;
    EXPECT_EQ(text.find("normal"), std::string::npos) << text;
    EXPECT_EQ(text.find("malloc requested"), std::string::npos) << text;
    EXPECT_EQ(st.find("huge"), nullptr) << text;
    EXPECT_EQ(st.find("giant"), nullptr) << text;
    return;
  }
  // debug: "normal <bin>" rows, a blank line, the header again, then
  // normal/huge/giant/total and "malloc requested:", then a blank line
  const std::vector<std::string> lines = split_lines(text);
  size_t i = 1;
  size_t bins = 0;
  const std::regex bin_line("^normal +[0-9]+:( +[0-9.]+ [kmg]?b){4} +[0-9.]+( [kmg])?     (ok|not all freed!)$");
  while (i < lines.size() && starts_with(lines[i], "normal ")) {
    EXPECT_TRUE(std::regex_match(lines[i], bin_line)) << lines[i];
    EXPECT_EQ(lines[i].find(':'), 10u) << lines[i];
    bins++;
    i++;
  }
  EXPECT_GE(bins, 1u) << text;
  ASSERT_LT(i + 6, lines.size()) << text;
  EXPECT_EQ(lines[i], "") << text;
  EXPECT_EQ(lines[i + 1], kHeader) << text;
  EXPECT_TRUE(starts_with(lines[i + 2], "    normal:")) << text;
  EXPECT_TRUE(starts_with(lines[i + 3], "      huge:")) << text;
  EXPECT_TRUE(starts_with(lines[i + 4], "     giant:")) << text;
  EXPECT_TRUE(starts_with(lines[i + 5], "     total:")) << text;
  EXPECT_TRUE(std::regex_match(lines[i + 6], std::regex("^malloc requested: +[0-9.]+ [kmg]?b$"))) << text;
  EXPECT_EQ(lines[i + 7], "") << text;
  EXPECT_TRUE(starts_with(lines[i + 8], "  reserved:")) << text;
  for (const char* label : { "normal", "huge", "giant", "total" }) {
    const StatRow* row = st.find(label);
    ASSERT_NE(row, nullptr) << label;
    EXPECT_EQ(column(row->line, 3), "        1 b") << row->line;
  }
}

// ------------------------------------------------------
// Figures
// ------------------------------------------------------

TEST(StatsFigures, ConsistentBeforeDuringAndAfterAWorkload) {
  ChildResult r;
  if (!run_ok(&r, "stats_figures")) return;
  const Stats s0 = child_stats(r, "start"), s1 = child_stats(r, "live"), s2 = child_stats(r, "done");
  expect_consistent(s0, "start");
  expect_consistent(s1, "live");
  expect_consistent(s2, "done");
  // the workload: 13 medium, 10 large and 3 huge pages (and small ones), in
  // >= 7 segments (three huge ones, and >= 4 shared ones for 15 MiB of medium
  // and large blocks)
  EXPECT_GE(s1.get("pages", 1) - s0.get("pages", 1), 26) << s0.text << s1.text;
  EXPECT_GE(s1.get("segments", 1) - s0.get("segments", 1), 7) << s0.text << s1.text;
  // (regions are committed when created, so the workload may need no commit call)
  EXPECT_GE(s1.current("committed"), 15.0 * MiB) << s0.text << s1.text;
  EXPECT_GE(s1.get("mmaps", 0), 1) << s1.text;
  // everything came back
  EXPECT_LE(s2.current("pages"), s0.current("pages")) << s0.text << s2.text;
  EXPECT_LE(s2.current("segments"), s0.current("segments")) << s0.text << s2.text;
  EXPECT_GE(s2.get("pages", 2) - s0.get("pages", 2), 26) << s0.text << s2.text;
  EXPECT_LE(s0.get("elapsed", 0), s2.get("elapsed", 0));
  EXPECT_GE(s2.get("numa nodes", 0), 1);
  if (is_debug_build()) {
    // per-allocation figures
    const double requested = (double)r.num("requested");
    const StatRow* m0 = s0.find("malloc requested");
    const StatRow* m1 = s1.find("malloc requested");
    ASSERT_TRUE(m0 != nullptr && m1 != nullptr) << s1.text;
    EXPECT_GE(m1->values[0] - m0->values[0], requested * 0.9) << m1->line;
    const StatRow* bin = bin_row(s1, (size_t)r.num("small_block"));
    ASSERT_NE(bin, nullptr) << s1.text;
    EXPECT_GE(bin->values[4], 1000) << bin->line;   // count
    EXPECT_GE(s1.get("huge", 1) - s0.get("huge", 1), 15.0 * MiB * 0.9) << s1.text;
    EXPECT_TRUE(approx_le(s2.current("huge"), s0.current("huge") + 1)) << s0.text << s2.text;
    for (const Stats* st : { &s0, &s1, &s2 }) {
      for (int c = 1; c <= 2; c++) {   // total = normal + huge + giant (truncated amounts)
        const double sum = st->get("normal", c) + st->get("huge", c) + st->get("giant", c);
        EXPECT_TRUE(approx_le(st->get("total", c), sum) && approx_le(sum, st->get("total", c))) << st->text;
      }
    }
  }
}

TEST(StatsFigures, ThreadsRowCountsLiveThreads) {
  ChildResult r;
  if (!run_ok(&r, "thread_stats")) return;
  const Stats process = child_stats(r, "process"), joined = child_stats(r, "joined");
  EXPECT_EQ(process.current("threads"), 2) << process.text;
  EXPECT_GE(process.get("threads", 0), 2) << process.text;
  EXPECT_EQ(joined.current("threads"), 0) << joined.text;
  EXPECT_GE(joined.get("threads", 1), 2) << joined.text;
  expect_consistent(process, "process");
  expect_consistent(joined, "joined");
}

TEST(StatsFigures, AbandonedSegmentsAndPages) {
  // (no background purge thread: its abandoned sweep would free what the
  // figures are expected to show abandoned)
  ChildResult r;
  if (!run_ok(&r, "abandoned_stats", { "MIMALLOC_BACKGROUND_PURGE=0" })) return;
  const Stats s0 = child_stats(r, "start"), s1 = child_stats(r, "abandoned"), s2 = child_stats(r, "reclaimed");
  expect_consistent(s0, "start");
  expect_consistent(s1, "abandoned");
  expect_consistent(s2, "reclaimed");
  // rows: "-abandoned" #0 counts segments, #1 pages
  EXPECT_EQ(s0.current("-abandoned", 0), 0) << s0.text;
  EXPECT_EQ(s1.current("-abandoned", 0), 1) << "the segment of the thread's huge block (its other pages live in shared segments)\n" << s1.text;
  EXPECT_GE(s1.current("-abandoned", 1), 3) << "its pages of small blocks, its page of medium blocks, its huge page\n" << s1.text;
  EXPECT_EQ(s1.current("threads"), 0) << s1.text;
  EXPECT_EQ(s2.current("-abandoned", 0), 0) << s2.text;
  EXPECT_EQ(s2.current("-abandoned", 1), 0) << s2.text;
  EXPECT_EQ(s2.get("-abandoned", 2, 0), 1) << s2.text;
  EXPECT_GE(s2.get("-abandoned", 2, 1), 3) << s2.text;
}

TEST(StatsReset, ClearsHistoryButKeepsWhatIsLive) {
  ChildResult r;
  if (!run_ok(&r, "stats_reset")) return;
  const Stats before = child_stats(r, "before"), reset = child_stats(r, "reset"), after = child_stats(r, "after");
  expect_consistent(before, "before");
  expect_consistent(reset, "reset");
  expect_consistent(after, "after");
  EXPECT_GT(before.get("pages", 2) + before.get("pages", 1), 0) << before.text;
  for (const char* label : kCountRows) {
    const StatRow* row = reset.find(label);
    ASSERT_NE(row, nullptr);
    EXPECT_EQ(row->values[2], 0) << "freed: " << row->line;
    EXPECT_EQ(row->values[1], row->values[0]) << "total == peak == what is live: " << row->line;
    EXPECT_EQ(reset.current(label), before.current(label)) << label << "\n" << before.text << reset.text;
  }
  for (const char* label : kCounterRows) {
    EXPECT_EQ(reset.get(label, 0), 0) << reset.text;
  }
  EXPECT_NE(reset.find("searches")->line.find(" 0.0 avg"), std::string::npos) << reset.text;
  for (const char* label : { "reserved", "committed" }) {
    EXPECT_EQ(reset.get(label, 2), 0) << reset.text;
    EXPECT_TRUE(approx_le(reset.current(label), before.current(label)) && approx_le(before.current(label), reset.current(label)))
        << label << "\n" << before.text << reset.text;
  }
  // and counting goes on from there
  EXPECT_GE(after.get("pages", 2), 10) << after.text;
  if (is_debug_build()) {
    // what is still requested stays; what was freed is forgotten
    const double live = 1000 * 1000;   // the odd blocks of 1000 bytes
    EXPECT_GE(reset.find("malloc requested")->values[0], live * 0.9) << reset.text;
    EXPECT_LT(reset.find("malloc requested")->values[0], before.find("malloc requested")->values[0]) << reset.text;
    EXPECT_EQ(reset.get("normal", 2), 0) << reset.text;
    EXPECT_EQ(reset.get("total", 2), 0) << reset.text;
  }
}

// A free by a thread that never allocated is counted too (it has no heap of
// its own: it goes straight into the process's figures).
TEST(StatsFree, AThreadWithoutAHeapCountsItsFrees) {
  if (!is_debug_build()) GTEST_SKIP() << "per-size-class counts are debug-build statistics";
  ChildResult r;
  if (!run_ok(&r, "stats_heapless_free")) return;
  const Stats after = child_stats(r, "after");
  expect_consistent(after, "after");
  const size_t block = (size_t)r.num("block");
  const StatRow* row = bin_row(after, block);
  ASSERT_NE(row, nullptr) << after.text;
  // (the table truncates to a tenth of its unit: 112,000 bytes print as 109.3 kb)
  EXPECT_GE(row->values[2], 0.99 * 1000.0 * block) << "the thread's frees: " << row->line;
  EXPECT_LT(row->values[1] - row->values[2], 1000.0 * block / 2) << "what is live: " << row->line;
}

TEST(StatsMerge, ThreadCountsReachTheProcessWhenMerged) {
  ChildResult r;
  if (!run_ok(&r, "stats_merge")) return;
  const Stats s0 = child_stats(r, "start"), s1 = child_stats(r, "unmerged"), s2 = child_stats(r, "merged");
  // pages and segments are process-exact at any time (no merge needed)
  EXPECT_GE(s1.current("pages") - s0.current("pages"), 20) << s0.text << s1.text;
  expect_consistent(s1, "unmerged");
  expect_consistent(s2, "merged");
  if (!is_debug_build()) return;   // per-size-class counts are debug-build statistics
  const size_t block = (size_t)r.num("block");
  const StatRow* before = bin_row(s1, block);
  const StatRow* after = bin_row(s2, block);
  EXPECT_TRUE(before == nullptr || before->values[4] < 500) << "counted before the merge\n" << s1.text;
  ASSERT_NE(after, nullptr) << "not counted after the merge\n" << s2.text;
  EXPECT_GE(after->values[4], 500) << after->line;
}

TEST(StatsThread, OnlyTheCallingThreadsFigures) {
  ChildResult r;
  if (!run_ok(&r, "thread_stats")) return;
  const Stats big = child_stats(r, "big"), small = child_stats(r, "small"), process = child_stats(r, "process"),
              main = child_stats(r, "main");
  EXPECT_TRUE(starts_with(big.text, kHeader)) << big.text;
  EXPECT_TRUE(starts_with(small.text, kHeader)) << small.text;
  // ~2 MiB of 1000-byte blocks: 30+ small pages
  EXPECT_GE(big.get("pages", 1), 30) << big.text;
  EXPECT_GE(big.current("pages"), 30) << big.text;
  EXPECT_LE(small.get("pages", 1), 2) << small.text;
  EXPECT_GE(small.get("pages", 1), 1) << small.text;
  EXPECT_LT(main.get("pages", 1), big.get("pages", 1)) << main.text << big.text;
  EXPECT_GE(process.current("pages"), big.current("pages") + small.current("pages")) << process.text;
  if (is_debug_build()) {
    const size_t block = (size_t)r.num("block");
    const StatRow* row = bin_row(big, block);
    ASSERT_NE(row, nullptr) << big.text;
    EXPECT_GE(row->values[4], 2000) << row->line;
    EXPECT_EQ(bin_row(small, block), nullptr) << small.text;
  }
}

// ------------------------------------------------------
// mi_process_info
// ------------------------------------------------------

TEST(ProcessInfo, EveryOutPointerMayBeNull) {
  mi_process_info(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  for (int i = 0; i < 8; i++) {
    size_t v[8];
    for (auto& x : v) x = SIZE_MAX;
    size_t* p[8] = { nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr };
    p[i] = &v[i];
    mi_process_info(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]);
    EXPECT_NE(v[i], SIZE_MAX) << "out-pointer " << i << " was not written";
    for (int j = 0; j < 8; j++) {
      if (j != i) { EXPECT_EQ(v[j], SIZE_MAX); }
    }
  }
}

TEST(ProcessInfo, RssAndCommitAreConsistent) {
  void* p = mi_malloc(dyn(8 * MiB));
  memset(opaque(p), 1, 8 * MiB);
  size_t elapsed, user, sys, rss, peak_rss, commit, peak_commit, faults;
  mi_process_info(&elapsed, &user, &sys, &rss, &peak_rss, &commit, &peak_commit, &faults);
  EXPECT_GE(rss, 8 * MiB);
  EXPECT_GE(peak_rss, rss);
  EXPECT_GE(commit, 8 * MiB);
  EXPECT_GE(peak_commit, commit);
  mi_free(p);
}

TEST(ProcessInfo, CommitFollowsAHugeMapping) {
  // above 64 MiB a block is mapped on its own and unmapped when freed
  size_t c0, p0;
  mi_process_info(nullptr, nullptr, nullptr, nullptr, nullptr, &c0, &p0, nullptr);
  void* p = mi_malloc(dyn(100 * MiB));
  ASSERT_NE(p, nullptr);
  size_t c1, p1;
  mi_process_info(nullptr, nullptr, nullptr, nullptr, nullptr, &c1, &p1, nullptr);
  mi_free(p);
  size_t c2, p2;
  mi_process_info(nullptr, nullptr, nullptr, nullptr, nullptr, &c2, &p2, nullptr);
  EXPECT_GE(c1, c0 + 100 * MiB);
  EXPECT_GE(p1, c1);
  EXPECT_LE(c2 + 100 * MiB, c1);
  EXPECT_GE(p2, c1) << "the peak stays";
}

TEST(ProcessInfo, TimeGrows) {
  size_t e0, u0, s0;
  mi_process_info(&e0, &u0, &s0, nullptr, nullptr, nullptr, nullptr, nullptr);
  sleep_ms(60);
  // and burn some CPU (100 ms of this thread's)
  const long long start = thread_cpu_ms();
  volatile uint64_t x = 0;
  while (thread_cpu_ms() - start < 100) x = x + 1;
  size_t e1, u1, s1;
  mi_process_info(&e1, &u1, &s1, nullptr, nullptr, nullptr, nullptr, nullptr);
  EXPECT_GE(e1, e0 + 50);
  EXPECT_GE(u1 + s1, u0 + s0 + 50);
}
