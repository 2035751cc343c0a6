"""The benchmark registry (issue 5): every generated variant, its PyTorch reference (eager and compiled)
and the peers are registered per group; building the registry needs no GPU."""
from quantlay import bench
from quantlay.generated import find
from quantlay.spec import SPECS_DIR, load

SPECS = {"mxfp8": "mxfp8.ql", "fp8": "fp8_blockwise.ql"}


def test_every_group_has_its_kernels_reference_and_peers():
    for group, make in bench.REGISTRY.items():
        names = [e.name for e in make()]
        assert len(names) == len(set(names)), group
        assert any(n.startswith("torch eager reference") for n in names), group
        assert any(n.startswith("torch.compile of the reference") for n in names), group
    fp8 = [e.name for e in bench.REGISTRY["fp8"]()]
    assert sum(n.startswith("torchao ") for n in fp8) == len(bench.TORCHAO_KERNELS)


def test_generated_entries_cover_every_variant_with_its_hash():
    for group, spec in SPECS.items():
        entries = {e.name: e for e in bench.REGISTRY[group]() if e.name.startswith("quantlay ")}
        for kernel in load(SPECS_DIR / spec):
            for v in kernel.variants():
                tag = ",".join(f"{k}={int(b)}" for k, b in v.options)
                name = f"quantlay {kernel.name}" + (f" {tag}" if tag else "")
                assert name in entries, name
                assert len(entries[name].kernel_hash) == 12 and entries[name].group == group
                assert entries[name].validate(4096, 6144) is None
                assert entries[name].validate(100, 6144)  # a shape the blocks do not divide is skipped
                find(kernel.name, **dict(v.options))  # the module the entry times exists
