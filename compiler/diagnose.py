"""Compound diagnosis for `quantlay compare`: layouts and numerics searched jointly.

A real hand-written kernel is wrong in several ways at once (it ignores a layout flag *and* rounds its
scales another way), so no single alternative reproduces its bytes. For each direction of the spec:

1. Layout. Every candidate layout of each output (the spec's pipe under every option setting, and the
   pipe with each layout stage dropped) decodes the hand-written bytes to logical values; the candidate
   under which the most values agree with the spec's is the layout the kernel wrote, named even when
   values still differ ("ignores shuffle_columnwise_data").
2. Scales, under that layout: single-rule changes of the scale format (E8M0 mode, amax == 0, Inf, NaN
   ignored or propagated in the block maximum) applied greedily while each explains more blocks; what
   is left and is one exponent lower (or higher) everywhere is an approximate log2/exp2.
3. Data: the blocks are quantized again with the hand-written kernel's own scales (the consequence of
   a scale difference is not a second defect), then single element-rule changes (tie rule, sign of
   zero, NaN code, saturation or Inf past the largest value, the multiplier of blocks whose scale
   byte is 0) greedily.
4. Padding: cells outside the logical matrix that hold another value than the declared fill (a
   sentinel there: left unwritten).

Each cause comes with the number of logical values it explains; what no cause explains is reported as
unexplained.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F

from . import reference
from .formats import E8M0, E8M0_MODES, TIE_RULES, ZERO_SIGN_RULES
from .ir import OutputIR, VariantIR
from .layout import Chain

SENTINEL = 0xA5  # what compare fills caller-allocated output buffers with


@dataclass
class Finding:
    key: str
    differing: int = 0               # logical values that differ under the claimed layout
    causes: List[Tuple[str, int]] = field(default_factory=list)  # (sentence, values it explains)
    unexplained: int = 0
    layout: Optional[OutputIR] = None  # the layout the hand-written kernel wrote

    def text(self) -> str:
        parts = [s + (f" ({n} values)" if n else "") for s, n in self.causes]
        if self.unexplained:
            parts.append(f"unexplained: {self.unexplained} of {self.differing} differing values follow from no "
                         f"layout or format rule tried")
        return "; ".join(parts)


# ---- layouts ---------------------------------------------------------------------------------------
def _candidates(variant: VariantIR, key: str):
    """(label, OutputIR) for every layout the hand-written kernel may have written for `key`."""
    claimed = variant.output(key)
    seen, out = set(), []

    def add(label, o):
        sig = (o.layout_name(), o.pack_axis)
        if sig not in seen:
            seen.add(sig)
            out.append((label, o))
    add(None, claimed)

    def flips(v):
        return sum(a != b for (_, a), (_, b) in zip(v.options, variant.options))
    for v in sorted(variant.kernel.variants(), key=flips):  # the fewest flipped options first
        if v.options != variant.options:
            add(("options", v.options), v.output(key))
    for i, st in enumerate(claimed.chain.stages):
        if st.axis_map is not None and claimed.pack_axis is not None:  # it fixes the packing axis
            continue
        stages = claimed.chain.stages[:i] + claimed.chain.stages[i + 1:]
        fills = claimed.chain.fills[:i] + claimed.chain.fills[i + 1:] if claimed.chain.fills else ()
        names = [s.name for s in stages]
        text = "|".join(names + ([f"packed(low={claimed.pack_low})"] if claimed.pack_axis is not None else []))
        seg = claimed.layout_text.split("|")[0] + "|" if claimed.layout_text.startswith("segments(") else ""
        add(("drop", st.name), dataclasses.replace(claimed, chain=Chain(stages, fills),
                                                    layout_text=seg + (text or "row_major")))
    return out


def _decode(o: OutputIR, phys: torch.Tensor, M: int, N: int, G: int = 0) -> Optional[torch.Tensor]:
    """The logical values of a buffer read in layout `o`. A layout is a memory order: a buffer of as many
    elements in another shape (allocated for one layout, written in another) is read in that order."""
    try:
        shape = tuple(int(e.evaluate({"M": M, "N": N, "G": G})) for e in o.chain.physical_shape(*o.logical))
        if shape != tuple(phys.shape):
            if phys.numel() != math.prod(shape) or not phys.is_contiguous():
                return None
            phys = phys.reshape(shape)
        return reference.logical_view(o, phys, M, N, G)
    except Exception:  # noqa: BLE001 - a layout that cannot take this buffer is not a candidate
        return None


def _layout_sentence(variant: VariantIR, key: str, label, alt: OutputIR) -> str:
    claimed = variant.output(key)
    what = key.replace("_", " ")
    opts = dict(variant.options)
    if label[0] == "options":
        relevant = {opt for _, opt in claimed.conditions + alt.conditions if opt}  # options this output depends on
        flipped = [n for (n, a), (_, b) in zip(variant.options, label[1]) if a != b and n in relevant]
        verbs = [f"ignores {n}" if opts[n] else f"applies {n} although it is off" for n in flipped]
        return (f"{what} is in `{alt.layout_name()}`, the spec with "
                f"{', '.join(f'{n}={str(opts[n]).lower()}' for n in flipped)} says `{claimed.layout_name()}`: "
                f"the hand-written kernel {' and '.join(verbs)}")
    stage = label[1]
    option = dict(claimed.conditions).get(stage)
    why = f"ignores {option}" if option else f"omits the {stage} stage"
    return f"{what} is in `{alt.layout_name()}`, the spec says `{claimed.layout_name()}`: the hand-written kernel {why}"


# ---- numerics ------------------------------------------------------------------------------------
def _scale_steps(sc):
    """Single-rule changes of a scale format: (sentence part, new format)."""
    if not isinstance(sc, E8M0):
        return
    for m in E8M0_MODES:
        if m != sc.mode:
            yield f"selects exponents in `{m}` mode (the spec: `{sc.mode}`)", dataclasses.replace(sc, mode=m)
    for z in sorted({0, 127} - {sc.zero_amax}):
        yield (f"gives all-zero blocks exponent {z} (the spec: {sc.zero_amax})",
               dataclasses.replace(sc, zero_amax=z))
    for v in sorted({253, 254, 255} - {sc.inf_amax}):
        yield f"gives blocks with an Inf exponent {v} (the spec: {sc.inf_amax})", dataclasses.replace(sc, inf_amax=v)
    other = "ignore" if sc.nan_in_amax == "propagate" else "propagate"
    yield ({"ignore": "ignores NaN in the block maximum", "propagate": "propagates NaN into the block maximum"}[other]
           + f" (the spec: {sc.nan_in_amax})", dataclasses.replace(sc, nan_in_amax=other))


@dataclass(frozen=True)
class _Unsaturated:
    """An element format as a kernel that does not saturate writes it: a value that rounds past the
    largest finite magnitude (or an Inf) gets the format's Inf code (E5M2) or NaN code (E4M3)."""
    base: object

    def __getattr__(self, name):
        return getattr(self.base, name)

    def encode_reference(self, q: torch.Tensor) -> torch.Tensor:
        el = self.base
        codes = el.encode_reference(q)
        grid = el.grid()
        top, prev = grid[-1], grid[-2]
        half = top + (top - prev) / 2  # the midpoint between the largest value and the next one up
        a = q.double().abs()
        odd = el.max_code & ((1 << el.mbits) - 1) & 1  # a tie at the midpoint rounds away from an odd max
        over = (a > half) | ((a == half) & bool(odd))
        big = 0x7C if el.name == "e5m2" else 0x7F
        sign = torch.signbit(q).to(torch.uint8) << 7
        return torch.where(over & ~torch.isnan(q), sign | big, codes).to(torch.uint8)


