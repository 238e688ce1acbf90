"""`opbot serve --dispatch`: the server plans, the CI system does the work.

End to end, `opbot serve --dispatch` runs in its own process against the fake forge
(GitHub traffic validated against GitHub's OpenAPI description), and what it dispatched is
fed back through `opbot event` as the CI job would. In process: the retry policy, the
queue's delayed retries, the worker's handling of dispatch failures, and the planning of
GitLab's OPBOT_PLAN file.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from gitlab import exceptions as gitlab_exceptions
from starlette.testclient import TestClient

from bot.agent.transcript import Redactor
from bot.dispatch import RetryPolicy
from bot.errors import BadInputError
from bot.events import Plan, plan_event
from bot.forge import registry
from bot.forge.base import (
    DISPATCH_EVENT,
    Dispatch,
    ForgeError,
    NotFoundError,
    RateLimitedError,
    UnavailableError,
)
from bot.forge.gitlab.client import PLAN_VARIABLE
from bot.forge.retrying import RetryingForge
from bot.queue import JobQueue
from bot.server import ServerSettings, handle_job, make_app
from tests.fakeforge import FakeForge
from tests.fakeforge.scenario import REPO, World
from tests.support import DATA, run_opbot
from tests.support import REPO as CHECKOUT
from tests.support_forge import KINDS, CiDelivery, ci_deliveries, gitlab_client
from tests.support_forge import RecordingDispatcher as Dispatcher
from tests.support_serve import RunningServer, start_serve

SECRET = "dispatch-webhook-secret-5e2a"
FORM = "### Operator name\n\nrelu\n\n### Notes\n\n_No response_\n"


# -- the server in its own process ---------------------------------------------------------
Server = RunningServer


@pytest.fixture
def serve(fake: FakeForge, world: World, tmp_path: Path) -> Iterator[Server]:
    """`opbot serve --dispatch` with the fake forge's URLs and the bot's token."""
    env = {**os.environ,
           "OPBOT_GITHUB_URL": fake.github_url, "OPBOT_GITHUB_TOKEN": fake.token,
           "OPBOT_GITLAB_URL": fake.gitlab_url, "OPBOT_GITLAB_TOKEN": fake.token,
           "OPBOT_BOT_LOGIN": fake.bot}
    log = tmp_path / "serve.log"
    server = start_serve("--dispatch", "--state-dir", str(tmp_path / "state"), env=env,
                         log=log, secret=SECRET)
    yield server
    server.stop()
    text = log.read_text(encoding="utf-8")
    assert fake.token not in text
    assert SECRET not in text


def _webhook(relative: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / "webhooks" / relative).read_text(encoding="utf-8"))
    return data


def _op_request(forge: str) -> tuple[str, dict[str, Any]]:
    """A delivery that asks for an operator: issue #1 labelled op-request, by alice."""
    if forge == "github":
        payload = _webhook("github/issues/labeled.1.json")
        payload["repository"]["full_name"] = REPO
        payload["issue"].update(number=1, body=FORM)
        payload["label"]["name"] = "op-request"
        payload["issue"]["labels"] = [payload["label"]]
        payload["sender"]["login"] = "alice"
        return "issues", payload
    payload = _webhook("gitlab/issue_hook.json")
    payload["project"]["path_with_namespace"] = REPO
    payload["user"]["username"] = "alice"
    payload["object_attributes"].update(iid=1, action="open", description=FORM)
    payload["labels"] = [{"title": "op-request"}]
    return "Issue Hook", payload


def _ignored(forge: str) -> tuple[str, dict[str, Any]]:
    """A delivery opbot does not act on: an issue opened without the trigger label."""
    event, payload = _op_request(forge)
    if forge == "github":
        payload["action"] = "opened"
        payload["issue"]["labels"] = []
    else:
        payload["labels"] = []
    return event, payload


