"""A package's build steps run as commands, and a failed step as a Failure.

A step runs without a shell, stdout and stderr together as a log reads, under its own
timeout; a step that runs the package's own code (its test, its benchmark) runs in the
sandbox the judge's workers run in (runners/sandbox.py). A failed step names the check
that failed: "timeout" past its limit; "build" with the compiler's first error located in
the source; "run" when the log holds no compiler error but the device's account of a
run-time failure (an ACL error code, a device record), with its meaning, hint and call
site (runners/ascendc/runtime_errors.py). The log a failure keeps is the step's output cut
by excerpt_log: its start (where a build's first, root error is), its first error line with
its context wherever it sits, and its end.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from runners.ascendc.package import Step
from runners.ascendc.parsers.common import excerpt_log
from runners.ascendc.parsers.compiler import Diagnostic, parse_compiler_output
from runners.ascendc.runtime_errors import describe, details, location, runtime_cause
from runners.base import Failure, SourceLocation
from runners.sandbox import (
    SandboxPolicy,
    SandboxUnavailableError,
    private_workdir,
    run_isolated,
    sandbox_environment,
)

_LOCATION = re.compile(r"^(?P<file>[^\s:]+):(?P<line>\d+)(?::\d+)?: (?:fatal )?error: (?P<msg>.*)$",
                       re.MULTILINE)
_ERROR_SEVERITIES = ("error", "fatal error", "fatal")


@dataclass(frozen=True)
class StepOutcome:
    name: str
    returncode: int
    seconds: float
    output: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


CommandRunner = Callable[[Step, Path], StepOutcome]


def run_step(step: Step, cwd: Path) -> StepOutcome:
    """Run one step in `cwd`: a build command as it is, a step that runs the package's own
    code (its test, its benchmark) in opbot's sandbox."""
    if step.runs_package_code:
        return run_sandboxed(step, cwd)
    return run_command(step, cwd)


def run_command(step: Step, cwd: Path) -> StepOutcome:
    """Run one step without a shell; stdout and stderr together, as a log reads."""
    start = time.monotonic()
    try:
        completed = subprocess.run(list(step.argv), cwd=cwd, env={**os.environ, **step.env},
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   errors="replace", timeout=step.timeout_s, check=False)
    except FileNotFoundError as exc:
        return StepOutcome(step.name, 127, time.monotonic() - start, f"{exc}")
    except subprocess.TimeoutExpired as exc:
        output = exc.output if isinstance(exc.output, str) else ""
        return StepOutcome(step.name, 124, time.monotonic() - start, output, timed_out=True)
    return StepOutcome(step.name, completed.returncode, time.monotonic() - start,
                       completed.stdout or "")


def run_sandboxed(step: Step, cwd: Path, policy: SandboxPolicy | None = None) -> StepOutcome:
    """Run one step in the sandbox the judge's workers run in: `cwd` (the package folder,
    where a profiler writes its results) is its work folder, the folder above it (the op
    folder, with the reference) and the step's `readable` paths are readable, the
    environment passes by exact names only (the step's own variables added), no network."""
    with private_workdir("opbot-step-") as root:
        try:
            outcome = run_isolated(list(step.argv), cwd=cwd, timeout_s=step.timeout_s,
                                   log_path=root / "step.log",
                                   env=sandbox_environment(cwd, step.env), policy=policy,
                                   readable=[cwd.parent, *(Path(item) for item in step.readable)])
        except (SandboxUnavailableError, OSError) as exc:
            return StepOutcome(step.name, 126, 0.0, f"{type(exc).__name__}: {exc}")
        output = _read_step_log(root / "step.log", outcome.log_tail)
    stopped = f"\n[opbot] the sandbox stopped it: {outcome.killed_because}" \
        if outcome.killed_because else ""
    return StepOutcome(step.name, -1 if outcome.returncode is None else outcome.returncode,
                       outcome.seconds, output + stopped, timed_out=outcome.timed_out)


_MAX_LOG_BYTES = 4 * 1024 * 1024  # a step's log read back: its start holds the first error


def _read_step_log(path: Path, tail: str) -> str:
    """The sandboxed step's whole log (its start, bounded, then the sandbox's tail when it
    is longer): the sandbox keeps only the end, where a first error is no longer.

    The child wrote the file, so it is opened as untrusted: never through a final symlink,
    never blocking on a FIFO, only a regular file; anything else gives the tail alone.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return tail
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return tail
        chunks: list[bytes] = []
        size = 0
        while size < _MAX_LOG_BYTES:
            chunk = os.read(fd, min(1 << 20, _MAX_LOG_BYTES - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError:
        return tail
    finally:
        os.close(fd)
    text = b"".join(chunks).decode("utf-8", errors="replace")
    if not text:
        return tail
    if info.st_size > size:
        text += f"\n[... {info.st_size - size} bytes not read ...]\n{tail}"
    return text


def step_failure(step: Step, outcome: StepOutcome) -> Failure:
    """A failed step as a Failure: past its time, a compiler error, or the device's error."""
    if outcome.timed_out:
        return Failure(check="timeout", message=f"{step.name} ran past {step.timeout_s:g} s",
                       details={"step": step.name, "argv": list(step.argv)},
                       log_tail=excerpt_log(outcome.output))
    diagnostics = _diagnostics(outcome.output)
    cause = None if _errors(diagnostics) else runtime_cause(outcome.output)
    status = "not found" if outcome.returncode == 127 else f"exit status {outcome.returncode}"
    if cause is not None:
        return Failure(check="run", message=f"{step.name} failed at run time ({status}): "
                       f"{describe(cause)}",
                       details={"step": step.name, "argv": list(step.argv),
                                "runtime": details(cause)},
                       location=location(cause), log_tail=excerpt_log(outcome.output))
    message, place, rendered = _first_error(outcome.output, diagnostics)
    return Failure(check="build", message=f"{step.name} failed ({status}): {message}",
                   details={"step": step.name, "argv": list(step.argv),
                            "diagnostics": rendered},
                   location=place, log_tail=excerpt_log(outcome.output))


def _diagnostics(output: str) -> list[Diagnostic]:
    try:
        return parse_compiler_output(output)
    except Exception:  # noqa: BLE001 - a parser bug must not hide the build failure
        return []


def _errors(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    return [item for item in diagnostics if item.severity in _ERROR_SEVERITIES]


def _rendered(item: Diagnostic) -> str:
    text = f"{item.location or item.tool or '?'}: {item.message}"
    if item.origin:
        text += f" (reported inside {item.origin})"
    if item.follow_ons:
        text += f" (+{len(item.follow_ons)} follow-on error(s))"
    return text


def _first_error(output: str, diagnostics: list[Diagnostic]
                 ) -> tuple[str, SourceLocation | None, list[str]]:
    """The first error's message and place, and a short list of all diagnostics."""
    errors = _errors(diagnostics)
    rendered = [_rendered(item) for item in (errors or diagnostics)[:10]]
    if errors:
        first = errors[0]
        place = (SourceLocation(first.file, first.line, first.source_line or "")
                 if first.file and first.line else None)
        return first.message, place, rendered
    match = _LOCATION.search(output)
    if match is not None:
        return (match["msg"], SourceLocation(match["file"], int(match["line"])),
                rendered or [match.group(0)])
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return (lines[-1][:300] if lines else "no output"), None, rendered
