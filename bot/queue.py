"""A durable local job queue (SQLite): deliveries seen, jobs queued, one job per op at once.

Jobs survive a restart: a job that was running when the server died is queued again (up
to a limit). Redeliveries are recognised by their delivery id, atomically, so two copies
of one delivery arriving together still make one job. Deliveries that name the same
request (an issue form's `opened` and `labeled`, the N comments of one review, the
check suite and the workflow run of one CI failure) coalesce into one job by the
request's id (`RequestKey`); a job may wait a moment for the rest of a burst (`settle_s`).
A job put back for a later try (`retry`) waits until its time, and holds back the later
jobs of its key meanwhile, so one operator's jobs keep their order.
Deliveries are remembered for a week and finished jobs kept for a month (`prune`, which the
server's main worker runs hourly); /metrics' totals live in `counters` and never go down.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_RUNS = 3  # a job that kills its worker this many times is given up
CONTROL_PREFIX = "control:"  # keys of jobs that steer other jobs (/cancel)
STATES = ("queued", "running", "done", "failed", "cancelled")
DEFAULT_STATE_DIR = Path(".opbot-state")  # `opbot serve` and `opbot queue` agree on it
# How long a write waits for another connection's lock (an operator's sqlite3 shell, a
# backup) before it fails: long enough that a short hold never reaches the worker.
BUSY_TIMEOUT_S = 30.0
# Retention: a redelivery is recognised for a week (GitHub redelivers for 3 days); a
# finished job is listed for a month. Counters (/metrics) live in `counters`, not in rows.
DELIVERY_RETENTION_S = 7 * 86400.0
JOB_RETENTION_S = 30 * 86400.0
FINISHED = ("done", "failed", "cancelled")


def queue_path(state_dir: Path) -> Path:
    """The queue's database in a state folder (`--state-dir`)."""
    return state_dir / "queue.sqlite3"


def _today() -> str:
    return time.strftime("%Y-%m-%d", time.gmtime())