def _replanned(delivery: CiDelivery, tmp_path: Path, bot: str) -> dict[str, Any]:
    """What `opbot event` in the CI job plans from the dispatched work (the job knows who
    the bot is: the Action's bot-login; a dispatch from an unknown sender is ignored)."""
    path = tmp_path / f"{delivery.forge}-dispatch.json"
    path.write_text(json.dumps(delivery.payload), encoding="utf-8")
    run = run_opbot("event", "--forge", delivery.forge, "--event", delivery.event,
                    "--payload", str(path), "--dry-run", "--json", timeout=120,
                    env={"OPBOT_BOT_LOGIN": bot})
    assert run.code == 0, run.stderr
    planned: dict[str, Any] = run.json()
    return planned


@pytest.mark.parametrize("forge", sorted(KINDS))
def test_a_delivery_is_dispatched_once(forge: str, fake: FakeForge, serve: Server,
                                       tmp_path: Path) -> None:
    event, payload = _op_request(forge)
    accepted = serve.deliver(forge, event, payload, "delivery-1")
    assert accepted.status_code == 202
    assert accepted.json()["action"] == "generate"
    serve.wait_for_jobs(1)
    (delivery,) = ci_deliveries(fake)
    assert len(fake.effect_log()) == 1  # handed over, not done here: no comment, no push
    assert not fake.pushes(REPO)
    if forge == "gitlab":
        assert (delivery.ref, delivery.variable_type) == ("main", "file")
        (pipeline,) = [e for e in fake.effects if e.kind == "pipeline"]
        variables = json.loads(pipeline.detail.split(":", 1)[1])
        # the template's resource_group opbot-$OPBOT_OP: one job per op at a time
        assert {"key": "OPBOT_OP", "value": "relu", "variable_type": "env_var"} in variables
    expected = plan_event(forge, event, payload, bot_login=fake.bot).to_json()
    replanned = _replanned(delivery, tmp_path, fake.bot)
    assert {k: replanned[k] for k in ("action", "op", "number")} == {
        "action": "generate", "op": "relu", "number": 1}
    assert replanned == expected  # the whole plan survives the trip through CI

    again = serve.deliver(forge, event, payload, "delivery-1")
    assert again.json()["status"] == "duplicate"
    event, ignored = _ignored(forge)
    skipped = serve.deliver(forge, event, ignored, "delivery-2")
    assert (skipped.status_code, skipped.json()["action"]) == (202, "ignore")
    assert skipped.json()["job"] is None
    time.sleep(1.0)  # the worker polls twice a second: time enough to do something wrong
    assert serve.jobs() == {"done": 1}
    assert len(ci_deliveries(fake)) == 1


FAILURES: dict[str, Callable[[FakeForge], None]] = {
    "github": lambda fake: fake.fail_next("github", 1, status=502),
    "gitlab": lambda fake: fake.rate_limit_next("gitlab", 1, retry_after=1),
}


@pytest.mark.parametrize("forge", sorted(KINDS))
def test_a_forge_failure_is_retried(forge: str, fake: FakeForge, serve: Server) -> None:
    # The server reads each repository's trigger label once (then caches it): a first
    # delivery gets that read done, so the injected failure meets the dispatch itself.
    serve.deliver(forge, *_ignored(forge), "delivery-0")
    FAILURES[forge](fake)
    event, payload = _op_request(forge)
    assert serve.deliver(forge, event, payload, "delivery-1").status_code == 202
    assert serve.wait_for_jobs(1) == {"done": 1}
    assert len(ci_deliveries(fake)) == 1
    log = serve.log.read_text(encoding="utf-8")
    assert "(try 1 of 8), again in" in log
    assert serve.process.poll() is None
    assert httpx.get(f"{serve.url}/healthz", timeout=5).status_code == 200


