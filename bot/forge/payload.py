"""Reading untrusted webhook payloads: every accessor answers None for a missing or
mistyped field instead of raising, so a malformed payload is planned, not crashed on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def get(payload: Any, *path: str) -> Any:
    """The value at `path` through nested objects; None where any step is missing."""
    current = payload
    for key in path:
        if not isinstance(current, Mapping):
            return None
        current = current.get(key)
    return current


def text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def integer(value: Any) -> int | None:
    # JSON booleans are ints to Python; a number field holding `true` is no number.
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def labels(items: Any) -> tuple[str, ...]:
    """Label names from a list of names or of objects with `name` (GitHub) or `title`
    (GitLab)."""
    if not isinstance(items, list):
        return ()
    names = [text(item.get("name")) or text(item.get("title")) if isinstance(item, Mapping)
             else text(item) for item in items]
    return tuple(name for name in names if name)
