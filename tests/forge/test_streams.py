"""What the forges really send for one human act — pairs, triples, bursts, redeliveries,
the bot's own echoes — planned and queued as ONE job (or none).

Every stream is built from real deliveries (@octokit/webhooks-examples; GitLab's documented
examples), varied the way the real services vary them, and fed both to `opbot event
--dry-run` (the Actions path, one process per delivery) and to the server's webhook route
(the queue that coalesces them).
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from bot.identity import Identities
from bot.queue import JobQueue, RequestKey
from bot.server import ServerSettings, make_app
from tests.forge.test_events import FORM_BODY, OP_LABEL, _actions_app, _load, _validate_github
from tests.support import run_opbot

SECRET = "stream-secret"
BOT_APP = "opbot[bot]"
Stream = list[tuple[str, dict[str, Any]]]


def _sender(payload: dict[str, Any], login: str, kind: str = "User") -> None:
    payload["sender"] = {**payload["sender"], "login": login, "type": kind}


def issue_form_pair() -> Stream:
    """An issue made from the form: `opened` with the label on it, then `labeled`."""
    opened = _load("github/issues/opened.1.json")
    opened["issue"]["labels"] = [OP_LABEL]
    opened["issue"]["body"] = FORM_BODY
    labeled = _load("github/issues/labeled.1.json")
    labeled["issue"] = copy.deepcopy(opened["issue"])
    labeled["label"] = copy.deepcopy(OP_LABEL)
    return [("issues", opened), ("issues", labeled)]


def _bot_pull(payload: dict[str, Any], fork: str | None = None) -> None:
    pull = payload["pull_request"]
    pull["head"]["ref"] = "opbot/gelu"
    if fork is not None:
        pull["head"]["repo"] = {**pull["head"]["repo"], "full_name": fork}


def review_burst(state: str = "changes_requested", body: str | None = "Use 64-bit offsets",
                 comments: int = 3, fork: str | None = None, sender: str = "Codertocat",
                 sender_type: str = "User") -> Stream:
    """One review with N inline comments: the review plus N review comments."""
    review = _load("github/pull_request_review/submitted.1.json")
    review["review"]["state"], review["review"]["body"] = state, body
    _bot_pull(review, fork)
    _sender(review, sender, sender_type)
    stream: Stream = [("pull_request_review", review)]
    for index in range(comments):
        comment = _load("github/pull_request_review_comment/created.1.json")
        comment["comment"]["body"] = f"inline remark {index}"
        comment["comment"]["id"] = 1000 + index
        _bot_pull(comment, fork)
        _sender(comment, sender, sender_type)
        stream.append(("pull_request_review_comment", comment))
    return stream


def ci_failure(head_sha: str = "ec26c3e57ca3a959ca5aad62de7213c562f8c821",
               fork: str | None = None) -> Stream:
    """One failed Actions run: check_run (per job), check_suite, workflow_run."""
    check_run = _load("github/check_run/completed.1.json")
    check_run["check_run"].update(conclusion="failure", head_sha=head_sha)
    check_run["check_run"]["check_suite"].update(head_branch="opbot/gelu", head_sha=head_sha,
                                                 conclusion="failure")
    suite = _load("github/check_suite/completed.1.json")
    suite["check_suite"].update(head_branch="opbot/gelu", conclusion="failure",
                                head_sha=head_sha, app=_actions_app(suite))
    run = _load("github/workflow_run/completed.1.json")
    run["workflow_run"].update(head_branch="opbot/gelu", conclusion="failure",
                               head_sha=head_sha)
    run["workflow_run"]["pull_requests"] = copy.deepcopy(suite["check_suite"]["pull_requests"])
    run["repository"] = copy.deepcopy(run["workflow_run"]["repository"])
    if fork is not None:
        run["workflow_run"]["head_repository"]["full_name"] = fork
    return [("check_run", check_run), ("check_suite", suite), ("workflow_run", run)]


def _comment(body: str, *, on_pull: bool, sender: str = "Codertocat",
             sender_type: str = "User") -> Stream:
    payload = _load("github/issue_comment/created.1.json")
    payload["comment"]["body"] = body
    payload["comment"]["user"]["login"] = sender
    _sender(payload, sender, sender_type)
    if on_pull:
        payload["issue"]["pull_request"] = {"url": "u", "html_url": "h", "diff_url": "d",
                                            "patch_url": "p", "merged_at": None}
    else:
        payload["issue"]["labels"] = [OP_LABEL]
    return [("issue_comment", payload)]


def _gitlab_note(note: str, *, kind: str | None, user: str = "alice",
                 fork: bool = False) -> Stream:
    payload = _load("gitlab/note_hook_merge_request.json")
    payload["object_attributes"].update(note=note, type=kind)
    payload["user"]["username"] = user
    payload["merge_request"]["source_branch"] = "opbot/gelu"
    if fork:
        payload["merge_request"]["source_project_id"] = 999
    return [("Note Hook", payload)]


def gitlab_review_burst(comments: int = 3, user: str = "alice") -> Stream:
    """GitLab has no review event: a submitted review is N notes (and a summary note)."""
    stream: Stream = []
    for index in range(comments):
        note = _gitlab_note(f"inline remark {index}", kind="DiffNote", user=user)[0][1]
        note["object_attributes"]["id"] = 5000 + index
        stream.append(("Note Hook", note))
    return stream


# -- planning, one delivery at a time (`opbot event --dry-run`) ----------------------------

def _dry_run_actions(forge: str, stream: Stream, tmp_path: Path,
                     env: dict[str, str] | None = None) -> list[str]:
    actions = []
    for index, (event, payload) in enumerate(stream):
        if forge == "github":
            _validate_github(event, payload)
        path = tmp_path / f"delivery-{index}.json"
        path.write_text(json.dumps(payload), encoding="utf-8")
        run = run_opbot("event", "--forge", forge, "--event", event, "--payload", str(path),
                        "--dry-run", "--json", env=env)
        assert run.code == 0, run.stderr
        actions.append(json.loads(run.stdout)["action"])
    return actions


DRY_RUN_CASES: list[tuple[str, str, Callable[[], Stream], dict[str, int]]] = [
    ("the issue-form pair is one generation", "github", issue_form_pair,
     {"generate": 1, "ignore": 1}),
    ("the pair in the other order", "github", lambda: issue_form_pair()[::-1],
     {"generate": 1, "ignore": 1}),
    ("an approval saying LGTM", "github", lambda: review_burst("approved", "LGTM", 0),
     {"ignore": 1}),
    ("a review with a summary and 3 inline comments is one run", "github", review_burst,
     {"iterate-review": 1, "ignore": 3}),
    ("a fork PR's review", "github", lambda: review_burst(fork="mallory/Hello-World"),
     {"ignore": 4}),
    ("the bot's own review reply (an App)", "github",
     lambda: review_burst("commented", None, 1, sender=BOT_APP, sender_type="Bot"),
     {"ignore": 2}),
    ("one CI failure is one fix", "github", ci_failure, {"iterate-ci": 1, "ignore": 2}),
    ("a fork's CI failure", "github", lambda: ci_failure(fork="mallory/octo-repo"),
     {"ignore": 3}),
    ("the bot's own /regen echo", "github",
     lambda: _comment("/regen", on_pull=False, sender=BOT_APP, sender_type="Bot"),
     {"ignore": 1}),
    ("a person's diff note is a review", "gitlab",
     lambda: _gitlab_note("please clamp", kind="DiffNote"), {"iterate-review": 1}),
    ("the bot's own diff note", "gitlab",
     lambda: _gitlab_note("opbot pushed abc", kind="DiffNote", user="opbot"), {"ignore": 1}),
    ("a fork MR's /regen", "gitlab", lambda: _gitlab_note("/regen", kind=None, fork=True),
     {"ignore": 1}),
    ("a fork MR's diff note", "gitlab",
     lambda: _gitlab_note("please clamp", kind="DiffNote", fork=True), {"ignore": 1}),
]


@pytest.mark.parametrize(("forge", "stream", "expected"),
                         [pytest.param(*case[1:], id=case[0]) for case in DRY_RUN_CASES])
def test_dry_run_plans_real_streams(forge: str, stream: Callable[[], Stream],
                                    expected: dict[str, int], tmp_path: Path) -> None:
    # The bot's identity is what a dry run is told (it asks no forge): the GitLab bot's
    # token user is "opbot".
    env = {"OPBOT_BOT_LOGIN": "opbot"} if forge == "gitlab" else {"OPBOT_BOT_LOGIN": ""}
    # No token: a dry run then reads nothing from a forge (a CI's own token must not count).
    env.update({name: "" for name in ("OPBOT_GITHUB_TOKEN", "GITHUB_TOKEN",
                                      "OPBOT_GITLAB_TOKEN", "GITLAB_TOKEN")})
    assert Counter(_dry_run_actions(forge, stream(), tmp_path, env)) == expected


# -- the server: one job per request -------------------------------------------------------

def _client(tmp_path: Path, settle_s: float = 0.0, bot: str | None = None
            ) -> tuple[TestClient, JobQueue]:
    queue = JobQueue(tmp_path / "queue.sqlite3")
    identities = Identities({"OPBOT_BOT_LOGIN": bot or ""},
                            lookup=lambda forge, env: BOT_APP if forge == "github" else "opbot")
    settings = ServerSettings(secrets=[SECRET], queue=queue, dry_run=True,
                              identities=identities, review_settle_s=settle_s)
    return TestClient(make_app(settings, start_worker=False)), queue


def _deliver(client: TestClient, forge: str, event: str, payload: dict[str, Any],
             delivery: str | None = None) -> dict[str, Any]:
    body = json.dumps(payload).encode()
    if forge == "github":
        headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
                   "X-Hub-Signature-256": "sha256=" + hmac.new(SECRET.encode(), body,
                                                               hashlib.sha256).hexdigest()}
    else:
        headers = {"X-Gitlab-Event": event, "X-Gitlab-Token": SECRET,
                   "Idempotency-Key": delivery or str(uuid.uuid4())}
    answer = client.post(f"/webhook/{forge}", content=body, headers=headers)
    assert answer.status_code in (200, 202), answer.text
    result: dict[str, Any] = answer.json()
    return result


SERVER_CASES: list[tuple[str, str, Callable[[], Stream], int]] = [
    ("issue-form pair", "github", issue_form_pair, 1),
    ("issue-form pair, labeled first", "github", lambda: issue_form_pair()[::-1], 1),
    ("the pair delivered twice (at-least-once)", "github", lambda: issue_form_pair() * 2, 1),
    ("review + 3 comments", "github", review_burst, 1),
    ("two reviews in a row", "github", lambda: review_burst() + review_burst(), 1),
    ("an approval", "github", lambda: review_burst("approved", "LGTM", 0), 0),
    ("check_run + check_suite + workflow_run", "github", ci_failure, 1),
    ("the same failure seen again", "github", lambda: ci_failure() + ci_failure(), 1),
    ("two failing head SHAs", "github",
     lambda: ci_failure("a" * 40) + ci_failure("b" * 40), 2),
    ("a fork's review, comment and CI", "github",
     lambda: review_burst(fork="mallory/x") + ci_failure(fork="mallory/x"), 0),
    ("the bot's own replies (learnt from its token)", "github",
     lambda: review_burst("commented", None, 2, sender=BOT_APP, sender_type="Bot"), 0),
    ("a GitLab review burst", "gitlab", gitlab_review_burst, 1),
    ("the GitLab bot's own notes (learnt from its token)", "gitlab",
     lambda: gitlab_review_burst(user="opbot"), 0),
]


@pytest.mark.parametrize(("forge", "stream", "jobs"),
                         [pytest.param(*case[1:], id=case[0]) for case in SERVER_CASES])
def test_one_request_is_one_job(forge: str, stream: Callable[[], Stream], jobs: int,
                                tmp_path: Path) -> None:
    client, queue = _client(tmp_path, settle_s=30.0)
    with client:
        for event, payload in stream():
            _deliver(client, forge, event, payload)
    assert queue.counts().get("queued", 0) == jobs, queue.counts()


def test_a_redelivery_keeps_its_id_and_makes_nothing(tmp_path: Path) -> None:
    client, queue = _client(tmp_path)
    (event, payload), = ci_failure()[2:]
    with client:
        first = _deliver(client, "github", event, payload, delivery="d-1")
        again = _deliver(client, "github", event, payload, delivery="d-1")
    assert (first["action"], again["status"]) == ("iterate-ci", "duplicate")
    assert queue.counts() == {"queued": 1}


def test_the_override_login_wins_over_the_token(tmp_path: Path) -> None:
    """OPBOT_BOT_LOGIN (dry runs, odd setups) names the bot even where a token would."""
    client, queue = _client(tmp_path, bot="alice")
    with client:
        for event, payload in gitlab_review_burst(user="alice"):
            _deliver(client, "gitlab", event, payload)
    assert queue.counts() == {}


# -- the queue's rules ---------------------------------------------------------------------

def test_requests_join_the_job_that_serves_them(tmp_path: Path) -> None:
    queue = JobQueue(tmp_path / "q.sqlite3")
    every = ("queued", "running", "done", "failed")
    first = queue.submit("k", {"n": 1}, RequestKey("r", joins=every))
    assert not first.coalesced
    assert queue.submit("k", {"n": 2}, RequestKey("r", joins=every)) == type(first)(first.job,
                                                                                    True)
    claimed = queue.claim()
    assert claimed is not None
    assert claimed.id == first.job
    queue.finish(claimed.id, True, {})
    assert queue.submit("k", {"n": 3}, RequestKey("r", joins=every)).coalesced  # done: joins
    only_queued = RequestKey("q", joins=("queued",))
    queue.submit("k2", {}, only_queued)
    running = queue.claim()
    assert running is not None
    assert not queue.submit("k2", {}, only_queued).coalesced  # running: a new job waits
    assert queue.submit("k2", {}, only_queued).coalesced


def test_a_burst_waits_to_settle_and_each_join_restarts_the_wait(tmp_path: Path) -> None:
    queue = JobQueue(tmp_path / "q.sqlite3")
    review = RequestKey("review", settle_s=3600.0)
    queue.submit("k", {}, review)
    assert queue.claim() is None  # waiting for the rest of the burst
    assert queue.submit("k", {}, review).coalesced
    assert queue.counts() == {"queued": 1}


def test_cancel_drops_queued_work_and_flags_running_work(tmp_path: Path) -> None:
    queue = JobQueue(tmp_path / "q.sqlite3")
    running = queue.submit("gh:o/r:relu", {"a": 1}).job
    queue.submit("gh:o/r:relu", {"a": 2})
    other = queue.submit("gh:o/r:gelu", {"a": 3}).job
    control = queue.submit("control:gh:o/r:relu", {"a": "cancel"}).job
    claimed = queue.claim()
    assert claimed is not None
    assert claimed.id == running
    steering = queue.claim(control=True)
    assert steering is not None  # not behind the running job
    assert steering.id == control
    assert queue.cancel("gh:o/r:relu") == 2
    assert queue.cancel_requested(running)
    assert not queue.cancel_requested(other)
    assert queue.counts() == {"running": 2, "cancelled": 1, "queued": 1}


def _own_check_suite() -> Stream:
    """The bot's App reports progress as a check run; its failure ends the App's suite."""
    suite = ci_failure()[1][1]
    suite["check_suite"]["app"] = {**suite["check_suite"]["app"], "slug": "opbot",
                                   "name": "opbot"}
    _sender(suite, BOT_APP, "Bot")
    return [("check_suite", suite)]


def test_the_bots_own_check_suite_is_no_ci_to_fix(tmp_path: Path) -> None:
    assert _dry_run_actions("github", _own_check_suite(), tmp_path,
                            {"OPBOT_BOT_LOGIN": BOT_APP}) == ["ignore"]
    client, queue = _client(tmp_path)
    with client:
        (event, payload), = _own_check_suite()
        assert _deliver(client, "github", event, payload)["action"] == "ignore"
    assert queue.counts() == {}


@pytest.mark.parametrize(("body", "command"), [
    ("/regen", "regen"),
    ("Thanks!\n\n   /regen --force", "regen"),  # three spaces: still a command
    ("Example:\n\n    /regen --force", None),  # four: an indented code block
    ("\t/regen", None),
    ("<!--\n/regen --force\n-->", None),  # a hidden HTML comment
    ("<!-- unclosed\n/regen", None),
    ("please do not\u2028/regen", None),  # a Unicode line separator is no new line
    ("```\n/cancel\n```", None),
    ("> /help", None),
    ("/help", "help"),
    ("/cancel", "cancel"),
    ("/assign @me", None),  # another bot's command
    # fences close only with the same character, at least as long, with no info string
    ("````markdown\n```\n/regen --force\n```\n````", None),
    ("```\n~~~\n/regen --force\n```", None),
    ("```\nx:\n```python\n/regen --force\n```", None),
    ("```inline```\n\n```\n/regen --force\n```", None),  # inline code opens no fence
    ("```not a fence```\n/regen", "regen"),  # ... and hides no line after it
    ("> I think we should\n/regen --force", None),  # a quote's lazy continuation
    ("`\n/regen\n`", None),  # a code span over three lines
    ("<pre>\n/regen --force\n</pre>", None),
    ("<div hidden>\n/regen --force\n</div>", None),
    ("[//]: # (\n/regen\n)", None),  # the "comment" idiom: a link definition
    ("| a |\n|---|\n/regen", None),  # a table row
    ("- /regen", None),
    ("<!-- note -->\n/regen", "regen"),  # after a closed comment: seen by all
    ("thanks\r\n/regen --force\r\n", "regen"),
    ("hi\r/regen", "regen"),  # a lone CR ends a line in CommonMark
    ("/regen\u00a0--force", "regen"),  # a no-break space is a space to the reader
    ("/regen\u200b", "regen"),  # a zero-width space is nothing
    ("\ufeff/regen", "regen"),
    # what the forges render out of the lines: GitLab's quote, math, footnotes, <details>
    (">>>\nThe bot's help says:\n/regen --force\n>>>\nShould we?", None),
    ("$$\n/regen --force\n$$", None),
    ("LGTM\n\n[^c]: x\n/regen --force", None),
    ("<details><summary>log</summary>\n\n/regen --force\n\n</details>", None),
    ("Thanks <details>\n/regen --force\n</details>", None),
    ("<details><summary>log</summary>\n\nx\n\n</details>\n\n/regen", "regen"),
])
def test_commands_are_read_where_a_person_wrote_them(body: str, command: str | None) -> None:
    from bot.commands import find_command

    found = find_command(body)
    assert (found.name if found else None) == command
    if found is not None and found.regen is not None:
        assert found.regen.problem is None
        assert found.regen.force == ("force" in body)


def test_the_bots_own_help_reads_as_no_command() -> None:
    from bot.commands import COMMANDS, find_command

    rendered = "\n\n".join(help.render() for help in COMMANDS.values())
    assert find_command(rendered) is None


def test_only_the_bots_server_hands_plans_to_ci() -> None:
    """A repository_dispatch names an actor whose permission the job checks: one sent by
    anyone but the bot (any collaborator with write access can send one) is ignored."""
    from bot.events import Plan, plan_event

    plan = Plan(action="regen", reason="r", forge="github", event="issue_comment",
                repo="Codertocat/Hello-World", number=1, actor="the-maintainer",
                target="issue")
    payload = {"action": "opbot", "client_payload": {"plan": plan.to_json()},
               "repository": {"full_name": "Codertocat/Hello-World"},
               "sender": {"login": "mallory", "type": "User"}}
    forged = plan_event("github", "repository_dispatch", payload, bot_login=BOT_APP)
    assert (forged.action, forged.reason) == ("ignore", "an opbot dispatch sent by mallory, "
                                              "not by the bot")
    payload["sender"] = {"login": BOT_APP, "type": "Bot"}
    assert plan_event("github", "repository_dispatch", payload, bot_login=BOT_APP) == plan
    # Not knowing who it is (no OPBOT_BOT_LOGIN, its token's user unreadable), the bot
    # cannot tell its own dispatch from a forged one: none is obeyed.
    payload["sender"] = {"login": "mallory", "type": "User"}
    unknown = plan_event("github", "repository_dispatch", payload, bot_login=None)
    assert unknown.action == "ignore"
    assert "login is unknown" in unknown.reason


def test_a_forge_of_its_own_secret_refuses_the_shared_one(tmp_path: Path) -> None:
    """GitLab sends its secret in clear (X-Gitlab-Token): with a GitHub secret of its own,
    whoever read a GitLab delivery cannot sign a GitHub one."""
    from bot.server import forge_secrets_from_environment, secrets_from_environment

    env = {"OPBOT_GITHUB_WEBHOOK_SECRET": "github-only", "OPBOT_WEBHOOK_SECRET": SECRET}
    queue = JobQueue(tmp_path / "queue.sqlite3")
    settings = ServerSettings(secrets=secrets_from_environment(env), queue=queue,
                              dry_run=True, forge_secrets=forge_secrets_from_environment(env),
                              identities=Identities({"OPBOT_BOT_LOGIN": "opbot"}))
    (event, payload), = _comment("/help", on_pull=False)
    body = json.dumps(payload).encode()
    with TestClient(make_app(settings, start_worker=False)) as client:
        def github(secret: str) -> int:
            signature = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
            return client.post("/webhook/github", content=body, headers={
                "X-GitHub-Event": event, "X-GitHub-Delivery": str(uuid.uuid4()),
                "X-Hub-Signature-256": f"sha256={signature}"}).status_code
        assert github(SECRET) == 401
        assert github("github-only") == 202
        (note_event, note), = _gitlab_note("/help", kind=None)
        assert client.post("/webhook/gitlab", content=json.dumps(note).encode(), headers={
            "X-Gitlab-Event": note_event, "X-Gitlab-Token": SECRET}).status_code == 202
    assert secrets_from_environment({"OPBOT_GITLAB_WEBHOOK_SECRET": "x"}) == []


def test_a_hint_keeps_its_code_spans_and_no_markers() -> None:
    from bot.commands import find_command

    found = find_command('/regen --hint "use `tl.dot` please"')
    assert found is not None
    assert found.regen is not None
    assert found.regen.hint == "use `tl.dot` please"


def test_a_delivery_that_could_not_be_taken_in_is_not_a_duplicate_later(
        tmp_path: Path) -> None:
    queue = JobQueue(tmp_path / "queue.sqlite3")
    failures = [RuntimeError("the forge answered something odd")]

    def settle(plan: Any) -> Any:
        if failures:
            raise failures.pop()
        return plan

    settings = ServerSettings(secrets=[SECRET], queue=queue, dry_run=True, settle=settle,
                              identities=Identities({"OPBOT_BOT_LOGIN": BOT_APP}))
    (event, payload), = _comment("/help", on_pull=False)
    body = json.dumps(payload).encode()
    headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": "delivery-1",
               "X-Hub-Signature-256": "sha256=" + hmac.new(SECRET.encode(), body,
                                                           hashlib.sha256).hexdigest()}
    app = make_app(settings, start_worker=False)
    with TestClient(app, raise_server_exceptions=False) as client:
        assert client.post("/webhook/github", content=body, headers=headers).status_code == 500
        again = client.post("/webhook/github", content=body, headers=headers)
    assert again.status_code == 202
    assert again.json()["action"] == "help"
