"""The Ascend C backend: build an operator package with CANN, then verify it with the judge.

A candidate is an operator package (`ops/<name>/` holding `ascendc/opbot.json`, as
runners/ascendc/package.py writes it). verify() runs the build steps of the package's
BuildPlan for "npu" (configure, build) in subprocesses with timeouts; a failed step becomes
a Failure naming the check ("build", "timeout") with the compiler's first error located in
the source. A built package is then verified like any candidate, in the same topology as
every backend: runners/ascendc/shim.py writes a small candidate next to the library whose
forward calls `torch.ops.<namespace>.<op>`, and the judge (runners.verify.run_harness) runs
the reference and that candidate in separate sandboxed workers, compares the outputs and,
when asked, times both with the device's events. The package's own `pytest -m npu` test and
benchmark stay in the package for its users; the verdict never comes from them.

CANN detection (runners/ascendc/detect.py) and the log parsers (runners/ascendc/parsers.py)
are imported lazily: where they, CANN or torch_npu are missing, availability() says why
and verify() returns a failed result with check "build". It never raises.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Literal

from runners.ascendc.lint import feedback, lint_package
from runners.ascendc.package import (
    MANIFEST,
    BuildContext,
    BuildPlan,
    Manifest,
    PackageError,
    Step,
    build_plan,
    read_manifest,
)
from runners.ascendc.shim import write_shim
from runners.base import (
    Availability,
    Failure,
    SourceLocation,
    StageResult,
    VerifyRequest,
    VerifyResult,
)
from runners.verify import run_harness

LOG_TAIL = 4000  # characters of a failed step's output kept in the result
_LOCATION = re.compile(r"^(?P<file>[^\s:]+):(?P<line>\d+)(?::\d+)?: (?:fatal )?error: (?P<msg>.*)$",
                       re.MULTILINE)


# --------------------------------------------------------------------------- commands


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
# The judge: runners.verify.run_harness, or a stand-in in tests.
Judge = Callable[[VerifyRequest], VerifyResult]


def run_step(step: Step, cwd: Path) -> StepOutcome:
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


# --------------------------------------------------------------------------- toolchain


@dataclass(frozen=True)
class Toolchain:
    """What the runner has: CANN (and which generation), torch_npu, the SoC."""

    found: bool
    reason: str = ""
    home: str = ""
    version: str = ""
    generation: Literal["legacy", "asc"] | None = None


def _optional_module(name: str) -> Any | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def detect_toolchain() -> Toolchain:
    """CANN through runners/ascendc/detect.py, then torch_npu (located, not imported)."""
    detect = _optional_module("runners.ascendc.detect")
    if detect is None or not hasattr(detect, "detect_cann"):
        return Toolchain(False, "CANN detection is unavailable (runners/ascendc/detect.py "
                         "is missing), so the Ascend C backend cannot run here")
    try:
        info = detect.detect_cann()
    except Exception as exc:  # noqa: BLE001 - detection must never take the backend down
        return Toolchain(False, f"CANN detection failed: {type(exc).__name__}: {exc}")
    return toolchain_from(info, torch_npu_found=importlib.util.find_spec("torch_npu")
                          is not None)


def toolchain_from(info: Any, *, torch_npu_found: bool) -> Toolchain:
    """A Toolchain from a detect_cann() result (anything with found/home/version/...)."""
    if not getattr(info, "found", False):
        problems = "; ".join(str(item) for item in getattr(info, "problems", [])[:3])
        return Toolchain(False, "no CANN toolkit found (source <CANN>/set_env.sh so "
                         "ASCEND_HOME_PATH is set)" + (f": {problems}" if problems else ""))
    home = str(getattr(info, "home", "") or "")
    version = str(getattr(info, "version", "") or "")
    generation = getattr(info, "generation", None)
    if not torch_npu_found:
        return Toolchain(False, f"CANN {version or '(version unknown)'} is at {home}, but "
                         "torch_npu is not installed (pip install torch_npu matching torch)",
                         home, version, generation)
    return Toolchain(True, "", home, version, generation if generation in ("legacy", "asc")
                     else None)


def _detect_soc() -> tuple[str | None, str | None]:
    detect = _optional_module("runners.ascendc.detect")
    if detect is None or not hasattr(detect, "detect_soc"):
        return None, None
    try:
        info = detect.detect_soc()
    except Exception:  # noqa: BLE001 - a missing npu-smi must not fail the build
        return None, None
    return getattr(info, "soc", None), getattr(info, "arch", None)


# --------------------------------------------------------------------------- the package


def resolve_package(candidate: Path) -> Path:
    """The ascendc/ folder of an operator package, from the op folder, the ascendc folder
    or a file inside either."""
    start = candidate if candidate.is_dir() else candidate.parent
    for folder in (start / "ascendc", start, start.parent):
        if (folder / MANIFEST).is_file():
            return folder
    raise PackageError(f"{candidate}: no ascendc/{MANIFEST} here (not an opbot Ascend C "
                       "package; write one with runners.ascendc.package)")


def _package_files(folder: Path) -> dict[str, str]:
    """The package's sources (not what builds and profiles left next to them)."""
    files: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if any(part.startswith(("build", "prof")) for part in relative.parts[:-1]):
            continue
        if path.is_file() and path.suffix in (".cpp", ".asc", ".h", ".json", ".txt"):
            files[f"ascendc/{relative.as_posix()}"] = path.read_text(encoding="utf-8",
                                                                     errors="replace")
    return files


