/* ----------------------------------------------------------------------------
  test-options.cpp -- the option functions, environment parsing, and the
  options that govern messages.

  - mi_option_get / set / set_default / is_enabled / enable / disable /
    set_enabled / set_enabled_default, in-process and in fresh processes;
  - defaults of every option in a fresh process;
  - MIMALLOC_<NAME> parsing: case-insensitive names, the true/false words,
    the empty value, complete integers in the option's range;
  - the warnings for an invalid value, a value out of range and a MIMALLOC_
    variable that names no option: always shown (whatever show_errors,
    verbose and max_errors say), once, quoting the variable as written;
  - every option set in the environment is reported by MIMALLOC_VERBOSE=1
    (large_os_pages, use_numa_nodes and reserve_huge_os_pages are tested
    for their effect in test-large-pages.c, the internal test and
    test-reserve-huge.c; os_tag has none on Linux or Windows);
  - show_errors, max_errors (and the count of messages it kept back, said
    at exit), verbose and show_stats.
-----------------------------------------------------------------------------*/
#include <gtest/gtest.h>
#include <mimalloc.h>

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "options-util.h"

using namespace mitest;

// Build configuration the tests cannot detect at run time (CMake passes them).
#ifndef MI_TEST_SHOW_ERRORS
#define MI_TEST_SHOW_ERRORS 0   // built with MI_SHOW_ERRORS=ON
#endif

namespace {

struct OptionInfo {
  mi_option_t option;
  const char* name;
  long release_default;   // 64-bit Linux defaults (expected_default: the build's and the OS's)
  long min, max;          // the range accepted from the environment
  bool is_bool() const { return min == 0 && max == 1; }
};

constexpr long kCount = 1L << 30;
constexpr long kDay = 24L * 3600 * 1000;

// Enum order (the ABI order of mimalloc 1.6).
const OptionInfo kOptions[] = {
  { mi_option_show_errors,          "show_errors",           0,   0, 1 },
  { mi_option_show_stats,           "show_stats",            0,   0, 1 },
  { mi_option_verbose,              "verbose",               0,   0, 1 },
  { mi_option_eager_commit,         "eager_commit",          1,   0, 1 },
  { mi_option_eager_region_commit,  "eager_region_commit",   1,   0, 1 },
  { mi_option_reset_decommits,      "reset_decommits",       0,   0, 1 },
  { mi_option_large_os_pages,       "large_os_pages",        0,   0, 1 },
  { mi_option_reserve_huge_os_pages,"reserve_huge_os_pages", 0,   0, kCount },
  { mi_option_segment_cache,        "segment_cache",         0,   0, kCount },
  { mi_option_page_reset,           "page_reset",            1,   0, 1 },
  { mi_option_abandoned_page_reset, "abandoned_page_reset",  0,   0, 1 },
  { mi_option_segment_reset,        "segment_reset",         0,   0, 1 },
  { mi_option_eager_commit_delay,   "eager_commit_delay",    1,   0, kCount },
  { mi_option_reset_delay,          "reset_delay",           100, 0, kDay },
  { mi_option_use_numa_nodes,       "use_numa_nodes",        0,   0, 1024 },
  { mi_option_os_tag,               "os_tag",                100, 100, 255 },
  { mi_option_max_errors,           "max_errors",            16,  -1, LONG_MAX },
  { mi_option_secure_continue,      "secure_continue",       0,   0, 1 },
  { mi_option_prof_sample,          "prof_sample",           0,   0, LONG_MAX },
  { mi_option_stats_interval,       "stats_interval",        0,   0, kDay },
  { mi_option_background_purge,     "background_purge",      1,   0, 2 },
  { mi_option_orphan_heaps,         "orphan_heaps",          0,   0, 1 },
  { mi_option_disable_redirect,     "disable_redirect",      0,   0, 1 },
};
constexpr size_t kOptionCount = sizeof(kOptions) / sizeof(kOptions[0]);
static_assert(kOptionCount == (size_t)_mi_option_last, "every option is listed");

long expected_default(const OptionInfo& o) {
  if (o.option == mi_option_show_errors) return (is_debug_build() || MI_TEST_SHOW_ERRORS ? 1 : 0);
  if (o.option == mi_option_eager_region_commit) return (kCommitIsCharged ? 0 : 1);   // (Windows: 0)
  return o.release_default;
}

std::string env_name(const char* name) { return "MIMALLOC_" + upper(name); }

// Restores every option's value when a test ends (in-process tests).
class OptionsRestored : public ::testing::Test {
 protected:
  void SetUp() override {
    for (size_t i = 0; i < kOptionCount; i++) saved_[i] = mi_option_get(kOptions[i].option);
  }
  void TearDown() override {
    for (size_t i = 0; i < kOptionCount; i++) mi_option_set(kOptions[i].option, saved_[i]);
  }
  long saved_[kOptionCount] = { 0 };
};

// The values of all options as a child sees them.
ChildResult child_options(const std::vector<std::string>& env) {
  return run_child("print_options", env);
}

std::string opt_key(const char* name) { return std::string("opt.") + name; }

// The warnings for a variable `var` ("NAME=value" as written) whose option has
// the default `dflt`.
// (show_stats also takes the word json)
std::string invalid_bool_warning(const std::string& var, long dflt) {
  std::string lower;
  for (char c : var) lower += (char)std::tolower((unsigned char)c);
  const bool json = (lower.rfind("mimalloc_show_stats=", 0) == 0);
  return "mimalloc: warning: " + var + " is not a valid value (use 1, true, yes, on or 0, false, no, off" +
         (json ? ", or json" : "") + "); the default " + std::to_string(dflt) + " is used\n";
}
std::string invalid_int_warning(const std::string& var, long min, long max, long dflt) {
  return "mimalloc: warning: " + var + " is not a valid value (use an integer from " + std::to_string(min) + " to " +
         std::to_string(max) + "); the default " + std::to_string(dflt) + " is used\n";
}
std::string out_of_range_warning(const std::string& var, long min, long max, long dflt) {
  return "mimalloc: warning: " + var + " is out of range (" + std::to_string(min) + " to " + std::to_string(max) +
         "); the default " + std::to_string(dflt) + " is used\n";
}
std::string unknown_warning(const std::string& var) {
  return "mimalloc: warning: " + var + " is not a mimalloc option and is ignored\n";
}
std::string not_shown_line(long count, long max) {
  return "mimalloc: " + std::to_string(count) + " more error and warning message" + (count == 1 ? " was" : "s were") +
         " not shown (MIMALLOC_MAX_ERRORS=" + std::to_string(max) + ")\n";
}

}  // namespace

