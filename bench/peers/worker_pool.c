#define _GNU_SOURCE
#include "worker_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"

/* worker.py's messages: little-endian int64s (x86-64 is little-endian). */
typedef struct request_header {
  int64_t ndim, shape[4], nbytes;
} request_header;

typedef struct reply_entry {
  int64_t kind, ndim, shape[4], offset_or_value, nbytes;
  char key[16];
} reply_entry;

enum { REPLY_MAX = 8 + POOL_MAX_OUTPUTS * sizeof(reply_entry) + 4096 };

typedef struct worker {
  pid_t pid;
  int sock;
  int ready;
  unsigned char* shm;
} worker;

struct worker_pool {
  int n;
  size_t in_cap, out_cap;
  worker* w;
  pid_t* pids;
  pthread_mutex_t mu;
  pthread_cond_t freed;
  int* free_list; /* indices of free workers: a stack */
  int nfree;
};

static size_t page_round(size_t n) { return (n + 4095) / 4096 * 4096; }

/* Forks and execs one worker with its socket as fd 3, its memfd as fd 4. */
static pid_t spawn_worker(const char* python, const char* worker_py, const char* archive,
                          const worker_pool* p, int sock, int memfd) {
  char in_s[32], out_s[32];
  snprintf(in_s, sizeof in_s, "%zu", p->in_cap);
  snprintf(out_s, sizeof out_s, "%zu", p->out_cap);
  const pid_t pid = fork();
  if (pid < 0) die("fork: %s", strerror(errno));
  if (pid > 0) return pid;
  /* Child: only async-signal-safe calls until exec. Move both fds above 4
   * first, so that dup2 onto 3 and 4 cannot clobber either. */
  const int s = fcntl(sock, F_DUPFD, 10), m = fcntl(memfd, F_DUPFD, 10);
  if (s < 0 || m < 0 || dup2(s, 3) < 0 || dup2(m, 4) < 0) _exit(127);
  char* argv[] = {(char*)python, (char*)worker_py, (char*)archive, in_s, out_s, NULL};
  execv(python, argv);
  _exit(127);
}

worker_pool* worker_pool_start(int n, const char* python, const char* worker_py,
                               const char* archive, size_t in_bytes, size_t out_bytes) {
  worker_pool* p = xmalloc(sizeof *p);
  memset(p, 0, sizeof *p);
  p->n = n;
  p->in_cap = page_round(in_bytes);
  p->out_cap = page_round(out_bytes + POOL_MAX_OUTPUTS * 64);
  p->w = xmalloc((size_t)n * sizeof *p->w);
  p->pids = xmalloc((size_t)n * sizeof *p->pids);
  p->free_list = xmalloc((size_t)n * sizeof *p->free_list);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->freed, NULL);
  for (int k = 0; k < n; ++k) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
      die("socketpair: %s", strerror(errno));
    }
    const int memfd = memfd_create("manypy-peer-worker", MFD_CLOEXEC);
    if (memfd < 0 || ftruncate(memfd, (off_t)(p->in_cap + p->out_cap)) != 0) {
      die("memfd_create/ftruncate: %s", strerror(errno));
    }
    void* shm = mmap(NULL, p->in_cap + p->out_cap, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (shm == MAP_FAILED) die("mmap: %s", strerror(errno));
    p->w[k] = (worker){spawn_worker(python, worker_py, archive, p, sv[1], memfd), sv[0], 0, shm};
    p->pids[k] = p->w[k].pid;
    close(sv[1]);
    close(memfd); /* the mapping keeps the memory */
  }
  return p;
}

/* Receives one message; dies naming the worker if it exited. */
static ssize_t recv_message(worker_pool* p, int k, void* buf, size_t len, char* err,
                            size_t errlen) {
  ssize_t got;
  do {
    got = recv(p->w[k].sock, buf, len, 0);
  } while (got < 0 && errno == EINTR);
  if (got <= 0) {
    snprintf(err, errlen, "worker %d (pid %d) %s", k, (int)p->w[k].pid,
             got == 0 ? "exited (see its messages above)" : strerror(errno));
    return -1;
  }
  return got;
}

int worker_pool_next_ready(worker_pool* p) {
  struct pollfd fds[64];
  int idx[64], m = 0;
  for (int k = 0; k < p->n && m < 64; ++k) {
    if (!p->w[k].ready) {
      fds[m] = (struct pollfd){p->w[k].sock, POLLIN, 0};
      idx[m++] = k;
    }
  }
  if (m == 0) return -1;
  while (poll(fds, (nfds_t)m, -1) < 0) {
    if (errno != EINTR) die("poll: %s", strerror(errno));
  }
  for (int j = 0; j < m; ++j) {
    if (!fds[j].revents) continue;
    const int k = idx[j];
    int64_t count = -2;
    char err[256];
    if (recv_message(p, k, &count, sizeof count, err, sizeof err) < 0) die("%s", err);
    if (count != 0) die("worker %d: unexpected first message", k);
    p->w[k].ready = 1;
    pthread_mutex_lock(&p->mu);
    p->free_list[p->nfree++] = k;
    pthread_mutex_unlock(&p->mu);
    return k;
  }
  die("poll returned without a ready worker");
}

