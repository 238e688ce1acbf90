"""The Ascend C backend: build an operator package with CANN, then verify it with the judge.

A candidate is an operator package (`ops/<name>/` holding `ascendc/opbot.json`, as
runners/ascendc/package.py writes it). verify() runs the build steps of the package's
BuildPlan for "npu" (configure, build) in subprocesses with timeouts; a failed step becomes
a Failure naming the check ("build", "timeout", or "run" for the device's own error) with
the compiler's first error located in the source (runners/ascendc/steps.py). A built
package is then verified like any candidate, in the same topology as every backend:
runners/ascendc/shim.py writes a small candidate next to the library whose forward calls
`torch.ops.<namespace>.<op>`, and the judge (runners.verify.run_harness) runs the reference
and that candidate in separate sandboxed workers, compares the outputs and, when asked,
times both with the device's events. The judge's failures that hold the device's account
of a run-time error carry its meaning, hint and call site (runners/ascendc/runtime_errors.py).

With `time_it`, a passing package's own benchmark then runs under the profiler (the
"profile" step of its BuildPlan), in the sandbox the judge's workers run in: the kernel's
device time and bottleneck join the verdict's Timing (runners/ascendc/profiling.py), and a
device error in it fails the verdict, as it would on a user's machine. The package's own
`pytest -m npu` test stays in the package for its users; a verdict never passes on the
package's own word.

Where CANN or torch_npu is missing, availability() says why and verify() returns a failed
result with check "build". It never raises.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Literal

from runners.ascendc.cpu_verify import (
    cpu_model_availability,
    package_problems,
    verify_on_cpu_model,
)
from runners.ascendc.detect import CannInfo, detect_cann, detect_soc, generation_support
from runners.ascendc.lint import feedback, lint_package
from runners.ascendc.package import (
    MANIFEST,
    BuildContext,
    BuildPlan,
    Manifest,
    Mode,
    PackageError,
    build_plan,
    read_manifest,
)
from runners.ascendc.profiling import (
    bench_timing,
    missing_profile_note,
    profiled_timing,
    profiler_runs,
    read_kernel_profile,
)
from runners.ascendc.runtime_errors import describe, runtime_cause, with_runtime_cause
from runners.ascendc.shim import write_shim
from runners.ascendc.steps import CommandRunner, StepOutcome, run_step, step_failure
from runners.base import (
    Availability,
    Failure,
    StageResult,
    VerifyRequest,
    VerifyResult,
)
from runners.verify import run_harness

# The judge: runners.verify.run_harness, or a stand-in in tests.
Judge = Callable[[VerifyRequest], VerifyResult]


# --------------------------------------------------------------------------- toolchain


@dataclass(frozen=True)
class Toolchain:
    """What the runner has: CANN (and which generation), torch_npu, the SoC."""

    found: bool
    reason: str = ""
    home: str = ""
    version: str = ""
    generation: Literal["legacy", "asc"] | None = None


def detect_toolchain() -> Toolchain:
    """CANN through runners/ascendc/detect.py, then torch_npu (located, not imported:
    importing it without CANN fails)."""
    try:
        info = detect_cann()
    except Exception as exc:  # noqa: BLE001 - detection must never take the backend down
        return Toolchain(False, f"CANN detection failed: {type(exc).__name__}: {exc}")
    return toolchain_from(info, torch_npu_found=importlib.util.find_spec("torch_npu")
                          is not None)


def toolchain_from(info: CannInfo, *, torch_npu_found: bool) -> Toolchain:
    """A Toolchain from what detect_cann() found."""
    if not info.found:
        problems = "; ".join(str(item) for item in info.problems[:3])
        return Toolchain(False, "no CANN toolkit found (source <CANN>/set_env.sh so "
                         "ASCEND_HOME_PATH is set)" + (f": {problems}" if problems else ""))
    home, version = info.home or "", info.version or ""
    if not torch_npu_found:
        return Toolchain(False, f"CANN {version or '(version unknown)'} is at {home}, but "
                         "torch_npu is not installed (pip install torch_npu matching torch)",
                         home, version, info.generation)
    return Toolchain(True, "", home, version, info.generation)


def _detect_soc() -> tuple[str | None, str | None]:
    try:
        info = detect_soc()
    except Exception:  # noqa: BLE001 - a broken npu-smi must not fail the build
        return None, None
    return info.soc, info.arch


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


_LINT_MAX_BYTES = 4 * 1024 * 1024  # a link or a huge file is not read into memory for the lint


def _package_files(folder: Path) -> dict[str, str]:
    """The package's sources (not what builds and profiles left next to them)."""
    files: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if any(part.startswith(("build", "prof")) for part in relative.parts[:-1]):
            continue
        if path.is_file() and not path.is_symlink() and path.stat().st_size <= _LINT_MAX_BYTES \
                and path.suffix in (".cpp", ".asc", ".h", ".json", ".txt"):
            files[f"ascendc/{relative.as_posix()}"] = path.read_text(encoding="utf-8",
                                                                     errors="replace")
    return files


