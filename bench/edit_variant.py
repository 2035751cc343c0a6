"""Write an edited copy of a generated module, for `bench/variant.py` (GPU) and `bench/sass.py --file`.

    python bench/edit_variant.py generated/fp8_1x128_rocm_te__55ab7305.py /tmp/v.py --reverse-directions
    python bench/edit_variant.py generated/fp8_segment_m__fr1__65b84838.py /tmp/v.py --opaque-widen

Edits (experiments measured on the H200 so far, `bench/results/h200_grid_order_experiments.log`; the
grid orders tried there are launch options now: grid_n_first, grid_group):
  --reverse-directions  quantize the directions in the other order (fused 1x128 colwise first: 64.2 ->
                      66.5%; segmented fused rowwise first: 38.2 -> 40.4%).
  --opaque-widen      the second direction widens bf16 through an opaque PTX move, so the first
                      direction's fp32 tile is not kept alive for it (CSE would merge the two widenings):
                      offline 199 -> 161 registers for the segmented fused cast, 163 -> 127 for the fused
                      1x128 cast (more instructions; not timed yet).
"""
import argparse
import pathlib

p = argparse.ArgumentParser()
p.add_argument("src")
p.add_argument("dst")
p.add_argument("--reverse-directions", action="store_true")
p.add_argument("--opaque-widen", action="store_true")
a = p.parse_args()
src = pathlib.Path(a.src).read_text()


def replace_once(text, old, new):
    assert text.count(old) == 1, f"expected one {old!r}"
    return text.replace(old, new)


body_end = src.index("\ndef _sizes")
starts = [i for i in range(len(src)) if src.startswith("    # ---- ", i) and i < body_end]
sections = [src[s:e] for s, e in zip(starts, starts[1:] + [body_end])]
if a.reverse_directions or a.opaque_widen:
    assert len(sections) == 2, "needs a two-direction kernel"
if a.reverse_directions:
    sections = [sections[1].rstrip() + "\n\n", sections[0].rstrip() + "\n\n"]
if a.opaque_widen:  # in whichever direction runs second
    widen = "    xt = xi\n"
    sections[1] = replace_once(sections[1], widen, widen + (
        "    if HW_CVT:  # opaque to CSE: the first direction's fp32 tile dies before this one\n"
        "        xt = tl.inline_asm_elementwise(\"mov.b32 $0, $1;\", \"=r,r\", [xt], dtype=tl.int16, is_pure=False, pack=2)\n"))
src = src[:starts[0]] + "".join(sections) + src[body_end:]
pathlib.Path(a.dst).write_text(src)
print(f"wrote {a.dst}")
