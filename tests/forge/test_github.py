"""What only GitHub has: its webhooks' signature, and GitHubForge through unpatched PyGithub,
over real HTTP, against the fake forge (roles, check runs, link pages of review comments, ...).

What both forges promise is in test_contract.py; GitHub's payloads are read in
test_events.py. Every request PyGithub sends and every
reply the fake returns is validated against GitHub's REST OpenAPI description (the `fake`
fixture fails a test that broke it).
"""

from __future__ import annotations

from typing import Any

import pytest

from bot.forge.base import (
    Comment,
    FailedJob,
    NotFoundError,
    ReviewThread,
    Target,
    UnavailableError,
)
from bot.forge.github import client as github_module
from bot.forge.github.client import GitHubForge
from bot.forge.github.webhook import signature_ok
from tests.fakeforge import FakeForge
from tests.fakeforge.scenario import HEAD, KERNEL_PATH, REPO, World
from tests.support_forge import GITHUB, github_client


# -- webhooks -----------------------------------------------------------------------------
def test_githubs_own_test_vector() -> None:
    expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert signature_ok(b"Hello, World!", expected, ["It's a Secret to Everybody"])
    assert not signature_ok(b"Hello, World!", expected, ["another secret"])
    assert not signature_ok(b"Hello, World!", None, ["It's a Secret to Everybody"])
    assert not signature_ok(b"Hello, World!", expected.replace("sha256=", "sha1="),
                            ["It's a Secret to Everybody"])


@pytest.fixture
def forge(fake: FakeForge, world: World) -> GitHubForge:
    return GitHubForge(github_client(fake), REPO)


def web(fake: FakeForge, path: str) -> str:
    return GITHUB.web(fake, path)


ISSUE = Target("issue", 1)


def test_created_comment_is_the_bots(forge: GitHubForge) -> None:
    comment = forge.create_comment(ISSUE, "Hello")
    assert (comment.body, comment.author) == ("Hello", "opbot")
    assert forge.list_comments(ISSUE)[-1] == comment


# -- people --------------------------------------------------------------------------------
@pytest.mark.parametrize(("role", "expected"), [
    ("admin", "admin"), ("maintain", "maintain"), ("write", "write"), ("triage", "triage"),
    ("read", "read"), ("none", "none")])
def test_permission_by_role(fake: FakeForge, forge: GitHubForge, role: Any,
                            expected: str) -> None:
    fake.add_user("carol", repo=REPO, role=role)
    assert forge.permission("carol") == expected


def test_permission_falls_back_to_legacy_field() -> None:
    # A custom repository role has a name of its own; `permission` still says enough.
    data = {"permission": "write", "role_name": "kernel-reviewer"}
    assert github_module._permission(data) == "write"


# -- pull requests -------------------------------------------------------------------------
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
        KERNEL_PATH, 2, False, node_id=f"PRRT_{root.id}")]


def test_review_threads_follow_link_pages(fake: FakeForge, world: World) -> None:
    fake.add_review_thread(REPO, 2, path="kernels/other.py", line=7, body="And here?",
                           author="bob")
    forge = GitHubForge(github_client(fake, per_page=2), REPO)
    fake.state.requests.clear()
    threads = forge.review_threads(2)
    assert [(t.path, len(t.comments)) for t in threads] == [(KERNEL_PATH, 2),
                                                           ("kernels/other.py", 1)]
    assert fake.state.requests == [f"GET /repos/{REPO}/pulls/2/comments"] * 2 + [
        "POST /graphql"]


def test_resolved_threads_come_from_graphql_pages(fake: FakeForge, world: World,
                                                   forge: GitHubForge) -> None:
    # More threads than one GraphQL page holds (100): the resolved ones on both pages count.
    added = [fake.add_review_thread(REPO, 2, path=f"k{n}.py", line=1, body=f"n{n}",
                                    author="bob", resolved=n % 50 == 0) for n in range(120)]
    fake.state.requests.clear()
    threads = {t.path: t.resolved for t in GitHubForge(github_client(fake, per_page=100),
                                                       REPO).review_threads(2)}
    assert {path for path, resolved in threads.items() if resolved} == {
        "k0.py", "k50.py", "k100.py"}
    assert threads[KERNEL_PATH] is False
    assert len(added) + 1 == len(threads)
    assert fake.state.requests.count("POST /graphql") == 2


def test_resolution_unreadable(fake: FakeForge, world: World, forge: GitHubForge) -> None:
    # The REST listing succeeds, GraphQL fails: an error to retry, not threads read as open.
    fake.fail_next("github-graphql", status=502)
    with pytest.raises(UnavailableError, match="resolved"):
        forge.review_threads(2)
    assert [t.resolved for t in forge.review_threads(2)] == [False]


# -- CI: Actions jobs and check runs ---------------------------------------------------------
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


# -- git -----------------------------------------------------------------------------------
def test_commits_since_unknown_branch(forge: GitHubForge) -> None:
    with pytest.raises(NotFoundError):
        forge.commits_since("no/such-branch", "main")
