"""What every Ascend parser shares: JSON conversion of results, lenient number reading, and
the excerpt of a long log that the model is shown.

Every parser takes the raw text a tool printed and never raises on text it does not
recognise: unknown lines are skipped, unknown values become None.
"""

from __future__ import annotations

import dataclasses
import re
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


# The first line that reports a failure: compilers, linkers, CMake, Python, ACL.
_ERROR_LINE = re.compile(
    r"^(?:\S[^\n]*?: )?(?:fatal )?error:|^CMake Error|undefined reference to|multiple definition"
    r" of|cannot find -l|LLVM ERROR|^\w*(?:Error|Exception): |\[ERROR\]|\bfailed: \d{6}\b",
    re.MULTILINE)
LOG_HEAD_CHARS = 2500
LOG_TAIL_CHARS = 2500
LOG_AROUND_ERROR_CHARS = 1500
_LINES_BEFORE_ERROR = 6  # the include chain / instantiation context printed before it
_LINES_AFTER_ERROR = 14  # its echo, caret and notes


def first_error_offset(text: str) -> int | None:
    """Where the first error line of a log starts, or None."""
    match = _ERROR_LINE.search(text)
    if match is None:
        return None
    return text.rfind("\n", 0, match.start()) + 1


def excerpt_log(text: str, head: int = LOG_HEAD_CHARS, tail: int = LOG_TAIL_CHARS,
                around_error: int = LOG_AROUND_ERROR_CHARS) -> str:
    """A long log cut for the model: its start, its end, and its first error line with the
    lines around it wherever it is, each cut marked "[... N characters cut ...]".

    A build's first error is its root cause and sits near the top of a long log; the end
    says how the run ended. Both are kept, and so is a first error buried in the middle.
    """
    if len(text) <= head + tail + around_error:
        return text
    spans = [(0, _line_end(text, head)), (_line_start(text, len(text) - tail), len(text))]
    first = first_error_offset(text)
    if first is not None:
        start = first
        for _ in range(_LINES_BEFORE_ERROR):
            if start == 0 or first - text.rfind("\n", 0, start - 1) > around_error // 2:
                break
            start = text.rfind("\n", 0, start - 1) + 1
        end = first
        for _ in range(_LINES_AFTER_ERROR + 1):
            following = text.find("\n", end)
            if following < 0 or following + 1 - start > around_error:
                break
            end = following + 1
        spans.append((start, max(end, _line_end(text, first + 1))))
    return _join_spans(text, spans)


def _line_end(text: str, offset: int) -> int:
    """The end of the line holding offset (after its newline), or the end of the text."""
    found = text.find("\n", max(offset - 1, 0))
    return len(text) if found < 0 else found + 1


def _line_start(text: str, offset: int) -> int:
    return text.rfind("\n", 0, max(offset, 0)) + 1


def _join_spans(text: str, spans: list[tuple[int, int]]) -> str:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    parts: list[str] = []
    previous = 0
    for start, end in merged:
        if start > previous:
            parts.append(f"[... {start - previous} characters cut ...]\n")
        parts.append(text[start:end])
        previous = end
    if previous < len(text):
        parts.append(f"\n[... {len(text) - previous} characters cut ...]")
    return "".join(parts)
