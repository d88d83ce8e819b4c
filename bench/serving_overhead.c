#define _GNU_SOURCE
#include "serving_overhead.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "serving_noise.h"

/* `calls` timed manypy_object_calls on this thread with `options`, args
 * built once, each result freed inside the timed span, after `warm` untimed
 * ones; latencies go to `s`. */
void time_calls(manypy_object* object, const manypy_value* args, const manypy_call_options* options,
                long calls, long warm, samples* s) {
  for (long k = 0; k < warm; ++k) {
    manypy_value* out = NULL;
    CHECK(manypy_object_call(object, NULL, args, NULL, options, &out), "manypy_object_call");
    manypy_value_free(out);
  }
  for (long k = 0; k < calls; ++k) {
    manypy_value* out = NULL;
    const int64_t t0 = now_ns();
    manypy_status* st = manypy_object_call(object, NULL, args, NULL, options, &out);
    manypy_value_free(out);
    const int64_t t1 = now_ns();
    if (st) die_status("manypy_object_call", st);
    samples_push(s, t1 - t0);
  }
}

/* (i): manypy_object_call on one thread, args built once, each result freed. */
lat_result time_c_api(manypy_object* object, const manypy_value* args, long calls, long warm) {
  samples s = {0};
  lat_result r = {0};
  const cpu_sample c0 = cpu_now_ours();
  time_calls(object, args, NULL, calls, warm, &s);
  cpu_record(&r.cpu, c0, cpu_now_ours());
  r.p50_ns = samples_quantile(&s, 0.50);
  r.p99_ns = samples_quantile(&s, 0.99);
  r.calls = calls;
  free(s.v);
  return r;
}

/* Defines, in an interpreter, the same model loaded by Python itself with
 * torch.package, and a timing loop of model(x) (under torch.no_grad(), as
 * manypy's calls run) that returns [p50 ns, p99 ns]. x is a tensor of the
 * given shape, or the int 1 when the shape is None. */
static const char kPythonTimingLoop[] =
    "import time\n"
    "import torch\n"
    "from torch.package import PackageImporter\n"
    "_bench_model = PackageImporter(_bench_path).load_pickle('model', 'model.pkl')\n"
    "def _bench_identity(shape, n, warm):\n"
    "    m = _bench_model\n"
    "    x = 1 if shape is None else torch.rand(shape)\n"
    "    pc = time.perf_counter_ns\n"
    "    with torch.no_grad():\n"
    "        if m(x) is not x:\n"
    "            raise AssertionError('identity did not return its input')\n"
    "        for _ in range(warm):\n"
    "            m(x)\n"
    "        ts = [0] * n\n"
    "        for i in range(n):\n"
    "            t0 = pc()\n"
    "            m(x)\n"
    "            ts[i] = pc() - t0\n"
    "    ts.sort()\n"
    "    q = lambda p: ts[int(p * (n - 1) + 0.5)]\n"
    "    return [q(0.50), q(0.99)]\n";

/* A Python string literal for `s` (escapes quotes and backslashes). */
static void python_literal(char* out, size_t len, const char* s) {
  size_t o = 0;
  if (o + 1 < len) out[o++] = '\'';
  for (; *s && o + 3 < len; ++s) {
    if (*s == '\'' || *s == '\\') out[o++] = '\\';
    out[o++] = *s;
  }
  if (o + 1 < len) out[o++] = '\'';
  out[o] = '\0';
}

void setup_python_loop(manypy_pool* pool, const char* identity_path) {
  char lit[4200], src[4400];
  python_literal(lit, sizeof lit, identity_path);
  snprintf(src, sizeof src, "_bench_path = %s\n", lit);
  CHECK(manypy_pool_exec(pool, 0, src), "manypy_pool_exec(_bench_path)");
  CHECK(manypy_pool_exec(pool, 0, kPythonTimingLoop), "manypy_pool_exec(timing loop)");
}

