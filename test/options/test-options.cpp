/* ----------------------------------------------------------------------------
  test-options.cpp -- the option functions, environment parsing, and the
  options that govern messages.

  - mi_option_get / set / set_default / is_enabled / enable / disable /
    set_enabled / set_enabled_default, in-process and in fresh processes;
  - defaults of every option in a fresh process;
  - MIMALLOC_<NAME> parsing: case-insensitive names, the true/false words,
    the empty value, complete integers, and the warning for anything else;
  - every option set in the environment is reported by MIMALLOC_VERBOSE=1
    (this is the only effect shown for large_os_pages,
    reserve_huge_os_pages, use_numa_nodes and os_tag, which later issues
    wire);
  - show_errors, max_errors, verbose and show_stats.
-----------------------------------------------------------------------------*/
#include <gtest/gtest.h>
#include <mimalloc.h>

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
  long release_default;   // 64-bit Linux defaults
};

// Enum order (the ABI order of mimalloc 1.6).
const OptionInfo kOptions[] = {
  { mi_option_show_errors,          "show_errors",           0 },
  { mi_option_show_stats,           "show_stats",            0 },
  { mi_option_verbose,              "verbose",               0 },
  { mi_option_eager_commit,         "eager_commit",          1 },
  { mi_option_eager_region_commit,  "eager_region_commit",   1 },
  { mi_option_reset_decommits,      "reset_decommits",       0 },
  { mi_option_large_os_pages,       "large_os_pages",        0 },
  { mi_option_reserve_huge_os_pages,"reserve_huge_os_pages", 0 },
  { mi_option_segment_cache,        "segment_cache",         0 },
  { mi_option_page_reset,           "page_reset",            1 },
  { mi_option_abandoned_page_reset, "abandoned_page_reset",  0 },
  { mi_option_segment_reset,        "segment_reset",         0 },
  { mi_option_eager_commit_delay,   "eager_commit_delay",    1 },
  { mi_option_reset_delay,          "reset_delay",           100 },
  { mi_option_use_numa_nodes,       "use_numa_nodes",        0 },
  { mi_option_os_tag,               "os_tag",                100 },
  { mi_option_max_errors,           "max_errors",            16 },
};
constexpr size_t kOptionCount = sizeof(kOptions) / sizeof(kOptions[0]);
static_assert(kOptionCount == (size_t)_mi_option_last, "every option is listed");

long expected_default(const OptionInfo& o) {
  if (o.option == mi_option_show_errors) return (is_debug_build() || MI_TEST_SHOW_ERRORS ? 1 : 0);
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

TEST(OptionsEnv, EveryOptionIsReadFromItsVariable) {
  // one process, a distinct non-default value for every option
  std::vector<std::string> env;
  for (size_t i = 0; i < kOptionCount; i++) {
    if (kOptions[i].option == mi_option_verbose) continue;   // keep the output quiet
    env.push_back(env_name(kOptions[i].name) + "=" + std::to_string(200 + i));
  }
  ChildResult r = child_options(env);
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  for (size_t i = 0; i < kOptionCount; i++) {
    if (kOptions[i].option == mi_option_verbose) continue;
    EXPECT_EQ(r.num(opt_key(kOptions[i].name)), (long long)(200 + i)) << kOptions[i].name << "\n" << r.describe();
  }
}

TEST(OptionsEnv, NameIsCaseInsensitive) {
  ChildResult r = child_options({ "mimalloc_reset_delay=250", "MiMaLlOc_Os_TaG=123", "MIMALLOC_use_NUMA_nodes=2" });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(r.num("opt.reset_delay"), 250) << r.describe();
  EXPECT_EQ(r.num("opt.os_tag"), 123) << r.describe();
  EXPECT_EQ(r.num("opt.use_numa_nodes"), 2) << r.describe();
}

TEST(OptionsEnv, NameMustBeFollowedByEquals) {
  // longer or shorter names are other variables
  ChildResult r = child_options({ "MIMALLOC_RESET_DELAYX=5", "MIMALLOC_OS_TA=7", "MIMALLOC_OS_TAG_=9",
                                  "XMIMALLOC_SEGMENT_RESET=1", "MIMALLOC_PAGE_RESET2=0" });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(r.num("opt.reset_delay"), 100) << r.describe();
  EXPECT_EQ(r.num("opt.os_tag"), 100) << r.describe();
  EXPECT_EQ(r.num("opt.segment_reset"), 0) << r.describe();
  EXPECT_EQ(r.num("opt.page_reset"), 1) << r.describe();
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
    EXPECT_EQ(r.err.find("invalid value"), std::string::npos) << "value '" << v << "'\n" << r.describe();
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
    EXPECT_EQ(r.err.find("invalid value"), std::string::npos) << "value '" << v << "'\n" << r.describe();
  }
}

TEST(OptionsEnv, CompleteIntegers) {
  struct { const char* text; long value; } cases[] = {
    { "250", 250 }, { "42", 42 }, { "-1", -1 }, { "1000000", 1000000 }, { "007", 7 }, { "2", 2 },
  };
  for (const auto& c : cases) {
    ChildResult r = child_options({ std::string("MIMALLOC_RESET_DELAY=") + c.text, "MIMALLOC_SHOW_ERRORS=1" });
    ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
    EXPECT_EQ(r.num("opt.reset_delay"), c.value) << "value '" << c.text << "'\n" << r.describe();
    EXPECT_EQ(r.err.find("invalid value"), std::string::npos) << "value '" << c.text << "'\n" << r.describe();
  }
}

