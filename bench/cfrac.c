/* ----------------------------------------------------------------------------
  cfrac.c -- many small, short-lived allocations in one thread (cfrac kind).

  The classic cfrac benchmark factors a number with the continued-fraction
  method on top of a bignum library that allocates a fresh number for every
  result. This program does the same arithmetic: for each of `numbers` random
  128-bit integers N it expands sqrt(N) as a continued fraction for `terms`
  terms, keeping the convergent numerators P modulo N, and for every term it
  - checks the identity P(k-1)^2 = (-1)^k Q(k) (mod N), which exercises
    multiplication and long division on double-length numbers and catches any
    corrupted number, and
  - trial-divides Q(k) by a small factor base (as cfrac does to find smooth
    residues), each division returning a newly allocated quotient, and counts
    the residues left with a one-limb cofactor (partial relations).
  Every bignum is one malloc of 8 to 48 bytes, freed within a few operations.

  usage: cfrac [numbers=100] [terms=12000]
  prints: terms per second, the count of partial relations, and a check value
  (a hash of all partial quotients, the same under every allocator).
-----------------------------------------------------------------------------*/
#include "bench.h"

/* ---------------------------------------------------------------------------
  Bignums: little-endian 32-bit limbs, normalised (no leading zero limb; zero
  has no limbs). Every operation returns a new number; numbers are immutable.
---------------------------------------------------------------------------*/

typedef struct bn_s {
  uint32_t len;       // limbs in use
  uint32_t d[];       // the limbs, least significant first
} bn_t;

static bn_t* bn_alloc(uint32_t len) {
  bn_t* b = (bn_t*)bench_malloc(sizeof(bn_t) + (len == 0 ? 1 : len) * sizeof(uint32_t));
  b->len = len;
  return b;
}

static bn_t* bn_norm(bn_t* b) {
  while (b->len > 0 && b->d[b->len - 1] == 0) b->len--;
  return b;
}

static bn_t* bn_from_u64(uint64_t v) {
  bn_t* b = bn_alloc(2);
  b->d[0] = (uint32_t)v;
  b->d[1] = (uint32_t)(v >> 32);
  return bn_norm(b);
}

static bn_t* bn_copy(const bn_t* a) {
  bn_t* b = bn_alloc(a->len);
  memcpy(b->d, a->d, a->len * sizeof(uint32_t));
  return b;
}

static int bn_cmp(const bn_t* a, const bn_t* b) {
  if (a->len != b->len) return (a->len < b->len ? -1 : 1);
  for (uint32_t i = a->len; i-- > 0; ) {
    if (a->d[i] != b->d[i]) return (a->d[i] < b->d[i] ? -1 : 1);
  }
  return 0;
}

static bn_t* bn_add(const bn_t* a, const bn_t* b) {
  if (a->len < b->len) { const bn_t* t = a; a = b; b = t; }
  bn_t* r = bn_alloc(a->len + 1);
  uint64_t carry = 0;
  for (uint32_t i = 0; i < a->len; i++) {
    carry += (uint64_t)a->d[i] + (i < b->len ? b->d[i] : 0);
    r->d[i] = (uint32_t)carry;
    carry >>= 32;
  }
  r->d[a->len] = (uint32_t)carry;
  return bn_norm(r);
}

// a - b, requires a >= b
static bn_t* bn_sub(const bn_t* a, const bn_t* b) {
  bn_t* r = bn_alloc(a->len);
  int64_t borrow = 0;
  for (uint32_t i = 0; i < a->len; i++) {
    int64_t t = (int64_t)a->d[i] - (i < b->len ? b->d[i] : 0) - borrow;
    borrow = (t < 0);
    r->d[i] = (uint32_t)t;
  }
  if (borrow) bench_fail("bn_sub: negative result");
  return bn_norm(r);
}

static bn_t* bn_mul(const bn_t* a, const bn_t* b) {
  bn_t* r = bn_alloc(a->len + b->len);
  memset(r->d, 0, r->len * sizeof(uint32_t));
  for (uint32_t i = 0; i < a->len; i++) {
    uint64_t carry = 0;
    for (uint32_t j = 0; j < b->len; j++) {
      carry += (uint64_t)a->d[i] * b->d[j] + r->d[i + j];
      r->d[i + j] = (uint32_t)carry;
      carry >>= 32;
    }
    r->d[i + b->len] = (uint32_t)carry;
  }
  return bn_norm(r);
}

