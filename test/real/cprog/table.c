#include "table.h"
#include "text.h"
#include <stdlib.h>
#include <string.h>

static void table_grow(table_t *t);

void table_init(table_t *t, size_t nbuckets) {
  t->nbuckets = nbuckets ? nbuckets : 8;
  t->buckets = calloc(t->nbuckets, sizeof(entry_t *));
  t->size = 0;
  if (t->buckets == NULL) abort();
}

static entry_t **slot(const table_t *t, const char *key) {
  return &t->buckets[text_hash(key) % t->nbuckets];
}

void table_add(table_t *t, const char *key, unsigned long n) {
  entry_t **p = slot(t, key);
  for (entry_t *e = *p; e != NULL; e = e->next) {
    if (strcmp(e->key, key) == 0) { e->count += n; return; }
  }
  entry_t *e = malloc(sizeof *e);
  if (e == NULL) abort();
  e->key = text_dup(key);
  e->count = n;
  e->next = *p;
  *p = e;
  if (++t->size > 2 * t->nbuckets) table_grow(t);
}

unsigned long table_get(const table_t *t, const char *key) {
  for (entry_t *e = *slot(t, key); e != NULL; e = e->next)
    if (strcmp(e->key, key) == 0) return e->count;
  return 0;
}

int table_remove(table_t *t, const char *key) {
  for (entry_t **p = slot(t, key); *p != NULL; p = &(*p)->next) {
    if (strcmp((*p)->key, key) == 0) {
      entry_t *e = *p;
      *p = e->next;
      free(e->key);
      free(e);
      t->size--;
      return 1;
    }
  }
  return 0;
}

static void table_grow(table_t *t) {
  table_t bigger;
  table_init(&bigger, t->nbuckets * 4);
  for (size_t i = 0; i < t->nbuckets; i++) {
    entry_t *e = t->buckets[i];
    while (e != NULL) {
      entry_t *next = e->next;
      entry_t **p = slot(&bigger, e->key);
      e->next = *p;
      *p = e;
      e = next;
    }
  }
  free(t->buckets);
  bigger.size = t->size;
  *t = bigger;
}

static int by_count(const void *a, const void *b) {
  const entry_t *x = *(entry_t *const *)a, *y = *(entry_t *const *)b;
  if (x->count != y->count) return x->count > y->count ? -1 : 1;
  return strcmp(x->key, y->key);
}

size_t table_sorted(const table_t *t, entry_t ***out) {
  entry_t **all = malloc((t->size + 1) * sizeof *all);
  if (all == NULL) abort();
  size_t n = 0;
  for (size_t i = 0; i < t->nbuckets; i++)
    for (entry_t *e = t->buckets[i]; e != NULL; e = e->next) all[n++] = e;
  qsort(all, n, sizeof *all, by_count);
  *out = all;
  return n;
}

void table_free(table_t *t) {
  for (size_t i = 0; i < t->nbuckets; i++) {
    entry_t *e = t->buckets[i];
    while (e != NULL) {
      entry_t *next = e->next;
      free(e->key);
      free(e);
      e = next;
    }
  }
  free(t->buckets);
  t->buckets = NULL;
  t->nbuckets = t->size = 0;
}