# --------------------------------------------------------------------------- failures


def _diagnostics(output: str) -> list[Any]:
    parsers = _optional_module("runners.ascendc.parsers")
    if parsers is None or not hasattr(parsers, "parse_compiler_output"):
        return []
    try:
        return list(parsers.parse_compiler_output(output))
    except Exception:  # noqa: BLE001 - a parser bug must not hide the build failure
        return []


def _first_error(output: str) -> tuple[str, SourceLocation | None, list[str]]:
    """The first error's message and place, and a short list of all diagnostics."""
    diagnostics = _diagnostics(output)
    errors = [item for item in diagnostics if getattr(item, "severity", "") in
              ("error", "fatal error", "fatal")]
    rendered = [f"{getattr(item, 'location', None) or '?'}: {getattr(item, 'message', item)}"
                for item in (errors or diagnostics)[:10]]
    if errors:
        first = errors[0]
        location = None
        if getattr(first, "file", None) and getattr(first, "line", None):
            location = SourceLocation(str(first.file), int(first.line),
                                      str(getattr(first, "source_line", "") or ""))
        return str(first.message), location, rendered
    match = _LOCATION.search(output)
    if match is not None:
        return (match["msg"], SourceLocation(match["file"], int(match["line"])),
                rendered or [match.group(0)])
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return (lines[-1][:300] if lines else "no output"), None, rendered


def step_failure(step: Step, outcome: StepOutcome) -> Failure:
    """A failed build step as a Failure: the first compiler error, located, plus the log."""
    if outcome.timed_out:
        return Failure(check="timeout", message=f"{step.name} ran past {step.timeout_s:g} s",
                       details={"step": step.name, "argv": list(step.argv)},
                       log_tail=outcome.output[-LOG_TAIL:])
    message, location, diagnostics = _first_error(outcome.output)
    detail = "not found" if outcome.returncode == 127 else f"exit status {outcome.returncode}"
    return Failure(check="build", message=f"{step.name} failed ({detail}): {message}",
                   details={"step": step.name, "argv": list(step.argv),
                            "diagnostics": diagnostics},
                   location=location, log_tail=outcome.output[-LOG_TAIL:])


# --------------------------------------------------------------------------- the backend