// ------------------------------------------------------
// Child scenarios
// ------------------------------------------------------

MI_CHILD(print_options) {
  (void)argc; (void)argv;
  for (const auto& o : kOptions) emit(opt_key(o.name).c_str(), mi_option_get(o.option));
  return 0;
}

// set_default / set_enabled_default in a fresh process (nothing set yet).
MI_CHILD(set_default) {
  (void)argc; (void)argv;
  // os_tag: not in the environment unless the parent put it there
  mi_option_set_default(mi_option_os_tag, 130);
  emit("os_tag.after_set_default", mi_option_get(mi_option_os_tag));
  mi_option_set_default(mi_option_os_tag, 140);
  emit("os_tag.after_second_set_default", mi_option_get(mi_option_os_tag));
  mi_option_set(mi_option_os_tag, 150);
  mi_option_set_default(mi_option_os_tag, 160);
  emit("os_tag.after_set_then_set_default", mi_option_get(mi_option_os_tag));
  // segment_reset: default 0
  mi_option_set_enabled_default(mi_option_segment_reset, true);
  emit("segment_reset.after_set_enabled_default", mi_option_is_enabled(mi_option_segment_reset));
  mi_option_disable(mi_option_segment_reset);
  mi_option_set_enabled_default(mi_option_segment_reset, true);
  emit("segment_reset.after_disable_then_default", mi_option_is_enabled(mi_option_segment_reset));
  // use_numa_nodes: set_enabled_default(false) on a defaulted option
  mi_option_set_default(mi_option_use_numa_nodes, 3);
  mi_option_set_enabled_default(mi_option_use_numa_nodes, false);
  emit("use_numa_nodes.after_enabled_default_false", mi_option_get(mi_option_use_numa_nodes));
  return 0;
}

// `count` calloc overflows (argv[0], default 1): each is an EOVERFLOW error.
MI_CHILD(calloc_overflow) {
  const long count = (argc > 0 ? strtol(argv[0], nullptr, 10) : 1);
  long nulls = 0, eoverflow = 0;
  for (long i = 0; i < count; i++) {
    errno = 0;
    void* p = mi_calloc(dyn((size_t)PTRDIFF_MAX), dyn(3));
    if (p == nullptr) nulls++;
    if (errno == EOVERFLOW) eoverflow++;
    mi_free(p);
  }
  emit("nulls", nulls);
  emit("eoverflow", eoverflow);
  return 0;
}

// Does nothing; marks the end of main on stderr (messages at exit come later).
MI_CHILD(idle) {
  (void)argc; (void)argv;
  void* p = mi_malloc(dyn(100));
  mi_free(p);
  fputs("<<main returns>>\n", stderr);
  fflush(stderr);
  return 0;
}

// Enables show_stats (argv[0] == "stats") or verbose ("verbose") at run time.
MI_CHILD(enable_at_run_time) {
  const bool verbose = (argc > 0 && strcmp(argv[0], "verbose") == 0);
  mi_option_enable(verbose ? mi_option_verbose : mi_option_show_stats);
  fputs("<<main returns>>\n", stderr);
  fflush(stderr);
  return 0;
}

// ------------------------------------------------------
// Option functions (in-process)
// ------------------------------------------------------

TEST_F(OptionsRestored, SetThenGetEveryOption) {
  for (const auto& o : kOptions) {
    const long old = mi_option_get(o.option);
    mi_option_set(o.option, 12345);
    const long v1 = mi_option_get(o.option);
    mi_option_set(o.option, -7);
    const long v2 = mi_option_get(o.option);
    mi_option_set(o.option, 0);
    const long v3 = mi_option_get(o.option);
    mi_option_set(o.option, old);
    EXPECT_EQ(v1, 12345) << o.name;
    EXPECT_EQ(v2, -7) << o.name;
    EXPECT_EQ(v3, 0) << o.name;
    EXPECT_EQ(mi_option_get(o.option), old) << o.name;
  }
}

