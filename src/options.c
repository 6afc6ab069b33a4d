/* ----------------------------------------------------------------------------
  options.c -- the runtime option table and the message channel.

  All options live in one table: enum order (the 1.6 ABI order), name,
  default, the range accepted from the environment (and a word an option
  may take besides: show_stats=json), and one line of meaning. Values are
  read lazily from the environment variable MIMALLOC_<NAME> (any case) the
  first time an option is used. A check at start-up asserts that the table
  order matches the enum. The options whose value is a file name
  (prof_file, stats_file) are in a second, small table: they are not in
  the enum, whose values are numbers, and come from the environment only.

  A mistake in the environment is always reported, once, on the message
  channel, whatever show_errors, verbose and max_errors say: a value that is
  not a word or an integer, a value outside the option's range, and a
  MIMALLOC_ variable that names no option (a misspelling, or an option of
  another mimalloc version). The report quotes the variable as the user
  wrote it, and the default is kept. (Verbose output, or show_errors, would
  hide exactly the mistakes of a user who does not know yet what to turn on.)

  Messages (errors, warnings, verbose lines, assertion failures) are
  formatted into a 512-byte stack buffer without allocating and go through
  one output channel (stderr, or the function given to mi_register_output);
  a thread-local guard drops messages produced while printing one. Errors
  then call the handler given to mi_register_error, or the default one.
  Errors and warnings past max_errors are counted, and the count is said at
  exit.
-----------------------------------------------------------------------------*/
#include "mimalloc-internal.h"
#include "prim/prim.h"

#include <stdio.h>    // vsnprintf
#include <stdarg.h>
#include <stdlib.h>   // abort, strtol
#include <limits.h>   // LONG_MAX

typedef enum mi_init_e {
  MI_UNINIT,    // not yet read from the environment
  MI_DEFAULTED, // not found in the environment, default value is used
  MI_INITIALIZED // found in the environment or set explicitly
} mi_init_t;

typedef struct mi_option_desc_s {
  long        value;   // the current value
  mi_init_t   init;    // whether it was read from the environment
  mi_option_t option;  // for the table-order check
  const char* name;    // environment name without the MIMALLOC_ prefix
  long        min;     // smallest value accepted from the environment
  long        max;     // largest value accepted from the environment
  const char* word;    // a word accepted besides the usual ones (or NULL) ...
  long        word_value;  // ... and the value it stands for
} mi_option_desc_t;

#define MI_OPTION(opt)  mi_option_##opt, #opt
#define MI_RANGE(lo,hi) lo, hi, NULL, 0       // a range of integers, no extra word
#define MI_BOOL         MI_RANGE(0, 1)        // the range of an on/off option
#define MI_COUNT        MI_RANGE(0, (1L << 30)) // a count (segments, pages, nodes)
#define MI_DAY_MSECS        (24L * 3600 * 1000)   // a day, in milliseconds

