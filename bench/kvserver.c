/* ----------------------------------------------------------------------------
  kvserver.c -- a small in-memory key-value server on loopback, under load.

  A real server instead of a model of one: a single-threaded TCP server on
  127.0.0.1 (an ephemeral port, loopback only) with epoll, whose hash table
  keeps every key and every value in its own heap block. The protocol is
  text, one request after another on a connection:
      SET key len\r\n<len bytes>\r\n   ->  +OK\r\n
      GET key\r\n                      ->  $len\r\n<len bytes>\r\n  or  $-1\r\n
      DEL key\r\n                      ->  :1\r\n  or  :0\r\n
  A SET replaces the value (a new block, the old one freed), a DEL frees the
  entry, its key and its value; each connection has a read and a write buffer
  that grow with realloc when a request or the responses do not fit, and
  shrink back when they are empty. The bucket array doubles as the table
  fills. So the server allocates and frees all the time, blocks of every size
  from a few bytes (keys) to 64 KiB (values: log-uniform 16 B-4 KiB, 1 in 32
  log-uniform 4-64 KiB).

  The load comes from a generator thread in the same process, started once
  the server listens: it opens `connections` connections and sends `requests`
  requests in all (50% GET, 40% SET, 10% DEL, on random keys out of `keys`),
  `depth` at a time per connection (pipelined), and checks every response: a
  GET must return exactly the bytes last SET for the key (the generator keeps
  the length and the seed of each key's value and regenerates the bytes), a
  DEL must say whether the key existed. A key is never in two requests at
  once, so the expected answer is always known. The generator allocates
  nothing once it runs (all its arrays are made before), so the allocations
  measured are the server's. Both sides stop by themselves: after the last
  response the generator closes its connections and the server ends when
  they are all closed; either fails after `timeout` seconds.

  Every heap block of the server carries a tag (bench.h) checked before it is
  freed or reallocated: entries, keys and values ([tag][bytes][tag]), the
  buffers and the bucket array. Whatever the table holds at the end is freed
  (and checked) by the main thread.

  usage: kvserver [requests=300000] [connections=8] [keys=50000] [depth=4] [timeout=100]
  prints: requests per second.
-----------------------------------------------------------------------------*/
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include "bench.h"

#define MIN_VALUE   16
#define SMALL_VALUE 4096
#define MAX_VALUE   65536
#define MAX_LINE    128       // a request line: "SET " key " " len "\r\n"
#define BUF_INIT    4096      // a connection buffer's first (and shrunk) capacity
#define BUF_SHRINK  16384     // an empty buffer larger than this shrinks back

static long requests, connections, keys, depth;
static double deadline;
static uint16_t port;

static void check_deadline(const char* who) {
  if (bench_now() > deadline) bench_fail("kvserver: %s timed out", who);
}

static void set_nodelay_nonblock(int fd) {
  const int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) bench_fail("setsockopt TCP_NODELAY");
  const int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) bench_fail("fcntl O_NONBLOCK");
}

/* ===========================================================================
  The server
===========================================================================*/

// A block holding `n` bytes between two tag words: [tag][n bytes][tag].
static char* boxed_new(const char* bytes, size_t n, uint64_t salt) {
  char* b = (char*)bench_malloc(n + 16);
  memcpy(b + 8, bytes, n);
  bench_mark(b, n + 16, salt);
  return b;
}

static void boxed_free(char* b, size_t n, uint64_t salt, const char* what) {
  bench_check(b, n + 16, salt, what);
  free(b);
}

/* A growable byte buffer: data[start, start + len) within `cap` bytes, in a
   block of cap + 16 bytes with its tags around the data. */
typedef struct buf_s { char* mem; size_t cap, start, len; uint64_t salt; } buf_t;

static char* buf_data(buf_t* b) { return b->mem + 8 + b->start; }

static void buf_init(buf_t* b, uint64_t salt) {
  b->cap = BUF_INIT;
  b->start = b->len = 0;
  b->salt = salt;
  b->mem = (char*)bench_malloc(b->cap + 16);
  bench_mark(b->mem, b->cap + 16, salt);
}

