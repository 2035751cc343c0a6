"""Write an edited copy of a generated module, for `bench/variant.py` (GPU) and `bench/sass.py --file`.

    python bench/edit_variant.py generated/fp8_1x128_rocm_te__55ab7305.py /tmp/v.py --reverse-directions

Edits (experiments measured on the H200 so far, `bench/results/h200_grid_order_experiments.log`; the
grid orders and the opaque second widening tried with this script are launch options now: grid_n_first,
grid_group, opaque_widen):
  --reverse-directions  quantize the directions in the other order (fused 1x128 colwise first: 64.2 ->
                      66.5%; segmented fused rowwise first: 38.2 -> 40.4%); opaque_widen stays with
                      the direction that runs second.
  --no-row-map          segmented kernels: no row map (read or found) before the tile's load (the same bytes only where every
                      group is whole tiles, as variant.py's equal groups are at its shapes): what the load
                      chain costs.
"""
import argparse
import pathlib

p = argparse.ArgumentParser()
p.add_argument("src")
p.add_argument("dst")
p.add_argument("--reverse-directions", action="store_true")
p.add_argument("--no-row-map", action="store_true")
a = p.parse_args()
src = pathlib.Path(a.src).read_text()


OPAQUE = ("    if OPAQUE_WIDEN and HW_CVT:  # opaque to CSE: the first direction's fp32 tile dies before this one\n"
          "        xt = tl.inline_asm_elementwise(\"mov.b32 $0, $1;\", \"=r,r\", [xt], dtype=tl.int16, is_pure=False, pack=2)\n")


def widen_opaquely(section):
    """The template's opaque widening, after the section's first `xt = ...` line (the second direction's)."""
    head, _, rest = section.partition("\n    xt = ")
    line, _, tail = rest.partition("\n")
    return head + "\n    xt = " + line + "\n" + OPAQUE + tail


body_end = src.index("\ndef _sizes")
starts = [i for i in range(len(src)) if src.startswith("    # ---- ", i) and i < body_end]
sections = [src[s:e] for s, e in zip(starts, starts[1:] + [body_end])]
if a.reverse_directions:
    assert len(sections) == 2, "needs a two-direction kernel"
    assert OPAQUE in sections[1], "the template's opaque widening changed: update OPAQUE"
    sections = [sections[1].replace(OPAQUE, "").rstrip() + "\n\n", widen_opaquely(sections[0]).rstrip() + "\n\n"]
src = src[:starts[0]] + "".join(sections) + src[body_end:]
if a.no_row_map:
    for old, new in (("delta = tl.load(map_ptr + 2 * pid_m)", "delta = pid_m * 0"),
                     ("row_lim = tl.load(map_ptr + 2 * pid_m + 1)", "row_lim = (pid_m * BLOCK_M < M).to(tl.int32) * M"),
                     ("delta, row_lim = _segment_block(lens_ptr, pid_m, M, G)",
                      "delta, row_lim = pid_m * 0, (pid_m * BLOCK_M < M).to(tl.int32) * M")):
        assert old in src, f"not a segmented kernel, or its row map changed: {old!r}"
        src = src.replace(old, new)
pathlib.Path(a.dst).write_text(src)
print(f"wrote {a.dst}")
