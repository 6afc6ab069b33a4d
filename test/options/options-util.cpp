/* ----------------------------------------------------------------------------
  options-util.cpp -- child processes, statistics parsing, /proc readers and
  main() of the options suite (see options-util.h).

  The parts that differ between Linux and Windows come in two versions, one
  after the other, under `#if defined(_WIN32)`: the child processes, and the
  process as the OS sees it (its memory, descriptors, time, temporary files).
-----------------------------------------------------------------------------*/
#include "options-util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <map>
#include <sstream>

#if defined(_WIN32)
#include <windows.h>
#include <psapi.h>    // (K32GetProcessMemoryInfo, K32QueryWorkingSetEx: exported by kernel32)
#include <fcntl.h>    // _O_BINARY
#include <io.h>       // _setmode
#include <process.h>  // _getpid
#include <cwchar>
#include <cwctype>
#include <thread>
#else
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;
#endif

namespace mitest {

// The tests are built with the library's build type: a Debug build is one
// without NDEBUG (a secure release build also has exact usable sizes, so the
// size of a 1-byte block does not tell).
bool is_debug_build() {
  #if defined(NDEBUG)
  return false;
  #else
  return true;
  #endif
}

// ------------------------------------------------------
// Child registry and dispatch
// ------------------------------------------------------

static std::map<std::string, child_fun_t>& child_registry() {
  static std::map<std::string, child_fun_t> registry;
  return registry;
}

ChildRegistrar::ChildRegistrar(const char* name, child_fun_t fun) {
  child_registry()[name] = fun;
}

int child_dispatch(int argc, char** argv) {
  if (argc < 3 || strcmp(argv[1], "--child") != 0) return -1;
  auto it = child_registry().find(argv[2]);
  if (it == child_registry().end()) {
    fprintf(stderr, "unknown child scenario: %s\n", argv[2]);
    return 99;
  }
  const int code = it->second(argc - 3, argv + 3);
  fflush(stdout);
  fflush(stderr);
  return code;
}

void emit(const char* key, long long value) {
  printf("%s=%lld\n", key, value);
  fflush(stdout);
}

void emit_str(const char* key, const char* value) {
  printf("%s=%s\n", key, value);
  fflush(stdout);
}

void emit_ptr(const char* key, const void* p) {
  printf("%s=%p\n", key, p);
  fflush(stdout);
}

// An environment entry "MIMALLOC_...=value", in any case (narrow or wide).
template <typename C>
static bool is_mimalloc_var(const C* entry) {
  static const char prefix[] = "mimalloc_";
  for (size_t i = 0; i < sizeof(prefix) - 1; i++) {
    const int c = (int)entry[i];   // (negative for a char above 127: no match)
    if (c <= 0 || c > 127 || tolower(c) != prefix[i]) return false;
  }
  return true;
}

#if !defined(_WIN32)

// ------------------------------------------------------
// Child processes (Linux): fork, execve of /proc/self/exe, pipes
// ------------------------------------------------------

void reexec_without_mimalloc_env(int argc, char** argv) {
  (void)argc;
  bool found = false;
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; e++) {
    if (is_mimalloc_var(*e)) found = true;
    else env.push_back(*e);
  }
  if (!found) return;
  env.push_back(nullptr);
  execve("/proc/self/exe", argv, env.data());
  perror("execve");   // keep going with the inherited environment
}