TEST_F(OptionsRestored, EnableDisableEveryOption) {
  for (const auto& o : kOptions) {
    const long old = mi_option_get(o.option);
    mi_option_enable(o.option);
    const bool e1 = mi_option_is_enabled(o.option);
    const long v1 = mi_option_get(o.option);
    mi_option_disable(o.option);
    const bool e2 = mi_option_is_enabled(o.option);
    const long v2 = mi_option_get(o.option);
    mi_option_set_enabled(o.option, true);
    const bool e3 = mi_option_is_enabled(o.option);
    const long v3 = mi_option_get(o.option);
    mi_option_set_enabled(o.option, false);
    const bool e4 = mi_option_is_enabled(o.option);
    mi_option_set(o.option, -3);
    const bool e5 = mi_option_is_enabled(o.option);   // any non-zero value is "enabled"
    mi_option_set(o.option, 250);
    const bool e6 = mi_option_is_enabled(o.option);
    mi_option_set(o.option, old);
    EXPECT_TRUE(e1) << o.name;
    EXPECT_EQ(v1, 1) << o.name;
    EXPECT_FALSE(e2) << o.name;
    EXPECT_EQ(v2, 0) << o.name;
    EXPECT_TRUE(e3) << o.name;
    EXPECT_EQ(v3, 1) << o.name;
    EXPECT_FALSE(e4) << o.name;
    EXPECT_TRUE(e5) << o.name;
    EXPECT_TRUE(e6) << o.name;
  }
}

TEST_F(OptionsRestored, SetDefaultHasNoEffectAfterSet) {
  for (const auto& o : kOptions) {
    const long old = mi_option_get(o.option);
    mi_option_set(o.option, 77);
    mi_option_set_default(o.option, 88);
    const long v1 = mi_option_get(o.option);
    mi_option_enable(o.option);
    mi_option_set_enabled_default(o.option, false);
    const long v2 = mi_option_get(o.option);
    mi_option_disable(o.option);
    mi_option_set_enabled_default(o.option, true);
    const long v3 = mi_option_get(o.option);
    mi_option_set(o.option, old);
    EXPECT_EQ(v1, 77) << o.name;
    EXPECT_EQ(v2, 1) << o.name;
    EXPECT_EQ(v3, 0) << o.name;
  }
}

TEST(Options, SetDefaultChangesOnlyUnsetOptions) {
  ChildResult r = run_child("set_default");
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(r.num("os_tag.after_set_default"), 130) << r.describe();
  EXPECT_EQ(r.num("os_tag.after_second_set_default"), 140) << r.describe();
  EXPECT_EQ(r.num("os_tag.after_set_then_set_default"), 150) << r.describe();
  EXPECT_EQ(r.num("segment_reset.after_set_enabled_default"), 1) << r.describe();
  EXPECT_EQ(r.num("segment_reset.after_disable_then_default"), 0) << r.describe();
  EXPECT_EQ(r.num("use_numa_nodes.after_enabled_default_false"), 0) << r.describe();
}

TEST(Options, SetDefaultDoesNotOverrideTheEnvironment) {
  // a value read from the environment counts as explicitly set
  ChildResult r = run_child("set_default", { "MIMALLOC_OS_TAG=110", "MIMALLOC_SEGMENT_RESET=0" });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(r.num("os_tag.after_set_default"), 110) << r.describe();
  EXPECT_EQ(r.num("os_tag.after_second_set_default"), 110) << r.describe();
  EXPECT_EQ(r.num("os_tag.after_set_then_set_default"), 150) << r.describe();
  EXPECT_EQ(r.num("segment_reset.after_set_enabled_default"), 0) << r.describe();
}

TEST(Options, DefaultsInAFreshProcess) {
  ChildResult r = child_options({});
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  for (const auto& o : kOptions) {
    EXPECT_EQ(r.num(opt_key(o.name)), expected_default(o)) << o.name << "\n" << r.describe();
  }
}

TEST(Options, InProcessValuesAreTheDefaults) {
  // main() re-executes the suite without MIMALLOC_* variables, so the
  // options this process read at load time are the defaults
  for (const auto& o : kOptions) {
    EXPECT_EQ(mi_option_get(o.option), expected_default(o)) << o.name;
  }
}

// ------------------------------------------------------
// Environment parsing
// ------------------------------------------------------

// A value of option i in its range and not its default: the other word for
// an on/off option, a distinct integer otherwise.
long non_default_value(size_t i) {
  const OptionInfo& o = kOptions[i];
  if (o.is_bool()) return (expected_default(o) == 0 ? 1 : 0);
  if (200 + (long)i > o.max) return (expected_default(o) == o.max ? o.min : o.max);   // a short range
  return 200 + (long)i;
}

