"""What both forges promise: each test here runs against GitHubForge (unpatched PyGithub)
and GitLabForge (unpatched python-gitlab), over real HTTP, against the fake forge.

On GitHub every request and reply is validated against GitHub's REST OpenAPI description
(the `fake` fixture fails a test that broke it); GitLab's side follows the documented shapes
and needs no spec file. What only one forge has stays in test_github.py and
test_gitlab.py; what differs between the two lives in tests/support_forge.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.events import Plan, plan_event
from bot.forge import registry
from bot.forge.base import (
    Comment,
    Commit,
    ConflictError,
    Dispatch,
    ForbiddenError,
    Forge,
    ForgeError,
    Issue,
    NotFoundError,
    PullRequest,
    PullRequestDraft,
    RateLimitedError,
    Target,
    UnavailableError,
)
from bot.forge.common import with_credentials
from tests.fakeforge import FakeForge, git
from tests.fakeforge.scenario import HEAD, KERNEL_PATH, REPO, World
from tests.forge.each_forge import each_forge, fake_server_of_kind  # noqa: F401 (fixtures)
from tests.support_forge import ForgeKind, ci_deliveries


@pytest.fixture
def forge(kind: ForgeKind, fake: FakeForge, world: World) -> Forge:
    return kind.forge(fake)


ISSUE, PULL = Target("issue", 1), Target("pull", 2)


# -- effects: what each call does, as the fake recorded it ----------------------------------
EffectCase = tuple[str, str, Callable[[Any, World], Any], list[str]]
EFFECT_CASES: list[EffectCase] = [
    ("github", "comment on issue", lambda f, w: f.create_comment(ISSUE, "On it."),
     ["github:octo/kernels#1:comment:On it."]),
    ("github", "comment on pull", lambda f, w: f.create_comment(PULL, "Updated."),
     ["github:octo/kernels#2:comment:Updated."]),
    ("github", "edit own comment", lambda f, w: f.update_comment(ISSUE, w.bot_comment.id, "Done."),
     ["github:octo/kernels#1:comment-edit:{bot_comment}:Done."]),
    ("github", "react to issue", lambda f, w: f.add_reaction(ISSUE, None, "eyes"),
     ["github:octo/kernels#1:reaction:eyes"]),
    ("github", "react to comment",
     lambda f, w: f.add_reaction(ISSUE, w.human_comment.id, "rocket"),
     ["github:octo/kernels#1:reaction:comment-{human_comment}:rocket"]),
    ("github", "react to pull", lambda f, w: f.add_reaction(PULL, None, "+1"),
     ["github:octo/kernels#2:reaction:+1"]),
    ("github", "label issue", lambda f, w: f.add_labels(ISSUE, ["opbot", "relu"]),
     ["github:octo/kernels#1:labels:opbot,relu"]),
    ("github", "no labels, no call", lambda f, w: f.add_labels(ISSUE, []), []),
    ("github", "update pull", lambda f, w: f.update_pull_request(2, title="relu v2", body="New."),
     ["github:octo/kernels#2:pr-update:title,body"]),
    ("github", "reply in thread",
     lambda f, w: f.reply_to_thread(2, str(w.thread.root.id), "Fixed."),
     ["github:octo/kernels#2:reply:{thread}:Fixed."]),
    ("gitlab", "note on issue", lambda f, w: f.create_comment(ISSUE, "On it."),
     ["gitlab:octo/kernels#1:comment:On it."]),
    ("gitlab", "note on merge request", lambda f, w: f.create_comment(PULL, "Updated."),
     ["gitlab:octo/kernels!2:comment:Updated."]),
    ("gitlab", "edit own note", lambda f, w: f.update_comment(ISSUE, w.bot_comment.id, "Done."),
     ["gitlab:octo/kernels#1:comment-edit:{bot_comment}:Done."]),
    ("gitlab", "award issue", lambda f, w: f.add_reaction(ISSUE, None, "eyes"),
     ["gitlab:octo/kernels#1:reaction:eyes"]),
    ("gitlab", "award note", lambda f, w: f.add_reaction(ISSUE, w.human_comment.id, "+1"),
     ["gitlab:octo/kernels#1:reaction:note-{human_comment}:thumbsup"]),
    ("gitlab", "award merge request", lambda f, w: f.add_reaction(PULL, None, "-1"),
     ["gitlab:octo/kernels!2:reaction:thumbsdown"]),
    ("gitlab", "label issue", lambda f, w: f.add_labels(ISSUE, ["opbot", "relu"]),
     ["gitlab:octo/kernels#1:labels:opbot,relu"]),
    ("gitlab", "label merge request", lambda f, w: f.add_labels(PULL, ["ready"]),
     ["gitlab:octo/kernels!2:labels:ready"]),
    ("gitlab", "no labels, no call", lambda f, w: f.add_labels(ISSUE, []), []),
    ("gitlab", "update merge request",
     lambda f, w: f.update_pull_request(2, title="relu v2", body="New"),
     ["gitlab:octo/kernels!2:pr-update:title,body"]),
    ("gitlab", "reply in discussion",
     lambda f, w: f.reply_to_thread(2, w.thread.discussion_id, "Fixed."),
     ["gitlab:octo/kernels!2:reply:{thread}:Fixed."]),
]


@pytest.mark.parametrize(("kind", "act", "expected"), [(c[0], *c[2:]) for c in EFFECT_CASES],
                         ids=[f"{c[0]}-{c[1]}" for c in EFFECT_CASES], indirect=["kind"])
def test_effects(fake: FakeForge, world: World, kind: ForgeKind, forge: Forge,
                 act: Callable[[Forge, World], Any], expected: list[str]) -> None:
    act(forge, world)
    ids = {"bot_comment": world.bot_comment.id, "human_comment": world.human_comment.id,
           "thread": kind.thread_id(world)}
    assert fake.effect_log() == [e.format(**ids) for e in expected]


def test_labels_keep_existing(forge: Forge) -> None:
    forge.add_labels(ISSUE, ["relu"])
    assert forge.get_issue(1).labels == ("op-request", "relu")


# -- reads: what each call returns, in the shared types --------------------------------------
def test_get_issue(fake: FakeForge, kind: ForgeKind, forge: Forge) -> None:
    assert forge.get_issue(1) == Issue(1, "Add a relu kernel", "op: relu\ndtype: float32",
                                       "alice", ("op-request",), "open", kind.issue_url(fake, 1))


def test_list_comments(fake: FakeForge, world: World, kind: ForgeKind, forge: Forge) -> None:
    human, bot = world.human_comment, world.bot_comment
    assert forge.list_comments(ISSUE) == [
        Comment(human.id, "/opbot generate", "alice", kind.comment_url(fake, 1, human.id)),
        Comment(bot.id, "Working on it.", "opbot", kind.comment_url(fake, 1, bot.id)),
    ]


def test_list_comments_follows_link_pages(fake: FakeForge, world: World,
                                          kind: ForgeKind) -> None:
    for n in range(3):
        fake.add_comment(REPO, 1, f"more {n}", author="bob")
    forge = kind.forge(fake, per_page=2)
    if kind.name == "gitlab":
        forge.default_branch()  # project info cached; only the notes pages remain
    fake.state.requests.clear()
    comments = forge.list_comments(ISSUE)
    assert [c.body for c in comments][-3:] == ["more 0", "more 1", "more 2"]
    assert fake.state.requests == [kind.comment_pages] * 3


def test_permission_of_strangers(fake: FakeForge, forge: Forge) -> None:
    fake.add_user("dave")  # a user of the forge, not a collaborator or member
    assert forge.permission("dave") == "none"
    assert forge.permission("nobody-at-all") == "none"  # no such user


def test_repository_facts(fake: FakeForge, world: World, forge: Forge) -> None:
    assert forge.default_branch() == "main"
    assert forge.push_url() == fake.state.repos[REPO].git.url  # file:// stays as it is
    assert forge.branch_head(HEAD) == world.head_sha
    assert forge.branch_head("no/such-branch") is None
    assert forge.file_content(KERNEL_PATH, HEAD) == "def relu(x):\n    return x\n"
    assert forge.file_content(KERNEL_PATH, "main") is None
    assert forge.file_content("kernels", HEAD) is None  # a directory is no file


def test_git_credentials_stay_out_of_the_url(fake: FakeForge, world: World, kind: ForgeKind,
                                             forge: Forge) -> None:
    assert fake.token not in forge.push_url()
    assert forge.git_credentials() == (kind.git_username, fake.token)


@pytest.mark.parametrize(("url", "user", "token", "expected"), [
    ("https://github.com/o/r.git", "x-access-token", "t/k",
     "https://x-access-token:t%2Fk@github.com/o/r.git"),
    ("https://gitlab.example.com/g/p.git", "oauth2", "tok",
     "https://oauth2:tok@gitlab.example.com/g/p.git"),
], ids=["github", "gitlab"])
def test_push_url_carries_token_for_http(url: str, user: str, token: str,
                                         expected: str) -> None:
    assert with_credentials(url, user, token) == expected


def test_pull_requests(fake: FakeForge, world: World, kind: ForgeKind, forge: Forge) -> None:
    expected = PullRequest(2, "relu: Triton kernel", "Generated.", "opbot", HEAD, world.head_sha,
                           "main", "open", kind.pull_url(fake, 2), ("opbot",),
                           from_fork=False, head_repo=REPO)
    assert forge.get_pull_request(2) == expected
    assert forge.find_pull_request(HEAD) == expected
    assert forge.find_pull_request("no/such-branch") is None
    kind.end_pull(fake, 2)  # GitHub: closed; GitLab: merged
    assert forge.get_pull_request(2).state == kind.ended_state
    assert forge.find_pull_request(HEAD) is None


def test_create_pull_request(fake: FakeForge, world: World, kind: ForgeKind,
                             forge: Forge) -> None:
    sha = fake.human_commit(REPO, "opbot/gelu", {"kernels/gelu.py": "x"}, "gelu",
                            author="opbot")
    draft = PullRequestDraft("opbot/gelu", "main", "gelu: kernel", "Body", ["opbot", "gelu"])
    created = forge.create_pull_request(draft)
    assert created == PullRequest(3, "gelu: kernel", "Body", "opbot", "opbot/gelu", sha, "main",
                                  "open", kind.pull_url(fake, 3), ("opbot", "gelu"),
                                  head_repo=REPO)
    assert forge.get_pull_request(3) == created
    assert fake.effect_log() == [f"{kind.effect_target(3)}:pr-open:opbot/gelu->main:gelu: kernel",
                                 f"{kind.effect_target(3)}:labels:opbot,gelu"]


def test_second_pull_request_for_a_branch_conflicts(kind: ForgeKind, forge: Forge) -> None:
    with pytest.raises(ConflictError, match=f"{kind.pull_sigil}2"):
        forge.create_pull_request(PullRequestDraft(HEAD, "main", "again", ""))


def test_reply_joins_the_thread(world: World, kind: ForgeKind, forge: Forge) -> None:
    reply = forge.reply_to_thread(2, kind.thread_id(world), "Clamped.")
    assert reply.author == "opbot"
    (thread,) = forge.review_threads(2)
    assert thread.comments[-1] == reply


def test_resolved_threads(fake: FakeForge, world: World, forge: Forge) -> None:
    fake.add_review_thread(REPO, 2, path="kernels/other.py", line=7, body="Done?",
                           author="bob", resolved=True)
    assert [(t.path, t.resolved) for t in forge.review_threads(2)] == [
        (KERNEL_PATH, False), ("kernels/other.py", True)]
    world.thread.resolved = True
    assert [t.resolved for t in forge.review_threads(2)] == [True, True]


def test_reply_to_unknown_thread(kind: ForgeKind, forge: Forge) -> None:
    for thread_id in kind.unknown_threads:
        with pytest.raises(NotFoundError):
            forge.reply_to_thread(2, thread_id, "?")


# -- CI ------------------------------------------------------------------------------------
def test_no_failed_jobs(world: World, forge: Forge) -> None:
    assert forge.failed_jobs(world.head_sha) == []


# -- CI: handing a plan over (opbot serve --dispatch) --------------------------------------
def _plan(kind: ForgeKind) -> dict[str, Any]:
    return Plan(action="regen", reason="/regen on a bot pull request", forge=kind.name,
                event="issue_comment", repo=REPO, number=2, op="relu", actor="alice",
                target="pull", head_branch=HEAD, comment_id=7).to_json()


def test_dispatch_plan(fake: FakeForge, world: World, kind: ForgeKind, forge: Forge) -> None:
    plan = _plan(kind)
    sent = forge.dispatch_plan(plan)
    (delivery,) = ci_deliveries(fake)
    assert len(fake.effect_log()) == 1  # one request's worth of work, nothing else
    assert delivery.repo == REPO
    assert delivery.ref in (None, "main")  # the default branch's CI, never a PR's
    # What the CI job plans from the delivery is the plan that was handed over (the job
    # knows who the bot is: a dispatch from an unknown sender is ignored).
    assert plan_event(kind.name, delivery.event, delivery.payload,
                      bot_login=fake.bot) == Plan.from_json(plan)
    # GitLab names the pipeline it created; GitHub's 204 names no run.
    if kind.name == "gitlab":
        assert sent.id is not None
        assert sent.url == kind.web(fake, f"/-/pipelines/{sent.id}")
    else:
        assert sent == Dispatch()


def test_dispatch_plan_errors(fake: FakeForge, world: World, kind: ForgeKind,
                              forge: Forge) -> None:
    plan = _plan(kind)
    fake.fail_next(kind.name, status=502)
    with pytest.raises(UnavailableError):  # worth another try: the queue retries it
        forge.dispatch_plan(plan)
    with pytest.raises(NotFoundError):
        kind.forge(fake, repo="octo/missing").dispatch_plan(plan)
    fake.add_user("reader", repo=REPO, role="read")
    fake.add_token("reader-token-0123", "reader")
    with pytest.raises(ForbiddenError):  # dispatching needs write (GitLab: developer)
        kind.forge(fake, token="reader-token-0123").dispatch_plan(plan)
    assert ci_deliveries(fake) == []


# -- errors --------------------------------------------------------------------------------
def test_not_found(forge: Forge) -> None:
    with pytest.raises(NotFoundError, match="404"):
        forge.get_issue(999)
    with pytest.raises(NotFoundError):
        forge.get_pull_request(1)  # an issue, not a pull/merge request


def test_missing_repository(fake: FakeForge, world: World, kind: ForgeKind) -> None:
    with pytest.raises(NotFoundError):
        kind.forge(fake, repo="octo/missing").default_branch()


def test_forbidden(world: World, forge: Forge) -> None:
    with pytest.raises(ForbiddenError):
        forge.update_comment(ISSUE, world.human_comment.id, "not mine to edit")


RATE_LIMITS: list[tuple[str, dict[str, int], float]] = [
    ("github", {"status": 403, "reset_in": 30}, 30.0),  # primary: X-RateLimit-Remaining: 0
    ("github", {"status": 403, "retry_after": 7}, 7.0),  # secondary: Retry-After
    ("github", {"status": 429, "retry_after": 11}, 11.0),
    ("gitlab", {"retry_after": 9}, 9.0),  # 429 with Retry-After
    ("gitlab", {"reset_in": 40}, 40.0),  # 429, Retry-After and RateLimit-Reset agree
]


@pytest.mark.parametrize(("kind", "limit", "retry_after"), RATE_LIMITS, indirect=["kind"])
def test_rate_limited(fake: FakeForge, kind: ForgeKind, forge: Forge, limit: dict[str, int],
                      retry_after: float) -> None:
    fake.rate_limit_next(kind.name, **limit)
    with pytest.raises(RateLimitedError) as caught:
        forge.get_issue(1)  # python-gitlab would sleep and retry; both forges say so instead
    assert caught.value.retry_after_s == pytest.approx(retry_after, abs=2)
    assert forge.get_issue(1).number == 1  # only the next request was limited


@pytest.mark.parametrize("status", [500, 502, 503])
def test_server_errors(fake: FakeForge, kind: ForgeKind, forge: Forge, status: int) -> None:
    fake.fail_next(kind.name, status=status)
    with pytest.raises(UnavailableError) as caught:  # the forge's fault: worth retrying
        forge.list_comments(ISSUE)
    assert str(status) in str(caught.value)


def _messages(exc: BaseException | None) -> str:
    text = ""
    while exc is not None:
        text += f"{exc!s} {exc!r} "
        exc = exc.__cause__ or exc.__context__
    return text


def test_token_never_in_messages(fake: FakeForge, world: World, kind: ForgeKind) -> None:
    fake.add_token(kind.token, "opbot")
    forge = kind.forge(fake, token=kind.token)
    fake.fail_next(kind.name, status=502, message=f"upstream said: {kind.token}")
    with pytest.raises(ForgeError) as caught:
        forge.get_issue(1)
    assert kind.token not in str(caught.value)
    assert "***" in str(caught.value)
    wrong = kind.forge(fake, token=kind.wrong_token)
    with pytest.raises(ForgeError) as bad:
        wrong.get_issue(1)
    assert kind.wrong_token_prefix not in _messages(bad.value)
    assert kind.token not in _messages(bad.value)


# -- git: a real push, seen through the API --------------------------------------------------
def test_push_then_read_back(fake: FakeForge, world: World, kind: ForgeKind, forge: Forge,
                             tmp_path: Path) -> None:
    work = tmp_path / "work"
    git("clone", "--quiet", forge.push_url(), str(work))
    bot = {"GIT_AUTHOR_NAME": "opbot", "GIT_AUTHOR_EMAIL": fake.state.users["opbot"].email,
           "GIT_COMMITTER_NAME": "opbot", "GIT_COMMITTER_EMAIL": "opbot@users.example.com"}
    git("checkout", "--quiet", "-b", "opbot/gelu", cwd=work)
    (work / "gelu.py").write_text("def gelu(x): ...\n")
    git("add", "gelu.py", cwd=work)
    git("commit", "--quiet", "-m", "Add gelu", cwd=work, env=bot)
    git("push", "--quiet", forge.push_url(), "opbot/gelu", cwd=work)
    pushed = git("rev-parse", "HEAD", cwd=work).strip()

    assert forge.branch_head("opbot/gelu") == pushed
    human = fake.human_commit(REPO, "opbot/gelu", {"gelu.py": "fixed\n"}, "Fix gelu",
                              author="alice")
    # GitLab's commits name no account: there the email tells the bot's from a human's.
    logins = ("opbot", "alice") if kind.commit_logins else (None, None)
    assert forge.commits_since("opbot/gelu", "main") == [
        Commit(pushed, "Add gelu", "opbot", "opbot@users.example.com", logins[0]),
        Commit(human, "Fix gelu", "Alice", "alice@users.example.com", logins[1]),
    ]
    # The client's push is an effect; the fixture's commit is not.
    assert fake.effect_log() == [f"git:octo/kernels:push:refs/heads/opbot/gelu:{pushed}"]


# -- construction --------------------------------------------------------------------------
def test_connect(fake: FakeForge, world: World, kind: ForgeKind) -> None:
    forge = kind.forge_class.connect(kind.api_url(fake), fake.token, REPO)
    assert (forge.name, forge.repo, forge.default_branch()) == (kind.name, REPO, "main")


def test_registry(fake: FakeForge, world: World, kind: ForgeKind) -> None:
    forge = registry.connect(kind.name, url=kind.api_url(fake), token=fake.token, repo=REPO)
    assert isinstance(forge, kind.forge_class)
    assert forge.get_issue(1).author == "alice"
    with pytest.raises(ValueError, match="valid forges: github, gitlab"):
        registry.connect("bitbucket", url=None, token="t", repo=REPO)
