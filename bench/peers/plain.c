#define _GNU_SOURCE
#include "plain.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct plain_proc {
  pid_t pid;
  FILE* to;   /* its stdin */
  FILE* from; /* its stdout */
  char latency_file[64];
} plain_proc;

static void spawn_plain(plain_proc* pp, const char* python, const char* plain_py,
                        const char* archive, double warmup, double seconds) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) die("pipe: %s", strerror(errno));
  snprintf(pp->latency_file, sizeof pp->latency_file, "/tmp/manypy-peers-XXXXXX");
  const int fd = mkstemp(pp->latency_file);
  if (fd < 0) die("mkstemp: %s", strerror(errno));
  close(fd);
  char w[32], s[32];
  snprintf(w, sizeof w, "%g", warmup);
  snprintf(s, sizeof s, "%g", seconds);
  pp->pid = fork();
  if (pp->pid < 0) die("fork: %s", strerror(errno));
  if (pp->pid == 0) {
    if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0) _exit(127);
    char* argv[] = {(char*)python, (char*)plain_py, (char*)archive, w, s, pp->latency_file, NULL};
    execv(python, argv);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  pp->to = fdopen(in[1], "w");
  pp->from = fdopen(out[0], "r");
  if (!pp->to || !pp->from) die("fdopen: %s", strerror(errno));
}

/* One line from process k, which must start with `want`. */
static void expect_line(plain_proc* pp, int k, const char* want, char* line, size_t len) {
  if (!fgets(line, (int)len, pp->from) || strncmp(line, want, strlen(want)) != 0) {
    int status = 0;
    waitpid(pp->pid, &status, 0);
    die("plain process %d exited before saying '%s' (status %d; see its messages above)", k, want,
        WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
}

static void read_latencies(const char* file, samples* s) {
  FILE* f = fopen(file, "rb");
  if (!f) die("cannot open %s: %s", file, strerror(errno));
  int64_t v[4096];
  size_t n;
  while ((n = fread(v, sizeof *v, 4096, f)) > 0) {
    for (size_t k = 0; k < n; ++k) samples_push(s, v[k]);
  }
  fclose(f);
  unlink(file);
}

void plain_run(int n, const char* python, const char* plain_py, const char* archive, double warmup,
               double seconds, run_result* r) {
  memset(r, 0, sizeof *r);
  plain_proc* pp = xmalloc((size_t)n * sizeof *pp);
  pid_t* pids = xmalloc((size_t)n * sizeof *pids);
  char line[256];
  const double t0 = now_s();
  for (int k = 0; k < n; ++k) {
    spawn_plain(&pp[k], python, plain_py, archive, warmup, seconds);
    pids[k] = pp[k].pid;
  }
  /* Reading in order finds the first ready only up to the order of reading;
   * each process prints "ready" once loaded and checked, so the earliest
   * "ready" is read no later than the others. */
  for (int k = 0; k < n; ++k) {
    expect_line(&pp[k], k, "ready", line, sizeof line);
    if (k == 0) r->first_s = now_s() - t0;
  }
  r->all_s = now_s() - t0;
  for (int k = 0; k < n; ++k) fputs("go\n", pp[k].to);
  for (int k = 0; k < n; ++k) fflush(pp[k].to); /* as close together as two writes */
  const cpu_sample c0 = cpu_now(pids, n);
  for (int k = 0; k < n; ++k) {
    expect_line(&pp[k], k, "done", line, sizeof line);
    long calls = 0;
    double elapsed = 0;
    if (sscanf(line, "done %ld %lf", &calls, &elapsed) != 2 || elapsed <= 0) {
      die("plain process %d: bad result line '%s'", k, line);
    }
    r->calls += calls;
    r->rate += (double)calls / elapsed;
    if (elapsed > r->elapsed) r->elapsed = elapsed;
  }
  const cpu_sample c1 = cpu_now(pids, n);
  /* The warm-up is inside the window: the cpu columns cover warm-up and
   * measuring alike. */
  cpu_add(&r->cpu, c0, c1);
  for (int k = 0; k < n; ++k) {
    const long kb = pss_kb(pp[k].pid); /* still alive: waiting for stdin to close */
    if (kb < 0) die("cannot read the Pss of plain process %d", k);
    r->pss_kb += kb;
  }
  for (int k = 0; k < n; ++k) {
    fclose(pp[k].to);
    int status = 0;
    while (waitpid(pp[k].pid, &status, 0) < 0 && errno == EINTR) {
    }
    fclose(pp[k].from);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) die("plain process %d failed", k);
    read_latencies(pp[k].latency_file, &r->lat);
  }
  free(pids);
  free(pp);
}
