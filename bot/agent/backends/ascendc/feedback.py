"""An Ascend C verification result -> feedback for the model's next draft.

Build failures come as `file:line: error: message` with the offending source line, for
each distinct root error (bisheng's log often echoes no source, so the line is read from
the package the model wrote), the parser's hint when it has one, where inside a CANN
header the compiler reported it, and how many follow-on errors it caused. Link and CMake
errors come the same way, without a source line when they name none. A log with no
error the parser knows is shown cut by excerpt_log (start, first error, end).

A device failure (an ACL error code, a device record) comes with the code's meaning, the
kernel and core at fault, the failed call's site and the hint (runners/ascendc/
runtime_errors.py). A passing kernel's timing comes with the profiler's figures: its own
device time per launch and the pipe that bounds it. Other failures go through the shared
shaping (bot/agent/feedback.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import PurePath
from typing import Any

from bot.agent.backends.ascendc.api_checks import api_check_hints
from bot.agent.feedback import timing_feedback, verification_feedback
from runners.ascendc.parsers.common import clip, excerpt_log
from runners.ascendc.parsers.compiler import Diagnostic, first_errors, parse_compiler_report
from runners.ascendc.parsers.msprof import PIPE_HINTS
from runners.ascendc.runtime_errors import describe, runtime_cause
from runners.base import Failure, Timing, VerifyResult

MAX_ERRORS = 5
MAX_FOLLOW_ONS = 3
_DEVICE_CHECKS = ("load", "init", "run", "crash", "timeout")
_DEVICE_LOG_LINES = 4


def _source_line(files: Mapping[str, str], file: str, line: int) -> str:
    """The text of `line` in the package file named like `file` ("" when unknown)."""
    name = PurePath(file).name
    for path, text in files.items():
        if PurePath(path).name == name:
            lines = text.splitlines()
            return lines[line - 1] if 0 < line <= len(lines) else ""
    return ""


def _place(diagnostic: Diagnostic) -> str:
    if diagnostic.file is None:
        return diagnostic.tool or "build"
    name = PurePath(diagnostic.file).name
    return f"{name}:{diagnostic.line}" if diagnostic.line is not None else name


def _diagnostic_lines(diagnostic: Diagnostic, files: Mapping[str, str]) -> list[str]:
    lines = [f"{_place(diagnostic)}: error: {diagnostic.message}"]
    source = diagnostic.source_line or (
        _source_line(files, diagnostic.file, diagnostic.line)
        if diagnostic.file and diagnostic.line else "")
    if source.strip():
        lines.append(f"    {source.strip()}")
    if diagnostic.origin:
        echo = f": {diagnostic.origin_source_line.strip()}" \
            if diagnostic.origin_source_line else ""
        lines.append(f"    (reported inside {PurePath(diagnostic.origin).name}{echo})")
    if diagnostic.referenced_by and diagnostic.kind == "link":
        lines.append(f"    referenced by {', '.join(diagnostic.referenced_by[:3])}")
    if diagnostic.hint:
        lines.append(f"    hint: {diagnostic.hint}")
    if diagnostic.follow_ons:
        shown = "; ".join(f"{_place(item)}: {clip(item.message, 100)}"
                          for item in diagnostic.follow_ons[:MAX_FOLLOW_ONS])
        more = len(diagnostic.follow_ons) - MAX_FOLLOW_ONS
        lines.append(f"    (+{len(diagnostic.follow_ons)} follow-on error(s) from this one: "
                     f"{shown}{f'; {more} more' if more > 0 else ''})")
    return lines


def build_feedback(failure: Failure, files: Mapping[str, str]) -> str:
    """A failed build step: every root error (up to MAX_ERRORS), else the log's excerpt."""
    report = parse_compiler_report(failure.log_tail or "", user_files=list(files) or None)
    errors = first_errors(report)
    head = f"[build] {failure.message}"
    if not errors and failure.location is not None:
        location = failure.location
        source = location.source_line or _source_line(files, location.file, location.line)
        return "\n".join([head, f"{PurePath(location.file).name}:{location.line}: error: "
                          f"{failure.message}", f"    {source.strip()}"])
    if not errors:
        return f"{head}\n  log (start, first error, end):\n{excerpt_log(failure.log_tail or '')}"
    lines = [head]
    for diagnostic in errors[:MAX_ERRORS]:
        lines += _diagnostic_lines(diagnostic, files)
    if len(errors) > MAX_ERRORS:
        lines.append(f"(and {len(errors) - MAX_ERRORS} more errors)")
    return "\n".join(lines)


