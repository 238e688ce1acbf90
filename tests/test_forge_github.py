"""GitHubForge through unpatched PyGithub, over real HTTP, against the fake forge.

Every request PyGithub sends and every reply the fake returns is validated against
GitHub's REST OpenAPI description (the `fake` fixture fails a test that broke it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from github import Auth, Github

from bot.forge import github as github_module
from bot.forge import registry
from bot.forge.base import (
    Comment,
    Commit,
    ConflictError,
    FailedJob,
    ForbiddenError,
    ForgeError,
    Issue,
    NotFoundError,
    PullRequest,
    PullRequestDraft,
    RateLimitedError,
    ReviewThread,
    Target,
)
from bot.forge.common import with_credentials
from bot.forge.github import GitHubForge
from tests.fakeforge import FakeForge, FakeServer, git, require_spec
from tests.fakeforge.scenario import HEAD, KERNEL_PATH, REPO, World, standard_world


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    srv = FakeServer(require_spec())
    yield srv
    srv.close()


@pytest.fixture
def fake(server: FakeServer, tmp_path: Path) -> Iterator[FakeForge]:
    fake = FakeForge(server, tmp_path)
    yield fake
    fake.assert_honest()


@pytest.fixture
def world(fake: FakeForge) -> World:
    return standard_world(fake)


def client(fake: FakeForge, token: str | None = None, **options: Any) -> Github:
    # No pacing (PyGithub waits 0.25 s between requests, 1 s between writes) and no
    # retries: the tests want each call once, now.
    return Github(base_url=fake.github_url, auth=Auth.Token(token or fake.token), retry=None,
                  seconds_between_requests=0, seconds_between_writes=0, **options)


@pytest.fixture
def forge(fake: FakeForge, world: World) -> GitHubForge:
    return GitHubForge(client(fake), REPO)


def web(fake: FakeForge, path: str) -> str:
    return f"{fake.github_url}/_web/github.com/{REPO}{path}"


# -- effects: what each call does, as the fake recorded it ----------------------------------
ISSUE, PULL = Target("issue", 1), Target("pull", 2)
EffectCase = tuple[str, Callable[[GitHubForge, World], Any], list[str]]
EFFECT_CASES: list[EffectCase] = [
    ("comment on issue", lambda f, w: f.create_comment(ISSUE, "On it."),
     ["github:octo/kernels#1:comment:On it."]),
    ("comment on pull", lambda f, w: f.create_comment(PULL, "Updated."),
     ["github:octo/kernels#2:comment:Updated."]),
    ("edit own comment", lambda f, w: f.update_comment(ISSUE, w.bot_comment.id, "Done."),
     ["github:octo/kernels#1:comment-edit:{bot_comment}:Done."]),
    ("react to issue", lambda f, w: f.add_reaction(ISSUE, None, "eyes"),
     ["github:octo/kernels#1:reaction:eyes"]),
    ("react to comment", lambda f, w: f.add_reaction(ISSUE, w.human_comment.id, "rocket"),
     ["github:octo/kernels#1:reaction:comment-{human_comment}:rocket"]),
    ("react to pull", lambda f, w: f.add_reaction(PULL, None, "+1"),
     ["github:octo/kernels#2:reaction:+1"]),
    ("label issue", lambda f, w: f.add_labels(ISSUE, ["opbot", "relu"]),
     ["github:octo/kernels#1:labels:opbot,relu"]),
    ("no labels, no call", lambda f, w: f.add_labels(ISSUE, []), []),
    ("update pull", lambda f, w: f.update_pull_request(2, title="relu v2", body="New."),
     ["github:octo/kernels#2:pr-update:title,body"]),
    ("reply in thread", lambda f, w: f.reply_to_thread(2, str(w.thread.root.id), "Fixed."),
     ["github:octo/kernels#2:reply:{thread}:Fixed."]),
]


@pytest.mark.parametrize(("act", "expected"), [c[1:] for c in EFFECT_CASES],
                         ids=[c[0] for c in EFFECT_CASES])
def test_effects(fake: FakeForge, world: World, forge: GitHubForge,
                 act: Callable[[GitHubForge, World], Any], expected: list[str]) -> None:
    act(forge, world)
    ids = {"bot_comment": world.bot_comment.id, "human_comment": world.human_comment.id,
           "thread": world.thread.root.id}
    assert fake.effect_log() == [e.format(**ids) for e in expected]


def test_labels_keep_existing(fake: FakeForge, forge: GitHubForge) -> None:
    forge.add_labels(ISSUE, ["relu"])
    assert forge.get_issue(1).labels == ("op-request", "relu")


# -- reads: what each call returns, in the shared types --------------------------------------
def test_get_issue(fake: FakeForge, forge: GitHubForge) -> None:
    assert forge.get_issue(1) == Issue(1, "Add a relu kernel", "op: relu\ndtype: float32",
                                       "alice", ("op-request",), "open", web(fake, "/issues/1"))


def test_list_comments(fake: FakeForge, world: World, forge: GitHubForge) -> None:
    human, bot = world.human_comment, world.bot_comment
    assert forge.list_comments(ISSUE) == [
        Comment(human.id, "/opbot generate", "alice",
                web(fake, f"/issues/1#issuecomment-{human.id}")),
        Comment(bot.id, "Working on it.", "opbot", web(fake, f"/issues/1#issuecomment-{bot.id}")),
    ]


def test_list_comments_follows_link_pages(fake: FakeForge, world: World) -> None:
    for n in range(3):
        fake.add_comment(REPO, 1, f"more {n}", author="bob")
    forge = GitHubForge(client(fake, per_page=2), REPO)
    fake.state.requests.clear()
    comments = forge.list_comments(ISSUE)
    assert [c.body for c in comments][-3:] == ["more 0", "more 1", "more 2"]
    assert fake.state.requests == [f"GET /repos/{REPO}/issues/1/comments"] * 3


def test_created_comment_is_the_bots(forge: GitHubForge) -> None:
    comment = forge.create_comment(ISSUE, "Hello")
    assert (comment.body, comment.author) == ("Hello", "opbot")
    assert forge.list_comments(ISSUE)[-1] == comment


@pytest.mark.parametrize(("role", "expected"), [
    ("admin", "admin"), ("maintain", "maintain"), ("write", "write"), ("triage", "triage"),
    ("read", "read"), ("none", "none")])
def test_permission_by_role(fake: FakeForge, forge: GitHubForge, role: Any,
                            expected: str) -> None:
    fake.add_user("carol", repo=REPO, role=role)
    assert forge.permission("carol") == expected


def test_permission_of_strangers(fake: FakeForge, forge: GitHubForge) -> None:
    fake.add_user("dave")  # a GitHub user, not a collaborator
    assert forge.permission("dave") == "none"
    assert forge.permission("nobody-at-all") == "none"  # 404: no such user


def test_permission_falls_back_to_legacy_field() -> None:
    # A custom repository role has a name of its own; `permission` still says enough.
    data = {"permission": "write", "role_name": "kernel-reviewer"}
    assert github_module._permission(data) == "write"


def test_repository_facts(fake: FakeForge, world: World, forge: GitHubForge) -> None:
    assert forge.default_branch() == "main"
    assert forge.push_url() == fake.state.repos[REPO].git.url  # file:// stays as it is
    assert forge.branch_head(HEAD) == world.head_sha
    assert forge.branch_head("no/such-branch") is None
    assert forge.file_content(KERNEL_PATH, HEAD) == "def relu(x):\n    return x\n"
    assert forge.file_content(KERNEL_PATH, "main") is None
    assert forge.file_content("kernels", HEAD) is None  # a directory is no file


def test_push_url_carries_token_for_http() -> None:
    url = with_credentials("https://github.com/o/r.git", "x-access-token", "t/k")
    assert url == "https://x-access-token:t%2Fk@github.com/o/r.git"


def test_pull_requests(fake: FakeForge, world: World, forge: GitHubForge) -> None:
    expected = PullRequest(2, "relu: Triton kernel", "Generated.", "opbot", HEAD, world.head_sha,
                           "main", "open", web(fake, "/pull/2"), ("opbot",))
    assert forge.get_pull_request(2) == expected
    assert forge.find_pull_request(HEAD) == expected
    assert forge.find_pull_request("no/such-branch") is None
    fake.state.repos[REPO].issues[2].state = "closed"
    assert forge.find_pull_request(HEAD) is None


def test_create_pull_request(fake: FakeForge, world: World, forge: GitHubForge) -> None:
    sha = fake.human_commit(REPO, "opbot/gelu", {"kernels/gelu.py": "x"}, "gelu",
                            author="opbot")
    draft = PullRequestDraft("opbot/gelu", "main", "gelu: kernel", "Body", ["opbot", "gelu"])
    created = forge.create_pull_request(draft)
    assert created == PullRequest(3, "gelu: kernel", "Body", "opbot", "opbot/gelu", sha, "main",
                                  "open", web(fake, "/pull/3"), ("opbot", "gelu"))
    assert forge.get_pull_request(3) == created
    assert fake.effect_log() == ["github:octo/kernels#3:pr-open:opbot/gelu->main:gelu: kernel",
                                 "github:octo/kernels#3:labels:opbot,gelu"]


def test_second_pull_request_for_a_branch_conflicts(forge: GitHubForge) -> None:
    with pytest.raises(ConflictError, match="#2"):
        forge.create_pull_request(PullRequestDraft(HEAD, "main", "again", ""))


def test_update_pull_request_without_changes_only_reads(fake: FakeForge,
                                                        forge: GitHubForge) -> None:
    assert forge.update_pull_request(2).title == "relu: Triton kernel"
    assert fake.effect_log() == []


def test_review_threads(fake: FakeForge, world: World, forge: GitHubForge) -> None:
    root, reply = world.thread.comments
    assert forge.review_threads(2) == [ReviewThread(
        str(root.id),
        (Comment(root.id, "Please clamp at zero.", "alice",
                 web(fake, f"/pull/2#discussion_r{root.id}")),
         Comment(reply.id, "+1, and add a test.", "bob",
                 web(fake, f"/pull/2#discussion_r{reply.id}"))),
        KERNEL_PATH, 2, False)]


def test_review_threads_follow_link_pages(fake: FakeForge, world: World) -> None:
    fake.add_review_thread(REPO, 2, path="kernels/other.py", line=7, body="And here?",
                           author="bob")
    forge = GitHubForge(client(fake, per_page=2), REPO)
    fake.state.requests.clear()
    threads = forge.review_threads(2)
    assert [(t.path, len(t.comments)) for t in threads] == [(KERNEL_PATH, 2),
                                                           ("kernels/other.py", 1)]
    assert fake.state.requests == [f"GET /repos/{REPO}/pulls/2/comments"] * 2


def test_reply_joins_the_thread(world: World, forge: GitHubForge) -> None:
    reply = forge.reply_to_thread(2, str(world.thread.root.id), "Clamped.")
    assert reply.author == "opbot"
    (thread,) = forge.review_threads(2)
    assert thread.comments[-1] == reply


def test_reply_to_unknown_thread(forge: GitHubForge) -> None:
    with pytest.raises(NotFoundError):
        forge.reply_to_thread(2, "not-a-thread", "?")
    with pytest.raises(NotFoundError):
        forge.reply_to_thread(2, "999999", "?")


# -- CI ------------------------------------------------------------------------------------
def test_failed_jobs(fake: FakeForge, world: World, forge: GitHubForge) -> None:
    long_log = "".join(f"line {n}\n" for n in range(5000)) + "FAILED test_relu\n"
    run = fake.add_failed_run(REPO, world.head_sha, jobs={"build": long_log},
                              passing=["lint"], branch=HEAD)
    fake.add_failed_run(REPO, "0" * 40, jobs={"other": "not this sha"})
    check = fake.add_check_run(REPO, world.head_sha, "external-ci", title="3 tests failed",
                               summary="test_relu_grad")
    fake.add_check_run(REPO, world.head_sha, "docs", conclusion="success")
    build = run.jobs[0]
    assert forge.failed_jobs(world.head_sha) == [
        FailedJob("CI / build", web(fake, f"/actions/runs/{run.id}/job/{build.id}"),
                  long_log[-20_000:]),
        FailedJob("external-ci", web(fake, f"/runs/{check.id}"),
                  "3 tests failed\n\ntest_relu_grad"),
    ]


def test_no_failed_jobs(world: World, forge: GitHubForge) -> None:
    assert forge.failed_jobs(world.head_sha) == []


# -- errors --------------------------------------------------------------------------------
def test_not_found(forge: GitHubForge) -> None:
    with pytest.raises(NotFoundError, match="404"):
        forge.get_issue(999)
    with pytest.raises(NotFoundError):
        forge.get_pull_request(1)  # an issue, not a pull request


def test_missing_repository(fake: FakeForge, world: World) -> None:
    with pytest.raises(NotFoundError):
        GitHubForge(client(fake), "octo/missing").default_branch()


def test_forbidden(fake: FakeForge, world: World, forge: GitHubForge) -> None:
    with pytest.raises(ForbiddenError):
        forge.update_comment(ISSUE, world.human_comment.id, "not mine to edit")


@pytest.mark.parametrize(("limit", "retry_after"), [
    ({"status": 403, "reset_in": 30}, 30.0),  # primary: X-RateLimit-Remaining: 0
    ({"status": 403, "retry_after": 7}, 7.0),  # secondary: Retry-After
    ({"status": 429, "retry_after": 11}, 11.0),
])
def test_rate_limited(fake: FakeForge, forge: GitHubForge, limit: dict[str, int],
                      retry_after: float) -> None:
    fake.rate_limit_next("github", **limit)
    with pytest.raises(RateLimitedError) as caught:
        forge.get_issue(1)
    assert caught.value.retry_after_s == pytest.approx(retry_after, abs=2)
    assert forge.get_issue(1).number == 1  # only the next request was limited


@pytest.mark.parametrize("status", [500, 502, 503])
def test_server_errors(fake: FakeForge, forge: GitHubForge, status: int) -> None:
    fake.fail_next("github", status=status)
    with pytest.raises(ForgeError) as caught:
        forge.list_comments(ISSUE)
    assert type(caught.value) is ForgeError
    assert str(status) in str(caught.value)


def _messages(exc: BaseException | None) -> str:
    text = ""
    while exc is not None:
        text += f"{exc!s} {exc!r} "
        exc = exc.__cause__ or exc.__context__
    return text


def test_token_never_in_messages(fake: FakeForge, world: World) -> None:
    token = "ghp_" + "S3cr3t" * 6
    fake.add_token(token, "opbot")
    forge = GitHubForge(client(fake, token=token), REPO)
    fake.fail_next("github", status=502, message=f"upstream said: {token}")
    with pytest.raises(ForgeError) as caught:
        forge.get_issue(1)
    assert token not in str(caught.value)
    assert "***" in str(caught.value)
    wrong = GitHubForge(client(fake, token="ghp_wrong_" + "x" * 30), REPO)
    with pytest.raises(ForgeError) as bad:
        wrong.get_issue(1)
    assert "ghp_wrong_" not in _messages(bad.value)
    assert token not in _messages(bad.value)


# -- git: a real push, seen through the API --------------------------------------------------
def test_push_then_read_back(fake: FakeForge, world: World, forge: GitHubForge,
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
    assert forge.commits_since("opbot/gelu", "main") == [
        Commit(pushed, "Add gelu", "opbot", "opbot@users.example.com", "opbot"),
        Commit(human, "Fix gelu", "Alice", "alice@users.example.com", "alice"),
    ]
    # The client's push is an effect; the fixture's commit is not.
    assert fake.effect_log() == [f"git:octo/kernels:push:refs/heads/opbot/gelu:{pushed}"]


def test_commits_since_unknown_branch(forge: GitHubForge) -> None:
    with pytest.raises(NotFoundError):
        forge.commits_since("no/such-branch", "main")


# -- construction --------------------------------------------------------------------------
def test_connect(fake: FakeForge, world: World) -> None:
    forge = GitHubForge.connect(fake.github_url, fake.token, REPO)
    assert (forge.name, forge.repo, forge.default_branch()) == ("github", REPO, "main")


def test_registry(fake: FakeForge, world: World) -> None:
    forge = registry.connect("github", url=fake.github_url, token=fake.token, repo=REPO)
    assert isinstance(forge, GitHubForge)
    with pytest.raises(ValueError, match="valid forges: github, gitlab"):
        registry.connect("bitbucket", url=None, token="t", repo=REPO)
