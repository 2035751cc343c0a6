"""Experiment (fourteenth session, not shipped): store the scale bytes from the 1-D spread they are computed on.

    python bench/experiments/scale_store_spread.py generated/MODULE.py exp/COPY.py

Instead of reshaping the E8M0 bytes to the tile's 2-D layout for the store (Triton converts the layout
for it), the store indexes the spread directly. sm_90: the flags-on tile keeps 1448 instructions with 2
barriers fewer. Measured: no gain (70.8 / 70.1% against 70.9 / 70.8%; flags off equal with regions,
51% without; h200_variants_mxfp4_spread_09ee217.log).
"""
import sys
src, dst = sys.argv[1], sys.argv[2]
t = open(src).read()
def sub(old, new, n=1):
    global t
    assert t.count(old) == n, (old[:80], t.count(old))
    t = t.replace(old, new)
import re
t = re.sub(r"\n( +)e_rowwise = tl.reshape\(e_rowwise, \[BLOCK_M, BLOCK_N // 32\]\)\n", lambda m: "\n%se_rowwise1 = e_rowwise\n%se_rowwise = tl.reshape(e_rowwise, [BLOCK_M, BLOCK_N // 32])\n" % (m.group(1), m.group(1)), t)
t = re.sub(r"\n( +)e_colwise = tl.reshape\(e_colwise, \[BLOCK_M // 32, BLOCK_N\]\)\n", lambda m: "\n%se_colwise1 = e_colwise\n%se_colwise = tl.reshape(e_colwise, [BLOCK_M // 32, BLOCK_N])\n" % (m.group(1), m.group(1)), t)
lines = t.split("\n")
out = []
i = 0
while i < len(lines):
    ln = lines[i]
    # the scale stores of the one-tile path: ti/tj lines followed by r = ti, c = tj, [val =], tl.store(..._scale_ptr
    if ln.strip().startswith("tj = (pid_n * (BLOCK_N // 32)") and "tl.store(rowwise_scale_ptr" in "".join(lines[i:i + 5]):
        ind = ln[:len(ln) - len(ln.lstrip())]
        out[-1] = ind + "ti = pid_m * BLOCK_M + blk // (BLOCK_N // 32)"
        out.append(ind + "tj = pid_n * (BLOCK_N // 32) + blk % (BLOCK_N // 32)")
        i += 1
        while "tl.store(rowwise_scale_ptr" not in lines[i]:
            out.append(lines[i].replace("e_rowwise", "e_rowwise1")); i += 1
        out.append(lines[i].replace("(e_rowwise)", "(e_rowwise1)")); i += 1
        continue
    if ln.strip().startswith("tj = (pid_m * (BLOCK_M // 32)") and "tl.store(colwise_scale_ptr + ((" in "".join(lines[i:i + 5]) + "".join(lines[i:i+5]).replace("colwise_scale_ptr.to", "x"):
        if "REGION" in "".join(lines[i:i + 5]) or "colwise_scale_word" in "".join(lines[i:i + 6]):
            out.append(ln); i += 1; continue
        ind = ln[:len(ln) - len(ln.lstrip())]
        out[-1] = ind + "ti = pid_n * BLOCK_N + blk % BLOCK_N"
        out.append(ind + "tj = pid_m * (BLOCK_M // 32) + blk // BLOCK_N")
        i += 1
        while "tl.store(colwise_scale_ptr" not in lines[i]:
            out.append(lines[i].replace("e_colwise", "e_colwise1")); i += 1
        out.append(lines[i].replace("(e_colwise)", "(e_colwise1)")); i += 1
        continue
    out.append(ln); i += 1
open(dst, "w").write("\n".join(out))