// quotient of a by a one-limb divisor; the remainder in *rem
static bn_t* bn_div_small(const bn_t* a, uint32_t v, uint32_t* rem) {
  bn_t* q = bn_alloc(a->len);
  uint64_t r = 0;
  for (uint32_t i = a->len; i-- > 0; ) {
    uint64_t cur = (r << 32) | a->d[i];
    q->d[i] = (uint32_t)(cur / v);
    r = cur % v;
  }
  *rem = (uint32_t)r;
  return bn_norm(q);
}

// long division (Knuth's algorithm D): *q = a / b, *r = a % b; b != 0
static void bn_divmod(const bn_t* a, const bn_t* b, bn_t** q, bn_t** r) {
  if (bn_cmp(a, b) < 0) { *q = bn_alloc(0); *r = bn_copy(a); return; }
  if (b->len == 1) {
    uint32_t rem;
    *q = bn_div_small(a, b->d[0], &rem);
    *r = bn_from_u64(rem);
    return;
  }
  const uint32_t n = b->len, m = a->len - b->len;
  const int s = __builtin_clz(b->d[n - 1]);   // shift that sets the divisor's top bit
  // the normalised operands are temporaries of their own (as a bignum library would)
  uint32_t* vn = (uint32_t*)bench_malloc(n * sizeof(uint32_t));
  uint32_t* un = (uint32_t*)bench_malloc((a->len + 1) * sizeof(uint32_t));
  for (uint32_t i = n - 1; i > 0; i--) {
    vn[i] = (b->d[i] << s) | (s == 0 ? 0 : b->d[i - 1] >> (32 - s));
  }
  vn[0] = b->d[0] << s;
  un[a->len] = (s == 0 ? 0 : a->d[a->len - 1] >> (32 - s));
  for (uint32_t i = a->len - 1; i > 0; i--) {
    un[i] = (a->d[i] << s) | (s == 0 ? 0 : a->d[i - 1] >> (32 - s));
  }
  un[0] = a->d[0] << s;

  bn_t* quot = bn_alloc(m + 1);
  for (uint32_t j = m + 1; j-- > 0; ) {
    // estimate the quotient digit from the top two limbs, then correct it
    const uint64_t top = ((uint64_t)un[j + n] << 32) | un[j + n - 1];
    uint64_t qhat = top / vn[n - 1];
    uint64_t rhat = top % vn[n - 1];
    while (qhat > 0xFFFFFFFFull || qhat * vn[n - 2] > ((rhat << 32) | un[j + n - 2])) {
      qhat--;
      rhat += vn[n - 1];
      if (rhat > 0xFFFFFFFFull) break;
    }
    // un[j..j+n] -= qhat * vn
    int64_t borrow = 0;
    uint64_t carry = 0;
    for (uint32_t i = 0; i < n; i++) {
      const uint64_t p = qhat * vn[i] + carry;
      carry = p >> 32;
      const int64_t t = (int64_t)un[i + j] - (int64_t)(p & 0xFFFFFFFFull) - borrow;
      un[i + j] = (uint32_t)t;
      borrow = (t < 0);
    }
    const int64_t t = (int64_t)un[j + n] - (int64_t)carry - borrow;
    un[j + n] = (uint32_t)t;
    if (t < 0) {   // qhat was one too large: add the divisor back
      qhat--;
      uint64_t c = 0;
      for (uint32_t i = 0; i < n; i++) {
        c += (uint64_t)un[i + j] + vn[i];
        un[i + j] = (uint32_t)c;
        c >>= 32;
      }
      un[j + n] += (uint32_t)c;
    }
    quot->d[j] = (uint32_t)qhat;
  }
  bn_t* rem = bn_alloc(n);
  for (uint32_t i = 0; i < n; i++) {
    rem->d[i] = (un[i] >> s) | (s == 0 ? 0 : (uint32_t)((uint64_t)un[i + 1] << (32 - s)));
  }
  free(un);
  free(vn);
  *q = bn_norm(quot);
  *r = bn_norm(rem);
}

static bn_t* bn_div(const bn_t* a, const bn_t* b) {
  bn_t *q, *r;
  bn_divmod(a, b, &q, &r);
  free(r);
  return q;
}

static bn_t* bn_mod(const bn_t* a, const bn_t* b) {
  bn_t *q, *r;
  bn_divmod(a, b, &q, &r);
  free(q);
  return r;
}

// floor(sqrt(n)) by Newton's iteration from above
static bn_t* bn_isqrt(const bn_t* n) {
  uint32_t bits = 32 * n->len - (uint32_t)__builtin_clz(n->d[n->len - 1]);
  bn_t* x = bn_alloc((bits / 2) / 32 + 1);
  memset(x->d, 0, x->len * sizeof(uint32_t));
  x->d[((bits + 1) / 2) / 32] |= 1u << (((bits + 1) / 2) % 32);   // 2^ceil(bits/2) > sqrt(n)
  bn_norm(x);
  for (;;) {
    bn_t* nx = bn_div(n, x);
    bn_t* sum = bn_add(x, nx);
    uint32_t rem;
    bn_t* y = bn_div_small(sum, 2, &rem);
    free(nx);
    free(sum);
    if (bn_cmp(y, x) >= 0) { free(y); return x; }
    free(x);
    x = y;
  }
}