static mi_option_desc_t options[_mi_option_last] = {
  // show error and warning messages (on by default in debug builds)
  #if (MI_DEBUG > 0) || defined(MI_SHOW_ERRORS)
  { 1, MI_UNINIT, MI_OPTION(show_errors), MI_BOOL },
  #else
  { 0, MI_UNINIT, MI_OPTION(show_errors), MI_BOOL },
  #endif
  { 0, MI_UNINIT, MI_OPTION(show_stats), 0, 1, "json", MI_SHOW_STATS_JSON }, // print statistics at exit (json: as JSON)
  { 0, MI_UNINIT, MI_OPTION(verbose), MI_BOOL },              // print informational messages
  { 1, MI_UNINIT, MI_OPTION(eager_commit), MI_BOOL },         // commit segments when allocated
  { 1, MI_UNINIT, MI_OPTION(eager_region_commit), MI_BOOL },  // commit whole regions when created
  { 0, MI_UNINIT, MI_OPTION(reset_decommits), MI_BOOL },      // purge the free pages of live segments by decommit instead of MADV_DONTNEED
  { 0, MI_UNINIT, MI_OPTION(large_os_pages), MI_BOOL },       // use 2 MiB OS pages where possible
  { 0, MI_UNINIT, MI_OPTION(reserve_huge_os_pages), MI_COUNT },// GiBs of huge OS pages reserved at load (1 GiB pages, else 2 MiB), used first
  { 0, MI_UNINIT, MI_OPTION(segment_cache), MI_COUNT },       // emptied segments kept whole for reuse
  { 1, MI_UNINIT, MI_OPTION(page_reset), MI_BOOL },           // purge free pages after reset_delay
  { 0, MI_UNINIT, MI_OPTION(abandoned_page_reset), MI_BOOL }, // a thread that ends purges the shared segments' free pages at once
  { 0, MI_UNINIT, MI_OPTION(segment_reset), MI_BOOL },        // purge freed segments now (no delay)
  { 1, MI_UNINIT, MI_OPTION(eager_commit_delay), MI_COUNT },  // the process's first N segments commit page by page
  { 100, MI_UNINIT, MI_OPTION(reset_delay), MI_RANGE(0, (long)MI_PURGE_DELAY_MAX) }, // milliseconds before a purge
  { 0, MI_UNINIT, MI_OPTION(use_numa_nodes), MI_RANGE(0, 1024) },       // NUMA nodes to use (0: detect); regions prefer the creating thread's node
  { 100, MI_UNINIT, MI_OPTION(os_tag), MI_RANGE(100, 255) },            // macOS VM tag: no effect on Linux (as in 1.6)
  { 16, MI_UNINIT, MI_OPTION(max_errors), MI_RANGE(-1, LONG_MAX) },     // messages printed at most (-1: no limit)
  { 0, MI_UNINIT, MI_OPTION(secure_continue), MI_BOOL },      // secure builds: misuse is reported, not fatal
  { 0, MI_UNINIT, MI_OPTION(prof_sample), MI_RANGE(0, LONG_MAX) }, // heap profiler: mean bytes between samples (0: off)
  { 0, MI_UNINIT, MI_OPTION(stats_interval), MI_RANGE(0, MI_DAY_MSECS) }, // milliseconds between JSON snapshots to stats_file (0: none)
  { 1, MI_UNINIT, MI_OPTION(background_purge), 0, 2, "always", 2 },   // a thread purges freed segments when due, without allocator calls (1: in multi-threaded programs; 2, always: in any)
  { 0, MI_UNINIT, MI_OPTION(orphan_heaps), MI_BOOL },        // a thread that ends leaves its heap to the next thread that starts (within reset_delay)
  { 0, MI_UNINIT, MI_OPTION(disable_redirect), MI_BOOL },    // Windows override DLL: do not patch the C runtime (no effect elsewhere)
};

// Options with a text value (file names): read from the environment only,
// at most MI_OPTION_TEXT_MAX bytes; "" when not set.
#define MI_OPTION_TEXT_MAX  1024
typedef struct mi_option_text_desc_s {
  mi_init_t   init;
  const char* name;    // environment name without the MIMALLOC_ prefix
  char        value[MI_OPTION_TEXT_MAX + 1];
} mi_option_text_desc_t;

static mi_option_text_desc_t text_options[_mi_option_text_last] = {
  { MI_UNINIT, "prof_file", "" },     // heap profile written at exit (%p: the process id)
  { MI_UNINIT, "stats_file", "" },    // JSON statistics snapshots appended every stats_interval ms (%p: the process id)
};

static void mi_option_init(mi_option_desc_t* desc);
static void mi_option_text_init(mi_option_text_desc_t* desc);
static void mi_env_check_unknown(void);
static void mi_out_init(void);
static bool mi_options_ready = false;   // the load-time constructor ran (environment is usable)
static long mi_max_error_count = 16;    // max_errors, read once at start-up

