"""Offline sm_90 SASS of every tuned (kernel, launch configuration) at 16384x8192, even and ragged: one
line each with the SASS hash, registers and instruction count (bench/sass.py), to diff before and after
a template change: python bench/sass_all.py > before.txt; edit; quantlay generate; ... > after.txt
(or python bench/sass_all.py DIR: the modules in DIR, e.g. `git archive REV generated` unpacked)."""
import hashlib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GEN = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "generated"  # e.g. an earlier commit's modules
for e in json.loads((ROOT / "compiler" / "tuning.json").read_text())["entries"]:
    if e["shape"] != "16384x8192":
        continue
    v = e["kernel"]
    cmd = [sys.executable, str(ROOT / "bench" / "sass.py"), v.split("__")[0], "--file", str(GEN / f"{v}.py"),
           "--bm", str(e["block_m"]), "--bn", str(e["block_n"]), "--warps", str(e["num_warps"]), "--dump"]
    cmd += ["--maxnreg", str(e["maxnreg"])] if e.get("maxnreg") else []
    cmd += ["--inplace-rows"] if e.get("inplace_rows") else []
    cmd += ["--grid-group", str(e["grid_group"])] if e.get("grid_group") else []
    cmd += ["--opaque-widen"] if e.get("opaque_widen") else []
    cmd += ["--region-m", str(e["region_m"])] if e.get("region_m", 1) > 1 else []
    cmd += ["--prefetch", str(e["l2_prefetch"])] if e.get("l2_prefetch") else []
    for ragged in (False, True):
        r = subprocess.run(cmd + (["--ragged"] if ragged else []), capture_output=True, text=True)
        if r.returncode:
            print(v, "ragged" if ragged else "even", "ERROR", r.stderr.strip().splitlines()[-1:], flush=True)
            continue
        sass = hashlib.md5(Path("/tmp/kernel.sass").read_bytes()).hexdigest()[:10]
        print(v, "ragged" if ragged else "even", sass, r.stdout.splitlines()[0].split(":", 1)[-1].strip(), flush=True)
