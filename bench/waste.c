/* ----------------------------------------------------------------------------
  waste.c -- internal fragmentation of the size classes, measured.

  For every request size from 1 byte to 2 MiB (the largest non-huge size) it
  allocates nothing: it asks `mi_good_size` for the block that would serve the
  request and measures the waste (block - request) relative to the block.
  Prints the worst case and the average, uniformly over all sizes and over a
  log-uniform distribution (each power-of-two range equally likely), which is
  closer to real programs. Then it checks a sample against real allocations.
-----------------------------------------------------------------------------*/
#include <mimalloc.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
  const size_t max = 2 * 1024 * 1024;
  double worst = 0, worst_large = 0, sum = 0, log_sum = 0, log_weight = 0;
  size_t worst_size = 0, worst_large_size = 0;
  for (size_t n = 1; n <= max; n++) {
    const size_t block = mi_good_size(n);
    if (block < n) { fprintf(stderr, "good size %zu < request %zu\n", block, n); return 1; }
    const double waste = (double)(block - n) / (double)block;
    if (waste > worst && n > 8) { worst = waste; worst_size = n; }
    if (waste > worst_large && n > 64) { worst_large = waste; worst_large_size = n; }
    sum += waste;
    const double w = 1.0 / (double)n;   // log-uniform: density proportional to 1/n
    log_sum += w * waste;
    log_weight += w;
  }
  // real allocations must agree with mi_good_size
  for (size_t n = 1; n <= max; n = n * 5 / 4 + 1) {
    void* p = mi_malloc(n);
    if (p == NULL || mi_usable_size(p) != mi_good_size(n)) {
      fprintf(stderr, "usable size of %zu is %zu, good size %zu\n", n, mi_usable_size(p), mi_good_size(n));
      return 1;
    }
    mi_free(p);
  }
  printf("sizes 9..%zu bytes: worst waste %.1f%% of the block (request %zu -> %zu)\n",
         max, 100.0 * worst, worst_size, mi_good_size(worst_size));
  printf("sizes 65..%zu bytes: worst waste %.1f%% of the block (request %zu -> %zu)\n",
         max, 100.0 * worst_large, worst_large_size, mi_good_size(worst_large_size));
  printf("sizes 1..%zu bytes: average waste %.1f%% (every size equally likely), %.1f%% (log-uniform)\n",
         max, 100.0 * sum / (double)max, 100.0 * log_sum / log_weight);
  return 0;
}
