"""What every Ascend parser shares: JSON conversion of results and lenient number reading.

Every parser takes the raw text a tool printed and never raises on text it does not
recognise: unknown lines are skipped, unknown values become None.
"""

from __future__ import annotations

import dataclasses
from typing import Any

# Cells that mean "no value" in msprof and npu-smi tables.
_MISSING = {"", "NA", "N/A", "-", "--", "nan", "None"}


class JsonResult:
    """Mixin: every result converts to plain JSON types the same way."""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload, no-any-return]


def to_json(result: Any) -> Any:
    """A result, or a list of results, as plain JSON types."""
    if isinstance(result, list):
        return [to_json(item) for item in result]
    if isinstance(result, JsonResult):
        return result.to_json()
    return result


def to_float(text: str | None) -> float | None:
    if text is None or text.strip() in _MISSING:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def to_int(text: str | None) -> int | None:
    value = to_float(text)
    return int(value) if value is not None and value == int(value) else None


def clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
