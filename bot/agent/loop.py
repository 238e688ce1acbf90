"""`opbot generate`: draft -> precheck -> verify -> feedback -> draft ..., within a budget;
then tune on a device, and publish. One loop for every backend.

The loop knows no backend by name: the registry (bot/agent/backends/) gives it a workbench
that writes prompts, reads replies, runs the static checks, puts candidates through the
runner's judge and writes the package. Nothing is called passed that the judge did not
pass. Several backends at once share one package folder and one PERF.md comparing them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from bot.agent.backends import get_backend
from bot.agent.backends.base import (
    BenchContext,
    Candidate,
    DraftUnsupported,
    NoMoreDrafts,
    Workbench,
)
from bot.agent.conversation import Conversation, TokenCount
from bot.agent.drafters import Drafter, LLMDrafter, OfflineDrafter
from bot.agent.llm import LLMBudgetSpent, LLMError
from bot.agent.outcome import (
    Budget,
    GenerateOutcome,
    GenerateStatus,
    LLMChoice,
    Progress,
    TuningRow,
    budget_spent,
)
from bot.agent.package import PERF_FILE, write_spec_files
from bot.agent.reply import ReplyError
from bot.agent.report import PeakOverrides, PerfSection, perf_markdown, recommended
from bot.agent.search import (
    MAX_RESTARTS,
    Score,
    Scored,
    Stage,
    comparison,
    failure_signature,
    files_text,
    first_line,
    is_stuck,
    restart_request,
    tuning_feedback,
)
from bot.agent.transcript import TRANSCRIPT_NAME, Redactor, Transcript, keep_beside
from bot.errors import BadInputError
from bot.spec import InputSpec, OpSpec, write_reference
from runners.base import Backend as Runner
from runners.base import VerifyResult
from runners.sandbox import private_workdir

TUNING_SKIPPED = ("tuning skipped: CPU timings (the Triton interpreter, the Ascend C CPU "
                  "model) say nothing about device speed")


def _inferred_spec(spec: OpSpec, result: VerifyResult | None) -> OpSpec:
    """A KernelBench reference's spec, completed with the inputs the harness observed."""
    inferred = (result.inferred if result else None) or {}
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
class Attempt:
    number: int
    candidate: Candidate
    result: VerifyResult


def _faster(result: VerifyResult, than: VerifyResult) -> bool:
    return (result.passed and result.timing is not None and than.timing is not None
            and result.timing.candidate_ms < than.timing.candidate_ms)


