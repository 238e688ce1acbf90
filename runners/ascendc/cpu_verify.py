"""Verify an Ascend C package without CANN: the real headers, then the CPU model, then the judge.

Where no CANN toolkit is installed (this machine, CI, a developer's laptop), a package is
checked against the real Ascend C API instead of being left unverified:

1. its kernel is type-checked with g++ against the real devkit headers
   (runners/ascendc/realapi): an API that does not exist, a queue on the wrong position,
   a parameter struct of the wrong shape fail here with the compiler's file:line;
2. the kernel and the package's own CPU twin are built against the open CPU-debug library
   and our stand-ins for its binary pieces (runners/ascendc/cpumodel);
3. the judge verifies it like any candidate: a shim registers `torch.ops.<namespace>.<op>`
   whose CPU implementation runs the twin, block by block, through the real TPipe/TQue
   logic and API checks, and the judge compares its outputs with the reference's.

The verdict's device names the CPU model and the sources' commits, never an NPU: a pass
here says the kernel computes the right values through the real API, not how fast it is
on a device (no timings are taken).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from runners.ascendc.package import (
    MANIFEST,
    Manifest,
    PackageError,
    kernel_file_name,
    render_twin,
)
from runners.ascendc.parsers.common import excerpt_log
from runners.ascendc.shim import model_new_source, write_replacing
from runners.ascendc.source_rules import MAX_SOURCE_BYTES, source_problems
from runners.base import (
    Availability,
    Failure,
    SourceLocation,
    StageResult,
    VerifyRequest,
    VerifyResult,
)
from runners.sandbox import private_workdir

Judge = Callable[[VerifyRequest], VerifyResult]
# "0": no real-header type-check and no CPU model (packages stay unverified without CANN).
SWITCH = "OPBOT_ASCENDC_REAL_CHECKS"
DEVICE_PREFIX = "cpu-model"
CPU_SHIM_NAME = "opbot_cpu_candidate.py"
ENVIRONMENT = "environment"  # a failure of this machine, not of the package


def device_label(devkit_commit: str | None, tools_commit: str | None) -> str:
    """How a CPU-model verdict names its device: never mistaken for an NPU's."""
    return (f"{DEVICE_PREFIX} (asc-devkit {devkit_commit or '?'}, asc-tools "
            f"{tools_commit or '?'}; CPU, no NPU)")


def is_cpu_model(device: str | None) -> bool:
    return bool(device) and str(device).startswith(DEVICE_PREFIX)


def switched_off() -> bool:
    return os.environ.get(SWITCH, "").strip() == "0"


def cpu_model_availability() -> Availability:
    """Whether packages can be verified on the CPU model here, and if not, why."""
    if switched_off():
        return Availability(False, "none", f"the CPU model is switched off ({SWITCH}=0)")
    try:
        from runners.ascendc.cpumodel import cpu_model_status

        status = cpu_model_status()
    except Exception as exc:  # noqa: BLE001 - a broken model must not take the backend down
        return Availability(False, "none", f"the CPU model cannot load: "
                            f"{type(exc).__name__}: {exc}")
    if not status.available:
        return Availability(False, "none", status.reason or "the CPU model is unavailable")
    return Availability(True, device_label(status.devkit_commit, status.tools_commit),
                        "no CANN here: verified against the real Ascend C headers and on "
                        "the CPU model")


# --------------------------------------------------------------------------- failures


def _cut(log: str) -> str:
    """Head, first error and tail of a log: the root error of a long build sits near the top."""
    return excerpt_log(log)


def _diagnostic_text(item: object) -> str:
    file, line = getattr(item, "file", None), getattr(item, "line", None)
    where = f"{Path(file).name}:{line}: " if file and line else ""
    suggestion = getattr(item, "suggestion", None)
    hint = f" (did you mean '{suggestion}'?)" if suggestion and suggestion not in str(
        getattr(item, "message", "")) else ""
    return f"{where}{getattr(item, 'message', item)}{hint}"


def _errors(diagnostics: list[object]) -> list[object]:
    return [item for item in diagnostics
            if str(getattr(item, "severity", "")) in ("error", "fatal error", "fatal")]


