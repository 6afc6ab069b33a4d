/* ----------------------------------------------------------------------------
  stats.c -- statistics: counting, merging and printing.

  Every thread has a block in its tld; the process has _mi_stats_main. The
  slow-path counters (segments, committed, ...) are added to both at once:
  plain arithmetic in the thread's block, relaxed atomics in the process
  block, so the process figures are exact. The busiest of them, touched,
  reaches the process block in batches (_mi_stat_touched_update), so its
  process figure may lag a running thread by less than a batch. The per-allocation
  counters of debug builds (MI_STAT > 1) go to the thread's block only and
  are merged into the process block at thread exit and before printing.
  See docs/design.md ("Statistics").

  Printing the table formats into a stack buffer and delivers one line per
  call to the output function; it never allocates. One table of rows (name,
  label, kind, place in mi_stats_t and in the public mi_stats_snapshot_t)
  drives the text table, mi_stats_get and the JSON (mi_stats_get_json,
  show_stats=json, and the snapshots appended to stats_file every
  stats_interval ms by a thread of its own); docs/observability.md documents
  every JSON field. The JSON has no line buffer: its text and numbers go
  straight to the sink, so no figure, however wide, cuts a line (a 256-byte
  line buffer did, and the output was no longer JSON); the stats file's path
  and line are measured first and get exactly their room.
-----------------------------------------------------------------------------*/
#include "mimalloc-internal.h"
#include "prim/prim.h"

#include <stdio.h>    // snprintf
#include <stdarg.h>

mi_stats_t _mi_stats_main;

// ---------------------------------------------------------------------------
// Updating
// ---------------------------------------------------------------------------

static inline int64_t mi_relaxed(_Atomic(int64_t)* p) { return mi_atomic_load_relaxed(p); }

// thread-local: plain load/store (only the owner writes its block)
void _mi_stat_local_update(mi_stat_count_t* stat, int64_t amount) {
  if (amount == 0) return;
  const int64_t current = mi_relaxed(&stat->current) + amount;
  mi_atomic_store_relaxed(&stat->current, current);
  if (current > mi_relaxed(&stat->peak)) mi_atomic_store_relaxed(&stat->peak, current);
  if (amount > 0) mi_atomic_store_relaxed(&stat->allocated, mi_relaxed(&stat->allocated) + amount);
  else mi_atomic_store_relaxed(&stat->freed, mi_relaxed(&stat->freed) - amount);
}

void _mi_stat_counter_local_add(mi_stat_counter_t* stat, int64_t amount) {
  mi_atomic_store_relaxed(&stat->total, mi_relaxed(&stat->total) + amount);
  mi_atomic_store_relaxed(&stat->count, mi_relaxed(&stat->count) + 1);
}

static void mi_stat_global_update(mi_stat_count_t* stat, int64_t amount) {
  if (amount == 0) return;
  const int64_t current = mi_atomic_add_relaxed(&stat->current, amount) + amount;
  int64_t peak = mi_relaxed(&stat->peak);
  while (current > peak && !mi_atomic_cas_weak_acq_rel(&stat->peak, &peak, current)) { /* retry */ }
  if (amount > 0) mi_atomic_add_relaxed(&stat->allocated, amount);
  else mi_atomic_add_relaxed(&stat->freed, -amount);
}

// the same field in another block
static void* mi_stat_in(mi_stats_t* block, const void* stat_in_main) {
  return (uint8_t*)block + ((const uint8_t*)stat_in_main - (const uint8_t*)&_mi_stats_main);
}

void _mi_stat_update(mi_stats_t* local, mi_stat_count_t* stat, int64_t amount) {
  if (local != NULL && local != &_mi_stats_main) {
    _mi_stat_local_update((mi_stat_count_t*)mi_stat_in(local, stat), amount);
  }
  mi_stat_global_update(stat, amount);
}

// The busiest slow-path row, `touched` (updated per 4 KiB of blocks threaded
// into a free list): an atomic add on the process block per update made the
// threads of sh6benchN fight over its cache line. The thread's block stays
// exact; the process block gets the sums once they reach MI_STAT_BATCH, and
// whatever is left when the thread ends or its statistics are merged (so
// its current figure may lag a running thread by less than a batch).
#define MI_STAT_BATCH  (4 * (int64_t)MiB)

static void mi_stat_global_add(mi_stat_count_t* stat, int64_t allocated, int64_t freed) {
  const int64_t current = mi_atomic_add_relaxed(&stat->current, allocated - freed) + allocated - freed;
  int64_t peak = mi_relaxed(&stat->peak);
  while (current > peak && !mi_atomic_cas_weak_acq_rel(&stat->peak, &peak, current)) { /* retry */ }
  if (allocated != 0) mi_atomic_add_relaxed(&stat->allocated, allocated);
  if (freed != 0) mi_atomic_add_relaxed(&stat->freed, freed);
}

static void mi_stats_flush_pending(mi_stats_t* stats) {
  if (stats->touched_pending_allocated == 0 && stats->touched_pending_freed == 0) return;
  mi_stat_global_add(&_mi_stats_main.touched, stats->touched_pending_allocated, stats->touched_pending_freed);
  stats->touched_pending_allocated = 0;
  stats->touched_pending_freed = 0;
}