@dataclass
class Loop:
    spec: OpSpec
    bench: Workbench
    drafter: Drafter
    budget: Budget
    transcript: Transcript
    progress: Progress
    workdir: Path
    started: float = field(default_factory=time.monotonic)
    attempts: list[Attempt] = field(default_factory=list)
    latest: Candidate | None = None  # the newest draft, verified or not
    stopped_because: str = ""
    notes: list[str] = field(default_factory=list)
    last_error: str = ""
    drafts: int = 0  # candidates asked for, including replies that held none
    tuning: list[TuningRow] = field(default_factory=list)
    # The search: every attempt scored, the best kept (a candidate's attempt number ->
    # the candidate, its verdict and its feedback).
    scored: list[Scored] = field(default_factory=list)
    best: Scored | None = None
    candidates: dict[int, Candidate] = field(default_factory=dict)
    verdicts: dict[int, VerifyResult] = field(default_factory=dict)
    feedbacks: dict[int, str] = field(default_factory=dict)
    restarts: int = 0
    fresh_from: int = 0  # where the current conversation's attempts begin in `scored`
    restart_with: str | None = None  # set when stuck: the next draft starts afresh
    in_round: bool = False  # judging parallel first drafts: no restarts
    base: int | None = None  # the attempt the next draft builds on, when not the last one

    def _reject(self, feedback: str) -> str:
        self.last_error = feedback
        self.transcript.record("feedback", attempt=self.drafts, text=feedback)
        return feedback

    def out_of_budget(self) -> str:
        return budget_spent(self.budget, drafts=self.drafts, tokens=self.drafter.tokens,
                            started=self.started)

    def draft(self, feedback: str | None) -> Candidate | None:
        """The next candidate; None when the reply held none (the feedback says why)."""
        self.drafts += 1
        self.progress(f"drafting attempt {self.drafts} with {self.drafter.name}")
        restart, self.restart_with = self.restart_with, None
        try:
            if restart is not None:
                candidate = self.drafter.restart(restart)
            elif feedback is None:
                candidate = self.drafter.first()
            else:
                candidate = self.drafter.revise(feedback)
        except ReplyError as exc:
            self._reject(str(exc))
            return None
        if self._holds_secret(candidate):
            return None
        self._drafted(candidate)
        return candidate

    def _holds_secret(self, candidate: Candidate) -> bool:
        """A draft quoting a credential (an endpoint that echoes the key) is never judged,
        written or published."""
        if not any(self.transcript.redacts(text) for text in candidate.files.values()):
            return False
        self._reject("the reply's files contain a credential (an API key or token): never "
                     "put keys or tokens in code; write the files again without it")
        return True

    def _drafted(self, candidate: Candidate) -> None:
        self.latest = candidate
        self.candidates[self.drafts] = candidate
        extra = {"base": self.base} if self.base is not None else {}
        self.base = None  # the workbench builds on this one from now on
        self.transcript.record("candidate", attempt=self.drafts, files=candidate.written,
                               **extra)

    def _restore(self, number: int, candidate: Candidate) -> None:
        """The next draft builds on attempt `number` (the transcript says so, for replay)."""
        self.bench.restore(candidate)
        self.base = number

    def _scored(self, score: Score, feedback: str, result: VerifyResult | None) -> str:
        """Score the attempt just made, keep the best, and open the next request with how
        it compares; when stuck, arrange a fresh start from the best."""
        number = self.drafts
        candidate = self.candidates.get(number)
        entry = Scored(number=number, score=score,
                       signature=failure_signature(result, feedback),
                       summary=f"{score.describe()}: {first_line(feedback)}",
                       written=candidate.written if candidate is not None else None)
        previous = self.scored[-1] if self.scored else None
        self.scored.append(entry)
        self.feedbacks[number] = feedback
        if result is not None:
            self.verdicts[number] = result
        if self.best is None or (entry.written is not None and score.at_least(self.best.score)):
            self.best = entry
        best = self.best
        self.transcript.record("score", attempt=number, stage=score.stage.name.lower(),
                               cases_passed=score.cases_passed, cases=score.cases,
                               best_attempt=best.number)
        if self._restart_due():
            return feedback
        return f"{comparison(entry, best, previous)}\n\n{feedback}"

    def _restart_due(self) -> bool:
        best = self.best
        if best is None or best.written is None or self.restarts >= MAX_RESTARTS or \
                self.in_round or not is_stuck(self.scored[self.fresh_from:], best) or \
                self.out_of_budget():  # no draft follows: a restart would only be noted
            return False
        self.restarts += 1
        self._restore(best.number, self.candidates[best.number])
        self.restart_with = restart_request(best, self.feedbacks[best.number], self.scored,
                                            files_text(best.written))
        self.notes.append(f"stuck after attempt {self.drafts} ({self.scored[-1].summary}): "
                          f"a fresh conversation from attempt {best.number}")
        self.transcript.record("restart", attempt=self.drafts, from_attempt=best.number)
        self.fresh_from = len(self.scored)  # the old failures are in the fresh one's history
        return True

    def best_candidate(self) -> tuple[Candidate, VerifyResult | None, int] | None:
        """The best attempt that left a candidate: it, its verdict, its number."""
        if self.best is None or self.best.written is None:
            return None
        number = self.best.number
        return self.candidates[number], self.verdicts.get(number), number

    def precheck(self, candidate: Candidate, variant: str | None = None) -> str | None:
        """Feedback when the no-device checks reject the candidate."""
        verdict = self.bench.precheck(candidate)
        if verdict.record:
            extra = {"variant": variant} if variant else {}
            self.transcript.record("precheck", attempt=self.drafts, **verdict.record, **extra)
        return None if verdict.ok else self._reject(verdict.feedback)

    def verify(self, candidate: Candidate, variant: str | None = None) -> VerifyResult:
        number = self.drafts
        self.progress(f"attempt {number}: verifying the candidate")
        folder = self.workdir / f"attempt-{number}-{len(self.attempts)}"
        result = self.bench.verify(candidate, folder, time_it=True)
        failure = next((reason for reason in result.reasons if reason.check == "reference"),
                       None)
        if failure is not None:
            raise BadInputError(f"{self.spec.spec_path or self.spec.name}: {failure.message}")
        extra = {"variant": variant} if variant else {}
        self.transcript.record("verdict", attempt=number, status=result.status,
                               result=result.to_json(), **extra)
        self.attempts.append(Attempt(number, candidate, result))
        return result

    def step(self, feedback: str | None) -> tuple[str | None, bool]:
        """One draft through the checks: (feedback for the next one, whether to stop)."""
        return self.judge(self.draft(feedback))

    def judge(self, candidate: Candidate | None) -> tuple[str | None, bool]:
        """A draft (None: the reply held none) through the checks, scored."""
        if candidate is None:
            return self._scored(Score(Stage.NO_CANDIDATE), self.last_error, None), False
        problems = self.precheck(candidate)
        if problems is not None:
            return self._scored(Score(Stage.REJECTED), problems, None), False
        if self.bench.unverifiable() is not None:
            self.stopped_because = "unverified"
            return None, True
        result = self.verify(candidate)
        if result.passed:
            self._scored(Score.of(result), "", result)
            self.stopped_because = "passed"
            return None, True
        rejected = self._reject(self.bench.feedback(result, candidate))
        return self._scored(Score.of(result), rejected, result), False

    def first_round(self, count: int) -> tuple[str | None, bool]:
        """`count` first drafts asked at once, each judged; the chat of the first that
        passes, else of the best, goes on."""
        self.progress(f"drafting {count} first attempts at once with {self.drafter.name}")
        drafted = self.drafter.first_many(count)
        texts: dict[int, str | None] = {}
        self.in_round = True  # a round's failures are siblings, not a model stuck
        try:
            for index, item in enumerate(drafted):
                self.drafts += 1
                if isinstance(item, ReplyError):
                    self._reject(str(item))
                    candidate = None
                elif self._holds_secret(item):
                    candidate = None
                else:
                    self._drafted(item)
                    candidate = item
                texts[self.drafts], stop = self.judge(candidate)
                if stop:
                    self.drafter.keep(index)
                    self.drafts += len(drafted) - index - 1  # asked for, though not judged
                    return None, True
        finally:
            self.in_round = False
        first = self.drafts - len(drafted) + 1
        best = self.best.number if self.best and self.best.number >= first else self.drafts
        self.drafter.keep(best - first)
        if best in self.candidates:
            self._restore(best, self.candidates[best])
        self.fresh_from = len(self.scored)
        self.notes.append(f"{len(drafted)} first drafts at once: attempt {best} went on")
        return texts[best], False

    def run(self) -> Attempt | None:
        """Draft and verify until a candidate passes or the budget is spent."""
        feedback: str | None = None
        while True:
            exhausted = self.out_of_budget()
            if exhausted:
                self.stopped_because = "budget"
                self.notes.append(f"budget spent: {exhausted}")
                return None
            try:
                if self.drafts == 0 and self.budget.first_drafts > 1:
                    feedback, stop = self.first_round(min(self.budget.first_drafts,
                                                          self.budget.attempts))
                else:
                    feedback, stop = self.step(feedback)
            except NoMoreDrafts as exc:
                self.drafts -= 1  # nothing was drafted
                self.stopped_because = "no_more_drafts"
                self.notes.append(str(exc))
                return None
            except LLMBudgetSpent as exc:
                self.stopped_because = "budget"
                self.notes.append(f"budget spent: {exc}")
                return None
            except LLMError as exc:
                self.stopped_because = "llm_error"
                self.notes.append(str(exc))
                return None
            if stop:
                return self.attempts[-1] if self.stopped_because == "passed" else None

    def tune(self, best: Attempt) -> Attempt:
        """Time the backend's tuning space, then ask the drafter for faster versions,
        keeping the fastest verified one. Interpreter timings tune nothing."""
        if best.result.device.startswith("cpu"):
            self.notes.append(TUNING_SKIPPED)
            return best
        return self._tune_with_drafter(self._tune_variants(best))

    def _tune_variants(self, best: Attempt) -> Attempt:
        variants = self.bench.tuning_variants(best.candidate)[:self.budget.tuning_attempts]
        if not variants:
            return best
        start = best
        rows = []
        for variant in variants:
            if self.out_of_budget().startswith("wall-clock"):
                break
            self.progress(f"tuning: timing {variant.label}")
            self.transcript.record("tuning", attempt=self.drafts, label=variant.label,
                                   files=variant.candidate.written)
            problems = self.precheck(variant.candidate, variant.label)
            result = None if problems else self.verify(variant.candidate, variant.label)
            rows.append((variant.label, variant.estimate, result))
            if result is not None and _faster(result, best.result):
                best = self.attempts[-1]
        self.tuning = [TuningRow(label="as drafted", status=start.result.status,
                                 candidate_ms=_milliseconds(start.result),
                                 kept=best is start)]
        self.tuning += [TuningRow(label=label, estimate=estimate,
                                  status=result.status if result else "rejected statically",
                                  candidate_ms=_milliseconds(result),
                                  kept=result is best.result)
                        for label, estimate, result in rows]
        self.latest = best.candidate
        return best

    def _tune_with_drafter(self, best: Attempt) -> Attempt:
        """Ask for faster versions; each request reports the attempt just made (failed,
        slower or the new fastest), and every draft starts from the kept kernel."""
        feedback = self.bench.timing_feedback(best.result)
        for _ in range(self.budget.tuning_attempts):
            if self.out_of_budget() or best.result.timing is None:
                break
            self._restore(best.number, best.candidate)
            self.drafts += 1
            try:
                candidate = self.drafter.tune(feedback)
            except (NoMoreDrafts, ReplyError, LLMError) as exc:
                self.notes.append(f"tuning stopped: {exc}")
                break
            if self._holds_secret(candidate):
                feedback = self.last_error
                continue
            self._drafted(candidate)
            rejection = self.precheck(candidate)
            result = None if rejection is not None else self.verify(candidate)
            if result is not None and _faster(result, best.result):
                best = self.attempts[-1]
            verdict = "" if result is None or result.passed else \
                self.bench.feedback(result, candidate)
            timing = self.bench.timing_feedback(result) if result is not None and \
                result.passed else ""
            feedback = tuning_feedback(self.drafts, result, rejection=rejection,
                                       best_number=best.number, best=best.result,
                                       verdict_text=verdict, timing_text=timing)
            self.transcript.record("feedback", attempt=self.drafts, text=feedback)
        self._restore(best.number, best.candidate)
        self.latest = best.candidate
        return best