/* ---------------------------------------------------------------------------
  The continued fraction of sqrt(N):
    m(k+1) = d(k) a(k) - m(k),  d(k+1) = (N - m(k+1)^2) / d(k),
    a(k+1) = (a(0) + m(k+1)) / d(k+1)
  with Q(k) = d(k) and P(k) = a(k) P(k-1) + P(k-2) mod N.
---------------------------------------------------------------------------*/

static const uint32_t factor_base[] = {
  2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71,
  73, 79, 83, 89, 97, 101, 103, 107, 109, 113, 127, 131, 137, 139, 149, 151
};

// divide q by the factor base; true if what is left fits one limb (a partial
// relation of the large-prime variation, which cfrac keeps too)
static int is_partial(const bn_t* q) {
  bn_t* rest = bn_copy(q);
  for (size_t i = 0; i < sizeof(factor_base) / sizeof(factor_base[0]); i++) {
    for (;;) {
      uint32_t rem;
      bn_t* t = bn_div_small(rest, factor_base[i], &rem);
      if (rem != 0) { free(t); break; }
      free(rest);
      rest = t;
    }
  }
  const int partial = (rest->len <= 1);
  free(rest);
  return partial;
}

static void expand(const bn_t* n, long terms, uint64_t* check, long* partials) {
  bn_t* a0 = bn_isqrt(n);
  bn_t* sq = bn_mul(a0, a0);
  const int square = (bn_cmp(sq, n) == 0);
  free(sq);
  if (square) { free(a0); return; }

  bn_t* m = bn_alloc(0);
  bn_t* d = bn_from_u64(1);
  bn_t* a = bn_copy(a0);
  bn_t* p_prev = bn_from_u64(1);   // P(-1)
  bn_t* p = bn_copy(a0);            // P(0)
  for (long k = 1; k <= terms; k++) {
    // next m, d, a
    bn_t* da = bn_mul(d, a);
    bn_t* m1 = bn_sub(da, m);
    bn_t* mm = bn_mul(m1, m1);
    bn_t* num = bn_sub(n, mm);
    bn_t* d1 = bn_div(num, d);
    bn_t* am = bn_add(a0, m1);
    bn_t* a1 = bn_div(am, d1);
    free(da); free(mm); free(num); free(am);
    free(m); free(d); free(a);
    m = m1; d = d1; a = a1;
    *check = bench_hash(*check, a->len > 0 ? a->d[0] : 0);

    // P(k-1)^2 mod N must be Q(k) for even k and N - Q(k) for odd k
    bn_t* pp = bn_mul(p, p);
    bn_t* r = bn_mod(pp, n);
    bn_t* expect = ((k & 1) == 0 ? bn_copy(d) : bn_sub(n, d));
    if (bn_cmp(r, expect) != 0) bench_fail("cfrac: P^2 != (-1)^k Q (mod N) at term %ld", k);
    free(pp); free(r); free(expect);
    if (is_partial(d)) (*partials)++;

    // P(k) = a(k) P(k-1) + P(k-2) mod N
    bn_t* ap = bn_mul(a, p);
    bn_t* sum = bn_add(ap, p_prev);
    bn_t* p1 = bn_mod(sum, n);
    free(ap); free(sum); free(p_prev);
    p_prev = p;
    p = p1;
  }
  free(m); free(d); free(a); free(p_prev); free(p); free(a0);
}

int main(int argc, char** argv) {
  const long numbers = bench_arg(argc, argv, 1, 100);
  const long terms = bench_arg(argc, argv, 2, 12000);
  bench_rng_t rng;
  bench_rng_init(&rng, 42);
  uint64_t check = 0;
  long partials = 0;
  const double start = bench_now();
  for (long i = 0; i < numbers; i++) {
    bn_t* n = bn_alloc(4);
    for (int j = 0; j < 4; j++) n->d[j] = (uint32_t)bench_rand(&rng);
    n->d[3] |= 0x80000000u;
    expand(n, terms, &check, &partials);
    free(n);
  }
  const double secs = bench_now() - start;
  printf("cfrac: %ld numbers x %ld terms, %.3f Mterms/s, partials=%ld check=%016llx\n", numbers, terms,
         (double)(numbers * terms) / secs / 1e6, partials, (unsigned long long)check);
  return 0;
}