def compiler_failure(stage: str, diagnostics: list[object], log: str,
                     *, check: str = "build") -> Failure:
    """A failed type-check or CPU build as a Failure: the first error with its file:line."""
    errors = _errors(diagnostics) or diagnostics
    if errors:
        first = errors[0]
        file, line = getattr(first, "file", None), getattr(first, "line", None)
        place = (SourceLocation(Path(str(file)).name, int(line),
                                str(getattr(first, "source_line", "") or ""))
                 if file and line else None)
        message = f"{stage}: {_diagnostic_text(first)}"
    else:
        lines = [text for text in log.strip().splitlines() if text.strip()]
        place, message = None, f"{stage}: {lines[0][:300] if lines else 'no output'}"
    return Failure(check=check, message=message, location=place,
                   details={"diagnostics": [_diagnostic_text(item) for item in errors[:10]]},
                   log_tail=_cut(log))


# --------------------------------------------------------------------------- stages


def typecheck_stage(folder: Path) -> tuple[StageResult, Failure | None, str | None]:
    """Type-check the package's kernel against the real headers: (stage, failure, note)."""
    from runners.ascendc.realapi.typecheck import REUSED_NOTE, typecheck_package

    result = typecheck_package(folder, reuse_passed=True)  # the precheck's pass stands
    if result.skipped:
        return StageResult("build", True, 0.0, f"real-API type-check skipped: "
                           f"{result.skipped}"), None, result.skipped
    stage = StageResult("build", result.ok, result.seconds,
                        "type-checked against the real Ascend C headers (g++"
                        + ("; the precheck's pass of the same files)"
                           if REUSED_NOTE in result.notes else ")"))
    if result.ok:
        return stage, None, None
    return stage, compiler_failure("the real Ascend C headers reject the kernel",
                                   list(result.diagnostics), result.log), None


def cpu_shim_source(manifest: Manifest, package: Path, program: Path) -> str:
    """The shim: torch.ops.<namespace>.<op> on CPU tensors runs the package's CPU twin."""
    names = manifest.names()  # identifiers only
    arguments = ", ".join(f"Tensor {name}" for name in (*names.inputs, *names.params))
    returns = "Tensor" if manifest.outputs == 1 else \
        "(" + ", ".join(["Tensor"] * manifest.outputs) + ")"
    return _CPU_SHIM.format(namespace=manifest.namespace, op=manifest.op,
                            schema=f"{manifest.op}({arguments}) -> {returns}",
                            package=str(package.resolve()), program=str(program.resolve()),
                            outputs=manifest.outputs, cores=vector_cores(manifest.soc),
                            params=len(manifest.params),
                            model_new=model_new_source(manifest.namespace, manifest.op,
                                                       manifest.params))


# Vector cores (AIV) per SoC: the blocks a launch really gets, so a kernel that handles
# only the first few blocks fails here as it would on the device.
_VECTOR_CORES = {"Ascend910B1": 48, "Ascend910B2": 48, "Ascend910B2C": 48,
                 "Ascend910B3": 40, "Ascend910B4": 40, "Ascend910B4-1": 40}
_DEFAULT_VECTOR_CORES = 40


def vector_cores(soc: str) -> int:
    return _VECTOR_CORES.get(soc, _DEFAULT_VECTOR_CORES)


_CPU_SHIM = '''"""opbot's CPU-model shim (generated): torch.ops.{namespace}.{op} runs the package's
CPU twin (the kernel compiled against the real Ascend C API and the CPU-debug library).

The judge imports this file as the candidate; the operator's work is the twin's.
"""

import torch

from runners.ascendc.cpu_tensors import run_tensors

_LIBRARY = torch.library.Library({namespace!r}, "DEF")
_LIBRARY.define({schema!r})


def _on_cpu_model(*tensors):
    outputs = run_tensors({package!r}, {program!r}, list(tensors), {outputs!r}, {cores!r},
                          params={params!r})
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


_LIBRARY.impl({op!r}, _on_cpu_model, "CPU")


{model_new}'''


def write_cpu_shim(manifest: Manifest, package: Path, program: Path) -> Path:
    """Write the shim beside the program, replacing whatever stands there."""
    return write_replacing(program.parent / CPU_SHIM_NAME,
                           cpu_shim_source(manifest, package, program))


def _result(status_reasons: list[Failure], stages: list[StageResult], device: str,
            warnings: list[str]) -> VerifyResult:
    return VerifyResult(status="failed" if status_reasons else "passed",
                        reasons=status_reasons, cases=[], stages=stages, device=device,
                        warnings=warnings)