void _mi_stat_touched_update(mi_stats_t* local, int64_t amount) {
  if (local == NULL || local == &_mi_stats_main) { mi_stat_global_update(&_mi_stats_main.touched, amount); return; }
  _mi_stat_local_update(&local->touched, amount);
  if (amount > 0) local->touched_pending_allocated += amount;
  else local->touched_pending_freed -= amount;
  if (local->touched_pending_allocated >= MI_STAT_BATCH || local->touched_pending_freed >= MI_STAT_BATCH) {
    mi_stats_flush_pending(local);
  }
}

void _mi_stat_counter_add(mi_stats_t* local, mi_stat_counter_t* stat, int64_t amount) {
  if (local != NULL && local != &_mi_stats_main) {
    mi_stat_counter_t* lstat = (mi_stat_counter_t*)mi_stat_in(local, stat);
    mi_atomic_store_relaxed(&lstat->total, mi_relaxed(&lstat->total) + amount);
    mi_atomic_store_relaxed(&lstat->count, mi_relaxed(&lstat->count) + 1);
  }
  mi_atomic_add_relaxed(&stat->total, amount);
  mi_atomic_add_relaxed(&stat->count, 1);
}

// ---------------------------------------------------------------------------
// Merging the per-allocation counters of a thread into the process block
// ---------------------------------------------------------------------------

static void mi_stat_count_merge(mi_stat_count_t* to, mi_stat_count_t* from) {
  const int64_t allocated = mi_relaxed(&from->allocated);
  const int64_t freed = mi_relaxed(&from->freed);
  if (allocated == 0 && freed == 0) return;
  mi_atomic_add_relaxed(&to->allocated, allocated);
  mi_atomic_add_relaxed(&to->freed, freed);
  const int64_t current = mi_atomic_add_relaxed(&to->current, allocated - freed) + allocated - freed;
  // a thread's peak only bounds the process peak from below
  int64_t peak = mi_relaxed(&to->peak);
  const int64_t candidate = (mi_relaxed(&from->peak) > current ? mi_relaxed(&from->peak) : current);
  while (candidate > peak && !mi_atomic_cas_weak_acq_rel(&to->peak, &peak, candidate)) { /* retry */ }
  mi_atomic_store_relaxed(&from->allocated, 0);
  mi_atomic_store_relaxed(&from->freed, 0);
  mi_atomic_store_relaxed(&from->current, 0);
  mi_atomic_store_relaxed(&from->peak, 0);
}

static void mi_stat_counter_merge(mi_stat_counter_t* to, mi_stat_counter_t* from) {
  const int64_t total = mi_relaxed(&from->total), count = mi_relaxed(&from->count);
  if (count == 0) return;
  mi_atomic_add_relaxed(&to->total, total);
  mi_atomic_add_relaxed(&to->count, count);
  mi_atomic_store_relaxed(&from->total, 0);
  mi_atomic_store_relaxed(&from->count, 0);
}

// Only the per-allocation counters live in the thread's block alone.
static void mi_stats_merge_from(mi_stats_t* stats) {
  if (stats == &_mi_stats_main) return;
  mi_stats_flush_pending(stats);
  #if (MI_STAT > 1)
  mi_stat_count_merge(&_mi_stats_main.normal, &stats->normal);
  mi_stat_count_merge(&_mi_stats_main.malloc, &stats->malloc);
  for (size_t i = 0; i <= MI_BIN_HUGE; i++) {
    mi_stat_count_merge(&_mi_stats_main.normal_bins[i], &stats->normal_bins[i]);
  }
  mi_stat_counter_merge(&_mi_stats_main.pages_extended, &stats->pages_extended);
  mi_stat_counter_merge(&_mi_stats_main.searches, &stats->searches);
  mi_stat_counter_merge(&_mi_stats_main.normal_count, &stats->normal_count);
  mi_stat_counter_merge(&_mi_stats_main.pages_retired, &stats->pages_retired);
  #else
  (void)&mi_stat_count_merge; (void)&mi_stat_counter_merge;
  #endif
}

void _mi_stats_done(mi_stats_t* stats) {
  mi_stats_merge_from(stats);
}

static mi_stats_t* mi_stats_get_default(void) {
  mi_heap_t* heap = mi_get_default_heap();
  return (mi_heap_is_initialized(heap) ? &heap->tld->stats : NULL);
}

void mi_stats_merge(void) mi_attr_noexcept {
  mi_stats_t* stats = mi_stats_get_default();
  if (stats != NULL) mi_stats_merge_from(stats);
}

// ---------------------------------------------------------------------------
// The rows: one table serves the text table, mi_stats_get and the JSON
// ---------------------------------------------------------------------------

typedef enum mi_row_kind_e {
  MI_ROW_BYTES,     // a mi_stat_count_t of bytes
  MI_ROW_COUNT,     // a mi_stat_count_t of things (segments, pages, threads)
  MI_ROW_EVENTS,    // a mi_stat_counter_t: events and the sum of their amounts
  MI_ROW_AVERAGE,   // the same, printed as the average amount per event
} mi_row_kind_t;