def test_retrying_forge_passes_dispatch_through(fake: FakeForge, world: World) -> None:
    """The library wrapper waits out a rate limit on dispatch_plan (the forge refused before
    acting), but hands a 5xx to the caller: it may have dispatched already."""
    plan = Plan(action="scan", reason="the nightly schedule", forge="github", event="schedule",
                repo=REPO).to_json()
    forge = RetryingForge(KINDS["github"].forge(fake), sleep=lambda seconds: None)
    fake.rate_limit_next("github", 1, retry_after=1)
    assert forge.dispatch_plan(plan) == Dispatch()
    assert len(ci_deliveries(fake)) == 1
    fake.fail_after_next("github", 1, status=502)  # dispatched, and the answer was lost
    with pytest.raises(UnavailableError):
        forge.dispatch_plan(plan)
    assert len(ci_deliveries(fake)) == 2  # not a third time


# -- the worker, in process ----------------------------------------------------------------
TOKEN_IN_ERROR = "ghp_secretvalue0123456789"


def _plan(action: str = "generate", op: str = "relu", forge: str = "github") -> dict[str, Any]:
    return Plan(action=action, reason="test", forge="gitlab" if forge == "gitlab" else "github",
                event="issues", repo=REPO, number=1, op=op, actor="alice",
                target="issue").to_json()


def _settings(queue: JobQueue, dispatch: Dispatcher, *, tries: int = 3,
              dry_run: bool = False) -> ServerSettings:
    return ServerSettings(secrets=[SECRET], queue=queue, dry_run=dry_run, dispatch=dispatch,
                          retry=RetryPolicy(tries=tries, backoff_s=0.0),
                          redactor=Redactor([TOKEN_IN_ERROR]))


def _drain(settings: ServerSettings, limit: int = 10) -> int:
    """Claims and handles due jobs until none is left; how many claims that took."""
    for claims in range(limit):
        job = settings.queue.claim()
        if job is None:
            return claims
        handle_job(settings, job)
    raise AssertionError("the queue never drained")


def test_transient_failures_are_retried_by_the_queue(tmp_path: Path) -> None:
    queue = JobQueue(tmp_path / "q.sqlite3")
    dispatch = Dispatcher(UnavailableError(f"GitHub 502 ({TOKEN_IN_ERROR})"),
                          RateLimitedError("GitHub 403: rate limited", retry_after_s=0.0))
    settings = _settings(queue, dispatch)
    job = queue.enqueue("github:octo/kernels:relu", _plan())
    assert _drain(settings) == 3
    record = queue.record_of(job)
    assert (record.status, record.runs) == ("done", 3)
    assert record.result is not None
    assert record.result["url"] == "https://ci.example/pipelines/42"
    assert [plan.op for plan in dispatch.sent] == ["relu"] * 3


def test_dispatch_gives_up_after_its_tries(tmp_path: Path,
                                           caplog: pytest.LogCaptureFixture) -> None:
    queue = JobQueue(tmp_path / "q.sqlite3")
    dispatch = Dispatcher(*[UnavailableError(f"GitHub 502 ({TOKEN_IN_ERROR})")] * 5)
    settings = _settings(queue, dispatch, tries=2)
    job = queue.enqueue("github:octo/kernels:relu", _plan())
    with caplog.at_level(logging.INFO, logger="opbot.serve"):
        assert _drain(settings) == 2
    record = queue.record_of(job)
    assert (record.status, record.runs) == ("failed", 2)
    assert record.result is not None
    assert record.result["error"] == "UnavailableError"
    assert "GitHub 502" in record.result["reason"]
    assert TOKEN_IN_ERROR not in json.dumps(record.result)
    assert "giving up" in caplog.text
    assert TOKEN_IN_ERROR not in caplog.text


@pytest.mark.parametrize("error", [NotFoundError("GitHub 404 on dispatch"),
                                   ForgeError("GitHub 422 on dispatch: payload too large"),
                                   BadInputError("no github token: set OPBOT_GITHUB_TOKEN")],
                         ids=["not-found", "rejected", "no-token"])
