#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void samples_push(samples* s, int64_t x) {
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 1024;
    s->v = realloc(s->v, s->cap * sizeof *s->v);
    if (!s->v) die("out of memory");
  }
  s->v[s->n++] = x;
}

void samples_append(samples* s, const samples* from) {
  for (size_t k = 0; k < from->n; ++k) samples_push(s, from->v[k]);
}

double samples_quantile(samples* s, double q) {
  if (s->n == 0) return NAN;
  qsort(s->v, s->n, sizeof *s->v, cmp_i64);
  return (double)s->v[(size_t)(q * (double)(s->n - 1) + 0.5)];
}

/* utime + stime (+ waited-for children's) of /proc/<pid>/stat, in ticks. */
static unsigned long long proc_ticks(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, pid ? "/proc/%d/stat" : "/proc/self/stat", (int)pid);
  FILE* f = fopen(path, "r");
  if (!f) return 0;
  char buf[2048];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  const char* p = strrchr(buf, ')'); /* the command name may hold spaces */
  unsigned long long ut = 0, st = 0;
  long long cut = 0, cst = 0;
  if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld", &ut,
                  &st, &cut, &cst) == 4) {
    return ut + st + (unsigned long long)cut + (unsigned long long)cst;
  }
  return 0;
}

cpu_sample cpu_now(const pid_t* pids, int npids) {
  cpu_sample s = {proc_ticks(0), 0, now_s()};
  for (int k = 0; k < npids; ++k) s.ours += proc_ticks(pids[k]);
  FILE* f = fopen("/proc/stat", "r");
  if (f) {
    unsigned long long v[8] = {0};
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
               &v[5], &v[6], &v[7]) == 8) {
      s.machine = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]; /* all but idle, iowait */
    }
    fclose(f);
  }
  return s;
}

void cpu_add(cpu_use* u, cpu_sample a, cpu_sample b) {
  const double hz = (double)sysconf(_SC_CLK_TCK);
  const double ours = (double)(b.ours - a.ours) / hz;
  double other = ((double)(b.machine - a.machine) - (double)(b.ours - a.ours)) / hz;
  u->ours_s += ours;
  u->other_s += other > 0 ? other : 0;
  u->wall_s += b.t - a.t;
}

double cpu_cores_ours(const cpu_use* u) { return u->wall_s > 0 ? u->ours_s / u->wall_s : 0; }
double cpu_cores_other(const cpu_use* u) { return u->wall_s > 0 ? u->other_s / u->wall_s : 0; }

void noise_tally_add(noise_tally* t, const cpu_use* u) {
  if (u->wall_s < 0.1) return;
  const double cores = cpu_cores_other(u);
  t->sum += cores;
  t->max = cores > t->max ? cores : t->max;
  ++t->runs;
}

void noise_summary(const noise_tally* t, const char* what) {
  char load[128] = "?";
  FILE* f = fopen("/proc/loadavg", "r");
  if (f) {
    if (!fgets(load, sizeof load, f)) strcpy(load, "?");
    fclose(f);
    load[strcspn(load, "\n")] = '\0';
  }
  printf("\nload average at the end (/proc/loadavg): %s\n", load);
  printf("CPU used by other processes during %s: mean %.2f, max %.2f cores of %ld%s\n", what,
         t->runs ? t->sum / t->runs : 0.0, t->max, sysconf(_SC_NPROCESSORS_ONLN),
         t->max > 0.25 ? " (rows with 'cpu other' above ~0.25 were disturbed: re-run on a "
                         "quiet machine before quoting their ratios)"
                       : "");
}

long pss_kb(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, pid ? "/proc/%d/smaps_rollup" : "/proc/self/smaps_rollup", (int)pid);
  FILE* f = fopen(path, "r");
  if (!f) return -1;
  char line[256];
  long kb = -1;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "Pss: %ld kB", &kb) == 1) break;
  }
  fclose(f);
  return kb;
}

int file_exists(const char* path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* read_full and write_full: one loop, the direction aside. */
static int transfer_full(int fd, char* p, size_t n, int writing) {
  while (n > 0) {
    errno = 0;
    const ssize_t done = writing ? write(fd, p, n) : read(fd, p, n);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) return -1;
    p += done;
    n -= (size_t)done;
  }
  return 0;
}

int read_full(int fd, void* buf, size_t n) { return transfer_full(fd, buf, n, 0); }

/* write() only reads the buffer; transfer_full takes a char* for both. */
int write_full(int fd, const void* buf, size_t n) { return transfer_full(fd, (char*)buf, n, 1); }

void* read_archive_file(const char* dir, const char* name, size_t* size) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE* f = fopen(path, "rb");
  if (!f) {
    die("cannot open %s: %s (build the target manypy_archives, or pass --archives DIR)", path,
        strerror(errno));
  }
  struct stat st;
  if (fstat(fileno(f), &st) != 0) die("cannot stat %s: %s", path, strerror(errno));
  const size_t n = (size_t)st.st_size;
  void* data = NULL;
  if (posix_memalign(&data, 64, n ? n : 64) != 0) die("out of memory");
  if (n && fread(data, 1, n, f) != n) die("cannot read %s", path);
  fclose(f);
  *size = n;
  return data;
}

void ratio_header(const char* title) {
  printf("\n%-70s %8s %10s %8s\n", title, "value", "target", "verdict");
}

int ratio_row(const char* what, double value, int at_least, double target) {
  const int ok = at_least ? value >= target : value <= target;
  char t[32];
  snprintf(t, sizeof t, "%s %.2fx", at_least ? ">=" : "<=", target);
  printf("%-70s %7.2fx %10s %8s\n", what, value, t, verdict(ok));
  return ok;
}

void ratio_info(const char* what, double value) {
  printf("%-70s %7.2fx %10s %8s\n", what, value, "(info)", "");
}