TEST(OptionsEnv, EveryOptionIsReadFromItsVariable) {
  // one process, a non-default value for every option
  std::vector<std::string> env;
  // (not verbose, to keep the output quiet; not reserve_huge_os_pages, which
  // would reserve that many GiB of huge pages, or warn that it cannot: its
  // variable is read in the verbose tests below and in test-reserve-huge.c)
  auto left_out = [](size_t i) { return kOptions[i].option == mi_option_verbose || kOptions[i].option == mi_option_reserve_huge_os_pages; };
  for (size_t i = 0; i < kOptionCount; i++) {
    if (left_out(i)) continue;
    env.push_back(env_name(kOptions[i].name) + "=" + std::to_string(non_default_value(i)));
  }
  ChildResult r = child_options(env);
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  for (size_t i = 0; i < kOptionCount; i++) {
    if (left_out(i)) continue;
    EXPECT_EQ(r.num(opt_key(kOptions[i].name)), (long long)non_default_value(i)) << kOptions[i].name << "\n" << r.describe();
  }
  EXPECT_EQ(r.err.find("mimalloc: warning"), std::string::npos) << r.describe();
}

TEST(OptionsEnv, NameIsCaseInsensitive) {
  ChildResult r = child_options({ "mimalloc_reset_delay=250", "MiMaLlOc_Os_TaG=123", "MIMALLOC_use_NUMA_nodes=2" });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(r.num("opt.reset_delay"), 250) << r.describe();
  EXPECT_EQ(r.num("opt.os_tag"), 123) << r.describe();
  EXPECT_EQ(r.num("opt.use_numa_nodes"), 2) << r.describe();
}

TEST(OptionsEnv, NameMustBeFollowedByEquals) {
  // longer or shorter names are other variables (and, with the MIMALLOC_
  // prefix, reported as naming no option)
  ChildResult r = child_options({ "MIMALLOC_RESET_DELAYX=5", "MIMALLOC_OS_TA=7", "MIMALLOC_OS_TAG_=9",
                                  "XMIMALLOC_SEGMENT_RESET=1", "MIMALLOC_PAGE_RESET2=0" });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(r.num("opt.reset_delay"), 100) << r.describe();
  EXPECT_EQ(r.num("opt.os_tag"), 100) << r.describe();
  EXPECT_EQ(r.num("opt.segment_reset"), 0) << r.describe();
  EXPECT_EQ(r.num("opt.page_reset"), 1) << r.describe();
  for (const char* var : { "MIMALLOC_RESET_DELAYX=5", "MIMALLOC_OS_TA=7", "MIMALLOC_OS_TAG_=9", "MIMALLOC_PAGE_RESET2=0" }) {
    EXPECT_EQ(count_occurrences(r.err, unknown_warning(var)), 1u) << var << "\n" << r.describe();
  }
  EXPECT_EQ(r.err.find("XMIMALLOC"), std::string::npos) << r.describe();
}

TEST(OptionsEnv, TrueWordsInAnyCaseAndEmptyMeanOne) {
  const char* values[] = { "1", "TRUE", "true", "True", "tRuE", "YES", "yes", "Yes", "ON", "on", "On", "" };
  for (const char* v : values) {
    // segment_reset and reset_decommits default to 0
    ChildResult r = child_options({ std::string("MIMALLOC_SEGMENT_RESET=") + v,
                                    std::string("MIMALLOC_RESET_DECOMMITS=") + v,
                                    "MIMALLOC_SHOW_ERRORS=1" });
    ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
    EXPECT_EQ(r.num("opt.segment_reset"), 1) << "value '" << v << "'\n" << r.describe();
    EXPECT_EQ(r.num("opt.reset_decommits"), 1) << "value '" << v << "'\n" << r.describe();
    EXPECT_EQ(r.err.find("mimalloc: warning"), std::string::npos) << "value '" << v << "'\n" << r.describe();
  }
}

TEST(OptionsEnv, FalseWordsInAnyCaseMeanZero) {
  const char* values[] = { "0", "FALSE", "false", "False", "fAlSe", "NO", "no", "No", "OFF", "off", "Off" };
  for (const char* v : values) {
    // page_reset and eager_commit default to 1
    ChildResult r = child_options({ std::string("MIMALLOC_PAGE_RESET=") + v,
                                    std::string("MIMALLOC_EAGER_COMMIT=") + v,
                                    std::string("MIMALLOC_ABANDONED_PAGE_RESET=") + v,
                                    "MIMALLOC_SHOW_ERRORS=1" });
    ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
    EXPECT_EQ(r.num("opt.abandoned_page_reset"), 0) << "value '" << v << "'\n" << r.describe();
    EXPECT_EQ(r.num("opt.page_reset"), 0) << "value '" << v << "'\n" << r.describe();
    EXPECT_EQ(r.num("opt.eager_commit"), 0) << "value '" << v << "'\n" << r.describe();
    EXPECT_EQ(r.err.find("mimalloc: warning"), std::string::npos) << "value '" << v << "'\n" << r.describe();
  }
}

TEST(OptionsEnv, CompleteIntegers) {
  struct { const char* text; long value; } cases[] = {
    { "250", 250 }, { "42", 42 }, { "0", 0 }, { "1000000", 1000000 }, { "007", 7 }, { "2", 2 }, { "86400000", 86400000 },
  };
  for (const auto& c : cases) {
    ChildResult r = child_options({ std::string("MIMALLOC_RESET_DELAY=") + c.text, "MIMALLOC_SHOW_ERRORS=1" });
    ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
    EXPECT_EQ(r.num("opt.reset_delay"), c.value) << "value '" << c.text << "'\n" << r.describe();
    EXPECT_EQ(r.err.find("mimalloc: warning"), std::string::npos) << "value '" << c.text << "'\n" << r.describe();
  }
}