void _mi_options_init(void) {
  mi_options_ready = true;
  mi_out_init();
  mi_env_check_unknown();
  // where the OS charges every committed byte (Windows), a region is not
  // committed whole when it is created, as in mimalloc 1.6 there
  if (!_mi_os_has_overcommit() && options[mi_option_eager_region_commit].init == MI_UNINIT) {
    options[mi_option_eager_region_commit].value = 0;
  }
  for (int i = 0; i < _mi_option_last; i++) {
    mi_option_desc_t* desc = &options[i];
    mi_assert_always(desc->option == (mi_option_t)i);  // the table order matches the enum
    if (desc->init == MI_UNINIT) mi_option_init(desc);
    if (i != mi_option_verbose) {
      _mi_verbose_message("option '%s': %ld\n", desc->name, desc->value);
    }
  }
  for (int i = 0; i < _mi_option_text_last; i++) {
    mi_option_text_desc_t* desc = &text_options[i];
    if (desc->init == MI_UNINIT) mi_option_text_init(desc);
    _mi_verbose_message("option '%s': \"%s\"\n", desc->name, desc->value);
  }
  mi_max_error_count = mi_option_get(mi_option_max_errors);
  // Statistics and messages at exit go to the stderr the program started
  // with, even if the program closes its stderr before exit (as `ls`, `sort`
  // and `cat` do) or reassigns it. Only when output at exit is asked for: the
  // duplicate costs a descriptor (close-on-exec) and keeps the stream open.
  if (mi_option_is_enabled(mi_option_show_stats) || mi_option_is_enabled(mi_option_verbose)) {
    _mi_prim_out_stderr_keep();
  }
}

long mi_option_get(mi_option_t option) {
  mi_assert(option >= 0 && option < _mi_option_last);
  if (option < 0 || option >= _mi_option_last) return 0;
  mi_option_desc_t* desc = &options[option];
  if (mi_unlikely(desc->init == MI_UNINIT)) mi_option_init(desc);
  return desc->value;
}

void mi_option_set(mi_option_t option, long value) {
  mi_assert(option >= 0 && option < _mi_option_last);
  if (option < 0 || option >= _mi_option_last) return;
  mi_option_desc_t* desc = &options[option];
  desc->value = value;
  desc->init = MI_INITIALIZED;
  if (option == mi_option_max_errors) mi_max_error_count = value;
}

void mi_option_set_default(mi_option_t option, long value) {
  mi_assert(option >= 0 && option < _mi_option_last);
  if (option < 0 || option >= _mi_option_last) return;
  mi_option_desc_t* desc = &options[option];
  if (desc->init != MI_INITIALIZED) {
    desc->value = value;
    if (option == mi_option_max_errors) mi_max_error_count = value;
  }
}

// The purge delay (option reset_delay) in ms, from 0 to MI_PURGE_DELAY_MAX
// (also for a value set at run time, which the environment's range does not
// check): every expiry `clock + delay` stays far from overflowing.
int64_t _mi_purge_delay(void) {
  const long delay = mi_option_get(mi_option_reset_delay);
  if (delay <= 0) return 0;
  return ((uint64_t)delay >= (uint64_t)MI_PURGE_DELAY_MAX ? MI_PURGE_DELAY_MAX : (int64_t)delay);
}

const char* _mi_option_text(mi_option_text_t option) {
  mi_assert(option >= 0 && option < _mi_option_text_last);
  mi_option_text_desc_t* desc = &text_options[option];
  if (mi_unlikely(desc->init == MI_UNINIT)) mi_option_text_init(desc);
  return desc->value;
}

// A text option that names a file, with "%p" replaced by the process id (a
// program and the programs it starts then write one file each), into `buf`:
// as much as fits in `size` bytes with a terminating zero. Returns the whole
// length (0: the option is not set), as snprintf: a caller measures with
// `size` 0 and then provides the room, so a path has no length limit here
// (the OS has one, and says so when the file is opened).
size_t _mi_option_path(mi_option_text_t option, char* buf, size_t size) {
  const char* text = _mi_option_text(option);
  char pid[24];   // any long
  const int pid_chars = snprintf(pid, sizeof(pid), "%ld", _mi_prim_process_id());
  const size_t pid_len = (pid_chars > 0 ? (size_t)pid_chars : 0);
  size_t n = 0;
  for (const char* s = text; *s != 0; s++) {
    const bool is_pid = (s[0] == '%' && s[1] == 'p');
    const char* piece = (is_pid ? pid : s);
    const size_t len = (is_pid ? pid_len : 1);
    for (size_t i = 0; i < len; i++, n++) {
      if (n + 1 < size) buf[n] = piece[i];
    }
    if (is_pid) s++;
  }
  if (size > 0) buf[n < size ? n : size - 1] = 0;
  return n;
}

