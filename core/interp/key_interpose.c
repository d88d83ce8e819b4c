/* The pthread and C11 key functions, defined by the interpreter library so
 * that every library in its namespace binds to them rather than to the
 * namespace libc's (key_space.h says why). They are the only symbols the
 * library exports besides manypy_interp_get_api, and it is loaded only into
 * link-map namespaces, never into the host's. */
#include <errno.h>
#include <pthread.h>
#include <threads.h>

#include "key_space.h"

#define EXPORT __attribute__((visibility("default")))

EXPORT int pthread_key_create(pthread_key_t* key, void (*destructor)(void*)) {
  return mpk_key_create(key, destructor);
}

/* glibc's older name; some libraries built against old glibc call it. */
EXPORT int __pthread_key_create(pthread_key_t* key, void (*destructor)(void*)) {
  return mpk_key_create(key, destructor);
}

EXPORT int pthread_key_delete(pthread_key_t key) { return mpk_key_delete(key); }

EXPORT void* pthread_getspecific(pthread_key_t key) { return mpk_getspecific(key); }

EXPORT int pthread_setspecific(pthread_key_t key, const void* value) {
  return mpk_setspecific(key, value);
}

EXPORT int tss_create(tss_t* key, tss_dtor_t destructor) {
  return mpk_key_create(key, destructor) == 0 ? thrd_success : thrd_error;
}

EXPORT void tss_delete(tss_t key) { (void)mpk_key_delete(key); }

EXPORT void* tss_get(tss_t key) { return mpk_getspecific(key); }

EXPORT int tss_set(tss_t key, void* value) {
  return mpk_setspecific(key, value) == 0 ? thrd_success : thrd_error;
}
