/* The pthread keys of one namespace (key_space.h explains why). Layout and
 * rules follow glibc's nptl: a key is in use when its sequence number is
 * odd; create and delete each move it on by one, so a value stored under an
 * older use of the same key number is recognised and dropped. */
#include "key_space.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#define BLOCK 32u
#define BLOCKS (MPK_KEYS_MAX / BLOCK)

typedef void (*destructor_fn)(void*);

struct key {
  _Atomic uintptr_t seq;
  _Atomic(destructor_fn) destructor;
};

struct slot {
  uintptr_t seq; /* the key's seq when the value was set */
  void* value;
};

static struct key keys[MPK_KEYS_MAX];

/* This thread's values: a table of BLOCKS blocks of BLOCK keys, the table
 * allocated (with this namespace's malloc) and the thread's exit handler
 * registered at its first set, each block at the first set of one of its
 * keys. One copy per namespace.
 *
 * Initial-exec, so static TLS (8 bytes): a dynamic TLS block would be
 * allocated by ld.so with the host libc's malloc, and when a thread that the
 * namespace libc created has exited, that libc's pthread_create frees the
 * blocks of the stack it reuses with its own free (docs/isolation.md,
 * hazard 11). */
static __thread struct slot** t_blocks __attribute__((tls_model("initial-exec")));

/* glibc: runs fn(obj) when the calling thread exits, from __call_tls_dtors. */
extern int __cxa_thread_atexit_impl(void (*fn)(void*), void* obj, void* dso_symbol);
extern void* __dso_handle;

static bool in_use(uintptr_t seq) { return (seq & 1u) != 0; }

int mpk_key_create(unsigned* key, void (*destructor)(void*)) {
  for (unsigned k = 0; k < MPK_KEYS_MAX; ++k) {
    uintptr_t seq = atomic_load_explicit(&keys[k].seq, memory_order_relaxed);
    if (in_use(seq)) continue;
    if (atomic_compare_exchange_strong_explicit(&keys[k].seq, &seq, seq + 1, memory_order_acq_rel,
                                                memory_order_relaxed)) {
      atomic_store_explicit(&keys[k].destructor, destructor, memory_order_release);
      *key = k;
      return 0;
    }
  }
  return EAGAIN;
}

int mpk_key_delete(unsigned key) {
  if (key >= MPK_KEYS_MAX) return EINVAL;
  uintptr_t seq = atomic_load_explicit(&keys[key].seq, memory_order_relaxed);
  if (!in_use(seq)) return EINVAL;
  return atomic_compare_exchange_strong_explicit(&keys[key].seq, &seq, seq + 1,
                                                 memory_order_acq_rel, memory_order_relaxed)
             ? 0
             : EINVAL;
}

void* mpk_getspecific(unsigned key) {
  if (key >= MPK_KEYS_MAX || t_blocks == NULL) return NULL;
  struct slot* block = t_blocks[key / BLOCK];
  if (block == NULL) return NULL;
  struct slot* s = &block[key % BLOCK];
  if (s->value != NULL && s->seq != atomic_load_explicit(&keys[key].seq, memory_order_acquire)) {
    s->value = NULL; /* set under a key since deleted */
  }
  return s->value;
}

static void run_destructors(void* unused);

int mpk_setspecific(unsigned key, const void* value) {
  if (key >= MPK_KEYS_MAX) return EINVAL;
  uintptr_t seq = atomic_load_explicit(&keys[key].seq, memory_order_acquire);
  if (!in_use(seq)) return EINVAL;
  if (t_blocks == NULL) {
    if (value == NULL) return 0; /* nothing to store, nothing to free */
    struct slot** table = calloc(BLOCKS, sizeof(struct slot*));
    if (table == NULL) return ENOMEM;
    if (__cxa_thread_atexit_impl(run_destructors, NULL, &__dso_handle) != 0) {
      free(table);
      return ENOMEM;
    }
    t_blocks = table;
  }
  struct slot** block = &t_blocks[key / BLOCK];
  if (*block == NULL) {
    if (value == NULL) return 0;
    *block = calloc(BLOCK, sizeof(struct slot));
    if (*block == NULL) return ENOMEM;
  }
  struct slot* s = &(*block)[key % BLOCK];
  s->seq = seq;
  s->value = (void*)value;
  return 0;
}

/* As the thread exits: each live value's destructor, in rounds while
 * destructors set values again, then the blocks go. */
static void run_destructors(void* unused) {
  (void)unused;
  for (unsigned round = 0; round < MPK_DESTRUCTOR_ITERATIONS && t_blocks != NULL; ++round) {
    bool ran = false;
    for (unsigned b = 0; b < BLOCKS; ++b) {
      struct slot* block = t_blocks[b];
      if (block == NULL) continue;
      for (unsigned i = 0; i < BLOCK; ++i) {
        void* value = block[i].value;
        if (value == NULL) continue;
        block[i].value = NULL; /* cleared first, as POSIX asks */
        const unsigned k = b * BLOCK + i;
        if (block[i].seq != atomic_load_explicit(&keys[k].seq, memory_order_acquire)) continue;
        destructor_fn d = atomic_load_explicit(&keys[k].destructor, memory_order_acquire);
        if (d != NULL) {
          d(value);
          ran = true;
        }
      }
    }
    if (!ran) break;
  }
  struct slot** table = t_blocks;
  if (table == NULL) return;
  /* A value set after this (by a later thread-exit handler) starts anew. */
  t_blocks = NULL;
  for (unsigned b = 0; b < BLOCKS; ++b) free(table[b]);
  free(table);
}

unsigned mpk_keys_in_use(void) {
  unsigned n = 0;
  for (unsigned k = 0; k < MPK_KEYS_MAX; ++k) {
    n += in_use(atomic_load_explicit(&keys[k].seq, memory_order_relaxed));
  }
  return n;
}
