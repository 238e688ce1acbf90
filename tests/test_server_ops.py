"""Operating `opbot serve`: /healthz, /metrics, `opbot queue`, OPBOT_DISPATCH, and dispatch
mode's own forge work (a person's request authorised before it is handed to CI, a dispatch
given up said on its thread). The server runs on uvicorn in a thread, over real loopback
HTTP; the forge is the fake one, driven by the real PyGithub and python-gitlab clients."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import pytest
import uvicorn
from click.testing import CliRunner

from bot.agent.transcript import Redactor
from bot.cli import main
from bot.dispatch import DispatchGuard, RetryPolicy
from bot.events import Plan
from bot.forge.base import Forge, NotFoundError, Target, UnavailableError
from bot.forge.inbound import Action
from bot.health import Heartbeat, Limits, verdict
from bot.identity import Identities
from bot.jobs import refusal_text
from bot.metrics import TokenMeter
from bot.policy import default_policy
from bot.publish import STATUS_MARKER
from bot.queue import JobQueue, QueuedJob, RequestKey, queue_path
from bot.server import ServerSettings, handle_job, make_app
from tests.support_forge import RecordingDispatcher as Dispatcher
from tests.support_serve import free_port, loopback

SECRET = "ops-webhook-secret-77c1"
TOKEN = "ghp_opsSecretToken0123456789abcdef"
REPO = "octo/kernels"


# -- a server over loopback HTTP -----------------------------------------------------------
@contextmanager
def served(settings: ServerSettings, start_worker: bool = True) -> Iterator[str]:
    """`make_app(settings)` on uvicorn in a thread, at the URL it yields."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(make_app(settings, start_worker=start_worker),
                                           host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def until(check: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _plan(action: Action = "generate", op: str = "relu", actor: str = "alice",
          forge: str = "github", number: int = 1) -> dict[str, Any]:
    return Plan(action=action, reason="test", forge=forge, event="issues", repo=REPO,
                number=number, op=op, actor=actor, target="issue").to_json()


def _settings(queue: JobQueue, **fields: Any) -> ServerSettings:
    fields.setdefault("retry", RetryPolicy(tries=3, backoff_s=0.0))
    return ServerSettings(secrets=[SECRET], queue=queue, dry_run=False,
                          redactor=Redactor([TOKEN]), **fields)


def _drain(settings: ServerSettings, limit: int = 20) -> None:
    for _ in range(limit):
        job = settings.queue.claim()
        if job is None:
            return
        handle_job(settings, job)
    raise AssertionError("the queue never drained")


# -- /healthz ------------------------------------------------------------------------------
class DyingQueue(JobQueue):
    """A queue whose main worker's claim ends the thread, as an unexpected BaseException
    (SystemExit, KeyboardInterrupt, a C extension's) would."""

    def claim(self, control: bool = False) -> QueuedJob | None:
        if not control:
            raise SystemExit(3)
        return super().claim(control)


class WedgedQueue(JobQueue):
    """A queue whose main worker loops but never gets a job out (a broken claim)."""

    def claim(self, control: bool = False) -> QueuedJob | None:
        return None if not control else super().claim(control)


def test_a_healthy_server_answers_200_with_its_counts(tmp_path: Path) -> None:
    queue = JobQueue(tmp_path / "q.sqlite3")
    with served(_settings(queue, dispatch=Dispatcher())) as url:
        queue.enqueue("github:octo/kernels:relu", _plan())
        until(lambda: queue.counts() == {"done": 1})
        answer = loopback().get(f"{url}/healthz", timeout=5)
    assert answer.status_code == 200
    assert answer.json() == {"status": "ok", "jobs": {"done": 1},
                             "workers": {"main": "up", "control": "up"}}


# The thread's end is the point: pytest need not warn of it.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_dead_worker_makes_healthz_503(tmp_path: Path) -> None:
    queue = DyingQueue(tmp_path / "q.sqlite3")
    with served(_settings(queue, dispatch=Dispatcher())) as url:
        until(lambda: loopback().get(f"{url}/healthz", timeout=5).status_code == 503)
        answer = loopback().get(f"{url}/healthz", timeout=5).json()
        metrics = _scrape(url)
    assert answer["status"] == "unhealthy"
    assert answer["reasons"] == ["the main worker is dead (SystemExit)"]
    assert answer["workers"] == {"main": "unhealthy", "control": "up"}
    assert metrics[("opbot_worker_up", (("worker", "main"),))] == 0
    assert metrics[("opbot_worker_up", (("worker", "control"),))] == 1


def test_a_stuck_queue_makes_healthz_503(tmp_path: Path) -> None:
    queue = WedgedQueue(tmp_path / "q.sqlite3")
    settings = _settings(queue, dispatch=Dispatcher(), limits=Limits(stuck_after_s=0.4))
    with served(settings) as url:
        assert loopback().get(f"{url}/healthz", timeout=5).status_code == 200
        queue.enqueue("github:octo/kernels:relu", _plan())
        assert loopback().get(f"{url}/healthz", timeout=5).status_code == 200  # not yet
        time.sleep(0.6)
        answer = loopback().get(f"{url}/healthz", timeout=5)
    assert answer.status_code == 503
    (reason,) = answer.json()["reasons"]
    assert reason.startswith("the queue is stuck: a job has waited")
    assert "OPBOT_STUCK_AFTER_S" in reason
    assert answer.json()["jobs"] == {"queued": 1}


def test_a_long_job_is_not_a_stuck_queue_until_it_overruns(tmp_path: Path) -> None:
    queue = JobQueue(tmp_path / "q.sqlite3")
    release = threading.Event()

    def execute(plan: Plan, stopped: Callable[[], bool]) -> dict[str, Any]:
        release.wait(30)
        return {"ok": True, "action": plan.action, "summary": "done"}

    settings = _settings(queue, execute=execute,
                         limits=Limits(stuck_after_s=0.3, running_limit_s=60))
    with served(settings) as url:
        queue.enqueue("github:octo/kernels:relu", _plan(op="relu"))
        until(lambda: queue.counts().get("running") == 1)
        queue.enqueue("github:octo/kernels:gelu", _plan(op="gelu"))  # claimable, waits
        time.sleep(0.6)
        busy = loopback().get(f"{url}/healthz", timeout=5)
        settings.limits = Limits(stuck_after_s=0.3, running_limit_s=0.3)
        overrun = loopback().get(f"{url}/healthz", timeout=5)
        release.set()
        until(lambda: queue.counts() == {"done": 2})
        settings.limits = Limits(stuck_after_s=0.3, running_limit_s=60)
        after = loopback().get(f"{url}/healthz", timeout=5)
    assert busy.status_code == 200
    assert overrun.status_code == 503
    (reason,) = overrun.json()["reasons"]
    assert reason.startswith("the main worker has been running job 1 for")
    assert after.status_code == 200


def test_an_idle_worker_that_stopped_looping_is_unhealthy(tmp_path: Path) -> None:
    beat = Heartbeat("main", clock=lambda: 1000.0)
    beat.started(threading.current_thread())
    queue = JobQueue(tmp_path / "q.sqlite3")
    assert verdict(queue, {"main": beat}, Limits(), now=1059.0).healthy
    hung = verdict(queue, {"main": beat}, Limits(), now=1061.0)
    assert hung.reasons == ("the main worker has not looped for 61 s",)
    beat.running(7)  # busy: its loop waits for the job, and that is no hang
    assert verdict(queue, {"main": beat}, Limits(), now=1061.0).healthy


# -- /metrics ------------------------------------------------------------------------------
Key = tuple[str, tuple[tuple[str, str], ...]]


def parse_metrics(text: str) -> dict[Key, float]:
    """Prometheus text format 0.0.4, as far as opbot writes it: each sample by its name and
    its sorted labels; every family declared by # HELP and # TYPE before its samples."""
    samples: dict[Key, float] = {}
    declared: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            name, kind = line.split()[2:4]
            assert kind in ("counter", "gauge")
            declared.add(name)
            continue
        if not line or line.startswith("#"):
            continue
        head, value = line.rsplit(" ", 1)
        name, _, rest = head.partition("{")
        assert name in declared, f"{name} has no # TYPE line"
        labels = tuple(sorted((key, raw.strip('"')) for key, raw in
                              (pair.split("=", 1) for pair in rest.rstrip("}").split(",")
                               if pair))) if rest else ()
        assert (name, labels) not in samples, f"{name}{labels} twice"
        samples[(name, labels)] = float(value)
    return samples


def _scrape(url: str) -> dict[Key, float]:
    answer = loopback().get(f"{url}/metrics", timeout=5)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert REPO not in answer.text  # no repository label: bounded, and nothing to leak
    assert TOKEN not in answer.text
    return parse_metrics(answer.text)


def _value(samples: dict[Key, float], name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def test_metrics_count_jobs_and_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "q.sqlite3"
    queue = JobQueue(path)
    dispatch = Dispatcher(UnavailableError(f"GitHub 502 ({TOKEN})"))  # relu: retried, then ok
    settings = _settings(queue, dispatch=dispatch,
                         vet=lambda plan: "no" if plan.actor == "mallory" else None)
    TokenMeter(queue, usd_per_million_tokens=5.0).record(REPO, 0.25)  # 50k tokens' worth
    with served(settings) as url:
        queue.enqueue("github:octo/kernels:relu", _plan(op="relu"))
        until(lambda: queue.counts() == {"done": 1})
        dispatch.errors.append(NotFoundError("GitHub 404 on dispatch"))  # gelu: given up
        queue.enqueue("github:octo/kernels:gelu", _plan(op="gelu"))
        queue.enqueue("github:octo/kernels:tanh", _plan(action="regen", op="tanh",
                                                        actor="mallory"))
        until(lambda: queue.counts() == {"done": 2, "failed": 1})
        queue.submit("github:octo/kernels:silu", _plan(op="silu"),
                     RequestKey("silu", settle_s=3600))  # waits an hour for its burst
        unsigned = loopback().post(f"{url}/webhook/github", content=b"{}", timeout=5,
                              headers={"X-GitHub-Event": "issues"})
        assert unsigned.status_code == 401
        time.sleep(0.2)
        live = _scrape(url)
    assert _value(live, "opbot_queue_jobs", state="queued") == 1
    assert _value(live, "opbot_queue_jobs", state="done") == 2
    assert _value(live, "opbot_queue_jobs", state="failed") == 1
    assert _value(live, "opbot_queue_jobs", state="running") == 0
    assert _value(live, "opbot_queue_jobs", state="cancelled") == 0
    assert 0 < _value(live, "opbot_queue_oldest_age_seconds") < 60
    assert _value(live, "opbot_jobs_total", action="generate", outcome="ok") == 1
    assert _value(live, "opbot_jobs_total", action="generate", outcome="failed") == 1
    assert _value(live, "opbot_jobs_total", action="regen", outcome="refused") == 1
    assert _value(live, "opbot_dispatch_retries_total") == 1
    assert _value(live, "opbot_dispatch_given_up_total") == 1
    assert _value(live, "opbot_llm_tokens_total") == 50_000
    assert _value(live, "opbot_llm_cost_usd_total") == 0.25
    assert _value(live, "opbot_worker_up", worker="main") == 1
    assert _value(live, "opbot_deliveries_total", forge="github", outcome="rejected") == 1
    assert [plan.op for plan in dispatch.sent] == ["relu", "relu", "gelu"]  # not mallory's

    queue.close()  # a restart: a new process, the same database, no workers yet
    with served(_settings(JobQueue(path)), start_worker=False) as url:
        again = _scrape(url)
    durable = [name for name in ("opbot_jobs_total", "opbot_dispatch_retries_total",
                                 "opbot_dispatch_given_up_total", "opbot_llm_tokens_total",
                                 "opbot_llm_cost_usd_total", "opbot_queue_jobs")]
    assert {key: value for key, value in again.items() if key[0] in durable} == \
        {key: value for key, value in live.items() if key[0] in durable}
    assert _value(again, "opbot_worker_up", worker="main") == 0


def test_finished_jobs_never_count_down(tmp_path: Path) -> None:
    """A failed job retried by an operator, then done: one failure and one success counted,
    whatever the rows say now (a counter that went down would read as a reset)."""
    queue = JobQueue(tmp_path / "queue.sqlite3")
    job_id = queue.submit("github:o/r:relu", _plan()).job
    assert queue.claim() is not None
    queue.finish(job_id, False, {"error": "UnavailableError"})
    assert queue.outcomes() == [("generate", "failed", 1)]
    queue.requeue(job_id)
    assert queue.outcomes() == [("generate", "failed", 1)]  # not taken back
    assert queue.claim() is not None
    queue.finish(job_id, True, {"ok": True})
    assert queue.outcomes() == [("generate", "failed", 1), ("generate", "ok", 1)]
    dropped = queue.submit("github:o/r:gelu", _plan(op="gelu")).job
    queue.drop(dropped)
    assert ("generate", "cancelled", 1) in queue.outcomes()
    queue.close()
    reopened = JobQueue(tmp_path / "queue.sqlite3")
    assert sorted(reopened.outcomes()) == [("generate", "cancelled", 1),
                                           ("generate", "failed", 1), ("generate", "ok", 1)]
    reopened.close()


def test_label_values_are_escaped() -> None:
    from bot.metrics import family

    (line,) = family("x", "gauge", "h", [({"a": 'q"\\\n'}, 1.5)])[2:]
    assert line == 'x{a="q\\"\\\\\\n"} 1.5'


# -- opbot queue ---------------------------------------------------------------------------
def _queue_cli(*args: str) -> Any:
    return CliRunner().invoke(main, ["queue", *args], catch_exceptions=False)


def _jobs(state_dir: Path, *args: str) -> list[dict[str, Any]]:
    run = _queue_cli("list", "--json", "--state-dir", str(state_dir), *args)
    assert run.exit_code == 0, run.output
    jobs: list[dict[str, Any]] = json.loads(run.output)["jobs"]
    return jobs


def test_queue_list_retry_and_drop(tmp_path: Path) -> None:
    state = tmp_path / "state"
    server = JobQueue(queue_path(state))  # as `opbot serve` holds it, open meanwhile
    failed = server.enqueue("github:octo/kernels:relu", _plan(op="relu"))
    settings = _settings(server, dispatch=Dispatcher(UnavailableError("GitHub 502"),
                                                     UnavailableError("GitHub 503")),
                         retry=RetryPolicy(tries=2, backoff_s=0.0))
    _drain(settings)
    waiting = server.enqueue("github:octo/kernels:gelu", _plan(op="gelu"))
    running = server.enqueue("github:octo/kernels:tanh", _plan(op="tanh"))
    done = server.enqueue("github:octo/kernels:silu", _plan(op="silu"))
    for job in (server.claim(), server.claim(), server.claim()):
        assert job is not None
        if job.id == done:
            server.finish(done, True, {"ok": True})
    server.retry(waiting, 0, {})  # claimed above: back to queued

    listed = {item["id"]: item for item in _jobs(state)}
    assert listed[failed] == {**listed[failed], "state": "failed", "runs": 2,
                              "action": "generate", "repo": REPO, "number": 1,
                              "key": "github:octo/kernels:relu", "last_error": "GitHub 503"}
    assert [item["id"] for item in _jobs(state, "--state", "failed")] == [failed]
    human = _queue_cli("list", "--state-dir", str(state))
    assert human.exit_code == 0
    assert "GitHub 503" in human.output
    assert "github:octo/kernels:relu" in human.output

    retried = _queue_cli("retry", str(failed), "--json", "--state-dir", str(state))
    assert retried.exit_code == 0, retried.output
    assert (json.loads(retried.output)["state"], json.loads(retried.output)["runs"]) == (
        "queued", 0)
    again = server.claim()  # the server's own connection sees it at once
    assert again is not None
    assert (again.id, again.runs) == (failed, 1)

    wrong = _queue_cli("retry", str(done), "--state-dir", str(state))
    assert wrong.exit_code == 1
    assert f"job {done} is done: only a failed job can be retried" in wrong.output
    missing = _queue_cli("drop", "999", "--state-dir", str(state))
    assert missing.exit_code == 1
    assert "no job 999 in the queue" in missing.output
    assert "Traceback" not in wrong.output + missing.output

    dropped = _queue_cli("drop", str(waiting), "--state-dir", str(state))
    assert (dropped.exit_code, dropped.output.strip()) == (
        0, f"job {waiting}: dropped (cancelled)")
    assert server.record_of(waiting).status == "cancelled"
    stopping = _queue_cli("drop", str(running), "--json", "--state-dir", str(state))
    assert stopping.exit_code == 0
    assert json.loads(stopping.output)["cancel_requested"] is True
    assert server.cancel_requested(running)
    assert server.record_of(running).status == "running"

    nowhere = _queue_cli("list", "--state-dir", str(tmp_path / "none"))
    assert nowhere.exit_code == 2
    assert not (tmp_path / "none").exists()


# -- OPBOT_DISPATCH ------------------------------------------------------------------------
@pytest.mark.parametrize(("value", "expected"), [("1", True), ("0", False), (None, False)])
def test_opbot_dispatch_turns_on_dispatch_mode(monkeypatch: pytest.MonkeyPatch,
                                               value: str | None, expected: bool) -> None:
    import bot.server

    seen: dict[str, Any] = {}
    monkeypatch.setattr(bot.server, "serve", lambda **options: seen.update(options))
    env = {"OPBOT_WEBHOOK_SECRET": SECRET, "OPBOT_DISPATCH": value}
    run = CliRunner().invoke(main, ["serve"], env=env)
    assert run.exit_code == 0, run.output
    assert seen["dispatch"] is expected


# -- dispatch mode on the fake forge: authorise first, say when it gave up -----------------
def _forge_kinds() -> list[str]:
    from tests.support_forge import KINDS

    return sorted(KINDS)


def _guard(fake: Any, forge_name: str, queue: JobQueue) -> DispatchGuard:
    from tests.support_forge import KINDS

    def connect(plan: Plan) -> Forge:
        forge: Forge = KINDS[forge_name].forge(fake)
        return forge

    return DispatchGuard(policy=default_policy(),
                         identities=Identities({"OPBOT_BOT_LOGIN": fake.bot}),
                         ledger=queue, environ={}, connect=connect)


def _dispatching(fake: Any, forge_name: str, queue: JobQueue, **fields: Any
                 ) -> ServerSettings:
    from tests.support_forge import KINDS

    guard = _guard(fake, forge_name, queue)
    fields.setdefault("dispatch", lambda plan: KINDS[forge_name].forge(fake).dispatch_plan(
        plan.to_json()))
    return _settings(queue, vet=guard.refusal, report=guard.report, **fields)


def _statuses(fake: Any, forge_name: str, number: int) -> list[str]:
    from tests.support_forge import KINDS

    return [comment.body for comment in
            KINDS[forge_name].forge(fake).list_comments(Target("issue", number))
            if comment.author == fake.bot and comment.body.startswith(STATUS_MARKER)]


@pytest.mark.parametrize("forge_name", _forge_kinds())
def test_a_regen_without_permission_is_refused_not_dispatched(
        fake: Any, world: Any, tmp_path: Path, forge_name: str) -> None:
    from tests.support_forge import ci_deliveries

    fake.add_user("reader", repo=REPO, role="read")
    queue = JobQueue(tmp_path / "q.sqlite3")
    settings = _dispatching(fake, forge_name, queue)
    number = world.issue.number
    refused = [queue.enqueue(f"{forge_name}:{REPO}:relu", _plan(
        action="regen", actor="reader", forge=forge_name, number=number)) for _ in range(2)]
    _drain(settings)
    assert ci_deliveries(fake) == []
    for job in refused:
        record = queue.record_of(job)
        assert record.status == "done"
        assert record.result is not None
        assert record.result["outcome"] == "refused"
    expected = refusal_text("@reader has read permission here; opbot acts for people with "
                            "write permission or above")
    assert _statuses(fake, forge_name, number) == [f"{STATUS_MARKER}\n{expected}"]  # once

    allowed = queue.enqueue(f"{forge_name}:{REPO}:relu", _plan(
        action="regen", actor="alice", forge=forge_name, number=number))
    _drain(settings)
    (delivery,) = ci_deliveries(fake)
    plan = delivery.payload["client_payload"]["plan"] if forge_name == "github" \
        else delivery.payload["plan"]
    assert (plan["action"], plan["actor"]) == ("regen", "alice")
    assert queue.record_of(allowed).status == "done"
    assert ("regen", "refused", 2) in queue.outcomes()


@pytest.mark.parametrize("forge_name", _forge_kinds())
def test_a_refusal_is_not_said_while_the_bot_cannot_tell_its_own_comments(
        fake: Any, world: Any, tmp_path: Path, forge_name: str) -> None:
    """Without its login the bot cannot find its status comment: each refused command would
    be one more comment. It refuses, and says nothing."""
    from tests.support_forge import KINDS, ci_deliveries

    fake.add_user("reader", repo=REPO, role="read")
    queue = JobQueue(tmp_path / "q.sqlite3")

    def connect(plan: Plan) -> Forge:
        forge: Forge = KINDS[forge_name].forge(fake)
        return forge

    guard = DispatchGuard(policy=default_policy(), identities=cast(Identities, _Unknown()),
                          ledger=queue, environ={}, connect=connect)
    for _ in range(3):
        refused = guard.refusal(Plan.from_json(_plan(action="regen", actor="reader",
                                                     forge=forge_name,
                                                     number=world.issue.number)))
        assert refused is not None
    assert _statuses(fake, forge_name, world.issue.number) == []
    assert ci_deliveries(fake) == []


class _Unknown:
    """Identities that cannot tell who the bot is (its token's user unreadable)."""

    def login(self, forge: str) -> None:
        return None


@pytest.mark.parametrize("forge_name", _forge_kinds())
def test_a_forge_error_during_the_check_is_retried(fake: Any, world: Any, tmp_path: Path,
                                                   forge_name: str) -> None:
    from tests.support_forge import ci_deliveries

    queue = JobQueue(tmp_path / "q.sqlite3")
    settings = _dispatching(fake, forge_name, queue)
    job = queue.enqueue(f"{forge_name}:{REPO}:relu", _plan(forge=forge_name,
                                                           number=world.issue.number))
    fake.fail_next(forge_name, 1, status=502)  # the check's first read
    claimed = queue.claim()
    assert claimed is not None
    handle_job(settings, claimed)
    record = queue.record_of(job)
    assert (record.status, record.runs) == ("queued", 1)
    assert queue.counter_values() == {"dispatch_retries": 1.0}
    assert ci_deliveries(fake) == []
    _drain(settings)
    assert queue.record_of(job).status == "done"
    assert len(ci_deliveries(fake)) == 1


@pytest.mark.parametrize("forge_name", _forge_kinds())
def test_a_dispatch_given_up_is_said_on_its_thread_once(fake: Any, world: Any,
                                                        tmp_path: Path,
                                                        forge_name: str) -> None:
    state = tmp_path / "state"
    queue = JobQueue(queue_path(state))
    dispatch = Dispatcher(*[UnavailableError(f"GitHub 502 ({TOKEN})")] * 4)
    settings = _dispatching(fake, forge_name, queue, dispatch=dispatch,
                            retry=RetryPolicy(tries=2, backoff_s=0.0))
    number = world.issue.number
    job = queue.enqueue(f"{forge_name}:{REPO}:relu", _plan(forge=forge_name, number=number))
    _drain(settings)
    assert queue.record_of(job).status == "failed"
    said = (f"{STATUS_MARKER}\nopbot could not hand this job to CI after 2 tries: GitHub 502 "
            f"([REDACTED]); an operator can retry it with `opbot queue retry {job}`.")
    assert _statuses(fake, forge_name, number) == [said]

    assert _queue_cli("retry", str(job), "--state-dir", str(state)).exit_code == 0
    _drain(settings)  # gives up again: the same status comment says so, no second one
    assert len(dispatch.sent) == 4
    assert _statuses(fake, forge_name, number) == [said]
    assert queue.counter_values() == {"dispatch_retries": 2.0, "dispatch_given_up": 2.0,
                                      "jobs_total|generate|failed": 2.0}


def test_queue_list_survives_hostile_rows(tmp_path: Path) -> None:
    """Rows hold what webhooks and forges said: deep JSON and terminal escapes must neither
    crash the listing nor reach the operator's terminal."""
    import sqlite3

    state = tmp_path / "state"
    state.mkdir()
    queue = JobQueue(queue_path(state))
    job = queue.enqueue("github:o/r:\x1b[31mred\x1b[0m", _plan())
    queue.close()
    with sqlite3.connect(queue_path(state)) as db:
        db.execute("UPDATE jobs SET status = 'failed', result = ? WHERE id = ?",
                   ("[" * 100_000 + "]" * 100_000, job))
    listed = CliRunner().invoke(main, ["queue", "list", "--state-dir", str(state)])
    assert listed.exit_code == 0, listed.output
    assert "\x1b" not in listed.output
    assert "?[31mred?[0m" in listed.output
    as_json = CliRunner().invoke(main, ["queue", "list", "--json", "--state-dir", str(state)])
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.output)["jobs"][0]["state"] == "failed"
