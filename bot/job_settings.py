"""What every job handler shares: its settings, its spending ledger and its outcome.

Apart from bot/jobs.py so that the handlers it dispatches to (the nightly scan) can name
them without importing the dispatcher.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.policy import Policy, default_policy


class SpendLedger(Protocol):
    """Money spent per repository per day (the server keeps it in its queue database)."""

    def spent_today(self, repo: str) -> float: ...
    def record(self, repo: str, usd: float) -> None: ...


class NoLedger:
    """Actions mode keeps no state between runs: the daily cap is not enforced there."""

    def spent_today(self, repo: str) -> float:
        return 0.0

    def record(self, repo: str, usd: float) -> None:
        return None


class JobControl(Protocol):
    """Steering other jobs (/cancel): the server's queue; Actions mode has none."""

    def cancel(self, key: str) -> int:
        """Drop the queued jobs of `key`, ask its running one to stop; how many."""
        ...


class NoJobControl:
    """Actions mode: each event is its own workflow run, cancelled from the Actions UI."""

    def cancel(self, key: str) -> int:
        return 0


def _never() -> bool:
    return False


@dataclass(frozen=True)
class JobSettings:
    bot_login: str | None = None
    allowed_repos: tuple[str, ...] | None = None  # None: any repository (one-repo Actions use)
    llm_enabled: bool = False  # an OpenAI-compatible endpoint and a model are configured
    log: Callable[[str], None] = lambda message: None
    dashboard_issue: int | None = None
    ledger: SpendLedger = field(default_factory=NoLedger)
    policy: Policy = field(default_factory=default_policy)
    jobs: JobControl = field(default_factory=NoJobControl)
    stopped: Callable[[], bool] = _never  # /cancel asked this job to stop

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None,
                         ledger: SpendLedger | None = None) -> JobSettings:
        from bot.agent.llm import llm_configured

        env = os.environ if environ is None else environ
        allowed = env.get("OPBOT_ALLOWED_REPOS")
        dashboard = env.get("OPBOT_DASHBOARD_ISSUE", "").strip()
        if dashboard and not (dashboard.isascii() and dashboard.isdigit()
                              and int(dashboard) > 0):
            from bot.errors import BadInputError

            raise BadInputError(f"OPBOT_DASHBOARD_ISSUE={dashboard[:40]!r} is not an issue "
                                "number (leave it empty and the scan keeps its own issue)")
        return cls(bot_login=env.get("OPBOT_BOT_LOGIN") or None,
                   allowed_repos=tuple(item.strip() for item in allowed.split(",")
                                       if item.strip()) if allowed else None,
                   llm_enabled=llm_configured(None, env) and bool(env.get("OPBOT_LLM_MODEL")),
                   dashboard_issue=int(dashboard) if dashboard else None,
                   ledger=ledger or NoLedger())


@dataclass(frozen=True)
class JobOutcome:
    ok: bool
    action: str
    summary: str
    pull_request: int | None = None
    url: str | None = None
    report: dict[str, Any] | None = None  # the nightly scan's `toolchain` and `ops`

    def to_json(self) -> dict[str, Any]:
        data = {"ok": self.ok, "action": self.action, "summary": self.summary,
                "pull_request": self.pull_request, "url": self.url}
        return {**data, **self.report} if self.report else data
