/* ----------------------------------------------------------------------------
  test-output.cpp -- the output channel, the error handler and the
  deferred-free hook:

  - mi_register_output receives messages and the statistics of
    mi_stats_print_out(NULL, NULL) / mi_stats_print(NULL); registering
    delivers what was printed before; NULL goes back to stderr;
  - mi_register_error's handler gets the error code (EOVERFLOW, ENOMEM,
    EINVAL, and in debug builds EAGAIN and EFAULT) whether or not messages
    are shown, errno is set, and NULL unregisters it;
  - mi_register_deferred_free's hook is called with a strictly increasing
    heartbeat (each thread's own), with force=true from mi_collect(true), never recursively, and
    not anymore after registering NULL;
  - with show_stats or verbose, output at exit reaches the stderr the
    program started with even if the program closed it (fclose or close),
    reused its descriptor for a file, or reassigned it; otherwise no
    descriptor is taken.
-----------------------------------------------------------------------------*/
#include <gtest/gtest.h>
#include <mimalloc.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <unistd.h>   // (mingw-w64 has it too: the C runtime's descriptors)

#include "options-util.h"

using namespace mitest;

namespace {

// Restores output, error handler, deferred-free hook and the message options.
class Channel : public ::testing::Test {
 protected:
  void SetUp() override {
    show_errors_ = mi_option_get(mi_option_show_errors);
    verbose_ = mi_option_get(mi_option_verbose);
    max_errors_ = mi_option_get(mi_option_max_errors);
    mi_option_set(mi_option_max_errors, 1000000);   // other tests may have used the budget
    mi_option_set(mi_option_verbose, 0);
  }
  void TearDown() override {
    mi_register_output(nullptr, nullptr);
    mi_register_error(nullptr, nullptr);
    mi_register_deferred_free(nullptr, nullptr);
    mi_option_set(mi_option_show_errors, show_errors_);
    mi_option_set(mi_option_verbose, verbose_);
    mi_option_set(mi_option_max_errors, max_errors_);
  }
  long show_errors_ = 0, verbose_ = 0, max_errors_ = 16;
};

void* calloc_overflow() { return mi_calloc(dyn((size_t)PTRDIFF_MAX), dyn(3)); }

// Memory that is certainly not ours but whose "segment" address is mapped:
// a 4 MiB-aligned address inside a private mapping (so even the release
// free path, which reads the owner id there, is safe).
struct ForeignMemory {
  void* base = nullptr;
  size_t size = 12 * MiB;
  uint8_t* aligned = nullptr;   // 4 MiB aligned, 4 MiB usable
  ForeignMemory() {
    base = map_private(size);
    if (base == nullptr) return;
    aligned = (uint8_t*)(((uintptr_t)base + 4 * MiB - 1) & ~(uintptr_t)(4 * MiB - 1));
  }
  ~ForeignMemory() { unmap_private(base, size); }
};

// ------------------------------------------------------
// Error handler recording
// ------------------------------------------------------

struct ErrorLog {
  int count = 0;
  int last = 0;
  void* last_arg = nullptr;
};
ErrorLog g_errors;

void record_error(int err, void* arg) {
  g_errors.count++;
  g_errors.last = err;
  g_errors.last_arg = arg;
}

int g_error_arg_tag;

}  // namespace

// ------------------------------------------------------
// Output
// ------------------------------------------------------

TEST_F(Channel, RegisteredOutputReceivesMessages) {
  std::string out;
  out.reserve(64 * 1024);
  mi_register_output(&capture_output, &out);
  const size_t flushed = out.size();   // registering delivers earlier messages first
  mi_option_enable(mi_option_show_errors);
  void* p = calloc_overflow();
  const std::string got = out.substr(flushed);
  mi_register_output(nullptr, nullptr);   // back to stderr
  void* q = calloc_overflow();
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(q, nullptr);
  EXPECT_EQ(got, "mimalloc: error: allocation request is too large (9223372036854775807 * 3 bytes)\n");
  EXPECT_EQ(out.size(), flushed + got.size()) << "nothing more after unregistering";
}