TEST(OptionsEnv, InvalidValuesKeepTheDefaultAndWarn) {
  // only whole words count ("Y" and "ES" are parts of "YES"), and only
  // integers that strtol consumes completely; the warning quotes the value
  // as written
  const char* values[] = { "Y", "ES", "N", "T", "12x", "maybe", "1.5", "0x10", "yes please", "enabled", "1 ", "-", "+", "ye" };
  for (const char* v : values) {
    ChildResult r = child_options({ std::string("MIMALLOC_PAGE_RESET=") + v,
                                    std::string("MIMALLOC_RESET_DELAY=") + v });
    ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
    EXPECT_EQ(r.num("opt.page_reset"), 1) << "value '" << v << "'\n" << r.describe();
    EXPECT_EQ(r.num("opt.reset_delay"), 100) << "value '" << v << "'\n" << r.describe();
    const std::string w1 = invalid_bool_warning(std::string("MIMALLOC_PAGE_RESET=") + v, 1);
    const std::string w2 = invalid_int_warning(std::string("MIMALLOC_RESET_DELAY=") + v, 0, kDay, 100);
    EXPECT_EQ(count_occurrences(r.err, w1), 1u) << "value '" << v << "'\n" << w1 << r.describe();
    EXPECT_EQ(count_occurrences(r.err, w2), 1u) << "value '" << v << "'\n" << w2 << r.describe();
  }
}

TEST(OptionsEnv, OutOfRangeValuesKeepTheDefaultAndWarn) {
  struct { const char* var; long min, max, dflt; const char* key; } cases[] = {
    { "MIMALLOC_RESET_DELAY=-5", 0, kDay, 100, "opt.reset_delay" },
    { "MIMALLOC_RESET_DELAY=86400001", 0, kDay, 100, "opt.reset_delay" },
    { "MIMALLOC_RESET_DELAY=99999999999999999999999", 0, kDay, 100, "opt.reset_delay" },   // too large for a long
    { "MIMALLOC_OS_TAG=99", 100, 255, 100, "opt.os_tag" },
    { "MIMALLOC_OS_TAG=256", 100, 255, 100, "opt.os_tag" },
    { "MIMALLOC_SHOW_STATS=2", 0, 1, 0, "opt.show_stats" },
    { "MIMALLOC_PAGE_RESET=-1", 0, 1, 1, "opt.page_reset" },
    { "MIMALLOC_SEGMENT_CACHE=-3", 0, kCount, 0, "opt.segment_cache" },
    { "MIMALLOC_USE_NUMA_NODES=5000", 0, 1024, 0, "opt.use_numa_nodes" },
    { "MIMALLOC_MAX_ERRORS=-2", -1, LONG_MAX, 16, "opt.max_errors" },
  };
  for (const auto& c : cases) {
    ChildResult r = child_options({ c.var });
    ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
    EXPECT_EQ(r.num(c.key), c.dflt) << c.var << "\n" << r.describe();
    const std::string w = out_of_range_warning(c.var, c.min, c.max, c.dflt);
    EXPECT_EQ(r.err, w) << c.var << "\n" << r.describe();
  }
}

TEST(OptionsEnv, RangeEndsAreAccepted) {
  ChildResult r = child_options({ "MIMALLOC_OS_TAG=255", "MIMALLOC_MAX_ERRORS=-1", "MIMALLOC_RESET_DELAY=0",
                                  "MIMALLOC_USE_NUMA_NODES=1024" });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(r.num("opt.os_tag"), 255) << r.describe();
  EXPECT_EQ(r.num("opt.max_errors"), -1) << r.describe();
  EXPECT_EQ(r.num("opt.reset_delay"), 0) << r.describe();
  EXPECT_EQ(r.num("opt.use_numa_nodes"), 1024) << r.describe();
  EXPECT_EQ(r.err, "") << r.describe();
}

TEST(OptionsEnv, UnknownNamesAreReportedAsWritten) {
  // options of other mimalloc versions, a misspelling, any case
  const char* vars[] = { "MIMALLOC_ARENA_EAGER_COMMIT=1", "mimalloc_Purge_Delay=Ten", "MIMALLOC_SHOW_STAT=1",
                         "MIMALLOC_=x", "MiMaLlOc_ReSeRvE_oS_mEmOrY=4GiB" };
  std::vector<std::string> env(std::begin(vars), std::end(vars));
  ChildResult r = child_options(env);
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  std::string expected;
  for (const char* v : vars) {
    EXPECT_EQ(count_occurrences(r.err, unknown_warning(v)), 1u) << v << "\n" << r.describe();
    expected += unknown_warning(v);
  }
  EXPECT_EQ(r.err.size(), expected.size()) << "nothing else\n" << r.describe();
  for (const auto& o : kOptions) EXPECT_EQ(r.num(opt_key(o.name)), expected_default(o)) << o.name;
}

