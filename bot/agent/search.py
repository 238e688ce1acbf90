"""Best-first search over attempts: every attempt scored, the best one kept.

A draft that compiles but is slightly wrong is worth more than a later one that does not
compile: the loop keeps the best attempt (and publishes it when none passes), tells the
model how its last attempt compares with the best, and, when the model is stuck (the same
failure twice, or a fall back to an earlier stage), starts a fresh conversation from the
best candidate with a short history of what was tried (the "debugging trap" of long
chats). Backend-neutral: scores come from the runner's typed verdicts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from pathlib import PurePath

from runners.base import Failure, VerifyResult

# Fresh conversations a generation may start when stuck: each resends the whole prompt.
MAX_RESTARTS = 2
_HISTORY_LINES = 6
_SIGNATURE_CHARS = 120


class Stage(IntEnum):
    """How far an attempt got, worst first."""

    NO_CANDIDATE = 0  # the reply held no usable files
    REJECTED = 1  # the no-device checks refused it
    BROKEN = 2  # it did not load or build, or it cheated
    RAN = 3  # it built, then crashed, timed out or returned the wrong structure
    COMPARED = 4  # its outputs were compared: some values wrong
    PASSED = 5


STAGE_WORDS = {
    Stage.NO_CANDIDATE: "the reply held no candidate",
    Stage.REJECTED: "rejected by the static checks",
    Stage.BROKEN: "did not build or load (or broke the rules)",
    Stage.RAN: "built, then failed while running",
    Stage.COMPARED: "ran, with wrong values",
    Stage.PASSED: "passed verification",
}
_BROKEN_CHECKS = frozenset({"load", "build", "init", "sandbox", "unsupported", "torch_op",
                            "no_kernel", "cached_output", "input_mutation"})
_COMPARED_CHECKS = frozenset({"values", "nan_inf"})


def _stage_of(result: VerifyResult) -> Stage:
    if result.passed:
        return Stage.PASSED
    checks = {failure.check for failure in result.reasons}
    # A cheat that returns the right values is no step towards a kernel.
    if checks & _BROKEN_CHECKS or any(check.startswith("static_") for check in checks):
        return Stage.BROKEN
    if checks and checks <= _COMPARED_CHECKS:
        return Stage.COMPARED
    return Stage.RAN


def _worst_error(reasons: Sequence[Failure]) -> float:
    """The largest absolute error of the value mismatches (inf for NaN/Inf ones)."""
    worst = 0.0
    for failure in reasons:
        if failure.check == "nan_inf":
            return math.inf
        error = failure.details.get("max_abs_err")
        if isinstance(error, (int, float)) and not isinstance(error, bool):
            worst = max(worst, float(error) if math.isfinite(error) else math.inf)
    return worst


@dataclass(frozen=True)
class Score:
    """Stage first, then the share of cases passed, then the error's size, then time."""

    stage: Stage
    cases_passed: int = 0
    cases: int = 0
    error: float = math.inf
    milliseconds: float | None = None

    @classmethod
    def of(cls, result: VerifyResult) -> Score:
        timing = result.timing
        return cls(stage=_stage_of(result),
                   cases_passed=sum(1 for case in result.cases if case.passed),
                   cases=len(result.cases),
                   error=0.0 if result.passed else _worst_error(result.reasons),
                   milliseconds=timing.candidate_ms if timing and result.passed else None)

    def key(self) -> tuple[float, ...]:
        share = self.cases_passed / self.cases if self.cases else 0.0
        return (float(self.stage), share, -self.error,
                -(self.milliseconds if self.milliseconds is not None else math.inf))

    def at_least(self, other: Score) -> bool:
        return self.key() >= other.key()

    def describe(self) -> str:
        words = STAGE_WORDS[self.stage]
        if self.stage == Stage.COMPARED:
            words += f" ({self.cases_passed} of {self.cases} cases passed"
            words += f", max abs error {self.error:.4g})" if math.isfinite(self.error) \
                else ", NaN/Inf in the outputs)"
        elif self.stage == Stage.PASSED and self.milliseconds is not None:
            words += f" ({self.milliseconds:.4g} ms)"
        return words


_NUMBERS = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def _normalised(text: str) -> str:
    return _NUMBERS.sub("N", " ".join(text.split()))[:_SIGNATURE_CHARS]


