"""`opbot replay`: re-judge each candidate of a transcript; no model is called.

The backend named in the transcript rebuilds every draft from what the drafter wrote (an
Ascend C reply's files compose onto the same starting package the loop began with), runs
its static checks again and, where this machine can verify that backend, the judge again.
Where it cannot, only the static stage is compared, and a note says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.agent.backends import DEFAULT_BACKEND, get_backend
from bot.agent.backends.base import BenchContext, Candidate, DraftUnsupported, Workbench
from bot.agent.reply import ReplyError
from bot.agent.transcript import read_transcript
from bot.errors import BadInputError
from bot.spec import load_spec
from runners.base import Backend as Runner
from runners.sandbox import private_workdir

STATIC_CLEAN, STATIC_FINDINGS = "static-clean", "static-findings"


@dataclass(frozen=True)
class ReplayedAttempt:
    attempt: int
    recorded: str
    replayed: str
    reasons: list[dict[str, Any]]


@dataclass
class ReplayReport:
    op: str
    attempts: list[ReplayedAttempt] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def consistent(self) -> bool:
        return all(item.recorded == item.replayed for item in self.attempts)

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "consistent": self.consistent,
                "attempts": [item.__dict__ for item in self.attempts], "notes": self.notes}


_MOST = 1_000_000  # attempt numbers name folders: a hostile one must not


def _attempt(entry: Mapping[str, Any]) -> int:
    number = entry.get("attempt")
    if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number <= _MOST:
        raise BadInputError(f"a {entry.get('kind')} entry has no attempt number: not an opbot "
                            "transcript")
    return number


def _by_attempt(entries: list[dict[str, Any]], *kinds: str) -> dict[int, dict[str, Any]]:
    return {_attempt(entry): entry for entry in entries
            if entry["kind"] in kinds and not entry.get("variant")}


def _written(entry: Mapping[str, Any]) -> dict[str, str]:
    """What the drafter wrote; older Triton transcripts keep one `source`."""
    files = entry.get("files")
    if isinstance(files, dict):
        return {str(name): str(text) for name, text in files.items()}
    if files is not None:
        raise BadInputError("a candidate entry's files are not a mapping of names to text")
    return {"candidate.py": str(entry.get("source", ""))}


def _static(ok: bool) -> str:
    return STATIC_CLEAN if ok else STATIC_FINDINGS


@dataclass
class _Replay:
    bench: Workbench
    verifiable: bool
    prechecks: dict[int, dict[str, Any]]
    verdicts: dict[int, dict[str, Any]]
    folder: Path
    replayed: dict[int, Candidate] = field(default_factory=dict)

    def attempt(self, number: int, written: dict[str, str],
                base: int | None = None) -> ReplayedAttempt:
        # A draft built on an earlier attempt (a restart from the best, a tuning draft from
        # the kept kernel) is rebuilt on that attempt's replayed candidate.
        if base is not None and base in self.replayed:
            self.bench.restore(self.replayed[base])
        try:
            candidate = self.bench.adopt(written)
        except ReplyError as exc:
            return ReplayedAttempt(number, "none", "rejected",
                                   [{"check": "reply", "message": str(exc)}])
        self.replayed[number] = candidate
        precheck = self.bench.precheck(candidate)
        recorded_static = self.prechecks.get(number)
        recorded = "none" if recorded_static is None else _static(
            recorded_static.get("ok") is True)
        reasons: list[dict[str, Any]] = [{"check": "static", "message": error}
                                         for error in precheck.record.get("errors", [])]
        # Judge again where this machine can and the run did (or had no static stage).
        if precheck.ok and self.verifiable and (number in self.verdicts or not precheck.record):
            result = self.bench.verify(candidate, self.folder / f"attempt-{number}",
                                       time_it=False)
            verdict = self.verdicts.get(number)
            return ReplayedAttempt(number, str(verdict.get("status")) if verdict else "none",
                                   result.status,
                                   [reason.to_json() for reason in result.reasons])
        return ReplayedAttempt(number, recorded, _static(precheck.ok), reasons)


def replay_transcript(path: Path, runners: Mapping[str, Runner] | None = None) -> ReplayReport:
    entries = list(read_transcript(path))
    start = next((entry for entry in entries if entry["kind"] == "start"), None)
    if start is None:
        raise BadInputError(f"{path}: no start entry: not an opbot transcript")
    agent = get_backend(str(start.get("backend") or DEFAULT_BACKEND))
    if not isinstance(start.get("spec_yaml"), str) or not isinstance(
            start.get("reference_source"), str):
        raise BadInputError(f"{path}: the start entry lacks the spec and the reference")
    report = ReplayReport(op=str(start.get("op", "?")))
    with private_workdir("opbot-replay-") as folder:
        (folder / "op.yaml").write_text(str(start["spec_yaml"]), encoding="utf-8")
        (folder / "reference.py").write_text(str(start["reference_source"]), encoding="utf-8")
        spec = load_spec(folder / "op.yaml")
        (folder / "work").mkdir()
        context = BenchContext(spec=spec, reference=folder / "reference.py",
                               workdir=folder / "work", progress=lambda _message: None,
                               timeout_s=300.0,
                               drafting="llm" if start.get("drafter") == "llm" else "offline",
                               runner=(runners or {}).get(agent.name), recorded=start)
        try:
            bench = agent.open(context)
        except DraftUnsupported as exc:
            raise BadInputError(f"{path}: the starting package cannot be rebuilt: {exc}") \
                from None
        unverifiable = bench.unverifiable()
        verdicts = _by_attempt(entries, "verdict")
        if verdicts and unverifiable is not None:
            report.notes.append(f"runner verdicts are not replayed here ({unverifiable}); "
                                "the static checks are")
        replay = _Replay(bench, unverifiable is None,
                         _by_attempt(entries, "precheck", "static"), verdicts, folder)
        for entry in entries:
            if entry["kind"] in ("candidate", "package"):  # "package": older Ascend C runs
                base = entry.get("base")
                report.attempts.append(replay.attempt(
                    _attempt(entry), _written(entry),
                    base if isinstance(base, int) and not isinstance(base, bool) else None))
    return report