/* (ii): model(x) timed inside the interpreter; ndim < 0: x is the int 1. */
lat_result time_python(manypy_pool* pool, int ndim, const int64_t* shape, long calls, long warm) {
  char shape_s[128] = "None";
  if (ndim >= 0) {
    int len = snprintf(shape_s, sizeof shape_s, "(");
    for (int k = 0; k < ndim; ++k) {
      len += snprintf(shape_s + len, sizeof shape_s - (size_t)len, "%" PRId64 ",", shape[k]);
    }
    snprintf(shape_s + len, sizeof shape_s - (size_t)len, ")");
  }
  char expr[256];
  snprintf(expr, sizeof expr, "_bench_identity(%s, %ld, %ld)", shape_s, calls, warm);
  lat_result r = {0};
  manypy_value* v = NULL;
  const cpu_sample c0 = cpu_now_ours();
  CHECK(manypy_pool_eval(pool, 0, expr, &v), "manypy_pool_eval(_bench_identity)");
  cpu_record(&r.cpu, c0, cpu_now_ours());
  const manypy_value *p50 = NULL, *p99 = NULL;
  int64_t a = 0, b = 0;
  CHECK(manypy_value_get_item(v, 0, &p50), "manypy_value_get_item");
  CHECK(manypy_value_get_item(v, 1, &p99), "manypy_value_get_item");
  CHECK(manypy_value_get_int64(p50, &a), "manypy_value_get_int64");
  CHECK(manypy_value_get_int64(p99, &b), "manypy_value_get_int64");
  manypy_value_free(v);
  r.p50_ns = (double)a;
  r.p99_ns = (double)b;
  r.calls = calls;
  return r;
}

/* The parent's ends of every worker's pipes. */
static int g_parent_fds[4];
static int g_parent_fd_count;

/* Forked before any manypy call or thread exists. The pipes get 1 MiB of
 * capacity where the system allows it, so a round trip of the large tensor
 * is one write each way: the fastest plain pipe, the strictest baseline. */
echo_child start_echo_child(size_t bytes) {
  int down[2], up[2];
  if (pipe(down) != 0 || pipe(up) != 0) die("pipe: %s", strerror(errno));
  int cap = -1;
  for (int k = 0; k < 2; ++k) {
    int fd = k == 0 ? down[1] : up[1];
    (void)fcntl(fd, F_SETPIPE_SZ, 1 << 20);
    int c = fcntl(fd, F_GETPIPE_SZ);
    if (cap < 0 || c < cap) cap = c;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) die("fork: %s", strerror(errno));
  if (pid == 0) {
    close(down[1]);
    close(up[0]);
    /* Our copies of earlier workers' pipe ends would keep them from
     * seeing the parent close theirs. */
    for (int k = 0; k < g_parent_fd_count; ++k) close(g_parent_fds[k]);
    char* buf = malloc(bytes);
    if (!buf) _exit(3);
    for (;;) {
      if (read_full(down[0], buf, bytes) != 0) _exit(0); /* parent closed: done */
      if (write_full(up[1], buf, bytes) != 0) _exit(4);
    }
  }
  close(down[0]);
  close(up[1]);
  echo_child c = {pid, down[1], up[0], bytes, cap};
  g_parent_fds[g_parent_fd_count++] = down[1];
  g_parent_fds[g_parent_fd_count++] = up[0];
  g_children[g_child_count++] = pid;
  return c;
}

void stop_echo_child(echo_child* c) {
  close(c->to_child);
  close(c->from_child);
  int status;
  while (waitpid(c->pid, &status, 0) < 0) {
    if (errno != EINTR) die("waitpid: %s", strerror(errno));
  }
  for (int k = 0; k < g_child_count; ++k) {
    if (g_children[k] == c->pid) g_children[k] = g_children[--g_child_count];
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    die("the pipe-echo worker process failed (status 0x%x)", status);
  }
}

lat_result time_pipe(echo_child* c, const void* data, long calls, long warm) {
  samples s = {0};
  lat_result r = {0};
  char* back = xmalloc(c->bytes);
  const cpu_sample c0 = cpu_now_ours();
  for (long k = 0; k < warm + calls; ++k) {
    const int64_t t0 = now_ns();
    if (write_full(c->to_child, data, c->bytes) != 0)
      die("write to the echo worker: %s", strerror(errno));
    if (read_full(c->from_child, back, c->bytes) != 0) die("read from the echo worker failed");
    const int64_t t1 = now_ns();
    if (k >= warm) samples_push(&s, t1 - t0);
  }
  cpu_record(&r.cpu, c0, cpu_now_ours());
  if (memcmp(back, data, c->bytes) != 0) die("the echo worker sent back different bytes");
  free(back);
  r.p50_ns = samples_quantile(&s, 0.50);
  r.p99_ns = samples_quantile(&s, 0.99);
  r.calls = calls;
  free(s.v);
  return r;
}