static void buf_resize(buf_t* b, size_t cap) {
  bench_check(b->mem, b->cap + 16, b->salt, "kvserver buffer realloc");
  if (b->start > 0) { memmove(b->mem + 8, b->mem + 8 + b->start, b->len); b->start = 0; }
  uint64_t head;
  memcpy(&head, b->mem, sizeof head);
  b->mem = (char*)bench_realloc(b->mem, cap + 16);
  uint64_t moved;
  memcpy(&moved, b->mem, sizeof moved);
  if (moved != head) bench_fail("kvserver: realloc lost the contents of a buffer");
  b->cap = cap;
  bench_mark(b->mem, b->cap + 16, b->salt);
}

// make room for `extra` more bytes after the data
static void buf_reserve(buf_t* b, size_t extra) {
  if (b->start + b->len + extra <= b->cap) return;
  if (b->len + extra <= b->cap) {   // room enough if the data moves to the front
    memmove(b->mem + 8, b->mem + 8 + b->start, b->len);
    b->start = 0;
    return;
  }
  size_t cap = 2 * b->cap;
  while (cap < b->len + extra) cap *= 2;
  buf_resize(b, cap);
}

static void buf_consume(buf_t* b, size_t n) {
  b->start += n;
  b->len -= n;
  if (b->len == 0) {
    b->start = 0;
    if (b->cap > BUF_SHRINK) buf_resize(b, BUF_INIT);
  }
}

static void buf_append(buf_t* b, const void* bytes, size_t n) {
  buf_reserve(b, n);
  memcpy(buf_data(b) + b->len, bytes, n);
  b->len += n;
}

static void buf_free(buf_t* b) {
  bench_check(b->mem, b->cap + 16, b->salt, "kvserver buffer");
  free(b->mem);
}

// A table entry; its first and last words are its tags.
typedef struct entry_s {
  uint64_t tag_head;
  struct entry_s* next;
  uint64_t hash;
  char* key;            // boxed
  size_t key_len;
  char* value;          // boxed
  size_t value_len;
  uint64_t tag_tail;
} entry_t;

static struct {
  uint64_t* mem;        // [tag][buckets...][tag]
  entry_t** buckets;
  size_t nbuckets, count;
} table;

static uint64_t hash_key(const char* k, size_t n) {
  uint64_t h = 0xCBF29CE484222325ull;   // FNV-1a
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)k[i]) * 0x100000001B3ull;
  return h;
}

static void table_alloc(size_t nbuckets) {
  const size_t size = (nbuckets + 2) * sizeof(uint64_t);
  table.mem = (uint64_t*)calloc(nbuckets + 2, sizeof(uint64_t));
  if (table.mem == NULL) bench_fail("calloc(%zu)", size);
  for (size_t i = 0; i < nbuckets + 2; i++) {
    if (table.mem[i] != 0) bench_fail("kvserver: calloc returned memory that is not zero");
  }
  bench_mark(table.mem, size, 77);
  table.buckets = (entry_t**)(table.mem + 1);
  table.nbuckets = nbuckets;
}

static void table_free_array(void) {
  bench_check(table.mem, (table.nbuckets + 2) * sizeof(uint64_t), 77, "kvserver buckets");
  free(table.mem);
}

static void table_grow(void) {
  uint64_t* old_mem = table.mem;
  entry_t** old = table.buckets;
  const size_t old_n = table.nbuckets;
  table_alloc(2 * old_n);
  for (size_t i = 0; i < old_n; i++) {
    for (entry_t* e = old[i]; e != NULL; ) {
      entry_t* next = e->next;
      entry_t** slot = &table.buckets[e->hash & (table.nbuckets - 1)];
      e->next = *slot;
      *slot = e;
      e = next;
    }
  }
  bench_check(old_mem, (old_n + 2) * sizeof(uint64_t), 77, "kvserver buckets");
  free(old_mem);
}

