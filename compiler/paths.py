"""Where quantlay's own files are: the checkout's top-level folders, or the installed packages.

In a checkout (editable install) `dsl/`, `templates/` and `generated/` sit beside `compiler/`; a wheel
installs them as the packages `quantlay.dsl`, `quantlay.templates` and `quantlay.generated`.
"""
from __future__ import annotations

import importlib
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent


def _folder(name: str, marker: str) -> Path:
    here = _ROOT / name
    if (here / marker).exists():
        return here
    return Path(importlib.import_module(f"quantlay.{name}").__file__).resolve().parent


DSL_DIR = _folder("dsl", "library.ql")
TEMPLATES_DIR = _folder("templates", "mx_cast.py.jinja")
GENERATED_DIR = _folder("generated", "MANIFEST.json")