def _milliseconds(result: VerifyResult | None) -> float | None:
    return result.timing.candidate_ms if result is not None and result.timing else None


@dataclass
class _Generation:
    """One backend's run, kept until PERF.md (which may compare several) is written."""

    outcome: GenerateOutcome
    section: PerfSection | None


def _drafter(bench: Workbench, llm: LLMChoice | None, transcript: Transcript,
             budget: Budget) -> Drafter:
    if llm is None:
        return OfflineDrafter(bench)
    # No reply outlives the budget, however slowly a server answers.
    conversation = Conversation(llm.client, transcript,
                                deadline=time.monotonic() + budget.seconds,
                                token_limit=budget.tokens)
    return LLMDrafter(bench=bench, conversation=conversation, model=llm.model, hint=llm.hint)


def _unsupported(spec: OpSpec, backend: str, attempts: int, message: str,
                 ops: list[str]) -> GenerateOutcome:
    return GenerateOutcome(op=spec.name, status="unsupported", attempts=attempts,
                           backend=backend, out=None, unsupported_ops=ops, message=message,
                           stopped_because="unsupported")


def _finish(loop: Loop, best: Attempt | None, out: Path, backend: str,
            title: str) -> _Generation:
    """Write the chosen candidate (the one that passed, else the best-scored attempt, else
    the newest draft) and say what happened."""
    chosen, result, best_number = _chosen(loop, best)
    section = None
    if chosen is not None:
        loop.progress(f"writing the {title} package to {out}")
        written = _inferred_spec(loop.spec, result)
        write_spec_files(out, written)
        loop.bench.write_package(out, chosen, written)
        held = [] if best is not None or best_number is None or loop.best is None else [
            f"No attempt passed: the package holds attempt {best_number} of {loop.drafts}, the "
            f"best one ({loop.best.score.describe()})."]
        section = PerfSection(backend=backend, title=title, generator=loop.drafter.name,
                              attempts=loop.drafts, result=result,
                              notes=held + scaled_notes(result) + loop.bench.perf_notes(result),
                              tuning=loop.tuning)
    status: GenerateStatus = "passed" if best is not None else "failed"
    if loop.stopped_because == "unverified":
        message = loop.bench.unverified_message(out)
    elif best is not None:
        message = ""
    else:
        kept = f" (kept attempt {best_number}, the best of {loop.drafts}: " \
            f"{loop.best.score.describe()})" if loop.best and best_number else ""
        last = loop.last_error or (loop.notes[-1] if loop.notes else "none recorded")
        message = f"no candidate passed{kept}; last error:\n{last}"
    loop.transcript.record("end", status=status, stopped_because=loop.stopped_because,
                           attempts=loop.drafts, tokens=loop.drafter.tokens.to_json())
    return _Generation(GenerateOutcome(
        op=loop.spec.name, status=status, attempts=loop.drafts, backend=backend,
        out=out if chosen is not None else None, verification=result, message=message,
        stopped_because=loop.stopped_because, tokens=loop.drafter.tokens,
        notes=loop.notes + scaled_notes(result),
        tuning=loop.tuning, best_attempt=best_number), section)