static entry_t** table_find(const char* key, size_t n, uint64_t h) {
  entry_t** p = &table.buckets[h & (table.nbuckets - 1)];
  for (; *p != NULL; p = &(*p)->next) {
    entry_t* e = *p;
    if (e->hash == h && e->key_len == n && memcmp(e->key + 8, key, n) == 0) break;
  }
  return p;
}

static void entry_free(entry_t* e) {
  bench_check(e, sizeof *e, e->hash, "kvserver entry");
  boxed_free(e->key, e->key_len, e->hash, "kvserver key");
  boxed_free(e->value, e->value_len, e->hash ^ 1, "kvserver value");
  free(e);
}

static void table_set(const char* key, size_t n, const char* value, size_t len) {
  const uint64_t h = hash_key(key, n);
  entry_t** p = table_find(key, n, h);
  entry_t* e = *p;
  if (e != NULL) {
    // replace the value: a new block, the old one freed
    char* v = boxed_new(value, len, h ^ 1);
    boxed_free(e->value, e->value_len, h ^ 1, "kvserver value");
    e->value = v;
    e->value_len = len;
    return;
  }
  e = (entry_t*)bench_malloc(sizeof *e);
  e->next = NULL;
  e->hash = h;
  e->key = boxed_new(key, n, h);
  e->key_len = n;
  e->value = boxed_new(value, len, h ^ 1);
  e->value_len = len;
  bench_mark(e, sizeof *e, h);
  *p = e;
  if (++table.count > table.nbuckets) table_grow();
}

static int table_del(const char* key, size_t n) {
  entry_t** p = table_find(key, n, hash_key(key, n));
  entry_t* e = *p;
  if (e == NULL) return 0;
  *p = e->next;
  entry_free(e);
  table.count--;
  return 1;
}

static size_t format_uint(char* dst, size_t v) {
  char tmp[24];
  size_t n = 0;
  do { tmp[n++] = (char)('0' + v % 10); v /= 10; } while (v != 0);
  for (size_t i = 0; i < n; i++) dst[i] = tmp[n - 1 - i];
  return n;
}

// parse a decimal number of at most 9 digits; -1 if there is none
static long parse_uint(const char* s, size_t n) {
  if (n == 0 || n > 9) return -1;
  long v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = 10 * v + (s[i] - '0');
  }
  return v;
}

typedef struct conn_s {
  uint64_t tag_head;
  int fd, want_out;
  buf_t in, out;
  uint64_t tag_tail;
} conn_t;

/* Execute the complete requests in c->in, append their responses to c->out.
   Returns the number of bytes still needed for the incomplete request at the
   end (0 if the buffer is empty or only a partial line is missing). */
static size_t serve_requests(conn_t* c) {
  for (;;) {
    char* d = buf_data(&c->in);
    const size_t avail = c->in.len;
    char* nl = (char*)memchr(d, '\n', avail < MAX_LINE ? avail : MAX_LINE);
    if (nl == NULL) {
      if (avail >= MAX_LINE) bench_fail("kvserver: request line too long");
      return 0;
    }
    const size_t line = (size_t)(nl - d) + 1;
    if (line < 6 || nl[-1] != '\r' || d[3] != ' ') bench_fail("kvserver: bad request line");
    const char* key = d + 4;
    const char* end = nl - 1;   // at the '\r'
    if (memcmp(d, "SET", 3) == 0) {
      const char* sp = (const char*)memchr(key, ' ', (size_t)(end - key));
      if (sp == NULL || sp == key) bench_fail("kvserver: bad SET");
      const long len = parse_uint(sp + 1, (size_t)(end - sp - 1));
      if (len < 0 || len > MAX_VALUE) bench_fail("kvserver: bad SET length");
      const size_t need = line + (size_t)len + 2;
      if (avail < need) return need - avail;
      if (d[need - 2] != '\r' || d[need - 1] != '\n') bench_fail("kvserver: SET value not followed by CRLF");
      table_set(key, (size_t)(sp - key), d + line, (size_t)len);
      buf_append(&c->out, "+OK\r\n", 5);
      buf_consume(&c->in, need);
    } else if (memcmp(d, "GET", 3) == 0) {
      entry_t* e = *table_find(key, (size_t)(end - key), hash_key(key, (size_t)(end - key)));
      if (e == NULL) {
        buf_append(&c->out, "$-1\r\n", 5);
      } else {
        bench_check(e, sizeof *e, e->hash, "kvserver entry");
        char head[32];
        size_t n = 0;
        head[n++] = '$';
        n += format_uint(head + n, e->value_len);
        head[n++] = '\r'; head[n++] = '\n';
        buf_reserve(&c->out, n + e->value_len + 2);
        buf_append(&c->out, head, n);
        buf_append(&c->out, e->value + 8, e->value_len);
        buf_append(&c->out, "\r\n", 2);
      }
      buf_consume(&c->in, line);
    } else if (memcmp(d, "DEL", 3) == 0) {
      buf_append(&c->out, table_del(key, (size_t)(end - key)) ? ":1\r\n" : ":0\r\n", 4);
      buf_consume(&c->in, line);
    } else {
      bench_fail("kvserver: unknown request");
    }
    if (c->in.len == 0) return 0;
  }
}

