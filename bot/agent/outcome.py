"""What a generation answers: its budget, its outcome, and (for several backends) all of
them with the recommended one. Backend-neutral; `opbot generate --json` prints these."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bot.agent.conversation import TokenCount
from bot.agent.llm import ChatClient
from bot.perf.roofline import roofline
from runners.base import VerifyResult

GenerateStatus = Literal["passed", "failed", "unsupported"]
Progress = Callable[[str], None]


@dataclass(frozen=True)
class Budget:
    attempts: int = 6
    first_drafts: int = 1  # first drafts asked at once (each an attempt); the best goes on
    tokens: int = 200_000
    seconds: float = 1800.0
    tuning_attempts: int = 2


def budget_spent(budget: Budget, *, drafts: int, tokens: TokenCount, started: float) -> str:
    """Which part of the budget is spent ("" while some of each is left)."""
    if drafts >= budget.attempts:
        return f"attempts ({budget.attempts})"
    if tokens.total >= budget.tokens:
        return f"tokens ({tokens.total} of {budget.tokens})"
    if time.monotonic() - started >= budget.seconds:
        return f"wall-clock time ({budget.seconds:g} s)"
    return ""


@dataclass(frozen=True)
class LLMChoice:
    """How to reach the model, when one drafts: a client, its model name, the key to hide."""

    client: ChatClient
    model: str
    api_key: str | None = None
    hint: str | None = None
    starting_draft: str | None = None  # e.g. the kernel a review is about


@dataclass(frozen=True)
class TuningRow:
    """One tuning candidate: what it was, what the simulator thought, what the device said."""

    label: str
    status: str
    candidate_ms: float | None = None
    estimate: float | None = None
    kept: bool = False

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TuningRow:
        milliseconds, estimate = data.get("candidate_ms"), data.get("estimate")
        return cls(label=str(data.get("label", "")), status=str(data.get("status", "")),
                   candidate_ms=None if milliseconds is None else float(milliseconds),
                   estimate=None if estimate is None else float(estimate),
                   kept=bool(data.get("kept", False)))


def _json_safe(value: Any) -> Any:
    """`value` with NaN and infinities as None: json.dumps would write NaN/Infinity, which
    is not JSON, and a worker's timing can be any float."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(item) for item in value]
    return value


@dataclass
class GenerateOutcome:
    op: str
    status: GenerateStatus
    attempts: int
    backend: str
    out: Path | None
    verification: VerifyResult | None = None
    unsupported_ops: list[str] = field(default_factory=list)
    message: str = ""
    stopped_because: str = ""
    tokens: TokenCount = field(default_factory=TokenCount)
    notes: list[str] = field(default_factory=list)
    transcript: Path | None = None
    tuning: list[TuningRow] = field(default_factory=list)
    best_attempt: int | None = None  # the attempt published (the best-scored one)
    # Several backends at once: each one's outcome, and the faster verified one.
    backends: list[GenerateOutcome] = field(default_factory=list)
    recommended: str | None = None

    @property
    def backend_names(self) -> list[str]:
        return [item.backend for item in self.backends] or [self.backend]

    def to_json(self) -> dict[str, Any]:
        result = self.verification
        timing = result.timing if result else None
        data: dict[str, Any] = {
            "op": self.op,
            "status": self.status,
            "attempts": self.attempts,
            "backend": self.backend,
            "out": str(self.out) if self.out else None,
            "cases": [case.to_json() for case in result.cases] if result else [],
            "perf": timing.to_json() if timing else None,
            "reasons": [reason.to_json() for reason in result.reasons] if result else [],
            "tokens": self.tokens.to_json(),
            "stopped_because": self.stopped_because,
            "unsupported_ops": self.unsupported_ops,
            "message": self.message,
            "notes": self.notes,
            "device": result.device if result else None,
            "warnings": result.warnings if result else [],
            "transcript": str(self.transcript) if self.transcript else None,
            "tuning": [row.to_json() for row in self.tuning],
            "best_attempt": self.best_attempt,
            # Achieved rates against the device's peaks (built-in table); null on the CPU
            # interpreter, whose timings say nothing about a device.
            "roofline": self._roofline_json(),
        }
        if self.backends:
            data["backends"] = [item.to_json() for item in self.backends]
            data["recommended"] = self.recommended
        safe: dict[str, Any] = _json_safe(data)
        return safe

    def _roofline_json(self) -> dict[str, Any] | None:
        timing = self.verification.timing if self.verification else None
        found = roofline(timing) if timing else None
        return found.to_json() if found else None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GenerateOutcome:
        """An outcome read back from `opbot generate --json` (the generation step's answer)."""
        verification = None
        if data.get("cases") or data.get("reasons") or data.get("perf"):
            verification = VerifyResult.from_json({
                "status": "passed" if data["status"] == "passed" else "failed",
                "reasons": data.get("reasons", []), "cases": data.get("cases", []),
                "device": data.get("device") or "unknown",
                "warnings": data.get("warnings", []), "timing": data.get("perf")})
        tokens = data.get("tokens") or {}
        return cls(op=str(data["op"]), status=data["status"], attempts=int(data["attempts"]),
                   backend=str(data["backend"]),
                   out=Path(data["out"]) if data.get("out") else None,
                   verification=verification,
                   unsupported_ops=list(data.get("unsupported_ops", [])),
                   message=str(data.get("message", "")),
                   stopped_because=str(data.get("stopped_because", "")),
                   tokens=TokenCount(prompt=int(tokens.get("prompt", 0)),
                                     completion=int(tokens.get("completion", 0)),
                                     estimated=bool(tokens.get("estimated"))),
                   notes=list(data.get("notes", [])),
                   transcript=Path(data["transcript"]) if data.get("transcript") else None,
                   tuning=[TuningRow.from_json(row) for row in data.get("tuning") or []],
                   best_attempt=data.get("best_attempt") if isinstance(
                       data.get("best_attempt"), int) else None,
                   backends=[cls.from_json(item) for item in data.get("backends") or []],
                   recommended=data.get("recommended"))
