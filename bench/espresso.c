/* ----------------------------------------------------------------------------
  espresso.c -- a logic-minimisation kernel in one thread (espresso kind).

  The classic espresso benchmark minimises Boolean functions held as covers:
  growable arrays of cubes, each cube a bit vector with two bits per variable
  (01 = the variable is 0, 10 = it is 1, 11 = either). This program runs the
  same kind of set algebra on random covers:
  - merge: every pair of cubes at distance one yields its consensus cube
    (a new allocation), kept unless an existing cube contains it;
  - absorb: cubes contained in another cube are freed;
  - cofactor: for a random variable, the cofactor cover is built and dropped
    (a burst of short-lived cubes);
  until a pass adds nothing. The covers are pointer arrays grown by realloc,
  cubes are 4 to 64 bytes (their width depends on the problem), so the mix is
  small blocks of a few sizes with short and medium lifetimes, plus reallocs.

  usage: espresso [problems=300]
  prints: problems per second, the total final cubes and a check value (the
  same under every allocator).
-----------------------------------------------------------------------------*/
#include "bench.h"

typedef uint32_t cube_word_t;

typedef struct cover_s {
  size_t count;          // cubes in use
  size_t capacity;       // slots in `cubes`
  cube_word_t** cubes;   // each cube is its own allocation of `words` words
} cover_t;

static size_t words;     // words per cube of the current problem
static size_t nvars;     // variables of the current problem

/* ---------------------------------------------------------------------------
  Cubes
---------------------------------------------------------------------------*/

static cube_word_t* cube_new(void) {
  return (cube_word_t*)bench_malloc(words * sizeof(cube_word_t));
}

static cube_word_t* cube_dup(const cube_word_t* c) {
  cube_word_t* d = cube_new();
  memcpy(d, c, words * sizeof(cube_word_t));
  return d;
}

// 0, 1 or 2 for "two or more": the variables where the cubes share no value
static size_t cube_distance(const cube_word_t* a, const cube_word_t* b) {
  size_t dist = 0;
  for (size_t i = 0; i < words; i++) {
    cube_word_t x = a[i] & b[i];
    cube_word_t empty = ~(x | (x >> 1)) & 0x55555555u;   // both bits of a pair clear
    if (i == words - 1 && (nvars * 2) % 32 != 0) empty &= (1u << ((nvars * 2) % 32)) - 1;
    if (empty == 0) continue;
    if (dist > 0 || (empty & (empty - 1)) != 0) return 2;
    dist = 1;
  }
  return dist;
}

// a is contained in b
static int cube_within(const cube_word_t* a, const cube_word_t* b) {
  for (size_t i = 0; i < words; i++) {
    if ((a[i] & b[i]) != a[i]) return 0;
  }
  return 1;
}

// the consensus of two cubes at distance one: the conflicting variable
// becomes "either", every other variable the intersection
static cube_word_t* cube_consensus(const cube_word_t* a, const cube_word_t* b) {
  cube_word_t* c = cube_new();
  for (size_t i = 0; i < words; i++) {
    cube_word_t x = a[i] & b[i];
    cube_word_t empty = ~(x | (x >> 1)) & 0x55555555u;
    c[i] = x | empty | (empty << 1);
  }
  return c;
}

static size_t cube_free_vars(const cube_word_t* c) {
  size_t n = 0;
  for (size_t i = 0; i < words; i++) n += (size_t)__builtin_popcount(c[i] & (c[i] >> 1) & 0x55555555u);
  return n;
}

/* ---------------------------------------------------------------------------
  Covers
---------------------------------------------------------------------------*/

static void cover_add(cover_t* f, cube_word_t* c) {
  if (f->count == f->capacity) {
    f->capacity = (f->capacity == 0 ? 8 : f->capacity * 2);
    f->cubes = (cube_word_t**)bench_realloc(f->cubes, f->capacity * sizeof(cube_word_t*));
  }
  f->cubes[f->count++] = c;
}

static void cover_free(cover_t* f) {
  for (size_t i = 0; i < f->count; i++) free(f->cubes[i]);
  free(f->cubes);
  f->cubes = NULL;
  f->count = f->capacity = 0;
}

typedef struct keyed_s {
  size_t free_vars;      // sort key: larger cubes first
  cube_word_t* cube;
} keyed_t;

static int by_free_vars(const void* a, const void* b) {
  const keyed_t* x = (const keyed_t*)a;
  const keyed_t* y = (const keyed_t*)b;
  if (x->free_vars != y->free_vars) return (x->free_vars > y->free_vars ? -1 : 1);
  return memcmp(x->cube, y->cube, words * sizeof(cube_word_t));
}

// sort the cover largest cube first (through a temporary keyed array), then
// drop the cubes contained in one of the largest cubes kept so far (a window
// of them, as a heuristic single-cube containment does, to stay linear)
static void cover_absorb(cover_t* f) {
  keyed_t* keyed = (keyed_t*)bench_malloc((f->count + 1) * sizeof(keyed_t));
  for (size_t i = 0; i < f->count; i++) {
    keyed[i].free_vars = cube_free_vars(f->cubes[i]);
    keyed[i].cube = f->cubes[i];
  }
  qsort(keyed, f->count, sizeof(keyed_t), by_free_vars);
  size_t kept = 0;
  for (size_t i = 0; i < f->count; i++) {
    int inside = 0;
    for (size_t j = 0; j < kept && j < 16 && !inside; j++) inside = cube_within(keyed[i].cube, f->cubes[j]);
    if (inside) free(keyed[i].cube);
    else f->cubes[kept++] = keyed[i].cube;
  }
  f->count = kept;
  free(keyed);
}

