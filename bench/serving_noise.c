#include "serving_noise.h"

#include <stdio.h>

/* The pipe-echo children of section B: their CPU is ours, not "other". */
pid_t g_children[SERVING_MAX_CHILDREN];
int g_child_count;

/* This process and its pipe-echo children. */
cpu_sample cpu_now_ours(void) { return cpu_now(g_children, g_child_count); }

/* /proc counts CPU time in ticks (1/100 s), so a window much shorter than
 * this says nothing about load. */
const double kMinCpuWindow = 0.1;

noise_tally g_noise;

/* cpu_add, and the run-wide noise of the closing summary. */
void cpu_record(cpu_use* u, cpu_sample a, cpu_sample b) {
  cpu_use one = {0, 0, 0};
  cpu_add(&one, a, b);
  noise_tally_add(&g_noise, &one);
  u->ours_s += one.ours_s;
  u->other_s += one.other_s;
  u->wall_s += one.wall_s;
}

/* "cpu other" for a table: "-" when the window was too short to tell. */
const char* other_cell(const cpu_use* u, char* buf, size_t len) {
  if (u->wall_s < kMinCpuWindow) {
    snprintf(buf, len, "-");
  } else {
    snprintf(buf, len, "%.2f", cpu_cores_other(u));
  }
  return buf;
}
