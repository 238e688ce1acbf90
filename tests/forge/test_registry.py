"""The forge registry: every forge is reached through it by name, a new forge is one plugin
listed there (here a minimal Forgejo registered by the test alone, no other file touched),
and a name no plugin answers to is refused clearly wherever it turns up."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from bot.errors import BadInputError
from bot.event_input import read_event
from bot.events import Plan, plan_event
from bot.forge import registry
from bot.forge.base import Forge
from bot.forge.inbound import (
    Dispatched,
    GenericComment,
    Inbound,
    OpRequest,
    PlanContext,
    Planner,
    ignored,
)
from bot.forge.payload import get, integer, labels, text
from bot.forge.plugin import CiInput
from bot.queue import JobQueue
from bot.server import ServerSettings, make_app
from tests.support import run_opbot

SECRET = "forgejo-webhook-secret"
FORM_BODY = "### Operator name\n\nGELU\n"
REPO = "acme/kernels"


# -- a third forge, as its package's plugin.py would hold it ---------------------------------
def _issues(payload: Mapping[str, Any], event: str, context: PlanContext) -> Inbound:
    issue = get(payload, "issue")
    if get(payload, "action") != "label_updated" or context.trigger_label not in labels(
            get(issue, "labels")):
        return ignored("forgejo", event, text(get(payload, "repository", "full_name")),
                       "not labelled for the bot")
    return OpRequest(forge="forgejo", event=event,
                     repo=text(get(payload, "repository", "full_name")),
                     number=integer(get(issue, "number")),
                     actor=text(get(payload, "sender", "login")),
                     body=text(get(issue, "body")) or "", trigger_label=context.trigger_label)


def _dispatch(payload: Mapping[str, Any], event: str, context: PlanContext) -> Inbound:
    return Dispatched(forge="forgejo", event=event,
                      repo=text(get(payload, "repository", "full_name")),
                      plan=get(payload, "plan"))


def _issue_comment(payload: Mapping[str, Any], event: str, context: PlanContext) -> Inbound:
    issue = get(payload, "issue")
    return GenericComment(
        forge="forgejo", event=event, repo=text(get(payload, "repository", "full_name")),
        number=integer(get(issue, "number")), target="issue",
        body=text(get(payload, "comment", "body")) or "",
        author=text(get(payload, "comment", "user", "login")), author_is_bot=False,
        comment_id=integer(get(payload, "comment", "id")), source="comment",
        issue_labels=labels(get(issue, "labels")), trigger_label=context.trigger_label)


@dataclass
class Forgejo:
    """Forgejo signs deliveries with a bare hex HMAC-SHA256 in X-Forgejo-Signature."""

    name: str = "forgejo"
    title: str = "Forgejo"
    token_variables: tuple[str, ...] = ("OPBOT_FORGEJO_TOKEN",)
    url_variables: tuple[str, ...] = ("OPBOT_FORGEJO_URL",)
    dispatch_event: str = "opbot_dispatch"
    rejection: str = "missing or wrong Forgejo signature"
    signs_body: bool = True
    connected: list[tuple[str | None, str, str]] = field(default_factory=list)

    def trusted_dispatch(self, payload: Any, environ: Mapping[str, str]) -> Any:
        return payload

    def authenticate(self, headers: Mapping[str, str], body: bytes,
                     secrets: Sequence[str]) -> bool:
        sent = headers.get("x-forgejo-signature") or ""
        return any(hmac.compare_digest(_sign(body, secret), sent) for secret in secrets)

    def event_name(self, headers: Mapping[str, str]) -> str | None:
        return headers.get("x-forgejo-event")

    def delivery_id(self, headers: Mapping[str, str]) -> str | None:
        return headers.get("x-forgejo-delivery")

    def planner(self, event: str) -> Planner | None:
        planners = {"issues": _issues, "issue_comment": _issue_comment,
                    self.dispatch_event: _dispatch}
        return planners.get(event)

    def repo_of(self, payload: Any) -> str | None:
        return text(get(payload, "repository", "full_name"))

    def detect(self, environ: Mapping[str, str]) -> bool:
        return environ.get("FORGEJO_ACTIONS") == "true"

    def ci_input(self, environ: Mapping[str, str]) -> CiInput:
        path = environ.get("FORGEJO_EVENT_PATH")
        return CiInput(event=environ.get("FORGEJO_EVENT_NAME"),
                       payload_path=Path(path) if path else None, system="Forgejo Actions")

    def connect(self, url: str | None, token: str, repo: str) -> Forge:
        self.connected.append((url, token, repo))
        return _NoForge()

    def identity(self, url: str | None, token: str) -> str:
        return "forgejo-bot"


class _NoForge:
    """What a test needs of a connected forge: nothing; only that connect was reached."""


def _sign(body: bytes, secret: str = SECRET) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@pytest.fixture
def forgejo(monkeypatch: pytest.MonkeyPatch) -> Forgejo:
    plugin = Forgejo()
    monkeypatch.setitem(registry.PLUGINS, plugin.name, plugin)
    return plugin


def _labelled_issue() -> dict[str, Any]:
    return {"action": "label_updated", "sender": {"login": "alice"},
            "repository": {"full_name": REPO},
            "issue": {"number": 7, "body": FORM_BODY, "labels": [{"name": "op-request"}]}}


def _regen_comment() -> dict[str, Any]:
    return {"action": "created", "repository": {"full_name": REPO},
            "issue": {"number": 7, "labels": [{"name": "op-request"}]},
            "comment": {"id": 99, "body": "/regen --hint 'two passes'",
                        "user": {"login": "alice"}}}


# -- the registry -----------------------------------------------------------------------------
def test_every_forge_is_listed_by_its_own_name() -> None:
    assert registry.names() == ("github", "gitlab")
    for name in registry.names():
        assert registry.plugin(name).name == name


def test_a_third_forge_is_planned_through_the_shared_rules(forgejo: Forgejo) -> None:
    generate = plan_event("forgejo", "issues", _labelled_issue())
    assert (generate.action, generate.forge, generate.repo, generate.number, generate.op,
            generate.actor) == ("generate", "forgejo", REPO, 7, "gelu", "alice")
    regen = plan_event("forgejo", "issue_comment", _regen_comment())
    assert (regen.action, regen.comment_id) == ("regen", 99)
    assert regen.command is not None
    assert regen.command.hint == "two passes"
    unknown = plan_event("forgejo", "push", {"repository": {"full_name": REPO}})
    assert (unknown.action, unknown.repo) == ("ignore", REPO)
    malformed = plan_event("forgejo", "issues", {"action": "label_updated", "issue": []})
    assert malformed.action == "ignore"


def test_a_third_forge_is_served_at_its_own_webhook(forgejo: Forgejo, tmp_path: Path) -> None:
    queue = JobQueue(tmp_path / "queue.sqlite3")
    client = TestClient(make_app(ServerSettings(secrets=[SECRET], queue=queue, dry_run=True),
                                 start_worker=False))
    body = json.dumps(_labelled_issue()).encode()
    delivery = str(uuid.uuid4())
    headers = {"X-Forgejo-Event": "issues", "X-Forgejo-Delivery": delivery,
               "X-Forgejo-Signature": _sign(body)}
    accepted = client.post("/webhook/forgejo", content=body, headers=headers)
    assert accepted.status_code == 202, accepted.text
    assert accepted.json()["action"] == "generate"
    assert accepted.json()["job"] is not None
    again = client.post("/webhook/forgejo", content=body, headers=headers)
    assert (again.status_code, again.json()["status"]) == (200, "duplicate")
    forged = client.post("/webhook/forgejo", content=body,
                         headers={**headers, "X-Forgejo-Signature": _sign(body, "guess")})
    assert (forged.status_code, forged.json()["reason"]) == (401, forgejo.rejection)
    no_event = client.post("/webhook/forgejo", content=body,
                           headers={"X-Forgejo-Signature": _sign(body)})
    assert no_event.status_code == 400
    assert "not a Forgejo delivery" in no_event.json()["reason"]
    assert queue.counts() == {"queued": 1}


def test_a_third_forges_dispatched_work_is_left_to_its_ci(forgejo: Forgejo,
                                                          tmp_path: Path) -> None:
    queue = JobQueue(tmp_path / "queue.sqlite3")
    client = TestClient(make_app(ServerSettings(secrets=[SECRET], queue=queue, dry_run=True),
                                 start_worker=False))
    plan = Plan(action="scan", reason="r", forge="forgejo", event="schedule", repo=REPO)
    body = json.dumps({"repository": {"full_name": REPO}, "plan": plan.to_json()}).encode()
    assert plan_event("forgejo", forgejo.dispatch_event, json.loads(body)) == plan
    answer = client.post("/webhook/forgejo", content=body, headers={
        "X-Forgejo-Event": forgejo.dispatch_event, "X-Forgejo-Signature": _sign(body)})
    assert (answer.status_code, answer.json()["action"]) == (202, "ignore")
    assert queue.counts() == {}


def test_a_third_forge_reads_its_own_ci_environment(forgejo: Forgejo, tmp_path: Path) -> None:
    path = tmp_path / "event.json"
    path.write_text(json.dumps(_labelled_issue()), encoding="utf-8")
    delivery = read_event(None, None, None, {"FORGEJO_ACTIONS": "true",
                                             "FORGEJO_EVENT_NAME": "issues",
                                             "FORGEJO_EVENT_PATH": str(path)})
    assert (delivery.forge, delivery.event) == ("forgejo", "issues")
    assert delivery.plan({}).action == "generate"
    with pytest.raises(BadInputError, match=r"pass --event NAME \(or run in Forgejo Actions\)"):
        read_event("forgejo", None, None, {})


def test_a_third_forge_is_connected_with_its_own_variables(forgejo: Forgejo) -> None:
    from bot.jobs import forge_from_environment

    plan = Plan(action="scan", reason="test", forge="forgejo", event="schedule", repo=REPO)
    forge_from_environment(plan, {"OPBOT_FORGEJO_TOKEN": "t0k", "OPBOT_FORGEJO_URL": "u"})
    assert forgejo.connected == [("u", "t0k", REPO)]
    with pytest.raises(BadInputError, match="no forgejo token: set OPBOT_FORGEJO_TOKEN"):
        forge_from_environment(plan, {"OPBOT_GITHUB_TOKEN": "t0k"})


# -- unknown names ----------------------------------------------------------------------------
def test_an_unknown_forge_is_refused_with_the_valid_names() -> None:
    message = "unknown forge 'bitbucket'; valid forges: github, gitlab"
    with pytest.raises(registry.UnknownForgeError, match=message) as raised:
        registry.plugin("bitbucket")
    assert isinstance(raised.value, BadInputError)  # the CLI's exit 2, a clean message
    with pytest.raises(registry.UnknownForgeError, match=message):
        plan_event("bitbucket", "issues", _labelled_issue())
    with pytest.raises(registry.UnknownForgeError, match=message):
        read_event("bitbucket", "issues", None, {})
    with pytest.raises(registry.UnknownForgeError, match=message):
        registry.connect_from_environment("bitbucket", REPO, {"OPBOT_GITHUB_TOKEN": "t"})


def test_an_unknown_forge_is_never_taken_for_another() -> None:
    """A plan travelling through a queue or CI keeps its forge's name; no name becomes
    GitLab (or GitHub) by default."""
    plan = Plan.from_json({"action": "scan", "reason": "r", "forge": "bitbucket",
                           "event": "schedule", "repo": REPO})
    assert plan.forge == "bitbucket"
    with pytest.raises(ValueError, match="names no forge"):
        Plan.from_json({"action": "scan", "reason": "r", "event": "schedule"})


def test_the_server_refuses_an_unknown_forges_webhook(tmp_path: Path) -> None:
    client = TestClient(make_app(ServerSettings(secrets=[SECRET],
                                                queue=JobQueue(tmp_path / "q.sqlite3"),
                                                dry_run=True), start_worker=False))
    answer = client.post("/webhook/bitbucket", json={}, headers={"X-Event-Key": "issue"})
    assert answer.status_code == 404
    assert answer.json()["reason"] == "unknown forge 'bitbucket'; valid forges: github, gitlab"


def test_the_cli_offers_the_registered_forges_only(tmp_path: Path) -> None:
    path = tmp_path / "payload.json"
    path.write_text("{}", encoding="utf-8")
    run = run_opbot("event", "--forge", "bitbucket", "--event", "issues", "--payload",
                    str(path), "--dry-run", "--json")
    assert run.code == 2
    assert "'bitbucket' is not one of 'github', 'gitlab'" in run.stderr


def test_an_environment_of_two_cis_must_name_its_forge() -> None:
    with pytest.raises(BadInputError, match=r"several forges \(github, gitlab\): pass --forge"):
        read_event(None, "schedule", None, {"GITHUB_ACTIONS": "true", "GITLAB_CI": "true"})