def compiled_sources(folder: Path, manifest: Manifest) -> dict[str, str]:
    """The package files the CPU model compiles: its kernel and its headers (not op.cpp,
    the NPU binding, nor the twin: opbot renders its own)."""
    names = {manifest.kernel, *(path.name for path in folder.glob("*.h"))}
    return {name: (folder / name).read_text(encoding="utf-8", errors="replace")
            for name in sorted(names) if (folder / name).is_file()}


_BUILT_BY_CMAKE = re.compile(r"[\w.${}/-]+\.(?:cpp|asc|cc|cxx|c)\b")


def _layout_problem(folder: Path, manifest: Manifest) -> str | None:
    """A package opbot can check: no links, headers named for the op (never for a system or
    devkit header they could stand in for), a CMakeLists.txt that builds the kernel checked."""
    links = sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*")
                   if path.is_symlink())
    if links:
        return (f"the package holds symbolic links ({', '.join(links[:5])}); opbot packages "
                "hold plain files")
    foreign = sorted(path.name for path in folder.glob("*.h")
                     if not path.name.startswith(f"{manifest.op}_"))
    if foreign:
        return (f"{', '.join(foreign[:5])}: a package's headers are named {manifest.op}_*.h "
                "(a header may not share a name with a system or Ascend C header)")
    cmake = folder / "CMakeLists.txt"
    if cmake.is_file():
        built = {Path(name).name for name in _BUILT_BY_CMAKE.findall(
            cmake.read_text(encoding="utf-8", errors="replace"))}
        extra = sorted(built - {manifest.kernel, "op.cpp", "cpu_twin.cpp", "cpu_twin.asc"})
        if extra:
            return (f"CMakeLists.txt builds {', '.join(extra[:5])} besides the kernel "
                    f"{manifest.kernel}: the kernel checked must be the kernel shipped")
    return None


def package_problems(folder: Path, manifest: Manifest) -> Failure | None:
    """What makes a package unfit for the CPU model before anything compiles: a manifest
    that names another kernel than the one the package builds, sources that are host code."""
    expected = kernel_file_name(manifest.op, manifest.generation)
    if manifest.kernel != expected:
        return Failure(check="load", message=f"opbot.json names the kernel "
                       f"{manifest.kernel!r}, but the package builds {expected!r} (its "
                       f"CMakeLists.txt): the kernel checked must be the kernel shipped")
    if manifest.namespace != f"opbot_{manifest.op}":
        return Failure(check="load", message=f"opbot.json's namespace must be "
                       f"opbot_{manifest.op}, not {manifest.namespace!r}")
    layout = _layout_problem(folder, manifest)
    if layout is not None:
        return Failure(check="load", message=layout)
    oversized = [path.name for path in folder.rglob("*") if path.is_file()
                 and not path.is_symlink() and path.stat().st_size > MAX_SOURCE_BYTES]
    if oversized:
        return Failure(check="load", message=f"{', '.join(sorted(oversized)[:5])}: larger "
                       f"than {MAX_SOURCE_BYTES} bytes; a package's sources are a few "
                       "hundred lines")
    problems = source_problems(compiled_sources(folder, manifest))
    if not problems:
        return None
    first = problems[0]
    return Failure(check="build", message=f"the kernel is not Ascend C an NPU can run: "
                   f"{first.render()}", location=SourceLocation(first.file, first.line),
                   details={"problems": [item.render() for item in problems[:10]]})


def verify_on_cpu_model(request: VerifyRequest, folder: Path, manifest: Manifest, *,
                        judge: Judge, device: str, warnings: list[str]) -> VerifyResult:
    """Type-check, build on the CPU model, and judge; never raises."""
    stages: list[StageResult] = []
    with private_workdir("opbot-cpumodel-") as work:
        try:
            problem = package_problems(folder, manifest)
            checked = None if problem is not None else checked_copy(folder, manifest, work)
        except OSError as exc:
            problem, checked = Failure(check="load", message=f"cannot read the package: "
                                       f"{exc}"), None
        if problem is not None or checked is None:
            assert problem is not None
            stages.append(StageResult("load" if problem.check == "load" else "build", False,
                                      0.0, problem.message[:300]))
            return _result([problem], stages, device, warnings)
        return _verify_checked(request, checked, manifest, judge=judge, device=device,
                               warnings=warnings, work=work, stages=stages)