typedef struct mi_stat_row_s {
  const char*   name;       // field name in mi_stats_snapshot_t and in the JSON
  const char*   label;      // label in the text table (NULL: not in its main part)
  mi_row_kind_t kind;
  size_t        internal;   // offset in mi_stats_t
  size_t        snapshot;   // offset in mi_stats_snapshot_t
} mi_stat_row_t;

#define MI_ROW(field, label, kind)  { #field, label, kind, offsetof(mi_stats_t, field), offsetof(mi_stats_snapshot_t, field) }

// In the order of the text table; then the rows it prints elsewhere or not at all.
static const mi_stat_row_t mi_stat_rows[] = {
  MI_ROW(reserved, "reserved", MI_ROW_BYTES),
  MI_ROW(committed, "committed", MI_ROW_BYTES),
  MI_ROW(reset, "reset", MI_ROW_BYTES),
  MI_ROW(touched, "touched", MI_ROW_BYTES),
  MI_ROW(segments, "segments", MI_ROW_COUNT),
  MI_ROW(segments_abandoned, "-abandoned", MI_ROW_COUNT),
  MI_ROW(segments_cached, "-cached", MI_ROW_COUNT),
  MI_ROW(pages, "pages", MI_ROW_COUNT),
  MI_ROW(pages_abandoned, "-abandoned", MI_ROW_COUNT),
  MI_ROW(pages_extended, "-extended", MI_ROW_EVENTS),
  MI_ROW(pages_retired, " -retired", MI_ROW_EVENTS),
  MI_ROW(mmap_calls, "mmaps", MI_ROW_EVENTS),
  MI_ROW(commit_calls, "commits", MI_ROW_EVENTS),
  MI_ROW(threads, "threads", MI_ROW_COUNT),
  MI_ROW(searches, "searches", MI_ROW_AVERAGE),
  MI_ROW(huge, NULL, MI_ROW_BYTES),
  MI_ROW(giant, NULL, MI_ROW_BYTES),
  MI_ROW(normal, NULL, MI_ROW_BYTES),
  MI_ROW(malloc, NULL, MI_ROW_BYTES),
  MI_ROW(normal_count, NULL, MI_ROW_EVENTS),
  MI_ROW(huge_count, NULL, MI_ROW_EVENTS),
  MI_ROW(giant_count, NULL, MI_ROW_EVENTS),
};
#define MI_STAT_ROWS  (sizeof(mi_stat_rows) / sizeof(mi_stat_rows[0]))
_Static_assert(MI_STATS_BINS == MI_BIN_HUGE + 1, "mi_stats_snapshot_t has a row per size class");

// ---------------------------------------------------------------------------
// Printing
// ---------------------------------------------------------------------------

typedef struct mi_printer_s {
  mi_output_fun* out;
  void* arg;
} mi_printer_t;

static void mi_print_line(mi_printer_t* p, const char* line) {
  _mi_fputs(p->out, p->arg, NULL, line);
}

// An amount with one decimal and a magnitude letter: base 1024 with a `b`
// suffix for bytes (unit > 0), base 1000 without suffix for counts (unit < 0).
static void mi_format_amount(char* buf, size_t size, int64_t n, int64_t unit) {
  const int64_t base = (unit < 0 ? 1000 : 1024);
  const char* suffix = (unit < 0 ? "" : "b");
  if (unit > 0) n *= unit;
  const int64_t pos = (n < 0 ? -n : n);
  if (pos < base) {
    if (unit < 0) snprintf(buf, size, "%lld", (long long)n);
    else snprintf(buf, size, "%lld b", (long long)n);
    return;
  }
  int64_t divider = base;
  const char* magnitude = "k";
  if (pos >= divider * base) { divider *= base; magnitude = "m"; }
  if (pos >= divider * base) { divider *= base; magnitude = "g"; }
  const int64_t tens = (pos * 10) / divider;
  snprintf(buf, size, "%s%lld.%lld %s%s", (n < 0 ? "-" : ""), (long long)(tens / 10), (long long)(tens % 10), magnitude, suffix);
}

static void mi_print_amount(char* line, size_t size, int64_t n, int64_t unit) {
  char buf[32];
  mi_format_amount(buf, sizeof(buf), n, unit);
  const size_t len = strlen(line);
  snprintf(line + len, size - len, "%11s", buf);
}

// "label:  peak  total  freed  unit  [count]  ok|not all freed!"
static void mi_stat_print(mi_printer_t* p, const mi_stat_count_t* stat, const char* msg, int64_t unit, int64_t count) {
  char line[256];
  snprintf(line, sizeof(line), "%10s:", msg);
  if (unit != 0) {
    mi_print_amount(line, sizeof(line), mi_relaxed((_Atomic(int64_t)*)&stat->peak), unit);
    mi_print_amount(line, sizeof(line), mi_relaxed((_Atomic(int64_t)*)&stat->allocated), unit);
    mi_print_amount(line, sizeof(line), mi_relaxed((_Atomic(int64_t)*)&stat->freed), unit);
    if (unit > 0) mi_print_amount(line, sizeof(line), unit, 1);
    else {
      const size_t len = strlen(line);
      snprintf(line + len, sizeof(line) - len, "%11s", "");
    }
    const size_t len = strlen(line);
    if (count >= 0) snprintf(line + len, sizeof(line) - len, "%11lld", (long long)count);
    else snprintf(line + strlen(line), sizeof(line) - strlen(line), "%11s", "");
    const bool ok = (mi_relaxed((_Atomic(int64_t)*)&stat->allocated) <= mi_relaxed((_Atomic(int64_t)*)&stat->freed));
    snprintf(line + strlen(line), sizeof(line) - strlen(line), "     %s\n", (ok ? "ok" : "not all freed!"));
  }
  else {
    snprintf(line + strlen(line), sizeof(line) - strlen(line), "\n");
  }
  mi_print_line(p, line);
}