def scaled_notes(result: VerifyResult | None) -> list[str]:
    """The harness's note when it verified on scaled-down shapes (runners.harness.scaling)."""
    scaled = (result.inferred or {}).get("scaled") if result is not None else None
    return [str(scaled["note"])] if isinstance(scaled, dict) and scaled.get("note") else []


def _chosen(loop: Loop, best: Attempt | None,
            ) -> tuple[Candidate | None, VerifyResult | None, int | None]:
    """What to publish: (candidate, its verdict, its attempt number)."""
    if best is not None:
        best = loop.tune(best)
        return best.candidate, best.result, best.number
    if loop.stopped_because != "unverified":
        kept = loop.best_candidate()
        if kept is not None:
            return kept
    last = loop.attempts[-1].result if loop.attempts else None
    return loop.latest, last, None


@dataclass(frozen=True)
class _Request:
    spec: OpSpec
    backend: str
    out: Path
    progress: Progress
    llm: LLMChoice | None
    budget: Budget
    timeout_s: float
    runner: Runner | None
    several: bool


def _run(request: _Request, workdir: Path, transcript: Transcript) -> _Generation:
    spec, agent = request.spec, get_backend(request.backend)
    reference = spec.reference_path or workdir / "reference.py"
    if spec.reference_path is None:
        write_reference(spec, reference)
    llm = request.llm
    context = BenchContext(spec=spec, reference=reference, workdir=workdir,
                           progress=request.progress, timeout_s=request.timeout_s,
                           drafting="offline" if llm is None else "llm",
                           starting_draft=llm.starting_draft if llm else None,
                           runner=request.runner)
    start = {"op": spec.name, "backend": agent.name, "spec_yaml": spec.to_yaml("reference.py"),
             "reference_source": spec.reference_source,
             "drafter": "offline" if llm is None else "llm",
             "model": llm.model if llm else None, "budget": request.budget.__dict__}
    try:
        bench = agent.open(context)
    except DraftUnsupported as exc:
        transcript.record("start", **start)
        transcript.record("end", status="unsupported", stopped_because="unsupported")
        return _Generation(_unsupported(spec, agent.name, 0, str(exc), exc.ops), None)
    transcript.record("start", **start, **bench.start_record())
    loop = Loop(spec=spec, bench=bench, drafter=_drafter(bench, llm, transcript, request.budget),
                budget=request.budget, transcript=transcript, progress=request.progress,
                workdir=workdir)
    try:
        best = loop.run()
    except DraftUnsupported as exc:
        transcript.record("end", status="unsupported", stopped_because="unsupported")
        return _Generation(_unsupported(spec, agent.name, loop.drafts,
                                        bench.unsupported_message(exc), exc.ops), None)
    return _finish(loop, best, request.out, agent.name, agent.title)