static void set_nonblock(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

ChildResult run_child(const std::string& scenario, const std::vector<std::string>& env,
                      const std::vector<std::string>& args, int timeout_sec) {
  ChildResult r;
  // everything the child needs is built before fork
  std::vector<std::string> argstore = { "mimalloc-test-options", "--child", scenario };
  argstore.insert(argstore.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argstore) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; e++) {
    if (!is_mimalloc_var(*e)) envp.push_back(*e);
  }
  for (auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  int pout[2], perr[2];
  if (pipe(pout) != 0 || pipe(perr) != 0) {
    ADD_FAILURE() << "pipe failed: " << strerror(errno);
    return r;
  }
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork failed: " << strerror(errno);
    return r;
  }
  if (pid == 0) {
    dup2(pout[1], STDOUT_FILENO);
    dup2(perr[1], STDERR_FILENO);
    close(pout[0]); close(pout[1]); close(perr[0]); close(perr[1]);
    execve("/proc/self/exe", argv.data(), envp.data());
    _exit(127);
  }
  close(pout[1]);
  close(perr[1]);
  set_nonblock(pout[0]);
  set_nonblock(perr[0]);
  const time_t deadline = time(nullptr) + timeout_sec;
  bool out_open = true, err_open = true;
  char buf[4096];
  while (out_open || err_open) {
    struct pollfd fds[2];
    int n = 0;
    if (out_open) { fds[n].fd = pout[0]; fds[n].events = POLLIN; fds[n].revents = 0; n++; }
    if (err_open) { fds[n].fd = perr[0]; fds[n].events = POLLIN; fds[n].revents = 0; n++; }
    const int rc = poll(fds, (nfds_t)n, 200);
    if (rc < 0 && errno != EINTR) break;
    for (int i = 0; i < n; i++) {
      if (fds[i].revents == 0) continue;
      const bool is_out = (fds[i].fd == pout[0]);
      for (;;) {
        const ssize_t k = read(fds[i].fd, buf, sizeof(buf));
        if (k > 0) { (is_out ? r.out : r.err).append(buf, (size_t)k); continue; }
        if (k == 0) { if (is_out) out_open = false; else err_open = false; }
        break;   // EAGAIN or EOF
      }
    }
    if (time(nullptr) > deadline) {
      r.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
  }
  close(pout[0]);
  close(perr[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) { }
  if (WIFEXITED(status)) { r.exited = true; r.code = WEXITSTATUS(status); }
  else if (WIFSIGNALED(status)) { r.signal = WTERMSIG(status); }
  return r;
}

bool ChildResult::aborted() const {
  return !exited && signal == SIGABRT;
}

#else  // _WIN32

// ------------------------------------------------------
// Child processes (Windows): CreateProcessW, pipes
// ------------------------------------------------------

// Text from the C runtime (arguments, our variables) in the ANSI code page,
// as the child's runtime converts it back.
static std::wstring widen(const std::string& s) {
  if (s.empty()) return std::wstring();
  const int n = MultiByteToWideChar(CP_ACP, 0, s.data(), (int)s.size(), nullptr, 0);
  std::wstring w((size_t)(n > 0 ? n : 0), L'\0');
  if (n > 0) MultiByteToWideChar(CP_ACP, 0, s.data(), (int)s.size(), &w[0], n);
  return w;
}

// The path of this program.
static std::wstring program_path() {
  std::wstring path(32768, L'\0');
  const DWORD n = GetModuleFileNameW(nullptr, &path[0], (DWORD)path.size());
  path.resize(n < path.size() ? n : 0);
  return path;
}

// One argument of a command line, quoted so that the C runtime of the child
// (and CommandLineToArgvW) parses it back as it was: in quotes if it has a
// blank or a quote (or is empty); inside quotes a quote is escaped with a
// backslash, and so are the backslashes right before a quote or the end.
static std::wstring quote_arg(const std::wstring& arg) {
  if (!arg.empty() && arg.find_first_of(L" \t\n\v\"") == std::wstring::npos) return arg;
  std::wstring q = L"\"";
  size_t backslashes = 0;
  for (wchar_t c : arg) {
    if (c == L'\\') { backslashes++; continue; }
    q.append(c == L'"' ? 2 * backslashes + 1 : backslashes, L'\\');
    backslashes = 0;
    q.push_back(c);
  }
  q.append(2 * backslashes, L'\\');
  q.push_back(L'"');
  return q;
}

// The name of an environment entry "NAME=value" in upper case (names are
// case-insensitive on Windows). A leading '=' is part of the name: "=C:=C:\x"
// is how the current directory of each drive is kept.
static std::wstring env_name_upper(const std::wstring& entry) {
  const size_t eq = entry.find(L'=', 1);
  std::wstring name = entry.substr(0, eq);
  for (auto& c : name) c = (wchar_t)towupper(c);
  return name;
}

// The environment block of a child: the process's environment (from
// Windows, as the C runtime's `_environ` came from it) without its MIMALLOC_*
// variables and without the variables `extra` sets, then `extra`; sorted by
// name, as CreateProcess documents it wants the block.
static std::vector<wchar_t> environment_block(const std::vector<std::string>& extra) {
  std::vector<std::wstring> added;
  for (const auto& e : extra) added.push_back(widen(e));
  std::vector<std::wstring> entries;
  wchar_t* block = GetEnvironmentStringsW();
  for (const wchar_t* e = block; e != nullptr && *e != 0; e += wcslen(e) + 1) {
    if (is_mimalloc_var(e)) continue;
    const std::wstring entry(e);
    const std::wstring name = env_name_upper(entry);
    bool replaced = false;
    for (const auto& a : added) replaced = replaced || (env_name_upper(a) == name);
    if (!replaced) entries.push_back(entry);
  }
  if (block != nullptr) FreeEnvironmentStringsW(block);
  entries.insert(entries.end(), added.begin(), added.end());
  std::stable_sort(entries.begin(), entries.end(),
                   [](const std::wstring& a, const std::wstring& b) { return env_name_upper(a) < env_name_upper(b); });
  std::vector<wchar_t> result;
  for (const auto& e : entries) {
    result.insert(result.end(), e.begin(), e.end());
    result.push_back(0);
  }
  if (entries.empty()) result.push_back(0);
  result.push_back(0);   // the block ends with an empty string
  return result;
}

// A copy of `h` that a child inherits (nullptr for no handle).
static HANDLE inheritable_copy(HANDLE h) {
  HANDLE copy = nullptr;
  if (h == nullptr || h == INVALID_HANDLE_VALUE) return nullptr;
  if (!DuplicateHandle(GetCurrentProcess(), h, GetCurrentProcess(), &copy, 0, TRUE, DUPLICATE_SAME_ACCESS)) return nullptr;
  return copy;
}

static void close_handle(HANDLE h) {
  if (h != nullptr && h != INVALID_HANDLE_VALUE) CloseHandle(h);
}

void reexec_without_mimalloc_env(int argc, char** argv) {
  (void)argc; (void)argv;
  bool found = false;
  wchar_t* block = GetEnvironmentStringsW();
  for (const wchar_t* e = block; e != nullptr && *e != 0; e += wcslen(e) + 1) found = found || is_mimalloc_var(e);
  if (block != nullptr) FreeEnvironmentStringsW(block);
  if (!found) return;
  std::vector<wchar_t> env = environment_block({});
  const std::wstring exe = program_path();
  const wchar_t* line = GetCommandLineW();
  std::vector<wchar_t> cmd(line, line + wcslen(line) + 1);   // (CreateProcessW may write into it)
  // the new process writes where this one would
  STARTUPINFOW si;
  memset(&si, 0, sizeof(si));
  si.cb = sizeof(si);
  si.dwFlags = STARTF_USESTDHANDLES;
  si.hStdInput = inheritable_copy(GetStdHandle(STD_INPUT_HANDLE));
  si.hStdOutput = inheritable_copy(GetStdHandle(STD_OUTPUT_HANDLE));
  si.hStdError = inheritable_copy(GetStdHandle(STD_ERROR_HANDLE));
  PROCESS_INFORMATION pi;
  fflush(stdout);
  fflush(stderr);
  // (in this process's console, if it has one)
  const DWORD flags = CREATE_UNICODE_ENVIRONMENT | (GetConsoleWindow() != nullptr ? 0 : DETACHED_PROCESS);
  const BOOL ok = CreateProcessW(exe.c_str(), cmd.data(), nullptr, nullptr, TRUE, flags, env.data(), nullptr, &si, &pi);
  close_handle(si.hStdInput);
  close_handle(si.hStdOutput);
  close_handle(si.hStdError);
  if (!ok) {
    fprintf(stderr, "CreateProcess failed (error %lu)\n", (unsigned long)GetLastError());   // keep going with the inherited environment
    return;
  }
  WaitForSingleObject(pi.hProcess, INFINITE);
  DWORD code = 1;
  GetExitCodeProcess(pi.hProcess, &code);
  // as after execve: this process ends with the other's exit code, without
  // its own exit handlers (no messages or statistics at exit of its own)
  TerminateProcess(GetCurrentProcess(), code);
}

// Reads a pipe to its end (when every process that could write to it has
// ended or closed it).
static void read_pipe(HANDLE h, std::string* into) {
  char buf[4096];
  for (;;) {
    DWORD n = 0;
    if (!ReadFile(h, buf, sizeof(buf), &n, nullptr)) break;   // ERROR_BROKEN_PIPE: the end
    into->append(buf, n);
  }
}

ChildResult run_child(const std::string& scenario, const std::vector<std::string>& env,
                      const std::vector<std::string>& args, int timeout_sec) {
  ChildResult r;
  const std::wstring exe = program_path();
  std::wstring line = quote_arg(exe) + L" --child " + quote_arg(widen(scenario));
  for (const auto& a : args) line += L" " + quote_arg(widen(a));
  std::vector<wchar_t> cmd(line.begin(), line.end());
  cmd.push_back(0);
  std::vector<wchar_t> envblock = environment_block(env);

  // stdout and stderr into pipes whose writing ends the child inherits (and
  // only it: its scenarios are run one at a time), stdin from NUL
  SECURITY_ATTRIBUTES sa;
  sa.nLength = sizeof(sa);
  sa.lpSecurityDescriptor = nullptr;
  sa.bInheritHandle = TRUE;
  HANDLE out_r = nullptr, out_w = nullptr, err_r = nullptr, err_w = nullptr;
  if (!CreatePipe(&out_r, &out_w, &sa, 0) || !CreatePipe(&err_r, &err_w, &sa, 0)) {
    ADD_FAILURE() << "CreatePipe failed: error " << GetLastError();
    for (HANDLE h : { out_r, out_w, err_r, err_w }) close_handle(h);
    return r;
  }
  SetHandleInformation(out_r, HANDLE_FLAG_INHERIT, 0);
  SetHandleInformation(err_r, HANDLE_FLAG_INHERIT, 0);
  HANDLE nul = CreateFileW(L"NUL", GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE, &sa, OPEN_EXISTING, 0, nullptr);
  STARTUPINFOW si;
  memset(&si, 0, sizeof(si));
  si.cb = sizeof(si);
  si.dwFlags = STARTF_USESTDHANDLES;
  si.hStdInput = nul;
  si.hStdOutput = out_w;
  si.hStdError = err_w;
  PROCESS_INFORMATION pi;
  fflush(stdout);
  fflush(stderr);
  // (without a console: its output goes to the pipes, and wine starts no
  // console host process for it, which took longer than the child itself)
  // (wine 8 now and then fails a CreateProcess with ERROR_INTERNAL_ERROR,
  // 1359, on a loaded machine: one test in about four runs of the Windows
  // suite, a different test each time; the same call a moment later starts
  // the child. Retried a few times for that error only.)
  BOOL ok = FALSE;
  DWORD create_error = 0;
  for (int attempt = 0; attempt < 5; attempt++) {
    if (attempt > 0) Sleep(20 * (DWORD)attempt);
    ok = CreateProcessW(exe.c_str(), cmd.data(), nullptr, nullptr, TRUE,
                        CREATE_UNICODE_ENVIRONMENT | DETACHED_PROCESS, envblock.data(), nullptr, &si, &pi);
    create_error = GetLastError();
    if (ok || create_error != ERROR_INTERNAL_ERROR) break;
  }
  close_handle(out_w);   // (the child has its own copies now)
  close_handle(err_w);
  close_handle(nul);
  if (!ok) {
    close_handle(out_r);
    close_handle(err_r);
    ADD_FAILURE() << "CreateProcess failed: error " << create_error;
    return r;
  }
  CloseHandle(pi.hThread);
  // a thread for each pipe (anonymous pipes cannot be waited for together)
  std::thread out_reader(read_pipe, out_r, &r.out);
  std::thread err_reader(read_pipe, err_r, &r.err);
  if (WaitForSingleObject(pi.hProcess, (DWORD)timeout_sec * 1000) == WAIT_TIMEOUT) {
    r.timed_out = true;
    TerminateProcess(pi.hProcess, 1);
    WaitForSingleObject(pi.hProcess, INFINITE);
  }
  out_reader.join();
  err_reader.join();
  close_handle(out_r);
  close_handle(err_r);
  DWORD code = 0;
  GetExitCodeProcess(pi.hProcess, &code);
  CloseHandle(pi.hProcess);
  // an exit code of 0xC0000000 and above is the NTSTATUS of an exception
  // nobody handled (0xC0000005: access violation; 0xC0000409: a fast fail)
  if (!r.timed_out) {
    if (code >= 0xC0000000UL) r.exception = code;
    else { r.exited = true; r.code = (int)code; }
  }
  return r;
}

bool ChildResult::aborted() const {
  return exited && code == 3;   // (msvcrt's abort(): raise(SIGABRT), whose default action is _exit(3))
}

#endif  // _WIN32

bool ChildResult::has(const std::string& key) const {
  for (const auto& line : split_lines(out)) {
    if (starts_with(line, key + "=")) return true;
  }
  return false;
}

std::string ChildResult::str(const std::string& key) const {
  for (const auto& line : split_lines(out)) {
    if (starts_with(line, key + "=")) return line.substr(key.size() + 1);
  }
  ADD_FAILURE() << "the child reported no '" << key << "'\n" << describe();
  return "";
}

long long ChildResult::num(const std::string& key) const {
  for (const auto& line : split_lines(out)) {
    if (starts_with(line, key + "=")) return strtoll(line.c_str() + key.size() + 1, nullptr, 0);
  }
  ADD_FAILURE() << "the child reported no '" << key << "'\n" << describe();
  return -1;
}

std::string ChildResult::describe() const {
  std::ostringstream s;
  if (timed_out) s << "child timed out\n";
  if (exited) s << "child exit code: " << code << (kWindows && code == 3 ? " (abort)" : "") << "\n";
  else if (exception != 0) s << "child ended by exception 0x" << std::hex << exception << std::dec << "\n";
  else s << "child killed by signal " << signal << "\n";
  s << "--- stdout ---\n" << out << "--- stderr ---\n" << err << "--------------";
  return s.str();
}

// ------------------------------------------------------
// Text helpers
// ------------------------------------------------------

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string::npos) end = s.size();
    lines.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

size_t count_occurrences(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = s.find(needle); pos != std::string::npos; pos = s.find(needle, pos + needle.size())) n++;
  return n;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

std::string upper(std::string s) {
  for (auto& c : s) c = (char)toupper((unsigned char)c);
  return s;
}

std::string ptr_str(const void* p) {
  char buf[64];
  snprintf(buf, sizeof(buf), "%p", p);
  return buf;
}

void capture_output(const char* msg, void* arg) {
  if (msg != nullptr && arg != nullptr) static_cast<std::string*>(arg)->append(msg);
}

// The statistics are printed into a static buffer first, so that printing
// them allocates nothing (the figures describe the program, not the test).
static char stats_buf[256 * 1024];
static size_t stats_len;

static void capture_static(const char* msg, void* arg) {
  (void)arg;
  const size_t n = strlen(msg);
  if (stats_len + n < sizeof(stats_buf)) {
    memcpy(stats_buf + stats_len, msg, n);
    stats_len += n;
  }
}

std::string stats_text() {
  stats_len = 0;
  mi_stats_print_out(&capture_static, nullptr);
  return std::string(stats_buf, stats_len);
}

std::string thread_stats_text() {
  stats_len = 0;
  mi_thread_stats_print_out(&capture_static, nullptr);
  return std::string(stats_buf, stats_len);
}

// ------------------------------------------------------
// Statistics parsing
// ------------------------------------------------------

static bool parse_number(const std::string& tok, double* v) {
  if (tok.empty()) return false;
  char* end = nullptr;
  *v = strtod(tok.c_str(), &end);
  return (end != tok.c_str() && *end == 0 && (isdigit((unsigned char)tok[0]) || tok[0] == '-'));
}

static double magnitude(const std::string& tok) {
  if (tok == "b") return 1;
  if (tok == "kb") return 1024.0;
  if (tok == "mb") return 1024.0 * 1024;
  if (tok == "gb") return 1024.0 * 1024 * 1024;
  if (tok == "k") return 1000.0;
  if (tok == "m") return 1000.0 * 1000;
  if (tok == "g") return 1000.0 * 1000 * 1000;
  return 0;
}

Stats parse_stats(const std::string& text) {
  Stats st;
  st.text = text;
  for (const auto& line : split_lines(text)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    StatRow row;
    row.line = line;
    size_t b = 0;
    while (b < colon && line[b] == ' ') b++;
    row.label = line.substr(b, colon - b);
    std::istringstream in(line.substr(colon + 1));
    std::string tok;
    while (in >> tok) {
      double v;
      const double m = magnitude(tok);
      if (parse_number(tok, &v)) {
        if (v < 0) row.negative = true;
        row.values.push_back(v);
      }
      else if (m > 0 && !row.values.empty()) {
        row.values.back() *= m;
      }
      else if (tok == "ok") {
        row.ok = true;
      }
      else if (tok == "not") {
        row.not_all_freed = (line.find("not all freed!") != std::string::npos);
        break;
      }
      else {
        break;   // "avg", "s", "user:", ...
      }
    }
    st.rows.push_back(row);
  }
  return st;
}

const StatRow* Stats::find(const std::string& label, int nth) const {
  for (const auto& row : rows) {
    if (row.label == label && nth-- == 0) return &row;
  }
  return nullptr;
}

double Stats::get(const std::string& label, int col, int nth) const {
  const StatRow* row = find(label, nth);
  if (row == nullptr || (int)row->values.size() <= col) {
    ADD_FAILURE() << "no column " << col << " in statistics row '" << label << "' (#" << nth << ")\n" << text;
    return -1;
  }
  return row->values[(size_t)col];
}

#if !defined(_WIN32)

// ------------------------------------------------------
// The process as the OS sees it (Linux): /proc and system calls
// ------------------------------------------------------

// /proc files are read with plain system calls into static buffers: the
// measurements must not allocate (an allocation could itself take a new
// segment and change what is measured).
static size_t read_proc(const char* path, char* buf, size_t size) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  size_t len = 0;
  while (len + 1 < size) {
    const ssize_t n = read(fd, buf + len, size - 1 - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += (size_t)n;
  }
  close(fd);
  buf[len] = 0;
  return len;
}

size_t rss_bytes() {
  static char buf[256];
  if (read_proc("/proc/self/statm", buf, sizeof(buf)) == 0) return 0;
  char* s = buf;
  strtoul(s, &s, 10);                                   // size
  const unsigned long resident = strtoul(s, &s, 10);    // resident
  return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

// Calls `fn(start, end, perms)` for every mapping; stops when it returns false.
template <typename F>
static void visit_maps(F fn) {
  static char buf[1024 * 1024];
  const size_t len = read_proc("/proc/self/maps", buf, sizeof(buf));
  char* s = buf;
  while (s < buf + len) {
    char* eol = strchr(s, '\n');
    if (eol == nullptr) eol = buf + len;
    *eol = 0;
    char* p = s;
    const unsigned long start = strtoul(p, &p, 16);
    if (*p == '-') p++;
    const unsigned long end = strtoul(p, &p, 16);
    while (*p == ' ') p++;
    char perms[5] = { 0 };
    memcpy(perms, p, 4);
    if (!fn((uintptr_t)start, (uintptr_t)end, perms)) break;
    s = eol + 1;
  }
}

void mapping_perms(const void* p, char perms[5]) {
  perms[0] = 0;
  const uintptr_t a = (uintptr_t)p;
  visit_maps([&](uintptr_t start, uintptr_t end, const char* mperms) {
    if (a >= start && a < end) { memcpy(perms, mperms, 5); return false; }
    return true;
  });
}

size_t inaccessible_bytes() {
  size_t total = 0;
  visit_maps([&](uintptr_t start, uintptr_t end, const char* perms) {
    if (strcmp(perms, "---p") == 0) total += (size_t)(end - start);
    return true;
  });
  return total;
}

size_t resident_bytes(const void* p, size_t size) {
  static unsigned char vec[4096];   // (one byte a page, for 4096 pages at a time)
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t start = (uintptr_t)p & ~(page - 1);
  const uintptr_t end = (uintptr_t)p + size;
  size_t count = 0;
  while (start < end) {
    const uintptr_t len = std::min<uintptr_t>(end - start, sizeof(vec) * page);
    if (mincore((void*)start, (size_t)len, vec) != 0) break;
    for (uintptr_t i = 0; i < (len + page - 1) / page; i++) count += (vec[i] & 1);
    start += len;
  }
  return count * (size_t)page;
}

long long thread_page_faults() {
  struct rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  return (long long)ru.ru_minflt;
}

bool count_descriptors(long* open_fds, long* cloexec) {
  *open_fds = 0;
  *cloexec = 0;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return false;
  const int dfd = dirfd(d);
  for (struct dirent* e = readdir(d); e != nullptr; e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const int fd = atoi(e->d_name);
    if (fd == dfd) continue;   // (the directory's own)
    (*open_fds)++;
    if (fcntl(fd, F_GETFD) & FD_CLOEXEC) (*cloexec)++;
  }
  closedir(d);
  return true;
}

std::string temp_file_path(const char* tag) {
  return "/tmp/mimalloc-test-" + std::to_string(getpid()) + "-" + tag;
}

void* map_private(size_t size) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return (p == MAP_FAILED ? nullptr : p);
}

void unmap_private(void* p, size_t size) {
  if (p != nullptr) munmap(p, size);
}

void sleep_ms(long ms) {
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (ms % 1000) * 1000000L;
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) { }
}