static void mi_stat_counter_print(mi_printer_t* p, const mi_stat_counter_t* stat, const char* msg) {
  char line[128];
  snprintf(line, sizeof(line), "%10s:", msg);
  mi_print_amount(line, sizeof(line), mi_relaxed((_Atomic(int64_t)*)&stat->total), -1);
  snprintf(line + strlen(line), sizeof(line) - strlen(line), "\n");
  mi_print_line(p, line);
}

static void mi_stat_counter_print_avg(mi_printer_t* p, const mi_stat_counter_t* stat, const char* msg) {
  char line[128];
  const int64_t count = mi_relaxed((_Atomic(int64_t)*)&stat->count);
  const int64_t avg_tens = (count == 0 ? 0 : (mi_relaxed((_Atomic(int64_t)*)&stat->total) * 10) / count);
  snprintf(line, sizeof(line), "%10s: %7lld.%lld avg\n", msg, (long long)(avg_tens / 10), (long long)(avg_tens % 10));
  mi_print_line(p, line);
}

static void mi_print_header(mi_printer_t* p) {
  char line[128];
  snprintf(line, sizeof(line), "%10s: %10s %10s %10s %10s %10s\n", "heap stats", "peak  ", "total  ", "freed  ", "unit  ", "count  ");
  mi_print_line(p, line);
}

#if (MI_STAT > 1)
static void mi_stats_print_bins(mi_printer_t* p, const mi_stats_t* stats) {
  bool found = false;
  char label[16];
  for (size_t i = 0; i <= MI_BIN_HUGE; i++) {
    const mi_stat_count_t* bin = &stats->normal_bins[i];
    if (mi_relaxed((_Atomic(int64_t)*)&bin->allocated) > 0) {
      found = true;
      const int64_t unit = (int64_t)_mi_bin_size((uint8_t)i);
      snprintf(label, sizeof(label), "normal %3zu", i);
      mi_stat_print(p, bin, label, unit, mi_relaxed((_Atomic(int64_t)*)&bin->allocated));
    }
  }
  if (found) {
    mi_print_line(p, "\n");
    mi_print_header(p);
  }
}
#endif

static void mi_stats_print_main(mi_printer_t* p, mi_stats_t* stats) {
  mi_print_header(p);
  #if (MI_STAT > 1)
  mi_stats_print_bins(p, stats);
  mi_stat_print(p, &stats->normal, "normal", 1, -1);
  mi_stat_print(p, &stats->huge, "huge", 1, -1);
  mi_stat_print(p, &stats->giant, "giant", 1, -1);
  mi_stat_count_t total;
  memset(&total, 0, sizeof(total));
  const mi_stat_count_t* parts[3] = { &stats->normal, &stats->huge, &stats->giant };
  int64_t t_alloc = 0, t_freed = 0, t_peak = 0;
  for (int i = 0; i < 3; i++) {
    t_alloc += mi_relaxed((_Atomic(int64_t)*)&parts[i]->allocated);
    t_freed += mi_relaxed((_Atomic(int64_t)*)&parts[i]->freed);
    t_peak  += mi_relaxed((_Atomic(int64_t)*)&parts[i]->peak);
  }
  mi_atomic_store_relaxed(&total.allocated, t_alloc);
  mi_atomic_store_relaxed(&total.freed, t_freed);
  mi_atomic_store_relaxed(&total.peak, t_peak);
  mi_stat_print(p, &total, "total", 1, -1);
  char mline[128];
  snprintf(mline, sizeof(mline), "malloc requested: ");
  mi_print_amount(mline, sizeof(mline), mi_relaxed(&stats->malloc.allocated), 1);
  snprintf(mline + strlen(mline), sizeof(mline) - strlen(mline), "\n\n");
  mi_print_line(p, mline);
  #endif
  for (size_t i = 0; i < MI_STAT_ROWS; i++) {
    const mi_stat_row_t* row = &mi_stat_rows[i];
    const void* stat = (const uint8_t*)stats + row->internal;
    if (row->label == NULL) continue;
    switch (row->kind) {
      case MI_ROW_BYTES:   mi_stat_print(p, (const mi_stat_count_t*)stat, row->label, 1, -1); break;
      case MI_ROW_COUNT:   mi_stat_print(p, (const mi_stat_count_t*)stat, row->label, -1, -1); break;
      case MI_ROW_EVENTS:  mi_stat_counter_print(p, (const mi_stat_counter_t*)stat, row->label); break;
      case MI_ROW_AVERAGE: mi_stat_counter_print_avg(p, (const mi_stat_counter_t*)stat, row->label); break;
    }
  }
  char line[256];
  snprintf(line, sizeof(line), "%10s: %7zu\n", "numa nodes", _mi_os_numa_node_count());
  mi_print_line(p, line);
  size_t elapsed, user_time, sys_time, current_rss, peak_rss, current_commit, peak_commit, page_faults;
  mi_process_info(&elapsed, &user_time, &sys_time, &current_rss, &peak_rss, &current_commit, &peak_commit, &page_faults);
  snprintf(line, sizeof(line), "%10s: %7zu.%03zu s\n", "elapsed", elapsed / 1000, elapsed % 1000);
  mi_print_line(p, line);
  char rss[32], commit[32];
  mi_format_amount(rss, sizeof(rss), (int64_t)peak_rss, 1);
  mi_format_amount(commit, sizeof(commit), (int64_t)peak_commit, 1);
  snprintf(line, sizeof(line), "%10s: user: %zu.%03zu s, system: %zu.%03zu s, faults: %zu, rss: %s, commit: %s\n",
           "process", user_time / 1000, user_time % 1000, sys_time / 1000, sys_time % 1000, page_faults, rss, commit);
  mi_print_line(p, line);
}