TEST_F(Channel, RegisteredOutputReceivesTheStatistics) {
  std::string out;
  out.reserve(64 * 1024);
  mi_register_output(&capture_output, &out);
  const size_t flushed = out.size();
  mi_stats_print_out(nullptr, nullptr);
  const std::string s1 = out.substr(flushed);
  mi_stats_print(nullptr);   // the 1.6 form: NULL is the default output
  const std::string s2 = out.substr(flushed + s1.size());
  std::string direct;
  direct.reserve(64 * 1024);
  mi_stats_print_out(&capture_output, &direct);   // an explicit function gets it instead
  const size_t after = out.size();
  mi_register_output(nullptr, nullptr);
  EXPECT_TRUE(starts_with(s1, "heap stats:")) << s1;
  EXPECT_NE(s1.find("\n   process: user: "), std::string::npos) << s1;
  EXPECT_TRUE(starts_with(s2, "heap stats:")) << s2;
  EXPECT_NE(s2.find("\n   process: user: "), std::string::npos) << s2;
  EXPECT_TRUE(starts_with(direct, "heap stats:")) << direct;
  EXPECT_EQ(after, flushed + s1.size() + s2.size()) << "mi_stats_print_out(fn, arg) bypasses the registered output";
}

static std::string* g_stats_target;
static void capture_global(const char* msg, void* arg) {
  if (arg == nullptr && g_stats_target != nullptr) g_stats_target->append(msg);
}

TEST_F(Channel, StatsPrintTakesAnOutputFunction) {
  // mi_stats_print(out): 1.6 compatibility, `out` other than NULL/stdout/stderr
  // is an output function called with a NULL argument
  std::string text;
  text.reserve(64 * 1024);
  g_stats_target = &text;
  mi_stats_print((void*)&capture_global);
  g_stats_target = nullptr;
  EXPECT_TRUE(starts_with(text, "heap stats:")) << text;
  EXPECT_NE(text.find("\n   process: user: "), std::string::npos) << text;
}

// The child's output function writes straight to stdout (no allocation).
static void out_to_stdout(const char* msg, void* arg) {
  if (arg != (void*)&g_error_arg_tag) { (void)!write(STDOUT_FILENO, "BAD ARG\n", 8); }
  (void)!write(STDOUT_FILENO, msg, strlen(msg));
}

MI_CHILD(register_output) {
  (void)argc; (void)argv;
  fputs("<<registering>>\n", stderr);
  fflush(stderr);
  mi_register_output(&out_to_stdout, &g_error_arg_tag);
  (void)!write(STDOUT_FILENO, "<<registered>>\n", 15);
  void* p = calloc_overflow();
  mi_free(p);
  return 0;
}

TEST(Output, RegisteringDeliversEarlierMessagesAndTakesOverStderr) {
  ChildResult r = run_child("register_output", { "MIMALLOC_VERBOSE=1" });
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(r.out.find("BAD ARG"), std::string::npos) << r.describe();
  // what was printed before main arrives at registration
  const size_t reg = r.out.find("<<registered>>");
  ASSERT_NE(reg, std::string::npos) << r.describe();
  const std::string before = r.out.substr(0, reg);
  const std::string after = r.out.substr(reg);
  EXPECT_NE(before.find("mimalloc: option 'show_errors': "), std::string::npos) << r.describe();
  EXPECT_NE(before.find("mimalloc: option 'max_errors': 16\n"), std::string::npos) << r.describe();
  EXPECT_NE(before.find("mimalloc: process init: 0x"), std::string::npos) << r.describe();
  // later messages, and the statistics at exit, go to the function only
  EXPECT_NE(after.find("mimalloc: error: allocation request is too large"), std::string::npos) << r.describe();
  EXPECT_NE(after.find("heap stats:"), std::string::npos) << r.describe();
  EXPECT_NE(after.find("mimalloc: process done: 0x"), std::string::npos) << r.describe();
  const size_t mark = r.err.find("<<registering>>\n");
  ASSERT_NE(mark, std::string::npos) << r.describe();
  EXPECT_EQ(r.err.substr(mark), "<<registering>>\n") << "nothing on stderr after registering\n" << r.describe();
}

// ------------------------------------------------------
// Error handler
// ------------------------------------------------------