TEST(OptionsEnv, NameAndValueAreQuotedAsWritten) {
  ChildResult r = child_options({ "mImAlLoC_sHoW_sTaTs=Ye", "Mimalloc_Reset_Delay=-5" });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(count_occurrences(r.err, invalid_bool_warning("mImAlLoC_sHoW_sTaTs=Ye", 0)), 1u) << r.describe();
  EXPECT_EQ(count_occurrences(r.err, out_of_range_warning("Mimalloc_Reset_Delay=-5", 0, kDay, 100)), 1u) << r.describe();
}

TEST(OptionsEnv, LongValuesAreQuotedCutShort) {
  const std::string v(100, '7');
  ChildResult r = child_options({ "MIMALLOC_OS_TAG=" + v, "MIMALLOC_NO_SUCH_OPTION=" + v });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(r.num("opt.os_tag"), 100) << r.describe();
  EXPECT_EQ(count_occurrences(r.err, invalid_int_warning("MIMALLOC_OS_TAG=" + v.substr(0, 64) + "...", 100, 255, 100)), 1u) << r.describe();
  EXPECT_EQ(count_occurrences(r.err, unknown_warning("MIMALLOC_NO_SUCH_OPTION=" + v.substr(0, 64) + "...")), 1u) << r.describe();
}

MI_CHILD(read_options_often) {
  (void)argc; (void)argv;
  long sum = 0;
  for (int i = 0; i < 1000; i++) sum += mi_option_get(mi_option_show_stats) + mi_option_get(mi_option_reset_delay);
  for (int i = 0; i < 1000; i++) { void* p = mi_malloc(dyn((size_t)i * 100)); mi_free(p); }
  mi_collect(true);
  emit("sum", sum);
  return 0;
}

TEST(OptionsEnv, WarningsAreShownWhateverTheVerbosityAndOnce) {
  const std::vector<std::vector<std::string>> settings = {
    {}, { "MIMALLOC_SHOW_ERRORS=0" }, { "MIMALLOC_SHOW_ERRORS=0", "MIMALLOC_VERBOSE=0", "MIMALLOC_MAX_ERRORS=0" },
    { "MIMALLOC_SHOW_ERRORS=1", "MIMALLOC_MAX_ERRORS=1" }, { "MIMALLOC_VERBOSE=1" },
  };
  for (const auto& setting : settings) {
    std::vector<std::string> env = setting;
    env.push_back("MIMALLOC_SHOW_STATS=ye");
    env.push_back("MIMALLOC_ARENA_EAGER_COMMIT=1");
    env.push_back("MIMALLOC_RESET_DELAY=-5");
    ChildResult r = run_child("read_options_often", env);
    ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
    std::string where;
    for (const auto& e : setting) where += e + " ";
    EXPECT_EQ(count_occurrences(r.err, invalid_bool_warning("MIMALLOC_SHOW_STATS=ye", 0)), 1u) << where << "\n" << r.describe();
    EXPECT_EQ(count_occurrences(r.err, unknown_warning("MIMALLOC_ARENA_EAGER_COMMIT=1")), 1u) << where << "\n" << r.describe();
    EXPECT_EQ(count_occurrences(r.err, out_of_range_warning("MIMALLOC_RESET_DELAY=-5", 0, kDay, 100)), 1u) << where << "\n" << r.describe();
    EXPECT_EQ(r.err.find("more error and warning"), std::string::npos) << "not counted\n" << r.describe();
  }
}

TEST(OptionsEnv, VerboseReportsEveryOptionFromTheEnvironment) {
  // (reserve_huge_os_pages=1 really tries to reserve a GiB: without free
  // huge pages that is a warning, and the option line is there all the same)
  for (size_t i = 0; i < kOptionCount; i++) {
    const OptionInfo& o = kOptions[i];
    if (o.option == mi_option_verbose) continue;
    const long value = (o.option == mi_option_os_tag ? 120 : o.option == mi_option_reset_delay ? 250 :
                        o.option == mi_option_max_errors ? 20 : expected_default(o) == 0 ? 1 : 0);
    ChildResult r = run_child("idle", { "MIMALLOC_VERBOSE=1", env_name(o.name) + "=" + std::to_string(value) });
    ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
    const std::string line = "mimalloc: option '" + std::string(o.name) + "': " + std::to_string(value) + "\n";
    EXPECT_EQ(count_occurrences(r.err, line), 1u) << line << r.describe();
  }
}

TEST(OptionsEnv, VerboseReportsAllOptionsInEnumOrder) {
  ChildResult r = run_child("idle", { "MIMALLOC_VERBOSE=1", "MIMALLOC_LARGE_OS_PAGES=1", "MIMALLOC_RESERVE_HUGE_OS_PAGES=1",
                                      "MIMALLOC_USE_NUMA_NODES=1", "MIMALLOC_OS_TAG=101" });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  size_t pos = 0;
  for (const auto& o : kOptions) {
    if (o.option == mi_option_verbose) continue;
    long value = expected_default(o);
    if (o.option == mi_option_large_os_pages || o.option == mi_option_reserve_huge_os_pages || o.option == mi_option_use_numa_nodes) value = 1;
    if (o.option == mi_option_os_tag) value = 101;
    const std::string line = "mimalloc: option '" + std::string(o.name) + "': " + std::to_string(value) + "\n";
    const size_t at = r.err.find(line, pos);
    ASSERT_NE(at, std::string::npos) << line << r.describe();
    pos = at + line.size();
  }
  // and all of them before main runs
  EXPECT_LE(pos, r.err.find("<<main returns>>")) << r.describe();
}