void mi_stats_print_out(mi_output_fun* out, void* arg) mi_attr_noexcept {
  mi_stats_merge();
  mi_printer_t p = { out, arg };
  mi_stats_print_main(&p, &_mi_stats_main);
}

void mi_stats_print(void* out) mi_attr_noexcept {
  // 1.6 compatibility: NULL, stdout and stderr mean the default output;
  // anything else is taken as an output function
  mi_stats_print_out((mi_output_fun*)out, NULL);
}

void mi_thread_stats_print_out(mi_output_fun* out, void* arg) mi_attr_noexcept {
  mi_thread_init();   // a thread that never allocated prints zeros
  mi_stats_t* stats = mi_stats_get_default();
  if (stats == NULL) return;
  mi_printer_t p = { out, arg };
  mi_stats_print_main(&p, stats);
}

// ---------------------------------------------------------------------------
// Statistics as data: mi_stats_get fills a snapshot from the rows; the JSON
// is written from a snapshot, through a sink (a buffer, the output channel,
// or a file), a piece at a time with no length limit, without allocating
// from the heap (mi_stats_get_json with no buffer: the string it returns).
// ---------------------------------------------------------------------------

static void mi_amount_of(mi_stat_amount_t* to, const mi_stat_count_t* from) {
  to->current = mi_relaxed((_Atomic(int64_t)*)&from->current);
  to->peak = mi_relaxed((_Atomic(int64_t)*)&from->peak);
  to->allocated = mi_relaxed((_Atomic(int64_t)*)&from->allocated);
  to->freed = mi_relaxed((_Atomic(int64_t)*)&from->freed);
}

static void mi_stats_snapshot(mi_stats_snapshot_t* st) {
  mi_stats_merge();
  memset(st, 0, sizeof(*st));
  st->version = MI_STATS_VERSION;
  st->size = sizeof(*st);
  for (size_t i = 0; i < MI_STAT_ROWS; i++) {
    const mi_stat_row_t* row = &mi_stat_rows[i];
    const void* from = (const uint8_t*)&_mi_stats_main + row->internal;
    void* to = (uint8_t*)st + row->snapshot;
    if (row->kind == MI_ROW_BYTES || row->kind == MI_ROW_COUNT) {
      mi_amount_of((mi_stat_amount_t*)to, (const mi_stat_count_t*)from);
    }
    else {
      const mi_stat_counter_t* c = (const mi_stat_counter_t*)from;
      ((mi_stat_sum_t*)to)->total = mi_relaxed((_Atomic(int64_t)*)&c->total);
      ((mi_stat_sum_t*)to)->count = mi_relaxed((_Atomic(int64_t)*)&c->count);
    }
  }
  st->per_allocation = (MI_STAT > 1);
  for (size_t i = 0; i < MI_STATS_BINS; i++) {
    mi_amount_of(&st->bins[i], &_mi_stats_main.normal_bins[i]);
    st->bin_block_size[i] = (i < MI_BIN_HUGE ? _mi_bin_size((uint8_t)i) : 0);
  }
  mi_process_info(&st->elapsed_msecs, &st->user_msecs, &st->system_msecs, &st->current_rss, &st->peak_rss,
                  &st->current_commit, &st->peak_commit, &st->page_faults);
  st->numa_nodes = _mi_os_numa_node_count();
  const long sample = mi_option_get(mi_option_prof_sample);
  st->prof_sample = (size_t)(sample > 0 ? sample : 0);
  st->prof_live_samples = _mi_prof_live_samples();
}

void mi_stats_get(size_t stats_size, mi_stats_snapshot_t* stats) mi_attr_noexcept {
  if (stats == NULL || stats_size == 0) return;
  mi_stats_snapshot_t st;
  mi_stats_snapshot(&st);
  // a caller built against another version gets the fields both know
  st.size = (stats_size < sizeof(st) ? stats_size : sizeof(st));
  memcpy(stats, &st, st.size);
}

