/* ----------------------------------------------------------------------------
  options-util.h -- helpers of the options / messages / statistics suite.

  Options are read from the environment when the library is loaded (and
  lazily afterwards), and some messages are only printed at process start or
  exit. So most tests here run a *child process*: the test binary itself,
  started with `--child <scenario> [args...]` and an environment of our
  choosing (every inherited MIMALLOC_* variable is removed first). The child
  runs one scenario (registered with MI_CHILD) and reports what it measured
  as `key=value` lines on stdout; the parent test captures stdout, stderr and
  the exit status, and makes the assertions.

  Also here: a parser for the statistics table, readers for
  /proc/self/statm and /proc/self/maps, and a capturing output function.

  Everything that differs between Linux and Windows lives in this pair of
  files (options-util.cpp has the two implementations), so the test files
  are the same for both: the child processes (fork and execve, or
  CreateProcess with pipes), the process as the OS sees it (/proc, or
  GetProcessMemoryInfo and VirtualQuery, with the Linux names: a mapping's
  permissions read "rw-p" or "---p" on both), memory mapped directly,
  descriptors (or handles), time, temporary files.
-----------------------------------------------------------------------------*/
#pragma once
#ifndef MI_TEST_OPTIONS_UTIL_H
#define MI_TEST_OPTIONS_UTIL_H

#include <mimalloc.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace mitest {

constexpr size_t KiB = 1024;
constexpr size_t MiB = 1024 * KiB;

// ------------------------------------------------------
// The platform
// ------------------------------------------------------

#if defined(_WIN32)
constexpr bool kWindows = true;
#else
constexpr bool kWindows = false;
#endif

// Windows charges every committed byte against the system's commit limit
// (Linux maps with MAP_NORESERVE): there the library commits a region
// segment by segment, and eager_region_commit defaults to 0.
constexpr bool kCommitIsCharged = kWindows;

// ------------------------------------------------------
// Hiding values from the optimiser
// ------------------------------------------------------

// Returns `p` unchanged, but the compiler can no longer see where it came
// from (so checks on allocator results and writes past a requested size are
// not folded or diagnosed at compile time).
template <typename T>
inline T* opaque(T* p) {
#if defined(__GNUC__)
  __asm__ volatile("" : "+r"(p));
#endif
  return p;
}

inline size_t dyn(size_t n) {
  volatile size_t v = n;
  return v;
}

// ------------------------------------------------------
// Build kind
// ------------------------------------------------------

// Debug builds pad every block and make mi_usable_size exact:
// mi_usable_size(mi_malloc(1)) == 1 only there.
bool is_debug_build();

// The debug build's per-block trailer.
constexpr size_t kPaddingSize = 8;

// ------------------------------------------------------
// Child processes
// ------------------------------------------------------

typedef int (*child_fun_t)(int argc, char** argv);

struct ChildRegistrar {
  ChildRegistrar(const char* name, child_fun_t fun);
};

// Define a child scenario: `MI_CHILD(name) { ...; return exit_code; }`;
// `argc`/`argv` are the arguments after the scenario name.
#define MI_CHILD(name)                                                   \
  static int mi_child_##name(int argc, char** argv);                     \
  static ::mitest::ChildRegistrar mi_child_reg_##name(#name, &mi_child_##name); \
  static int mi_child_##name(int argc, char** argv)

// Runs the registered scenario if argv asks for one (`--child <name> ...`);
// returns -1 if this is not a child invocation.
int child_dispatch(int argc, char** argv);

struct ChildResult {
  bool exited = false;   // exited normally (then `code` is the exit code)
  int code = -1;
  int signal = 0;        // Linux: the terminating signal otherwise
  unsigned long exception = 0;   // Windows: the NTSTATUS a crash ended it with otherwise (0xC0000005, ...)
  bool timed_out = false;
  std::string out;       // stdout
  std::string err;       // stderr

  // "key=value" lines of stdout
  bool has(const std::string& key) const;
  std::string str(const std::string& key) const;
  long long num(const std::string& key) const;   // -1 (and a failed test) if absent
  std::string describe() const;                  // for assertion messages
  // ended by abort(): killed by SIGABRT on Linux; on Windows, where there
  // are no signals, the C runtime's abort() exits with code 3 (no scenario
  // exits with 3 on its own)
  bool aborted() const;
};

// Run the scenario in a fresh process with the inherited environment minus
// all MIMALLOC_* variables, plus `env` ("NAME=value" entries).
ChildResult run_child(const std::string& scenario, const std::vector<std::string>& env = {},
                      const std::vector<std::string>& args = {}, int timeout_sec = 60);

