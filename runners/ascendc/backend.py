"""The Ascend C backend: build an operator package with CANN, run its NPU tests, time it.

A candidate is an operator package (`ops/<name>/` holding `ascendc/opbot.json`, as
runners/ascendc/package.py writes it). verify() runs the package's BuildPlan for "npu"
(configure, build, pytest -m npu) in subprocesses with timeouts and turns what happens
into a typed VerifyResult: a failed step becomes a Failure naming the check ("build",
"timeout", "values", "run") with the compiler's first error located in the source.

CANN detection (runners/ascendc/detect.py) and the log parsers (runners/ascendc/parsers.py)
are imported lazily: where they, CANN or torch_npu are missing, availability() says why
and verify() returns a failed result with check "build". It never raises.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal
from xml.etree import ElementTree

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
from runners.base import (
    Availability,
    CaseResult,
    Failure,
    SourceLocation,
    StageResult,
    Timing,
    VerifyRequest,
    VerifyResult,
)

LOG_TAIL = 4000  # characters of a failed step's output kept in the result
_CASE_ID = re.compile(r"\[(?P<case>[^\]]+)\]$")
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


# --------------------------------------------------------------------------- test results


@dataclass(frozen=True)
class TestReport:
    cases: list[CaseResult]
    failures: list[Failure]
    skipped: list[str] = field(default_factory=list)


def _case_info(cases: Mapping[str, Mapping[str, Any]], name: str) -> tuple[
        list[list[int]], list[str], int]:
    case = cases.get(name)
    if case is None:
        return [], [], 0
    tensors = [item for item in case.get("inputs", []) if item.get("kind") == "tensor"]
    return ([list(item.get("shape", [])) for item in tensors],
            [str(item.get("dtype", "")) for item in tensors], int(case.get("seed", 0)))


def parse_junit(text: str, cases: Mapping[str, Mapping[str, Any]] | None = None) -> TestReport:
    """pytest's JUnit XML -> one CaseResult per test case, a Failure per failed one."""
    # The report is pytest's own output in the package's build folder, not input from afar.
    root = ElementTree.fromstring(text)  # noqa: S314
    known = cases or {}
    results: list[CaseResult] = []
    failures: list[Failure] = []
    skipped: list[str] = []
    for testcase in root.iter("testcase"):
        name = str(testcase.get("name", ""))
        match = _CASE_ID.search(name)
        case = match["case"] if match else name
        problem = testcase.find("failure")
        if problem is None:
            problem = testcase.find("error")
        skip = testcase.find("skipped")
        if skip is not None:
            skipped.append(f"{case}: {skip.get('message', '')}")
            continue
        shapes, dtypes, seed = _case_info(known, case)
        note = "" if problem is None else str(problem.get("message", ""))[:300]
        results.append(CaseResult(name=case, shapes=shapes, dtypes=dtypes, seed=seed,
                                  passed=problem is None, note=note))
        if problem is not None:
            check = "values" if "Mismatched elements" in (problem.text or "") or \
                "not close" in note else "run"
            failures.append(Failure(check=check, message=f"{case}: {note or 'failed'}",
                                    case=case, log_tail=(problem.text or "")[-LOG_TAIL:]))
    return TestReport(results, failures, skipped)


