"""One Ascend C generation: the starting package, prompts, static checks, the runner.

Each draft is the package with the model's kernel, tiling header and binding in place
(skeleton.py). The lint and the tiling simulator judge it first, in seconds and without
CANN; only a clean draft goes to the runner (CANN and an NPU), whose compiler errors,
runtime errors and mismatches become the next request's feedback. Without a runner a clean
package is written but never called passed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bot.agent.backends.ascendc.checks import problem_sizes, row_shapes, static_check
from bot.agent.backends.ascendc.feedback import (
    ascendc_feedback,
    ascendc_timing_feedback,
    profile_lines,
)
from bot.agent.backends.ascendc.prompts import (
    first_request,
    retry_request,
    system_prompt,
    tuning_request,
)
from bot.agent.backends.ascendc.real_api import real_api_precheck
from bot.agent.backends.ascendc.reply import parse_ascendc_reply
from bot.agent.backends.ascendc.skeleton import Skeleton, skeleton_from_package, skeleton_from_spec
from bot.agent.backends.ascendc.tuning import tiling_variants
from bot.agent.backends.base import (
    BenchContext,
    Candidate,
    DraftUnsupported,
    Precheck,
    TuningVariant,
)
from bot.agent.offline.job import OfflineResult
from bot.agent.offline.run import generate_in_worker
from bot.agent.package import write_files, write_spec_files
from bot.agent.reply import ReplyError
from bot.errors import BadInputError
from bot.spec import OpSpec
from runners.ascendc.backend import AscendCBackend
from runners.ascendc.cpu_verify import is_cpu_model
from runners.ascendc.package import Generation, PackageError, write_package
from runners.base import Availability, VerifyResult
from runners.base import Backend as Runner

NAME = "ascendc"
OFFLINE_SCOPE = ("the offline Ascend C generator handles elementwise operators and row "
                 "reductions over the last dimension (softmax, log-softmax, RMS and layer "
                 "norm) only ({reason}); use an LLM, or the Triton backend (it runs on "
                 "Ascend through triton-ascend)")


def toolchain_generation(runner: Runner) -> Generation:
    """The toolchain generation to write for: the runner's, else the legacy one."""
    if not isinstance(runner, AscendCBackend):
        return "legacy"  # a stand-in runner (tests) has no toolchain to ask
    toolchain = runner.toolchain()
    return "asc" if toolchain.found and toolchain.generation == "asc" else "legacy"


def unverified_message(out: Path, reason: str) -> str:
    """Why a written package is not called passed, and how to verify it on a runner."""
    return (f"the Ascend C package is written to {out} but not verified: {reason}. Verify "
            f"it on an Ascend runner: `opbot verify {out / 'op.yaml'} {out} --backend ascendc`")


