"""What only GitLab has: its webhooks' token, and GitLabForge through unpatched python-gitlab,
over real HTTP, against the fake forge (award emoji, access levels, discussions, pipelines'
jobs, ...).

What both forges promise is in test_contract.py; GitLab's payloads are read in
test_events.py. GitLab publishes no OpenAPI for these
endpoints; the fake follows the documented shapes (see tests/fakeforge/gitlab_render.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from bot.forge.base import Comment, FailedJob, ReviewThread, Target
from bot.forge.gitlab import client as gitlab_module
from bot.forge.gitlab.client import GitLabForge
from bot.forge.gitlab.webhook import token_ok
from tests.fakeforge import FakeForge
from tests.fakeforge.scenario import HEAD, KERNEL_PATH, REPO, World
from tests.support_forge import GITLAB, gitlab_client

GITHUB_SPEC = False  # GitLab only: the `server` fixture needs no GitHub description here


# -- webhooks -----------------------------------------------------------------------------
def test_gitlab_tokens() -> None:
    assert token_ok("abc", ["zzz", "abc"])  # the previous secret, during a rotation
    assert not token_ok("abd", ["abc"])
    assert not token_ok(None, ["abc"])


@pytest.fixture
def forge(fake: FakeForge, world: World) -> GitLabForge:
    return GitLabForge(gitlab_client(fake), REPO)


def web(fake: FakeForge, path: str) -> str:
    return GITLAB.web(fake, path)


ISSUE, MR = Target("issue", 1), Target("pull", 2)


# -- effects -------------------------------------------------------------------------------
@pytest.mark.parametrize(("reaction", "emoji"), [
    ("+1", "thumbsup"), ("-1", "thumbsdown"), ("eyes", "eyes"), ("rocket", "rocket"),
    ("confused", "confused")])
def test_reactions_are_award_emoji(fake: FakeForge, world: World, forge: GitLabForge,
                                   reaction: Any, emoji: str) -> None:
    forge.add_reaction(ISSUE, None, reaction)
    assert fake.effect_log() == [f"gitlab:octo/kernels#1:reaction:{emoji}"]


# -- reads ---------------------------------------------------------------------------------
def test_merge_request_comments_leave_out_diff_notes(fake: FakeForge,
                                                     forge: GitLabForge) -> None:
    note = fake.add_comment(REPO, 2, "Looks good", author="bob")
    assert forge.list_comments(MR) == [
        Comment(note.id, "Looks good", "bob", web(fake, f"/-/merge_requests/2#note_{note.id}"))]


@pytest.mark.parametrize(("access_level", "inherited", "expected"), [
    (50, False, "admin"), (40, False, "maintain"), (30, False, "write"), (20, False, "read"),
    (10, False, "read"), (30, True, "write"), (5, False, "none")])
def test_permission_by_access_level(fake: FakeForge, forge: GitLabForge, access_level: int,
                                    inherited: bool, expected: str) -> None:
    fake.add_user("carol", repo=REPO, access_level=access_level, inherited=inherited)
    assert forge.permission("carol") == expected


def test_review_threads(fake: FakeForge, world: World, forge: GitLabForge) -> None:
    fake.add_comment(REPO, 2, "A plain note is no review thread", author="bob")
    root, reply = world.thread.comments
    mr = "/-/merge_requests/2"
    assert forge.review_threads(2) == [ReviewThread(
        world.thread.discussion_id,
        (Comment(root.id, "Please clamp at zero.", "alice", web(fake, f"{mr}#note_{root.id}")),
         Comment(reply.id, "+1, and add a test.", "bob", web(fake, f"{mr}#note_{reply.id}"))),
        KERNEL_PATH, 2, False)]


def test_commits_come_oldest_first_whatever_the_order() -> None:
    newer = {"id": "b", "parent_ids": ["a"]}
    older = {"id": "a", "parent_ids": ["root"]}
    assert gitlab_module._oldest_first([newer, older]) == [older, newer]


# -- CI: pipelines' jobs -------------------------------------------------------------------
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
