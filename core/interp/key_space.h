/* key_space.c: the pthread keys of one link-map namespace, kept apart from
 * every other namespace's and from the host's (docs/isolation.md, hazard 3).
 *
 * Every namespace has its own libc with its own table of keys numbered from
 * 0, but every libc stores key values in the one thread descriptor of each
 * thread, so two namespaces' key 0 are the same slot. Rather than fence each
 * libc into a band of the process's 1024 keys (torch 2.x's CUDA libraries
 * take 96 keys per namespace, so 7 namespaces at most), the interpreter
 * library defines pthread_key_create and friends (key_interpose.c). It is
 * the first object of its namespace, so every library loaded there binds to
 * them and never to the namespace libc's. Keys then live here: a table of
 * 1024 per namespace, values in this library's own thread-local blocks. No
 * namespace touches the thread descriptor's key slots, and the host keeps all
 * of its 1024 keys.
 *
 * The semantics are POSIX's, as glibc implements them: keys are reused after
 * delete, a value set under a deleted key is never seen under its successor
 * (sequence numbers), and at thread exit each non-NULL value's destructor
 * runs, in up to MPK_DESTRUCTOR_ITERATIONS rounds while destructors set
 * values again. Thread exit is noticed through __cxa_thread_atexit_impl of
 * the namespace's libc: a thread that libc created runs it as it ends, and a
 * host thread that entered the namespace runs it from the host's clean-up
 * (Namespace::release_thread calls the namespace libc's __call_tls_dtors).
 *
 * All functions are thread-safe and async-signal-unsafe, as glibc's. */
#ifndef MANYPY_INTERP_KEY_SPACE_H
#define MANYPY_INTERP_KEY_SPACE_H

#define MPK_KEYS_MAX 1024u          /* PTHREAD_KEYS_MAX on glibc */
#define MPK_DESTRUCTOR_ITERATIONS 4 /* PTHREAD_DESTRUCTOR_ITERATIONS */

#ifdef __cplusplus
extern "C" {
#endif

/* 0, or EAGAIN when all MPK_KEYS_MAX keys are in use. */
int mpk_key_create(unsigned* key, void (*destructor)(void*));
/* 0, or EINVAL for a key not in use. Runs no destructor. */
int mpk_key_delete(unsigned key);
/* The calling thread's value of `key`; NULL if none or the key is not in use. */
void* mpk_getspecific(unsigned key);
/* 0; EINVAL for a key not in use; ENOMEM when the thread's block cannot be
 * allocated. Stores `value` without reading what it points to, which the
 * attribute says as glibc's pthread_setspecific does: without it, GCC warns
 * that pthread_setspecific passes an argument it may not read on to here. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
__attribute__((access(none, 2)))
#endif
int mpk_setspecific(unsigned key, const void* value);

/* Keys in use now (diagnostics and tests). */
unsigned mpk_keys_in_use(void);

#ifdef __cplusplus
}
#endif

#endif