_SCHEMA = """
CREATE TABLE IF NOT EXISTS deliveries (
    id TEXT PRIMARY KEY,
    received REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL,
    plan TEXT NOT NULL,
    status TEXT NOT NULL,            -- queued | running | done | failed | cancelled
    runs INTEGER NOT NULL DEFAULT 0,
    result TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    not_before REAL NOT NULL DEFAULT 0,  -- a retried job is not claimed before this time
    request TEXT,                    -- what the job changes (see RequestKey); NULL: unique
    cancel INTEGER NOT NULL DEFAULT 0  -- /cancel asked a running job to stop
);
CREATE INDEX IF NOT EXISTS jobs_status ON jobs (status, id);
CREATE INDEX IF NOT EXISTS deliveries_received ON deliveries (received);
CREATE TABLE IF NOT EXISTS spend (
    repo TEXT NOT NULL,
    day TEXT NOT NULL,               -- UTC date
    usd REAL NOT NULL,
    PRIMARY KEY (repo, day)
);
CREATE TABLE IF NOT EXISTS counters (  -- monotonic totals no job row keeps (dispatch retries)
    name TEXT PRIMARY KEY,
    value REAL NOT NULL
);
-- Every time a job ends (done, failed, cancelled, however it got there), one more for its
-- (action, outcome): a counter that a requeued or dropped job cannot take back, as
-- Prometheus counters must never go down.
CREATE TRIGGER IF NOT EXISTS count_finished_jobs AFTER UPDATE OF status ON jobs
WHEN NEW.status IN ('done', 'failed', 'cancelled')
     AND OLD.status NOT IN ('done', 'failed', 'cancelled')
BEGIN
    INSERT INTO counters (name, value) VALUES (
        'jobs_total|'
        || COALESCE(CASE WHEN json_valid(NEW.plan) THEN json_extract(NEW.plan, '$.action') END,
                    '')
        || '|'
        || CASE WHEN NEW.status = 'cancelled' THEN 'cancelled'
                WHEN NOT json_valid(NEW.result)
                    THEN CASE NEW.status WHEN 'done' THEN 'ok' ELSE 'failed' END
                WHEN json_extract(NEW.result, '$.outcome') IS NOT NULL
                    THEN json_extract(NEW.result, '$.outcome')
                WHEN json_extract(NEW.result, '$.summary') LIKE 'refused:%' THEN 'refused'
                WHEN json_extract(NEW.result, '$.summary') = 'cancelled' THEN 'cancelled'
                WHEN json_extract(NEW.result, '$.dry_run') THEN 'dry_run'
                WHEN NEW.status = 'done' THEN 'ok' ELSE 'failed' END,
        1)
    ON CONFLICT (name) DO UPDATE SET value = value + 1;
END;
"""
_FINISHED_PREFIX = "jobs_total|"
# claim() walks the active jobs key by key (a skip-scan over `jobs_active`, one probe per
# op), so 100k jobs queued behind one running job cost microseconds, not a scan of them all
# under the queue lock. INDEXED BY: the planner would otherwise pick `jobs_status`.
_ACTIVE = "status IN ('queued', 'running')"
_INDEXES = f"""
CREATE INDEX IF NOT EXISTS jobs_active ON jobs (key, id) WHERE {_ACTIVE};
CREATE INDEX IF NOT EXISTS jobs_key_status ON jobs (key, status);
"""
_CLAIMABLE = (
    "WITH RECURSIVE keys(k) AS ("  # noqa: S608 - constants only
    f"SELECT MIN(key) FROM jobs INDEXED BY jobs_active WHERE {_ACTIVE} "
    f"UNION ALL SELECT (SELECT MIN(key) FROM jobs INDEXED BY jobs_active WHERE {_ACTIVE} "
    "AND key > k) FROM keys WHERE k IS NOT NULL) "
    "SELECT {columns} FROM keys JOIN jobs AS queued ON queued.id = (SELECT id FROM jobs "
    f"INDEXED BY jobs_active WHERE {_ACTIVE} AND key = k ORDER BY id LIMIT 1) "
    "WHERE k IS NOT NULL AND queued.status = 'queued' AND queued.not_before <= ? "
    "AND (substr(queued.key, 1, ?) = ?) = ? AND NOT EXISTS (SELECT 1 FROM jobs AS busy "
    "INDEXED BY jobs_key_status WHERE busy.key = queued.key AND busy.status = 'running') "
    "{tail}")


class NotAQueueError(Exception):
    """A file that is no opbot queue (empty, corrupt, something else's database)."""


@dataclass(frozen=True)
class RequestKey:
    """What a job changes: a new delivery for the same request joins an earlier job of it,
    if that job's status is in `joins` and it was created within `within_s` seconds."""

    id: str
    joins: tuple[str, ...] = ("queued",)
    within_s: float = float("inf")
    settle_s: float = 0.0  # wait this long for the rest of a burst (each join restarts it)


@dataclass(frozen=True)
class Submitted:
    job: int
    coalesced: bool  # True: an earlier job of the same request absorbed this delivery


@dataclass(frozen=True)
class QueuedJob:
    id: int
    key: str
    plan: dict[str, Any]
    runs: int


@dataclass(frozen=True)
class JobRow:
    """One job as an operator lists it (`opbot queue list`)."""

    id: int
    key: str
    plan: dict[str, Any]
    status: str
    runs: int
    result: dict[str, Any] | None
    created: float
    updated: float
    not_before: float
    cancel: bool


class JobStateError(Exception):
    """An operator's request names no job, or a job in a state it cannot apply to."""


@dataclass(frozen=True)
class JobRecord:
    """Where a job stands: its status, how often it was claimed, its last result."""

    status: str
    runs: int
    result: dict[str, Any] | None


