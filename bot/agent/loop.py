"""`opbot generate`: draft -> verify -> feedback -> draft ..., within a budget; then publish.

The drafter is the offline generator (one deterministic attempt) or an LLM conversation.
Every candidate goes through the same harness `opbot verify` uses: nothing is called
passed that the harness did not pass. The loop stops at the first verified candidate;
a tuning phase may follow on a real device (CPU-interpreter timings mean nothing).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from bot.agent.drafters import (
    Drafter,
    DraftUnsupported,
    LLMDrafter,
    NoMoreDrafts,
    OfflineDrafter,
    TokenCount,
    offline_draft,
)
from bot.agent.feedback import timing_feedback, verification_feedback
from bot.agent.llm import ChatClient, LLMError
from bot.agent.reply import ReplyError
from bot.agent.transcript import TRANSCRIPT_NAME, Redactor, Transcript, keep_beside
from bot.errors import BadInputError
from bot.agent.backends.triton.package import write_package
from bot.report import perf_markdown
from bot.spec import InputSpec, OpSpec, write_reference
from runners.base import VerifyResult
from runners.triton import TritonBackend

if TYPE_CHECKING:
    from runners.ascendc.backend import AscendCBackend

GenerateStatus = Literal["passed", "failed", "unsupported"]
Progress = Callable[[str], None]

LLM_HINT = ("configure an LLM endpoint to generate it: `opbot generate REF --llm openai "
            "--llm-base-url URL --llm-model NAME` with the key in OPBOT_LLM_API_KEY (any "
            "OpenAI-compatible server: OpenAI, DeepSeek, Qwen, vLLM, Ollama)")
TUNING_SKIPPED = "tuning skipped: CPU-interpreter timings say nothing about device speed"


@dataclass(frozen=True)
class Budget:
    attempts: int = 6
    tokens: int = 200_000
    seconds: float = 1800.0
    tuning_attempts: int = 2


def budget_spent(budget: Budget, *, drafts: int, tokens: TokenCount, started: float) -> str:
    """Which part of the budget is spent ("" while some of each is left)."""
    if drafts >= budget.attempts:
        return f"attempts ({budget.attempts})"
    if tokens.total >= budget.tokens:
        return f"tokens ({tokens.total} of {budget.tokens})"
    if time.monotonic() - started >= budget.seconds:
        return f"wall-clock time ({budget.seconds:g} s)"
    return ""


@dataclass(frozen=True)
class LLMChoice:
    """How to reach the model, when one drafts: a client, its model name, the key to hide."""

    client: ChatClient
    model: str
    api_key: str | None = None
    hint: str | None = None
    starting_draft: str | None = None  # e.g. the kernel a review is about


@dataclass
class GenerateOutcome:
    op: str
    status: GenerateStatus
    attempts: int
    backend: str
    out: Path | None
    verification: VerifyResult | None = None
    unsupported_ops: list[str] = field(default_factory=list)
    message: str = ""
    stopped_because: str = ""
    tokens: TokenCount = field(default_factory=TokenCount)
    notes: list[str] = field(default_factory=list)
    transcript: Path | None = None

    def to_json(self) -> dict[str, Any]:
        result = self.verification
        timing = result.timing if result else None
        return {
            "op": self.op,
            "status": self.status,
            "attempts": self.attempts,
            "backend": self.backend,
            "out": str(self.out) if self.out else None,
            "cases": [case.to_json() for case in result.cases] if result else [],
            "perf": timing.to_json() if timing else None,
            "reasons": [reason.to_json() for reason in result.reasons] if result else [],
            "tokens": self.tokens.to_json(),
            "stopped_because": self.stopped_because,
            "unsupported_ops": self.unsupported_ops,
            "message": self.message,
            "notes": self.notes,
            "device": result.device if result else None,
            "warnings": result.warnings if result else [],
            "transcript": str(self.transcript) if self.transcript else None,
        }


    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GenerateOutcome:
        """An outcome read back from `opbot generate --json` (the generation step's answer)."""
        verification = None
        if data.get("cases") or data.get("reasons") or data.get("perf"):
            verification = VerifyResult.from_json({
                "status": "passed" if data["status"] == "passed" else "failed",
                "reasons": data.get("reasons", []), "cases": data.get("cases", []),
                "device": data.get("device") or "unknown",
                "warnings": data.get("warnings", []), "timing": data.get("perf")})
        tokens = data.get("tokens") or {}
        return cls(op=str(data["op"]), status=data["status"], attempts=int(data["attempts"]),
                   backend=str(data["backend"]),
                   out=Path(data["out"]) if data.get("out") else None,
                   verification=verification,
                   unsupported_ops=list(data.get("unsupported_ops", [])),
                   message=str(data.get("message", "")),
                   stopped_because=str(data.get("stopped_because", "")),
                   tokens=TokenCount(prompt=int(tokens.get("prompt", 0)),
                                     completion=int(tokens.get("completion", 0))),
                   notes=list(data.get("notes", [])),
                   transcript=Path(data["transcript"]) if data.get("transcript") else None)


def _inferred_spec(spec: OpSpec, result: VerifyResult) -> OpSpec:
    """A KernelBench reference's spec, completed with the inputs the harness observed."""
    inferred = result.inferred or {}
    items = inferred.get("inputs")
    if spec.inputs is not None or not items:
        return spec
    inputs = []
    for item in items:
        if "value" in item:
            inputs.append(InputSpec(name=item["name"], value=item["value"]))
        else:
            bounded = item["init"] == "randint"
            inputs.append(InputSpec(name=item["name"], dtypes=(item["dtype"],),
                                    shapes=(tuple(item["shape"]),), init=item["init"],
                                    low=item.get("low") if bounded else None,
                                    high=item.get("high") if bounded else None))
    init_args = inferred.get("init_args")
    return spec.with_inputs(inputs, init_args if spec.init_args is None else spec.init_args)


@dataclass
class _Attempt:
    number: int
    source: str
    result: VerifyResult


@dataclass
class _Loop:
    spec: OpSpec
    reference: Path
    workdir: Path
    drafter: Drafter
    budget: Budget
    transcript: Transcript
    progress: Progress
    timeout_s: float
    started: float = field(default_factory=time.monotonic)
    attempts: list[_Attempt] = field(default_factory=list)
    stopped_because: str = ""
    notes: list[str] = field(default_factory=list)
    last_error: str = ""
    drafts: int = 0  # candidates asked for, including replies that held none

    def verify(self, source: str) -> VerifyResult:
        number = self.drafts
        candidate = self.workdir / f"attempt-{number}" / "triton" / f"{self.spec.name}.py"
        candidate.parent.mkdir(parents=True)
        candidate.write_text(source, encoding="utf-8")
        self.transcript.record("candidate", attempt=number, source=source)
        self.progress(f"attempt {number}: verifying the candidate")
        result = TritonBackend().verify(self.spec.to_request(
            candidate, reference_file=self.reference, time_it=True, timeout_s=self.timeout_s))
        if any(reason.check == "reference" for reason in result.reasons):
            raise BadInputError(f"{self.spec.spec_path}: {result.reasons[0].message}")
        self.transcript.record("verdict", attempt=number, status=result.status,
                               result=result.to_json())
        self.attempts.append(_Attempt(number, source, result))
        return result

    def out_of_budget(self) -> str:
        return budget_spent(self.budget, drafts=self.drafts, tokens=self.drafter.tokens,
                            started=self.started)

    def draft(self, feedback: str | None) -> str | None:
        """The next candidate; None when the reply held none (the feedback says why)."""
        self.drafts += 1
        self.progress(f"drafting attempt {self.drafts} with {self.drafter.name}")
        try:
            return self.drafter.first() if feedback is None else self.drafter.revise(feedback)
        except ReplyError as exc:
            self.last_error = str(exc)
            self.transcript.record("feedback", attempt=self.drafts, text=str(exc))
            return None

    def run(self) -> _Attempt | None:
        """Draft and verify until a candidate passes or the budget is spent."""
        feedback: str | None = None
        while True:
            exhausted = self.out_of_budget()
            if exhausted:
                self.stopped_because = "budget"
                self.notes.append(f"budget spent: {exhausted}")
                return None
            try:
                source = self.draft(feedback)
            except NoMoreDrafts as exc:
                self.stopped_because = "no_more_drafts"
                self.notes.append(str(exc))
                return None
            except LLMError as exc:
                self.stopped_because = "llm_error"
                self.notes.append(str(exc))
                return None
            if source is None:
                feedback = self.last_error
                continue
            result = self.verify(source)
            if result.passed:
                self.stopped_because = "passed"
                return self.attempts[-1]
            feedback = verification_feedback(result)
            self.last_error = feedback
            self.transcript.record("feedback", attempt=self.drafts, text=feedback)

    def tune(self, best: _Attempt) -> _Attempt:
        """Ask for faster versions, keeping the fastest verified one."""
        if best.result.device.startswith("cpu"):
            self.notes.append(TUNING_SKIPPED)
            return best
        for _ in range(self.budget.tuning_attempts):
            if self.out_of_budget() or best.result.timing is None:
                break
            self.drafts += 1
            try:
                source = self.drafter.tune(timing_feedback(best.result.timing))
            except (NoMoreDrafts, ReplyError, LLMError) as exc:
                self.notes.append(f"tuning stopped: {exc}")
                break
            result = self.verify(source)
            timing = result.timing
            if result.passed and timing is not None and best.result.timing is not None and (
                    timing.candidate_ms < best.result.timing.candidate_ms):
                best = self.attempts[-1]
        return best


def _publish(loop: _Loop, chosen: _Attempt, out: Path, backend: str) -> OpSpec:
    full_spec = _inferred_spec(loop.spec, chosen.result)
    loop.progress(f"writing the operator package to {out}")
    report = perf_markdown(loop.spec.name, backend, chosen.result, attempts=loop.drafts,
                           generator=loop.drafter.name)
    write_package(out, full_spec, chosen.source, report)
    return full_spec


def _drafter(spec: OpSpec, reference: Path, llm: LLMChoice | None,
             transcript: Transcript, progress: Progress) -> Drafter:
    if llm is None:
        return OfflineDrafter(spec, reference)
    starting = llm.starting_draft
    if starting is None:
        progress("preparing a starting draft with the offline generator")
        try:
            starting = offline_draft(spec, reference)
        except DraftUnsupported:
            starting = None  # the prompt then carries a worked example of the same category
    return LLMDrafter(spec=spec, client=llm.client, transcript=transcript, model=llm.model,
                      starting_draft=starting, hint=llm.hint)


def generate(spec: OpSpec, *, backend: str, out: Path, progress: Progress,
             llm: LLMChoice | None = None, budget: Budget | None = None,
             timeout_s: float = 600.0,
             ascend_backend: AscendCBackend | None = None) -> GenerateOutcome:
    """`ascend_backend` replaces the runner's Ascend C backend (tests inject a fake one)."""
    budget = budget or Budget()
    if backend == "ascendc":
        return _generate_ascendc(spec, out=out, progress=progress, llm=llm, budget=budget,
                                 timeout_s=timeout_s, ascend_backend=ascend_backend)
    redactor = Redactor.from_environment(extra=[llm.api_key if llm else None])
    with tempfile.TemporaryDirectory(prefix="opbot-") as tmp:
        workdir = Path(tmp)
        transcript = Transcript(workdir / TRANSCRIPT_NAME, redactor)
        try:
            reference = spec.reference_path or workdir / "reference.py"
            if spec.reference_path is None:
                write_reference(spec, reference)
            transcript.record("start", op=spec.name, backend=backend,
                              spec_yaml=spec.to_yaml("reference.py"),
                              reference_source=spec.reference_source,
                              drafter="offline" if llm is None else "llm",
                              model=llm.model if llm else None, budget=budget.__dict__)
            outcome = _run(spec, reference=reference, workdir=workdir, out=out,
                           backend=backend, llm=llm, budget=budget, transcript=transcript,
                           progress=progress, timeout_s=timeout_s)
        finally:
            transcript.close()
        outcome.transcript = keep_beside(transcript, outcome.out)
        return outcome


def _generate_ascendc(spec: OpSpec, *, out: Path, progress: Progress, llm: LLMChoice | None,
                      budget: Budget, timeout_s: float,
                      ascend_backend: AscendCBackend | None) -> GenerateOutcome:
    from bot.agent.ascendc_flow import generate_ascendc

    if llm is not None:
        from bot.agent.ascendc_loop import generate_ascendc_llm

        return generate_ascendc_llm(spec, out=out, llm=llm, budget=budget, progress=progress,
                                    timeout_s=timeout_s, backend=ascend_backend)
    with tempfile.TemporaryDirectory(prefix="opbot-") as tmp:
        result = generate_ascendc(spec, out=out, workdir=Path(tmp), progress=progress,
                                  backend=ascend_backend, timeout_s=timeout_s)
    return GenerateOutcome(op=spec.name, status=result.status, attempts=1, backend="ascendc",
                           out=result.out, verification=result.verification,
                           unsupported_ops=result.unsupported_ops, message=result.message,
                           stopped_because=result.stopped_because)


def _run(spec: OpSpec, *, reference: Path, workdir: Path, out: Path, backend: str,
         llm: LLMChoice | None, budget: Budget, transcript: Transcript, progress: Progress,
         timeout_s: float) -> GenerateOutcome:
    drafter = _drafter(spec, reference, llm, transcript, progress)
    loop = _Loop(spec=spec, reference=reference, workdir=workdir, drafter=drafter,
                 budget=budget, transcript=transcript, progress=progress, timeout_s=timeout_s)
    try:
        best = loop.run()
    except DraftUnsupported as exc:
        transcript.record("end", status="unsupported", stopped_because="unsupported")
        return GenerateOutcome(
            op=spec.name, status="unsupported", attempts=1, backend=backend, out=None,
            unsupported_ops=exc.ops,
            message=f"the offline generator cannot lower this reference ({exc}; ops: "
            f"{', '.join(exc.ops) or '-'}); {LLM_HINT}", stopped_because="unsupported")
    if best is not None:
        best = loop.tune(best)
    chosen = best or (loop.attempts[-1] if loop.attempts else None)
    if chosen is not None:
        _publish(loop, chosen, out, backend)
    status: GenerateStatus = "passed" if best is not None else "failed"
    message = "" if best is not None else f"no candidate passed; last error:\n{loop.last_error}"
    transcript.record("end", status=status, stopped_because=loop.stopped_because,
                      attempts=loop.drafts, tokens=drafter.tokens.to_json())
    return GenerateOutcome(
        op=spec.name, status=status, attempts=loop.drafts, backend=backend,
        out=out if chosen is not None else None,
        verification=chosen.result if chosen else None, message=message,
        stopped_because=loop.stopped_because, tokens=drafter.tokens, notes=loop.notes)
