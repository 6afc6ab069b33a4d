/* ----------------------------------------------------------------------------
  options-util.cpp -- child processes, statistics parsing, /proc readers and
  main() of the options suite (see options-util.h).
-----------------------------------------------------------------------------*/
#include "options-util.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <map>
#include <sstream>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

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

static bool is_mimalloc_var(const char* entry) {
  static const char prefix[] = "mimalloc_";
  for (size_t i = 0; i < sizeof(prefix) - 1; i++) {
    if (entry[i] == 0 || tolower((unsigned char)entry[i]) != prefix[i]) return false;
  }
  return true;
}

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
  if (exited) s << "child exit code: " << code << "\n";
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

// ------------------------------------------------------
// /proc
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

std::string mapping_perms(const void* p) {
  char perms[5];
  mapping_perms(p, perms);
  return perms;
}

size_t inaccessible_bytes() {
  size_t total = 0;
  visit_maps([&](uintptr_t start, uintptr_t end, const char* perms) {
    if (strcmp(perms, "---p") == 0) total += (size_t)(end - start);
    return true;
  });
  return total;
}

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

void sleep_ms(long ms) {
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (ms % 1000) * 1000000L;
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) { }
}

}  // namespace mitest

// ------------------------------------------------------
// main: a child scenario, or the GoogleTest suite
// ------------------------------------------------------

int main(int argc, char** argv) {
  const int code = mitest::child_dispatch(argc, argv);
  if (code >= 0) return code;
  mitest::reexec_without_mimalloc_env(argc, argv);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
