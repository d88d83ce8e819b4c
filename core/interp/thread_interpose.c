/* pthread_create inside a namespace: every thread is created by the host's
 * libc (docs/isolation.md, hazard 11).
 *
 * Thread stacks are cached for reuse in a list that ld.so keeps for the
 * whole process, shared by every libc in it. A libc that takes a cached
 * stack frees the dynamic TLS blocks its last thread left with its own
 * free(), but ld.so allocated those blocks with the host libc's malloc. So a
 * thread that a namespace libc created on a stack some earlier thread had
 * used (a host thread, or a Python thread that ran torch) freed a foreign
 * chunk: seen as SIGSEGV in _int_free, from model code that started threads
 * which started threads.
 *
 * Defined here, in the namespace's first object, pthread_create serves every
 * library of the namespace (as the key functions of key_interpose.c do) and
 * hands the work to the host libc's pthread_create, whose frees match ld.so's
 * mallocs. The new thread first does what the namespace libc's thread start
 * would have done for it (its ctype tables), and as it returns, what its
 * thread exit would have (thread_local destructors, this namespace's key
 * destructors, the libc's per-thread caches). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))

typedef int (*create_fn)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);

struct libcs {
  create_fn host_create;      /* the host libc's */
  create_fn namespace_create; /* this namespace's, if the host's cannot be found */
  void (*ctype_init)(void);
  void (*call_tls_dtors)(void);
  void (*thread_freeres)(void);
};

static struct libcs g_libcs;
static pthread_once_t g_found = PTHREAD_ONCE_INIT;

static void find_libcs(void) {
  /* RTLD_NEXT from this library: the namespace's own libc. */
  g_libcs.namespace_create = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
  g_libcs.ctype_init = (void (*)(void))dlsym(RTLD_NEXT, "__ctype_init");
  g_libcs.call_tls_dtors = (void (*)(void))dlsym(RTLD_NEXT, "__call_tls_dtors");
  g_libcs.thread_freeres = (void (*)(void))dlsym(RTLD_NEXT, "__libc_thread_freeres");
  void* host_libc = dlmopen(LM_ID_BASE, "libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
  if (host_libc != NULL && g_libcs.ctype_init != NULL) {
    g_libcs.host_create = (create_fn)dlsym(host_libc, "pthread_create");
  }
}

struct start {
  void* (*fn)(void*);
  void* arg;
};

static void* start_in_namespace(void* p) {
  struct start s = *(struct start*)p;
  free(p);
  g_libcs.ctype_init();
  void* result = s.fn(s.arg);
  /* A thread that ends in pthread_exit skips these, as a host thread that
   * never entered manypy's clean-up would (hazard 10). */
  if (g_libcs.call_tls_dtors != NULL) g_libcs.call_tls_dtors();
  if (g_libcs.thread_freeres != NULL) g_libcs.thread_freeres();
  return result;
}

EXPORT int pthread_create(pthread_t* thread, const pthread_attr_t* attr,
                          void* (*start_routine)(void*), void* arg) {
  pthread_once(&g_found, find_libcs);
  if (g_libcs.host_create == NULL) {
    return g_libcs.namespace_create != NULL
               ? g_libcs.namespace_create(thread, attr, start_routine, arg)
               : ENOSYS;
  }
  struct start* s = malloc(sizeof *s);
  if (s == NULL) return EAGAIN;
  s->fn = start_routine;
  s->arg = arg;
  int rc = g_libcs.host_create(thread, attr, start_in_namespace, s);
  if (rc != 0) free(s);
  return rc;
}