long long thread_cpu_ms() {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

#else  // _WIN32

// ------------------------------------------------------
// The process as the OS sees it (Windows): psapi's figures (from kernel32),
// VirtualQuery, handles
// ------------------------------------------------------

size_t rss_bytes() {
  PROCESS_MEMORY_COUNTERS c;
  memset(&c, 0, sizeof(c));
  if (!K32GetProcessMemoryInfo(GetCurrentProcess(), &c, sizeof(c))) return 0;
  return c.WorkingSetSize;
}

size_t resident_bytes(const void* p, size_t size) {
  static PSAPI_WORKING_SET_EX_INFORMATION info[256];   // (one entry a page, for 256 pages at a time)
  const uintptr_t page = 4096;
  uintptr_t start = (uintptr_t)p & ~(page - 1);
  const uintptr_t end = (uintptr_t)p + size;
  size_t count = 0;
  while (start < end) {
    const size_t n = (size_t)std::min<uintptr_t>((end - start + page - 1) / page, 256);
    for (size_t i = 0; i < n; i++) {
      info[i].VirtualAddress = (void*)(start + i * page);
      info[i].VirtualAttributes.Flags = 0;
    }
    if (!K32QueryWorkingSetEx(GetCurrentProcess(), info, (DWORD)(n * sizeof(info[0])))) break;
    for (size_t i = 0; i < n; i++) count += (info[i].VirtualAttributes.Valid ? 1 : 0);
    start += n * page;
  }
  return count * (size_t)page;
}

long long thread_page_faults() {
  PROCESS_MEMORY_COUNTERS c;
  memset(&c, 0, sizeof(c));
  if (!K32GetProcessMemoryInfo(GetCurrentProcess(), &c, sizeof(c))) return 0;
  return (long long)c.PageFaultCount;
}

// The permissions of a region in the form of /proc/self/maps.
static void region_perms(const MEMORY_BASIC_INFORMATION& info, char perms[5]) {
  perms[0] = 0;
  if (info.State == MEM_FREE) return;
  bool r = false, w = false, x = false;
  if (info.State == MEM_COMMIT && (info.Protect & PAGE_GUARD) == 0) {
    switch (info.Protect & 0xFF) {
      case PAGE_READONLY:          r = true; break;
      case PAGE_READWRITE:
      case PAGE_WRITECOPY:         r = w = true; break;
      case PAGE_EXECUTE:           x = true; break;
      case PAGE_EXECUTE_READ:      r = x = true; break;
      case PAGE_EXECUTE_READWRITE:
      case PAGE_EXECUTE_WRITECOPY: r = w = x = true; break;
      default:                     break;   // PAGE_NOACCESS
    }
  }
  perms[0] = (r ? 'r' : '-');
  perms[1] = (w ? 'w' : '-');
  perms[2] = (x ? 'x' : '-');
  perms[3] = (info.Type == MEM_MAPPED ? 's' : 'p');
  perms[4] = 0;
}

void mapping_perms(const void* p, char perms[5]) {
  MEMORY_BASIC_INFORMATION info;
  perms[0] = 0;
  if (VirtualQuery(p, &info, sizeof(info)) == 0) return;
  region_perms(info, perms);
}

size_t inaccessible_bytes() {
  // every region of the address space, from 0 up
  size_t total = 0;
  uintptr_t addr = 0;
  MEMORY_BASIC_INFORMATION info;
  while (VirtualQuery((void*)addr, &info, sizeof(info)) != 0) {
    char perms[5];
    region_perms(info, perms);
    if (strcmp(perms, "---p") == 0) total += info.RegionSize;
    const uintptr_t next = (uintptr_t)info.BaseAddress + info.RegionSize;
    if (next <= addr) break;
    addr = next;
  }
  return total;
}

bool count_descriptors(long* open_handles, long* not_inherited) {
  // Windows lists a process's handles to debuggers only: every value a
  // handle can have (multiples of 4) is asked about instead, up to 65536
  // (GetProcessHandleCount would say where to stop, but wine answers 0)
  *open_handles = 0;
  *not_inherited = 0;
  for (uintptr_t h = 4; h < 65536; h += 4) {
    DWORD flags = 0;
    if (!GetHandleInformation((HANDLE)h, &flags)) continue;
    (*open_handles)++;
    if ((flags & HANDLE_FLAG_INHERIT) == 0) (*not_inherited)++;
  }
  return true;
}

std::string temp_file_path(const char* tag) {
  char dir[MAX_PATH + 1];
  const DWORD n = GetTempPathA(sizeof(dir), dir);   // (ends with a backslash)
  const std::string base = (n > 0 && n < sizeof(dir) ? std::string(dir, n) : std::string(".\\"));
  return base + "mimalloc-test-" + std::to_string(_getpid()) + "-" + tag;
}

void* map_private(size_t size) {
  return VirtualAlloc(nullptr, size, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
}

void unmap_private(void* p, size_t size) {
  (void)size;   // (a reservation is released whole)
  if (p != nullptr) VirtualFree(p, 0, MEM_RELEASE);
}

void sleep_ms(long ms) {
  if (ms > 0) Sleep((DWORD)ms);
}

long long thread_cpu_ms() {
  FILETIME created, exited, kernel, user;
  if (!GetThreadTimes(GetCurrentThread(), &created, &exited, &kernel, &user)) return 0;
  // (FILETIME: units of 100 ns)
  const auto ms = [](const FILETIME& t) { return (long long)((((uint64_t)t.dwHighDateTime << 32) | t.dwLowDateTime) / 10000); };
  return ms(kernel) + ms(user);
}

#endif  // _WIN32

std::string mapping_perms(const void* p) {
  char perms[5];
  mapping_perms(p, perms);
  return perms;
}

// ------------------------------------------------------
// Snapshots
// ------------------------------------------------------

size_t current_commit() {
  size_t commit = 0;
  mi_process_info(nullptr, nullptr, nullptr, nullptr, nullptr, &commit, nullptr, nullptr);
  return commit;
}

void take_snapshot(Snapshot* s, const void* probe) {
  s->rss = rss_bytes();
  s->commit = current_commit();
  s->noaccess = inaccessible_bytes();
  mapping_perms(probe, s->perms);
  stats_len = 0;
  mi_stats_print_out(&capture_static, nullptr);
  const size_t n = (stats_len < sizeof(s->stats) - 1 ? stats_len : sizeof(s->stats) - 1);
  memcpy(s->stats, stats_buf, n);
  s->stats[n] = 0;
}

void emit_snapshot(const char* tag, const Snapshot& s) {
  const Stats st = parse_stats(s.stats);
  char key[128];
  auto put = [&](const char* name, long long v) {
    snprintf(key, sizeof(key), "%s.%s", tag, name);
    emit(key, v);
  };
  put("rss", (long long)s.rss);
  put("commit", (long long)s.commit);
  put("noaccess", (long long)s.noaccess);
  snprintf(key, sizeof(key), "%s.perms", tag);
  emit_str(key, s.perms);
  put("reset", (long long)st.current("reset"));
  put("segments", (long long)st.current("segments"));
  put("segments_total", (long long)st.get("segments", 1));
  put("cached", (long long)st.current("-cached"));
  put("pages", (long long)st.current("pages"));
}

}  // namespace mitest

// ------------------------------------------------------
// main: a child scenario, or the GoogleTest suite
// ------------------------------------------------------

int main(int argc, char** argv) {
#if defined(_WIN32)
  // stdout and stderr as bytes: the C runtime would write "\r\n" for "\n"
  // (the library's messages go to the handle, unchanged)
  _setmode(_fileno(stdout), _O_BINARY);
  _setmode(_fileno(stderr), _O_BINARY);
#endif
  const int code = mitest::child_dispatch(argc, argv);
  if (code >= 0) return code;
  mitest::reexec_without_mimalloc_env(argc, argv);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