bool mi_option_is_enabled(mi_option_t option) {
  return (mi_option_get(option) != 0);
}

void mi_option_set_enabled(mi_option_t option, bool enable) {
  mi_option_set(option, (enable ? 1 : 0));
}

void mi_option_set_enabled_default(mi_option_t option, bool enable) {
  mi_option_set_default(option, (enable ? 1 : 0));
}

void mi_option_enable(mi_option_t option) {
  mi_option_set_enabled(option, true);
}

void mi_option_disable(mi_option_t option) {
  mi_option_set_enabled(option, false);
}

// ---------------------------------------------------------------------------
// The output channel: before the library is loaded, messages collect in a
// 32 KiB buffer; after that they go to stderr (and the buffer); once the user
// registers an output function, the buffer is delivered to it and dropped.
// ---------------------------------------------------------------------------

#define MI_OUT_BUF_SIZE  (32 * 1024)
static char out_buf[MI_OUT_BUF_SIZE + 1];
static _Atomic(size_t) out_len;

static void mi_out_buf(const char* msg, void* arg) {
  (void)arg;
  if (msg == NULL) return;
  if (mi_atomic_load_relaxed(&out_len) >= MI_OUT_BUF_SIZE) return;
  const size_t n = strlen(msg);
  if (n == 0) return;
  size_t start = mi_atomic_add_acq_rel(&out_len, n);   // reserve room
  if (start >= MI_OUT_BUF_SIZE) return;
  const size_t count = (start + n >= MI_OUT_BUF_SIZE ? MI_OUT_BUF_SIZE - start - 1 : n);
  memcpy(&out_buf[start], msg, count);
}

static void mi_out_stderr(const char* msg, void* arg) {
  (void)arg;
  if (msg != NULL && msg[0] != 0) _mi_prim_out_stderr(msg);
}

static void mi_out_buf_stderr(const char* msg, void* arg) {
  mi_out_stderr(msg, arg);
  mi_out_buf(msg, arg);
}

// Deliver the buffered output to `out` and stop buffering.
static void mi_out_buf_flush(mi_output_fun* out, bool no_more_buf, void* arg) {
  if (out == NULL) return;
  size_t count = mi_atomic_add_acq_rel(&out_len, (no_more_buf ? MI_OUT_BUF_SIZE : 1));
  if (count > MI_OUT_BUF_SIZE) count = MI_OUT_BUF_SIZE;
  out_buf[count] = 0;
  out(out_buf, arg);
  if (!no_more_buf) out_buf[count] = '\n';   // keep the reserved byte harmless
}

static mi_output_fun* volatile mi_out_default = &mi_out_buf;   // until the library is loaded
static void* volatile mi_out_arg;

// The library is loaded: what was buffered so far goes to stderr too, and
// from now on messages go to stderr (and the buffer, for a later registration).
static void mi_out_init(void) {
  if (mi_out_default == &mi_out_buf) {
    mi_out_buf_flush(&mi_out_stderr, false, NULL);
    mi_out_default = &mi_out_buf_stderr;
  }
}

static mi_output_fun* mi_out_get_default(void** parg) {
  if (parg != NULL) *parg = mi_out_arg;
  mi_output_fun* out = mi_out_default;
  return (out == NULL ? &mi_out_buf : out);
}

void mi_register_output(mi_output_fun* out, void* arg) mi_attr_noexcept {
  mi_out_default = (out == NULL ? &mi_out_stderr : out);
  mi_out_arg = arg;
  if (out != NULL) mi_out_buf_flush(out, true, arg);
}

// ---------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------

static mi_decl_thread bool recurse = false;
static _Atomic(size_t) error_count;      // errors and warnings shown (or offered) so far
static _Atomic(size_t) error_suppressed; // errors and warnings dropped by max_errors