TEST_F(Channel, ErrorHandlerGetsEoverflowForCountTimesSize) {
  g_errors = ErrorLog();
  mi_register_error(&record_error, &g_error_arg_tag);
  mi_option_disable(mi_option_show_errors);   // called whether or not messages are shown
  errno = 0;
  void* p = calloc_overflow();
  const int e = errno;
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(e, EOVERFLOW);
  EXPECT_EQ(g_errors.count, 1);
  EXPECT_EQ(g_errors.last, EOVERFLOW);
  EXPECT_EQ(g_errors.last_arg, (void*)&g_error_arg_tag);
  errno = 0;
  void* q = mi_mallocn(dyn(SIZE_MAX / 2), dyn(4));
  EXPECT_EQ(q, nullptr);
  EXPECT_EQ(errno, EOVERFLOW);
  EXPECT_EQ(g_errors.count, 2);
  EXPECT_EQ(g_errors.last, EOVERFLOW);
}

TEST_F(Channel, ErrorHandlerGetsEoverflowAbovePtrdiffMax) {
  g_errors = ErrorLog();
  mi_register_error(&record_error, &g_error_arg_tag);
  mi_option_enable(mi_option_show_errors);
  std::string out;
  out.reserve(4096);
  mi_register_output(&capture_output, &out);
  out.clear();
  errno = 0;
  void* p = mi_malloc(dyn((size_t)PTRDIFF_MAX + 1));
  const int e = errno;
  mi_register_output(nullptr, nullptr);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(e, EOVERFLOW);
  EXPECT_EQ(g_errors.count, 1);
  EXPECT_EQ(g_errors.last, EOVERFLOW);
  EXPECT_EQ(out, "mimalloc: error: allocation request is too large (9223372036854775808 bytes)\n");
}

TEST_F(Channel, ErrorHandlerGetsEnomemForAnImpossibleSize) {
  g_errors = ErrorLog();
  mi_register_error(&record_error, &g_error_arg_tag);
  mi_option_enable(mi_option_show_errors);
  std::string out;
  out.reserve(16 * 1024);
  mi_register_output(&capture_output, &out);
  out.clear();
  errno = 0;
  void* p = mi_malloc(dyn((size_t)1 << 57));
  const int e = errno;
  mi_register_output(nullptr, nullptr);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(e, ENOMEM);
  EXPECT_EQ(g_errors.count, 1);
  EXPECT_EQ(g_errors.last, ENOMEM);
  EXPECT_NE(out.find("mimalloc: error: unable to allocate memory ("), std::string::npos) << out;
}

TEST_F(Channel, ErrorHandlerGetsEinvalForAForeignPointer) {
  ForeignMemory foreign;
  ASSERT_NE(foreign.base, nullptr);
  uint8_t* p = foreign.aligned + 4096;
  memset(foreign.aligned, 0x77, 2 * 4096);
  g_errors = ErrorLog();
  mi_register_error(&record_error, &g_error_arg_tag);
  mi_option_enable(mi_option_show_errors);
  std::string out;
  out.reserve(4096);
  mi_register_output(&capture_output, &out);
  out.clear();
  errno = ERANGE;
  mi_free(p);
  const int e = errno;
  mi_register_output(nullptr, nullptr);
  EXPECT_EQ(e, ERANGE);   // free keeps errno: the handler gets the code
  EXPECT_EQ(g_errors.count, 1);
  EXPECT_EQ(g_errors.last, EINVAL);
  EXPECT_EQ(out, "mimalloc: error: mi_free: invalid pointer (not allocated by mimalloc): " + ptr_str(p) + "\n");
  // and nothing was written there
  bool untouched = true;
  for (size_t i = 0; i < 2 * 4096; i++) untouched = untouched && (foreign.aligned[i] == 0x77);
  EXPECT_TRUE(untouched);
}

TEST_F(Channel, ErrorHandlerGetsEagainForADoubleFree) {
  // debug builds only: in release builds a double free is undefined behaviour
  if (!is_debug_build()) GTEST_SKIP() << "double-free detection is a debug-build check";
  g_errors = ErrorLog();
  mi_register_error(&record_error, &g_error_arg_tag);
  mi_option_disable(mi_option_show_errors);
  void* keep = mi_malloc(dyn(32));   // the page stays in use
  void* p = mi_malloc(dyn(32));
  mi_free(p);
  errno = ERANGE;
  mi_free(p);
  const int e = errno;
  EXPECT_EQ(e, ERANGE);   // free keeps errno: the handler gets the code
  EXPECT_EQ(g_errors.count, 1);
  EXPECT_EQ(g_errors.last, EAGAIN);
  mi_free(keep);
}

