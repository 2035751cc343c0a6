"""Text edits of a generated module into an experiment's copy (shared by the scripts beside this one)."""

# the flags-off MXFP4 module the scale experiments edit
OFF_MODULE = "generated/mxfp4_cast_transpose_hw__srd0_scd0_wgss0__742f14c2.py"

# grid axis 0 walks groups of GM x GN tiles, a group's tiles consecutive (t = 0 .. GM * GN - 1, row-major)
GROUP_PIDS = ("    if GRID_N_FIRST:\n        pid_m = tl.program_id(1)",
              """    if GM > 0:
        pid = tl.program_id(0)
        g = pid // (GM * GN)
        t = pid % (GM * GN)
        groups_n = N // (BLOCK_N * GN)
        gm = g // groups_n
        gn = g % groups_n
        pid_m = gm * GM + t // GN
        pid_n = gn * GN + t % GN
    elif GRID_N_FIRST:
        pid_m = tl.program_id(1)""")


class Copy:
    """A module's text, edited by exact replacements that must match the expected number of times."""

    def __init__(self, path: str):
        self.text = open(path).read()

    def sub(self, old: str, new: str, count: int = 1):
        assert self.text.count(old) == count, (old[:80], self.text.count(old))
        self.text = self.text.replace(old, new)
