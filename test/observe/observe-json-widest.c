/* ----------------------------------------------------------------------------
  observe-json-widest.c -- the statistics JSON of a snapshot whose every
  figure is as wide as its type allows, for test/observe/check_observe.py
  (mode `widest`), which parses it with Python's json module and checks each
  figure.

  No process can show such figures (the "process" line of one that ran for
  months with GiBs resident and TiBs committed is already longer than the
  256 bytes the writer once formatted each line into, and lost its closing
  `},`), so the snapshot is made up and given to the writer every JSON output
  shares (_mi_stats_json_of: mi_stats_get_json, MIMALLOC_SHOW_STATS=json and
  MIMALLOC_STATS_FILE differ only in where the text goes). Every line is then
  at its longest: signed figures at LLONG_MIN and LLONG_MAX, sizes at
  SIZE_MAX, and every size class listed. Compiled with the library's defines
  against its internal header, linked with the static library.
-----------------------------------------------------------------------------*/
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mimalloc-internal.h"

static void widest_amount(mi_stat_amount_t* a) {
  a->current = LLONG_MIN;
  a->peak = LLONG_MAX;
  a->allocated = LLONG_MIN + 1;
  a->freed = LLONG_MAX - 1;
}

static void widest_sum(mi_stat_sum_t* s) {
  s->total = LLONG_MIN;
  s->count = LLONG_MAX;
}

int main(void) {
  static mi_stats_snapshot_t st;
  st.version = MI_STATS_VERSION;
  st.size = sizeof(st);
  mi_stat_amount_t* const amounts[] = {
    &st.reserved, &st.committed, &st.reset, &st.touched, &st.segments, &st.segments_abandoned, &st.segments_cached,
    &st.pages, &st.pages_abandoned, &st.threads, &st.huge, &st.giant, &st.normal, &st.malloc,
  };
  for (size_t i = 0; i < sizeof(amounts) / sizeof(amounts[0]); i++) widest_amount(amounts[i]);
  mi_stat_sum_t* const sums[] = {
    &st.pages_extended, &st.pages_retired, &st.mmap_calls, &st.commit_calls, &st.searches,
    &st.normal_count, &st.huge_count, &st.giant_count,
  };
  for (size_t i = 0; i < sizeof(sums) / sizeof(sums[0]); i++) widest_sum(sums[i]);
  st.per_allocation = true;   // every size class is listed
  for (size_t i = 0; i < MI_STATS_BINS; i++) {
    widest_amount(&st.bins[i]);
    st.bin_block_size[i] = SIZE_MAX;
  }
  size_t* const sizes[] = {
    &st.elapsed_msecs, &st.user_msecs, &st.system_msecs, &st.current_rss, &st.peak_rss, &st.current_commit,
    &st.peak_commit, &st.page_faults, &st.numa_nodes, &st.prof_sample, &st.prof_live_samples,
  };
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) *sizes[i] = SIZE_MAX;

  // measured, then written into exactly that much room (and, one byte short,
  // cut but terminated)
  const size_t len = _mi_stats_json_of(&st, NULL, 0);
  char* json = (char*)malloc(len + 1);
  if (json == NULL) { perror("malloc"); return 1; }
  memset(json, 'x', len + 1);
  if (_mi_stats_json_of(&st, json, len + 1) != len || strlen(json) != len) {
    fprintf(stderr, "the JSON is not the length measured (%zu)\n", len);
    return 1;
  }
  char* cut = (char*)malloc(len);
  if (cut == NULL) { perror("malloc"); return 1; }
  if (_mi_stats_json_of(&st, cut, len) != len || strlen(cut) != len - 1 || memcmp(cut, json, len - 1) != 0) {
    fprintf(stderr, "one byte short: not the measured length, or not the text cut and terminated\n");
    return 1;
  }
  fputs(json, stdout);
  free(cut);
  free(json);
  return 0;
}