TEST_F(Channel, ErrorHandlerGetsEfaultForABufferOverflow) {
  // debug builds only (padding); the handler returns, so nothing aborts
  if (!is_debug_build()) GTEST_SKIP() << "overflow detection needs the debug build's padding";
  g_errors = ErrorLog();
  mi_register_error(&record_error, &g_error_arg_tag);
  mi_option_disable(mi_option_show_errors);
  uint8_t* p = opaque((uint8_t*)mi_malloc(dyn(13)));
  p[dyn(13)] = 0;   // one byte past the request
  errno = ERANGE;
  mi_free(p);
  const int e = errno;
  EXPECT_EQ(e, ERANGE);   // free keeps errno: the handler gets the code
  EXPECT_EQ(g_errors.count, 1);
  EXPECT_EQ(g_errors.last, EFAULT);
}

TEST_F(Channel, ErrorHandlerCanBeUnregistered) {
  g_errors = ErrorLog();
  mi_register_error(&record_error, nullptr);
  mi_option_disable(mi_option_show_errors);
  void* p = calloc_overflow();
  EXPECT_EQ(g_errors.count, 1);
  mi_register_error(nullptr, nullptr);
  errno = 0;
  void* q = calloc_overflow();
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(q, nullptr);
  EXPECT_EQ(errno, EOVERFLOW) << "the default handler still sets errno";
  EXPECT_EQ(g_errors.count, 1);
}

// ------------------------------------------------------
// Deferred free
// ------------------------------------------------------

namespace {

struct DeferredLog {
  std::atomic<long> calls{ 0 };
  long forced = 0;
  long generation = 0;   // bumped by reset_deferred: the threads' last beats start over
  bool increasing = true;   // every thread's heartbeats (they are per thread)
  bool any_forced_in_loop = false;
  void* arg = nullptr;
  int depth = 0;
  int max_depth = 0;
  bool allocate = false;   // allocate inside the hook
};
DeferredLog g_deferred;

void deferred_hook(bool force, unsigned long long heartbeat, void* arg) {
  DeferredLog& d = g_deferred;
  d.depth++;
  if (d.depth > d.max_depth) d.max_depth = d.depth;
  d.calls++;
  d.arg = arg;
  if (force) d.forced++;
  static thread_local long last_generation = -1;
  static thread_local unsigned long long last_beat = 0;
  if (last_generation == d.generation && heartbeat <= last_beat) d.increasing = false;
  last_generation = d.generation;
  last_beat = heartbeat;
  if (d.allocate) {
    // allocations inside the hook take the slow path, which would call the hook again
    for (int i = 0; i < 16; i++) {
      void* p = mi_malloc(dyn(2000 + (size_t)i * 1000));
      mi_free(p);
    }
  }
  d.depth--;
}

void allocation_loop(size_t rounds) {
  static void* live[256];
  for (size_t r = 0; r < rounds; r++) {
    for (size_t i = 0; i < 256; i++) live[i] = mi_malloc(dyn(8 + (i * 37 + r) % 3000));
    for (size_t i = 0; i < 256; i++) mi_free(live[i]);
  }
}

void reset_deferred(bool allocate) {
  g_deferred.calls = 0;
  g_deferred.forced = 0;
  g_deferred.generation++;
  g_deferred.increasing = true;
  g_deferred.arg = nullptr;
  g_deferred.depth = 0;
  g_deferred.max_depth = 0;
  g_deferred.allocate = allocate;
}

}  // namespace

TEST_F(Channel, DeferredFreeHeartbeatIncreases) {
  reset_deferred(false);
  mi_register_deferred_free(&deferred_hook, &g_error_arg_tag);
  allocation_loop(200);
  mi_register_deferred_free(nullptr, nullptr);
  EXPECT_GT(g_deferred.calls.load(), 10);
  EXPECT_TRUE(g_deferred.increasing);
  EXPECT_EQ(g_deferred.forced, 0) << "allocation never forces";
  EXPECT_EQ(g_deferred.arg, (void*)&g_error_arg_tag);
}

