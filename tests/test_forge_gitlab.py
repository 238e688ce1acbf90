"""GitLabForge through unpatched python-gitlab, over real HTTP, against the fake forge.

GitLab publishes no OpenAPI for these endpoints; the fake follows the documented shapes
(see tests/fakeforge/gitlab_render.py). The GitLab front end needs no spec file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gitlab
import pytest

from bot.forge import gitlab as gitlab_module
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
from bot.forge.gitlab import GitLabForge
from tests.fakeforge import FakeForge, FakeServer, git
from tests.fakeforge.scenario import HEAD, KERNEL_PATH, REPO, World, standard_world


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    srv = FakeServer(None)  # GitLab only: GitHub's description is not needed here
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


def client(fake: FakeForge, token: str | None = None, **options: Any) -> gitlab.Gitlab:
    return gitlab.Gitlab(url=fake.gitlab_url, private_token=token or fake.token, **options)


@pytest.fixture
def forge(fake: FakeForge, world: World) -> GitLabForge:
    return GitLabForge(client(fake), REPO)


def web(fake: FakeForge, path: str) -> str:
    return f"{fake.gitlab_url}/{REPO}{path}"


# -- effects -------------------------------------------------------------------------------
ISSUE, MR = Target("issue", 1), Target("pull", 2)
EffectCase = tuple[str, Callable[[GitLabForge, World], Any], list[str]]
EFFECT_CASES: list[EffectCase] = [
    ("note on issue", lambda f, w: f.create_comment(ISSUE, "On it."),
     ["gitlab:octo/kernels#1:comment:On it."]),
    ("note on merge request", lambda f, w: f.create_comment(MR, "Updated."),
     ["gitlab:octo/kernels!2:comment:Updated."]),
    ("edit own note", lambda f, w: f.update_comment(ISSUE, w.bot_comment.id, "Done."),
     ["gitlab:octo/kernels#1:comment-edit:{bot_comment}:Done."]),
    ("award issue", lambda f, w: f.add_reaction(ISSUE, None, "eyes"),
     ["gitlab:octo/kernels#1:reaction:eyes"]),
    ("award note", lambda f, w: f.add_reaction(ISSUE, w.human_comment.id, "+1"),
     ["gitlab:octo/kernels#1:reaction:note-{human_comment}:thumbsup"]),
    ("award merge request", lambda f, w: f.add_reaction(MR, None, "-1"),
     ["gitlab:octo/kernels!2:reaction:thumbsdown"]),
    ("label issue", lambda f, w: f.add_labels(ISSUE, ["opbot", "relu"]),
     ["gitlab:octo/kernels#1:labels:opbot,relu"]),
    ("label merge request", lambda f, w: f.add_labels(MR, ["ready"]),
     ["gitlab:octo/kernels!2:labels:ready"]),
    ("no labels, no call", lambda f, w: f.add_labels(ISSUE, []), []),
    ("update merge request", lambda f, w: f.update_pull_request(2, title="relu v2", body="New"),
     ["gitlab:octo/kernels!2:pr-update:title,body"]),
    ("reply in discussion",
     lambda f, w: f.reply_to_thread(2, w.thread.discussion_id, "Fixed."),
     ["gitlab:octo/kernels!2:reply:{discussion}:Fixed."]),
]


@pytest.mark.parametrize(("act", "expected"), [c[1:] for c in EFFECT_CASES],
                         ids=[c[0] for c in EFFECT_CASES])
def test_effects(fake: FakeForge, world: World, forge: GitLabForge,
                 act: Callable[[GitLabForge, World], Any], expected: list[str]) -> None:
    act(forge, world)
    ids = {"bot_comment": world.bot_comment.id, "human_comment": world.human_comment.id,
           "discussion": world.thread.discussion_id}
    assert fake.effect_log() == [e.format(**ids) for e in expected]


@pytest.mark.parametrize(("reaction", "emoji"), [
    ("+1", "thumbsup"), ("-1", "thumbsdown"), ("eyes", "eyes"), ("rocket", "rocket"),
    ("confused", "confused")])
def test_reactions_are_award_emoji(fake: FakeForge, world: World, forge: GitLabForge,
                                   reaction: Any, emoji: str) -> None:
    forge.add_reaction(ISSUE, None, reaction)
    assert fake.effect_log() == [f"gitlab:octo/kernels#1:reaction:{emoji}"]


def test_labels_keep_existing(forge: GitLabForge) -> None:
    forge.add_labels(ISSUE, ["relu"])
    assert forge.get_issue(1).labels == ("op-request", "relu")


# -- reads ---------------------------------------------------------------------------------
def test_get_issue(fake: FakeForge, forge: GitLabForge) -> None:
    assert forge.get_issue(1) == Issue(1, "Add a relu kernel", "op: relu\ndtype: float32",
                                       "alice", ("op-request",), "open", web(fake, "/-/issues/1"))


def test_list_comments(fake: FakeForge, world: World, forge: GitLabForge) -> None:
    human, bot = world.human_comment, world.bot_comment
    assert forge.list_comments(ISSUE) == [
        Comment(human.id, "/opbot generate", "alice", web(fake, f"/-/issues/1#note_{human.id}")),
        Comment(bot.id, "Working on it.", "opbot", web(fake, f"/-/issues/1#note_{bot.id}")),
    ]


def test_merge_request_comments_leave_out_diff_notes(fake: FakeForge,
                                                     forge: GitLabForge) -> None:
    note = fake.add_comment(REPO, 2, "Looks good", author="bob")
    assert forge.list_comments(MR) == [
        Comment(note.id, "Looks good", "bob", web(fake, f"/-/merge_requests/2#note_{note.id}"))]


def test_list_comments_follows_link_pages(fake: FakeForge, world: World) -> None:
    for n in range(3):
        fake.add_comment(REPO, 1, f"more {n}", author="bob")
    forge = GitLabForge(client(fake, per_page=2), REPO)
    forge.default_branch()  # project info cached; only the notes pages remain
    fake.state.requests.clear()
    assert [c.body for c in forge.list_comments(ISSUE)][-3:] == ["more 0", "more 1", "more 2"]
    notes = "GET /gitlab/api/v4/projects/octo%2Fkernels/issues/1/notes"
    assert fake.state.requests == [notes] * 3


@pytest.mark.parametrize(("access_level", "inherited", "expected"), [
    (50, False, "admin"), (40, False, "maintain"), (30, False, "write"), (20, False, "read"),
    (10, False, "read"), (30, True, "write"), (5, False, "none")])
def test_permission_by_access_level(fake: FakeForge, forge: GitLabForge, access_level: int,
                                    inherited: bool, expected: str) -> None:
    fake.add_user("carol", repo=REPO, access_level=access_level, inherited=inherited)
    assert forge.permission("carol") == expected


def test_permission_of_strangers(fake: FakeForge, forge: GitLabForge) -> None:
    fake.add_user("dave")  # a GitLab user, not a member
    assert forge.permission("dave") == "none"
    assert forge.permission("nobody-at-all") == "none"  # no such user


def test_repository_facts(fake: FakeForge, world: World, forge: GitLabForge) -> None:
    assert forge.default_branch() == "main"
    assert forge.push_url() == fake.state.repos[REPO].git.url  # file:// stays as it is
    assert forge.branch_head(HEAD) == world.head_sha
    assert forge.branch_head("no/such-branch") is None
    assert forge.file_content(KERNEL_PATH, HEAD) == "def relu(x):\n    return x\n"
    assert forge.file_content(KERNEL_PATH, "main") is None


def test_push_url_carries_token_for_http() -> None:
    url = with_credentials("https://gitlab.example.com/g/p.git", "oauth2", "tok")
    assert url == "https://oauth2:tok@gitlab.example.com/g/p.git"


def test_merge_requests(fake: FakeForge, world: World, forge: GitLabForge) -> None:
    expected = PullRequest(2, "relu: Triton kernel", "Generated.", "opbot", HEAD, world.head_sha,
                           "main", "open", web(fake, "/-/merge_requests/2"), ("opbot",))
    assert forge.get_pull_request(2) == expected
    assert forge.find_pull_request(HEAD) == expected
    assert forge.find_pull_request("no/such-branch") is None
    pull = fake.state.repos[REPO].issues[2].pull
    assert pull is not None
    pull.merged = True
    assert forge.get_pull_request(2).state == "merged"
    assert forge.find_pull_request(HEAD) is None


def test_create_merge_request(fake: FakeForge, world: World, forge: GitLabForge) -> None:
    sha = fake.human_commit(REPO, "opbot/gelu", {"kernels/gelu.py": "x"}, "gelu",
                            author="opbot")
    draft = PullRequestDraft("opbot/gelu", "main", "gelu: kernel", "Body", ["opbot", "gelu"])
    created = forge.create_pull_request(draft)
    assert created == PullRequest(3, "gelu: kernel", "Body", "opbot", "opbot/gelu", sha, "main",
                                  "open", web(fake, "/-/merge_requests/3"), ("opbot", "gelu"))
    assert forge.get_pull_request(3) == created
    assert fake.effect_log() == ["gitlab:octo/kernels!3:pr-open:opbot/gelu->main:gelu: kernel",
                                 "gitlab:octo/kernels!3:labels:opbot,gelu"]


def test_second_merge_request_for_a_branch_conflicts(forge: GitLabForge) -> None:
    with pytest.raises(ConflictError, match="!2"):
        forge.create_pull_request(PullRequestDraft(HEAD, "main", "again", ""))


def test_review_threads(fake: FakeForge, world: World, forge: GitLabForge) -> None:
    fake.add_comment(REPO, 2, "A plain note is no review thread", author="bob")
    root, reply = world.thread.comments
    mr = "/-/merge_requests/2"
    assert forge.review_threads(2) == [ReviewThread(
        world.thread.discussion_id,
        (Comment(root.id, "Please clamp at zero.", "alice", web(fake, f"{mr}#note_{root.id}")),
         Comment(reply.id, "+1, and add a test.", "bob", web(fake, f"{mr}#note_{reply.id}"))),
        KERNEL_PATH, 2, False)]
    world.thread.resolved = True
    assert forge.review_threads(2)[0].resolved is True


def test_reply_joins_the_thread(world: World, forge: GitLabForge) -> None:
    reply = forge.reply_to_thread(2, world.thread.discussion_id, "Clamped.")
    assert reply.author == "opbot"
    (thread,) = forge.review_threads(2)
    assert thread.comments[-1] == reply


def test_reply_to_unknown_thread(forge: GitLabForge) -> None:
    with pytest.raises(NotFoundError):
        forge.reply_to_thread(2, "0" * 40, "?")


def test_commits_come_oldest_first_whatever_the_order() -> None:
    newer = {"id": "b", "parent_ids": ["a"]}
    older = {"id": "a", "parent_ids": ["root"]}
    assert gitlab_module._oldest_first([newer, older]) == [older, newer]


# -- CI ------------------------------------------------------------------------------------
def test_failed_jobs(fake: FakeForge, world: World, forge: GitLabForge) -> None:
    long_log = "".join(f"line {n}\n" for n in range(5000)) + "FAILED test_relu\n"
    run = fake.add_failed_run(REPO, world.head_sha, jobs={"build": long_log, "test": "boom\n"},
                              passing=["lint"], branch=HEAD)
    fake.add_failed_run(REPO, "0" * 40, jobs={"other": "not this sha"})
    build, test = run.jobs[:2]
    assert forge.failed_jobs(world.head_sha) == [
        FailedJob("build", web(fake, f"/-/jobs/{build.id}"), long_log[-20_000:]),
        FailedJob("test", web(fake, f"/-/jobs/{test.id}"), "boom\n"),
    ]


def test_no_failed_jobs(world: World, forge: GitLabForge) -> None:
    assert forge.failed_jobs(world.head_sha) == []


# -- errors --------------------------------------------------------------------------------
def test_not_found(forge: GitLabForge) -> None:
    with pytest.raises(NotFoundError, match="404"):
        forge.get_issue(999)
    with pytest.raises(NotFoundError):
        forge.get_pull_request(1)  # an issue, not a merge request


def test_missing_project(fake: FakeForge, world: World) -> None:
    with pytest.raises(NotFoundError):
        GitLabForge(client(fake), "octo/missing").default_branch()


def test_forbidden(world: World, forge: GitLabForge) -> None:
    with pytest.raises(ForbiddenError):
        forge.update_comment(ISSUE, world.human_comment.id, "not mine to edit")


@pytest.mark.parametrize(("limit", "retry_after"), [
    ({"retry_after": 9}, 9.0),  # 429 with Retry-After
    ({"reset_in": 40}, 40.0),  # 429, Retry-After and RateLimit-Reset agree
])
def test_rate_limited(fake: FakeForge, forge: GitLabForge, limit: dict[str, int],
                      retry_after: float) -> None:
    fake.rate_limit_next("gitlab", **limit)
    with pytest.raises(RateLimitedError) as caught:
        forge.get_issue(1)  # python-gitlab would sleep and retry; the forge says so instead
    assert caught.value.retry_after_s == pytest.approx(retry_after, abs=2)
    assert forge.get_issue(1).number == 1


@pytest.mark.parametrize("status", [500, 502, 503])
def test_server_errors(fake: FakeForge, forge: GitLabForge, status: int) -> None:
    fake.fail_next("gitlab", status=status)
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
    token = "glpat-" + "S3cr3t" * 5
    fake.add_token(token, "opbot")
    forge = GitLabForge(client(fake, token=token), REPO)
    fake.fail_next("gitlab", status=502, message=f"upstream said: {token}")
    with pytest.raises(ForgeError) as caught:
        forge.get_issue(1)
    assert token not in str(caught.value)
    assert "***" in str(caught.value)
    wrong = GitLabForge(client(fake, token="glpat-wrong-" + "x" * 20), REPO)
    with pytest.raises(ForgeError) as bad:
        wrong.get_issue(1)
    assert "glpat-wrong-" not in _messages(bad.value)


# -- git -----------------------------------------------------------------------------------
def test_push_then_read_back(fake: FakeForge, world: World, forge: GitLabForge,
                             tmp_path: Path) -> None:
    work = tmp_path / "work"
    git("clone", "--quiet", forge.push_url(), str(work))
    bot = {"GIT_AUTHOR_NAME": "opbot", "GIT_AUTHOR_EMAIL": "opbot@users.example.com",
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
    # GitLab's commits name no account: the email tells the bot's from a human's.
    assert forge.commits_since("opbot/gelu", "main") == [
        Commit(pushed, "Add gelu", "opbot", "opbot@users.example.com"),
        Commit(human, "Fix gelu", "Alice", "alice@users.example.com"),
    ]
    assert fake.effect_log() == [f"git:octo/kernels:push:refs/heads/opbot/gelu:{pushed}"]


# -- construction --------------------------------------------------------------------------
def test_connect(fake: FakeForge, world: World) -> None:
    forge = GitLabForge.connect(fake.gitlab_url, fake.token, REPO)
    assert (forge.name, forge.repo, forge.default_branch()) == ("gitlab", REPO, "main")


def test_registry(fake: FakeForge, world: World) -> None:
    forge = registry.connect("gitlab", url=fake.gitlab_url, token=fake.token, repo=REPO)
    assert isinstance(forge, GitLabForge)
    assert forge.get_issue(1).author == "alice"
