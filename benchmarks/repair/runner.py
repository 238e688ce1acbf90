"""Inject each mistake into a verified kernel, judge it as the agent loop does, let the oracle
repair what the feedback names, and judge the repair.

Everything goes through the backend's Workbench exactly as bot/agent/loop.py drives it:
the candidate comes from `bench.parse_reply` (the model's reply: one fenced block per
file), then `bench.precheck`, then, when that passes and the machine can verify,
`bench.verify(..., time_it=False)` and `bench.feedback`. The feedback string is what the
model would read next.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from benchmarks.repair.mistakes import (
    ASCENDC_MUTATIONS,
    REAL_CHECKERS,
    TRITON_MUTATIONS,
    Backend,
    Mutation,
    Role,
)
from benchmarks.repair.oracle import added_lines, cues_found
from bot.agent.backends import get_backend
from bot.agent.backends.ascendc.workbench import AscendCWorkbench
from bot.agent.backends.base import BenchContext, Workbench
from bot.agent.reply import ReplyError
from bot.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "ops"
TRITON_OPS = ("add", "relu", "gelu", "softmax", "rms_norm", "linear_relu")
ASCENDC_OPS = ("gelu",)
Status = Literal["passed", "failed", "unverified"]
Reverify = Literal["fresh", "cached"]
Progress = Callable[[str], None]


class HarnessError(Exception):
    """The benchmark itself is broken (a baseline that fails): no rate can be trusted."""


@dataclass(frozen=True)
class Verdict:
    status: Status
    stage: str  # what decided it: reply, precheck, verify, or "unverified: why"
    feedback: str = ""


@dataclass(frozen=True)
class Trial:
    """One injected mistake, start to end."""

    mistake: str
    variant: str
    backend: Backend
    op: str
    detected: bool
    caught_by: str  # the stage that rejected it; "" when nothing did
    cues: tuple[str, ...]  # what in the feedback names it; () when nothing does
    repaired: bool
    repair_stage: str  # how the undone kernel was judged
    feedback: str
    seconds: float

    @property
    def named(self) -> bool:
        return bool(self.cues)


def _digest(files: Mapping[str, str]) -> str:
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name].encode() + b"\0")
    return digest.hexdigest()


def _reply(backend: Backend, files: Mapping[str, str]) -> str:
    """The model's reply carrying these files, one fenced block each."""
    language = "python" if backend == "triton" else "cpp"
    return "\n\n".join(f"```{language} file={Path(name).name}\n{text.rstrip()}\n```"
                       for name, text in files.items())


@dataclass
class Session:
    """One verified kernel (a backend and an example op) and its workbench."""

    backend: Backend
    op: str
    workdir: Path
    reverify: Reverify = "fresh"
    progress: Progress = field(default=lambda _message: None)
    precheck_only: bool = False
    bench: Workbench = field(init=False)
    files: dict[str, str] = field(init=False)
    roles: dict[Role, str] = field(init=False)
    _verdicts: dict[str, Verdict] = field(default_factory=dict, init=False)
    _judged: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        spec = load_spec(EXAMPLES / self.op / "op.yaml")
        # drafting="llm": the workbench is set up as for a model (Ascend C lays out its
        # starting package), and every candidate is read from a reply.
        context = BenchContext(spec=spec, reference=spec.reference_path or
                               EXAMPLES / self.op / "reference.py", workdir=self.workdir,
                               progress=lambda _message: None, timeout_s=300.0,
                               drafting="llm")
        self.bench = get_backend(self.backend).open(context)
        self.files, self.roles = self._starting_files()

    def _starting_files(self) -> tuple[dict[str, str], dict[Role, str]]:
        """The offline generator's kernel: the verified starting point."""
        if isinstance(self.bench, AscendCWorkbench):
            names = self.bench.skeleton.writable
            return self.bench.skeleton.model_files(), {"kernel": names[0], "tiling": names[1]}
        written = dict(self.bench.offline_draft().written)
        return written, {"kernel": next(iter(written))}

    def judge(self, files: Mapping[str, str], label: str, *, cached: bool = False) -> Verdict:
        """The loop's checks on the reply carrying `files`: precheck, then verify."""
        key = _digest(files)
        if cached and key in self._verdicts:
            return self._verdicts[key]
        self._judged += 1
        verdict = self._judge(files, label)
        self._verdicts[key] = verdict
        return verdict

    def _judge(self, files: Mapping[str, str], label: str) -> Verdict:
        try:
            candidate = self.bench.parse_reply(_reply(self.backend, files))
        except ReplyError as exc:
            return Verdict("failed", "reply", str(exc))
        precheck = self.bench.precheck(candidate)
        if not precheck.ok:
            return Verdict("failed", "precheck", precheck.feedback)
        reason = "precheck only" if self.precheck_only else self.bench.unverifiable()
        if reason is not None:
            return Verdict("unverified", f"unverified: {reason}")
        folder = self.workdir / f"{self._judged:02d}-{label.replace('/', '-')}"
        result = self.bench.verify(candidate, folder, time_it=False)
        if any(item.check == "reference" for item in result.reasons):
            raise HarnessError(f"{self.op}: the reference fails: {result.reasons[0].message}")
        if result.passed:
            return Verdict("passed", "verify")
        return Verdict("failed", "verify", self.bench.feedback(result, candidate))

    def check_baseline(self) -> Verdict:
        verdict = self.judge(self.files, "baseline")
        if verdict.status == "failed":
            raise HarnessError(f"{self.backend}/{self.op}: the unmutated kernel fails "
                               f"({verdict.stage}):\n{verdict.feedback}")
        return verdict

    def trial(self, mutation: Mutation) -> Trial:
        started = time.monotonic()
        label = re.sub(r"[^\w.-]+", "_", f"{mutation.mistake.key}-{mutation.variant[:24]}")
        self.progress(f"{self.backend}/{self.op}: {mutation.mistake.key}: {mutation.variant}")
        mutated = mutation.apply(self.files, self.roles)
        verdict = self.judge(mutated, label)
        detected = verdict.status == "failed"
        cues = cues_found(mutation, verdict.feedback, added_lines(self.files, mutated)) \
            if detected else ()
        repaired, repair_stage = False, ""
        if cues:  # the oracle undoes the mistake: the verified files, exactly
            undone = self.judge(self.files, f"{label}-undone", cached=self.reverify == "cached")
            repaired = undone.status != "failed"
            repair_stage = undone.stage
        return Trial(mistake=mutation.mistake.key, variant=mutation.variant,
                     backend=self.backend, op=self.op, detected=detected,
                     caught_by=verdict.stage if detected else "", cues=cues, repaired=repaired,
                     repair_stage=repair_stage, feedback=verdict.feedback,
                     seconds=time.monotonic() - started)