typedef struct mi_json_s {
  void (*put)(struct mi_json_s* j, const char* s, size_t n);
  char*  buf;       // the buffer sink: where to copy, and its size
  size_t size;
  size_t len;       // bytes produced so far (also beyond `size`)
  mi_output_fun* out;   // the output sink
  void*  arg;
  char   chunk[512];    // pending output (output sink)
  size_t chunk_len;
} mi_json_t;

static void mi_json_put_buffer(mi_json_t* j, const char* s, size_t n) {
  if (j->len < j->size) {
    const size_t room = j->size - j->len;
    memcpy(j->buf + j->len, s, (n < room ? n : room));
  }
  j->len += n;
}

static void mi_json_flush_out(mi_json_t* j) {
  if (j->chunk_len == 0) return;
  j->chunk[j->chunk_len] = 0;
  _mi_fputs(j->out, j->arg, NULL, j->chunk);
  j->chunk_len = 0;
}

static void mi_json_put_out(mi_json_t* j, const char* s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (j->chunk_len + 1 >= sizeof(j->chunk)) mi_json_flush_out(j);
    j->chunk[j->chunk_len++] = s[i];
  }
  j->len += n;
}

// Formatted output straight into the sink, with no line buffer: literal text
// and %s go through as they are, and each number is converted on its own into
// a buffer that holds any of them (a 64-bit value is at most 20 characters).
// Only the conversions below; they mean what they mean for printf, and the
// compiler checks them against the arguments. (The lines were formatted into
// a 256-byte buffer and cut: the "process" line, 193 characters besides its
// ten numbers, lost its closing `},` in a process with GiBs resident and a
// large commit, and the document was no longer JSON.)
static void mi_json_printf(mi_json_t* j, const char* fmt, ...) mi_attr_printf(2, 3);
static void mi_json_printf(mi_json_t* j, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  const char* text = fmt;   // literal text not yet written
  const char* s = fmt;
  while (*s != 0) {
    if (*s != '%') { s++; continue; }
    j->put(j, text, (size_t)(s - text));
    s++;
    char num[24];
    int n = 0;
    if (s[0] == 's') {
      const char* str = va_arg(args, const char*);
      j->put(j, str, strlen(str));
      s += 1;
    }
    else if (s[0] == 'd') { n = snprintf(num, sizeof(num), "%d", va_arg(args, int)); s += 1; }
    else if (s[0] == 'l' && s[1] == 'd') { n = snprintf(num, sizeof(num), "%ld", va_arg(args, long)); s += 2; }
    else if (s[0] == 'l' && s[1] == 'l' && s[2] == 'd') { n = snprintf(num, sizeof(num), "%lld", va_arg(args, long long)); s += 3; }
    else if (s[0] == 'z' && s[1] == 'u') { n = snprintf(num, sizeof(num), "%zu", va_arg(args, size_t)); s += 2; }
    else { mi_assert_internal(false); break; }   // a conversion this writer does not know
    if (n > 0) j->put(j, num, (size_t)n);
    text = s;
  }
  j->put(j, text, strlen(text));
  va_end(args);
}

static void mi_json_amount(mi_json_t* j, const char* name, const char* unit, const mi_stat_amount_t* a, bool last) {
  mi_json_printf(j, "  \"%s\": {\"unit\": \"%s\", \"current\": %lld, \"peak\": %lld, \"allocated\": %lld, \"freed\": %lld}%s\n",
                 name, unit, a->current, a->peak, a->allocated, a->freed, (last ? "" : ","));
}

// The JSON object of a snapshot (docs/observability.md describes every field).
static void mi_json_write(mi_json_t* j, const mi_stats_snapshot_t* st) {
  mi_json_printf(j, "{\n  \"version\": %d,\n  \"mimalloc_version\": %d,\n  \"per_allocation\": %s,\n",
                 st->version, MI_MALLOC_VERSION, (st->per_allocation ? "true" : "false"));
  for (size_t i = 0; i < MI_STAT_ROWS; i++) {
    const mi_stat_row_t* row = &mi_stat_rows[i];
    const void* field = (const uint8_t*)st + row->snapshot;
    if (row->kind == MI_ROW_BYTES || row->kind == MI_ROW_COUNT) {
      mi_json_amount(j, row->name, (row->kind == MI_ROW_BYTES ? "bytes" : "count"), (const mi_stat_amount_t*)field, false);
    }
    else {
      const mi_stat_sum_t* sum = (const mi_stat_sum_t*)field;
      mi_json_printf(j, "  \"%s\": {\"unit\": \"count\", \"total\": %lld, \"count\": %lld},\n", row->name, sum->total, sum->count);
    }
  }
  mi_json_printf(j, "  \"bins\": [");
  size_t shown = 0;
  for (size_t i = 0; i < MI_STATS_BINS && st->per_allocation; i++) {
    const mi_stat_amount_t* b = &st->bins[i];
    if (b->allocated == 0) continue;
    mi_json_printf(j, "%s\n    {\"bin\": %zu, \"block_size\": %zu, \"unit\": \"count\", \"current\": %lld, \"peak\": %lld, \"allocated\": %lld, \"freed\": %lld}",
                   (shown++ == 0 ? "" : ","), i, st->bin_block_size[i], b->current, b->peak, b->allocated, b->freed);
  }
  mi_json_printf(j, "%s],\n", (shown > 0 ? "\n  " : ""));
  mi_json_printf(j, "  \"process\": {\"pid\": %ld, \"elapsed_ms\": %zu, \"user_ms\": %zu, \"system_ms\": %zu, \"current_rss_bytes\": %zu, "
                 "\"peak_rss_bytes\": %zu, \"current_commit_bytes\": %zu, \"peak_commit_bytes\": %zu, \"page_faults\": %zu, \"numa_nodes\": %zu},\n",
                 _mi_prim_process_id(), st->elapsed_msecs, st->user_msecs, st->system_msecs, st->current_rss, st->peak_rss,
                 st->current_commit, st->peak_commit, st->page_faults, st->numa_nodes);
  mi_json_printf(j, "  \"prof\": {\"sample_bytes\": %zu, \"live_samples\": %zu}\n}\n", st->prof_sample, st->prof_live_samples);
}

