"""Reviews beyond the inline threads: the summaries reviewers write about the current head,
and resolving a thread once the bot has answered it. Both forges, real clients over
loopback HTTP against the fake forge.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from bot.forge.base import Comment, ForbiddenError, Forge, NotFoundError, ReviewThread
from tests.fakeforge import FakeForge
from tests.fakeforge.model import now
from tests.fakeforge.scenario import HEAD, REPO, World
from tests.forge.each_forge import each_forge, fake_server_of_kind  # noqa: F401 (fixtures)
from tests.support_forge import ForgeKind

EARLIER = timedelta(hours=1)  # before any commit the test makes


@pytest.fixture
def forge(kind: ForgeKind, fake: FakeForge, world: World) -> Forge:
    return kind.forge(fake)


def _review_url(fake: FakeForge, kind: ForgeKind, review_id: int) -> str:
    anchor = f"#pullrequestreview-{review_id}" if kind.name == "github" else \
        f"#note_{review_id}"
    return kind.pull_url(fake, 2) + anchor


# -- review summaries ------------------------------------------------------------------------
def test_review_summaries_of_the_head(fake: FakeForge, world: World, kind: ForgeKind,
                                      forge: Forge) -> None:
    old_sha = fake.state.repos[REPO].git.resolve("main")
    stale = fake.add_review(REPO, 2, "bob", "CHANGES_REQUESTED", "Rename it.",
                            commit_id=old_sha)
    stale.submitted_at = now() - EARLIER  # before the head commit, as on a real PR
    asks = fake.add_review(REPO, 2, "alice", "CHANGES_REQUESTED", "Please add a test.")
    notes = fake.add_review(REPO, 2, "bob", "COMMENTED", "Also: fp16?")
    fake.add_review(REPO, 2, "bob", "COMMENTED", "")  # only inline comments
    approves = fake.add_review(REPO, 2, "alice", "APPROVED", "Fine by me.")
    expected = [Comment(r.id, r.body, r.author, _review_url(fake, kind, r.id))
                for r in (asks, notes)]
    if kind.name == "gitlab":  # an approval's text is a plain note there, like any other
        expected.append(Comment(approves.id, approves.body, "alice",
                                _review_url(fake, kind, approves.id)))
    assert forge.review_summaries(2) == expected


def test_a_new_head_leaves_older_reviews_behind(fake: FakeForge, world: World,
                                                forge: Forge) -> None:
    review = fake.add_review(REPO, 2, "alice", "CHANGES_REQUESTED", "Please add a test.")
    review.submitted_at = now() - EARLIER
    fake.human_commit(REPO, HEAD, {"tests/test_relu.py": "def test(): ...\n"}, "Add a test",
                      author="opbot")
    assert forge.review_summaries(2) == []


@pytest.mark.parametrize("kind", ["gitlab"], indirect=True)
def test_gitlab_counts_plain_notes_since_the_head(fake: FakeForge, world: World,
                                                  forge: Forge) -> None:
    old = fake.add_comment(REPO, 2, "Before the push", author="bob")
    old.created_at = now() - EARLIER
    new = fake.add_comment(REPO, 2, "After the push", author="bob")
    assert [c.id for c in forge.review_summaries(2)] == [new.id]


@pytest.mark.parametrize("kind", ["github"], indirect=True)
def test_github_leaves_conversation_comments_out(fake: FakeForge, world: World,
                                                 forge: Forge) -> None:
    fake.add_comment(REPO, 2, "A comment is no review", author="bob")
    assert forge.review_summaries(2) == []


def test_review_summaries_of_no_pull_request(forge: Forge) -> None:
    with pytest.raises(NotFoundError):
        forge.review_summaries(1)  # an issue


# -- resolving threads -----------------------------------------------------------------------
def test_resolve_a_thread(fake: FakeForge, world: World, kind: ForgeKind,
                          forge: Forge) -> None:
    thread_id = kind.thread_id(world)
    forge.resolve_thread(2, thread_id)
    (thread,) = forge.review_threads(2)
    assert (thread.id, thread.resolved) == (thread_id, True)
    forge.resolve_thread(2, thread_id)  # again: no error, no second act
    assert fake.effect_log() == [f"{kind.effect_target(2)}:resolve:{thread_id}"]


def test_resolve_an_unknown_thread(kind: ForgeKind, forge: Forge) -> None:
    for thread_id in kind.unknown_threads:
        with pytest.raises(NotFoundError):
            forge.resolve_thread(2, thread_id)


def test_resolving_needs_write_access(fake: FakeForge, world: World, kind: ForgeKind) -> None:
    fake.add_user("rita", repo=REPO, role="read")
    fake.add_token("rita-token-0123456789", "rita")
    with pytest.raises(ForbiddenError):
        kind.forge(fake, token="rita-token-0123456789").resolve_thread(2, kind.thread_id(world))
    assert world.thread.resolved is False


@pytest.mark.parametrize("kind", ["github"], indirect=True)
def test_github_threads_carry_their_node_id(fake: FakeForge, world: World,
                                            forge: Forge) -> None:
    (thread,) = forge.review_threads(2)
    assert thread.node_id is not None
    fake.state.requests.clear()
    forge.resolve_thread(2, thread.node_id)  # the node id needs no lookup
    assert fake.state.requests == ["POST /graphql"]
    assert forge.review_threads(2)[0].resolved is True


def test_the_last_word_in_a_thread(world: World, kind: ForgeKind, forge: Forge) -> None:
    (thread,) = forge.review_threads(2)
    assert thread.last_author == "bob"
    forge.reply_to_thread(2, kind.thread_id(world), "Clamped, and tested.")
    (thread,) = forge.review_threads(2)
    assert thread.last_author == forge.whoami() == "opbot"
    assert ReviewThread("x", ()).last_author is None