void _mi_fputs(mi_output_fun* out, void* arg, const char* prefix, const char* message) {
  if (out == NULL || (void*)out == (void*)stdout || (void*)out == (void*)stderr) {
    // stdout/stderr mean "the default output" (for mi_stats_print)
    out = mi_out_get_default(&arg);
  }
  if (prefix != NULL) out(prefix, arg);
  out(message, arg);
}

static void mi_vfprintf(mi_output_fun* out, void* arg, const char* prefix, const char* fmt, va_list args) {
  char buf[512];
  if (fmt == NULL) return;
  if (mi_tls(recurse)) return;   // a message while printing one: drop it
  mi_tls(recurse) = true;
  vsnprintf(buf, sizeof(buf) - 1, fmt, args);
  _mi_fputs(out, arg, prefix, buf);
  mi_tls(recurse) = false;
}

static void mi_fprintf(mi_output_fun* out, void* arg, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  mi_vfprintf(out, arg, NULL, fmt, args);
  va_end(args);
}

void _mi_verbose_message(const char* fmt, ...) {
  if (!mi_option_is_enabled(mi_option_verbose)) return;
  va_list args;
  va_start(args, fmt);
  mi_vfprintf(NULL, NULL, "mimalloc: ", fmt, args);
  va_end(args);
}

static bool mi_show_error_message(void) {
  if (!mi_option_is_enabled(mi_option_show_errors) && !mi_option_is_enabled(mi_option_verbose)) return false;
  const long max = mi_max_error_count;
  if (max < 0 || mi_atomic_add_relaxed(&error_count, 1) < (size_t)max) return true;
  mi_atomic_add_relaxed(&error_suppressed, 1);
  return false;
}

// Said once at exit: how many errors and warnings max_errors kept back.
void _mi_errors_print_at_exit(void) {
  const size_t n = mi_atomic_load_relaxed(&error_suppressed);
  if (n == 0) return;
  mi_fprintf(NULL, NULL, "mimalloc: %zu more error and warning message%s not shown (MIMALLOC_MAX_ERRORS=%ld)\n",
              n, (n == 1 ? " was" : "s were"), mi_max_error_count);
}

// A mistake in the environment: always shown, and not counted against max_errors.
static void mi_env_warning(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  mi_vfprintf(NULL, NULL, "mimalloc: warning: ", fmt, args);
  va_end(args);
}

void _mi_warning_message(const char* fmt, ...) {
  if (!mi_show_error_message()) return;
  va_list args;
  va_start(args, fmt);
  mi_vfprintf(NULL, NULL, "mimalloc: warning: ", fmt, args);
  va_end(args);
}

// ---------------------------------------------------------------------------
// Errors: message (if shown), then the user's handler or the default one
// ---------------------------------------------------------------------------

static mi_error_fun* volatile mi_error_handler;
static void* volatile mi_error_arg;

void mi_register_error(mi_error_fun* fun, void* arg) {
  mi_error_handler = fun;
  mi_error_arg = arg;
}

static void mi_error_default(int err) {
  (void)err;
  #if (MI_DEBUG > 0)
  if (err == EFAULT) abort();   // corrupted heap: stop here (secure builds: see mi_error_vmessage)
  #endif
  #if defined(MI_XMALLOC)
  if (err == ENOMEM || err == EOVERFLOW) abort();   // xmalloc: out of memory is fatal
  #endif
}

static void mi_error_vmessage(bool misuse, int err, const char* fmt, va_list args) {
  // secure builds stop at heap misuse (unless secure_continue), and say what
  // it was whatever show_errors and max_errors say
  const bool stop = (MI_SECURE_STOP && misuse && mi_error_handler == NULL && !mi_option_is_enabled(mi_option_secure_continue));
  if ((MI_SECURE_STOP && misuse) || mi_show_error_message()) {
    mi_vfprintf(NULL, NULL, "mimalloc: error: ", fmt, args);
  }
  if (stop) abort();
  mi_error_fun* handler = mi_error_handler;
  if (handler != NULL) handler(err, mi_error_arg);
  else mi_error_default(err);
  // a failing allocation sets errno; misuse comes from operations that
  // cannot fail (free, usable_size, collecting lists) and leaves it alone
  if (!misuse) errno = err;
}