class AscendCBackend:
    """Builds Ascend C operator packages on a runner with CANN and an NPU; the judge
    verifies what was built."""

    name: Literal["ascendc"] = "ascendc"

    def __init__(self, *, detect: Callable[[], Toolchain] = detect_toolchain,
                 runner: CommandRunner = run_step, python: str = sys.executable,
                 soc: str | None = None, npu_arch: str | None = None,
                 judge: Judge | None = None) -> None:
        """`judge` None: runners.verify.run_harness, its workers run by `python` too."""
        self._detect = detect
        self._runner = runner
        self._python = python
        self._soc = soc
        self._npu_arch = npu_arch
        self._judge: Judge = judge or partial(run_harness, python=python)
        self._toolchain: Toolchain | None = None

    def toolchain(self) -> Toolchain:
        if self._toolchain is None:
            self._toolchain = self._detect()
        return self._toolchain

    def availability(self) -> Availability:
        toolchain = self.toolchain()
        if not toolchain.found:
            return Availability(False, "none", toolchain.reason)
        generation = toolchain.generation or "unknown generation"
        return Availability(True, "npu", f"CANN {toolchain.version} ({generation}) at "
                            f"{toolchain.home}")

    def plan_for(self, manifest: Manifest, toolchain: Toolchain) -> BuildPlan:
        soc, arch = (self._soc, self._npu_arch)
        if soc is None or arch is None:
            detected_soc, detected_arch = _detect_soc()
            soc = soc or detected_soc or manifest.soc
            arch = arch or detected_arch or manifest.npu_arch
        context = BuildContext.for_runner(cann_home=toolchain.home, soc=soc, npu_arch=arch,
                                          python=self._python)
        return build_plan(manifest.op, manifest.generation, "npu",
                          entries=list(manifest.entries.values()), context=context)

    def verify(self, request: VerifyRequest) -> VerifyResult:
        availability = self.availability()
        if not availability.available:
            return _failed("build", availability.reason, device="none")
        toolchain = self.toolchain()
        try:
            folder = resolve_package(request.candidate)
            manifest = read_manifest(folder)
        except (PackageError, OSError, ValueError, KeyError) as exc:
            return _failed("load", str(exc))
        if toolchain.generation and toolchain.generation != manifest.generation:
            return _failed("build", f"the package is written for the {manifest.generation} "
                           f"toolchain but this runner has CANN {toolchain.version} "
                           f"({toolchain.generation}); regenerate it for {toolchain.generation}")
        try:
            plan = self.plan_for(manifest, toolchain)
        except (ImportError, PackageError) as exc:
            return _failed("build", f"cannot plan the build: {exc}")
        warnings = [item.render() for item in lint_package(_package_files(folder))]
        return self._run(request, folder, manifest, plan, warnings)

    def _run(self, request: VerifyRequest, folder: Path, manifest: Manifest, plan: BuildPlan,
             warnings: list[str]) -> VerifyResult:
        run = _Run(warnings)
        build_seconds = 0.0
        for step in plan.steps:
            if step.name == "test":
                break  # the package's own test: the judge verifies instead
            outcome = self._runner(step, folder)
            build_seconds += outcome.seconds
            if not outcome.ok:
                run.stages.append(StageResult("build", False, build_seconds, step.name))
                return run.result([step_failure(step, outcome)])
        library = folder / plan.library
        if not library.is_file():
            run.stages.append(StageResult("build", False, build_seconds, "no library"))
            return run.result([Failure(check="build", message=f"the build succeeded but left "
                                       f"no {plan.library} (the operator's torch library)")])
        run.stages.append(StageResult("build", True, build_seconds))
        try:
            shim = write_shim(manifest.namespace, manifest.op, library)
        except (PackageError, OSError) as exc:
            return run.result([Failure(check="load", message=f"cannot write the candidate "
                                       f"that calls the operator: {exc}")])
        try:
            # The shim is opbot's own code (the model's is the C++ the build compiled): no
            # static scan of it; its worker must read the library beside it.
            verdict = self._judge(replace(request, candidate=shim, backend="ascendc",
                                          static_scan=False, readable=(library.parent,)))
        except Exception as exc:  # noqa: BLE001 - verify() answers with a verdict, always
            return run.result([Failure(check="crash", message=f"the judge failed: "
                                       f"{type(exc).__name__}: {exc}")])
        return run.judged(verdict)

    def lint(self, candidate: Path) -> str:
        """The lint's findings on a package, as feedback text."""
        return feedback(lint_package(_package_files(resolve_package(candidate))))


@dataclass
class _Run:
    """One verification in progress: the lint's warnings and the stages so far."""

    warnings: list[str]
    stages: list[StageResult] = field(default_factory=list)

    def result(self, reasons: list[Failure]) -> VerifyResult:
        return VerifyResult(status="failed" if reasons else "passed", reasons=reasons,
                            cases=[], stages=self.stages, device="npu",
                            warnings=self.warnings)

    def judged(self, verdict: VerifyResult) -> VerifyResult:
        """The judge's verdict, after the build's stage and with the lint's warnings."""
        return replace(verdict, stages=[*self.stages, *verdict.stages],
                       warnings=[*self.warnings, *verdict.warnings])


def _failed(check: str, message: str, *, device: str = "npu") -> VerifyResult:
    stage: Literal["load", "build"] = "load" if check == "load" else "build"
    return VerifyResult.failed(Failure(check=check, message=message),
                               stages=[StageResult(stage, False, 0.0, message)], device=device)
