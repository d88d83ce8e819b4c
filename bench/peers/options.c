#include "options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

#ifndef MANYPY_BENCH_ARCHIVES
#define MANYPY_BENCH_ARCHIVES "archives"
#endif

static const char kUsage[] =
    "usage: manypy_bench_peers [--quick] [--seconds S] [--warmup W] [--rounds R] [--n LIST]\n"
    "                          [--big-mb MB] [--archives DIR] [--chart PNG]\n"
    "  --quick         smoke run: N = 1, S = 0.3, W = 0.2, 1 round, a 64 MB big model\n"
    "  --seconds S     measured seconds per design and round (default 3)\n"
    "  --warmup W      warm-up seconds before measuring (default 1)\n"
    "  --rounds R      rounds; designs alternate their order (default 2)\n"
    "  --n LIST        values of N, comma-separated (default 1,2,4)\n"
    "  --big-mb MB     weights of the big model, made on first use (default 512)\n"
    "  --archives DIR  the sample archives (default: the build's, target manypy_archives)\n"
    "  --chart PNG     also write the chart (and PNG's .tsv of the figures)\n";

static double number(const char* opt, const char* s, double lo, double hi) {
  char* end = NULL;
  const double v = s ? strtod(s, &end) : 0;
  if (!s || *end || !(v >= lo && v <= hi)) {
    fprintf(stderr, "manypy_bench_peers: %s needs a number in [%g, %g]\n%s", opt, lo, hi, kUsage);
    exit(2);
  }
  return v;
}

static void parse_ns(const char* s, options* o) {
  o->nn = 0;
  char buf[64];
  snprintf(buf, sizeof buf, "%s", s ? s : "");
  for (char* tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
    if (o->nn == MAX_NS) break;
    o->ns[o->nn++] = (int)number("--n", tok, 1, 15);
  }
  if (o->nn == 0) number("--n", NULL, 1, 15);
}

void options_parse(int argc, char** argv, options* o) {
  *o = (options){.seconds = 3, .warmup = 1, .rounds = 2, .big_mb = 512, .ns = {1, 2, 4},
                 .nn = 3, .archives = MANYPY_BENCH_ARCHIVES};
  int seconds_set = 0, warmup_set = 0, rounds_set = 0, big_set = 0, n_set = 0;
  for (int k = 1; k < argc; ++k) {
    const char* a = argv[k];
    const char* v = k + 1 < argc ? argv[k + 1] : NULL;
    if (!strcmp(a, "--quick")) {
      o->quick = 1;
      continue;
    }
    if (!strcmp(a, "--child") && k + 4 < argc) {
      o->child = 1;
      o->child_design = atoi(argv[k + 1]);
      o->child_n = atoi(argv[k + 2]);
      o->child_model = atoi(argv[k + 3]);
      o->child_fd = atoi(argv[k + 4]);
      k += 4;
      continue;
    }
    if (!v || !strcmp(a, "--help")) {
      fprintf(stderr, "%s", kUsage);
      exit(strcmp(a, "--help") ? 2 : 0);
    }
    ++k;
    if (!strcmp(a, "--seconds")) o->seconds = number(a, v, 0.05, 3600), seconds_set = 1;
    else if (!strcmp(a, "--warmup")) o->warmup = number(a, v, 0, 600), warmup_set = 1;
    else if (!strcmp(a, "--rounds")) o->rounds = (int)number(a, v, 1, 100), rounds_set = 1;
    else if (!strcmp(a, "--big-mb")) o->big_mb = (int)number(a, v, 1, 8192), big_set = 1;
    else if (!strcmp(a, "--n")) parse_ns(v, o), n_set = 1;
    else if (!strcmp(a, "--archives")) o->archives = v;
    else if (!strcmp(a, "--chart")) o->chart = v;
    else {
      fprintf(stderr, "manypy_bench_peers: unknown option %s\n%s", a, kUsage);
      exit(2);
    }
  }
  if (o->quick) { /* explicit options still win */
    if (!seconds_set) o->seconds = 0.3;
    if (!warmup_set) o->warmup = 0.2;
    if (!rounds_set) o->rounds = 1;
    if (!big_set) o->big_mb = 64;
    if (!n_set) o->ns[0] = 1, o->nn = 1;
  }
}