static void set_events(int ep, conn_t* c, int want_out) {
  if (c->want_out == want_out) return;
  struct epoll_event ev;
  memset(&ev, 0, sizeof ev);
  ev.events = EPOLLIN | (want_out ? EPOLLOUT : 0);
  ev.data.ptr = c;
  if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) != 0) bench_fail("epoll_ctl MOD");
  c->want_out = want_out;
}

// write what we can; returns 0 if the connection is gone
static int flush_out(int ep, conn_t* c) {
  while (c->out.len > 0) {
    const ssize_t n = send(c->fd, buf_data(&c->out), c->out.len, MSG_NOSIGNAL);
    if (n > 0) { buf_consume(&c->out, (size_t)n); continue; }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0 && errno == EINTR) continue;
    return 0;
  }
  set_events(ep, c, c->out.len > 0);
  return 1;
}

// read and serve; returns 0 when the peer has closed the connection
static int read_in(int ep, conn_t* c) {
  size_t need = 0;
  for (int reads = 0; reads < 8; reads++) {
    buf_reserve(&c->in, need > 4096 ? need : 4096);
    const size_t room = c->in.cap - c->in.start - c->in.len;
    const ssize_t n = recv(c->fd, buf_data(&c->in) + c->in.len, room, 0);
    if (n == 0) return 0;
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      return 0;
    }
    c->in.len += (size_t)n;
    need = serve_requests(c);
  }
  if (c->in.len == 0 && c->in.cap > BUF_SHRINK) buf_resize(&c->in, BUF_INIT);
  return flush_out(ep, c);
}

static void conn_close(conn_t* c) {
  close(c->fd);
  bench_check(c, sizeof *c, 5, "kvserver connection");
  buf_free(&c->in);
  buf_free(&c->out);
  free(c);
}

static void serve(int listener) {
  const int ep = epoll_create1(0);
  if (ep < 0) bench_fail("epoll_create1");
  struct epoll_event ev;
  memset(&ev, 0, sizeof ev);
  ev.events = EPOLLIN;
  ev.data.ptr = NULL;   // the listener
  if (epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev) != 0) bench_fail("epoll_ctl ADD");
  long accepted = 0, open = 0;
  struct epoll_event events[64];
  while (accepted < connections || open > 0) {
    const int n = epoll_wait(ep, events, 64, 1000);
    check_deadline("server");
    if (n < 0) {
      if (errno == EINTR) continue;
      bench_fail("epoll_wait");
    }
    for (int i = 0; i < n; i++) {
      conn_t* c = (conn_t*)events[i].data.ptr;
      if (c == NULL) {
        for (;;) {
          const int fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK);
          if (fd < 0) break;
          set_nodelay_nonblock(fd);
          c = (conn_t*)bench_malloc(sizeof *c);
          c->fd = fd;
          c->want_out = 0;
          buf_init(&c->in, 2 * (uint64_t)fd);
          buf_init(&c->out, 2 * (uint64_t)fd + 1);
          bench_mark(c, sizeof *c, 5);
          ev.events = EPOLLIN;
          ev.data.ptr = c;
          if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) bench_fail("epoll_ctl ADD");
          accepted++;
          open++;
        }
        continue;
      }
      int alive = 1;
      if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) alive = read_in(ep, c);
      else if (events[i].events & EPOLLOUT) alive = flush_out(ep, c);
      if (!alive) {
        epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
        conn_close(c);
        open--;
      }
    }
  }
  close(ep);
}