static int parse_reply(const worker_pool* p, const worker* w, const unsigned char* msg, ssize_t len,
                       pool_reply* reply, char* err, size_t errlen) {
  int64_t count;
  memcpy(&count, msg, sizeof count);
  if (count < 0) {
    snprintf(err, errlen, "the worker raised:\n%.*s", (int)(len - 8), (const char*)msg + 8);
    return -1;
  }
  if (count > POOL_MAX_OUTPUTS || len != 8 + count * (ssize_t)sizeof(reply_entry)) {
    snprintf(err, errlen, "malformed reply (%zd bytes, %lld outputs)", len, (long long)count);
    return -1;
  }
  reply->count = (int)count;
  for (int k = 0; k < count; ++k) {
    reply_entry e;
    memcpy(&e, msg + 8 + k * sizeof e, sizeof e);
    pool_output* o = &reply->out[k];
    memcpy(o->key, e.key, 16);
    o->key[16] = '\0';
    o->kind = (int)e.kind;
    o->ndim = (int32_t)e.ndim;
    memcpy(o->shape, e.shape, sizeof o->shape);
    o->value = e.kind == 1 ? e.offset_or_value : 0;
    o->data = NULL;
    if (e.kind == 0) {
      if (e.offset_or_value < (int64_t)p->in_cap || e.ndim > 4 ||
          e.offset_or_value + e.nbytes > (int64_t)(p->in_cap + p->out_cap)) {
        snprintf(err, errlen, "reply output '%s' outside the shared memory", o->key);
        return -1;
      }
      o->data = (const float*)(w->shm + e.offset_or_value);
    }
  }
  return 0;
}

int worker_pool_call_on(worker_pool* p, int index, const void* input, size_t nbytes, int32_t ndim,
                        const int64_t* shape, pool_reply* reply, char* err, size_t errlen) {
  worker* w = &p->w[index];
  if (nbytes > p->in_cap || ndim > 4) {
    snprintf(err, errlen, "input of %zu bytes, %d dimensions does not fit", nbytes, ndim);
    return -1;
  }
  memcpy(w->shm, input, nbytes); /* the host's one copy, into the shared memory */
  request_header h = {ndim, {0, 0, 0, 0}, (int64_t)nbytes};
  for (int k = 0; k < ndim; ++k) h.shape[k] = shape[k];
  if (send(w->sock, &h, sizeof h, MSG_NOSIGNAL) != (ssize_t)sizeof h) {
    snprintf(err, errlen, "send to worker %d: %s", index, strerror(errno));
    return -1;
  }
  unsigned char msg[REPLY_MAX];
  const ssize_t len = recv_message(p, index, msg, sizeof msg, err, errlen);
  if (len < 0) return -1;
  if (len < 8) {
    snprintf(err, errlen, "short reply from worker %d", index);
    return -1;
  }
  return parse_reply(p, w, msg, len, reply, err, errlen);
}

int worker_pool_call(worker_pool* p, const void* input, size_t nbytes, int32_t ndim,
                     const int64_t* shape, pool_reply* reply, char* err, size_t errlen) {
  pthread_mutex_lock(&p->mu);
  while (p->nfree == 0) pthread_cond_wait(&p->freed, &p->mu);
  const int k = p->free_list[--p->nfree];
  pthread_mutex_unlock(&p->mu);
  const int rc = worker_pool_call_on(p, k, input, nbytes, ndim, shape, reply, err, errlen);
  pthread_mutex_lock(&p->mu);
  p->free_list[p->nfree++] = k;
  pthread_cond_signal(&p->freed);
  pthread_mutex_unlock(&p->mu);
  return rc;
}

int worker_pool_size(const worker_pool* p) { return p->n; }
const pid_t* worker_pool_pids(const worker_pool* p) { return p->pids; }

void worker_pool_stop(worker_pool* p) {
  for (int k = 0; k < p->n; ++k) close(p->w[k].sock);
  for (int k = 0; k < p->n; ++k) {
    int status = 0;
    while (waitpid(p->w[k].pid, &status, 0) < 0 && errno == EINTR) {
    }
    munmap(p->w[k].shm, p->in_cap + p->out_cap);
  }
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->freed);
  free(p->free_list);
  free(p->pids);
  free(p->w);
  free(p);
}