def _result(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # recover() writes its reason as plain text
        return {"error": text[:1000]}
    return value if isinstance(value, dict) else {"error": text}


def check_queue_file(path: Path) -> None:
    """NotAQueueError unless `path` holds an opbot queue; read-only (never writes, never
    creates): `opbot queue` must not turn a stray file into a queue."""
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise NotAQueueError(f"cannot open {path}: {exc}") from None
    try:
        columns = {row[1] for row in db.execute("PRAGMA table_info(jobs)")}
    except sqlite3.DatabaseError as exc:
        raise NotAQueueError(f"{path} is not an opbot queue, or cannot be read ({exc})"
                             ) from None
    finally:
        db.close()
    if not {"id", "key", "plan", "status"} <= columns:
        raise NotAQueueError(f"{path} is not an opbot queue (it has no jobs table)")


class JobQueue:
    def __init__(self, path: Path, busy_timeout_s: float = BUSY_TIMEOUT_S,
                 read_only: bool = False) -> None:
        self._lock = threading.Lock()
        if read_only:  # `opbot queue list`: reads as the file is, writes nothing
            check_queue_file(path)
            self._db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True,
                                       timeout=busy_timeout_s, check_same_thread=False,
                                       isolation_level=None)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), timeout=busy_timeout_s,
                                   check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)
        self._migrate()

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """BEGIN IMMEDIATE ... COMMIT, rolled back on any error; the caller holds _lock.
        BEGIN is outside the try: when it fails (the file is locked) there is nothing to
        roll back, and a failed ROLLBACK must not hide the real error."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def _migrate(self) -> None:
        """Queues written before retries existed lack `not_before`; their jobs are due."""
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(jobs)")}
        if "not_before" not in columns:
            self._db.execute("ALTER TABLE jobs ADD COLUMN not_before REAL NOT NULL DEFAULT 0")
        if "request" not in columns:
            self._db.execute("ALTER TABLE jobs ADD COLUMN request TEXT")
        if "cancel" not in columns:
            self._db.execute("ALTER TABLE jobs ADD COLUMN cancel INTEGER NOT NULL DEFAULT 0")
        self._db.execute("CREATE INDEX IF NOT EXISTS jobs_request ON jobs (request, id)")
        self._db.executescript(_INDEXES)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def first_delivery(self, delivery_id: str) -> bool:
        """True the first time a delivery id is seen; False for a redelivery."""
        with self._lock:
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO deliveries (id, received) VALUES (?, ?)",
                (delivery_id, time.time()))
            return cursor.rowcount == 1

    def forget_delivery(self, delivery_id: str) -> None:
        """A delivery that could not be taken in: its redelivery must be read again."""
        with self._lock:
            self._db.execute("DELETE FROM deliveries WHERE id = ?", (delivery_id,))

    def enqueue(self, key: str, plan: dict[str, Any]) -> int:
        return self.submit(key, plan).job

    def submit(self, key: str, plan: dict[str, Any], request: RequestKey | None = None,
               ) -> Submitted:
        """Queue a job, unless an earlier job of the same request absorbs it (atomically:
        two deliveries of one request arriving together still make one job)."""
        now = time.time()
        with self._lock, self._transaction():
            joined = self._join(request, now) if request is not None else None
            if joined is not None:
                return Submitted(joined, True)
            settle = request.settle_s if request is not None else 0.0
            cursor = self._db.execute(
                "INSERT INTO jobs (key, plan, status, created, updated, not_before, "
                "request) VALUES (?, ?, 'queued', ?, ?, ?, ?)",
                (key, json.dumps(plan), now, now, now + settle,
                 request.id if request is not None else None))
        return Submitted(int(cursor.lastrowid or 0), False)

    def _join(self, request: RequestKey, now: float) -> int | None:
        marks = ",".join("?" for _ in request.joins)
        row = self._db.execute(
            "SELECT id, status, created FROM jobs WHERE request = ? AND status IN "  # noqa: S608
            f"({marks}) AND created >= ? ORDER BY id DESC LIMIT 1",
            (request.id, *request.joins, now - request.within_s
             if request.within_s != float("inf") else 0.0)).fetchone()
        if row is None:
            return None
        if row[1] == "queued" and request.settle_s > 0:
            # A burst goes on: wait for its end again, but never past a few settle times.
            due = min(now + request.settle_s, row[2] + 4 * request.settle_s)
            self._db.execute("UPDATE jobs SET not_before = MAX(not_before, ?), updated = ? "
                             "WHERE id = ?", (due, now, row[0]))
        return int(row[0])

    def cancel(self, key: str) -> int:
        """/cancel: queued jobs of `key` are cancelled, a running one is asked to stop.
        How many jobs it touched."""
        now = time.time()
        with self._lock:
            queued = self._db.execute("UPDATE jobs SET status = 'cancelled', updated = ?, "
                                      "result = '{\"cancelled\": true}' WHERE key = ? AND "
                                      "status = 'queued'", (now, key)).rowcount
            running = self._db.execute("UPDATE jobs SET cancel = 1, updated = ? WHERE key = ? "
                                       "AND status = 'running'", (now, key)).rowcount
        return int(queued) + int(running)

    def cancel_requested(self, job_id: int) -> bool:
        with self._lock:
            row = self._db.execute("SELECT cancel FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return bool(row and row[0])

    def recover(self) -> int:
        """After a restart: jobs left running go back to the queue (or fail past MAX_RUNS)."""
        now = time.time()
        with self._lock:
            self._db.execute("UPDATE jobs SET status = 'failed', updated = ?, result = "
                             "'gave up: the worker died on every run' WHERE status = 'running' "
                             "AND runs >= ?", (now, MAX_RUNS))
            cursor = self._db.execute("UPDATE jobs SET status = 'queued', updated = ? "
                                      "WHERE status = 'running'", (now,))
            return cursor.rowcount

    def claim(self, control: bool = False) -> QueuedJob | None:
        """The oldest due queued job whose op has no job running and no older job waiting;
        marked running. `control`: only jobs keyed CONTROL_PREFIX (/cancel, which must run
        beside the job it stops), else only the others."""
        with self._lock, self._transaction():
            row = self._db.execute(
                _CLAIMABLE.format(columns="queued.id, queued.key, queued.plan, queued.runs",
                                  tail="ORDER BY queued.id LIMIT 1"),
                (time.time(), len(CONTROL_PREFIX), CONTROL_PREFIX, control)).fetchone()
            if row is None:
                return None
            self._db.execute("UPDATE jobs SET status = 'running', runs = runs + 1, "
                             "updated = ? WHERE id = ?", (time.time(), row[0]))
        return QueuedJob(id=row[0], key=row[1], plan=json.loads(row[2]), runs=row[3] + 1)

    def finish(self, job_id: int, ok: bool, result: dict[str, Any]) -> None:
        with self._lock:
            self._db.execute("UPDATE jobs SET status = ?, result = ?, updated = ? WHERE id = ?",
                             ("done" if ok else "failed", json.dumps(result), time.time(),
                              job_id))

    def finish_cancelled(self, job_id: int, result: dict[str, Any]) -> None:
        """A running job that was asked to stop (/cancel, `opbot queue drop`) before it
        did its work."""
        with self._lock:
            self._db.execute("UPDATE jobs SET status = 'cancelled', result = ?, updated = ? "
                             "WHERE id = ?", (json.dumps(result), time.time(), job_id))

    def abandon(self, job_id: int, result: dict[str, Any]) -> bool:
        """Fail a job left running after its worker could not record its end (the queue
        was locked); a job whose end was recorded after all is left alone. True: failed."""
        with self._lock:
            cursor = self._db.execute("UPDATE jobs SET status = 'failed', result = ?, "
                                      "updated = ? WHERE id = ? AND status = 'running'",
                                      (json.dumps(result), time.time(), job_id))
        return cursor.rowcount == 1

    def prune(self, now: float | None = None,
              delivery_retention_s: float = DELIVERY_RETENTION_S,
              job_retention_s: float = JOB_RETENTION_S) -> tuple[int, int]:
        """Forget deliveries and finished jobs past their retention: (deliveries, jobs).
        /metrics loses nothing: a job was counted in `counters` when it finished (the
        trigger counts updates, and a DELETE is none)."""
        at = time.time() if now is None else now
        marks = ",".join("?" for _ in FINISHED)
        with self._lock, self._transaction():
            deliveries = self._db.execute("DELETE FROM deliveries WHERE received < ?",
                                          (at - delivery_retention_s,)).rowcount
            jobs = self._db.execute(
                f"DELETE FROM jobs WHERE status IN ({marks}) AND updated < ?",  # noqa: S608
                (*FINISHED, at - job_retention_s)).rowcount
        return int(deliveries), int(jobs)

    def retry(self, job_id: int, delay_s: float, result: dict[str, Any]) -> None:
        """Back to the queue, due in `delay_s` seconds; `result` says why it waits."""
        now = time.time()
        with self._lock:
            self._db.execute("UPDATE jobs SET status = 'queued', result = ?, updated = ?, "
                             "not_before = ? WHERE id = ?",
                             (json.dumps(result), now, now + max(delay_s, 0.0), job_id))

    def record_of(self, job_id: int) -> JobRecord:
        with self._lock:
            row = self._db.execute("SELECT status, runs, result FROM jobs WHERE id = ?",
                                   (job_id,)).fetchone()
        if row is None:
            raise KeyError(job_id)
        return JobRecord(status=str(row[0]), runs=int(row[1]), result=_result(row[2]))

    # -- money: the policy's daily budget per repository ------------------------------------
    def spent_today(self, repo: str) -> float:
        with self._lock:
            row = self._db.execute("SELECT usd FROM spend WHERE repo = ? AND day = ?",
                                   (repo, _today())).fetchone()
        return float(row[0]) if row else 0.0

    def record(self, repo: str, usd: float) -> None:
        with self._lock:
            self._db.execute("INSERT INTO spend (repo, day, usd) VALUES (?, ?, ?) ON CONFLICT "
                             "(repo, day) DO UPDATE SET usd = usd + excluded.usd",
                             (repo, _today(), usd))

    def counts(self) -> dict[str, int]:
        with self._lock:
            rows = self._db.execute("SELECT status, COUNT(*) FROM jobs GROUP BY status")
            return {status: count for status, count in rows}

    # -- what operators and monitoring read -------------------------------------------------
    def bump(self, name: str, by: float = 1.0) -> None:
        """Add to a durable counter (it survives restarts, as Prometheus counters should)."""
        with self._lock:
            self._db.execute("INSERT INTO counters (name, value) VALUES (?, ?) ON CONFLICT "
                             "(name) DO UPDATE SET value = value + excluded.value", (name, by))

    def counter_values(self) -> dict[str, float]:
        with self._lock:
            return {name: float(value) for name, value
                    in self._db.execute("SELECT name, value FROM counters")}

    def spent_total(self) -> float:
        """Money recorded in the spend ledger, every repository and day together."""
        with self._lock:
            row = self._db.execute("SELECT COALESCE(SUM(usd), 0) FROM spend").fetchone()
        return float(row[0])

    def oldest_queued_created(self) -> float | None:
        with self._lock:
            row = self._db.execute("SELECT MIN(created) FROM jobs WHERE status = 'queued'"
                                   ).fetchone()
        return None if row[0] is None else float(row[0])

    def oldest_claimable_since(self, control: bool = False) -> float | None:
        """Since when the oldest job `claim(control)` would take now has been waiting to be
        taken (its creation, or the end of its retry delay): None when there is none."""
        with self._lock:
            row = self._db.execute(
                _CLAIMABLE.format(columns="MIN(MAX(queued.created, queued.not_before))",
                                  tail=""),
                (time.time(), len(CONTROL_PREFIX), CONTROL_PREFIX, control)).fetchone()
        return None if row[0] is None else float(row[0])

    def outcomes(self) -> list[tuple[str | None, str | None, int]]:
        """Finished jobs counted by (plan action, outcome): `refused` where the job (or the
        dispatcher) declined, `dry_run`, `cancelled`, else `ok` or `failed`."""
        found: list[tuple[str | None, str | None, int]] = []
        for name, value in sorted(self.counter_values().items()):
            if name.startswith(_FINISHED_PREFIX):
                action, _, outcome = name.removeprefix(_FINISHED_PREFIX).partition("|")
                found.append((action or None, outcome or None, int(value)))
        return found

    def rows(self, status: str | None = None) -> list[JobRow]:
        """Jobs, oldest first; only those in `status` when given."""
        where, args = ("WHERE status = ?", (status,)) if status else ("", ())
        with self._lock:
            found = self._db.execute(
                "SELECT id, key, plan, status, runs, result, created, updated, "  # noqa: S608
                f"not_before, cancel FROM jobs {where} ORDER BY id", args).fetchall()
        return [_row(item) for item in found]

    def row(self, job_id: int) -> JobRow:
        with self._lock:
            found = self._db.execute(
                "SELECT id, key, plan, status, runs, result, created, updated, not_before, "
                "cancel FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if found is None:
            raise JobStateError(f"no job {job_id} in the queue")
        return _row(found)

    def requeue(self, job_id: int) -> JobRow:
        """A failed job (a dispatch given up, a job that failed) queued again, due now, its
        tries counted afresh."""
        return self._change(job_id, ("failed",), "UPDATE jobs SET status = 'queued', runs = 0, "
                            "cancel = 0, not_before = 0, updated = ? WHERE id = ?", "retried")

    def drop(self, job_id: int) -> JobRow:
        """A queued or failed job cancelled (kept, for the record); a running one asked to
        stop, as /cancel does (a job run here stops at its next check; a dispatch is a
        moment's work)."""
        with self._lock:
            row = self._db.execute("SELECT status FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is not None and row[0] == "running":
            return self._change(job_id, ("running",), "UPDATE jobs SET cancel = 1, updated = ? "
                                "WHERE id = ?", "asked to stop")
        return self._change(job_id, ("queued", "failed"), "UPDATE jobs SET status = "
                            "'cancelled', updated = ?, result = '{\"cancelled\": true, "
                            "\"dropped\": true}' WHERE id = ?", "dropped")

    def _change(self, job_id: int, states: tuple[str, ...], update: str, verb: str) -> JobRow:
        """Run `update` (parameters: now, id) if the job is in one of `states`, atomically."""
        with self._lock, self._transaction():
            row = self._db.execute("SELECT status FROM jobs WHERE id = ?",
                                   (job_id,)).fetchone()
            if row is not None and row[0] in states:
                self._db.execute(update, (time.time(), job_id))
        if row is None:
            raise JobStateError(f"no job {job_id} in the queue")
        if row[0] not in states:
            raise JobStateError(f"job {job_id} is {row[0]}: only a {' or '.join(states)} job "
                                f"can be {verb}")
        return self.row(job_id)


def _row(row: Any) -> JobRow:
    try:
        plan = json.loads(row[2])
    except (ValueError, RecursionError):
        plan = {}
    return JobRow(id=int(row[0]), key=str(row[1]), plan=plan if isinstance(plan, dict) else {},
                  status=str(row[3]), runs=int(row[4]), result=_result(row[5]),
                  created=float(row[6]), updated=float(row[7]), not_before=float(row[8]),
                  cancel=bool(row[9]))
