"""Every error quantlay raises on purpose.

Each one names what is wrong (the field and its value), the rule it breaks and the fix, so that a user
never has to read the compiler to understand a message. Spec errors also carry the source position
and render a caret under the offending column.
"""
from __future__ import annotations

import difflib
from typing import Iterable, Optional


class QuantlayError(Exception):
    """Base class: anything quantlay raises deliberately."""


class SpecError(QuantlayError):
    """A spec that cannot be compiled: syntax or meaning. Points at line and column."""

    def __init__(self, message: str, *, line: Optional[int] = None, column: Optional[int] = None,
                 source: Optional[str] = None, path: Optional[str] = None, hint: Optional[str] = None):
        self.message = message
        self.line = line
        self.column = column
        self.path = path
        self.hint = hint
        self.source = source
        super().__init__(self._format())

    def _format(self) -> str:
        where = self.path or "<spec>"
        head = f"{where}:{self.line}:{self.column}: {self.message}" if self.line else f"{where}: {self.message}"
        parts = [head]
        if self.source is not None and self.line:
            lines = self.source.splitlines()
            if 0 < self.line <= len(lines):
                text = lines[self.line - 1].replace("\t", " ")
                parts.append(f"    {text}")
                parts.append("    " + " " * max(0, (self.column or 1) - 1) + "^")
        if self.hint:
            parts.append(f"hint: {self.hint}")
        return "\n".join(parts)

    def with_source(self, source: str, path: Optional[str]) -> "SpecError":
        """Attach the text so the message can show the line and caret."""
        if self.source is None:
            return SpecError(self.message, line=self.line, column=self.column, source=source,
                             path=path or self.path, hint=self.hint)
        return self


class LayoutMismatchError(QuantlayError):
    """A consumer was handed a tensor stored in another layout than the one it reads."""


class LaunchError(QuantlayError, ValueError):
    """A generated kernel refused its input (dtype, device, strides, divisibility)."""


class StaleGeneratedError(QuantlayError):
    """`generated/` does not match what the specs generate."""


def did_you_mean(name: str, choices: Iterable[str]) -> Optional[str]:
    """A 'did you mean' suggestion for a misspelled name, or None."""
    match = difflib.get_close_matches(name, sorted(set(choices)), n=1, cutoff=0.6)
    return f"did you mean '{match[0]}'?" if match else None