/* ===========================================================================
  The load generator: allocates nothing in its loop
===========================================================================*/

enum { OP_GET, OP_SET, OP_DEL };

typedef struct pending_s { int op; uint32_t key, len, seed; } pending_t;

typedef struct client_s {
  int fd;
  char* out; size_t out_len, out_off;   // a batch of requests, sent from out_off
  char* in; size_t in_len;              // responses received, not yet checked
  pending_t* pending; size_t pending_head, pending_count;
} client_t;

#define ABSENT UINT32_MAX

static uint32_t* value_len;       // per key: the length of its value, or ABSENT
static uint32_t* value_seed;      // per key: the seed of its value's bytes
static unsigned char* busy;       // per key: in a request now
static char* scratch;             // MAX_VALUE bytes to regenerate a value in
static double load_secs;

static size_t key_text(char* dst, uint32_t k) {
  size_t n = 0;
  dst[n++] = 'k';
  n += format_uint(dst + n, k);
  dst[n++] = ':';
  for (uint32_t i = 0; i < k % 23; i++) dst[n++] = (char)('a' + (k + i) % 26);
  return n;
}

static void value_bytes(char* dst, uint32_t key, uint32_t seed, size_t len) {
  bench_rng_t r;
  bench_rng_init(&r, ((uint64_t)key << 32) | seed);
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    const uint64_t x = bench_rand(&r);
    memcpy(dst + i, &x, 8);
  }
  if (i < len) {
    const uint64_t x = bench_rand(&r);
    memcpy(dst + i, &x, len - i);
  }
}

static size_t value_size(bench_rng_t* rng) {
  if (bench_below(rng, 32) == 0) return bench_log_range(rng, SMALL_VALUE, MAX_VALUE);
  return bench_log_range(rng, MIN_VALUE, SMALL_VALUE);
}

// fill the client's out buffer with up to `depth` requests
static long make_batch(client_t* c, bench_rng_t* rng, long left) {
  c->out_len = c->out_off = 0;
  long made = 0;
  while (made < depth && made < left) {
    uint32_t k = (uint32_t)bench_below(rng, (size_t)keys);
    while (busy[k]) k = (k + 1) % (uint32_t)keys;
    busy[k] = 1;
    pending_t* p = &c->pending[(c->pending_head + c->pending_count) % (size_t)depth];
    c->pending_count++;
    p->key = k;
    const size_t r = bench_below(rng, 100);
    char* o = c->out + c->out_len;
    size_t n = 0;
    if (r < 50) {
      p->op = OP_GET;
      memcpy(o, "GET ", 4); n = 4;
      n += key_text(o + n, k);
      o[n++] = '\r'; o[n++] = '\n';
    } else if (r < 90) {
      p->op = OP_SET;
      p->len = (uint32_t)value_size(rng);
      p->seed = (uint32_t)bench_rand(rng);
      memcpy(o, "SET ", 4); n = 4;
      n += key_text(o + n, k);
      o[n++] = ' ';
      n += format_uint(o + n, p->len);
      o[n++] = '\r'; o[n++] = '\n';
      value_bytes(o + n, k, p->seed, p->len);
      n += p->len;
      o[n++] = '\r'; o[n++] = '\n';
    } else {
      p->op = OP_DEL;
      memcpy(o, "DEL ", 4); n = 4;
      n += key_text(o + n, k);
      o[n++] = '\r'; o[n++] = '\n';
    }
    c->out_len += n;
    made++;
  }
  return made;
}

