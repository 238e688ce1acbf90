"""The bot end to end: signed webhooks into `opbot serve`, work against the fake forge.

The fake speaks GitHub's REST API (validated against GitHub's OpenAPI description) and
GitLab's /api/v4, with real git repositories behind it; `opbot serve` runs as a user would
run it, in its own process, and drives them with unpatched PyGithub and python-gitlab.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fake_llm import ScriptedLLM, reply
from tests.fakeforge import FakeForge
from tests.support import CANDIDATES, DATA
from tests.support_serve import RunningServer, start_serve

SECRET = "e2e-webhook-secret-41c9"
LLM_KEY = "sk-e2e-llm-key-77aa"
REPOSITORY = "octo/kernels"
REFERENCE = ("import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
             "        return torch.relu(x)\n\n\ndef get_inputs():\n"
             "    return [torch.randn(33, 129)]\n")
FORM = (f"### Operator name\n\nrelu\n\n### Reference (PyTorch)\n\n```python\n{REFERENCE}```\n\n"
        "### Target backends\n\n- [X] triton\n- [ ] ascendc\n\n### Shapes and dtypes\n\n"
        "_No response_\n\n### Notes\n\n_No response_\n")
GOOD_KERNEL = (CANDIDATES / "relu__good_tutorial.py").read_text(encoding="utf-8")


def _payload(relative: str) -> dict[str, Any]:
    return json.loads((DATA / "webhooks" / relative).read_text(encoding="utf-8"))


Bot = RunningServer


@pytest.fixture
def fake(fake: FakeForge) -> FakeForge:
    """The shared fake forge (tests/conftest.py), with a repository, a maintainer and a
    triager."""
    fake.add_repo(REPOSITORY)
    fake.add_user("alice", repo=REPOSITORY, role="maintain")
    fake.add_user("bob", repo=REPOSITORY, role="triage")
    return fake


def _start(fake: FakeForge, tmp_path: Path, llm: ScriptedLLM | None = None) -> Bot:
    env = {**os.environ,
           "OPBOT_GITHUB_URL": fake.github_url, "OPBOT_GITHUB_TOKEN": fake.token,
           "OPBOT_GITLAB_URL": fake.gitlab_url, "OPBOT_GITLAB_TOKEN": fake.token,
           "OPBOT_BOT_LOGIN": fake.bot, "OPBOT_GIT_EMAIL": fake.state.users[fake.bot].email,
           "OPBOT_ALLOWED_REPOS": REPOSITORY}
    if llm is not None:
        env.update({"OPBOT_LLM_BASE_URL": llm.base_url, "OPBOT_LLM_MODEL": "scripted",
                    "OPBOT_LLM_API_KEY": LLM_KEY})
    return start_serve("--state-dir", str(tmp_path / "state"), env=env,
                       log=tmp_path / "serve.log", secret=SECRET)


@pytest.fixture
def bot(fake: FakeForge, tmp_path: Path) -> Iterator[Bot]:
    started = _start(fake, tmp_path)
    yield started
    started.stop()


def _labelled(number: int, actor: str = "alice") -> dict[str, Any]:
    payload = _payload("github/issues/labeled.1.json")
    payload["repository"]["full_name"] = REPOSITORY
    payload["issue"]["number"] = number
    payload["issue"]["body"] = FORM
    payload["label"]["name"] = "op-request"
    payload["issue"]["labels"] = [payload["label"]]
    payload["sender"]["login"] = actor
    return payload


def _comment(number: int, comment_id: int, body: str, *, pull: bool) -> dict[str, Any]:
    payload = _payload("github/issue_comment/created.1.json")
    payload["repository"]["full_name"] = REPOSITORY
    payload["issue"]["number"] = number
    if pull:
        payload["issue"]["pull_request"] = {"url": "", "html_url": "", "diff_url": "",
                                            "patch_url": ""}
    payload["comment"].update(id=comment_id, body=body)
    payload["comment"]["user"]["login"] = "alice"
    payload["sender"]["login"] = "alice"
    return payload


def _bot_pulls(fake: FakeForge) -> list[Any]:
    return [issue for issue in fake.state.repos[REPOSITORY].issues.values()
            if issue.pull is not None and issue.pull.head == "opbot/relu"]


def _status_comments(fake: FakeForge, number: int) -> list[str]:
    issue = fake.state.repos[REPOSITORY].issues[number]
    return [comment.body for comment in issue.comments
            if comment.author == fake.bot and comment.body.startswith("<!-- opbot:status -->")]


def _request(fake: FakeForge, bot: Bot) -> tuple[int, int]:
    issue = fake.open_issue(REPOSITORY, "[op] relu", FORM, author="alice", labels=["op-request"])
    assert bot.github("issues", _labelled(issue.number)).status_code == 202
    bot.wait_for_jobs(1)
    pulls = _bot_pulls(fake)
    assert len(pulls) == 1, fake.effect_log()
    return issue.number, pulls[0].number


def test_an_op_request_becomes_one_pull_request(fake: FakeForge, bot: Bot) -> None:
    issue, pull = _request(fake, bot)
    store = fake.state.repos[REPOSITORY].git
    files = store._git("ls-tree", "-r", "--name-only", "opbot/relu").splitlines()
    for relative in ("op.yaml", "reference.py", "triton/relu.py", "tests/test_relu.py",
                     "PERF.md"):
        assert f"ops/relu/{relative}" in files
    assert not [path for path in files if not path.startswith("ops/relu/")
                and path != "README.md"]
    body = fake.state.repos[REPOSITORY].issues[pull].body
    assert "<!-- opbot:marker {" in body
    assert "| case | shapes |" in body
    statuses = _status_comments(fake, issue)
    assert len(statuses) == 1  # one sticky comment, edited in place
    assert f"#{pull}" in statuses[0]
    # The same request again under a new delivery id (the issue form's pair, or a forge
    # that re-sends) joins the job that served it; a redelivery (same id) is dropped.
    delivery = str(uuid.uuid4())
    again = bot.github("issues", _labelled(issue), delivery)
    assert (again.status_code, again.json()["coalesced"]) == (202, True)
    assert bot.github("issues", _labelled(issue), delivery).json()["status"] == "duplicate"
    bot.wait_for_jobs(1)
    assert bot.jobs() == {"done": 1}
    assert len(_bot_pulls(fake)) == 1
    assert len(_status_comments(fake, issue)) == 1


def test_regen_on_the_pull_request_adds_a_commit(fake: FakeForge, bot: Bot) -> None:
    _, pull = _request(fake, bot)
    pushes_before = len(fake.pushes(REPOSITORY))
    comment = fake.add_comment(REPOSITORY, pull, "/regen", author="alice")
    assert bot.github("issue_comment", _comment(pull, comment.id, "/regen", pull=True)
                      ).status_code == 202
    bot.wait_for_jobs(2)
    assert len(fake.pushes(REPOSITORY)) == pushes_before + 1  # PERF.md's timings changed
    assert len(_bot_pulls(fake)) == 1
    (regen,) = [item for item in fake.state.repos[REPOSITORY].issues[pull].comments
                if item.id == comment.id]
    reactions = regen.reactions
    assert [reaction.content for reaction in reactions] == ["eyes"]


def test_no_write_permission_gets_a_polite_refusal(fake: FakeForge, bot: Bot) -> None:
    issue = fake.open_issue(REPOSITORY, "[op] relu", FORM, author="bob", labels=["op-request"])
    assert bot.github("issues", _labelled(issue.number, actor="bob")).status_code == 202
    bot.wait_for_jobs(1)
    assert not _bot_pulls(fake)
    statuses = _status_comments(fake, issue.number)
    assert len(statuses) == 1
    assert "triage permission" in statuses[0]
    assert not fake.pushes(REPOSITORY)


def test_a_person_pushing_to_the_branch_stops_the_bot(fake: FakeForge, bot: Bot) -> None:
    _, pull = _request(fake, bot)
    fake.human_commit(REPOSITORY, "opbot/relu", {"ops/relu/NOTES.md": "tuned by hand\n"},
                      "Hand tuning", author="alice", base="opbot/relu")
    pushes = len(fake.pushes(REPOSITORY))
    comment = fake.add_comment(REPOSITORY, pull, "/regen", author="alice")
    bot.github("issue_comment", _comment(pull, comment.id, "/regen", pull=True))
    bot.wait_for_jobs(2)
    assert len(fake.pushes(REPOSITORY)) == pushes
    assert "A person pushed" in _status_comments(fake, pull)[-1]
    forced = fake.add_comment(REPOSITORY, pull, "/regen --force", author="alice")
    bot.github("issue_comment", _comment(pull, forced.id, "/regen --force", pull=True))
    bot.wait_for_jobs(3)
    assert len(fake.pushes(REPOSITORY)) == pushes + 1


def test_reviews_and_failed_ci_become_feedback(fake: FakeForge, tmp_path: Path) -> None:
    with ScriptedLLM([reply(GOOD_KERNEL), reply(GOOD_KERNEL)]) as llm:
        bot = _start(fake, tmp_path, llm)
        try:
            _, pull = _request(fake, bot)
            # The first job used the LLM too (it is configured): one request so far.
            thread = fake.add_review_thread(REPOSITORY, pull, path="ops/relu/triton/relu.py",
                                            line=3, body="Please use 64-bit offsets here.",
                                            author="alice")
            # The review's own delivery drives the run (its comments' deliveries do not).
            review = _payload("github/pull_request_review/submitted.1.json")
            review["repository"]["full_name"] = REPOSITORY
            review["pull_request"]["number"] = pull
            review["pull_request"]["head"]["ref"] = "opbot/relu"
            review["pull_request"]["head"]["repo"]["full_name"] = REPOSITORY
            review["pull_request"]["base"]["repo"]["full_name"] = REPOSITORY
            review["review"].update(state="commented", body=None)
            review["review"]["user"]["login"] = "alice"
            review["sender"]["login"] = "alice"
            assert bot.github("pull_request_review", review).json()["action"] == \
                "iterate-review"
            bot.wait_for_jobs(2)
            assert "Please use 64-bit offsets here." in llm.requests[-1].text()
            replies = fake.state.repos[REPOSITORY].issues[pull].pull.threads[0].comments
            assert any(comment.author == fake.bot for comment in replies), thread
            head = fake.state.repos[REPOSITORY].git.resolve("opbot/relu")
            assert head is not None
            fake.add_failed_run(REPOSITORY, head, branch="opbot/relu",
                                jobs={"unit-tests": "FAILED test_relu.py::test_big - "
                                      "AssertionError: mismatch at index 7\n"})
            run = _payload("github/workflow_run/completed.1.json")
            run["repository"]["full_name"] = REPOSITORY
            run["workflow_run"].update(head_branch="opbot/relu", conclusion="failure",
                                       head_sha=head)
            run["workflow_run"]["pull_requests"] = [{"number": pull}]
            assert bot.github("workflow_run", run).status_code == 202
            bot.wait_for_jobs(3)
            assert "AssertionError: mismatch at index 7" in llm.requests[-1].text()
            for request in llm.requests:
                assert request.headers["authorization"] == f"Bearer {LLM_KEY}"
                assert LLM_KEY not in json.dumps(request.body)
        finally:
            bot.process.terminate()
            bot.process.wait(timeout=10)
    assert LLM_KEY not in (tmp_path / "serve.log").read_text(encoding="utf-8")


def test_a_gitlab_op_request_becomes_a_merge_request(fake: FakeForge, bot: Bot) -> None:
    issue = fake.open_issue(REPOSITORY, "[op] relu", FORM, author="alice", labels=["op-request"])
    payload = _payload("gitlab/issue_hook.json")
    payload["project"]["path_with_namespace"] = REPOSITORY
    payload["user"]["username"] = "alice"
    payload["object_attributes"].update(iid=issue.number, action="open", description=FORM)
    payload["labels"] = [{"title": "op-request"}]
    assert bot.gitlab("Issue Hook", payload).status_code == 202
    bot.wait_for_jobs(1)
    pulls = _bot_pulls(fake)
    assert len(pulls) == 1, fake.effect_log()
    assert any(effect.startswith("gitlab:") for effect in fake.effect_log())
