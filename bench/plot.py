"""Plot a `quantlay bench` CSV.

    python bench/plot.py RESULTS.csv OUT.png [--group G] [--copy GBPS]    GB/s against shape, a line per kernel
    python bench/plot.py RESULTS.csv OUT.png --bars                      % of the same-run copy, a bar per kernel
                                                                         at each shape (the README's chart)
    python bench/plot.py RESULTS.csv OUT.png --gemm                      TFLOP/s of the GEMMs, a bar per kernel
                                                                         at each M x N x K (the README's GEMM chart)

--group keeps one bench group (mxfp4, mxfp8, fp8, nvfp4, mxfp6); --copy replaces the CSV's copy figure where
that run's copy was not measured by plain launches. Peers are drawn dotted (lines) or hatched (bars).
"""
import argparse
import csv

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TITLES = {"mxfp4": "MXFP4 cast + transpose", "mxfp8": "MXFP8 cast, both directions", "fp8": "Blockwise FP8 casts",
          "nvfp4": "NVFP4 cast, both directions", "mxfp6": "MXFP6 cast, both directions"}


def lines(ax, rows, shapes, copy):
    for name in dict.fromkeys(r["kernel"] for r in rows):
        pts = {r["shape"]: float(r["gbps"]) for r in rows if r["kernel"] == name}
        ours = name.startswith("quantlay")
        ax.plot(shapes, [pts.get(s) for s in shapes], marker="o" if ours else "s", linestyle="-" if ours else ":",
                label=name)
    ax.axhline(copy, color="gray", linestyle="--", label=f"device copy ({copy:.0f} GB/s)")
    ax.set_yscale("log")
    ax.set_ylabel("GB/s (input read + outputs written)")
    ax.set_xlabel("shape (M x N), bf16 input")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def bars(ax, rows, shapes):
    names = list(dict.fromkeys(r["kernel"] for r in rows))
    pct = {(r["kernel"], r["shape"]): float(r["pct_of_copy"]) for r in rows}
    height = 0.8 / len(shapes)
    for k, s in enumerate(shapes):
        drawn = ax.barh([i + k * height for i in range(len(names))], [pct.get((n, s), 0.0) for n in names],
                        height, label=s, color=f"C{k}")
        for bar, n in zip(drawn.patches, names):
            if not n.startswith("quantlay"):
                bar.set_hatch("//")
    ax.set_yticks([i + 0.4 - height / 2 for i in range(len(names))])
    ax.set_yticklabels([n.removeprefix("quantlay ") for n in names], fontsize=7)
    ax.invert_yaxis()
    ax.axvline(100, color="gray", linestyle="--")
    ax.set_xlabel("% of a device-to-device copy in the same run (higher is faster; hatched: peers)")
    ax.legend(title="shape (M x N)", fontsize=8)


def gemm_bars(ax, rows, shapes):
    names = list(dict.fromkeys(r["kernel"] for r in rows))
    tf = {(r["kernel"], r["shape"]): float(r["tflops"]) for r in rows}
    width = 0.8 / len(names)
    for k, n in enumerate(names):
        drawn = ax.bar([i + k * width for i in range(len(shapes))], [tf.get((n, s), 0.0) for s in shapes], width,
                       label=n.removeprefix("quantlay "), color=f"C{k}")
        if not n.startswith("quantlay"):
            for bar in drawn.patches:
                bar.set_hatch("//")
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(shapes))])
    ax.set_xticklabels([s.replace("x", " x ") for s in shapes], fontsize=8)
    ax.set_xlabel("M x N x K (grouped kernels: the same total M, N, K)")
    ax.set_ylabel("TFLOP/s (higher is faster; hatched: peers)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("csv")
    p.add_argument("out")
    p.add_argument("--group", default=None)
    p.add_argument("--copy", type=float, default=None)
    p.add_argument("--bars", action="store_true")
    p.add_argument("--gemm", action="store_true")
    a = p.parse_args()
    rows = [r for r in csv.DictReader(open(a.csv))
            if not r["note"] and (r["group"] == "gemm") == a.gemm and a.group in (None, r["group"])]
    if a.gemm:  # G=64 entries run at one shape only: left out of the bars
        rows = [r for r in rows if "G=64" not in r["kernel"]]
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    names = set(r["kernel"] for r in rows)
    fig, ax = plt.subplots(figsize=(12, 0.32 * len(names) * max(1, len(shapes) / 2) + 1.5) if a.bars
                           else (13 if a.gemm else 12, 5))
    if a.gemm:
        gemm_bars(ax, rows, shapes)
    elif a.bars:
        bars(ax, rows, shapes)
    else:
        lines(ax, rows, shapes, a.copy or float(rows[0]["copy_gbps"]))
    what = "Blockwise FP8 GEMMs" if a.gemm else TITLES.get(a.group, "quantlay casts")
    ax.set_title(f"{what} on {rows[0]['gpu']} "
                 f"(torch {rows[0]['torch']}, Triton {rows[0]['triton']}, "
                 f"commit {', '.join(dict.fromkeys(r['commit'] for r in rows))})")
    fig.tight_layout()
    fig.savefig(a.out, dpi=100)


if __name__ == "__main__":
    main()
