"""Per-class repair rates from the trials, the printed table, and the floors they must keep."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.repair.mistakes import CLASSES
from benchmarks.repair.runner import Trial

FLOORS = Path(__file__).with_name("floors.json")


@dataclass(frozen=True)
class ClassRate:
    mistake: str
    title: str
    injected: int
    detected: int
    named: int
    repaired: int

    @property
    def rate(self) -> float:
        return self.repaired / self.injected if self.injected else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"mistake": self.mistake, "title": self.title, "injected": self.injected,
                "detected": self.detected, "named": self.named, "repaired": self.repaired,
                "rate": round(self.rate, 4)}


def rates(trials: Sequence[Trial]) -> list[ClassRate]:
    """One row per class that was injected, in catalogue order."""
    rows = []
    for mistake in CLASSES:
        mine = [trial for trial in trials if trial.mistake == mistake.key]
        if mine:
            rows.append(ClassRate(
                mistake=mistake.key, title=mistake.title, injected=len(mine),
                detected=sum(trial.detected for trial in mine),
                named=sum(trial.named for trial in mine),
                repaired=sum(trial.repaired for trial in mine)))
    return rows


def _row(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(cell.ljust(width) if index < 2 else cell.rjust(width)
                     for index, (cell, width) in enumerate(zip(cells, widths, strict=True)))


def render_table(rows: Sequence[ClassRate]) -> str:
    header = ("class", "mistake", "injected", "detected", "named", "repaired", "rate")
    body = [(row.mistake, row.title, str(row.injected), str(row.detected), str(row.named),
             str(row.repaired), f"{row.rate:.2f}") for row in rows]
    widths = [max(len(line[index]) for line in [header, *body]) for index in range(len(header))]
    lines = [_row(header, widths), "  ".join("-" * width for width in widths)]
    lines += [_row(line, widths) for line in body]
    return "\n".join(lines)


def _verdict(trial: Trial) -> str:
    if not trial.detected:
        return "UNDETECTED (every check passed)"
    if not trial.named:
        return f"detected by {trial.caught_by}, NOT NAMED"
    repaired = f"repaired ({trial.repair_stage})" if trial.repaired else "repair FAILED"
    return f"{trial.caught_by}; named by: {', '.join(trial.cues)}; {repaired}"


def render_trials(trials: Sequence[Trial]) -> str:
    return "\n".join(f"{trial.backend}/{trial.op:<11} {trial.mistake:<28} {trial.variant}: "
                     f"{_verdict(trial)}" for trial in trials)


def render_caveats(trials: Sequence[Trial]) -> str:
    """The caveat of each class that some injection got past every check."""
    missed = {trial.mistake for trial in trials if not trial.detected}
    return "\n".join(f"{mistake.key}: {mistake.caveat}" for mistake in CLASSES
                     if mistake.key in missed and mistake.caveat)


def load_floors(group: str) -> dict[str, float]:
    data = json.loads(FLOORS.read_text(encoding="utf-8"))
    return {str(key): float(value) for key, value in data[group].items()}


def below_floor(rows: Sequence[ClassRate], floors: dict[str, float]) -> list[str]:
    """Each class whose rate fell below its floor, said plainly; a class the floors do not
    list is a failure too (a new class needs a measured floor)."""
    problems = []
    for row in rows:
        floor = floors.get(row.mistake)
        if floor is None:
            problems.append(f"{row.mistake}: no floor in {FLOORS.name}")
        elif row.rate + 1e-9 < floor:
            problems.append(f"{row.mistake}: repair rate {row.rate:.2f} < floor {floor:.2f} "
                            f"({row.repaired}/{row.injected})")
    return problems
