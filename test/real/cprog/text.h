/* Small string helpers for the real-programs test's C program. */
#ifndef REAL_TEXT_H
#define REAL_TEXT_H
#include <stddef.h>

unsigned long text_hash(const char *s);
char *text_dup(const char *s);
/* A growable string buffer. */
typedef struct { char *data; size_t len, cap; } sbuf_t;
void sbuf_init(sbuf_t *b);
void sbuf_add(sbuf_t *b, const char *s);
void sbuf_addf(sbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sbuf_free(sbuf_t *b);
/* Deterministic pseudo-random words. */
unsigned long text_rand(unsigned long *state);
void text_word(unsigned long *state, char *buf, size_t size);

#endif
