#include "options.h"

#include "bench_util.h"
#include "cli.h"

#ifndef MANYPY_BENCH_ARCHIVES
#define MANYPY_BENCH_ARCHIVES "archives"
#endif

static const char kUsage[] =
    "usage: manypy_bench_peers [--quick] [--seconds S] [--warmup W] [--rounds R] [--n LIST]\n"
    "                          [--models LIST] [--big-mb MB] [--archives DIR] [--chart PNG]\n"
    "  --quick         smoke run: N = 1, S = 0.3, W = 0.2, 1 round, a 64 MB big model\n"
    "  --seconds S     measured seconds per design and round (default 3)\n"
    "  --warmup W      warm-up seconds before measuring (default 1)\n"
    "  --rounds R      rounds; designs alternate their order (default 2)\n"
    "  --n LIST        values of N, comma-separated (default 1,2,4)\n"
    "  --models LIST   models to run, comma-separated: python_heavy, resnet18, big_light,\n"
    "                  identity (default: all)\n"
    "  --big-mb MB     weights of the big model, made on first use (default 512)\n"
    "  --archives DIR  the sample archives (default: the build's, target manypy_archives)\n"
    "  --chart PNG     also write the chart (and PNG's .tsv of the figures)\n";

void options_parse(int argc, char** argv, options* o) {
  *o = (options){.seconds = 3,
                 .warmup = 1,
                 .rounds = 2,
                 .big_mb = 512,
                 .ns = {1, 2, 4},
                 .nn = 3,
                 .archives = MANYPY_BENCH_ARCHIVES};
  int child[4], nchild = 0;
  cli_option opts[] = {
      CLI_OPT_FLAG("--quick", &o->quick),
      CLI_OPT_NUMBER("--seconds", &o->seconds, 0.05, 3600),
      CLI_OPT_NUMBER("--warmup", &o->warmup, 0, 600),
      CLI_OPT_INT("--rounds", &o->rounds, 1, 100),
      CLI_OPT_INT("--big-mb", &o->big_mb, 1, 8192),
      CLI_OPT_INT_LIST("--n", o->ns, 1, 15, MAX_NS, &o->nn),
      CLI_OPT_STRING("--archives", &o->archives),
      CLI_OPT_STRING("--chart", &o->chart),
      CLI_OPT_STRING("--models", &o->models),
      CLI_OPT_INT_LIST("--child", child, 0, 1 << 30, 4, &nchild),
  };
  const size_t n = sizeof opts / sizeof opts[0];
  cli_parse(argc, argv, opts, n, kUsage);
  if (cli_given(opts, n, "--child")) {
    if (nchild != 4) die("--child wants DESIGN,N,MODEL,FD");
    o->child = 1;
    o->child_design = child[0];
    o->child_n = child[1];
    o->child_model = child[2];
    o->child_fd = child[3];
  }
  if (o->quick) { /* explicit options still win */
    if (!cli_given(opts, n, "--seconds")) o->seconds = 0.3;
    if (!cli_given(opts, n, "--warmup")) o->warmup = 0.2;
    if (!cli_given(opts, n, "--rounds")) o->rounds = 1;
    if (!cli_given(opts, n, "--big-mb")) o->big_mb = 64;
    if (!cli_given(opts, n, "--n")) o->ns[0] = 1, o->nn = 1;
  }
}