// the cofactor of f with respect to variable v = value: the cubes that allow
// the value, with v made "either"
static size_t cofactor_size(const cover_t* f, size_t v, unsigned value) {
  cover_t g = { 0, 0, NULL };
  const size_t w = (2 * v) / 32, shift = (2 * v) % 32;
  for (size_t i = 0; i < f->count; i++) {
    if (((f->cubes[i][w] >> shift) & (1u << value)) == 0) continue;
    cube_word_t* c = cube_dup(f->cubes[i]);
    c[w] |= 3u << shift;
    cover_add(&g, c);
  }
  cover_absorb(&g);
  const size_t n = g.count;
  cover_free(&g);
  return n;
}

// one pass: consensus of the distance-one pairs among neighbours in the
// sorted cover (a window, as espresso's heuristics look near), deduplicated through a hash
// set (itself an allocation of a few KiB, regrown as it fills); returns the
// cubes added
static size_t cover_merge(cover_t* f, size_t limit) {
  cover_t g = { 0, 0, NULL };
  size_t slots = 64;
  cube_word_t** set = (cube_word_t**)calloc(slots, sizeof(cube_word_t*));
  if (set == NULL) bench_fail("calloc returned NULL");
  for (size_t i = 0; i < f->count; i++) {
    for (size_t j = i + 1; j < f->count && j <= i + 24 && g.count < limit; j++) {
      if (cube_distance(f->cubes[i], f->cubes[j]) != 1) continue;
      cube_word_t* c = cube_consensus(f->cubes[i], f->cubes[j]);
      if (cube_within(c, f->cubes[i]) || cube_within(c, f->cubes[j])) { free(c); continue; }
      uint64_t h = 0;
      for (size_t w = 0; w < words; w++) h = bench_hash(h, c[w]);
      size_t k = (size_t)h & (slots - 1);
      while (set[k] != NULL && memcmp(set[k], c, words * sizeof(cube_word_t)) != 0) k = (k + 1) & (slots - 1);
      if (set[k] != NULL) { free(c); continue; }
      set[k] = c;
      cover_add(&g, c);
      if (2 * g.count > slots) {   // rehash into twice the slots
        free(set);
        slots *= 2;
        set = (cube_word_t**)calloc(slots, sizeof(cube_word_t*));
        if (set == NULL) bench_fail("calloc returned NULL");
        for (size_t n = 0; n < g.count; n++) {
          uint64_t hn = 0;
          for (size_t w = 0; w < words; w++) hn = bench_hash(hn, g.cubes[n][w]);
          size_t kn = (size_t)hn & (slots - 1);
          while (set[kn] != NULL) kn = (kn + 1) & (slots - 1);
          set[kn] = g.cubes[n];
        }
      }
    }
  }
  free(set);
  const size_t added = g.count;
  // the new cover: the consensus cubes and copies of the old ones, absorbed
  for (size_t i = 0; i < f->count; i++) cover_add(&g, cube_dup(f->cubes[i]));
  cover_free(f);
  cover_absorb(&g);
  *f = g;
  return added;
}

/* ---------------------------------------------------------------------------
  Problems
---------------------------------------------------------------------------*/

static uint64_t solve(bench_rng_t* rng, size_t* final_cubes) {
  nvars = bench_range(rng, 8, 250);
  words = (2 * nvars + 31) / 32;
  // a handful of seed cubes, each perturbed into a cluster of similar cubes
  cover_t f = { 0, 0, NULL };
  const size_t seeds = bench_range(rng, 2, 6), per_seed = bench_range(rng, 10, 40);
  for (size_t s = 0; s < seeds; s++) {
    cube_word_t* seed = cube_new();
    memset(seed, 0, words * sizeof(cube_word_t));
    for (size_t v = 0; v < nvars; v++) {
      const unsigned r = (unsigned)bench_below(rng, 4);
      seed[(2 * v) / 32] |= (r == 0 ? 1u : r == 1 ? 2u : 3u) << ((2 * v) % 32);
    }
    for (size_t k = 0; k < per_seed; k++) {
      cube_word_t* c = cube_dup(seed);
      for (int flips = 0; flips < 3; flips++) {
        const size_t v = bench_below(rng, nvars);
        c[(2 * v) / 32] &= ~(3u << ((2 * v) % 32));
        c[(2 * v) / 32] |= (unsigned)bench_range(rng, 1, 2) << ((2 * v) % 32);
      }
      cover_add(&f, c);
    }
    free(seed);
  }
  cover_absorb(&f);
  size_t cofactors = 0;
  for (int pass = 0; pass < 8; pass++) {
    cofactors += cofactor_size(&f, bench_below(rng, nvars), (unsigned)bench_below(rng, 2));
    if (cover_merge(&f, 400) == 0) break;
  }
  // an order-independent digest of the final cover
  uint64_t digest = cofactors;
  for (size_t i = 0; i < f.count; i++) {
    uint64_t h = 0;
    for (size_t w = 0; w < words; w++) h = bench_hash(h, f.cubes[i][w]);
    digest += h;
  }
  *final_cubes += f.count;
  cover_free(&f);
  return digest;
}

int main(int argc, char** argv) {
  const long problems = bench_arg(argc, argv, 1, 300);
  bench_rng_t rng;
  bench_rng_init(&rng, 7);
  uint64_t check = 0;
  size_t final_cubes = 0;
  const double start = bench_now();
  for (long i = 0; i < problems; i++) check = bench_hash(check, solve(&rng, &final_cubes));
  const double secs = bench_now() - start;
  printf("espresso: %ld problems, %.1f problems/s, cubes=%zu check=%016llx\n", problems,
         (double)problems / secs, final_cubes, (unsigned long long)check);
  return 0;
}