def test_errors_no_retry_fixes_fail_at_once(tmp_path: Path, error: Exception) -> None:
    queue = JobQueue(tmp_path / "q.sqlite3")
    dispatch = Dispatcher(error)
    job = queue.enqueue("github:octo/kernels:relu", _plan())
    assert _drain(_settings(queue, dispatch)) == 1
    record = queue.record_of(job)
    assert record.status == "failed"
    assert record.result is not None
    assert record.result["reason"] == str(error)
    assert len(dispatch.sent) == 1


def test_ignore_plans_and_dry_runs_dispatch_nothing(tmp_path: Path) -> None:
    queue = JobQueue(tmp_path / "q.sqlite3")
    dispatch = Dispatcher()
    queue.enqueue("github:octo/kernels:x", _plan(action="ignore"))
    _drain(_settings(queue, dispatch))
    queue.enqueue("github:octo/kernels:relu", _plan())
    _drain(_settings(queue, dispatch, dry_run=True))
    assert dispatch.sent == []
    assert queue.counts() == {"done": 2}


def test_a_waiting_job_holds_back_its_op_only(tmp_path: Path) -> None:
    queue = JobQueue(tmp_path / "q.sqlite3")
    first = queue.enqueue("github:octo/kernels:relu", _plan(op="relu"))
    second = queue.enqueue("github:octo/kernels:relu", _plan(action="regen", op="relu"))
    other = queue.enqueue("github:octo/kernels:gelu", _plan(op="gelu"))
    claimed = queue.claim()
    assert claimed is not None
    assert claimed.id == first
    queue.retry(first, 0.6, {"error": "UnavailableError"})
    # relu's regen waits behind its generate; gelu goes ahead.
    later = queue.claim()
    assert later is not None
    assert later.id == other
    assert queue.claim() is None
    time.sleep(0.7)
    again = queue.claim()
    assert again is not None
    assert (again.id, again.runs) == (first, 2)
    queue.finish(first, True, {})
    last = queue.claim()
    assert last is not None
    assert last.id == second


def test_a_queue_from_before_retries_still_opens(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, "
                   "plan TEXT NOT NULL, status TEXT NOT NULL, runs INTEGER NOT NULL DEFAULT 0, "
                   "result TEXT, created REAL NOT NULL, updated REAL NOT NULL)")
        db.execute("INSERT INTO jobs (key, plan, status, created, updated) "
                   "VALUES ('k', '{}', 'queued', 0, 0)")
    queue = JobQueue(path)
    claimed = queue.claim()
    assert claimed is not None
    assert claimed.key == "k"


def test_retry_policy() -> None:
    policy = RetryPolicy(tries=4, backoff_s=2.0, max_delay_s=5.0)
    outage = UnavailableError("GitLab 503")
    assert [policy.delay(outage, tries) for tries in (1, 2, 3, 4)] == [2.0, 4.0, 5.0, None]
    assert policy.delay(RateLimitedError("429", retry_after_s=3.5), 1) == 3.5
    assert policy.delay(RateLimitedError("429", retry_after_s=3600), 1) == 5.0
    assert policy.delay(RateLimitedError("429"), 2) == 4.0
    assert policy.delay(NotFoundError("404"), 1) is None
    assert policy.delay(BadInputError("no token"), 1) is None


# -- deliveries of dispatched work: the CI system's, never the server's ---------------------
def test_the_server_never_takes_dispatched_work(tmp_path: Path) -> None:
    """GitHub sends repository_dispatch to the App's webhook too: taking it would dispatch
    the same plan again, for ever."""
    queue = JobQueue(tmp_path / "q.sqlite3")
    settings = _settings(queue, Dispatcher())
    client = TestClient(make_app(settings, start_worker=False))
    body = json.dumps({"action": "opbot", "client_payload": {"plan": _plan()},
                       "repository": {"full_name": REPO}}).encode()
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    github = client.post("/webhook/github", content=body, headers={
        "X-GitHub-Event": "repository_dispatch", "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": signature})
    gitlab = client.post("/webhook/gitlab", json={"object_kind": "opbot",
                                                  "plan": _plan(forge="gitlab")},
                         headers={"X-Gitlab-Event": "opbot", "X-Gitlab-Token": SECRET})
    for answer in (github, gitlab):
        assert answer.status_code == 202
        assert (answer.json()["action"], answer.json()["job"]) == ("ignore", None)
    assert queue.counts() == {}


