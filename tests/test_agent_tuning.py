"""The tuning phase's choice: skipped on the CPU interpreter; on a device, the fastest
verified candidate wins. Device timings cannot be produced here, so the harness's verdicts
are given (a recording drafter and a table of verdicts stand in for GPU runs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bot.agent.drafters import TokenCount
from bot.agent.loop import TUNING_SKIPPED, Budget, _Attempt, _Loop
from bot.agent.transcript import Redactor, Transcript
from bot.spec import load_spec
from runners.base import Timing, VerifyResult
from tests.support import EXAMPLES


@dataclass
class _TuningDrafter:
    sources: list[str]
    asked: list[str] = field(default_factory=list)
    name: str = "recording drafter"
    tokens: TokenCount = field(default_factory=TokenCount)

    def first(self) -> str:
        return self.sources.pop(0)

    def revise(self, feedback: str) -> str:
        return self.sources.pop(0)

    def tune(self, feedback: str) -> str:
        self.asked.append(feedback)
        return self.sources.pop(0)


def _result(device: str, milliseconds: float, passed: bool = True) -> VerifyResult:
    timing = Timing(device=device, shapes=[[4]], trials=10, candidate_ms=milliseconds,
                    candidate_min_ms=milliseconds, candidate_max_ms=milliseconds,
                    reference_ms=1.0, speedup=1.0 / milliseconds)
    return VerifyResult(status="passed" if passed else "failed", reasons=[], cases=[],
                        stages=[], device=device, timing=timing if passed else None)


def _loop(tmp_path: Path, drafter: _TuningDrafter, verdicts: dict[str, VerifyResult]) -> _Loop:
    loop = _Loop(spec=load_spec(EXAMPLES / "softmax" / "op.yaml"), reference=tmp_path,
                 workdir=tmp_path, drafter=drafter, budget=Budget(tuning_attempts=3),
                 transcript=Transcript(tmp_path / "t.jsonl", Redactor([])),
                 progress=lambda _message: None, timeout_s=10)

    def verify(source: str) -> VerifyResult:
        result = verdicts[source]
        loop.attempts.append(_Attempt(len(loop.attempts) + 1, source, result))
        return result

    loop.verify = verify  # type: ignore[method-assign]
    return loop


def test_tuning_keeps_the_fastest_verified_candidate(tmp_path: Path) -> None:
    verdicts = {"slower": _result("cuda", 3.0), "broken": _result("cuda", 0.1, passed=False),
                "faster": _result("cuda", 0.5)}
    drafter = _TuningDrafter(["slower", "broken", "faster"])
    loop = _loop(tmp_path, drafter, verdicts)
    first = _Attempt(1, "first", _result("cuda", 2.0))
    best = loop.tune(first)
    assert best.source == "faster"
    assert len(drafter.asked) == 3
    assert "2 ms" in drafter.asked[0]


def test_tuning_is_skipped_on_the_interpreter(tmp_path: Path) -> None:
    drafter = _TuningDrafter(["never asked"])
    loop = _loop(tmp_path, drafter, {})
    first = _Attempt(1, "first", _result("cpu (Triton interpreter)", 50.0))
    assert loop.tune(first) is first
    assert drafter.asked == []
    assert TUNING_SKIPPED in loop.notes
