"""A recording drafter and a workbench whose judge answers from a table of verdicts: the
loop's choices (search, tuning) without a device or a model."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.agent.backends.base import (
    Candidate,
    DraftUnsupported,
    NoMoreDrafts,
    Precheck,
    TuningVariant,
)
from bot.agent.conversation import TokenCount
from bot.agent.feedback import timing_feedback
from bot.agent.reply import ReplyError
from runners.base import Timing, VerifyResult

KERNEL = "kernel.py"


def candidate(source: str) -> Candidate:
    return Candidate(files={KERNEL: source}, written={KERNEL: source})


@dataclass
class TableDrafter:
    sources: list[str]
    asked: list[str] = field(default_factory=list)
    name: str = "recording drafter"
    tokens: TokenCount = field(default_factory=TokenCount)

    requests: list[tuple[str, str]] = field(default_factory=list)  # (kind, text)
    kept: list[int] = field(default_factory=list)  # the first drafts' chats kept

    def _next(self, kind: str, text: str) -> Candidate:
        self.requests.append((kind, text))
        if not self.sources:
            raise NoMoreDrafts("the table drafter has no more sources")
        return candidate(self.sources.pop(0))

    def first(self) -> Candidate:
        return self._next("first", "")

    def revise(self, feedback: str) -> Candidate:
        return self._next("revise", feedback)

    def restart(self, request: str) -> Candidate:
        return self._next("restart", request)

    def first_many(self, count: int) -> list[Candidate | ReplyError]:
        self.requests.append(("first_many", str(count)))
        drafted: list[Candidate | ReplyError] = []
        for _ in range(count):
            source = self.sources.pop(0)
            drafted.append(ReplyError(source) if source.startswith("no code") else
                           candidate(source))
        return drafted

    def keep(self, index: int) -> None:
        self.kept.append(index)

    def tune(self, feedback: str) -> Candidate:
        self.asked.append(feedback)
        return self._next("tune", feedback)


@dataclass
class TableBench:
    """A workbench whose judge answers from a table (draft source -> verdict), with the
    tuning variants it is given."""

    verdicts: dict[str, VerifyResult]
    variants: list[TuningVariant] = field(default_factory=list)
    rejected: set[str] = field(default_factory=set)  # sources the static checks refuse
    verified: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)

    def start_record(self) -> dict[str, Any]:
        return {}

    def offline_draft(self) -> Candidate:
        raise DraftUnsupported("the table has no offline draft", [])

    def system_prompt(self) -> str:
        return "system"

    def first_request(self, hint: str | None) -> str:
        return "first"

    def retry_request(self, feedback: str) -> str:
        return feedback

    def tuning_request(self, feedback: str) -> str:
        return feedback

    def parse_reply(self, text: str) -> Candidate:
        return candidate(text)

    def adopt(self, written: Mapping[str, str]) -> Candidate:
        return candidate(written[KERNEL])

    def restore(self, candidate: Candidate) -> None:
        self.restored.append(candidate.files[KERNEL])

    def precheck(self, candidate: Candidate) -> Precheck:
        if candidate.files[KERNEL] in self.rejected:
            return Precheck(ok=False, feedback="refused statically", record={"ok": False})
        return Precheck(ok=True)

    def unverifiable(self) -> str | None:
        return None

    def verify(self, candidate: Candidate, folder: Path, *, time_it: bool) -> VerifyResult:
        source = candidate.files[KERNEL]
        self.verified.append(source)
        return self.verdicts[source]

    def feedback(self, result: VerifyResult, candidate: Candidate) -> str:
        return "\n".join(f"[{reason.check}] {reason.message}" for reason in result.reasons) \
            or result.status

    def timing_feedback(self, result: VerifyResult) -> str:
        return timing_feedback(result.timing) if result.timing else ""

    def tuning_variants(self, candidate: Candidate) -> list[TuningVariant]:
        return list(self.variants)

    def write_package(self, out: Path, candidate: Candidate, spec: object) -> None:
        raise AssertionError("tuning writes no package")

    def perf_notes(self, result: VerifyResult | None) -> list[str]:
        return []

    def unsupported_message(self, error: DraftUnsupported) -> str:
        return str(error)

    def unverified_message(self, out: Path) -> str:
        return "unverified"


def result(device: str, milliseconds: float, passed: bool = True) -> VerifyResult:
    timing = Timing(device=device, shapes=[[4]], trials=10, candidate_ms=milliseconds,
                    candidate_min_ms=milliseconds, candidate_max_ms=milliseconds,
                    reference_ms=1.0, speedup=1.0 / milliseconds)
    return VerifyResult(status="passed" if passed else "failed", reasons=[], cases=[],
                        stages=[], device=device, timing=timing if passed else None)