void _mi_error_message(int err, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  mi_error_vmessage(false, err, fmt, args);
  va_end(args);
}

// Heap misuse the build detected (an invalid or double free, a damaged list
// or canary): as an error, and in secure builds fatal by default.
void _mi_misuse_message(int err, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  mi_error_vmessage(true, err, fmt, args);
  va_end(args);
}

void _mi_assert_fail(const char* assertion, const char* fname, unsigned int line, const char* func) {
  char buf[512];
  snprintf(buf, sizeof(buf), "mimalloc: assertion failed: at \"%s\":%u, %s\n  assertion: \"%s\"\n",
           fname, line, (func == NULL ? "" : func), assertion);
  _mi_prim_out_stderr(buf);
  abort();
}

// ---------------------------------------------------------------------------
// Reading an option from the environment
// ---------------------------------------------------------------------------

#define MI_ENV_PREFIX      "mimalloc_"
#define MI_ENV_PREFIX_LEN  (sizeof(MI_ENV_PREFIX) - 1)
#define MI_ENV_VALUE_MAX   64     // longer values are invalid (and quoted cut short)

static char mi_ascii_lower(char c) { return (c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c); }

// Does `s` start with `prefix`, in any case?
static bool mi_istarts_with(const char* s, const char* prefix) {
  for (; *prefix != 0; s++, prefix++) {
    if (mi_ascii_lower(*s) != mi_ascii_lower(*prefix)) return false;
  }
  return true;
}

// Is the variable name of `entry` ("NAME=value") MIMALLOC_<name>, in any case?
static bool mi_env_is_option(const char* entry, const char* name) {
  if (!mi_istarts_with(entry, MI_ENV_PREFIX)) return false;
  entry += MI_ENV_PREFIX_LEN;
  const size_t len = strlen(name);
  return (mi_istarts_with(entry, name) && entry[len] == '=');
}

// The environment entry of the option `name` ("MIMALLOC_NAME=value" as
// written), or NULL if it is not set (or the environment is not ready yet).
static const char* mi_env_find(const char* name) {
  const char* const* env = _mi_prim_environ();
  if (env == NULL) return NULL;
  for (; *env != NULL; env++) {
    if (mi_env_is_option(*env, name)) return *env;
  }
  return NULL;
}

// The length of the variable name of an entry, and its value.
static int mi_env_name_len(const char* entry) { return (int)(strchr(entry, '=') - entry); }
static const char* mi_env_value(const char* entry) { return strchr(entry, '=') + 1; }

static bool mi_word_is(const char* lower, const char* a, const char* b, const char* c, const char* d) {
  return (strcmp(lower, a) == 0 || strcmp(lower, b) == 0 || strcmp(lower, c) == 0 || strcmp(lower, d) == 0);
}

// Parse a value: the words 1/true/yes/on (or empty) and 0/false/no/off in any
// case, or a complete decimal integer. False if it is none of these; *overflow
// is set for an integer too large for a long.
static bool mi_env_parse(const char* text, long* value, bool* overflow) {
  *overflow = false;
  char lower[MI_ENV_VALUE_MAX + 1];
  size_t n = 0;
  for (; text[n] != 0; n++) {
    if (n >= MI_ENV_VALUE_MAX) return false;
    lower[n] = mi_ascii_lower(text[n]);
  }
  lower[n] = 0;
  if (n == 0 || mi_word_is(lower, "1", "true", "yes", "on")) { *value = 1; return true; }
  if (mi_word_is(lower, "0", "false", "no", "off")) { *value = 0; return true; }
  const int saved_errno = errno;
  errno = 0;
  char* end = lower;
  const long v = strtol(lower, &end, 10);
  const bool range_error = (errno == ERANGE);
  errno = saved_errno;
  if (end == lower || *end != 0) return false;
  *overflow = range_error;
  *value = v;
  return true;
}