// Report a measurement from a child.
void emit(const char* key, long long value);
void emit_str(const char* key, const char* value);
void emit_ptr(const char* key, const void* p);   // printed with %p

// Scrub MIMALLOC_* from the environment by re-executing ourselves (called by
// main for the top-level process, so in-process tests see default options).
// (Windows has no execve: the program runs itself once more, with the same
// command line and standard handles, and ends with its exit code.)
void reexec_without_mimalloc_env(int argc, char** argv);

// The process's open descriptors (Windows: handles), and how many of them
// are close-on-exec (Windows: not inherited by a process it creates); false
// if they cannot be listed.
bool count_descriptors(long* open, long* cloexec);

// A path for a temporary file named after the process and `tag` (in /tmp, or
// Windows' temporary directory).
std::string temp_file_path(const char* tag);

// ------------------------------------------------------
// Text helpers
// ------------------------------------------------------

std::vector<std::string> split_lines(const std::string& s);
size_t count_occurrences(const std::string& s, const std::string& needle);
bool starts_with(const std::string& s, const std::string& prefix);
std::string upper(std::string s);
std::string ptr_str(const void* p);   // as printed by %p

// ------------------------------------------------------
// Capturing mi_ output
// ------------------------------------------------------

// An mi_output_fun appending to the std::string passed as `arg`.
void capture_output(const char* msg, void* arg);

// Statistics printed through mi_stats_print_out / mi_thread_stats_print_out.
std::string stats_text();
std::string thread_stats_text();

// ------------------------------------------------------
// The statistics table
// ------------------------------------------------------

struct StatRow {
  std::string label;           // text before the first ':' (trimmed)
  std::string line;            // the whole line
  std::vector<double> values;  // the amounts in order (bytes or counts, magnitude applied)
  bool ok = false;             // ends with "ok"
  bool not_all_freed = false;  // ends with "not all freed!"
  bool negative = false;       // some amount was printed negative
};

struct Stats {
  std::string text;
  std::vector<StatRow> rows;
  // the `nth` row (0-based) with this label; nullptr if absent
  const StatRow* find(const std::string& label, int nth = 0) const;
  // column `col` (0 = peak, 1 = total, 2 = freed, ...) of a row; asserts it exists
  double get(const std::string& label, int col, int nth = 0) const;
  double current(const std::string& label, int nth = 0) const { return get(label, 1, nth) - get(label, 2, nth); }
};

Stats parse_stats(const std::string& text);

// ------------------------------------------------------
// The process as the OS sees it
// ------------------------------------------------------

// None of these allocate.
size_t rss_bytes();   // resident set size (/proc/self/statm; Windows: the working set)

// How many bytes of [p, p+size) are resident (mincore; Windows: in the
// working set, QueryWorkingSetEx).
size_t resident_bytes(const void* p, size_t size);

// The page faults of the calling thread so far (getrusage). Windows counts
// them for the process only (GetProcessMemoryInfo), soft faults too; wine
// reports none.
long long thread_page_faults();

// Permissions ("rw-p", "---p", ...) of the mapping that contains `p`
// (/proc/self/maps); empty if `p` is not mapped. (Windows, VirtualQuery:
// committed memory reads as its protection says, reserved memory and
// PAGE_NOACCESS as "---"; then 'p' for private memory and images, 's' for
// mapped sections.)
void mapping_perms(const void* p, char perms[5]);
std::string mapping_perms(const void* p);

// Total bytes of inaccessible ("---p") private mappings.
size_t inaccessible_bytes();

// mi_process_info's current_commit
size_t current_commit();

// The memory state of a child at one moment, taken without allocating (so it
// can be taken between the steps of an experiment), and reported later.
struct Snapshot {
  size_t rss;
  size_t commit;
  size_t noaccess;     // bytes in "---p" mappings
  char perms[5];       // of the mapping holding the probe address
  char stats[16384];   // mi_stats_print_out
};
void take_snapshot(Snapshot* s, const void* probe);
// emits <tag>.rss, .commit, .noaccess, .perms, .reset (current), .segments
// (current), .segments_total, .cached (current), .pages (current)
void emit_snapshot(const char* tag, const Snapshot& s);

// Private read-write memory mapped from the OS directly, not through
// mimalloc (mmap; Windows: VirtualAlloc); nullptr if that fails.
void* map_private(size_t size);
void unmap_private(void* p, size_t size);

void sleep_ms(long ms);

// The CPU time the calling thread has used, in milliseconds.
long long thread_cpu_ms();

}  // namespace mitest

#endif