# --------------------------------------------------------------------------- the backend


class AscendCBackend:
    """Builds Ascend C operator packages on a runner with CANN and an NPU; the judge
    verifies what was built."""

    name: Literal["ascendc"] = "ascendc"

    def __init__(self, *, detect: Callable[[], Toolchain] = detect_toolchain,
                 runner: CommandRunner = run_step, python: str = sys.executable,
                 soc: str | None = None, npu_arch: str | None = None,
                 judge: Judge | None = None, cpu_model: bool = True) -> None:
        """`judge` None: runners.verify.run_harness, its workers run by `python` too.
        `cpu_model`: without CANN, verify on the CPU model where it can run here."""
        self._use_cpu_model = cpu_model
        self._cpu_model: Availability | None = None
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

    def cpu_model(self) -> Availability | None:
        """The CPU model's availability (no CANN here), None where it is not wanted."""
        if not self._use_cpu_model:
            return None
        if self._cpu_model is None:
            self._cpu_model = cpu_model_availability()
        return self._cpu_model

    def availability(self) -> Availability:
        toolchain = self.toolchain()
        if not toolchain.found:
            cpu = self.cpu_model()
            if cpu is not None and cpu.available:
                return cpu
            why = f"; no CPU model either: {cpu.reason}" if cpu is not None else ""
            return Availability(False, "none", toolchain.reason + why)
        generation = toolchain.generation or "unknown generation"
        return Availability(True, "npu", f"CANN {toolchain.version} ({generation}) at "
                            f"{toolchain.home}")

    def plan_for(self, manifest: Manifest, toolchain: Toolchain,
                 mode: Mode = "npu") -> BuildPlan:
        soc, arch = (self._soc, self._npu_arch)
        if soc is None or arch is None:
            detected_soc, detected_arch = _detect_soc()
            soc = soc or detected_soc or manifest.soc
            arch = arch or detected_arch or manifest.npu_arch
        context = BuildContext.for_runner(cann_home=toolchain.home, soc=soc, npu_arch=arch,
                                          python=self._python)
        return build_plan(manifest.op, manifest.generation, mode,
                          entries=list(manifest.entries.values()), context=context)

    def verify(self, request: VerifyRequest) -> VerifyResult:
        availability = self.availability()
        if not availability.available:
            return _failed("build", availability.reason, device="none")
        toolchain = self.toolchain()
        if not toolchain.found:
            return self._verify_on_cpu_model(request, availability.device)
        try:
            folder = resolve_package(request.candidate)
            manifest = read_manifest(folder)
        except (PackageError, OSError, ValueError, KeyError) as exc:
            return _failed("load", str(exc))
        # A package is refused only where the toolkit cannot build its generation: a legacy
        # one where no known layout holds ascendc.cmake (9.x still ships it), an ASC one on
        # a toolkit older than the ASC language (9.0) without asc-config.cmake.
        builds, why = generation_support(manifest.generation, home=toolchain.home or None,
                                         version=toolchain.version or None)
        if not builds:
            other = "asc" if manifest.generation == "legacy" else "legacy"
            return _failed("build", f"the package is written for the {manifest.generation} "
                           f"toolchain, which this runner cannot build: {why}; regenerate it "
                           f"for {other}")
        try:
            plan = self.plan_for(manifest, toolchain)
        except (ImportError, PackageError) as exc:
            return _failed("build", f"cannot plan the build: {exc}")
        warnings = [item.render() for item in lint_package(_package_files(folder))]
        verdict = self._run(request, folder, manifest, plan, warnings)
        if not (request.time_it and verdict.passed):
            return verdict
        return self._profile(request, folder, manifest, toolchain, verdict)

    def _verify_on_cpu_model(self, request: VerifyRequest, device: str) -> VerifyResult:
        try:
            folder = resolve_package(request.candidate)
            manifest = read_manifest(folder)
        except (PackageError, OSError, ValueError, KeyError) as exc:
            return _failed("load", str(exc), device=device)
        try:  # before the lint reads the files: a 200 MB "kernel" stops here
            problem = package_problems(folder, manifest)
        except OSError as exc:
            return _failed("load", f"cannot read the package: {exc}", device=device)
        if problem is not None:
            return VerifyResult.failed(problem, stages=[StageResult(
                "load" if problem.check == "load" else "build", False, 0.0,
                problem.message[:300])], device=device)
        warnings = [item.render() for item in lint_package(_package_files(folder))]
        return verify_on_cpu_model(request, folder, manifest, judge=self._judge,
                                   device=device, warnings=warnings)

    def _run(self, request: VerifyRequest, folder: Path, manifest: Manifest, plan: BuildPlan,
             warnings: list[str]) -> VerifyResult:
        run = _Run(warnings)
        failure = self._build(folder, plan, run)
        if failure is not None:
            return run.result([failure])
        try:
            shim = write_shim(manifest.namespace, manifest.op, folder / plan.library,
                              manifest.params)
        except (PackageError, OSError) as exc:
            return run.result([Failure(check="load", message=f"cannot write the candidate "
                                       f"that calls the operator: {exc}")])
        try:
            verdict = self._judge(_shim_request(request, shim))
        except Exception as exc:  # noqa: BLE001 - verify() answers with a verdict, always
            return run.result([Failure(check="crash", message=f"the judge failed: "
                                       f"{type(exc).__name__}: {exc}")])
        return run.judged(verdict, shim)

    def _build(self, folder: Path, plan: BuildPlan, run: _Run) -> Failure | None:
        """The plan's build steps (not its test: the judge verifies instead); the first
        failure, or None when the library is there."""
        seconds = 0.0
        for step in plan.steps:
            if step.name == "test":
                break
            outcome: StepOutcome = self._runner(step, folder)
            seconds += outcome.seconds
            if not outcome.ok:
                run.stages.append(StageResult("build", False, seconds, step.name))
                return step_failure(step, outcome)
        if not (folder / plan.library).is_file():
            run.stages.append(StageResult("build", False, seconds, "no library"))
            return Failure(check="build", message=f"the build succeeded but left no "
                           f"{plan.library} (the operator's torch library)")
        run.stages.append(StageResult("build", True, seconds))
        return None

    def _profile(self, request: VerifyRequest, folder: Path, manifest: Manifest,
                 toolchain: Toolchain, verdict: VerifyResult) -> VerifyResult:
        """Run the package's benchmark under the profiler; its timings join the verdict."""
        try:
            step = self.plan_for(manifest, toolchain, "profile").step("profile")
        except (ImportError, PackageError, KeyError) as exc:
            return replace(verdict, warnings=[*verdict.warnings, f"no kernel profile: {exc}"])
        reference = str(request.reference.resolve())
        step = replace(step, env={**step.env, "OPBOT_REFERENCE": reference},
                       readable=(*step.readable, reference))
        before = profiler_runs(folder)
        outcome = self._runner(step, folder)
        if not outcome.ok:
            return _profile_failed(verdict, step_failure(step, outcome), outcome)
        runs = sorted(profiler_runs(folder) - before)
        profile = read_kernel_profile(runs, list(manifest.entries.values()))
        timing = profiled_timing(verdict.timing, bench_timing(outcome.output, verdict.device),
                                 profile)
        note = profile.note() if profile else missing_profile_note(outcome.output)
        return replace(verdict, timing=timing, stages=[
            *verdict.stages, StageResult("time", True, outcome.seconds, note)])

    def lint(self, candidate: Path) -> str:
        """The lint's findings on a package, as feedback text."""
        return feedback(lint_package(_package_files(resolve_package(candidate))))