TEST(OptionsEnv, InvalidValuesKeepTheDefaultAndWarn) {
  // only whole words count ("Y" and "ES" are parts of "YES"), and only
  // integers that strtol consumes completely
  const char* values[] = { "Y", "ES", "N", "T", "12x", "maybe", "1.5", "0x10", "yes please", "enabled", "1 ", "-", "+" };
  for (const char* v : values) {
    ChildResult r = child_options({ std::string("MIMALLOC_PAGE_RESET=") + v,
                                    std::string("MIMALLOC_RESET_DELAY=") + v,
                                    "MIMALLOC_SHOW_ERRORS=1" });
    ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
    EXPECT_EQ(r.num("opt.page_reset"), 1) << "value '" << v << "'\n" << r.describe();
    EXPECT_EQ(r.num("opt.reset_delay"), 100) << "value '" << v << "'\n" << r.describe();
    const std::string w1 = "mimalloc: warning: environment option mimalloc_page_reset has an invalid value: " + upper(v) + "\n";
    const std::string w2 = "mimalloc: warning: environment option mimalloc_reset_delay has an invalid value: " + upper(v) + "\n";
    EXPECT_EQ(count_occurrences(r.err, w1), 1u) << "value '" << v << "'\n" << r.describe();
    EXPECT_EQ(count_occurrences(r.err, w2), 1u) << "value '" << v << "'\n" << r.describe();
  }
}

TEST(OptionsEnv, InvalidValueWarningNeedsShowErrors) {
  ChildResult quiet = child_options({ "MIMALLOC_PAGE_RESET=maybe", "MIMALLOC_SHOW_ERRORS=0" });
  ASSERT_TRUE(quiet.exited && quiet.code == 0) << quiet.describe();
  EXPECT_EQ(quiet.num("opt.page_reset"), 1) << quiet.describe();
  EXPECT_EQ(quiet.err.find("mimalloc"), std::string::npos) << quiet.describe();

  // without MIMALLOC_SHOW_ERRORS the default decides: on only in debug builds
  ChildResult dflt = child_options({ "MIMALLOC_PAGE_RESET=maybe" });
  ASSERT_TRUE(dflt.exited && dflt.code == 0) << dflt.describe();
  const bool shown = (is_debug_build() || MI_TEST_SHOW_ERRORS);
  EXPECT_EQ(dflt.err.find("has an invalid value: MAYBE") != std::string::npos, shown) << dflt.describe();
}

TEST(OptionsEnv, VerboseReportsEveryOptionFromTheEnvironment) {
  // large_os_pages, reserve_huge_os_pages, use_numa_nodes and os_tag are
  // not wired yet: this is where their values show
  for (size_t i = 0; i < kOptionCount; i++) {
    const OptionInfo& o = kOptions[i];
    if (o.option == mi_option_verbose) continue;
    const long value = (o.option == mi_option_os_tag ? 120 : o.option == mi_option_reset_delay ? 250 :
                        o.option == mi_option_max_errors ? 20 : o.release_default == 0 ? 1 : 0);
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

TEST(OptionMaxErrors, OnlyThatManyMessages) {
  ChildResult r = run_child("calloc_overflow", { "MIMALLOC_SHOW_ERRORS=1", "MIMALLOC_MAX_ERRORS=3" }, { "10" });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(r.num("nulls"), 10) << r.describe();
  EXPECT_EQ(r.num("eoverflow"), 10) << r.describe();   // the errors still happen
  EXPECT_EQ(count_occurrences(r.err, kOverflowMessage), 3u) << r.describe();
}

TEST(OptionMaxErrors, DefaultIsSixteen) {
  ChildResult r = run_child("calloc_overflow", { "MIMALLOC_SHOW_ERRORS=1" }, { "25" });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(r.num("nulls"), 25) << r.describe();
  EXPECT_EQ(count_occurrences(r.err, kOverflowMessage), 16u) << r.describe();
}

TEST(OptionMaxErrors, ZeroSilencesEverything) {
  ChildResult r = run_child("calloc_overflow", { "MIMALLOC_SHOW_ERRORS=1", "MIMALLOC_MAX_ERRORS=0" }, { "5" });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(r.num("nulls"), 5) << r.describe();
  EXPECT_EQ(r.err, "") << r.describe();
}

TEST(OptionMaxErrors, WarningsAndErrorsShareTheBudget) {
  // one warning (the invalid value) + at most two of the ten errors
  ChildResult r = run_child("calloc_overflow", { "MIMALLOC_SHOW_ERRORS=1", "MIMALLOC_MAX_ERRORS=3", "MIMALLOC_PAGE_RESET=bogus" }, { "10" });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(count_occurrences(r.err, "has an invalid value: BOGUS\n"), 1u) << r.describe();
  EXPECT_EQ(count_occurrences(r.err, kOverflowMessage), 2u) << r.describe();
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
