#define _GNU_SOURCE
#include "runner.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* On the pipe: the run_result struct as it is (parent and child are the
 * same program), then its lat.n latencies; the pointer sent is ignored. */

/* Writes all of p, or dies. */
static void write_all(int fd, const void* p, size_t n) {
  if (write_full(fd, p, n) != 0) die("writing the result: %s", strerror(errno));
}

void runner_child(const run_config* c, int fd) {
  run_result r;
  design_run(c, &r);
  write_all(fd, &r, sizeof r);
  write_all(fd, r.lat.v, r.lat.n * sizeof *r.lat.v);
  close(fd);
  free(r.lat.v);
}

void runner_run(const run_config* c, int model_index, char* const* base_args, run_result* r) {
  int fds[2];
  if (pipe(fds) != 0) die("pipe: %s", strerror(errno)); /* inherited: no O_CLOEXEC */
  char which[64];
  snprintf(which, sizeof which, "%d,%d,%d,%d", (int)c->d, c->n, model_index, fds[1]);
  int argc = 0;
  while (base_args[argc]) ++argc;
  char** argv = xmalloc((size_t)(argc + 3) * sizeof *argv);
  memcpy(argv, base_args, (size_t)argc * sizeof *argv);
  char child[] = "--child";
  char* tail[] = {child, which, NULL};
  memcpy(argv + argc, tail, sizeof tail);
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) die("fork: %s", strerror(errno));
  if (pid == 0) {
    close(fds[0]);
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  free(argv);
  close(fds[1]);
  int ok = read_full(fds[0], r, sizeof *r) == 0;
  r->lat.v = NULL;
  if (ok) {
    r->lat.v = xmalloc(r->lat.n * sizeof *r->lat.v);
    r->lat.cap = r->lat.n;
    ok = read_full(fds[0], r->lat.v, r->lat.n * sizeof *r->lat.v) == 0;
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    die("%s, %s, N = %d failed (see above)", design_names[c->d], c->m->label, c->n);
  }
}

void runner_merge(run_result* acc, run_result* one) {
  acc->calls += one->calls;
  acc->elapsed += one->elapsed;
  acc->rate += one->rate;
  acc->first_s += one->first_s;
  acc->all_s += one->all_s;
  acc->pss_kb += one->pss_kb;
  acc->cpu.ours_s += one->cpu.ours_s;
  acc->cpu.other_s += one->cpu.other_s;
  acc->cpu.wall_s += one->cpu.wall_s;
  samples_append(&acc->lat, &one->lat);
  free(one->lat.v);
  one->lat.v = NULL;
}

void runner_mean(run_result* acc, int rounds) {
  acc->rate /= rounds;
  acc->first_s /= rounds;
  acc->all_s /= rounds;
  acc->pss_kb /= rounds;
}
