"""`opbot generate --backend ascendc`: the offline generator's Ascend C package, verified on
the runner's CANN and NPU when there are some.

Where the toolchain is missing the package is still written (a reviewer or an Ascend
runner can take it from there) but never called passed: the status is "failed" and
`stopped_because` is "unverified", with the reason the toolchain gave. With an LLM
configured the agent loop drafts instead (bot/agent/ascendc_loop.py); the helpers here
(offline package, writing, the unverified message) serve both paths.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from bot.agent.offline.driver import OfflineResult
from bot.agent.offline.run import generate_in_worker
from bot.errors import BadInputError
from bot.spec import OpSpec, write_reference
from runners.ascendc.backend import AscendCBackend
from runners.ascendc.package import Generation
from runners.base import VerifyResult

BACKEND = "ascendc"


@dataclass(frozen=True)
class AscendCOutcome:
    status: Literal["passed", "failed", "unsupported"]
    stopped_because: str
    out: Path | None
    message: str = ""
    verification: VerifyResult | None = None
    unsupported_ops: list[str] = field(default_factory=list)


def toolchain_generation(backend: AscendCBackend) -> Generation:
    """The toolchain generation to write for: the runner's, else the legacy one."""
    toolchain = backend.toolchain()
    return "asc" if toolchain.found and toolchain.generation == "asc" else "legacy"


def write_spec_files(out: Path, spec: OpSpec) -> None:
    """op.yaml and reference.py beside the package, unless they are the spec's own files."""
    out.mkdir(parents=True, exist_ok=True)
    reference = out / "reference.py"
    if spec.reference_path is None or spec.reference_path.resolve() != reference.resolve():
        reference.write_text(spec.reference_source, encoding="utf-8")
    op_yaml = out / "op.yaml"
    if spec.spec_path is None or spec.spec_path.resolve() != op_yaml.resolve():
        op_yaml.write_text(spec.to_yaml("reference.py"), encoding="utf-8")


def write_files(out: Path, spec: OpSpec, files: Mapping[str, str]) -> None:
    """The spec files and the package's, each checked to stay inside `out`."""
    write_spec_files(out, spec)
    for relative, text in files.items():
        path = (out / relative).resolve()
        if not path.is_relative_to(out.resolve()):
            raise BadInputError(f"the generator named a file outside the package: {relative}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def unverified_message(out: Path, reason: str) -> str:
    """Why a written package is not called passed, and how to verify it on a runner."""
    return (f"the Ascend C package is written to {out} but not verified: {reason}. Verify "
            f"it on an Ascend runner: `opbot verify {out / 'op.yaml'} {out} --backend ascendc`")


def offline_package(spec: OpSpec, workdir: Path, generation: Generation) -> OfflineResult:
    """The offline generator's package ("generated" or "unsupported"); its errors are the
    reference's, so they are bad input."""
    reference = spec.reference_path or workdir / "reference.py"
    if spec.reference_path is None:
        write_reference(spec, reference)
    drafted = generate_in_worker(reference, op_name=spec.name, cases=spec.cases(),
                                 init_args=None if spec.init_args is None
                                 else list(spec.init_args),
                                 backend=BACKEND, generation=generation)
    if drafted.status == "error":
        raise BadInputError(f"{spec.spec_path or spec.name}: {drafted.reason}")
    return drafted


def generate_ascendc(spec: OpSpec, *, out: Path, workdir: Path, progress: Callable[[str], None],
                     backend: AscendCBackend | None = None,
                     timeout_s: float = 600.0) -> AscendCOutcome:
    """Generate, write and (where possible) verify."""
    backend = backend or AscendCBackend()
    generation = toolchain_generation(backend)
    progress(f"writing an Ascend C package ({generation} toolchain) with the offline generator")
    drafted = offline_package(spec, workdir, generation)
    if drafted.status == "unsupported":
        return AscendCOutcome(
            status="unsupported", out=None, unsupported_ops=drafted.unsupported_ops,
            stopped_because="unsupported",
            message="the offline Ascend C generator handles elementwise operators only "
            f"({drafted.reason}); use the Triton backend (it runs on Ascend through "
            "triton-ascend)")
    write_files(out, spec, drafted.files)
    availability = backend.availability()
    if not availability.available:
        return AscendCOutcome(
            status="failed", out=out, stopped_because="unverified",
            message=unverified_message(out, availability.reason))
    progress(f"building and testing on the NPU ({availability.reason})")
    result = backend.verify(spec.to_request(out.resolve(), backend=BACKEND,
                                            reference_file=(out / "reference.py").resolve(),
                                            time_it=True, timeout_s=timeout_s))
    passed = result.status == "passed"
    return AscendCOutcome(
        status="passed" if passed else "failed", out=out, verification=result,
        stopped_because="passed" if passed else "no_more_drafts",
        message="" if passed else "the Ascend C package did not pass on the NPU: "
        + "; ".join(reason.message for reason in result.reasons[:3]))