def mutations_for(backend: Backend, *, real_checks: bool,
                  keys: Iterable[str] | None = None) -> list[Mutation]:
    """The catalogue for a backend; Ascend C variants that only the real checks can catch
    are left out where those checks do not run."""
    catalogue = TRITON_MUTATIONS if backend == "triton" else ASCENDC_MUTATIONS
    wanted = None if keys is None else set(keys)
    return [item for item in catalogue
            if (wanted is None or item.mistake.key in wanted or
                f"{item.mistake.key}/{item.variant}" in wanted)
            and (item.checker not in REAL_CHECKERS or real_checks)]


@dataclass(frozen=True)
class Plan:
    """Which kernels to mutate with which mistakes."""

    subjects: tuple[tuple[Backend, str, tuple[Mutation, ...]], ...]
    precheck_only: bool = False  # stop after the workbench's precheck (CI's time budget)

    @property
    def size(self) -> int:
        return sum(len(mutations) for _, _, mutations in self.subjects)


def run_plan(plan: Plan, *, reverify: Reverify = "fresh",
             progress: Progress = lambda _message: None) -> list[Trial]:
    trials: list[Trial] = []
    for backend, op, mutations in plan.subjects:
        with tempfile.TemporaryDirectory(prefix=f"opbot-repair-{op}-") as scratch:
            progress(f"{backend}/{op}: drafting and verifying the starting kernel")
            session = Session(backend, op, Path(scratch), reverify, progress,
                              plan.precheck_only)
            session.check_baseline()
            trials += [session.trial(mutation) for mutation in mutations]
    return trials


def real_checks_here() -> bool:
    """Whether Ascend C candidates get the real-header type-check and a verifier here
    (the CPU model, or CANN and an NPU)."""
    return get_backend("ascendc").runner().availability().available


def full_plan(*, real_checks: bool, keys: Iterable[str] | None = None) -> Plan:
    """Every mistake into every example op's Triton kernel and into Ascend C gelu."""
    wanted = None if keys is None else tuple(keys)
    triton = tuple(mutations_for("triton", real_checks=real_checks, keys=wanted))
    ascendc = tuple(mutations_for("ascendc", real_checks=real_checks, keys=wanted))
    subjects: list[tuple[Backend, str, tuple[Mutation, ...]]] = []
    subjects += [("triton", op, triton) for op in TRITON_OPS if triton]
    subjects += [("ascendc", op, ascendc) for op in ASCENDC_OPS if ascendc]
    return Plan(tuple(subjects))


# CI: one Triton kernel for every class; Ascend C's variants its prechecks catch (the lint,
# the tiling simulator, and the real-header type-check where it runs), judged by the precheck
# alone: a CPU-model run takes ~30 s and tests/runners/ascendc/ proves the package passes it.
CI_TRITON_OP = "relu"


def ci_triton_plan() -> Plan:
    return Plan((("triton", CI_TRITON_OP, tuple(mutations_for("triton", real_checks=False))),))


def ci_ascendc_plan(*, real_checks: bool) -> Plan:
    mutations = tuple(item for item in mutations_for("ascendc", real_checks=real_checks)
                      if item.checker != "cpu_model")
    return Plan((("ascendc", ASCENDC_OPS[0], mutations),), precheck_only=True)


def ci_plans(*, real_checks: bool) -> list[Plan]:
    return [ci_triton_plan(), ci_ascendc_plan(real_checks=real_checks)]
