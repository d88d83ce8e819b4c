"""Draws the peers benchmark's chart from the figures it wrote.

  chart.py FIGURES.tsv OUT.png

One column per model; the top row is throughput against N, the bottom row
the total Pss of every process of the design against N; one line per
design.  Written by manypy_bench_peers --chart (docs/performance.md).
"""

import csv
import sys

import matplotlib

matplotlib.use("Agg")  # no display: write the file only
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {  # design: (colour, marker)
    "manypy": ("tab:blue", "o"),
    "worker pool": ("tab:red", "s"),
    "shared GIL": ("tab:gray", "v"),
    "N processes": ("black", "x"),
    "TorchScript": ("tab:green", "^"),
    "AOTInductor": ("tab:purple", "D"),  # torch 2.x leg, models with a .pt2
}


def main():
    tsv, png = sys.argv[1], sys.argv[2]
    with open(tsv, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    if not rows:
        sys.exit(f"chart.py: {tsv} has no figures")
    models = list(dict.fromkeys(r["model"] for r in rows))
    fig, axes = plt.subplots(2, len(models), figsize=(4.2 * len(models), 7.5), squeeze=False)
    for col, model in enumerate(models):
        for design, (colour, marker) in STYLE.items():
            pts = sorted((int(r["N"]), float(r["calls_per_s"]), float(r["pss_mb"]))
                         for r in rows if r["model"] == model and r["design"] == design)
            if not pts:
                continue
            ns = [p[0] for p in pts]
            style = dict(color=colour, marker=marker, label=design,
                         linestyle="--" if design == "N processes" else "-")
            axes[0][col].plot(ns, [p[1] for p in pts], **style)
            axes[1][col].plot(ns, [p[2] / 1024 for p in pts], **style)
        axes[0][col].set_title(model)
        for row, label in ((0, "calls/s"), (1, "total Pss, GB")):
            ax = axes[row][col]
            ax.set_xlabel("N (threads, interpreters or processes)")
            ax.set_ylabel(label)
            ax.set_xticks(sorted({int(r["N"]) for r in rows}))
            ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize="small")
    designs = {r["design"] for r in rows}
    fig.suptitle("manypy vs a worker pool, N plain processes (the ceiling), a shared GIL, "
                 "TorchScript" + (" and AOTInductor" if "AOTInductor" in designs else ""))
    fig.tight_layout()
    fig.savefig(png, dpi=90)


if __name__ == "__main__":
    main()
