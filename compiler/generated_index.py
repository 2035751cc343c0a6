"""Look up a committed generated kernel by kernel name and options."""
from __future__ import annotations


def find(kernel: str, **options):
    from quantlay.generated import find as _find
    return _find(kernel, **options)
