/* The command line of manypy_bench_peers. */
#ifndef MANYPY_BENCH_PEERS_OPTIONS_H
#define MANYPY_BENCH_PEERS_OPTIONS_H

enum { MAX_NS = 8 };

typedef struct options {
  int quick;
  double seconds, warmup;
  int rounds;
  int big_mb;
  int ns[MAX_NS], nn; /* the values of N */
  const char* archives;
  const char* chart;  /* PNG to write, or NULL */
  const char* models; /* --models: comma-separated labels, or NULL for every model */
  /* --child D,N,MODEL,FD: run one design and write its result to FD. */
  int child, child_design, child_n, child_model, child_fd;
} options;

/* Parses argv (bench/cli.h); prints the usage and exits 2 on a bad option. */
void options_parse(int argc, char** argv, options* o);

#endif
