"""`opbot serve` under an operator's or an attacker's pressure: a locked queue, a worker
that dies, dispatch mode's own commands (/help, /cancel) and cancelled dispatches,
OPBOT_DISPATCH typos, odd `opbot queue` input, a huge queue, retention, clock jumps, and
what a dispatch given up says in public."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

import bot.server
from bot.cli import main
from bot.dispatch import REASON_LIMIT, RetryPolicy, public_reason
from bot.events import Plan, job_key
from bot.forge.base import Dispatch, UnavailableError
from bot.health import Heartbeat, Limits, verdict
from bot.queue import CONTROL_PREFIX, JobQueue, queue_path
from bot.server import (
    EXIT_WORKER_DIED,
    ServerSettings,
    handle_job,
    request_of,
    work,
)
from tests.test_server_ops import (
    SECRET,
    TOKEN,
    Dispatcher,
    DyingQueue,
    _plan,
    _settings,
    served,
    until,
)

KEY = "github:octo/kernels:relu"


# -- 1. a locked queue ---------------------------------------------------------------------
def _insert_queued(db: sqlite3.Connection, key: str, plan: dict[str, Any]) -> None:
    now = time.time()
    db.execute("INSERT INTO jobs (key, plan, status, created, updated) VALUES "
               "(?, ?, 'queued', ?, ?)", (key, json.dumps(plan), now, now))


def test_a_lock_held_past_the_busy_timeout_does_not_end_the_workers(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """An operator's sqlite3 shell holds the write lock for longer than the busy timeout:
    each claim fails meanwhile; the workers wait it out and run the job it left behind."""
    caplog.set_level(logging.ERROR, logger="opbot.serve")
    path = tmp_path / "q.sqlite3"
    queue = JobQueue(path, busy_timeout_s=0.1)
    dispatch = Dispatcher()
    with served(_settings(queue, dispatch=dispatch)) as url:
        other = sqlite3.connect(str(path), isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        _insert_queued(other, KEY, _plan())  # seen by the workers only once committed
        until(lambda: "could not use the queue (OperationalError" in caplog.text)
        time.sleep(0.5)  # several failed claims in a row, both workers
        other.execute("COMMIT")
        other.close()
        until(lambda: queue.counts() == {"done": 1}, timeout_s=20)
        health = httpx.get(f"{url}/healthz", timeout=5)
    assert [plan.op for plan in dispatch.sent] == ["relu"]
    assert health.status_code == 200
    assert health.json()["workers"] == {"main": "up", "control": "up"}
    assert "database is locked" in caplog.text


class LockedOnceQueue(JobQueue):
    """A queue whose first write of a job's end fails, as a lock held too long would."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.failures = 0

    def finish(self, job_id: int, ok: bool, result: dict[str, Any]) -> None:
        if self.failures == 0:
            self.failures += 1
            raise sqlite3.OperationalError("database is locked")
        super().finish(job_id, ok, result)


def test_a_job_whose_end_could_not_be_written_does_not_stay_running(tmp_path: Path) -> None:
    """Left `running`, it would hold back every later job of its op until a restart."""
    queue = LockedOnceQueue(tmp_path / "q.sqlite3")
    job = queue.enqueue(KEY, _plan())
    later = queue.enqueue(KEY, _plan())
    stop = threading.Event()
    thread = threading.Thread(target=work, args=(_settings(queue, dispatch=Dispatcher()),
                                                 stop), daemon=True)
    thread.start()
    until(lambda: queue.record_of(later).status == "done")
    stop.set()
    thread.join(timeout=5)
    record = queue.record_of(job)
    assert (record.status, record.result) == ("failed", {"error": "OperationalError"})


# The thread's end is the point: pytest need not warn of it.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_dead_worker_asks_for_the_process_to_end(tmp_path: Path) -> None:
    died: list[str] = []
    settings = _settings(DyingQueue(tmp_path / "q.sqlite3"), dispatch=Dispatcher(),
                         on_worker_death=died.append)
    thread = threading.Thread(target=work, args=(settings, threading.Event()), daemon=True)
    thread.start()
    thread.join(timeout=5)
    assert died == ["the main worker died (SystemExit)"]


