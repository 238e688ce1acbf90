"""`/metrics`: Prometheus text exposition (format 0.0.4), written out by hand.

Job counts, outcomes, dispatch retries and LLM spend come from the durable queue, so they
survive a restart; deliveries are counted in memory (since this process started). Labels
stay few and bounded: states, actions, outcomes, forges, workers, never a repository or
anything a delivery could make up.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from bot.forge.inbound import ACTIONS
from bot.queue import STATES

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OUTCOMES = ("ok", "failed", "refused", "cancelled", "dry_run")
DISPATCH_RETRIES, DISPATCH_GIVEN_UP, LLM_TOKENS = "dispatch_retries", "dispatch_given_up", \
    "llm_tokens"


class MetricsQueue(Protocol):
    def counts(self) -> dict[str, int]: ...
    def oldest_queued_created(self) -> float | None: ...
    def outcomes(self) -> list[tuple[str | None, str | None, int]]: ...
    def counter_values(self) -> dict[str, float]: ...
    def spent_total(self) -> float: ...


@dataclass
class Deliveries:
    """Webhook deliveries answered since start, by forge and outcome."""

    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, forge: str, outcome: str) -> None:
        with self._lock:
            self.counts[(forge, outcome)] += 1

    def snapshot(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return dict(self.counts)


class TokenMeter:
    """The spend ledger the server's jobs write to, counting tokens on the way: a job
    records money only (`policy.cost_usd(tokens)`), at the operator's price per million
    tokens, which a repository may not change; so tokens = usd / price."""

    def __init__(self, queue: SpendQueue, usd_per_million_tokens: float) -> None:
        self._queue = queue
        self._price = usd_per_million_tokens

    def spent_today(self, repo: str) -> float:
        return self._queue.spent_today(repo)

    def record(self, repo: str, usd: float) -> None:
        self._queue.record(repo, usd)
        if self._price > 0 and usd > 0:
            self._queue.bump(LLM_TOKENS, round(usd / self._price * 1_000_000))


class SpendQueue(Protocol):
    def spent_today(self, repo: str) -> float: ...
    def record(self, repo: str, usd: float) -> None: ...
    def bump(self, name: str, by: float = 1.0) -> None: ...


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


Sample = tuple[Mapping[str, str], float]


def family(name: str, kind: str, help_text: str, samples: Iterable[Sample]) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    for labels, value in samples:
        inner = ",".join(f'{key}="{_escape(text)}"' for key, text in labels.items())
        lines.append(f"{name}{{{inner}}} {_number(value)}" if inner
                     else f"{name} {_number(value)}")
    return lines


def _outcome_samples(rows: list[tuple[str | None, str | None, int]]) -> list[Sample]:
    """Unknown actions and outcomes (an old queue's rows) fold into `other`."""
    totals: Counter[tuple[str, str]] = Counter()
    for action, outcome, count in rows:
        totals[(action if action in ACTIONS else "other",
                outcome if outcome in OUTCOMES else "other")] += count
    return [({"action": action, "outcome": outcome}, count)
            for (action, outcome), count in sorted(totals.items())]


def render(queue: MetricsQueue, workers_up: Mapping[str, bool], deliveries: Deliveries,
           now: float | None = None) -> str:
    at = time.time() if now is None else now
    counts = queue.counts()
    oldest = queue.oldest_queued_created()
    counters = queue.counter_values()
    lines = family("opbot_queue_jobs", "gauge", "Jobs in the durable queue, by state.",
                   [({"state": state}, counts.get(state, 0))
                    for state in sorted({*STATES, *counts})])
    lines += family("opbot_queue_oldest_age_seconds", "gauge",
                    "Seconds the oldest queued job has waited (0: none queued).",
                    [({}, max(at - oldest, 0.0) if oldest is not None else 0)])
    lines += family("opbot_jobs_total", "counter",
                    "Finished jobs, by action and outcome (from the queue's records).",
                    _outcome_samples(queue.outcomes()))
    lines += family("opbot_dispatch_retries_total", "counter",
                    "Dispatches to CI put back in the queue for another try.",
                    [({}, counters.get(DISPATCH_RETRIES, 0))])
    lines += family("opbot_dispatch_given_up_total", "counter",
                    "Jobs whose dispatch to CI was given up.",
                    [({}, counters.get(DISPATCH_GIVEN_UP, 0))])
    lines += family("opbot_llm_tokens_total", "counter",
                    "LLM tokens spent by jobs run by this server.",
                    [({}, counters.get(LLM_TOKENS, 0))])
    lines += family("opbot_llm_cost_usd_total", "counter",
                    "LLM spend in US dollars recorded in the spend ledger.",
                    [({}, queue.spent_total())])
    lines += family("opbot_worker_up", "gauge", "1 while the worker thread is alive.",
                    [({"worker": name}, 1 if up else 0) for name, up in workers_up.items()])
    lines += family("opbot_deliveries_total", "counter",
                    "Webhook deliveries answered since this process started, by outcome.",
                    [({"forge": forge, "outcome": outcome}, count) for (forge, outcome), count
                     in sorted(deliveries.snapshot().items())])
    return "\n".join(lines) + "\n"
