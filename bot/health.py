"""Is `opbot serve` doing its work? The workers' liveness and the queue's progress.

Each worker thread keeps a `Heartbeat`: beaten on every pass of its loop, and marked with
the job it is running. `/healthz` turns that and the queue into a verdict. The server is
unhealthy when a worker thread is dead (a BaseException got out of it), idle but no longer
looping, running one job for longer than any job may take (twice the policy's
`budgets.wall_seconds`), or when the queue is stuck: a job its worker could claim has
waited over `stuck_after_s` while that worker, neither busy nor dead, claimed nothing. A
long job is not a stuck queue: other ops' jobs wait behind it by design.
Heartbeat times are monotonic (a wall-clock jump must not make a healthy job look overrun);
the queue's times are wall-clock, and are compared with the wall clock only.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

STUCK_AFTER_VARIABLE = "OPBOT_STUCK_AFTER_S"
STUCK_AFTER_S = 15 * 60.0
# An idle worker loops twice a second; a minute without a pass is a hung one.
SILENT_AFTER_S = 60.0
WORKER_NAMES = ("main", "control")


def stuck_after_from_environment(environ: Mapping[str, str] | None = None) -> float:
    """Seconds a claimable job may wait unclaimed: OPBOT_STUCK_AFTER_S, else 15 minutes."""
    text = (os.environ if environ is None else environ).get(STUCK_AFTER_VARIABLE, "")
    try:
        seconds = float(text) if text else STUCK_AFTER_S
    except ValueError:
        return STUCK_AFTER_S
    return seconds if 0 < seconds < float("inf") else STUCK_AFTER_S


@dataclass
class Heartbeat:
    """One worker thread's signs of life, written by the worker, read by /healthz."""

    name: str  # "main" or "control"
    clock: Callable[[], float] = time.monotonic  # heartbeats are only compared to each other
    thread: threading.Thread | None = None  # None: no worker runs in this process
    beat: float = 0.0  # the last pass of its loop
    last_claim: float = 0.0  # the last claim, or the worker's start
    job: int | None = None
    job_since: float = 0.0
    died: str | None = None  # what ended the thread, if something did
    failing: str | None = None  # why its last pass could not use the queue (it retries)
    failing_since: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def started(self, thread: threading.Thread) -> None:
        now = self.clock()
        with self._lock:
            self.thread, self.beat, self.last_claim = thread, now, now

    def alive(self) -> None:
        with self._lock:
            self.beat = self.clock()

    def running(self, job: int | None) -> None:
        now = self.clock()
        with self._lock:
            self.job, self.beat = job, now
            if job is not None:
                self.job_since = self.last_claim = now

    def queue_failed(self, reason: str) -> None:
        now = self.clock()
        with self._lock:
            if self.failing is None:
                self.failing_since = now
            self.failing = reason

    def queue_ok(self) -> None:
        with self._lock:
            self.failing = None

    def dead(self, reason: str) -> None:
        with self._lock:
            self.died = reason

    @property
    def up(self) -> bool:
        return self.thread is not None and self.thread.is_alive()


class QueueView(Protocol):
    """What the verdict reads from the queue."""

    def counts(self) -> dict[str, int]: ...
    def oldest_claimable_since(self, control: bool = False) -> float | None: ...


@dataclass(frozen=True)
class Limits:
    stuck_after_s: float = STUCK_AFTER_S
    running_limit_s: float = 3600.0  # twice the policy's budgets.wall_seconds


@dataclass(frozen=True)
class Verdict:
    healthy: bool
    reasons: tuple[str, ...]
    jobs: dict[str, int]
    workers: dict[str, str]


def verdict(queue: QueueView, beats: Mapping[str, Heartbeat], limits: Limits,
            now: float | None = None, wall_now: float | None = None) -> Verdict:
    """The server's health. Workers that were never started (a server without workers,
    as in some tests) are neither judged nor counted up. `now`: the heartbeats' clock
    (else each beat's own); `wall_now`: the wall clock, for the queue's times."""
    wall = time.time() if wall_now is None else wall_now
    reasons: list[str] = []
    states: dict[str, str] = {}
    for name, beat in beats.items():
        if beat.thread is None:
            states[name] = "not started"
            continue
        at = beat.clock() if now is None else now
        problem = _worker_problem(beat, at, limits) or _stuck_queue(
            queue, beat, name == "control", (at, wall), limits)
        states[name] = "up" if problem is None else "unhealthy"
        if problem is not None:
            reasons.append(problem)
    return Verdict(not reasons, tuple(reasons), queue.counts(), states)


def _worker_problem(beat: Heartbeat, now: float, limits: Limits) -> str | None:
    if not beat.up:
        return f"the {beat.name} worker is dead" + (f" ({beat.died})" if beat.died else "")
    if beat.failing is not None and now - beat.failing_since > limits.stuck_after_s:
        # Alive and retrying, but a queue locked this long is an operator's to look at.
        return (f"the {beat.name} worker has not been able to use the queue for "
                f"{now - beat.failing_since:.0f} s ({beat.failing}); it keeps trying")
    if beat.job is not None:
        took = now - beat.job_since
        if took > limits.running_limit_s:
            return (f"the {beat.name} worker has been running job {beat.job} for {took:.0f} s "
                    f"(over {limits.running_limit_s:g} s, twice budgets.wall_seconds)")
        return None
    silent = now - beat.beat
    if silent > SILENT_AFTER_S:
        return f"the {beat.name} worker has not looped for {silent:.0f} s"
    return None


def _stuck_queue(queue: QueueView, beat: Heartbeat, control: bool,
                 now: tuple[float, float], limits: Limits) -> str | None:
    """`now`: (the heartbeat clock, the wall clock)."""
    if beat.job is not None:  # busy within its limit: the jobs behind it wait by design
        return None
    since = queue.oldest_claimable_since(control)
    if since is None:
        return None
    beat_now, wall_now = now
    waited, idle = wall_now - since, beat_now - beat.last_claim
    if waited > limits.stuck_after_s and idle > limits.stuck_after_s:
        return (f"the queue is stuck: a job has waited {waited:.0f} s for the {beat.name} "
                f"worker, which claimed nothing for {idle:.0f} s (limit "
                f"{limits.stuck_after_s:g} s, {STUCK_AFTER_VARIABLE})")
    return None
