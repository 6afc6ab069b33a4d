/* ----------------------------------------------------------------------------
  options.c -- the runtime option table and the message channel.

  All options live in one table: enum order (the 1.6 ABI order), name,
  default, and one line of meaning. Values are read lazily from the
  environment variable MIMALLOC_<NAME> the first time an option is used.
  A check at start-up asserts that the table order matches the enum.

  Messages (errors, warnings, verbose lines, assertion failures) are
  formatted into a stack buffer and written to stderr without allocating; a
  thread-local guard drops messages produced while printing one.
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
  { 0, MI_UNINIT, MI_OPTION(abandoned_page_reset) }, // purge free pages of abandoned segments now
  { 0, MI_UNINIT, MI_OPTION(segment_reset) },        // purge freed segments now (no delay)
  { 1, MI_UNINIT, MI_OPTION(eager_commit_delay) },   // first N segments commit page by page
  { 100, MI_UNINIT, MI_OPTION(reset_delay) },        // milliseconds before a purge
  { 0, MI_UNINIT, MI_OPTION(use_numa_nodes) },       // 0 = detect
  { 100, MI_UNINIT, MI_OPTION(os_tag) },             // macOS VM tag
  { 16, MI_UNINIT, MI_OPTION(max_errors) },          // messages printed at most
};

static void mi_option_init(mi_option_desc_t* desc);

void _mi_options_init(void) {
  for (int i = 0; i < _mi_option_last; i++) {
    mi_option_desc_t* desc = &options[i];
    mi_assert_always(desc->option == (mi_option_t)i);  // the table order matches the enum
    if (desc->init == MI_UNINIT) mi_option_init(desc);
    if (i != mi_option_verbose) {
      _mi_verbose_message("option '%s': %ld\n", desc->name, desc->value);
    }
  }
}

long _mi_option_get(mi_option_t option) {
  mi_assert(option >= 0 && option < _mi_option_last);
  mi_option_desc_t* desc = &options[option];
  if (mi_unlikely(desc->init == MI_UNINIT)) mi_option_init(desc);
  return desc->value;
}

// ---------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------

static mi_decl_thread bool recurse = false;
static _Atomic(size_t) error_count;   // errors and warnings printed so far

void _mi_fputs(const char* prefix, const char* message) {
  if (prefix != NULL) _mi_prim_out_stderr(prefix);
  _mi_prim_out_stderr(message);
}

static void mi_vfprintf(const char* prefix, const char* fmt, va_list args) {
  char buf[512];
  if (fmt == NULL) return;
  if (recurse) return;
  recurse = true;
  vsnprintf(buf, sizeof(buf) - 1, fmt, args);
  recurse = false;
  _mi_fputs(prefix, buf);
}

void _mi_verbose_message(const char* fmt, ...) {
  if (!_mi_option_get(mi_option_verbose)) return;
  va_list args;
  va_start(args, fmt);
  mi_vfprintf("mimalloc: ", fmt, args);
  va_end(args);
}

static bool mi_show_error_message(void) {
  if (!_mi_option_get(mi_option_show_errors) && !_mi_option_get(mi_option_verbose)) return false;
  const long max = _mi_option_get(mi_option_max_errors);
  return (max < 0 || mi_atomic_add_relaxed(&error_count, 1) < (size_t)max);
}

void _mi_warning_message(const char* fmt, ...) {
  if (!mi_show_error_message()) return;
  va_list args;
  va_start(args, fmt);
  mi_vfprintf("mimalloc: warning: ", fmt, args);
  va_end(args);
}

void _mi_error_message(int err, const char* fmt, ...) {
  if (mi_show_error_message()) {
    va_list args;
    va_start(args, fmt);
    mi_vfprintf("mimalloc: error: ", fmt, args);
    va_end(args);
  }
  // Debug builds stop at corruption; everything else returns to the caller's failure mode.
  #if (MI_DEBUG > 0)
  if (err == EFAULT) abort();
  #endif
  errno = err;
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
    desc->init = MI_DEFAULTED;
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
