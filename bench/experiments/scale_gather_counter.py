"""Experiment (fourteenth session, not shipped): MXFP4 flags off with the scale bytes gathered across programs.

    python bench/experiments/scale_gather_counter.py GMxGNxZxE ...   (from the repository root; writes exp/gather_*.py)

Copies of the flags-off module 742f14c2 where each 64x64 tile stores its scale bytes tile-contiguously
in a scratch buffer, then takes an acq_rel ticket on its group's counter; the last program of a GM x GN
group of tiles writes the group's bytes into the plain layouts (GN * 2 bytes per row of rowwise_scale,
GM * 2 per row of colwise_scale) and resets the counter. Z: 1 zeroes the counters per call, 2 skips the
ticket and the gather (timing only: scales stay in the scratch). E: 1 takes the ticket before the
colwise codes are stored. Measured: 63-65% against 66.8% for the shipped columns of tiles and 71.5% for
Z=2 (h200_variants_mxfp4_off_gather_09ee217.log).
"""
import sys

from copyedit import GROUP_PIDS, OFF_MODULE, Copy

copy = Copy(OFF_MODULE)
sub = copy.sub
sub("PAIR_RUN: tl.constexpr):", "PAIR_RUN: tl.constexpr, scr_ptr, cnt_ptr, s1h, s3h, GM: tl.constexpr, GN: tl.constexpr, NOSYNC: tl.constexpr, EARLY: tl.constexpr):")
sub(*GROUP_PIDS)
old_r = "        tl.store(rowwise_scale_ptr + ((r * s1) + c), (e_rowwise).to(tl.uint8), mask=(r < M) & (c < s1))\n"
sub("\n" + old_r, """
        if GM > 0:
            wr = tl.sum(e_rowwise << (8 * tl.arange(0, BLOCK_N // 32))[None, :], 1).to(tl.int16)
            tl.store(scr_ptr + pid * (BLOCK_M + BLOCK_N) + tl.arange(0, BLOCK_M), wr)
        else:
    """ + old_r)
old_c = "        tl.store(colwise_scale_ptr + ((r * s3) + c), (e_colwise).to(tl.uint8), mask=(r < N) & (c < s3))\n"
sub("\n" + old_c, """
        if GM > 0:
            if not EARLY:
                tl.store(scr_ptr + pid * (BLOCK_M + BLOCK_N) + BLOCK_M + tl.arange(0, BLOCK_N), _scale_word(e_colwise, tl.int16))
                if NOSYNC:  # timing only: the scale bytes stay in the scratch
                    old = 0
                else:
                    tl.debug_barrier()
                    old = tl.atomic_add(cnt_ptr + g, 1, sem="acq_rel")
            if old == GM * GN - 1:
                g_gbase = g * (GM * GN)
                g_rr = tl.arange(0, BLOCK_M)
                g_jj = tl.arange(0, GN)
                g_rs16 = rowwise_scale_ptr.to(tl.pointer_type(tl.int16))
                for g_i in tl.static_range(GM):
                    g_w = tl.load(scr_ptr + ((g_gbase + g_i * GN + g_jj) * (BLOCK_M + BLOCK_N))[None, :] + g_rr[:, None], cache_modifier=".cg")
                    g_rows = (gm * GM + g_i) * BLOCK_M + g_rr
                    tl.store(g_rs16 + g_rows[:, None] * s1h + (gn * GN + g_jj)[None, :], g_w)
                g_cc = tl.arange(0, BLOCK_N)
                g_ii = tl.arange(0, GM)
                g_cs16 = colwise_scale_ptr.to(tl.pointer_type(tl.int16))
                for g_j in tl.static_range(GN):
                    g_w = tl.load(scr_ptr + ((g_gbase + g_ii * GN + g_j) * (BLOCK_M + BLOCK_N) + BLOCK_M)[None, :] + g_cc[:, None], cache_modifier=".cg")
                    g_cols = (gn * GN + g_j) * BLOCK_N + g_cc
                    tl.store(g_cs16 + g_cols[:, None] * s3h + (gm * GM + g_ii)[None, :], g_w)
                tl.store(cnt_ptr + g, 0)
        else:
    """ + old_c)
old_t = "\n        e_colwise = tl.trans(e_colwise)  # [BLOCK_N, BLOCK_M // 32], the direction's blocks\n"
sub(old_t, old_t + """        if GM > 0:
            if EARLY:
                tl.store(scr_ptr + pid * (BLOCK_M + BLOCK_N) + BLOCK_M + tl.arange(0, BLOCK_N), _scale_word(e_colwise, tl.int16))
                if NOSYNC:
                    old = 0
                else:
                    tl.debug_barrier()
                    old = tl.atomic_add(cnt_ptr + g, 1, sem="acq_rel")
""")
# launcher
sub("""    grid, grid_n_first, grid_group = runtime.launch_grid(""", """    if GATHER_GM:
        assert block_m == 64 and block_n == 64 and region == 1 and even, (block_m, block_n, region, even)
        assert M % (64 * GATHER_GM) == 0 and N % (64 * GATHER_GN) == 0
        tiles = (M // 64) * (N // 64)
        scr = torch.empty(tiles * 128, dtype=torch.int16, device=x2.device)
        cnt = _counters(tiles // (GATHER_GM * GATHER_GN), x2.device)
    else:
        scr = cnt = bufs["rowwise_scale"]
    grid, grid_n_first, grid_group = runtime.launch_grid(""")
sub("""                           GRID_GROUP=grid_group, OPAQUE_WIDEN=cfg["opaque_widen"], REGION_M=region, **kwargs)""",
    """                           GRID_GROUP=grid_group, OPAQUE_WIDEN=cfg["opaque_widen"], REGION_M=region,
                           scr_ptr=scr, cnt_ptr=cnt, s1h=_sizes(M, N)[1] // 2, s3h=_sizes(M, N)[3] // 2, GM=GATHER_GM, GN=GATHER_GN, NOSYNC=ZERO_EACH == 2, EARLY=EARLY, **kwargs)""")
sub("    _quantize_kernel[grid](", "    if GATHER_GM:\n        grid = (tiles,)\n    _quantize_kernel[grid](")
sub("def _sizes(M, N):", '''_CNT = {}


def _counters(n, device):
    """Group counters, zero between launches (the last program of a group resets its own)."""
    if ZERO_EACH:
        return torch.zeros(n, dtype=torch.int32, device=device)
    key = (n, str(device))
    if key not in _CNT:
        _CNT[key] = torch.zeros(n, dtype=torch.int32, device=device)
    return _CNT[key]


def _sizes(M, N):''')
for gm, gn, z, e in [[int(v) for v in s.split("x")] for s in sys.argv[1:]]:
    out = copy.text.replace('NAME = "', f'GATHER_GM, GATHER_GN, ZERO_EACH, EARLY = {gm}, {gn}, {z}, {e}\nNAME = "', 1)
    open(f"exp/gather_{gm}x{gn}{['', '_z', '_nosync'][z]}{'_early' if e else ''}.py", "w").write(out)