// The JSON of a snapshot into `buf`, as much of it as fits in `size` bytes
// with a terminating zero; returns its whole length (as snprintf; `buf` may
// be NULL with `size` 0 to measure).
size_t _mi_stats_json_of(const mi_stats_snapshot_t* st, char* buf, size_t size) {
  mi_json_t j;
  memset(&j, 0, sizeof(j));
  j.put = &mi_json_put_buffer;
  j.buf = buf;
  j.size = (size > 0 ? size - 1 : 0);
  mi_json_write(&j, st);
  if (size > 0) buf[j.len < size ? j.len : size - 1] = 0;
  return j.len;
}

char* mi_stats_get_json(size_t buf_size, char* buf) mi_attr_noexcept {
  mi_stats_snapshot_t st;
  mi_stats_snapshot(&st);
  const size_t len = _mi_stats_json_of(&st, NULL, 0);
  if (buf == NULL) {
    buf_size = len + 1;   // a new block of the right size
    buf = (char*)mi_malloc(buf_size);
    if (buf == NULL) return NULL;
  }
  else if (buf_size <= len) {
    if (buf_size > 0) buf[0] = 0;
    errno = ERANGE;
    return NULL;
  }
  _mi_stats_json_of(&st, buf, buf_size);
  return buf;
}

static void mi_stats_print_json(mi_output_fun* out, void* arg) {
  mi_stats_snapshot_t st;
  mi_stats_snapshot(&st);
  mi_json_t j;
  memset(&j, 0, sizeof(j));
  j.put = &mi_json_put_out;
  j.out = out;
  j.arg = arg;
  mi_json_write(&j, &st);
  mi_json_flush_out(&j);
}

// MIMALLOC_STATS_FILE with MIMALLOC_STATS_INTERVAL: one JSON object per line
// (JSON Lines), appended by a thread started at load time that sleeps the
// interval between snapshots, and once at exit. Where the thread cannot run
// (it could not be started, or in a forked child, which has no copy of it),
// whichever thread takes a fresh page after the interval writes it.
static _Atomic(int64_t) mi_stats_next_write;   // when the next snapshot is due (ms)

// The path (with %p expanded) and the line go into one block from the OS,
// each measured first: neither has a length limit (a fixed 1100-byte path
// buffer made a long path with several %p write nothing, silently).
static void mi_stats_write_file(void) {
  const size_t path_len = _mi_option_path(mi_option_stats_file, NULL, 0);
  if (path_len == 0) return;
  mi_stats_snapshot_t st;
  mi_stats_snapshot(&st);
  const size_t json_len = _mi_stats_json_of(&st, NULL, 0);
  const size_t size = (path_len + 1) + (json_len + 1);
  char* path = (char*)_mi_os_alloc(size);
  if (path == NULL) return;
  char* buf = path + path_len + 1;
  _mi_option_path(mi_option_stats_file, path, path_len + 1);
  _mi_stats_json_of(&st, buf, json_len + 1);
  size_t n = 0;   // one line: drop the newlines
  for (size_t i = 0; i < json_len; i++) {
    if (buf[i] != '\n') buf[n++] = buf[i];
  }
  buf[n++] = '\n';
  const int err = _mi_prim_file_write(path, buf, n, true);
  if (err != 0) {
    _mi_warning_message("cannot append statistics to \"%s\" (error %d); no more snapshots are written\n", path, err);
    mi_atomic_store_relaxed(&mi_stats_next_write, INT64_MAX);
  }
  _mi_os_free(path, size);
}

static bool mi_stats_file_wanted(void) {
  return (mi_option_get(mi_option_stats_interval) > 0 && _mi_option_text(mi_option_stats_file)[0] != 0);
}

void _mi_stats_interval_tick(void) {
  if (mi_likely(!mi_stats_file_wanted())) return;
  const int64_t now = _mi_prim_clock_now();
  int64_t due = mi_atomic_load_relaxed(&mi_stats_next_write);
  if (now < due) return;
  const int64_t next = now + mi_option_get(mi_option_stats_interval);
  if (!mi_atomic_cas_strong_acq_rel(&mi_stats_next_write, &due, next)) return;   // another thread writes it
  mi_stats_write_file();
}

