"""What the scan reports (Finding), where it collects findings (one per check and line),
and the clock that stops it at its deadline.
"""

from __future__ import annotations

import ast
import time
from dataclasses import dataclass

from runners.anticheat.rules import CLOCK_EVERY, STATIC_CHECKS, StaticCheck
from runners.base import SourceLocation


@dataclass(frozen=True)
class Finding:
    """One thing the static check saw: which check, why, and where."""

    check: str
    message: str
    line: int
    source_line: str

    def location(self, file: str) -> SourceLocation:
        return SourceLocation(file=file, line=self.line, source_line=self.source_line)


class DeadlinePassed(Exception):
    """The scan ran past its deadline."""


class ScanClock:
    """Reads time.monotonic() once every CLOCK_EVERY ticks, and raises past the deadline."""

    def __init__(self, deadline: float | None) -> None:
        self.deadline = deadline
        self.ticks = 0

    def expired(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline

    def tick(self) -> None:
        if self.deadline is None:
            return
        self.ticks += 1
        if self.ticks >= CLOCK_EVERY:
            self.ticks = 0
            if time.monotonic() > self.deadline:
                raise DeadlinePassed




class FindingSink:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.found: dict[tuple[str, int], Finding] = {}

    def has(self, check: StaticCheck, node: ast.AST) -> bool:
        return (check, int(getattr(node, "lineno", 0) or 0)) in self.found

    def add(self, check: StaticCheck, node: ast.AST, message: str) -> None:
        self.add_line(check, int(getattr(node, "lineno", 0) or 0), message)

    def add_line(self, check: StaticCheck, line: int, message: str) -> None:
        if (check, line) in self.found:
            return
        text = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        self.found[(check, line)] = Finding(check, message, line, text[:200])

    def findings(self) -> list[Finding]:
        order: dict[str, int] = {check: index for index, check in enumerate(STATIC_CHECKS)}
        return sorted(self.found.values(), key=lambda f: (f.line, order.get(f.check, 0)))