# -- planning GitLab's OPBOT_PLAN file -----------------------------------------------------
def test_gitlab_plans_from_its_dispatch_file() -> None:
    plan = _plan(forge="gitlab")
    assert plan_event("gitlab", "opbot", {"object_kind": "opbot", "plan": plan}) == \
        Plan.from_json(plan)
    not_opbots = plan_event("gitlab", "opbot", {"object_kind": "issue", "plan": plan})
    assert (not_opbots.action, not_opbots.reason) == ("ignore",
                                                      "a file that is not an opbot dispatch")
    other_forge = plan_event("gitlab", "opbot", {"object_kind": "opbot", "plan": _plan()})
    assert other_forge.action == "ignore"
    assert "github plan" in other_forge.reason
    bad = plan_event("gitlab", "opbot", {"object_kind": "opbot", "plan": {"action": "rm"}})
    assert bad.action == "ignore"
    assert "bad plan" in bad.reason


def test_the_gitlab_template_runs_dispatched_pipelines() -> None:
    """The template's job runs on what GitLabForge.dispatch_plan creates."""
    template = yaml.safe_load((CHECKOUT / "actions" / "gitlab" / "opbot.gitlab-ci.yml")
                              .read_text(encoding="utf-8"))
    job = template["opbot-job"]
    assert job["rules"] == [
        {"if": f'$CI_PIPELINE_SOURCE == "{source}" && ${PLAN_VARIABLE} && '
               "$CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH"} for source in ("api", "trigger")]
    assert job["script"] == [f"opbot event --forge gitlab --event {DISPATCH_EVENT} "
                             f'--payload "${PLAN_VARIABLE}" --json']


# -- GitLab: the job carries out the plan the bot handed over, not the one it is shown -----

DEV_TOKEN = "glpat-dev-0000000000000000"


def _gitlab_env(fake: FakeForge, job_token: str | None, **overrides: str) -> dict[str, str]:
    # Whoever starts a pipeline may set any of these but the job token: they prove nothing.
    env = {"OPBOT_GITLAB_TOKEN": fake.token, "OPBOT_GITLAB_URL": fake.gitlab_url,
           "GITLAB_USER_LOGIN": fake.bot, "CI_PROJECT_PATH": REPO, **overrides}
    if job_token is not None:
        env["CI_JOB_TOKEN"] = job_token
    return env


def _pipeline_by(fake: FakeForge, token: str, plan: dict[str, Any]) -> int:
    payload = {"object_kind": "opbot", "plan": plan, "project": {"path_with_namespace": REPO}}
    project = gitlab_client(fake, token).projects.get(REPO)
    created = project.pipelines.create({"ref": "main", "variables": [
        {"key": PLAN_VARIABLE, "value": json.dumps(payload), "variable_type": "file"}]})
    return int(created.id)


def _forged(plan: dict[str, Any]) -> dict[str, Any]:
    return {"object_kind": "opbot", "project": {"path_with_namespace": REPO},
            "plan": {**plan, "actor": "the-maintainer", "number": 99}}


def _regen_plan(world: World, **fields: Any) -> dict[str, Any]:
    found: dict[str, Any] = Plan(action="regen", reason="/regen", forge="gitlab",
                                 event="Note Hook", repo=REPO, number=world.issue.number,
                                 actor="alice", target="issue").to_json()
    return {**found, **fields}


def _developer(fake: FakeForge) -> None:
    fake.add_user("dev", repo=REPO, access_level=30)
    fake.add_token(DEV_TOKEN, "dev")


def _restricted(fake: FakeForge) -> None:
    """As the README asks: only Maintainers set pipeline variables; the bot is one."""
    fake.state.repos[REPO].pipeline_variables_role = "maintainer"
    fake.add_user(fake.bot, repo=REPO, access_level=40)


