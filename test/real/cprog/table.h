/* A string -> count hash table with chaining; part of the small C program
   that the real-programs test compiles with gcc (plain and preloaded). */
#ifndef REAL_TABLE_H
#define REAL_TABLE_H
#include <stddef.h>

typedef struct entry_s {
  struct entry_s *next;
  char *key;
  unsigned long count;
} entry_t;

typedef struct {
  entry_t **buckets;
  size_t nbuckets;
  size_t size;
} table_t;

void table_init(table_t *t, size_t nbuckets);
void table_add(table_t *t, const char *key, unsigned long n);
unsigned long table_get(const table_t *t, const char *key);
int table_remove(table_t *t, const char *key);
/* Fills *out with a malloc'ed array of the entries sorted by count
   (descending) then key; returns the number of entries. */
size_t table_sorted(const table_t *t, entry_t ***out);
void table_free(table_t *t);

#endif
