"""The tuning phase's choice: skipped on the CPU interpreter; on a device, the fastest
verified candidate wins. Device timings cannot be produced here, so the harness's verdicts
are given (a recording drafter and a workbench answering from a table of verdicts stand in
for GPU runs). The same behaviours through whole generations, for every backend, are in
test_backend_contract.py."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bot.agent.backends.base import (
    Candidate,
    DraftUnsupported,
    Precheck,
    TuningVariant,
)
from bot.agent.conversation import TokenCount
from bot.agent.feedback import timing_feedback
from bot.agent.loop import TUNING_SKIPPED, Attempt, Loop
from bot.agent.outcome import Budget
from bot.agent.transcript import Redactor, Transcript
from bot.spec import load_spec
from runners.base import Timing, VerifyResult
from tests.support import EXAMPLES

KERNEL = "kernel.py"


def _candidate(source: str) -> Candidate:
    return Candidate(files={KERNEL: source}, written={KERNEL: source})


@dataclass
class _TuningDrafter:
    sources: list[str]
    asked: list[str] = field(default_factory=list)
    name: str = "recording drafter"
    tokens: TokenCount = field(default_factory=TokenCount)

    def first(self) -> Candidate:
        return _candidate(self.sources.pop(0))

    def revise(self, feedback: str) -> Candidate:
        return _candidate(self.sources.pop(0))

    def tune(self, feedback: str) -> Candidate:
        self.asked.append(feedback)
        return _candidate(self.sources.pop(0))


@dataclass
class _VerdictBench:
    """A workbench whose judge answers from a table (draft source -> verdict), with the
    tuning variants it is given."""

    verdicts: dict[str, VerifyResult]
    variants: list[TuningVariant] = field(default_factory=list)
    rejected: set[str] = field(default_factory=set)  # sources the static checks refuse
    verified: list[str] = field(default_factory=list)

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
        return _candidate(text)

    def adopt(self, written: Mapping[str, str]) -> Candidate:
        return _candidate(written[KERNEL])

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
        return result.status

    def timing_feedback(self, result: VerifyResult) -> str:
        return timing_feedback(result.timing) if result.timing else ""

    def tuning_variants(self, candidate: Candidate) -> list[TuningVariant]:
        return list(self.variants)

    def write_package(self, out: Path, candidate: Candidate) -> None:
        raise AssertionError("tuning writes no package")

    def perf_notes(self, result: VerifyResult | None) -> list[str]:
        return []

    def unsupported_message(self, error: DraftUnsupported) -> str:
        return str(error)

    def unverified_message(self, out: Path) -> str:
        return "unverified"


def _result(device: str, milliseconds: float, passed: bool = True) -> VerifyResult:
    timing = Timing(device=device, shapes=[[4]], trials=10, candidate_ms=milliseconds,
                    candidate_min_ms=milliseconds, candidate_max_ms=milliseconds,
                    reference_ms=1.0, speedup=1.0 / milliseconds)
    return VerifyResult(status="passed" if passed else "failed", reasons=[], cases=[],
                        stages=[], device=device, timing=timing if passed else None)


@pytest.fixture
def transcript(tmp_path: Path) -> Iterator[Transcript]:
    kept = Transcript(tmp_path / "t.jsonl", Redactor([]))
    yield kept
    kept.close()


def _loop(tmp_path: Path, transcript: Transcript, drafter: _TuningDrafter,
          bench: _VerdictBench) -> Loop:
    return Loop(spec=load_spec(EXAMPLES / "softmax" / "op.yaml"), bench=bench,
                drafter=drafter, budget=Budget(tuning_attempts=3), transcript=transcript,
                progress=lambda _message: None, workdir=tmp_path)


def test_tuning_keeps_the_fastest_verified_candidate(tmp_path: Path,
                                                     transcript: Transcript) -> None:
    bench = _VerdictBench({"slower": _result("cuda", 3.0),
                           "broken": _result("cuda", 0.1, passed=False),
                           "faster": _result("cuda", 0.5)})
    drafter = _TuningDrafter(["slower", "broken", "faster"])
    loop = _loop(tmp_path, transcript, drafter, bench)
    first = Attempt(1, _candidate("first"), _result("cuda", 2.0))
    best = loop.tune(first)
    assert best.candidate.files[KERNEL] == "faster"
    assert loop.latest is best.candidate  # the package is written from the kept draft
    assert bench.verified == ["slower", "broken", "faster"]
    assert len(drafter.asked) == 3
    assert "2 ms" in drafter.asked[0]


def test_tuning_is_skipped_on_the_interpreter(tmp_path: Path, transcript: Transcript) -> None:
    drafter = _TuningDrafter(["never asked"])
    bench = _VerdictBench({})
    loop = _loop(tmp_path, transcript, drafter, bench)
    first = Attempt(1, _candidate("first"), _result("cpu (Triton interpreter)", 50.0))
    assert loop.tune(first) is first
    assert drafter.asked == []
    assert bench.verified == []
    assert TUNING_SKIPPED in loop.notes


def test_the_backends_variants_are_timed_first_and_the_fastest_is_kept(
        tmp_path: Path, transcript: Transcript) -> None:
    variants = [TuningVariant("tile 64", _candidate("v-slow"), estimate=1.0),
                TuningVariant("tile 128", _candidate("v-fast"), estimate=0.5),
                TuningVariant("tile 256", _candidate("v-lint"), estimate=0.4),
                TuningVariant("tile 512", _candidate("v-broken"), estimate=0.3),
                TuningVariant("tile 1024", _candidate("v-beyond-the-budget"))]
    bench = _VerdictBench({"v-slow": _result("cuda", 3.0), "v-fast": _result("cuda", 1.0),
                           "v-broken": _result("cuda", 0.1, passed=False),
                           "d-1": _result("cuda", 4.0), "d-2": _result("cuda", 5.0),
                           "d-3": _result("cuda", 6.0), "d-4": _result("cuda", 7.0)},
                          variants=variants, rejected={"v-lint"})
    drafter = _TuningDrafter(["d-1", "d-2", "d-3", "d-4"])
    loop = _loop(tmp_path, transcript, drafter, bench)
    loop.budget = Budget(tuning_attempts=4)
    best = loop.tune(Attempt(1, _candidate("first"), _result("cuda", 2.0)))
    assert best.candidate.files[KERNEL] == "v-fast"
    assert loop.latest is best.candidate
    # Four variants at most (the tuning budget), then four drafts from the drafter.
    assert bench.verified == ["v-slow", "v-fast", "v-broken", "d-1", "d-2", "d-3", "d-4"]
    assert [(row.label, row.status, row.candidate_ms, row.kept) for row in loop.tuning] == [
        ("as drafted", "passed", 2.0, False), ("tile 64", "passed", 3.0, False),
        ("tile 128", "passed", 1.0, True), ("tile 256", "rejected statically", None, False),
        ("tile 512", "failed", None, False)]
    assert "kernel 1 ms" in drafter.asked[0]  # the drafter starts from the fastest variant