def _element_steps(el):
    if isinstance(el, _Unsaturated):
        yield from ((s, _Unsaturated(alt)) for s, alt in _element_steps(el.base))
        return
    if el.bits == 8:
        yield (f"does not saturate: values past {el.grid()[-1]:g} and Inf become "
               f"{'Inf' if el.name == 'e5m2' else 'NaN'} (the spec saturates)", _Unsaturated(el))
    for t in TIE_RULES:
        if t != el.ties:
            names = {"even": "to even", "away": "away from zero", "zero": "toward zero"}
            yield (f"rounds exact midpoints {names[t]} (the spec: {names[el.ties]})",
                   dataclasses.replace(el, ties=t))
    for z in ZERO_SIGN_RULES:
        if z != el.zero_sign:
            yield f"encodes the sign of zero results as `{z}` (the spec: `{el.zero_sign}`)", dataclasses.replace(el, zero_sign=z)
    top = (1 << el.bits) - 1
    for nan in sorted({0x0, top >> 1, (top >> 1) + 1, top} - {el.nan}):
        yield f"encodes NaN as {nan:#x} (the spec: {el.nan:#x})", dataclasses.replace(el, nan=nan)


def _multiplier(sc, e: torch.Tensor, e0: str) -> torch.Tensor:
    m = sc.multiplier_reference(e)
    if e0 == "one":
        m = torch.where(e.long() == 0, torch.ones_like(m), m)
    elif e0 == "min_normal":
        m = torch.where(e.long() == 0, torch.full_like(m, 2.0 ** 126), m)
    return m


