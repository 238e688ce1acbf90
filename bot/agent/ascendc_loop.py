"""`opbot generate --backend ascendc` with an LLM: draft -> static checks -> build and test
on the NPU -> feedback -> draft ..., within the same budget as the Triton loop.

Each draft is the package with the model's kernel, tiling header and binding in place
(bot/agent/backends/ascendc/skeleton.py). The lint and the tiling simulator judge it first, in
seconds and without CANN; only a clean draft goes to the runner, whose compiler errors,
runtime errors and mismatches become the next request's feedback.

Without CANN and an NPU nothing can be verified: the loop still iterates on the static
findings, writes the first clean package and answers "failed" / "unverified", as the
offline path does. Nothing is called passed that a runner did not pass.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from bot.agent.backends.ascendc.checks import problem_sizes, static_check
from bot.agent.ascendc_drafter import AscendCDrafter
from bot.agent.backends.ascendc.feedback import ascendc_feedback
from bot.agent.ascendc_flow import (
    BACKEND,
    offline_package,
    toolchain_generation,
    unverified_message,
    write_files,
    write_spec_files,
)
from bot.agent.backends.ascendc.skeleton import Skeleton, skeleton_from_package, skeleton_from_spec
from bot.agent.drafters import Conversation
from bot.agent.llm import LLMError
from bot.agent.loop import (
    Budget,
    GenerateOutcome,
    GenerateStatus,
    LLMChoice,
    Progress,
    budget_spent,
)
from bot.agent.reply import ReplyError
from bot.agent.transcript import TRANSCRIPT_NAME, Redactor, Transcript, keep_beside
from bot.spec import OpSpec
from runners.ascendc.backend import AscendCBackend
from runners.ascendc.package import Generation, PackageError, write_package
from runners.base import VerifyResult


class NoPackageError(Exception):
    """Neither the offline generator nor the spec gives the package's layout."""

    def __init__(self, message: str, ops: list[str]) -> None:
        super().__init__(message)
        self.ops = ops


@dataclass
class _AscendLoop:
    spec: OpSpec
    drafter: AscendCDrafter
    backend: AscendCBackend
    on_npu: bool  # the backend can build and test here
    budget: Budget
    transcript: Transcript
    progress: Progress
    workdir: Path
    timeout_s: float
    started: float = field(default_factory=time.monotonic)
    drafts: int = 0
    current: Skeleton | None = None  # the latest package a reply produced
    result: VerifyResult | None = None  # the latest runner verdict
    stopped_because: str = ""
    last_error: str = ""
    notes: list[str] = field(default_factory=list)

    def _reject(self, feedback: str) -> str:
        self.last_error = feedback
        self.transcript.record("feedback", attempt=self.drafts, text=feedback)
        return feedback

    def draft(self, feedback: str | None) -> Skeleton | None:
        """The next package; None when the reply could not make one (the feedback says why)."""
        self.drafts += 1
        self.progress(f"drafting attempt {self.drafts} with {self.drafter.name}")
        try:
            written = self.drafter.first() if feedback is None else self.drafter.revise(feedback)
            package = (self.current or self.drafter.skeleton).compose(written)
        except ReplyError as exc:
            self._reject(str(exc))
            return None
        except PackageError as exc:
            self._reject(f"{self.drafter.skeleton.kernel_name}: {exc}")
            return None
        self.current = package
        # Not "candidate": `opbot replay` re-verifies those as Triton modules.
        self.transcript.record("package", attempt=self.drafts, files=written)
        return package

    def static_feedback(self, package: Skeleton) -> str | None:
        verdict = static_check(package, problem_sizes(self.spec))
        self.transcript.record("static", attempt=self.drafts, ok=verdict.ok,
                               errors=list(verdict.errors), warnings=list(verdict.warnings))
        return None if verdict.ok else verdict.feedback()

    def build(self, package: Skeleton) -> VerifyResult:
        folder = self.workdir / f"attempt-{self.drafts}" / self.spec.name
        write_files(folder, self.spec, package.files)
        self.progress(f"attempt {self.drafts}: building and testing on the NPU")
        result = self.backend.verify(self.spec.to_request(
            folder.resolve(), backend=BACKEND, reference_file=(folder / "reference.py").resolve(),
            time_it=True, timeout_s=self.timeout_s))
        self.transcript.record("verdict", attempt=self.drafts, status=result.status,
                               result=result.to_json())
        self.result = result
        return result

    def next_feedback(self, feedback: str | None) -> tuple[str | None, bool]:
        """One draft through the checks: (feedback for the next one, whether to stop)."""
        package = self.draft(feedback)
        if package is None:
            return self.last_error, False
        problems = self.static_feedback(package)
        if problems is not None:
            return self._reject(problems), False
        if not self.on_npu:
            self.stopped_because = "unverified"
            return None, True
        result = self.build(package)
        if result.passed:
            self.stopped_because = "passed"
            return None, True
        return self._reject(ascendc_feedback(result, package.files)), False

    def run(self) -> None:
        feedback: str | None = None
        while True:
            spent = budget_spent(self.budget, drafts=self.drafts, tokens=self.drafter.tokens,
                                 started=self.started)
            if spent:
                self.stopped_because = "budget"
                self.notes.append(f"budget spent: {spent}")
                return
            try:
                feedback, stop = self.next_feedback(feedback)
            except LLMError as exc:
                self.stopped_because = "llm_error"
                self.notes.append(str(exc))
                return
            if stop:
                return


