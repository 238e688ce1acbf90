"""The tuning phase's choice: skipped on the CPU interpreter; on a device, the fastest
verified candidate wins. Device timings cannot be produced here, so the harness's verdicts
are given (a recording drafter and a workbench answering from a table of verdicts stand in
for GPU runs). The same behaviours through whole generations, for every backend, are in
test_backend_contract.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.agent.backends.base import TuningVariant
from bot.agent.loop import TUNING_SKIPPED, Attempt, Loop
from bot.agent.outcome import Budget
from bot.agent.transcript import Redactor, Transcript
from bot.spec import load_spec
from tests.agent.table_bench import KERNEL, TableBench, TableDrafter, candidate, result
from tests.support import EXAMPLES


@pytest.fixture
def transcript(tmp_path: Path) -> Iterator[Transcript]:
    kept = Transcript(tmp_path / "t.jsonl", Redactor([]))
    yield kept
    kept.close()


def _loop(tmp_path: Path, transcript: Transcript, drafter: TableDrafter,
          bench: TableBench) -> Loop:
    return Loop(spec=load_spec(EXAMPLES / "softmax" / "op.yaml"), bench=bench,
                drafter=drafter, budget=Budget(tuning_attempts=3), transcript=transcript,
                progress=lambda _message: None, workdir=tmp_path)


def test_tuning_keeps_the_fastest_verifiedcandidate(tmp_path: Path,
                                                     transcript: Transcript) -> None:
    bench = TableBench({"slower": result("cuda", 3.0),
                           "broken": result("cuda", 0.1, passed=False),
                           "faster": result("cuda", 0.5)})
    drafter = TableDrafter(["slower", "broken", "faster"])
    loop = _loop(tmp_path, transcript, drafter, bench)
    first = Attempt(1, candidate("first"), result("cuda", 2.0))
    best = loop.tune(first)
    assert best.candidate.files[KERNEL] == "faster"
    assert loop.latest is best.candidate  # the package is written from the kept draft
    assert bench.verified == ["slower", "broken", "faster"]
    assert len(drafter.asked) == 3
    assert "2 ms" in drafter.asked[0]


def test_tuning_is_skipped_on_the_interpreter(tmp_path: Path, transcript: Transcript) -> None:
    drafter = TableDrafter(["never asked"])
    bench = TableBench({})
    loop = _loop(tmp_path, transcript, drafter, bench)
    first = Attempt(1, candidate("first"), result("cpu (Triton interpreter)", 50.0))
    assert loop.tune(first) is first
    assert drafter.asked == []
    assert bench.verified == []
    assert TUNING_SKIPPED in loop.notes


def test_the_backends_variants_are_timed_first_and_the_fastest_is_kept(
        tmp_path: Path, transcript: Transcript) -> None:
    variants = [TuningVariant("tile 64", candidate("v-slow"), estimate=1.0),
                TuningVariant("tile 128", candidate("v-fast"), estimate=0.5),
                TuningVariant("tile 256", candidate("v-lint"), estimate=0.4),
                TuningVariant("tile 512", candidate("v-broken"), estimate=0.3),
                TuningVariant("tile 1024", candidate("v-beyond-the-budget"))]
    bench = TableBench({"v-slow": result("cuda", 3.0), "v-fast": result("cuda", 1.0),
                           "v-broken": result("cuda", 0.1, passed=False),
                           "d-1": result("cuda", 4.0), "d-2": result("cuda", 5.0),
                           "d-3": result("cuda", 6.0), "d-4": result("cuda", 7.0)},
                          variants=variants, rejected={"v-lint"})
    drafter = TableDrafter(["d-1", "d-2", "d-3", "d-4"])
    loop = _loop(tmp_path, transcript, drafter, bench)
    loop.budget = Budget(tuning_attempts=4)
    best = loop.tune(Attempt(1, candidate("first"), result("cuda", 2.0)))
    assert best.candidate.files[KERNEL] == "v-fast"
    assert loop.latest is best.candidate
    # Four variants at most (the tuning budget), then four drafts from the drafter.
    assert bench.verified == ["v-slow", "v-fast", "v-broken", "d-1", "d-2", "d-3", "d-4"]
    assert [(row.label, row.status, row.candidate_ms, row.kept) for row in loop.tuning] == [
        ("as drafted", "passed", 2.0, False), ("tile 64", "passed", 3.0, False),
        ("tile 128", "passed", 1.0, True), ("tile 256", "rejected statically", None, False),
        ("tile 512", "failed", None, False)]
    assert "kernel 1 ms" in drafter.asked[0]  # the drafter starts from the fastest variant