// check the complete responses in c->in; returns how many
static long check_responses(client_t* c) {
  long done = 0;
  size_t off = 0;
  while (c->pending_count > 0) {
    const char* d = c->in + off;
    const size_t avail = c->in_len - off;
    const char* nl = (const char*)memchr(d, '\n', avail);
    if (nl == NULL) break;
    const size_t line = (size_t)(nl - d) + 1;
    pending_t* p = &c->pending[c->pending_head];
    const uint32_t k = p->key;
    if (p->op == OP_SET) {
      if (line != 5 || memcmp(d, "+OK\r\n", 5) != 0) bench_fail("kvserver: bad response to SET");
      value_len[k] = p->len;
      value_seed[k] = p->seed;
      off += line;
    } else if (p->op == OP_DEL) {
      const char* want = (value_len[k] != ABSENT ? ":1\r\n" : ":0\r\n");
      if (line != 4 || memcmp(d, want, 4) != 0) bench_fail("kvserver: bad response to DEL of key %u", k);
      value_len[k] = ABSENT;
      off += line;
    } else if (value_len[k] == ABSENT) {
      if (line != 5 || memcmp(d, "$-1\r\n", 5) != 0) bench_fail("kvserver: GET of key %u: it should not exist", k);
      off += line;
    } else {
      if (d[0] != '$' || line < 4 || d[line - 2] != '\r') bench_fail("kvserver: bad response to GET");
      const long len = parse_uint(d + 1, line - 3);
      if (len != (long)value_len[k]) bench_fail("kvserver: GET of key %u: %ld bytes instead of %u", k, len, value_len[k]);
      if (avail < line + (size_t)len + 2) break;   // not all there yet
      value_bytes(scratch, k, value_seed[k], (size_t)len);
      if (memcmp(d + line, scratch, (size_t)len) != 0) bench_fail("kvserver: GET of key %u: wrong bytes", k);
      if (d[line + (size_t)len] != '\r' || d[line + (size_t)len + 1] != '\n') bench_fail("kvserver: bad end of a GET response");
      off += line + (size_t)len + 2;
    }
    busy[k] = 0;
    c->pending_head = (c->pending_head + 1) % (size_t)depth;
    c->pending_count--;
    done++;
  }
  if (off > 0) {
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
  }
  return done;
}

static void* load_generator(void* arg) {
  (void)arg;
  // everything the loop needs, made before it
  const size_t batch_bytes = (size_t)depth * (MAX_VALUE + MAX_LINE + 16);
  client_t* clients = (client_t*)bench_malloc((size_t)connections * sizeof(client_t));
  struct pollfd* fds = (struct pollfd*)bench_malloc((size_t)connections * sizeof(struct pollfd));
  for (long i = 0; i < connections; i++) {
    client_t* c = &clients[i];
    c->out = (char*)bench_malloc(batch_bytes);
    c->in = (char*)bench_malloc(batch_bytes);
    c->pending = (pending_t*)bench_malloc((size_t)depth * sizeof(pending_t));
    c->out_len = c->out_off = c->in_len = 0;
    c->pending_head = c->pending_count = 0;
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (c->fd < 0) bench_fail("socket");
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    if (connect(c->fd, (struct sockaddr*)&addr, sizeof addr) != 0) bench_fail("connect");
    set_nodelay_nonblock(c->fd);
  }
  bench_rng_t rng;
  bench_rng_init(&rng, 2024);

  const double start = bench_now();
  long sent = 0, done = 0;
  while (done < requests) {
    for (long i = 0; i < connections; i++) {
      client_t* c = &clients[i];
      if (c->pending_count == 0 && sent < requests) sent += make_batch(c, &rng, requests - sent);
      // send what is left of the batch
      while (c->out_off < c->out_len) {
        const ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (n > 0) { c->out_off += (size_t)n; continue; }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n < 0 && errno == EINTR) continue;
        bench_fail("kvserver: send failed");
      }
      fds[i].fd = c->fd;
      fds[i].events = (short)((c->pending_count > 0 ? POLLIN : 0) | (c->out_off < c->out_len ? POLLOUT : 0));
      fds[i].revents = 0;
    }
    const int n = poll(fds, (nfds_t)connections, 1000);
    check_deadline("load generator");
    if (n < 0) {
      if (errno == EINTR) continue;
      bench_fail("poll");
    }
    for (long i = 0; i < connections; i++) {
      client_t* c = &clients[i];
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t got = recv(c->fd, c->in + c->in_len, batch_bytes - c->in_len, 0);
      if (got == 0) bench_fail("kvserver: the server closed a connection");
      if (got < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
        bench_fail("kvserver: recv failed");
      }
      c->in_len += (size_t)got;
      done += check_responses(c);
      if (c->pending_count == 0 && c->in_len != 0) bench_fail("kvserver: a response too many");
    }
  }
  load_secs = bench_now() - start;

  for (long i = 0; i < connections; i++) {
    close(clients[i].fd);
    free(clients[i].out);
    free(clients[i].in);
    free(clients[i].pending);
  }
  free(fds);
  free(clients);
  return NULL;
}