def _generate_one(request: _Request) -> _Generation:
    redactor = Redactor.from_environment(extra=[request.llm.api_key if request.llm else None])
    with private_workdir("opbot-") as workdir:
        transcript = Transcript(workdir / TRANSCRIPT_NAME, redactor)
        try:
            generation = _run(request, workdir, transcript)
        finally:
            transcript.close()
        # Several backends share the folder: each keeps its transcript under its name.
        generation.outcome.transcript = keep_beside(
            transcript, generation.outcome.out,
            name=f"transcript-{request.backend}.jsonl" if request.several else None)
    return generation


def _combined(spec: OpSpec, out: Path, generations: list[_Generation]) -> GenerateOutcome:
    """Several backends' outcomes in one: passed when any passed; the recommended one's
    verdict on top, every backend's under `backends`."""
    outcomes = [item.outcome for item in generations]
    sections = [item.section for item in generations if item.section is not None]
    best = recommended(sections)
    top = next((item for item in outcomes if item.backend == best), None) or next(
        (item for item in outcomes if item.status == "passed"), outcomes[0])
    status: GenerateStatus = "passed" if any(item.status == "passed" for item in outcomes) \
        else ("unsupported" if all(item.status == "unsupported" for item in outcomes)
              else "failed")
    return GenerateOutcome(
        op=spec.name, status=status, attempts=sum(item.attempts for item in outcomes),
        backend=",".join(item.backend for item in outcomes),
        out=out if any(item.out for item in outcomes) else None,
        verification=top.verification, message="\n\n".join(
            f"{item.backend}: {item.message}" for item in outcomes if item.message),
        stopped_because=top.stopped_because,
        tokens=TokenCount(prompt=sum(item.tokens.prompt for item in outcomes),
                          completion=sum(item.tokens.completion for item in outcomes),
                          estimated=any(item.tokens.estimated for item in outcomes)),
        notes=[f"{item.backend}: {note}" for item in outcomes for note in item.notes],
        backends=outcomes, recommended=best, transcript=top.transcript)