def runtime_feedback(failure: Failure, files: Mapping[str, str]) -> str | None:
    """A device failure with the ACL code's meaning, where it failed and the hint; None when
    the failure's text holds no account from the device."""
    if failure.check not in _DEVICE_CHECKS:
        return None
    cause = runtime_cause(f"{failure.message}\n{failure.log_tail or ''}")
    recorded: dict[str, Any] = failure.details.get("runtime") or {}
    if cause is None and not recorded:
        return None
    said = describe(cause) if cause is not None else ""
    # The runner may have put the same description into the message: say it once.
    message = failure.message.replace(f"; the device says: {said}", "").replace(said, "")
    lines = [f"[{failure.check}] {message.rstrip(': ;')}"]
    code = cause.code if cause is not None else recorded.get("code")
    meaning = cause.meaning if cause is not None else recorded.get("meaning")
    hint = cause.hint if cause is not None else recorded.get("hint")
    if code is not None or meaning:
        head = f"ACL error {code}" if code is not None else "device error"
        lines.append(f"  {head}: {meaning or 'no meaning known for this code'}")
    if cause is not None:
        where = describe(replace(cause, code=None, meaning=None, hint=None))
        where = where.removeprefix("runtime error").strip(" ()")
        if where:
            lines.append(f"  where: {where}")
    location = failure.location
    if location is not None:
        source = location.source_line or _source_line(files, location.file, location.line)
        text = f": {source.strip()}" if source.strip() else ""
        lines.append(f"  at line {location.line} of {PurePath(location.file).name}{text}")
    if cause is not None and cause.environmental:
        lines.append("  This is the machine's failure, not the kernel's: do not change the "
                     "kernel for it.")
    if hint:
        lines.append(f"  hint: {hint}")
    log_lines = cause.log_lines if cause is not None else recorded.get("log_lines") or []
    if log_lines:
        lines.append("  device log:")
        lines += [f"    {line}" for line in log_lines[:_DEVICE_LOG_LINES]]
    return "\n".join(lines)


def _log_excerpted(failure: Failure) -> Failure:
    """The shared shaping shows a log's middle-cut end in ~1,500 characters: cut it here
    first, so the first error line (a Python exception, a device line) is among them."""
    if not failure.log_tail:
        return failure
    return replace(failure, log_tail=excerpt_log(failure.log_tail, head=400, tail=650,
                                                  around_error=350))


def _with_source(failure: Failure, files: Mapping[str, str]) -> Failure:
    location = failure.location
    if location is None or location.source_line:
        return failure
    source = _source_line(files, location.file, location.line)
    return replace(failure, location=replace(location, source_line=source))


def _in_package(failure: Failure, files: Mapping[str, str]) -> Failure:
    """A location in opbot's own code (the CPU model's shim, a temp folder) tells the model
    nothing it can fix: dropped, so the log's end is shown instead."""
    location = failure.location
    if location is None or PurePath(location.file).name in {PurePath(name).name
                                                             for name in files}:
        return failure
    return replace(failure, location=None)


def ascendc_feedback(result: VerifyResult, files: Mapping[str, str]) -> str:
    """What the next draft must fix: build errors first, then device failures, then the rest."""
    builds = [item for item in result.reasons if item.check == "build"]
    parts = [f"The package failed on {result.device}."]
    parts += [build_feedback(item, files) for item in builds]
    others = []
    for item in result.reasons:
        if item.check == "build":
            continue
        device = runtime_feedback(item, files)
        if device is not None:
            parts.append(device)
        else:
            others.append(_with_source(_log_excerpted(_in_package(item, files)), files))
    if others:
        parts.append(verification_feedback(replace(result, reasons=others)))
    said = "\n".join(f"{item.message}\n{item.log_tail or ''}" for item in result.reasons)
    parts += [f"Hint: {hint}." for hint in api_check_hints(said)]
    return "\n\n".join(parts)


def profile_lines(timing: Timing) -> list[str]:
    """The profiler's figures in a Timing: the kernel's own device time and its bottleneck."""
    lines: list[str] = []
    # The runner's note holds the profile in full (launches, spread, block dim, ratio).
    profiled = [part.strip().removeprefix("msprof:").strip() for part in timing.note.split(";")
                if part.strip().startswith(("msprof:", "bound by"))]
    if profiled:
        lines.append("Profiler (msprof): " + "; ".join(profiled) + ".")
    elif timing.kernel_us is not None:
        lines.append(f"Profiler (msprof): the kernel itself takes {timing.kernel_us:.2f} us per "
                     "launch on the device (median).")
    if timing.bottleneck:
        hint = PIPE_HINTS.get(timing.bottleneck.split("_", 1)[-1])
        lines.append(f"Bottleneck: the {timing.bottleneck} pipe" + (f": {hint}." if hint else "."))
    return lines


def ascendc_timing_feedback(timing: Timing) -> str:
    """The shared timing feedback plus the profiler's figures, before the ask to go faster."""
    base = timing_feedback(timing)
    extra = profile_lines(timing)
    if not extra:
        return base
    first, _, rest = base.partition("\n")
    return "\n".join([first, *extra, rest]) if rest else "\n".join([first, *extra])
