#include "text.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

unsigned long text_hash(const char *s) {
  unsigned long h = 1469598103934665603UL;  /* FNV-1a */
  for (; *s; s++) { h ^= (unsigned char)*s; h *= 1099511628211UL; }
  return h;
}

char *text_dup(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = malloc(n);
  if (p == NULL) abort();
  return memcpy(p, s, n);
}

void sbuf_init(sbuf_t *b) { b->data = NULL; b->len = b->cap = 0; }

static void sbuf_reserve(sbuf_t *b, size_t extra) {
  if (b->len + extra + 1 <= b->cap) return;
  size_t cap = b->cap ? b->cap : 16;
  while (cap < b->len + extra + 1) cap *= 2;
  char *p = realloc(b->data, cap);
  if (p == NULL) abort();
  b->data = p;
  b->cap = cap;
}

void sbuf_add(sbuf_t *b, const char *s) {
  size_t n = strlen(s);
  sbuf_reserve(b, n);
  memcpy(b->data + b->len, s, n + 1);
  b->len += n;
}

void sbuf_addf(sbuf_t *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) abort();
  sbuf_reserve(b, (size_t)n);
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void sbuf_free(sbuf_t *b) { free(b->data); sbuf_init(b); }

unsigned long text_rand(unsigned long *state) {  /* xorshift64* */
  unsigned long x = *state;
  x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
  *state = x;
  return x * 2685821657736338717UL;
}

void text_word(unsigned long *state, char *buf, size_t size) {
  static const char *const syll[] = { "ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "qu", "ph", "x" };
  size_t n = 1 + text_rand(state) % 4, len = 0;
  buf[0] = 0;
  for (size_t i = 0; i < n; i++) {
    const char *s = syll[text_rand(state) % (sizeof syll / sizeof syll[0])];
    size_t k = strlen(s);
    if (len + k + 1 > size) break;
    memcpy(buf + len, s, k + 1);
    len += k;
  }
}
