"""What every backend gives the agent loop: a small Protocol, one package per backend.

The loop (bot/agent/loop.py) knows no backend by name. It asks the registry for an
`AgentBackend`, opens a `Workbench` for one generation, and from then on only drafts,
prechecks, verifies, renders feedback, tunes and writes through it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from bot.agent.outcome import Progress
from bot.spec import OpSpec
from runners.base import Backend as Runner
from runners.base import VerifyResult

if TYPE_CHECKING:
    from bot.agent.offline.job import OfflineJob, OfflineResult

Drafting = Literal["offline", "llm"]


class DraftUnsupported(Exception):
    """The backend cannot lay out a draft for this reference (the ops it cannot lower)."""

    def __init__(self, message: str, ops: Sequence[str]) -> None:
        super().__init__(message)
        self.ops = list(ops)


class NoMoreDrafts(Exception):
    """The drafter has nothing new to offer."""


@dataclass(frozen=True)
class Candidate:
    """A draft: every file it puts in the package (paths relative to the package root),
    and the part a drafter wrote (what the transcript keeps and replay feeds back)."""

    files: dict[str, str]
    written: dict[str, str]
    state: object = field(default=None, compare=False)  # the backend's own model of it


@dataclass(frozen=True)
class Precheck:
    """Checks that need no device, run before a draft goes to the runner."""

    ok: bool
    feedback: str = ""
    record: dict[str, Any] = field(default_factory=dict)  # for the transcript


@dataclass(frozen=True)
class TuningVariant:
    """One point of a backend's tuning space, with the static model's cost if it has one."""

    label: str
    candidate: Candidate
    estimate: float | None = None
    detail: str = ""


@dataclass(frozen=True)
class BenchContext:
    """What a workbench is opened with, for one generation."""

    spec: OpSpec
    reference: Path  # the reference's source on disk
    workdir: Path  # scratch space; gone after the generation
    progress: Progress
    timeout_s: float
    drafting: Drafting
    starting_draft: str | None = None  # e.g. the kernel a review is about
    runner: Runner | None = None  # replaces the backend's own runner (tests)
    recorded: Mapping[str, Any] = field(default_factory=dict)  # a replayed run's start entry


class Workbench(Protocol):
    """One generation's backend-specific half: prompts, replies, checks, package."""

    def start_record(self) -> dict[str, Any]:
        """Fields the transcript's start entry adds (e.g. the toolchain generation)."""
        ...

    def offline_draft(self) -> Candidate:
        """The offline generator's draft; DraftUnsupported names what it cannot lower."""
        ...

    def system_prompt(self) -> str:
        ...

    def first_request(self, hint: str | None) -> str:
        ...

    def retry_request(self, feedback: str) -> str:
        ...

    def tuning_request(self, feedback: str) -> str:
        ...

    def parse_reply(self, text: str) -> Candidate:
        """The candidate a reply holds; ReplyError (its text is feedback) when none."""
        ...

    def adopt(self, written: Mapping[str, str]) -> Candidate:
        """A candidate from the files a drafter wrote (a transcript's record, for replay)."""
        ...

    def restore(self, candidate: Candidate) -> None:
        """Make `candidate` the draft the next reply builds on (a restart from the best
        attempt, a tuning request from the kept kernel)."""
        ...

    def precheck(self, candidate: Candidate) -> Precheck:
        ...

    def unverifiable(self) -> str | None:
        """Why no candidate can be verified on this machine; None when one can."""
        ...

    def verify(self, candidate: Candidate, folder: Path, *, time_it: bool) -> VerifyResult:
        """Write the candidate under `folder` and put it through the runner's judge."""
        ...

    def feedback(self, result: VerifyResult, candidate: Candidate) -> str:
        ...

    def timing_feedback(self, result: VerifyResult) -> str:
        ...

    def tuning_variants(self, candidate: Candidate) -> list[TuningVariant]:
        """Ranked variants to time on the device (best guess first); [] when none."""
        ...

    def write_package(self, out: Path, candidate: Candidate, spec: OpSpec) -> None:
        """The backend's files of the operator package (the spec files are the loop's);
        `spec` is the one written beside them (a KernelBench reference's, completed with
        the inputs the harness observed), so the package's tests have cases."""
        ...

    def perf_notes(self, result: VerifyResult | None) -> list[str]:
        """Backend-specific PERF.md lines: where timings come from, or why there are none."""
        ...

    def unsupported_message(self, error: DraftUnsupported) -> str:
        ...

    def unverified_message(self, out: Path) -> str:
        ...


class AgentBackend(Protocol):
    """A backend as the registry holds it."""

    @property
    def name(self) -> str:
        """The registry key, as users type it (`--backend NAME`)."""
        ...

    @property
    def title(self) -> str:
        """How people call it in titles and reports ("Triton", "Ascend C")."""
        ...

    def open(self, context: BenchContext) -> Workbench:
        """A workbench for one generation; DraftUnsupported when nothing can be laid out."""
        ...

    def generate_offline(self, job: OfflineJob) -> OfflineResult:
        """The offline generator, inside its worker process (the reference is user code)."""
        ...

    def runner(self) -> Runner:
        """The runner backend that builds and judges this backend's candidates."""
        ...

    def resolve_candidate(self, path: Path) -> Path:
        """What `opbot verify IMPL` points at, made exact; BadInputError when it is none."""
        ...

    def kernel_paths(self, op: str) -> tuple[str, ...]:
        """Where a generated package keeps the kernel a review talks about
        (package-relative; the first that exists)."""
        ...

    def partial_verification(self, device: str) -> str | None:
        """Why a verdict reached on `device` does not stand for the hardware the backend
        targets (Ascend C judged on the CPU model, not built with CANN); None when it does."""
        ...