def checked_copy(folder: Path, manifest: Manifest, work: Path) -> Path:
    """The files the rules checked, and only those, as a package of opbot's own: the
    compiler sees nothing else the package holds (a file named like a system header, a
    link), and a file changed after the check is not what gets compiled."""
    copy = work / "package" / "ascendc"
    copy.mkdir(parents=True)
    (copy / MANIFEST).write_text(json.dumps(manifest.to_json()), encoding="utf-8")
    for name, text in compiled_sources(folder, manifest).items():
        (copy / name).write_text(text, encoding="utf-8")
    return copy


def _verify_checked(request: VerifyRequest, folder: Path, manifest: Manifest, *,
                    judge: Judge, device: str, warnings: list[str], work: Path,
                    stages: list[StageResult]) -> VerifyResult:
    try:
        stage, failure, note = typecheck_stage(folder)
    except Exception as exc:  # noqa: BLE001 - verify() answers with a verdict, always
        return _result([Failure(check="crash", message=f"the real-API type-check failed: "
                                f"{type(exc).__name__}: {exc}")], stages, device, warnings)
    stages.append(stage)
    if note:  # the sources were there a moment ago (availability): they are unusable now
        return _result([Failure(check=ENVIRONMENT, message=f"the real Ascend C sources "
                                f"cannot be used here: {note}")], stages, device, warnings)
    if failure is not None:
        return _result([failure], stages, device, warnings)
    # The program lives in a folder of opbot's own, never in the package.
    built = _build(folder, manifest, stages, work)
    if isinstance(built, Failure):
        return _result([built], stages, device, warnings)
    try:
        shim = write_cpu_shim(manifest, folder, built)
    except (OSError, PackageError) as exc:
        return _result([Failure(check="load", message=f"cannot write the candidate that "
                                f"calls the operator: {exc}")], stages, device, warnings)
    judged_request = replace(request, candidate=shim, backend="ascendc", static_scan=False,
                             readable=(shim.parent, folder), expects_kernel_launches=False,
                             package_ops=True, compiles_on_first_launch=False, time_it=False)
    try:
        verdict = judge(judged_request)
    except Exception as exc:  # noqa: BLE001 - verify() answers with a verdict, always
        return _result([Failure(check="crash", message=f"the judge failed: "
                                f"{type(exc).__name__}: {exc}")], stages, device, warnings)
    note_cpu = ("verified on the CPU model, not on an NPU: values through the real Ascend C "
                "API; no device timings")
    return replace(verdict, device=device, stages=[*stages, *verdict.stages],
                   warnings=[*warnings, *verdict.warnings, note_cpu], timing=None)


def _build(folder: Path, manifest: Manifest, stages: list[StageResult],
           work: Path) -> Path | Failure:
    """The package's CPU twin built on the CPU model into `work`: the program, or why not."""
    from runners.ascendc.cpumodel import CpuModelError, build_program
    from runners.ascendc.cpumodel.program import ASC_TWIN, LEGACY_TWIN

    try:
        twin = work / "twin" / (LEGACY_TWIN if manifest.generation == "legacy" else ASC_TWIN)
        twin.parent.mkdir()
        twin.write_text(render_twin(manifest.generation, sorted(manifest.entries),
                                    manifest.names(), pattern=manifest.pattern,
                                    layouts=manifest.layouts()), encoding="utf-8")
        built = build_program(folder, work / "program", twin=twin)
    except (PackageError, KeyError) as exc:
        stages.append(StageResult("build", False, 0.0, "CPU model"))
        return Failure(check="load", message=f"cannot make the CPU twin: {exc}")
    except CpuModelError as exc:
        stages.append(StageResult("build", False, 0.0, "CPU model"))
        return Failure(check=ENVIRONMENT, message=f"the CPU model cannot be built here: {exc}")
    except Exception as exc:  # noqa: BLE001 - verify() answers with a verdict, always
        stages.append(StageResult("build", False, 0.0, "CPU model"))
        return Failure(check="crash", message=f"building on the CPU model failed: "
                       f"{type(exc).__name__}: {exc}")
    stages.append(StageResult("build", built.ok, built.seconds, "built on the CPU model"))
    if built.unsupported:
        return Failure(check="unsupported", message=f"the CPU model does not implement "
                       f"{', '.join(sorted(built.unsupported))} (used by the kernel of "
                       f"{manifest.op}); verify it on an Ascend runner",
                       details={"unsupported": sorted(built.unsupported)},
                       log_tail=_cut(built.log))
    if not built.ok or built.program is None:
        return compiler_failure("building the kernel on the CPU model failed",
                                list(built.diagnostics), built.log)
    return built.program