def _timing(output: str) -> Timing | None:
    for line in reversed(output.strip().splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and "candidate_ms" in data:
            return Timing(device="npu", shapes=[list(item) for item in data.get("shapes", [])],
                          trials=int(data.get("trials", 0)),
                          candidate_ms=float(data["candidate_ms"]),
                          candidate_min_ms=float(data.get("candidate_min_ms", 0.0)),
                          candidate_max_ms=float(data.get("candidate_max_ms", 0.0)),
                          reference_ms=float(data.get("reference_ms", 0.0)),
                          speedup=float(data.get("speedup", 0.0)))
    return None


# --------------------------------------------------------------------------- the backend


class AscendCBackend:
    """Builds and verifies Ascend C operator packages on a runner with CANN and an NPU."""

    name: Literal["ascendc"] = "ascendc"

    def __init__(self, *, detect: Callable[[], Toolchain] = detect_toolchain,
                 runner: CommandRunner = run_step, python: str = sys.executable,
                 soc: str | None = None, npu_arch: str | None = None) -> None:
        self._detect = detect
        self._runner = runner
        self._python = python
        self._soc = soc
        self._npu_arch = npu_arch
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
        return self._run(request, folder, plan, warnings)

    def _environment(self, request: VerifyRequest, folder: Path) -> dict[str, str]:
        env = {"OPBOT_REFERENCE": str(request.reference.resolve())}
        if request.cases:
            cases_file = folder / "build-npu" / "opbot-cases.json"
            cases_file.parent.mkdir(parents=True, exist_ok=True)
            cases_file.write_text(json.dumps([case.to_json() for case in request.cases]),
                                  encoding="utf-8")
            env["OPBOT_ASCENDC_CASES"] = str(cases_file)
        return env

    def _run(self, request: VerifyRequest, folder: Path, plan: BuildPlan,
             warnings: list[str]) -> VerifyResult:
        run = _Run(request, folder, plan, warnings)
        env = self._environment(request, folder)
        build_seconds = 0.0
        for planned in plan.steps:
            step = replace(planned, env={**planned.env, **env})
            outcome = self._runner(step, folder)
            if step.name == "test":
                run.stages.append(StageResult("build", True, build_seconds))
                return self._tested(run, outcome)
            build_seconds += outcome.seconds
            if not outcome.ok:
                run.stages.append(StageResult("build", False, build_seconds, step.name))
                return run.result([step_failure(step, outcome)])
        return _failed("build", "the build plan has no test step")

    def _tested(self, run: _Run, outcome: StepOutcome) -> VerifyResult:
        known = {case.name: case.to_json() for case in run.request.cases}
        try:
            report = parse_junit((run.folder / run.plan.report).read_text(encoding="utf-8"),
                                 known)
        except (OSError, ElementTree.ParseError) as exc:
            run.stages.append(StageResult("check", False, outcome.seconds))
            return run.result([Failure(check="timeout" if outcome.timed_out else "run",
                                       message=f"the NPU tests left no readable report ({exc})",
                                       log_tail=outcome.output[-LOG_TAIL:])])
        reasons = list(report.failures)
        if not report.cases:
            reasons.append(Failure(check="run", message="no NPU test ran: "
                                   + ("; ".join(report.skipped[:3]) or "pytest collected none"),
                                   log_tail=outcome.output[-LOG_TAIL:]))
        run.stages.append(StageResult("check", not reasons, outcome.seconds))
        timing = None
        if run.request.time_it and not reasons:
            timing, stage = self._time(run.folder, run.plan, env={
                "OPBOT_REFERENCE": str(run.request.reference.resolve())})
            run.stages.append(stage)
        return run.result(reasons, cases=report.cases, timing=timing)

    def _time(self, folder: Path, plan: BuildPlan,
              env: Mapping[str, str]) -> tuple[Timing | None, StageResult]:
        step = Step("time", (self._python, f"bench_{plan.op}.py"),
                    env={"OPBOT_ASCENDC_LIB": plan.library, **env}, timeout_s=900.0)
        outcome = self._runner(step, folder)
        timing = _timing(outcome.output) if outcome.ok else None
        return timing, StageResult("time", timing is not None, outcome.seconds,
                                   "" if timing else outcome.output[-300:])

    def lint(self, candidate: Path) -> str:
        """The lint's findings on a package, as feedback text."""
        return feedback(lint_package(_package_files(resolve_package(candidate))))


@dataclass
class _Run:
    """One verification in progress: what it works on, and the stages so far."""

    request: VerifyRequest
    folder: Path
    plan: BuildPlan
    warnings: list[str]
    stages: list[StageResult] = field(default_factory=list)

    def result(self, reasons: list[Failure], *, cases: list[CaseResult] | None = None,
               timing: Timing | None = None) -> VerifyResult:
        return VerifyResult(status="failed" if reasons else "passed", reasons=reasons,
                            cases=cases or [], stages=self.stages, device="npu",
                            warnings=self.warnings, timing=timing)


def _failed(check: str, message: str, *, device: str = "npu") -> VerifyResult:
    stage: Literal["load", "build"] = "load" if check == "load" else "build"
    return VerifyResult.failed(Failure(check=check, message=message),
                               stages=[StageResult(stage, False, 0.0, message)], device=device)