@dataclass
class AscendCWorkbench:
    context: BenchContext
    runner: Runner
    generation: Generation
    availability: Availability
    current: Skeleton | None = None  # the latest package: replies compose onto it
    _offline: OfflineResult | None = field(default=None, init=False)

    def start_record(self) -> dict[str, Any]:
        return {"generation": self.generation, "verified_on": self.availability.device}

    def offline_package(self) -> OfflineResult:
        """The offline generator's package ("generated" or "unsupported"), made once; its
        errors are the reference's, so they are bad input."""
        if self._offline is None:
            spec = self.context.spec
            drafted = generate_in_worker(self.context.reference, op_name=spec.name,
                                         cases=spec.cases(),
                                         init_args=None if spec.init_args is None
                                         else list(spec.init_args),
                                         backend=NAME, generation=self.generation)
            if drafted.status == "error":
                raise BadInputError(f"{spec.spec_path or spec.name}: {drafted.reason}")
            self._offline = drafted
        return self._offline

    def offline_draft(self) -> Candidate:
        self.context.progress(f"writing an Ascend C package ({self.generation} toolchain) "
                              "with the offline generator")
        drafted = self.offline_package()
        if drafted.status == "unsupported":
            raise DraftUnsupported(OFFLINE_SCOPE.format(reason=drafted.reason),
                                   drafted.unsupported_ops)
        # The worker ran the reference (user code): its answer is checked like a reply.
        return self.adopt(dict(drafted.files))

    def start_from_templates(self) -> None:
        """For a model: the offline generator's package when it lowers the op, else the
        templates around the spec's inputs; a given starting draft replaces the kernel."""
        spec = self.context.spec
        self.context.progress(f"preparing the starting Ascend C package ({self.generation} "
                              "toolchain)")
        drafted = self.offline_package()
        if drafted.status == "generated":
            try:
                skeleton = _skeleton_of(self.adopt(dict(drafted.files)))
            except ReplyError as exc:
                raise BadInputError(f"the offline generator's package is unusable: {exc}") \
                    from None
        elif spec.inputs is None:
            raise DraftUnsupported(
                f"the offline generator cannot lower this reference ({drafted.reason}) and "
                "the spec lists no inputs to lay the package out from: give it an op.yaml "
                "with inputs, or use the Triton backend", drafted.unsupported_ops)
        else:
            try:
                skeleton = skeleton_from_spec(spec, self.generation)
            except PackageError as exc:
                raise DraftUnsupported(f"no Ascend C package can be laid out for this spec: "
                                       f"{exc}", drafted.unsupported_ops) from None
        self.current = self._with_starting_draft(skeleton)

    def _with_starting_draft(self, skeleton: Skeleton) -> Skeleton:
        draft = self.context.starting_draft
        if draft is None:
            return skeleton
        try:
            composed = skeleton.compose({skeleton.kernel_name: draft})
        except PackageError:
            return skeleton  # not a kernel of this contract: the model starts from the package
        return replace(composed, has_draft=True)

    @property
    def skeleton(self) -> Skeleton:
        if self.current is None:
            raise RuntimeError("the workbench has no package yet")  # a loop bug, not input
        return self.current

    def system_prompt(self) -> str:
        return system_prompt(self.generation)

    def first_request(self, hint: str | None) -> str:
        skeleton = self.skeleton
        return first_request(
            self.context.spec.name, self.context.spec.reference_source, inputs=skeleton.inputs,
            outputs=skeleton.outputs, dtypes=skeleton.dtypes, generation=skeleton.generation,
            files=skeleton.model_files(), has_draft=skeleton.has_draft, hint=hint,
            pattern=skeleton.pattern, params=skeleton.params)

    def retry_request(self, feedback: str) -> str:
        return retry_request(feedback, self.skeleton.writable)

    def tuning_request(self, feedback: str) -> str:
        return tuning_request(feedback, self.skeleton.writable)

    def parse_reply(self, text: str) -> Candidate:
        return self.adopt(parse_ascendc_reply(text, self.skeleton.writable))

    def adopt(self, written: Mapping[str, str]) -> Candidate:
        if self.current is None:  # the offline generator's whole package, replayed
            outside = sorted(name for name in written if not name.startswith("ascendc/")
                             or ".." in Path(name).parts or Path(name).is_absolute())
            if outside:
                raise ReplyError(f"{', '.join(outside)}: outside the package's ascendc/")
            try:
                self.current = skeleton_from_package(written)
            except (KeyError, ValueError, TypeError) as exc:
                raise ReplyError(f"not an Ascend C package: {exc}") from None
            return self._candidate(self.current, dict(written))
        foreign = sorted(set(written) - set(self.skeleton.writable))
        if foreign:  # a replayed transcript is input too: only the model's files
            raise ReplyError(f"{', '.join(foreign)}: not a file a draft may write "
                             f"({', '.join(self.skeleton.writable)})")
        try:
            package = self.skeleton.compose(written)
        except PackageError as exc:
            raise ReplyError(f"{self.skeleton.kernel_name}: {exc}") from None
        self.current = package
        return self._candidate(package, dict(written))

    def restore(self, candidate: Candidate) -> None:
        # A file a reply leaves out keeps the restored candidate's text.
        self.current = _skeleton_of(candidate)

    @staticmethod
    def _candidate(package: Skeleton, written: dict[str, str]) -> Candidate:
        return Candidate(files=dict(package.files), written=written, state=package)

    def precheck(self, candidate: Candidate) -> Precheck:
        verdict = static_check(_skeleton_of(candidate), problem_sizes(self.context.spec),
                               row_shapes(self.context.spec))
        if not verdict.ok:
            return Precheck(ok=False, feedback=verdict.feedback(),
                            record={"ok": False, "errors": list(verdict.errors),
                                    "warnings": list(verdict.warnings)})
        # Then the real headers, before any runner sees the draft (seconds, no CANN).
        self.context.progress("type-checking the kernel against the real Ascend C headers")
        real = real_api_precheck(candidate.files)
        record = {"ok": real.ok, "errors": list(real.errors), "warnings": list(verdict.warnings)}
        if real.note:
            record["real_api"] = real.note
        return Precheck(ok=real.ok, feedback=real.feedback, record=record)

    def unverifiable(self) -> str | None:
        return None if self.availability.available else self.availability.reason

    def verify(self, candidate: Candidate, folder: Path, *, time_it: bool) -> VerifyResult:
        spec = self.context.spec
        write_spec_files(folder, spec)
        write_files(folder, candidate.files)
        self.context.progress("building and testing on the CPU model"
                              if is_cpu_model(self.availability.device)
                              else "building and testing on the NPU")
        return self.runner.verify(spec.to_request(
            folder.resolve(), backend=NAME, reference_file=(folder / "reference.py").resolve(),
            time_it=time_it, timeout_s=self.context.timeout_s))

    def feedback(self, result: VerifyResult, candidate: Candidate) -> str:
        return ascendc_feedback(result, candidate.files)

    def timing_feedback(self, result: VerifyResult) -> str:
        return ascendc_timing_feedback(result.timing) if result.timing else ""

    def tuning_variants(self, candidate: Candidate) -> list[TuningVariant]:
        skeleton = _skeleton_of(candidate)
        variants = []
        for variant in tiling_variants(skeleton, problem_sizes(self.context.spec)):
            changed = {name: variant.files[f"ascendc/{name}"] for name in skeleton.writable
                       if variant.files.get(f"ascendc/{name}") != skeleton.files.get(
                           f"ascendc/{name}")}
            package = skeleton.compose(changed)
            variants.append(TuningVariant(label=variant.label, estimate=variant.estimate,
                                          detail=variant.detail,
                                          candidate=self._candidate(package, changed)))
        return variants

    def write_package(self, out: Path, candidate: Candidate, spec: OpSpec) -> None:
        write_package(candidate.files, out)  # rendered with the cases; build.sh executable

    def perf_notes(self, result: VerifyResult | None) -> list[str]:
        if result is not None and result.timing is not None:
            return [f"Device timings come from the package's benchmark on the runner's NPU "
                    f"({result.timing.device}), {result.timing.trials} trials.",
                    *profile_lines(result.timing)]
        if not self.availability.available:
            return [f"Device timings: not measured here ({self.availability.reason}). An "
                    "Ascend runner with CANN and an NPU times the package (`opbot verify ... "
                    "--backend ascendc`)."]
        if is_cpu_model(self.availability.device):
            return [f"Verified on the CPU model ({self.availability.device}): the kernel's "
                    "values through the real Ascend C API, block by block, with no CANN and no "
                    "NPU. Device timings: not measured; an Ascend runner times the package "
                    "(`opbot verify ... --backend ascendc`)."]
        return ["Device timings: not measured (the package did not pass verification)."]

    def unsupported_message(self, error: DraftUnsupported) -> str:
        return str(error)

    def unverified_message(self, out: Path) -> str:
        return unverified_message(out, self.availability.reason)


def _skeleton_of(candidate: Candidate) -> Skeleton:
    if isinstance(candidate.state, Skeleton):
        return candidate.state
    return skeleton_from_package(candidate.files)