// A program that only frees and allocates blocks of one size in a loop mostly
// takes its freed blocks back without the generic path's housekeeping
// (_mi_page_refill; over 1 KiB from the fast path of the size's queue);
// the hook still runs at least every 64 of those, for every size. (In a
// heap of its own, whose pages start empty: a page of the default heap may
// still have the free blocks of earlier tests in this process, and a free
// list of k blocks runs out only every k iterations.)
TEST_F(Channel, DeferredFreeRunsWhileFreedBlocksAreRecycled) {
  for (size_t size : {(size_t)1000, (size_t)4096, (size_t)20000}) {
    reset_deferred(false);
    mi_heap_t* heap = mi_heap_new();
    ASSERT_NE(heap, nullptr);
    mi_register_deferred_free(&deferred_hook, nullptr);
    void* keep = mi_heap_malloc(heap, dyn(size));   // (the page never empties)
    for (int i = 0; i < 64000; i++) {
      void* p = opaque(mi_heap_malloc(heap, dyn(size)));
      ASSERT_NE(p, nullptr);
      mi_free(p);
    }
    mi_free(keep);
    mi_register_deferred_free(nullptr, nullptr);
    mi_heap_delete(heap);
    // (release: about 330 at 1000 bytes, whose free list runs out every 3
    // iterations, 1000 over 1 KiB. Secure builds refill with the whole
    // local_free list: it runs out once per page's worth of blocks, at most
    // 64 of these sizes: at least 64000 / 64 / 64 = 15 runs.)
    EXPECT_GE(g_deferred.calls.load(), 15) << "the hook ran too seldom for blocks of " << size;
    EXPECT_TRUE(g_deferred.increasing);
  }
}

TEST_F(Channel, DeferredFreeIsForcedByCollectTrue) {
  reset_deferred(false);
  mi_register_deferred_free(&deferred_hook, nullptr);
  mi_collect(false);
  const long calls_normal = g_deferred.calls.load();
  const long forced_normal = g_deferred.forced;
  mi_collect(true);
  const long calls_forced = g_deferred.calls.load();
  const long forced_forced = g_deferred.forced;
  mi_register_deferred_free(nullptr, nullptr);
  EXPECT_GE(calls_normal, 1);
  EXPECT_EQ(forced_normal, 0);
  EXPECT_GT(calls_forced, calls_normal);
  EXPECT_GE(forced_forced, 1);
  EXPECT_TRUE(g_deferred.increasing);
}

TEST_F(Channel, DeferredFreeIsNeverRecursive) {
  reset_deferred(true);
  mi_register_deferred_free(&deferred_hook, nullptr);
  allocation_loop(50);
  mi_collect(true);
  mi_register_deferred_free(nullptr, nullptr);
  EXPECT_GT(g_deferred.calls.load(), 1);
  EXPECT_EQ(g_deferred.max_depth, 1);
  EXPECT_TRUE(g_deferred.increasing);
}

TEST_F(Channel, DeferredFreeCanBeUnregistered) {
  reset_deferred(false);
  mi_register_deferred_free(&deferred_hook, nullptr);
  allocation_loop(20);
  const long calls = g_deferred.calls.load();
  mi_register_deferred_free(nullptr, nullptr);
  allocation_loop(50);
  mi_collect(true);
  EXPECT_GT(calls, 0);
  EXPECT_EQ(g_deferred.calls.load(), calls);
}

TEST_F(Channel, DeferredFreeRunsOnOtherThreads) {
  // the heartbeat is per thread: a new thread's hook calls increase too
  reset_deferred(false);
  mi_register_deferred_free(&deferred_hook, nullptr);
  std::thread t([] { allocation_loop(50); });
  t.join();
  mi_register_deferred_free(nullptr, nullptr);
  EXPECT_GT(g_deferred.calls.load(), 1);
  EXPECT_TRUE(g_deferred.increasing);
}

// ------------------------------------------------------
// Output at exit when the program closed its stderr
// ------------------------------------------------------

// Closes stderr before returning from main, the way argv[0] says: "fclose"
// (as coreutils' close_stdout does), "close", "reuse" (close, then open the
// file argv[1], which gets descriptor 2, and write to it) or "redirect"
// (dup2 the file argv[1] onto descriptor 2).
MI_CHILD(close_stderr) {
  const std::string how = (argc > 0 ? argv[0] : "fclose");
  void* p = mi_malloc(dyn(100));
  mi_free(p);
  fputs("<<main returns>>\n", stderr);
  fflush(stderr);
  if (how == "fclose") {
    fclose(stderr);
  }
  else if (how == "close") {
    close(STDERR_FILENO);
  }
  else if (how == "reuse" && argc > 1) {
    close(STDERR_FILENO);
    const int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    emit("fd", fd);
    if (write(fd, "data\n", 5) != 5) return 2;
  }
  else if (how == "redirect" && argc > 1) {
    const int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || dup2(fd, STDERR_FILENO) < 0) return 2;
    close(fd);
    fputs("program message\n", stderr);
    fflush(stderr);
  }
  return 0;
}