def test_gitlab_reads_the_dispatched_plan_back_from_the_bots_pipeline(
        fake: FakeForge, world: World) -> None:
    _restricted(fake)
    genuine = _regen_plan(world)
    pipeline = _pipeline_by(fake, fake.token, genuine)  # as dispatch_plan does, as the bot
    job = fake.start_job(REPO, pipeline)
    trusted = registry.plugin("gitlab").trusted_dispatch(
        _forged(genuine), _gitlab_env(fake, job, CI_PIPELINE_ID="1"))
    assert trusted["plan"] == genuine  # the file's edits are not what runs


def _bot_job(fake: FakeForge, plan: dict[str, Any], by: str | None = None) -> str:
    return fake.start_job(REPO, _pipeline_by(fake, fake.token, plan), by=by)


REFUSALS: list[tuple[str, str, Callable[[FakeForge, World], dict[str, str]], str]] = [
    ("a pipeline a developer started, naming the bot as its user", "developer",
     lambda fake, world: _gitlab_env(fake, fake.start_job(
         REPO, _pipeline_by(fake, DEV_TOKEN, _regen_plan(world)))),
     "started by dev, not by the bot"),
    ("a developer's retry of the bot's old job", "maintainer",
     lambda fake, world: _gitlab_env(fake, _bot_job(fake, _regen_plan(
         world, command={"backend": None, "hint": None, "force": True, "problem": None}),
         by="dev")),
     "started by dev, not by the bot"),
    ("a bot pipeline whose plan names another project", "maintainer",
     lambda fake, world: _gitlab_env(fake, _bot_job(fake, _regen_plan(world,
                                                                      repo="octo/other"))),
     "is for 'octo/other'"),
    ("a job token that is no running job's", "maintainer",
     lambda fake, world: _gitlab_env(fake, "glcbt-0123456789abcdef0123"),
     "not a running job"),
    ("a project where developers set pipeline variables (and so the job's environment)",
     "developer", lambda fake, world: _gitlab_env(fake, _bot_job(fake, _regen_plan(world))),
     "Minimum role to use pipeline variables"),
]


@pytest.mark.parametrize(("setting", "env_of", "reason"),
                         [pytest.param(*case[1:], id=case[0]) for case in REFUSALS])
def test_gitlab_refuses_a_plan_the_bot_did_not_hand_to_this_job(
        fake: FakeForge, world: World, tmp_path: Path, setting: str,
        env_of: Callable[[FakeForge, World], dict[str, str]], reason: str) -> None:
    _developer(fake)
    _restricted(fake)
    fake.state.repos[REPO].pipeline_variables_role = setting
    env = env_of(fake, world)
    with pytest.raises(ForgeError, match=reason):
        registry.plugin("gitlab").trusted_dispatch(_forged(_regen_plan(world)), env)

    before = len(fake.effect_log())
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(_forged(_regen_plan(world))), encoding="utf-8")
    run = run_opbot("event", "--forge", "gitlab", "--event", "opbot", "--payload", str(path),
                    "--json", env=env, timeout=120)
    assert run.code != 0
    assert "not carried out" in run.stderr
    assert "Traceback" not in run.stderr
    assert len(fake.effect_log()) == before  # nothing said, nothing pushed


def test_gitlab_dispatch_outside_a_ci_job_is_refused(fake: FakeForge, world: World) -> None:
    with pytest.raises(BadInputError, match="CI_JOB_TOKEN"):
        registry.plugin("gitlab").trusted_dispatch(_forged(_regen_plan(world)),
                                                   _gitlab_env(fake, None))


def test_gitlab_refuses_a_developers_pipeline_variables_where_restricted(
        fake: FakeForge, world: World) -> None:
    _developer(fake)
    _restricted(fake)
    with pytest.raises(gitlab_exceptions.GitlabCreateError) as refused:
        _pipeline_by(fake, DEV_TOKEN, _regen_plan(world))
    assert refused.value.response_code == 403
