"""Best-first search over attempts: scores, the best attempt kept and published, each request
comparing the last attempt with the best, fresh starts when stuck, truthful tuning feedback.

Table tests: a recording drafter and a workbench whose judge answers from a table of
verdicts (tests/agent/table_bench.py). The same through the real `openai` client and the
Triton interpreter is in test_loop.py."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.agent.loop import Attempt, Loop
from bot.agent.outcome import Budget
from bot.agent.replay import _Replay
from bot.agent.search import MAX_RESTARTS, Score, Stage, failure_signature
from bot.agent.transcript import Redactor, Transcript, read_transcript
from bot.spec import load_spec
from runners.base import CaseResult, Failure, SourceLocation, VerifyResult
from tests.agent.table_bench import KERNEL, TableBench, TableDrafter, candidate, result
from tests.support import EXAMPLES


def _cases(passed: int, total: int) -> list[CaseResult]:
    return [CaseResult(name=f"case{index}", shapes=[[8]], dtypes=["float32"], seed=index,
                       passed=index < passed) for index in range(total)]


def mismatch(passed: int, total: int, error: float) -> VerifyResult:
    failures = [Failure(check="values", message="values differ", case=f"case{index}",
                        output=0, details={"max_abs_err": error})
                for index in range(passed, total)]
    return VerifyResult(status="failed", reasons=failures, cases=_cases(passed, total),
                        stages=[], device="cpu")


def failing(check: str, message: str, line: int | None = None) -> VerifyResult:
    location = SourceLocation("kernel.py", line, "x") if line is not None else None
    return VerifyResult.failed(Failure(check=check, message=message, location=location),
                               device="cpu")


def passing(milliseconds: float | None = None) -> VerifyResult:
    return result("cpu", milliseconds or 1.0) if milliseconds else VerifyResult(
        status="passed", reasons=[], cases=_cases(8, 8), stages=[], device="cpu")


@pytest.fixture
def transcript(tmp_path: Path) -> Iterator[Transcript]:
    kept = Transcript(tmp_path / "t.jsonl", Redactor([]))
    yield kept
    kept.close()


def _loop(tmp_path: Path, transcript: Transcript, sources: list[str],
          verdicts: dict[str, VerifyResult], *, attempts: int = 6,
          rejected: frozenset[str] = frozenset()) -> tuple[Loop, TableDrafter, TableBench]:
    drafter = TableDrafter(list(sources))
    bench = TableBench(dict(verdicts), rejected=set(rejected))
    loop = Loop(spec=load_spec(EXAMPLES / "relu" / "op.yaml"), bench=bench, drafter=drafter,
                budget=Budget(attempts=attempts), transcript=transcript,
                progress=lambda _message: None, workdir=tmp_path)
    return loop, drafter, bench


@pytest.mark.parametrize(("better", "worse"), [
    (mismatch(7, 8, 0.5), failing("build", "no such function")),
    (mismatch(7, 8, 0.5), mismatch(2, 8, 0.01)),  # more cases passed wins over a smaller error
    (mismatch(4, 8, 0.01), mismatch(4, 8, 0.5)),  # then the smaller error
    (failing("crash", "SIGSEGV"), failing("build", "syntax error")),
    # A forward that computes with PyTorch returns the right values, and is no kernel.
    (mismatch(0, 8, 10.0), failing("torch_op", "the forward called torch.relu")),
    (failing("static_fallback", "try/except to torch"), Score(Stage.REJECTED)),
    (passing(1.0), passing(2.0)),  # among passing ones, the faster
    (passing(), mismatch(7, 8, 1e-9)),
], ids=["values>build", "share>error", "error", "crash>build", "values>cheat",
        "cheat>rejected", "faster", "passed>close"])
def test_scores_rank_how_far_an_attempt_got(better: VerifyResult | Score,
                                            worse: VerifyResult | Score) -> None:
    high = better if isinstance(better, Score) else Score.of(better)
    low = worse if isinstance(worse, Score) else Score.of(worse)
    assert high.key() > low.key()
    assert not low.at_least(high)


def test_nan_outputs_score_as_an_infinite_error() -> None:
    nan = VerifyResult.failed(Failure(check="nan_inf", message="NaN in output 0"))
    assert Score.of(nan).error == math.inf
    assert Score.of(mismatch(0, 8, 1e6)).key() > Score.of(nan).key()


def test_signatures_ignore_numbers_but_not_the_place() -> None:
    assert failure_signature(mismatch(1, 8, 0.5), "") == \
        failure_signature(mismatch(3, 8, 0.01), "")
    assert failure_signature(failing("build", "line 12: bad", 12), "") == \
        failure_signature(failing("build", "line 13: bad", 12), "")
    assert failure_signature(failing("build", "bad", 12), "") != \
        failure_signature(failing("build", "bad", 40), "")
    assert failure_signature(None, "the reply has no code") != \
        failure_signature(None, "the reply was cut off")


def test_a_spent_budget_keeps_the_best_attempt_not_the_last(
        tmp_path: Path, transcript: Transcript) -> None:
    loop, _drafter, _ = _loop(tmp_path, transcript, ["close", "broken"],
                             {"close": mismatch(7, 8, 1e-3),
                              "broken": failing("build", "no such function")}, attempts=2)
    assert loop.run() is None
    assert loop.stopped_because == "budget"
    kept = loop.best_candidate()
    assert kept is not None
    chosen, verdict, number = kept
    assert chosen.files[KERNEL] == "close"
    assert number == 1
    assert verdict is not None
    assert Score.of(verdict).cases_passed == 7
    # The second request compared the first attempt; the last error is still the last one.
    assert "[build] no such function" in loop.last_error


def test_each_request_says_how_the_last_attempt_compares_with_the_best(
        tmp_path: Path, transcript: Transcript) -> None:
    loop, drafter, _ = _loop(tmp_path, transcript, ["close", "broken", "good"],
                             {"close": mismatch(7, 8, 1e-3),
                              "broken": failing("build", "no such function"),
                              "good": passing()})
    best = loop.run()
    assert best is not None
    assert best.candidate.files[KERNEL] == "good"
    kinds = [kind for kind, _ in drafter.requests]
    assert kinds == ["first", "revise", "revise"]
    second, third = drafter.requests[1][1], drafter.requests[2][1]
    assert second.startswith("Attempt 1: ran, with wrong values (7 of 8 cases passed, "
                             "max abs error 0.001).")
    assert third.startswith("Attempt 2: did not build or load")
    assert "Worse than the best so far, attempt 1: ran, with wrong values" in third
    assert "[build] no such function" in third  # the last attempt's own verdict follows


def test_the_same_failure_twice_starts_afresh_from_the_best(
        tmp_path: Path, transcript: Transcript) -> None:
    verdicts = {"close": mismatch(6, 8, 1e-2), "b1": failing("build", "bad call", 12),
                "b2": failing("build", "bad call", 12), "good": passing()}
    loop, drafter, bench = _loop(tmp_path, transcript, ["close", "b1", "b2", "good"], verdicts)
    best = loop.run()
    assert best is not None
    assert best.candidate.files[KERNEL] == "good"
    assert [kind for kind, _ in drafter.requests] == ["first", "revise", "revise", "restart"]
    seed = drafter.requests[3][1]
    assert "Start again from the best one so far, attempt 1" in seed
    assert "```python file=kernel.py\nclose\n```" in seed  # the best candidate itself
    assert "- attempt 2: did not build or load" in seed
    assert "- attempt 3:" in seed
    assert "[values] values differ" in seed  # the best one's own feedback
    assert bench.restored == ["close"]  # later replies build on the best, not the last
    assert any("a fresh conversation from attempt 1" in note for note in loop.notes)


def test_falling_a_stage_below_the_best_twice_starts_afresh(
        tmp_path: Path, transcript: Transcript) -> None:
    verdicts = {"close": mismatch(6, 8, 1e-2), "b1": failing("build", "first error"),
                "b2": failing("load", "another error"), "good": passing()}
    loop, drafter, _ = _loop(tmp_path, transcript, ["close", "b1", "b2", "good"], verdicts)
    assert loop.run() is not None
    assert [kind for kind, _ in drafter.requests] == ["first", "revise", "revise", "restart"]


def test_improving_attempts_never_restart(tmp_path: Path, transcript: Transcript) -> None:
    verdicts = {"a": mismatch(2, 8, 1.0), "b": mismatch(4, 8, 0.5), "c": mismatch(6, 8, 0.1),
                "good": passing()}
    loop, drafter, _ = _loop(tmp_path, transcript, ["a", "b", "c", "good"], verdicts)
    assert loop.run() is not None
    assert "restart" not in [kind for kind, _ in drafter.requests]


def test_restarts_are_bounded(tmp_path: Path, transcript: Transcript) -> None:
    sources = [f"b{index}" for index in range(12)]
    verdicts = {source: failing("build", "the same error", 3) for source in sources}
    loop, drafter, _ = _loop(tmp_path, transcript, sources, verdicts, attempts=12)
    assert loop.run() is None
    assert loop.restarts == MAX_RESTARTS
    assert [kind for kind, _ in drafter.requests].count("restart") == MAX_RESTARTS


def test_a_statically_rejected_draft_is_kept_over_a_reply_without_code(
        tmp_path: Path, transcript: Transcript) -> None:
    loop, _, _ = _loop(tmp_path, transcript, ["lint"], {}, attempts=1,
                       rejected=frozenset({"lint"}))
    assert loop.run() is None
    kept = loop.best_candidate()
    assert kept is not None
    assert kept[0].files[KERNEL] == "lint"
    assert kept[1] is None


def test_tuning_feedback_reports_the_attempt_just_made(tmp_path: Path,
                                                       transcript: Transcript) -> None:
    verdicts = {"slower": result("cuda", 3.0), "broken": result("cuda", 0.1, passed=False),
                "lint": result("cuda", 0.1), "faster": result("cuda", 0.5)}
    loop, drafter, bench = _loop(tmp_path, transcript, ["slower", "broken", "lint", "faster"],
                                 verdicts, rejected=frozenset({"lint"}))
    loop.budget = Budget(tuning_attempts=4)
    loop.drafts = 1
    best = loop.tune(Attempt(1, candidate("first"), result("cuda", 2.0)))
    assert best.candidate.files[KERNEL] == "faster"
    after_slower, after_broken, after_lint = drafter.asked[1:4]
    assert "passed but is not faster (3 ms, slower than 2 ms)" in after_slower
    assert "the kernel kept is attempt 1 at 2 ms" in after_slower
    assert "FAILED verification" in after_broken
    assert "passed verification" not in \
        after_broken.split("\n")[0]
    assert "rejected before it ran" in after_lint
    assert "refused statically" in after_lint
    # Every tuning draft starts from the kept kernel, and the package is the fastest.
    assert bench.restored == ["first", "first", "first", "first", "faster"]


def test_a_restart_is_recorded_and_replayed_on_the_best_draft(
        tmp_path: Path, transcript: Transcript) -> None:
    verdicts = {"close": mismatch(6, 8, 1e-2), "b1": failing("build", "bad call", 12),
                "b2": failing("build", "bad call", 12), "good": passing()}
    loop, _, _ = _loop(tmp_path, transcript, ["close", "b1", "b2", "good"], verdicts)
    assert loop.run() is not None
    transcript.close()
    entries = list(read_transcript(tmp_path / "t.jsonl"))
    candidates = [entry for entry in entries if entry["kind"] == "candidate"]
    assert [entry.get("base") for entry in candidates] == [None, None, None, 1]
    assert any(entry["kind"] == "restart" and entry["from_attempt"] == 1 for entry in entries)
    # Replay rebuilds the restarted draft on attempt 1's files, not on attempt 3's.
    bench = TableBench(verdicts)
    replay = _Replay(bench, False, {}, {}, tmp_path)
    for entry in candidates:
        replay.attempt(entry["attempt"], entry["files"], entry.get("base"))
    assert bench.restored == ["close"]


def test_parallel_first_drafts_go_on_with_the_best(tmp_path: Path,
                                                   transcript: Transcript) -> None:
    verdicts = {"broken": failing("build", "same", 3), "close": mismatch(7, 8, 1e-3),
                "worse": failing("build", "same", 3), "good": passing()}
    loop, drafter, bench = _loop(tmp_path, transcript,
                                 ["broken", "close", "no code here", "worse", "good"], verdicts)
    loop.budget = Budget(attempts=6, first_drafts=4)
    best = loop.run()
    assert best is not None
    assert best.candidate.files[KERNEL] == "good"
    assert drafter.requests[0] == ("first_many", "4")
    assert drafter.kept == [1]  # the chat of "close" went on
    assert bench.restored == ["close"]
    # Two identical failures among siblings are no stuck model: the next is a revision.
    assert drafter.requests[1][0] == "revise"
    assert drafter.requests[1][1].startswith("Attempt 2: ran, with wrong values")
    assert loop.drafts == 5
    assert any("4 first drafts at once: attempt 2 went on" in note for note in loop.notes)


def test_a_passing_first_draft_stops_the_round(tmp_path: Path,
                                               transcript: Transcript) -> None:
    loop, drafter, bench = _loop(tmp_path, transcript, ["broken", "good", "never judged"],
                                 {"broken": failing("build", "x"), "good": passing()})
    loop.budget = Budget(attempts=6, first_drafts=3)
    best = loop.run()
    assert best is not None
    assert best.candidate.files[KERNEL] == "good"
    assert drafter.kept == [1]
    assert bench.verified == ["broken", "good"]
    assert loop.drafts == 3  # every draft asked for counts against the budget


def test_first_drafts_never_exceed_the_attempts(tmp_path: Path,
                                                transcript: Transcript) -> None:
    loop, drafter, _ = _loop(tmp_path, transcript, ["a", "b", "c"],
                             {"a": failing("build", "x"), "b": failing("build", "y"),
                              "c": failing("build", "z")}, attempts=2)
    loop.budget = Budget(attempts=2, first_drafts=8)
    assert loop.run() is None
    assert drafter.requests == [("first_many", "2")]
    assert loop.stopped_because == "budget"


def test_a_tuning_draft_quoting_a_credential_is_never_judged(tmp_path: Path) -> None:
    secret = "sk-tuning-secret-9d1c"
    kept = Transcript(tmp_path / "secret.jsonl", Redactor([secret]))
    loop, drafter, bench = _loop(tmp_path, kept, [f"faster {secret}", "faster"],
                                 {"faster": result("cuda", 0.5)})
    loop.budget = Budget(tuning_attempts=2)
    loop.drafts = 1
    best = loop.tune(Attempt(1, candidate("first"), result("cuda", 2.0)))
    kept.close()
    assert best.candidate.files[KERNEL] == "faster"
    assert bench.verified == ["faster"]  # the draft holding the key was never judged
    assert "contain a credential" in drafter.asked[1]
