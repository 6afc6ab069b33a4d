/* ----------------------------------------------------------------------------
  observe-sites.c -- a program whose heap is known, for the observability
  tests (test/observe/check_observe.py runs it).

  observe-sites prof FILE   allocates from five call sites with known
                            amounts, then writes the heap profile to FILE
                            with mi_prof_dump (and exits holding the memory):
     site_small   786432 blocks of 64 bytes, live        (48 MiB)
     site_big       4096 blocks of 4096 bytes, live      (16 MiB)
     site_huge         4 blocks of 8 MiB, live           (32 MiB)
     site_freed    32768 blocks of 1024 bytes, freed     (32 MiB allocated)
     site_thread   32768 blocks of 256 bytes allocated by another thread,
                   freed by the main thread              (8 MiB allocated)
  observe-sites stats       prints mi_stats_get_json, then the same figures
                            from mi_stats_get as "name current peak allocated
                            freed" lines (nothing is allocated in between)
  observe-sites churn MS    allocates and frees for MS milliseconds
  observe-sites sleep MS    sleeps MS milliseconds (allocates nothing)
  observe-sites large MIB UNTOUCHED
                            a process with large figures: MIB MiB allocated
                            and written (resident), and a block of UNTOUCHED
                            bytes never touched (committed only; 0: none);
                            prints mi_stats_get_json (the string it
                            allocates) and exits holding both blocks
-----------------------------------------------------------------------------*/
#include <mimalloc.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SMALL_COUNT   786432
#define BIG_COUNT     4096
#define HUGE_COUNT    4
#define FREED_COUNT   32768
#define THREAD_COUNT  32768

static void* small_blocks[SMALL_COUNT];
static void* big_blocks[BIG_COUNT];
static void* huge_blocks[HUGE_COUNT];
static void* freed_blocks[FREED_COUNT];
static void* thread_blocks[THREAD_COUNT];

// every site touches its blocks (so nothing is optimised away)
__attribute__((noinline)) void site_small(void) {
  for (size_t i = 0; i < SMALL_COUNT; i++) { small_blocks[i] = malloc(64); memset(small_blocks[i], 1, 8); }
}
__attribute__((noinline)) void site_big(void) {
  for (size_t i = 0; i < BIG_COUNT; i++) { big_blocks[i] = malloc(4096); memset(big_blocks[i], 2, 8); }
}
__attribute__((noinline)) void site_huge(void) {
  for (size_t i = 0; i < HUGE_COUNT; i++) { huge_blocks[i] = malloc(8 << 20); memset(huge_blocks[i], 3, 8); }
}
__attribute__((noinline)) void site_freed(void) {
  for (size_t i = 0; i < FREED_COUNT; i++) { freed_blocks[i] = malloc(1024); memset(freed_blocks[i], 4, 8); }
}
__attribute__((noinline)) void* site_thread(void* arg) {
  (void)arg;
  for (size_t i = 0; i < THREAD_COUNT; i++) { thread_blocks[i] = malloc(256); memset(thread_blocks[i], 5, 8); }
  return NULL;
}

static int run_prof(const char* path) {
  site_small();
  site_big();
  site_huge();
  site_freed();
  pthread_t t;
  if (pthread_create(&t, NULL, &site_thread, NULL) != 0) return 2;
  pthread_join(t, NULL);
  for (size_t i = 0; i < FREED_COUNT; i++) free(freed_blocks[i]);
  for (size_t i = 0; i < THREAD_COUNT; i++) free(thread_blocks[i]);   // frees from another thread than the allocating one
  const int err = mi_prof_dump(path);
  if (err != 0) { fprintf(stderr, "mi_prof_dump failed: %s\n", strerror(err)); return 1; }
  return 0;
}

static void print_amount(const char* name, const mi_stat_amount_t* a) {
  printf("%s %lld %lld %lld %lld\n", name, a->current, a->peak, a->allocated, a->freed);
}

static void* volatile keep;

static int run_stats(void) {
  keep = malloc(100000);   // something live (a volatile: the compiler cannot drop it)
  static char json[1 << 16];
  static mi_stats_snapshot_t st;
  mi_stats_get(sizeof(st), &st);
  if (mi_stats_get_json(sizeof(json), json) == NULL) { perror("mi_stats_get_json"); return 1; }
  fputs(json, stdout);
  printf("--\n");
  print_amount("reserved", &st.reserved);
  print_amount("committed", &st.committed);
  print_amount("segments", &st.segments);
  print_amount("pages", &st.pages);
  print_amount("huge", &st.huge);
  printf("version %d\n", st.version);
  free(keep);
  return 0;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000.0 + ts.tv_nsec / 1.0e6;
}

static int run_churn(double ms) {
  static void* live[4096];
  const double end = now_ms() + ms;
  for (size_t round = 0; now_ms() < end; round++) {
    for (size_t i = 0; i < 4096; i++) {
      free(live[i]);
      live[i] = malloc(16 + (i * 7 + round) % 2000);
    }
  }
  for (size_t i = 0; i < 4096; i++) free(live[i]);
  return 0;
}

static int run_sleep(double ms) {
  struct timespec ts = { (time_t)(ms / 1000), (long)((ms - 1000 * (time_t)(ms / 1000)) * 1e6) };
  while (nanosleep(&ts, &ts) != 0) { }
  return 0;
}

static void* volatile large_blocks[2];

static int run_large(size_t mib, size_t untouched) {
  large_blocks[0] = malloc(mib << 20);
  if (large_blocks[0] == NULL) { perror("malloc (resident)"); return 1; }
  memset(large_blocks[0], 7, mib << 20);
  if (untouched > 0) {
    large_blocks[1] = malloc(untouched);
    if (large_blocks[1] == NULL) { perror("malloc (untouched)"); return 1; }
  }
  char* json = mi_stats_get_json(0, NULL);
  if (json == NULL) { perror("mi_stats_get_json"); return 1; }
  fputs(json, stdout);
  mi_free(json);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "prof") == 0) return run_prof(argv[2]);
  if (argc == 2 && strcmp(argv[1], "stats") == 0) return run_stats();
  if (argc == 3 && strcmp(argv[1], "churn") == 0) return run_churn(atof(argv[2]));
  if (argc == 3 && strcmp(argv[1], "sleep") == 0) return run_sleep(atof(argv[2]));
  if (argc == 4 && strcmp(argv[1], "large") == 0) return run_large(strtoull(argv[2], NULL, 10), strtoull(argv[3], NULL, 10));
  fprintf(stderr, "usage: observe-sites prof FILE | stats | churn MS | sleep MS | large MIB UNTOUCHED\n");
  return 2;
}