// The open descriptors (Windows: handles), and how many of them are
// close-on-exec (Windows: not inherited).
MI_CHILD(count_fds) {
  (void)argc; (void)argv;
  long open_fds = 0, cloexec = 0;
  if (!count_descriptors(&open_fds, &cloexec)) return 2;
  emit("open", open_fds);
  emit("cloexec", cloexec);
  return 0;
}

namespace {
std::string read_file(const std::string& path) {
  std::string text;
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) return "<missing>";
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
  fclose(f);
  return text;
}

std::string temp_path(const char* tag) { return temp_file_path(tag); }
}  // namespace

TEST(OutputAtExit, StatisticsReachAClosedStderr) {
  for (const char* how : { "fclose", "close" }) {
    for (const char* option : { "MIMALLOC_SHOW_STATS=1", "MIMALLOC_VERBOSE=1" }) {
      ChildResult r = run_child("close_stderr", { option }, { how });
      ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
      const size_t main_end = r.err.find("<<main returns>>");
      ASSERT_NE(main_end, std::string::npos) << r.describe();
      EXPECT_NE(r.err.find("heap stats:", main_end), std::string::npos) << how << " " << option << "\n" << r.describe();
      EXPECT_NE(r.err.find("\n   process: user: ", main_end), std::string::npos) << how << " " << option << "\n" << r.describe();
      if (std::string(option) == "MIMALLOC_VERBOSE=1") {
        EXPECT_NE(r.err.find("mimalloc: process done: 0x", main_end), std::string::npos) << how << "\n" << r.describe();
      }
    }
  }
}

TEST(OutputAtExit, NotIntoAFileThatTookTheDescriptor) {
  const std::string path = temp_path("reuse");
  ChildResult r = run_child("close_stderr", { "MIMALLOC_SHOW_STATS=1" }, { "reuse", path });
  const std::string file = read_file(path);
  unlink(path.c_str());
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(r.num("fd"), 2) << r.describe();
  EXPECT_EQ(file, "data\n") << "the statistics went into the program's file";
  EXPECT_NE(r.err.find("heap stats:"), std::string::npos) << r.describe();
}

TEST(OutputAtExit, ToTheStderrTheProgramStartedWith) {
  // a program that reassigns descriptor 2 does not take the statistics along
  const std::string path = temp_path("redirect");
  ChildResult r = run_child("close_stderr", { "MIMALLOC_SHOW_STATS=1" }, { "redirect", path });
  const std::string file = read_file(path);
  unlink(path.c_str());
  ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
  EXPECT_EQ(file, "program message\n");
  EXPECT_NE(r.err.find("heap stats:"), std::string::npos) << r.describe();
}

TEST(OutputAtExit, WithoutStatisticsStderrIsNotKept) {
  // a closed stderr stays closed: nothing written anywhere, no descriptor kept
  ChildResult quiet = run_child("close_stderr", {}, { "fclose" });
  ASSERT_TRUE(quiet.exited && quiet.code == 0) << quiet.describe();
  EXPECT_EQ(quiet.err, "<<main returns>>\n") << quiet.describe();
  ChildResult plain = run_child("count_fds", {});
  ChildResult stats = run_child("count_fds", { "MIMALLOC_SHOW_STATS=1" });
  ASSERT_TRUE(plain.exited && plain.code == 0) << plain.describe();
  ASSERT_TRUE(stats.exited && stats.code == 0) << stats.describe();
  // with statistics: one more descriptor, close-on-exec (not inherited by programs it runs)
  // (Windows: one more handle, not inheritable)
  EXPECT_EQ(stats.num("open"), plain.num("open") + 1) << plain.describe() << stats.describe();
  EXPECT_EQ(stats.num("cloexec"), plain.num("cloexec") + 1) << plain.describe() << stats.describe();
}