def _codes_with(d, x2: torch.Tensor, e: torch.Tensor, el, e0: str) -> torch.Tensor:
    """Logical codes of direction d for scale bytes e (the hand-written kernel's) under element rule el."""
    M, N = x2.shape
    mult = _multiplier(d.scale, e, e0)
    if d.block[1] > 1:
        mult = mult.repeat_interleave(d.block[1], dim=1)
    if d.block[0] > 1:
        mult = mult.repeat_interleave(d.block[0], dim=0)
    xp = F.pad(x2, (0, mult.shape[1] - N, 0, mult.shape[0] - M))
    return el.encode_reference(xp * mult)[:M, :N]


def _greedy(start, steps_of, mismatches):
    """Apply single-rule changes while one explains more values; [(sentence, explained)], final, left."""
    state, left, causes = start, mismatches(start), []
    while left:
        best = None
        for sentence, alt in steps_of(state):
            n = mismatches(alt)
            if n < left and (best is None or n < best[0]):
                best = (n, sentence, alt)
        if best is None:
            break
        causes.append((best[1], left - best[0]))
        left, state = best[0], best[2]
    return causes, state, left


def diagnose_direction(variant: VariantIR, dname: str, x: torch.Tensor, hand: Dict[str, torch.Tensor],
                       groups: Optional[torch.Tensor] = None) -> Dict[str, Finding]:
    """Findings for the data and scale outputs of one direction (those the binding returns); `groups`:
    the group lengths of a segmented kernel."""
    d = variant.direction(dname)
    Mx, N = x.shape
    G = 0 if groups is None else len(groups)
    x2 = x
    if d.segmented:  # the direction sees each group's rows padded to whole blocks
        x2, offs = reference.segment_rows(x, groups, d.block[0])
    M = x2.shape[0]
    codes_spec, e_spec = reference.quantize_direction(x2, d)
    if d.segmented:
        e_spec[int(offs[-1]) // d.block[0]:] = 0  # blocks past the last group hold zero scales
    logical_spec = {f"{dname}_data": codes_spec[:M, :N], f"{dname}_scale": e_spec}
    findings: Dict[str, Finding] = {}
    hand_logical: Dict[str, torch.Tensor] = {}
    for key in (f"{dname}_scale", f"{dname}_data"):
        if key not in hand:
            continue
        f = findings[key] = Finding(key)
        want = logical_spec[key]
        if d.scale.storage == "e8m0" or key.endswith("data"):
            want = want.to(torch.uint8)
        scored = []
        for label, o in _candidates(variant, key):
            got = _decode(o, hand[key], Mx, N, G)
            if got is not None and got.shape == want.shape:
                scored.append((int((got != want).sum()) if got.dtype == want.dtype else got.numel(), label is not None, label, o, got))
        if not scored:
            f.causes.append((f"{key.replace('_', ' ')}: the hand-written buffer has shape {tuple(hand[key].shape)}, "
                             f"which no layout of the spec has", 0))
            continue
        claimed = next((s for s in scored if s[2] is None), None)
        best = min(scored, key=lambda s: (s[0], s[1]))
        f.differing = claimed[0] if claimed else best[0]
        if best[2] is not None:
            f.causes.append((_layout_sentence(variant, key, best[2], best[3]),
                             (claimed[0] - best[0]) if claimed else 0))
        f.layout = best[3]
        hand_logical[key] = best[4]
        _padding(f, best[3], hand[key], Mx, N, G)
    # scales first: the data are judged with the hand-written kernel's own scales
    skey, dkey = f"{dname}_scale", f"{dname}_data"
    e_hand = hand_logical.get(skey)
    if e_hand is not None and d.scale.storage == "e8m0":
        def mism_scale(sc):
            dd = dataclasses.replace(d, scale=sc)
            amax, _ = reference.block_amax(x2, dd)
            return int((sc.select_reference(amax, d.element) != e_hand).sum())
        causes, sc, left = _greedy(d.scale, _scale_steps, mism_scale)
        findings[skey].causes += [(f"{skey.replace('_', ' ')}: the hand-written kernel {s}", n) for s, n in causes]
        if left:
            dd = dataclasses.replace(d, scale=sc)
            amax, _ = reference.block_amax(x2, dd)
            diff = e_hand.int() - sc.select_reference(amax, d.element).int()
            bad = diff != 0
            if bool((diff[bad] == diff[bad][0]).all()) and abs(int(diff[bad][0])) == 1:
                way = "lower" if int(diff[bad][0]) < 0 else "higher"
                tiny = amax[bad].abs() < 2.0 ** -126 * d.element.max_value  # the scaled amax is an fp32 subnormal
                if bool(tiny.all()):
                    why = (f"whose amax / maxpos is an fp32 subnormal: the hand-written rule rounds tiny blocks' "
                           f"exponents another way (the spec clamps them to e = {sc.clamp[0]})")
                else:
                    why = "whose rounded amax is an exact power of two: an approximate log2/exp2"
                findings[skey].causes.append((f"{skey.replace('_', ' ')}: exponents one {way} on blocks {why}",
                                              int(bad.sum())))
                left = 0
        findings[skey].unexplained = left
    elif e_hand is not None:
        left = int((e_hand != logical_spec[skey]).sum())
        findings[skey].unexplained = left
    if dkey in hand_logical:
        c_hand = hand_logical[dkey]
        f = findings[dkey]
        if e_hand is not None and d.scale.storage == "e8m0":
            base = int((c_hand != logical_spec[dkey].to(torch.uint8)).sum())
            state0 = (d.element, "exact" if d.scale.e0_multiplier == "exact" else "one")
            cons = int((_codes_with(d, x2, e_hand, d.element, state0[1]) != c_hand).sum())
            if cons < base:
                f.causes.append((f"{dkey.replace('_', ' ')}: follows from the scale difference (the blocks quantized "
                                 f"with the hand-written kernel's own scales give its bytes)", base - cons))

            def steps(state):
                el, e0 = state
                for s, alt in _element_steps(el):
                    yield s, (alt, e0)
                for m in ("exact", "one", "min_normal"):
                    if m != e0:
                        yield (f"multiplies blocks whose scale byte is 0 by "
                               f"{ {'exact': '2^127', 'one': '1', 'min_normal': '2^126'}[m] }", (el, m))
            causes, _, left = _greedy(state0, steps, lambda st: int((_codes_with(d, x2, e_hand, st[0], st[1]) != c_hand).sum()))
            f.causes += [(f"{dkey.replace('_', ' ')}: the hand-written kernel {s}", n) for s, n in causes]
            f.unexplained = left
        else:
            def mism_el(el):
                dd = dataclasses.replace(d, element=el)
                return int((reference.quantize_direction(x2, dd)[0][:M, :N].to(torch.uint8) != c_hand).sum())
            causes, _, left = _greedy(d.element, _element_steps, mism_el)
            f.causes += [(f"{dkey.replace('_', ' ')}: the hand-written kernel {s}", n) for s, n in causes]
            f.unexplained = left
    return findings


def _padding(f: Finding, o: OutputIR, phys: torch.Tensor, M: int, N: int, G: int = 0) -> None:
    fill = o.chain.fill()
    if fill is None:
        return
    rows, cols = (int(e.evaluate({"M": M, "N": N, "G": G})) for e in o.logical)
    probe = o.chain.apply(torch.ones(rows, cols, dtype=torch.uint8))
    pad = probe != 1
    held = phys.cpu().reshape(probe.shape)[pad]
    wrong = held != fill
    if wrong.any():
        vals = sorted(set(held[wrong].tolist()))
        what = f"{f.key.replace('_', ' ')}: padding"
        if vals == [SENTINEL]:
            f.causes.append((f"{what} left unwritten (its cells still hold the sentinel {SENTINEL:#x}); the spec "
                             f"fills them with {fill}", 0))
        else:
            f.causes.append((f"{what} cells hold {vals[:4]}, the spec fills them with {fill}", 0))
