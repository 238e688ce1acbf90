"""Unmasked loads and stores in a Triton candidate, for the feedback on a failed run.

A `tl.load`/`tl.store` without a mask is right only when every block is full. The CPU
interpreter checks no bounds: a missing store mask kills the worker without a line, a
missing load mask reads garbage into the tail. When a run crashes or a tail goes wrong, the
feedback names the unmasked accesses by line, so the model looks there first. Never a
rejection on its own: a kernel whose wrapper guarantees full blocks needs no mask.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

# Positional slots of the mask: tl.load(pointer, mask, ...), tl.store(pointer, value, mask).
_MASK_SLOT = {"load": 1, "store": 2}


@dataclass(frozen=True)
class UnmaskedAccess:
    line: int
    kind: str  # "load" | "store"
    text: str  # the call's source, shortened


def _access_kind(call: ast.Call) -> str | None:
    function = call.func
    if isinstance(function, ast.Attribute) and function.attr in _MASK_SLOT:
        owner = function.value
        # tl.load, triton.language.load
        if isinstance(owner, ast.Name) and owner.id == "tl":
            return function.attr
        if isinstance(owner, ast.Attribute) and owner.attr == "language":
            return function.attr
    return None


def _masked(call: ast.Call, kind: str) -> bool:
    keywords = {item.arg for item in call.keywords}
    # A block pointer is bounded by boundary_check instead of a mask.
    return bool(keywords & {"mask", "boundary_check"}) or len(call.args) > _MASK_SLOT[kind]


def unmasked_accesses(source: str) -> list[UnmaskedAccess]:
    """Every tl.load/tl.store call without a mask, in line order; [] when it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            kind = _access_kind(node)
            if kind is not None and not _masked(node, kind):
                text = " ".join((ast.get_source_segment(source, node) or "").split())
                found.append(UnmaskedAccess(node.lineno, kind, text[:100]))
    return sorted(found, key=lambda item: item.line)


def unmasked_note(source: str) -> str:
    """The feedback lines naming unmasked accesses ("" when there are none)."""
    accesses = unmasked_accesses(source)
    if not accesses:
        return ""
    lines = [f"  line {item.line}: {item.text}" for item in accesses[:6]]
    return ("Loads/stores without a mask (the last block reads or writes past the end unless "
            "every block is full; pass mask=offsets < n, and other= for loads):\n"
            + "\n".join(lines))
