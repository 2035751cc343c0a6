"""Plot GB/s against shape for each kernel and its peers from a `quantlay bench` CSV (plus copy)."""
import csv
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

src, dst = sys.argv[1], sys.argv[2]
rows = [r for r in csv.DictReader(open(src)) if not r["note"]]
shapes = list(dict.fromkeys(r["shape"] for r in rows))
fig, ax = plt.subplots(figsize=(8, 4.5))
for name in dict.fromkeys(r["kernel"] for r in rows):
    pts = {r["shape"]: float(r["gbps"]) for r in rows if r["kernel"] == name}
    ax.plot(shapes, [pts.get(s) for s in shapes], marker="o", label=name)
copy = float(rows[0]["copy_gbps"])
ax.axhline(copy, color="gray", linestyle="--", label=f"device copy ({copy:.0f} GB/s)")
ax.set_yscale("log")
ax.set_ylabel("GB/s (input read + outputs written)")
ax.set_xlabel("shape (M x N), bf16 input")
ax.set_title(f"MXFP4 cast + transpose on {rows[0]['gpu']} (commit {rows[0]['commit'][:7]})")
ax.legend(fontsize=7, loc="lower left")
fig.tight_layout()
fig.savefig(dst, dpi=110)
