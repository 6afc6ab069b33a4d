/* ----------------------------------------------------------------------------
  options.c -- the runtime option table and the message channel.

  All options live in one table: enum order (the 1.6 ABI order), name,
  default, and one line of meaning. Values are read lazily from the
  environment variable MIMALLOC_<NAME> the first time an option is used.
  A check at start-up asserts that the table order matches the enum.

  Messages (errors, warnings, verbose lines, assertion failures) are
  formatted into a 512-byte stack buffer without allocating and go through
  one output channel (stderr, or the function given to mi_register_output);
  a thread-local guard drops messages produced while printing one. Errors
  then call the handler given to mi_register_error, or the default one.
-----------------------------------------------------------------------------*/
#include "mimalloc-internal.h"
#include "prim/prim.h"

#include <stdio.h>    // vsnprintf
#include <stdarg.h>
#include <stdlib.h>   // abort, strtol
#include <ctype.h>

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
} mi_option_desc_t;

#define MI_OPTION(opt)  mi_option_##opt, #opt

static mi_option_desc_t options[_mi_option_last] = {
  // show error and warning messages (on by default in debug builds)
  #if (MI_DEBUG > 0) || defined(MI_SHOW_ERRORS)
  { 1, MI_UNINIT, MI_OPTION(show_errors) },
  #else
  { 0, MI_UNINIT, MI_OPTION(show_errors) },
  #endif
  { 0, MI_UNINIT, MI_OPTION(show_stats) },           // print statistics at exit
  { 0, MI_UNINIT, MI_OPTION(verbose) },              // print informational messages
  { 1, MI_UNINIT, MI_OPTION(eager_commit) },         // commit segments when allocated
  { 1, MI_UNINIT, MI_OPTION(eager_region_commit) },  // commit whole regions when created
  { 0, MI_UNINIT, MI_OPTION(reset_decommits) },      // purge by decommit instead of MADV_DONTNEED
  { 0, MI_UNINIT, MI_OPTION(large_os_pages) },       // use 2 MiB OS pages where possible
  { 0, MI_UNINIT, MI_OPTION(reserve_huge_os_pages) },// reserve N 1 GiB pages at start
  { 0, MI_UNINIT, MI_OPTION(segment_cache) },        // per-thread segment cache size
  { 1, MI_UNINIT, MI_OPTION(page_reset) },           // purge free pages after reset_delay
  { 0, MI_UNINIT, MI_OPTION(abandoned_page_reset) }, // purge free pages of abandoned segments at once, not after the delay
  { 0, MI_UNINIT, MI_OPTION(segment_reset) },        // purge freed segments now (no delay)
  { 1, MI_UNINIT, MI_OPTION(eager_commit_delay) },   // first N segments commit page by page
  { 100, MI_UNINIT, MI_OPTION(reset_delay) },        // milliseconds before a purge
  { 0, MI_UNINIT, MI_OPTION(use_numa_nodes) },       // 0 = detect
  { 100, MI_UNINIT, MI_OPTION(os_tag) },             // macOS VM tag
  { 16, MI_UNINIT, MI_OPTION(max_errors) },          // messages printed at most
};

static void mi_option_init(mi_option_desc_t* desc);
static bool mi_options_ready = false;   // the load-time constructor ran (environment is usable)
static long mi_max_error_count = 16;    // max_errors, read once at start-up

void _mi_options_init(void) {
  mi_options_ready = true;
  _mi_out_init();
  for (int i = 0; i < _mi_option_last; i++) {
    mi_option_desc_t* desc = &options[i];
    mi_assert_always(desc->option == (mi_option_t)i);  // the table order matches the enum
    if (desc->init == MI_UNINIT) mi_option_init(desc);
    if (i != mi_option_verbose) {
      _mi_verbose_message("option '%s': %ld\n", desc->name, desc->value);
    }
  }
  mi_max_error_count = mi_option_get(mi_option_max_errors);
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
void _mi_out_init(void) {
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
static _Atomic(size_t) error_count;   // errors and warnings printed so far

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
  if (recurse) return;   // a message while printing one: drop it
  recurse = true;
  vsnprintf(buf, sizeof(buf) - 1, fmt, args);
  _mi_fputs(out, arg, prefix, buf);
  recurse = false;
}

void _mi_fprintf(mi_output_fun* out, void* arg, const char* fmt, ...) {
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
  return (max < 0 || mi_atomic_add_relaxed(&error_count, 1) < (size_t)max);
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
  #if (MI_DEBUG > 0) || (MI_SECURE > 0)
  if (err == EFAULT) abort();   // corrupted heap: stop here
  #endif
  #if defined(MI_XMALLOC)
  if (err == ENOMEM || err == EOVERFLOW) abort();   // xmalloc: out of memory is fatal
  #endif
}

void _mi_error_message(int err, const char* fmt, ...) {
  if (mi_show_error_message()) {
    va_list args;
    va_start(args, fmt);
    mi_vfprintf(NULL, NULL, "mimalloc: error: ", fmt, args);
    va_end(args);
  }
  mi_error_fun* handler = mi_error_handler;
  if (handler != NULL) handler(err, mi_error_arg);
  else mi_error_default(err);
  errno = err;   // the operation now fails in its documented way
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

static bool mi_token_is(const char* s, const char* a, const char* b, const char* c, const char* d) {
  return (strcmp(s, a) == 0 || strcmp(s, b) == 0 || strcmp(s, c) == 0 || strcmp(s, d) == 0);
}

static void mi_option_init(mi_option_desc_t* desc) {
  char name[64] = "mimalloc_";
  strncat(name, desc->name, sizeof(name) - strlen(name) - 1);
  char value[65];
  if (!_mi_prim_getenv(name, value, sizeof(value))) {
    // before the library is loaded the environment may not be ready: look again later
    if (mi_options_ready) desc->init = MI_DEFAULTED;
    return;
  }
  // upper-case the value, then accept whole tokens or a complete integer
  for (size_t i = 0; value[i] != 0; i++) value[i] = (char)toupper((unsigned char)value[i]);
  if (value[0] == 0 || mi_token_is(value, "1", "TRUE", "YES", "ON")) {
    desc->value = 1;
    desc->init = MI_INITIALIZED;
  }
  else if (mi_token_is(value, "0", "FALSE", "NO", "OFF")) {
    desc->value = 0;
    desc->init = MI_INITIALIZED;
  }
  else {
    char* end = value;
    long v = strtol(value, &end, 10);
    if (*end == 0) {
      desc->value = v;
      desc->init = MI_INITIALIZED;
    }
    else {
      desc->init = MI_DEFAULTED;   // keep the default, but say so
      _mi_warning_message("environment option mimalloc_%s has an invalid value: %s\n", desc->name, value);
    }
  }
}