def failure_signature(result: VerifyResult | None, feedback: str) -> str:
    """What identifies a failure across attempts: the first check and where it points,
    numbers blanked (a mismatch of another size is still the same mismatch)."""
    if result is None or not result.reasons:
        first = next((line for line in feedback.splitlines() if line.strip()), "")
        return "feedback:" + _normalised(first)
    failure = result.reasons[0]
    where = ""
    if failure.location is not None:
        where = f"{PurePath(failure.location.file).name}:{failure.location.line}"
    message = "" if failure.check in _COMPARED_CHECKS else failure.message
    return f"{failure.check}@{where}:{failure.output}:{_normalised(message)}"


@dataclass(frozen=True)
class Scored:
    """One attempt as the search sees it."""

    number: int
    score: Score
    signature: str
    summary: str  # one line: what happened, for the history of a restart
    written: Mapping[str, str] | None = None  # the drafter's files (None: no candidate)


def first_line(text: str, limit: int = 160) -> str:
    line = next((item.strip() for item in text.splitlines() if item.strip()), "")
    return line if len(line) <= limit else line[:limit - 3] + "..."


def comparison(latest: Scored, best: Scored, previous: Scored | None) -> str:
    """The line that opens the next request: the last attempt's verdict, against the best."""
    line = f"Attempt {latest.number}: {latest.score.describe()}."
    if best is latest:
        if previous is not None:
            line += f" That is the best so far (attempt {previous.number}: " \
                    f"{previous.score.describe()})."
        return line
    return (line + f" Worse than the best so far, attempt {best.number}: "
            f"{best.score.describe()}. Fix the problem below, and keep what made attempt "
            f"{best.number} better.")


def is_stuck(history: Sequence[Scored], best: Scored) -> bool:
    """Two failures in a row with one signature, or a fall of a whole stage below the best
    on the last two attempts: time for a fresh start from the best."""
    if len(history) < 2:
        return False
    latest, previous = history[-1], history[-2]
    same = latest.signature == previous.signature and \
        not latest.score.key() > previous.score.key()
    fallen = all(item.score.stage < best.score.stage for item in (latest, previous))
    return same or fallen


def restart_request(best: Scored, best_feedback: str, history: Sequence[Scored],
                    files_text: str) -> str:
    """What a fresh conversation is seeded with: the best candidate, its feedback, and a few
    lines of what was tried since."""
    tried = [f"- attempt {item.number}: {item.summary}" for item in history
             if item is not best][-_HISTORY_LINES:]
    parts = [f"Earlier attempts got stuck. Start again from the best one so far, attempt "
             f"{best.number} ({best.score.describe()}):", files_text,
             f"Its verification feedback:\n{best_feedback}"]
    if tried:
        parts.append("Tried since, and failed (do not repeat these):\n" + "\n".join(tried))
    return "\n\n".join(parts)


def files_text(written: Mapping[str, str]) -> str:
    """A candidate's files as fenced blocks, named as a reply names them."""
    blocks = []
    for name, text in written.items():
        language = {".py": "python", ".cpp": "cpp", ".asc": "cpp", ".h": "cpp"}.get(
            PurePath(name).suffix, "")
        blocks.append(f"```{language} file={PurePath(name).name}\n{text.rstrip()}\n```")
    return "\n\n".join(blocks)


def tuning_feedback(latest_number: int, result: VerifyResult | None, *,
                    rejection: str | None, best_number: int, best: VerifyResult,
                    verdict_text: str, timing_text: str) -> str:
    """Tuning feedback from the attempt just made, never from an older one."""
    best_ms = best.timing.candidate_ms if best.timing else None
    kept = f"attempt {best_number}" + (f" at {best_ms:.4g} ms" if best_ms is not None else "")
    if rejection is not None:
        return (f"Tuning attempt {latest_number} was rejected before it ran; the kernel kept "
                f"is {kept}.\n\n{rejection}\n\nStart again from the kept kernel.")
    if result is None or not result.passed:
        return (f"Tuning attempt {latest_number} FAILED verification; the kernel kept is "
                f"{kept}.\n\n{verdict_text}\n\nStart again from the kept kernel.")
    latest_ms = result.timing.candidate_ms if result.timing else None
    if latest_number == best_number:
        return f"Tuning attempt {latest_number} is the fastest so far.\n{timing_text}"
    slower = (f" ({latest_ms:.4g} ms, slower than {best_ms:.4g} ms)"
              if latest_ms is not None and best_ms is not None else "")
    return (f"Tuning attempt {latest_number} passed but is not faster{slower}; the kernel "
            f"kept is {kept}. Undo that change and try another idea.\n{timing_text}")