def generate(spec: OpSpec, *, backend: str | list[str], out: Path, progress: Progress,
             llm: LLMChoice | None = None, budget: Budget | None = None,
             timeout_s: float = 600.0,
             runners: Mapping[str, Runner] | None = None,
             peaks: PeakOverrides | None = None) -> GenerateOutcome:
    """Generate for one backend or several side by side, into one package folder.
    `runners` replace backends' own runners, by backend name (tests inject recording ones);
    `peaks` are the policy's device peaks for PERF.md's roofline (perf.peaks)."""
    names = [backend] if isinstance(backend, str) else list(backend)
    # A written op.yaml records the backends the package holds: later iterations use them
    # (a spec generated in place keeps the user's own op.yaml untouched).
    spec = replace(spec, targets=tuple(names))
    for stale in out.glob("transcript*.jsonl"):  # an earlier run's: replay would mislead
        stale.unlink()
    generations = [_generate_one(_Request(
        spec, name, out, progress, llm, budget or Budget(), timeout_s,
        (runners or {}).get(name), several=len(names) > 1)) for name in names]
    sections = [item.section for item in generations if item.section is not None]
    if sections:
        (out / PERF_FILE).write_text(perf_markdown(spec.name, sections, peaks),
                                     encoding="utf-8")
    if len(generations) == 1:
        return generations[0].outcome
    return _combined(spec, out, generations)
