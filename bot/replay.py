"""`opbot replay`: re-verify each candidate of a transcript; no model is called."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.agent.transcript import read_transcript
from bot.errors import BadInputError
from bot.spec import load_spec
from runners.triton import TritonBackend


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


def replay_transcript(path: Path) -> ReplayReport:
    entries = list(read_transcript(path))
    start = next((entry for entry in entries if entry["kind"] == "start"), None)
    if start is None:
        raise BadInputError(f"{path}: no start entry: not an opbot transcript")
    if start.get("backend") == "ascendc":
        from bot.replay_ascendc import replay_ascendc

        return replay_ascendc(path, start, entries)
    verdicts = {entry["attempt"]: entry["status"] for entry in entries
                if entry["kind"] == "verdict"}
    candidates = [entry for entry in entries if entry["kind"] == "candidate"]
    report = ReplayReport(op=str(start.get("op", "?")))
    with tempfile.TemporaryDirectory(prefix="opbot-replay-") as tmp:
        folder = Path(tmp)
        (folder / "op.yaml").write_text(str(start["spec_yaml"]), encoding="utf-8")
        (folder / "reference.py").write_text(str(start["reference_source"]), encoding="utf-8")
        spec = load_spec(folder / "op.yaml")
        for entry in candidates:
            number = int(entry["attempt"])
            candidate = folder / f"attempt-{number}" / f"{spec.name}.py"
            candidate.parent.mkdir()
            candidate.write_text(str(entry["source"]), encoding="utf-8")
            result = TritonBackend().verify(spec.to_request(
                candidate, reference_file=folder / "reference.py"))
            report.attempts.append(ReplayedAttempt(
                attempt=number, recorded=str(verdicts.get(number, "none")),
                replayed=result.status,
                reasons=[reason.to_json() for reason in result.reasons]))
    return report