int main(int argc, char** argv) {
  requests = bench_arg(argc, argv, 1, 300000);
  connections = bench_arg(argc, argv, 2, 8);
  keys = bench_arg(argc, argv, 3, 50000);
  depth = bench_arg(argc, argv, 4, 4);
  const long timeout = bench_arg(argc, argv, 5, 100);
  if (requests < 1 || connections < 1 || connections > 1000 || keys < 1 || depth < 1 || timeout < 1 ||
      keys < connections * depth)
    bench_fail("bad arguments");
  deadline = bench_now() + (double)timeout;

  // the generator's state, made before anything runs
  value_len = (uint32_t*)bench_malloc((size_t)keys * sizeof(uint32_t));
  value_seed = (uint32_t*)bench_malloc((size_t)keys * sizeof(uint32_t));
  busy = (unsigned char*)calloc((size_t)keys, 1);
  scratch = (char*)bench_malloc(MAX_VALUE);
  if (busy == NULL) bench_fail("calloc");
  for (long k = 0; k < keys; k++) {
    if (busy[k] != 0) bench_fail("kvserver: calloc returned memory that is not zero");
    value_len[k] = ABSENT;
  }

  // the server listens on an ephemeral port of the loopback interface only
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (listener < 0) bench_fail("socket");
  const int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in addr;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(listener, (struct sockaddr*)&addr, sizeof addr) != 0) bench_fail("bind 127.0.0.1");
  if (listen(listener, 128) != 0) bench_fail("listen");
  socklen_t alen = sizeof addr;
  if (getsockname(listener, (struct sockaddr*)&addr, &alen) != 0) bench_fail("getsockname");
  port = ntohs(addr.sin_port);
  table_alloc(1024);

  pthread_t gen;
  if (pthread_create(&gen, NULL, load_generator, NULL) != 0) bench_fail("pthread_create");
  serve(listener);
  pthread_join(gen, NULL);
  close(listener);

  // free what the table holds, checking it against what the generator expects
  size_t left = 0;
  for (size_t i = 0; i < table.nbuckets; i++) {
    for (entry_t* e = table.buckets[i]; e != NULL; ) {
      entry_t* next = e->next;
      entry_free(e);
      left++;
      e = next;
    }
  }
  table_free_array();
  size_t expected = 0;
  for (long k = 0; k < keys; k++) expected += (value_len[k] != ABSENT);
  if (left != expected || left != table.count) bench_fail("kvserver: %zu keys at the end, %zu expected", left, expected);
  free(value_len);
  free(value_seed);
  free(busy);
  free(scratch);
  printf("kvserver: %ld requests on %ld connections (depth %ld), %zu keys at the end, %.0f requests/s\n",
         requests, connections, depth, left, (double)requests / load_secs);
  return 0;
}
