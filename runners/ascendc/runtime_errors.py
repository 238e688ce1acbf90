"""A run-time failure of the NPU, read from a log, as the words of a Failure.

The runtime parser (runners/ascendc/parsers/runtime.py) reads what ACL, torch_npu and the
device records printed: the error code and its meaning, the kernel and core at fault, the
ACL call and where the host made it, and a hint. This module turns that into what a
verdict carries, so the agent's feedback says why the device failed: one line for the
failure's message, the parsed fields for its details, the call site for its location.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from runners.ascendc.parsers.runtime import RuntimeFailure, parse_runtime_error
from runners.base import Failure, SourceLocation

# The judge's checks whose text can hold the device's own account of a failure.
_DEVICE_CHECKS = ("load", "init", "run", "crash", "timeout")


def runtime_cause(log: str) -> RuntimeFailure | None:
    """The run-time failure a log reports, or None when it reports none."""
    cause = parse_runtime_error(log)
    recognised = (cause.code is not None or cause.error_ids or cause.ret_code
                  or cause.error_str or cause.pta_code or cause.reason or cause.hint)
    return cause if recognised else None


def describe(cause: RuntimeFailure) -> str:
    """One line: the code and its meaning, the kernel and core at fault, and the hint."""
    code = "" if cause.code is None else f" {cause.code}"
    text = f"runtime error{code}"
    if cause.meaning:
        text += f": {cause.meaning}"
    where = _where(cause)
    if where:
        text += f" ({where})"
    if cause.hint:
        text += f". Hint: {cause.hint}"
    return text


def _where(cause: RuntimeFailure) -> str:
    core = " ".join(str(part) for part in (cause.core_type, "core", cause.core_id)
                    if part is not None) if cause.core_type else ""
    parts = [f"kernel {cause.kernel}" if cause.kernel else "",
             f"operator {cause.operator}" if cause.operator else "", core,
             f"in {cause.api}" if cause.api else "",
             f"called at {cause.call_site}" if cause.call_site else ""]
    return ", ".join(part for part in parts if part)


def details(cause: RuntimeFailure) -> dict[str, Any]:
    """The parsed fields a reader (or a later tool) can use without reading prose."""
    fields = {"code": cause.code, "meaning": cause.meaning, "hint": cause.hint,
              "kernel": cause.kernel, "operator": cause.operator, "api": cause.api,
              "call_site": cause.call_site, "core_type": cause.core_type,
              "core_id": cause.core_id, "error_ids": cause.error_ids,
              "environmental": cause.environmental, "log_lines": cause.log_lines}
    return {key: value for key, value in fields.items() if value not in (None, [])}


def location(cause: RuntimeFailure) -> SourceLocation | None:
    """The host source line of the failed ACL call (`main.cpp:92`), when the log names it."""
    if cause.call_site is None:
        return None
    file, _, line = cause.call_site.rpartition(":")
    return SourceLocation(file, int(line)) if file and line.isdigit() else None


def with_runtime_cause(failure: Failure, *, opbot_file: Path | None = None) -> Failure:
    """The judge's failure, with the device's account of it when its text holds one.

    `opbot_file` is opbot's own candidate (the shim): a location there says nothing the
    agent can fix, so the failed call's site replaces it.
    """
    if failure.check not in _DEVICE_CHECKS:
        return failure
    cause = runtime_cause(f"{failure.message}\n{failure.log_tail or ''}")
    if cause is None:
        return failure
    placed = failure.location
    if placed is None or (opbot_file is not None
                          and Path(placed.file).resolve() == opbot_file.resolve()):
        placed = location(cause) or placed
    return replace(failure, message=f"{failure.message}; the device says: {describe(cause)}",
                   details={**failure.details, "runtime": details(cause)}, location=placed)