// The environment entry of an option not read yet; NULL if it has none (and
// then the default stands, unless the environment may not be ready yet:
// before the library is loaded, look again later).
static const char* mi_option_entry(const char* name, mi_init_t* init) {
  const char* entry = mi_env_find(name);
  if (entry == NULL && mi_options_ready) *init = MI_DEFAULTED;
  return entry;
}

static void mi_option_init(mi_option_desc_t* desc) {
  const char* entry = mi_option_entry(desc->name, &desc->init);
  if (entry == NULL) return;
  const char* text = mi_env_value(entry);
  long value = 0;
  bool overflow = false;
  if (desc->word != NULL && strlen(text) == strlen(desc->word) && mi_istarts_with(text, desc->word)) {
    desc->value = desc->word_value;   // the option's own word (any case)
    desc->init = MI_INITIALIZED;
  }
  else if (!mi_env_parse(text, &value, &overflow)) {
    desc->init = MI_DEFAULTED;   // keep the default, but say so
    if (desc->min == 0 && desc->max == 1) {
      mi_env_warning("%.*s=%.*s%s is not a valid value (use 1, true, yes, on or 0, false, no, off%s%s); the default %ld is used\n",
                     mi_env_name_len(entry), entry, MI_ENV_VALUE_MAX, text, (strlen(text) > MI_ENV_VALUE_MAX ? "..." : ""),
                     (desc->word != NULL ? ", or " : ""), (desc->word != NULL ? desc->word : ""), desc->value);
    }
    else {
      mi_env_warning("%.*s=%.*s%s is not a valid value (use an integer from %ld to %ld%s%s); the default %ld is used\n",
                     mi_env_name_len(entry), entry, MI_ENV_VALUE_MAX, text, (strlen(text) > MI_ENV_VALUE_MAX ? "..." : ""),
                     desc->min, desc->max, (desc->word != NULL ? ", or " : ""), (desc->word != NULL ? desc->word : ""), desc->value);
    }
  }
  else if (overflow || value < desc->min || value > desc->max) {
    desc->init = MI_DEFAULTED;
    mi_env_warning("%.*s=%s is out of range (%ld to %ld); the default %ld is used\n",
                   mi_env_name_len(entry), entry, text, desc->min, desc->max, desc->value);
  }
  else {
    desc->value = value;
    desc->init = MI_INITIALIZED;
  }
}

// Report every MIMALLOC_ variable that names no option (once, at start-up).
static void mi_env_check_unknown(void) {
  const char* const* env = _mi_prim_environ();
  if (env == NULL) return;
  for (; *env != NULL; env++) {
    const char* entry = *env;
    if (!mi_istarts_with(entry, MI_ENV_PREFIX) || strchr(entry, '=') == NULL) continue;
    bool known = false;
    for (int i = 0; i < _mi_option_last && !known; i++) {
      known = mi_env_is_option(entry, options[i].name);
    }
    for (int i = 0; i < _mi_option_text_last && !known; i++) {
      known = mi_env_is_option(entry, text_options[i].name);
    }
    if (!known) {
      const char* text = mi_env_value(entry);
      mi_env_warning("%.*s=%.*s%s is not a mimalloc option and is ignored\n", mi_env_name_len(entry), entry,
                     MI_ENV_VALUE_MAX, text, (strlen(text) > MI_ENV_VALUE_MAX ? "..." : ""));
    }
  }
}

// A text option: its value as written, unless it is too long (then it is
// reported and not used).
static void mi_option_text_init(mi_option_text_desc_t* desc) {
  const char* entry = mi_option_entry(desc->name, &desc->init);
  if (entry == NULL) return;
  const char* text = mi_env_value(entry);
  desc->init = MI_INITIALIZED;
  if (strlen(text) > MI_OPTION_TEXT_MAX) {
    mi_env_warning("%.*s=%.*s... is longer than %d bytes and is ignored\n",
                   mi_env_name_len(entry), entry, MI_ENV_VALUE_MAX, text, MI_OPTION_TEXT_MAX);
    desc->value[0] = 0;
    return;
  }
  strcpy(desc->value, text);
}