def starting_package(spec: OpSpec, workdir: Path, generation: Generation,
                      starting_draft: str | None) -> Skeleton:
    """The offline generator's package when it lowers the op, else the templates around
    the spec's inputs; a given starting draft (e.g. a kernel under review) replaces the
    kernel."""
    drafted = offline_package(spec, workdir, generation)
    if drafted.status == "generated":
        skeleton = skeleton_from_package(drafted.files)
    elif spec.inputs is None:
        raise NoPackageError(f"the offline generator cannot lower this reference ({drafted.reason})"
                         " and the spec lists no inputs to lay the package out from: give it "
                         "an op.yaml with inputs, or use the Triton backend",
                         drafted.unsupported_ops)
    else:
        try:
            skeleton = skeleton_from_spec(spec, generation)
        except PackageError as exc:
            raise NoPackageError(f"no Ascend C package can be laid out for this spec: {exc}",
                             drafted.unsupported_ops) from None
    if starting_draft is None:
        return skeleton
    try:
        return replace(skeleton.compose({skeleton.kernel_name: starting_draft}), has_draft=True)
    except PackageError:
        return skeleton  # not a kernel of this contract: the model starts from the package


def _finish(loop: _AscendLoop, out: Path, availability_reason: str) -> GenerateOutcome:
    """Write the chosen package (if any) and say what happened."""
    package = loop.current
    if package is not None:
        loop.progress(f"writing the operator package to {out}")
        write_spec_files(out, loop.spec)
        write_package(package.files, out)  # build.sh made executable
    status: GenerateStatus = "passed" if loop.stopped_because == "passed" else "failed"
    if loop.stopped_because == "unverified":
        message = unverified_message(out, availability_reason)
    elif status == "passed":
        message = ""
    else:
        message = f"no candidate passed; last error:\n{loop.last_error}"
    loop.transcript.record("end", status=status, stopped_because=loop.stopped_because,
                           attempts=loop.drafts, tokens=loop.drafter.tokens.to_json())
    return GenerateOutcome(
        op=loop.spec.name, status=status, attempts=loop.drafts, backend=BACKEND,
        out=out if package is not None else None, verification=loop.result, message=message,
        stopped_because=loop.stopped_because, tokens=loop.drafter.tokens, notes=loop.notes)


def _run(spec: OpSpec, *, out: Path, llm: LLMChoice, budget: Budget, progress: Progress,
         timeout_s: float, backend: AscendCBackend, workdir: Path,
         transcript: Transcript) -> GenerateOutcome:
    generation = toolchain_generation(backend)
    availability = backend.availability()
    transcript.record("start", op=spec.name, backend=BACKEND, generation=generation,
                      spec_yaml=spec.to_yaml("reference.py"),
                      reference_source=spec.reference_source, drafter="llm", model=llm.model,
                      budget=budget.__dict__, verified_on=availability.device)
    progress(f"preparing the starting Ascend C package ({generation} toolchain)")
    try:
        skeleton = starting_package(spec, workdir, generation, llm.starting_draft)
    except NoPackageError as exc:
        transcript.record("end", status="unsupported", stopped_because="unsupported")
        return GenerateOutcome(op=spec.name, status="unsupported", attempts=0, backend=BACKEND,
                               out=None, unsupported_ops=exc.ops, message=str(exc),
                               stopped_because="unsupported")
    transcript.record("layout", writable=list(skeleton.writable),
                      starting_draft=skeleton.has_draft)
    drafter = AscendCDrafter(spec=spec, skeleton=skeleton, model=llm.model, hint=llm.hint,
                             conversation=Conversation(llm.client, transcript))
    loop = _AscendLoop(spec=spec, drafter=drafter, backend=backend,
                       on_npu=availability.available, budget=budget, transcript=transcript,
                       progress=progress, workdir=workdir, timeout_s=timeout_s)
    loop.run()
    return _finish(loop, out, availability.reason)


def generate_ascendc_llm(spec: OpSpec, *, out: Path, llm: LLMChoice, budget: Budget,
                         progress: Progress, timeout_s: float = 600.0,
                         backend: AscendCBackend | None = None) -> GenerateOutcome:
    """Run the loop in a scratch folder; the transcript is kept beside the package."""
    backend = backend or AscendCBackend()
    redactor = Redactor.from_environment(extra=[llm.api_key])
    with tempfile.TemporaryDirectory(prefix="opbot-") as tmp:
        workdir = Path(tmp)
        transcript = Transcript(workdir / TRANSCRIPT_NAME, redactor)
        try:
            outcome = _run(spec, out=out, llm=llm, budget=budget, progress=progress,
                           timeout_s=timeout_s, backend=backend, workdir=workdir,
                           transcript=transcript)
        finally:
            transcript.close()
        outcome.transcript = keep_beside(transcript, outcome.out)
    return outcome
