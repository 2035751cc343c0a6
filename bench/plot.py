"""Plot GB/s against shape for each kernel and its peers from a `quantlay bench` CSV (plus copy).

    python bench/plot.py RESULTS.csv OUT.png [GROUP] [COPY_GBPS]   (GROUP: mxfp4, mxfp8 or fp8, or all;
    COPY_GBPS replaces the CSV's copy line where that run's copy was not measured by plain launches)
"""
import csv
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

src, dst = sys.argv[1], sys.argv[2]
group = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] != "all" else None
copy_override = float(sys.argv[4]) if len(sys.argv) > 4 else None
TITLES = {"mxfp4": "MXFP4 cast + transpose", "mxfp8": "MXFP8 cast, both directions", "fp8": "Blockwise FP8 casts"}
rows = [r for r in csv.DictReader(open(src)) if not r["note"] and group in (None, r["group"])]
shapes = list(dict.fromkeys(r["shape"] for r in rows))
fig, ax = plt.subplots(figsize=(12, 5))
for name in dict.fromkeys(r["kernel"] for r in rows):
    pts = {r["shape"]: float(r["gbps"]) for r in rows if r["kernel"] == name}
    ax.plot(shapes, [pts.get(s) for s in shapes], marker="o" if name.startswith("quantlay") else "s",
            linestyle="-" if name.startswith("quantlay") else ":", label=name)  # peers dotted
copy = copy_override or float(rows[0]["copy_gbps"])
ax.axhline(copy, color="gray", linestyle="--", label=f"device copy ({copy:.0f} GB/s)")
ax.set_yscale("log")
ax.set_ylabel("GB/s (input read + outputs written)")
ax.set_xlabel("shape (M x N), bf16 input")
ax.set_title(f"{TITLES.get(group, 'quantize kernels')} on {rows[0]['gpu']} (commit {rows[0]['commit'][:7]})")
ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
fig.tight_layout()
fig.savefig(dst, dpi=110)