def _shim_request(request: VerifyRequest, shim: Path) -> VerifyRequest:
    """The request the judge gets: opbot's shim as the candidate. The shim is opbot's own
    code (the model's is the C++ the build compiled): no static scan of it; its worker must
    read the library beside it. The package's operator is its kernel: the guard counts no
    launch of it but lets torch.ops.opbot_* through, and it was compiled by the build."""
    return replace(request, candidate=shim, backend="ascendc", static_scan=False,
                   readable=(shim.parent,), expects_kernel_launches=False, package_ops=True,
                   compiles_on_first_launch=False)


def _profile_failed(verdict: VerifyResult, failure: Failure,
                    outcome: StepOutcome) -> VerifyResult:
    """A failed profile run: the device's error in the kernel fails the verdict; anything
    else (no profiler, the machine busy, a timeout) only costs the profile."""
    cause = runtime_cause(outcome.output) if failure.check == "run" else None
    stage = StageResult("time", False, outcome.seconds, failure.message[:300])
    if cause is not None and not cause.environmental:
        return replace(verdict, status="failed", reasons=[*verdict.reasons, failure],
                       stages=[*verdict.stages, stage])
    why = describe(cause) if cause is not None else failure.message
    return replace(verdict, stages=[*verdict.stages, stage],
                   warnings=[*verdict.warnings, f"no kernel profile: {why}"])


@dataclass
class _Run:
    """One verification in progress: the lint's warnings and the stages so far."""

    warnings: list[str]
    stages: list[StageResult] = field(default_factory=list)

    def result(self, reasons: list[Failure]) -> VerifyResult:
        return VerifyResult(status="failed" if reasons else "passed", reasons=reasons,
                            cases=[], stages=self.stages, device="npu",
                            warnings=self.warnings)

    def judged(self, verdict: VerifyResult, shim: Path) -> VerifyResult:
        """The judge's verdict, after the build's stage and with the lint's warnings; its
        failures with the device's account of them."""
        reasons = [with_runtime_cause(item, opbot_file=shim) for item in verdict.reasons]
        return replace(verdict, reasons=reasons, stages=[*self.stages, *verdict.stages],
                       warnings=[*self.warnings, *verdict.warnings])


def _failed(check: str, message: str, *, device: str = "npu") -> VerifyResult:
    stage: Literal["load", "build"] = "load" if check == "load" else "build"
    return VerifyResult.failed(Failure(check=check, message=message),
                               stages=[StageResult(stage, False, 0.0, message)], device=device)