static void mi_stats_writer(void* arg) {
  (void)arg;
  for (;;) {
    _mi_stats_interval_tick();
    const int64_t wait = mi_atomic_load_relaxed(&mi_stats_next_write) - _mi_prim_clock_now();
    if (wait > 0) _mi_prim_sleep(wait < 1000 * 1000 ? wait : 1000 * 1000);
  }
}

void _mi_stats_process_init(void) {
  if (!mi_stats_file_wanted()) return;
  const int err = _mi_prim_thread_start(&mi_stats_writer, NULL);
  if (err != 0) _mi_warning_message("cannot start the statistics writer thread (error %d); snapshots are written from allocations\n", err);
}

void _mi_stats_print_at_exit(void) {
  int64_t due = mi_atomic_load_relaxed(&mi_stats_next_write);
  if (mi_stats_file_wanted() && due != INT64_MAX && mi_atomic_cas_strong_acq_rel(&mi_stats_next_write, &due, INT64_MAX)) {
    mi_stats_write_file();   // the last snapshot (and the writer thread writes no more)
  }
  if (mi_option_get(mi_option_show_stats) == MI_SHOW_STATS_JSON) {
    mi_stats_print_json(NULL, NULL);
  }
  else if (mi_option_is_enabled(mi_option_show_stats) || mi_option_is_enabled(mi_option_verbose)) {
    mi_stats_print_out(NULL, NULL);
  }
}

// Bytes given back to the OS so far, purged or unmapped (the `reset` row's
// total, and the `reserved` row's freed): grows whenever memory goes back
// (malloc_trim's answer).
int64_t _mi_stats_released(void) {
  return mi_relaxed(&_mi_stats_main.reset.allocated) + mi_relaxed(&_mi_stats_main.reserved.freed);
}

// ---------------------------------------------------------------------------
// Reset
// ---------------------------------------------------------------------------

static int64_t mi_clock_start_ms;

int64_t _mi_clock_start(void) {
  if (mi_clock_start_ms == 0) mi_clock_start_ms = _mi_prim_clock_now();
  return mi_clock_start_ms;
}

static void mi_stat_count_reset(mi_stat_count_t* stat) {
  // keep `current`: it describes what is live, which a reset does not change
  const int64_t current = mi_relaxed(&stat->current);
  mi_atomic_store_relaxed(&stat->allocated, (current > 0 ? current : 0));
  mi_atomic_store_relaxed(&stat->freed, (current < 0 ? -current : 0));
  mi_atomic_store_relaxed(&stat->peak, (current > 0 ? current : 0));
}

static void mi_stats_reset_block(mi_stats_t* stats) {
  mi_stat_count_t* counts = (mi_stat_count_t*)stats;
  const size_t ncount = offsetof(mi_stats_t, pages_extended) / sizeof(mi_stat_count_t);
  for (size_t i = 0; i < ncount; i++) mi_stat_count_reset(&counts[i]);
  mi_stat_counter_t* counters = &stats->pages_extended;
  const size_t ncounter = (offsetof(mi_stats_t, normal_bins) - offsetof(mi_stats_t, pages_extended)) / sizeof(mi_stat_counter_t);
  for (size_t i = 0; i < ncounter; i++) {
    mi_atomic_store_relaxed(&counters[i].total, 0);
    mi_atomic_store_relaxed(&counters[i].count, 0);
  }
  for (size_t i = 0; i <= MI_BIN_HUGE; i++) mi_stat_count_reset(&stats->normal_bins[i]);
}

void mi_stats_reset(void) mi_attr_noexcept {
  mi_stats_t* stats = mi_stats_get_default();
  if (stats != NULL) {
    mi_stats_merge_from(stats);
    mi_stats_reset_block(stats);
  }
  mi_stats_reset_block(&_mi_stats_main);
  _mi_clock_start();   // the elapsed clock starts on first use only
}

// ---------------------------------------------------------------------------
// Process information
// ---------------------------------------------------------------------------

void mi_process_info(size_t* elapsed_msecs, size_t* user_msecs, size_t* system_msecs,
                     size_t* current_rss, size_t* peak_rss,
                     size_t* current_commit, size_t* peak_commit, size_t* page_faults) mi_attr_noexcept {
  const int64_t elapsed = _mi_prim_clock_now() - _mi_clock_start();
  mi_prim_process_info_t info;
  _mi_prim_process_info(&info);
  const int64_t committed = mi_relaxed(&_mi_stats_main.committed.current);
  const int64_t committed_peak = mi_relaxed(&_mi_stats_main.committed.peak);
  if (elapsed_msecs != NULL) *elapsed_msecs = (size_t)(elapsed < 0 ? 0 : elapsed);
  if (user_msecs != NULL) *user_msecs = info.user_msecs;
  if (system_msecs != NULL) *system_msecs = info.system_msecs;
  if (peak_rss != NULL) *peak_rss = info.peak_rss;
  if (page_faults != NULL) *page_faults = info.page_faults;
  if (current_rss != NULL) *current_rss = info.current_rss;
  if (current_commit != NULL) *current_commit = (size_t)(committed < 0 ? 0 : committed);
  if (peak_commit != NULL) *peak_commit = (size_t)(committed_peak < 0 ? 0 : committed_peak);
}