// ------------------------------------------------------
// show_errors, max_errors, verbose, show_stats
// ------------------------------------------------------

static const char* kOverflowMessage = "mimalloc: error: allocation request is too large (9223372036854775807 * 3 bytes)\n";

TEST(OptionShowErrors, ErrorIsPrintedOnlyWhenShown) {
  ChildResult on = run_child("calloc_overflow", { "MIMALLOC_SHOW_ERRORS=1" });
  ASSERT_TRUE(on.exited && on.code == 0) << on.describe();
  EXPECT_EQ(on.num("nulls"), 1) << on.describe();
  EXPECT_EQ(on.num("eoverflow"), 1) << on.describe();
  EXPECT_EQ(count_occurrences(on.err, kOverflowMessage), 1u) << on.describe();

  ChildResult off = run_child("calloc_overflow", { "MIMALLOC_SHOW_ERRORS=0" });
  ASSERT_TRUE(off.exited && off.code == 0) << off.describe();
  EXPECT_EQ(off.num("nulls"), 1) << off.describe();
  EXPECT_EQ(off.num("eoverflow"), 1) << off.describe();
  EXPECT_EQ(off.err, "") << off.describe();
}

TEST(OptionShowErrors, DefaultIsOnOnlyInDebugBuilds) {
  ChildResult r = run_child("calloc_overflow");
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  const bool shown = (is_debug_build() || MI_TEST_SHOW_ERRORS);
  EXPECT_EQ(count_occurrences(r.err, kOverflowMessage), shown ? 1u : 0u) << r.describe();
}

TEST_F(OptionsRestored, ShowErrorsAtRunTime) {
  std::string out;
  out.reserve(4096);
  mi_register_output(&capture_output, &out);
  mi_option_set(mi_option_max_errors, 1000000);   // earlier tests may have used up the budget
  mi_option_set(mi_option_verbose, 0);
  mi_option_disable(mi_option_show_errors);
  void* p = mi_calloc(dyn((size_t)PTRDIFF_MAX), dyn(3));
  const std::string off = out;
  mi_option_enable(mi_option_show_errors);
  void* q = mi_calloc(dyn((size_t)PTRDIFF_MAX), dyn(3));
  const std::string on = out.substr(off.size());
  mi_register_output(nullptr, nullptr);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(q, nullptr);
  EXPECT_EQ(off.find("allocation request is too large"), std::string::npos) << off;
  EXPECT_EQ(on, kOverflowMessage);
}

TEST(OptionMaxErrors, OnlyThatManyMessagesAndTheRestCounted) {
  ChildResult r = run_child("calloc_overflow", { "MIMALLOC_SHOW_ERRORS=1", "MIMALLOC_MAX_ERRORS=3" }, { "10" });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(r.num("nulls"), 10) << r.describe();
  EXPECT_EQ(r.num("eoverflow"), 10) << r.describe();   // the errors still happen
  EXPECT_EQ(count_occurrences(r.err, kOverflowMessage), 3u) << r.describe();
  // and at exit, the count of the others, as the last line
  EXPECT_TRUE(r.err.size() > 0 && r.err.rfind(not_shown_line(7, 3)) == r.err.size() - not_shown_line(7, 3).size()) << r.describe();
}

TEST(OptionMaxErrors, DefaultIsSixteen) {
  ChildResult r = run_child("calloc_overflow", { "MIMALLOC_SHOW_ERRORS=1" }, { "25" });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(r.num("nulls"), 25) << r.describe();
  EXPECT_EQ(count_occurrences(r.err, kOverflowMessage), 16u) << r.describe();
  EXPECT_EQ(count_occurrences(r.err, not_shown_line(9, 16)), 1u) << r.describe();
}

TEST(OptionMaxErrors, NoCountWhenAllWereShown) {
  ChildResult r = run_child("calloc_overflow", { "MIMALLOC_SHOW_ERRORS=1", "MIMALLOC_MAX_ERRORS=3" }, { "3" });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(count_occurrences(r.err, kOverflowMessage), 3u) << r.describe();
  EXPECT_EQ(r.err.find("not shown"), std::string::npos) << r.describe();
}

TEST(OptionMaxErrors, ZeroShowsOnlyTheCount) {
  ChildResult r = run_child("calloc_overflow", { "MIMALLOC_SHOW_ERRORS=1", "MIMALLOC_MAX_ERRORS=0" }, { "5" });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(r.num("nulls"), 5) << r.describe();
  EXPECT_EQ(r.err, not_shown_line(5, 0)) << r.describe();
  ChildResult one = run_child("calloc_overflow", { "MIMALLOC_SHOW_ERRORS=1", "MIMALLOC_MAX_ERRORS=0" }, { "1" });
  ASSERT_TRUE(one.exited && one.code == 0) << one.describe();
  EXPECT_EQ(one.err, not_shown_line(1, 0)) << one.describe();
}

