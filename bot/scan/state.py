"""What the nightly scan remembers between nights, kept where Renovate keeps its own: in
the dashboard (a marker in the bot's comment, bot/publish.py `marker`).

Per operator x backend, the last verdict under each toolchain (the newest few); the
toolchain of the last run; per operator, the pull request the scan opened and for which
toolchain. The marker sits in a comment people with write access can edit (to tick a box),
so it is read as untrusted data: anything malformed is dropped, sizes are bounded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from bot.publish import marker, read_marker
from bot.scan.toolchain import ToolchainRecord

STATE_KIND = "opbot-scan-state"
TOOLCHAINS_KEPT = 4  # verdicts kept per operator x backend: the newest toolchains
_REASON_LIMIT = 300
_ENTRIES_LIMIT = 2_000  # what a comment's 65536 characters can hold, and more
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_URL = re.compile(r"https?://[\w.:-]+/[\w./%~+-]{1,300}")  # no spaces, quotes, brackets


@dataclass(frozen=True)
class Verdict:
    status: str
    reason: str = ""
    breakage: str | None = None
    date: str = ""  # the day it was reached (YYYY-MM-DD): a rerun that day changes nothing
    kernel_ms: float | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"status": self.status, "date": self.date}
        if self.reason:
            data["reason"] = self.reason
        if self.breakage:
            data["breakage"] = self.breakage
        if self.kernel_ms is not None:
            data["kernel_ms"] = self.kernel_ms
        return data

    @classmethod
    def from_json(cls, data: Any) -> Verdict | None:
        if not isinstance(data, dict) or not isinstance(data.get("status"), str):
            return None
        ms = data.get("kernel_ms")
        breakage = data.get("breakage")
        return cls(status=data["status"][:20], reason=_text(data.get("reason")),
                   breakage=breakage[:20] if isinstance(breakage, str) else None,
                   date=_date(data.get("date")),
                   kernel_ms=float(ms) if isinstance(ms, (int, float)) and ms > 0 else None)


@dataclass(frozen=True)
class PullRecord:
    """A pull request the scan opened (or updated) for an operator, and for which toolchain."""

    number: int
    toolchain: str
    url: str = ""  # how to link it: "#9" means an issue on GitLab, where MRs are "!9"

    def to_json(self) -> dict[str, Any]:
        return {"number": self.number, "toolchain": self.toolchain, "url": self.url}

    @classmethod
    def from_json(cls, data: Any) -> PullRecord | None:
        if not isinstance(data, dict):
            return None
        number, toolchain, url = data.get("number"), data.get("toolchain"), data.get("url")
        if not isinstance(number, int) or number <= 0 or not isinstance(toolchain, str):
            return None
        return cls(number, toolchain[:500], url if isinstance(url, str) and plain_url(url)
                   else "")

    def link(self) -> str:
        return f"[#{self.number}]({self.url})" if self.url else f"#{self.number}"


@dataclass
class ScanState:
    toolchain: ToolchainRecord | None = None  # the last run's
    # "op/backend" -> toolchain key -> verdict, oldest toolchain first
    verdicts: dict[str, dict[str, Verdict]] = field(default_factory=dict)
    pulls: dict[str, PullRecord] = field(default_factory=dict)  # op -> its scan PR
    # What changed when the last run's toolchain arrived, and the day it did.
    changes: list[str] = field(default_factory=list)
    since: str = ""
    problem: str | None = None  # why the recorded state could not be read

    def arrive(self, toolchain: ToolchainRecord, date: str) -> None:
        """Tonight's toolchain: a new one records what changed and since when; the same
        one keeps them (a rerun writes the same state)."""
        if self.toolchain is not None and self.toolchain.key() == toolchain.key() \
                and self.since:
            return
        self.changes = toolchain.changes_from(self.toolchain) if self.toolchain else []
        self.toolchain, self.since = toolchain, date

    def record(self, key: str, toolchain: str, verdict: Verdict) -> None:
        history = self.verdicts.setdefault(key, {})
        history.pop(toolchain, None)  # the newest last
        history[toolchain] = verdict
        for old in list(history)[:-TOOLCHAINS_KEPT]:
            del history[old]

    def prune(self, ops: set[str], keep_pulls: set[str]) -> None:
        """Forget operators no longer in the repository, and pull requests of those not
        in `keep_pulls`."""
        for key in [key for key in self.verdicts if key.split("/", 1)[0] not in ops]:
            del self.verdicts[key]
        for op in [op for op in self.pulls if op not in keep_pulls]:
            del self.pulls[op]

    def fit(self, limit: int) -> None:
        """Make the marker at most `limit` characters: first older toolchains go, then the
        words of verdicts, then every toolchain but the newest (the dashboard must never
        cut its own state in half: a state it cannot read again forgets declines)."""
        for step in (self._keep_toolchains(2), self._short_reasons, self._keep_toolchains(1)):
            if len(self.marker()) <= limit:
                return
            step()
        # A giant repository: passing operators' verdicts go first, the last ones first.
        order = sorted(self.verdicts, key=lambda key: (
            next(reversed(self.verdicts[key].values())).status != "passed", key), reverse=True)
        while order and ((excess := len(self.marker()) - limit) > 0
                         or len(self.verdicts) > _ENTRIES_LIMIT):
            removed = 0  # in batches: writing the marker after each one would be slow
            while order and (removed < excess or len(self.verdicts) > _ENTRIES_LIMIT):
                key = order.pop()
                history = self.verdicts.pop(key)
                removed += len(key) + len(json.dumps([item.to_json() for item in
                                                      history.values()])) + 8

    def _keep_toolchains(self, count: int) -> Callable[[], None]:
        def keep() -> None:
            for history in self.verdicts.values():
                for old in list(history)[:-count]:
                    del history[old]
        return keep

    def _short_reasons(self) -> None:
        for history in self.verdicts.values():
            for toolchain, verdict in history.items():
                words = "" if verdict.status == "passed" else verdict.reason[:60]
                history[toolchain] = replace(verdict, reason=words)

    def under(self, key: str, toolchain: str) -> Verdict | None:
        return self.verdicts.get(key, {}).get(toolchain)

    def last_passed(self, key: str, except_toolchain: str | None = None,
                    ) -> tuple[str, Verdict] | None:
        """The newest passing verdict (and its toolchain), outside `except_toolchain`."""
        for toolchain, verdict in reversed(self.verdicts.get(key, {}).items()):
            if verdict.status == "passed" and toolchain != except_toolchain:
                return toolchain, verdict
        return None

    def recorded_ms(self, key: str) -> float | None:
        """The kernel's newest recorded device time."""
        for verdict in reversed(self.verdicts.get(key, {}).values()):
            if verdict.kernel_ms is not None:
                return verdict.kernel_ms
        return None

    def toolchains(self) -> list[str]:
        """Every toolchain some verdict is recorded under, newest first."""
        seen: list[str] = []
        for history in self.verdicts.values():
            for toolchain in reversed(history):
                if toolchain not in seen:
                    seen.append(toolchain)
        newest = self.toolchain.key() if self.toolchain else None
        return sorted(seen, key=lambda item: item != newest)

    def to_json(self) -> dict[str, Any]:
        names = list(dict.fromkeys(toolchain for history in self.verdicts.values()
                                   for toolchain in history))
        return {"kind": STATE_KIND,
                "toolchain": self.toolchain.to_json() if self.toolchain else None,
                # Each toolchain written once, verdicts naming it by index; lists oldest
                # first (the marker's JSON sorts object keys, which would lose the order).
                "toolchains": names,
                "verdicts": {key: [{"t": names.index(toolchain), **verdict.to_json()}
                                   for toolchain, verdict in history.items()]
                             for key, history in sorted(self.verdicts.items())},
                "pulls": {op: pull.to_json() for op, pull in sorted(self.pulls.items())},
                "changes": self.changes, "since": self.since}

    def marker(self) -> str:
        return marker(self.to_json())

    @classmethod
    def from_comment(cls, body: str | None) -> ScanState:
        """The state a dashboard comment holds; an empty one (with the problem named)
        when it holds none or something malformed."""
        if not body:
            return cls()
        data = read_marker(body)
        if data is None or data.get("kind") != STATE_KIND:
            return cls(problem="the dashboard held no readable scan state: starting afresh")
        state = cls(toolchain=ToolchainRecord.from_json(data.get("toolchain"))
                    if data.get("toolchain") is not None else None)
        names = data.get("toolchains")
        names = [name[:500] for name in names[:_ENTRIES_LIMIT] if isinstance(name, str)] \
            if isinstance(names, list) else []
        verdicts = data.get("verdicts")
        for key, history in list(verdicts.items())[:_ENTRIES_LIMIT] \
                if isinstance(verdicts, dict) else []:
            if not isinstance(key, str) or not isinstance(history, list):
                continue
            for raw in history[-TOOLCHAINS_KEPT:]:
                verdict = Verdict.from_json(raw)
                index = raw.get("t") if isinstance(raw, dict) else None
                if isinstance(index, int) and 0 <= index < len(names) and verdict is not None:
                    state.record(key[:200], names[index], verdict)
        changes = data.get("changes")
        state.changes = [item[:300] for item in changes[:20] if isinstance(item, str)] \
            if isinstance(changes, list) else []
        state.since = _date(data.get("since"))
        pulls = data.get("pulls")
        for op, raw in list(pulls.items())[:_ENTRIES_LIMIT] if isinstance(pulls, dict) else []:
            pull = PullRecord.from_json(raw)
            if isinstance(op, str) and pull is not None:
                state.pulls[op[:200]] = pull
        return state


def plain_url(url: str) -> bool:
    """A web address with nothing markdown could read as more than an address."""
    return _URL.fullmatch(url) is not None


def _date(value: Any) -> str:
    return value if isinstance(value, str) and _DATE.fullmatch(value) else ""


def _text(value: Any) -> str:
    return value[:_REASON_LIMIT] if isinstance(value, str) else ""
