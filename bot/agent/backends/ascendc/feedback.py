"""An Ascend C verification result -> feedback for the model's next draft.

Build failures come as `file:line: error: message` with the offending source line, for
each distinct compiler error (bisheng's log often echoes no source, so the line is read
from the package the model wrote) and the parser's hint when it has one. Runtime errors
and mismatches go through the shared shaping (bot/agent/feedback.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import PurePath
from typing import Any

from bot.agent.feedback import truncate_middle, verification_feedback
from runners.ascendc.parsers.compiler import parse_compiler_output
from runners.base import Failure, VerifyResult

MAX_ERRORS = 5
_LOG_CHARS = 1500


def _source_line(files: Mapping[str, str], file: str, line: int) -> str:
    """The text of `line` in the package file named like `file` ("" when unknown)."""
    name = PurePath(file).name
    for path, text in files.items():
        if PurePath(path).name == name:
            lines = text.splitlines()
            return lines[line - 1] if 0 < line <= len(lines) else ""
    return ""


def _diagnostic_lines(diagnostic: Any, files: Mapping[str, str]) -> list[str]:
    name = PurePath(diagnostic.file).name
    lines = [f"{name}:{diagnostic.line}: error: {diagnostic.message}"]
    source = diagnostic.source_line or _source_line(files, diagnostic.file, diagnostic.line)
    if source.strip():
        lines.append(f"    {source.strip()}")
    if diagnostic.hint:
        lines.append(f"    hint: {diagnostic.hint}")
    return lines


def build_feedback(failure: Failure, files: Mapping[str, str]) -> str:
    """A failed build step: every located compiler error (up to MAX_ERRORS), else the log."""
    errors = [item for item in parse_compiler_output(failure.log_tail or "")
              if item.severity in ("error", "fatal error") and item.file and item.line]
    head = f"[build] {failure.message}"
    if not errors and failure.location is not None:
        location = failure.location
        source = location.source_line or _source_line(files, location.file, location.line)
        return "\n".join([head, f"{PurePath(location.file).name}:{location.line}: error: "
                          f"{failure.message}", f"    {source.strip()}"])
    if not errors:
        return f"{head}\n  log (end):\n{truncate_middle(failure.log_tail or '', _LOG_CHARS)}"
    lines = [head]
    for diagnostic in errors[:MAX_ERRORS]:
        lines += _diagnostic_lines(diagnostic, files)
    if len(errors) > MAX_ERRORS:
        lines.append(f"(and {len(errors) - MAX_ERRORS} more errors)")
    return "\n".join(lines)


def _with_source(failure: Failure, files: Mapping[str, str]) -> Failure:
    location = failure.location
    if location is None or location.source_line:
        return failure
    source = _source_line(files, location.file, location.line)
    return replace(failure, location=replace(location, source_line=source))


def ascendc_feedback(result: VerifyResult, files: Mapping[str, str]) -> str:
    """What the next draft must fix, build errors first."""
    builds = [item for item in result.reasons if item.check == "build"]
    others = [_with_source(item, files) for item in result.reasons if item.check != "build"]
    parts = [f"The package failed on {result.device}."]
    parts += [build_feedback(item, files) for item in builds]
    if others:
        parts.append(verification_feedback(replace(result, reasons=others)))
    return "\n\n".join(parts)