def test_exit_for_restart_ends_with_a_failure_status(monkeypatch: pytest.MonkeyPatch) -> None:
    """Non-zero, so that systemd's Restart=on-failure starts a fresh process."""
    codes: list[int] = []

    def fake_exit(code: int) -> None:
        codes.append(code)

    monkeypatch.setattr(os, "_exit", fake_exit)
    bot.server.exit_for_restart("the main worker died (SystemExit)")
    assert codes == [EXIT_WORKER_DIED]
    assert EXIT_WORKER_DIED != 0


def _serve_and_capture(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                       **options: Any) -> ServerSettings:
    """bot.server.serve up to uvicorn, which is not started: the settings it built."""
    import uvicorn

    seen: dict[str, ServerSettings] = {}

    def fake_make_app(settings: ServerSettings, start_worker: bool = True) -> object:
        seen["settings"] = settings
        return object()

    monkeypatch.setenv("OPBOT_WEBHOOK_SECRET", SECRET)
    monkeypatch.setattr(bot.server, "make_app", fake_make_app)
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: None)
    bot.server.serve(host="127.0.0.1", port=0, dry_run=False, state_dir=tmp_path / "state",
                     **options)
    seen["settings"].queue.close()
    return seen["settings"]


def test_serve_ends_the_process_when_a_worker_dies(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    settings = _serve_and_capture(monkeypatch, tmp_path)
    assert settings.on_worker_death is bot.server.exit_for_restart


# -- 2. /help and /cancel in dispatch mode run here ----------------------------------------
class Executor:
    """An `execute` that records the plans it ran."""

    def __init__(self) -> None:
        self.ran: list[Plan] = []

    def __call__(self, plan: Plan, stopped: Callable[[], bool]) -> dict[str, Any]:
        self.ran.append(plan)
        return {"ok": True, "action": plan.action, "summary": "answered"}


def test_help_and_cancel_are_never_dispatched(tmp_path: Path) -> None:
    queue = JobQueue(tmp_path / "q.sqlite3")
    dispatch, execute = Dispatcher(), Executor()
    settings = _settings(queue, dispatch=dispatch, execute=execute)
    generation = queue.enqueue(KEY, _plan())
    assert queue.claim() is not None  # the generation is being handed over: running
    cancel = queue.enqueue(f"{CONTROL_PREFIX}{KEY}", _plan(action="cancel"))
    control = queue.claim(control=True)  # the control worker: not behind the generation
    assert control is not None
    assert control.id == cancel
    handle_job(settings, control)
    helped = queue.enqueue("github:octo/kernels:#2", _plan(action="help", op="", number=2))
    job = queue.claim()
    assert job is not None
    assert job.id == helped
    handle_job(settings, job)
    assert [plan.action for plan in execute.ran] == ["cancel", "help"]
    assert dispatch.sent == []
    assert queue.record_of(cancel).status == queue.record_of(helped).status == "done"
    assert queue.record_of(generation).status == "running"


def test_help_without_an_executor_is_still_not_dispatched(tmp_path: Path) -> None:
    queue = JobQueue(tmp_path / "q.sqlite3")
    dispatch = Dispatcher()
    job = queue.enqueue(KEY, _plan(action="help"))
    claimed = queue.claim()
    assert claimed is not None
    handle_job(_settings(queue, dispatch=dispatch), claimed)
    assert dispatch.sent == []
    record = queue.record_of(job)
    assert (record.status, (record.result or {}).get("dispatched")) == ("done", False)


def test_a_burst_of_help_comments_makes_one_job(tmp_path: Path) -> None:
    queue = JobQueue(tmp_path / "q.sqlite3")
    plan = Plan.from_json(_plan(action="help", op=""))
    jobs = {queue.submit(job_key(plan), plan.to_json(), request_of(plan)).job
            for _ in range(3)}
    assert len(jobs) == 1
    assert queue.counts() == {"queued": 1}


# -- 3. a dispatch asked to stop stops -----------------------------------------------------
def test_a_job_dropped_before_its_dispatch_is_not_dispatched(tmp_path: Path) -> None:
    queue = JobQueue(tmp_path / "q.sqlite3")
    dispatch = Dispatcher()
    job = queue.enqueue(KEY, _plan())
    claimed = queue.claim()
    assert claimed is not None
    queue.drop(job)  # running: "asked it to stop"
    handle_job(_settings(queue, dispatch=dispatch), claimed)
    assert dispatch.sent == []
    assert queue.record_of(job).status == "cancelled"
    assert ("generate", "cancelled", 1) in queue.outcomes()


def test_a_dispatch_dropped_during_a_failing_try_is_not_tried_again(tmp_path: Path) -> None:
    """The try fails and puts the job back (retry keeps its cancel flag): the next claim
    finishes it cancelled instead of handing it over after all."""
    queue = JobQueue(tmp_path / "q.sqlite3")
    job = queue.enqueue(KEY, _plan())

    class DroppedMeanwhile(Dispatcher):
        def __call__(self, plan: Plan) -> Dispatch:
            if not self.sent:
                queue.drop(job)
            return super().__call__(plan)

    dispatch = DroppedMeanwhile(UnavailableError("GitHub 502"))
    settings = _settings(queue, dispatch=dispatch)
    for _ in range(2):
        claimed = queue.claim()
        assert claimed is not None
        handle_job(settings, claimed)
    assert len(dispatch.sent) == 1
    record = queue.record_of(job)
    assert (record.status, record.runs) == ("cancelled", 2)


# -- 4. OPBOT_DISPATCH and the mode said at start --------------------------------------------
@pytest.mark.parametrize(("value", "expected"), [
    ("1", True), ("TRUE", True), (" yes ", True), ("On", True),
    ("0", False), ("false", False), ("NO", False), ("off", False), ("", False),
    ("   ", False), (None, False)])
def test_opbot_dispatch_values(monkeypatch: pytest.MonkeyPatch, value: str | None,
                               expected: bool) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(bot.server, "serve", lambda **options: seen.update(options))
    run = CliRunner().invoke(main, ["serve"], env={"OPBOT_WEBHOOK_SECRET": SECRET,
                                                   "OPBOT_DISPATCH": value})
    assert run.exit_code == 0, run.output
    assert seen["dispatch"] is expected


@pytest.mark.parametrize("value", ["enabled", "t", "y", "ture", "2", "yes please"])
def test_a_mistyped_opbot_dispatch_is_refused(monkeypatch: pytest.MonkeyPatch,
                                              value: str) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(bot.server, "serve", lambda **options: seen.update(options))
    run = CliRunner().invoke(main, ["serve"], env={"OPBOT_WEBHOOK_SECRET": SECRET,
                                                   "OPBOT_DISPATCH": value})
    assert run.exit_code != 0
    assert f"OPBOT_DISPATCH={value!r} is neither on" in run.output
    assert seen == {}  # never started, in either mode


@pytest.mark.parametrize(("dispatch", "said"), [
    (False, "run mode: jobs run on this host under the sandbox"),
    (True, "dispatch mode: jobs are handed to the CI system")])
def test_serve_says_its_mode_at_start(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                      caplog: pytest.LogCaptureFixture, dispatch: bool,
                                      said: str) -> None:
    caplog.set_level(logging.INFO, logger="opbot.serve")
    _serve_and_capture(monkeypatch, tmp_path, dispatch=dispatch)
    assert said in caplog.text


# -- 5. `opbot queue` on odd input -----------------------------------------------------------
def _queue_cli(*args: str) -> Any:
    return CliRunner().invoke(main, ["queue", *args], catch_exceptions=False)


@pytest.mark.parametrize("job_id", ["99999999999999999999999", "-1", "0", "x"])
@pytest.mark.parametrize("command", ["retry", "drop"])
def test_an_impossible_job_id_is_a_usage_error(tmp_path: Path, command: str,
                                               job_id: str) -> None:
    state = tmp_path / "state"
    JobQueue(queue_path(state)).close()
    run = _queue_cli(command, job_id, "--state-dir", str(state))
    assert run.exit_code == 2
    assert "Invalid value for 'ID'" in run.output
    assert "Traceback" not in run.output


@pytest.mark.parametrize("command", [["list"], ["retry", "1"], ["drop", "1"]])
@pytest.mark.parametrize("content", [b"", b"SQLite format 3\x00" + b"\xff" * 200,
                                     b"not a database at all\n" * 50])
def test_a_file_that_is_no_queue_is_said_and_left_alone(tmp_path: Path, command: list[str],
                                                        content: bytes) -> None:
    state = tmp_path / "state"
    state.mkdir()
    queue_path(state).write_bytes(content)
    run = _queue_cli(*command, "--state-dir", str(state))
    assert run.exit_code == 2
    assert "not an opbot queue" in run.output
    assert "Traceback" not in run.output
    assert queue_path(state).read_bytes() == content  # no schema written into it


def test_list_reads_a_queue_without_writing_to_it(tmp_path: Path) -> None:
    state = tmp_path / "state"
    queue = JobQueue(queue_path(state))
    queue.enqueue(KEY, _plan())
    queue.close()  # a clean close folds the WAL back into the file
    before = queue_path(state).read_bytes()
    run = _queue_cli("list", "--json", "--state-dir", str(state))
    assert run.exit_code == 0, run.output
    assert [item["key"] for item in json.loads(run.output)["jobs"]] == [KEY]
    assert queue_path(state).read_bytes() == before


# -- 6. a huge queue, and retention ----------------------------------------------------------
def _plan_details(queue: JobQueue, sql: str, args: tuple[Any, ...]) -> str:
    rows = queue._db.execute(f"EXPLAIN QUERY PLAN {sql}", args).fetchall()
    return "\n".join(str(row[3]) for row in rows)


def test_claim_walks_the_active_index_not_the_queued_jobs(tmp_path: Path) -> None:
    from bot.queue import _CLAIMABLE

    queue = JobQueue(tmp_path / "q.sqlite3")
    sql = _CLAIMABLE.format(columns="queued.id", tail="ORDER BY queued.id LIMIT 1")
    details = _plan_details(queue, sql, (time.time(), len(CONTROL_PREFIX), CONTROL_PREFIX,
                                         False))
    assert "USING INDEX jobs_active (key>?)" in details  # one probe per op, not per job
    assert "USING INDEX jobs_active (key=?)" in details
    assert "jobs_key_status (key=? AND status=?)" in details
    assert "jobs_status" not in details


def test_claim_order_with_many_jobs_behind_a_running_one(tmp_path: Path) -> None:
    queue = JobQueue(tmp_path / "q.sqlite3")
    first = queue.enqueue(KEY, _plan())
    behind = [queue.enqueue(KEY, _plan()) for _ in range(50)]
    other = queue.enqueue("github:octo/kernels:gelu", _plan(op="gelu"))
    assert (claimed := queue.claim()) is not None
    assert claimed.id == first
    assert (claimed := queue.claim()) is not None
    assert claimed.id == other
    assert queue.claim() is None  # relu's next waits for the running one
    assert queue.oldest_claimable_since() is None
    queue.finish(first, False, {"error": "x"})
    queue.requeue(first)  # an operator's retry: older than those behind, goes first
    assert (claimed := queue.claim()) is not None
    assert claimed.id == first
    assert queue.claim() is None
    queue.finish(first, True, {"ok": True})
    assert queue.oldest_claimable_since() is not None
    assert (claimed := queue.claim()) is not None
    assert claimed.id == behind[0]


def test_prune_forgets_old_deliveries_and_finished_jobs_not_counters(tmp_path: Path) -> None:
    queue = JobQueue(tmp_path / "q.sqlite3")
    day = 86400.0
    queue.first_delivery("github:old")
    old_done, old_queued = queue.enqueue(KEY, _plan()), queue.enqueue("k2", _plan(op="gelu"))
    assert queue.claim() is not None
    queue.finish(old_done, True, {"ok": True})
    outcomes = queue.outcomes()
    now = time.time() + 31 * day  # a month later
    queue.first_delivery("github:new")
    queue._db.execute("UPDATE deliveries SET received = ? WHERE id = 'github:new'", (now,))
    assert queue.prune(now=now) == (1, 1)
    assert queue.prune(now=now) == (0, 0)
    assert queue.first_delivery("github:old")  # forgotten: seen as new
    assert not queue.first_delivery("github:new")
    assert queue.record_of(old_queued).status == "queued"  # never pruned: not finished
    with pytest.raises(KeyError):
        queue.record_of(old_done)
    assert queue.outcomes() == outcomes  # /metrics counters never go down


class CountingPrunes(JobQueue):
    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.prunes = 0

    def prune(self, now: float | None = None, delivery_retention_s: float = 0.0,
              job_retention_s: float = 0.0) -> tuple[int, int]:
        self.prunes += 1
        return (0, 0)


def test_the_main_worker_prunes_at_most_once_an_hour(tmp_path: Path) -> None:
    queue = CountingPrunes(tmp_path / "q.sqlite3")
    stop = threading.Event()
    settings = _settings(queue, dispatch=Dispatcher())
    threads = [threading.Thread(target=work, args=(settings, stop, control), daemon=True)
               for control in (False, True)]
    for thread in threads:
        thread.start()
    time.sleep(1.2)  # a few passes of each loop
    stop.set()
    for thread in threads:
        thread.join(timeout=5)
    assert queue.prunes == 1


# -- 7. heartbeats on the monotonic clock ----------------------------------------------------
def test_a_wall_clock_jump_does_not_make_a_job_look_overrun(tmp_path: Path) -> None:
    ticks = [5000.0]
    beat = Heartbeat("main", clock=lambda: ticks[0])
    beat.started(threading.current_thread())
    beat.running(7)
    ticks[0] += 30  # half a minute into the job by the monotonic clock
    queue = JobQueue(tmp_path / "q.sqlite3")
    limits = Limits(stuck_after_s=60, running_limit_s=60)
    jumped = time.time() + 7 * 86400.0  # the wall clock stepped a week ahead
    assert verdict(queue, {"main": beat}, limits, wall_now=jumped).healthy
    assert verdict(queue, {"main": beat}, limits).healthy
    ticks[0] += 31
    (reason,) = verdict(queue, {"main": beat}, limits).reasons
    assert reason.startswith("the main worker has been running job 7 for 61 s")


def test_a_queue_locked_for_long_is_said_by_healthz(tmp_path: Path) -> None:
    """The worker lives and retries; past stuck_after_s an operator hears why."""
    ticks = [100.0]
    beat = Heartbeat("main", clock=lambda: ticks[0])
    beat.started(threading.current_thread())
    queue = JobQueue(tmp_path / "q.sqlite3")
    limits = Limits(stuck_after_s=60)
    beat.queue_failed("OperationalError: database is locked")
    ticks[0] += 50
    beat.queue_failed("OperationalError: database is locked")  # still since 100
    beat.alive()
    assert verdict(queue, {"main": beat}, limits).healthy
    ticks[0] += 11
    beat.alive()
    (reason,) = verdict(queue, {"main": beat}, limits).reasons
    assert reason == ("the main worker has not been able to use the queue for 61 s "
                      "(OperationalError: database is locked); it keeps trying")
    beat.queue_ok()
    assert verdict(queue, {"main": beat}, limits).healthy


def test_a_stuck_queue_is_still_judged_by_the_wall_clock(tmp_path: Path) -> None:
    ticks = [10.0]
    beat = Heartbeat("main", clock=lambda: ticks[0])
    beat.started(threading.current_thread())
    queue = JobQueue(tmp_path / "q.sqlite3")
    queue.enqueue(KEY, _plan())
    limits = Limits(stuck_after_s=60)
    ticks[0] += 61  # the worker loops, but claimed nothing for 61 s
    beat.alive()
    assert verdict(queue, {"main": beat}, limits).healthy  # the job is new: not stuck
    found = verdict(queue, {"main": beat}, limits, wall_now=time.time() + 61)
    assert found.reasons[-1].startswith("the queue is stuck: a job has waited 61 s")


# -- 8. what a dispatch given up says in public ------------------------------------------------
def test_the_given_up_comment_quotes_one_short_line_without_credentials(
        tmp_path: Path) -> None:
    queue = JobQueue(tmp_path / "q.sqlite3")
    said: list[str] = []
    page = ("GitHub 502 at https://x-access-token:s3cr3tpass@api.github.com/repos/o/r "
            f"with {TOKEN} " + "x" * 400 + "\n<html><body>Bad gateway</body></html>\n" * 20)
    settings = _settings(queue, dispatch=Dispatcher(UnavailableError(page)),
                         retry=RetryPolicy(tries=1), report=lambda plan, text: said.append(
                             text))
    job = queue.enqueue(KEY, _plan())
    claimed = queue.claim()
    assert claimed is not None
    handle_job(settings, claimed)
    (text,) = said
    assert f"`opbot queue retry {job}`" in text  # an operator needs the id
    assert "\n" not in text
    assert "s3cr3tpass" not in text
    assert TOKEN not in text
    assert "https://[REDACTED]@api.github.com" in text
    assert "<html>" not in text
    quoted = text.split("after 1 try: ", 1)[1].split("; an operator", 1)[0]
    assert len(quoted) <= REASON_LIMIT
    stored = (queue.record_of(job).result or {})["reason"]
    assert "s3cr3tpass" not in stored
    assert TOKEN not in stored


def test_public_reason_keeps_a_short_reason_whole() -> None:
    assert public_reason("GitHub 502") == "GitHub 502"
    assert public_reason("\n\n  first  \nsecond") == "first"
    assert len(public_reason("y" * 1000)) == REASON_LIMIT