TEST(OptionMaxErrors, MinusOneShowsAll) {
  ChildResult r = run_child("calloc_overflow", { "MIMALLOC_SHOW_ERRORS=1", "MIMALLOC_MAX_ERRORS=-1" }, { "40" });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(count_occurrences(r.err, kOverflowMessage), 40u) << r.describe();
  EXPECT_EQ(r.err.find("not shown"), std::string::npos) << r.describe();
}

TEST(OptionMaxErrors, NothingCountedWhenErrorsAreNotShown) {
  // with show_errors off nothing is kept back by max_errors: nothing to say
  ChildResult r = run_child("calloc_overflow", { "MIMALLOC_SHOW_ERRORS=0", "MIMALLOC_MAX_ERRORS=3" }, { "10" });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(r.err, "") << r.describe();
}

TEST(OptionMaxErrors, EnvironmentWarningsDoNotUseTheBudget) {
  ChildResult r = run_child("calloc_overflow", { "MIMALLOC_SHOW_ERRORS=1", "MIMALLOC_MAX_ERRORS=3", "MIMALLOC_PAGE_RESET=bogus" }, { "10" });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(count_occurrences(r.err, invalid_bool_warning("MIMALLOC_PAGE_RESET=bogus", 1)), 1u) << r.describe();
  EXPECT_EQ(count_occurrences(r.err, kOverflowMessage), 3u) << r.describe();
  EXPECT_EQ(count_occurrences(r.err, not_shown_line(7, 3)), 1u) << r.describe();
}

TEST(OptionVerbose, ProcessMessagesAndStatisticsAtExit) {
  ChildResult r = run_child("idle", { "MIMALLOC_VERBOSE=1" });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  const size_t main_end = r.err.find("<<main returns>>");
  ASSERT_NE(main_end, std::string::npos) << r.describe();
  const size_t init = r.err.find("mimalloc: process init: 0x");
  const size_t stats = r.err.find("heap stats:", main_end);
  const size_t done = r.err.find("mimalloc: process done: 0x");
  EXPECT_LT(init, main_end) << r.describe();
  EXPECT_NE(stats, std::string::npos) << r.describe();
  EXPECT_NE(done, std::string::npos) << r.describe();
  EXPECT_GT(done, main_end) << r.describe();
  if (is_debug_build()) {
    EXPECT_NE(r.err.find("mimalloc: debug level : "), std::string::npos) << r.describe();
  }
}

TEST(OptionVerbose, StatisticsPrintedOnceWithShowStatsToo) {
  ChildResult r = run_child("idle", { "MIMALLOC_VERBOSE=1", "MIMALLOC_SHOW_STATS=1" });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(count_occurrences(r.err, "\n  reserved:"), 1u) << r.describe();
}

TEST(OptionVerbose, QuietWithoutIt) {
  for (const char* v : { "", "0" }) {
    std::vector<std::string> env;
    if (*v != 0) env.push_back(std::string("MIMALLOC_VERBOSE=") + v);
    ChildResult r = run_child("idle", env);
    ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
    EXPECT_EQ(r.err, "<<main returns>>\n") << r.describe();
  }
}

TEST(OptionVerbose, ShowsErrorsEvenWithoutShowErrors) {
  ChildResult r = run_child("calloc_overflow", { "MIMALLOC_VERBOSE=1", "MIMALLOC_SHOW_ERRORS=0" });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(count_occurrences(r.err, kOverflowMessage), 1u) << r.describe();
}

TEST(OptionShowStats, StatisticsPrintedAtExit) {
  ChildResult r = run_child("idle", { "MIMALLOC_SHOW_STATS=1" });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  const size_t main_end = r.err.find("<<main returns>>");
  ASSERT_NE(main_end, std::string::npos) << r.describe();
  EXPECT_EQ(main_end, 0u) << "nothing is printed before main ends\n" << r.describe();
  const std::string after = r.err.substr(main_end);
  EXPECT_NE(after.find("heap stats:"), std::string::npos) << r.describe();
  EXPECT_NE(after.find("\n  reserved:"), std::string::npos) << r.describe();
  EXPECT_NE(after.find("\n   process: user: "), std::string::npos) << r.describe();
  EXPECT_EQ(after.find("process done"), std::string::npos) << "not verbose\n" << r.describe();
}

TEST(OptionShowStats, EnabledAtRunTime) {
  ChildResult r = run_child("enable_at_run_time", {}, { "stats" });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_TRUE(starts_with(r.err, "<<main returns>>\nheap stats:")) << r.describe();
  EXPECT_NE(r.err.find("\n   process: user: "), std::string::npos) << r.describe();
}

TEST(OptionVerbose, EnabledAtRunTime) {
  ChildResult r = run_child("enable_at_run_time", {}, { "verbose" });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_TRUE(starts_with(r.err, "<<main returns>>\nheap stats:")) << r.describe();
  EXPECT_NE(r.err.find("mimalloc: process done: 0x"), std::string::npos) << r.describe();
}

TEST(OptionShowStats, NothingAtExitWithoutIt) {
  ChildResult r = run_child("idle", { "MIMALLOC_SHOW_STATS=0" });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(r.err, "<<main returns>>\n") << r.describe();
}
