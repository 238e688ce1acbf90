"""Creates that never happen twice: RetryingForge after an answer lost on the way back.

`fake.fail_after_next` lets the next write take effect and then answers 502, as a proxy
timing out would: the client cannot tell that it worked. A plain retry would post again;
these tests check that exactly one comment, reply or pull request exists afterwards. Both
forges, real clients over loopback HTTP against the fake forge.
"""

from __future__ import annotations

import pytest

from bot.forge.base import Forge, PullRequestDraft, Target, UnavailableError
from bot.forge.retrying import RetryingForge
from tests.fakeforge import FakeForge
from tests.fakeforge.scenario import HEAD, REPO, World
from tests.forge.each_forge import each_forge, fake_server_of_kind  # noqa: F401 (fixtures)
from tests.support_forge import ForgeKind

ISSUE, PULL = Target("issue", 1), Target("pull", 2)


@pytest.fixture
def inner(kind: ForgeKind, fake: FakeForge, world: World) -> Forge:
    return kind.forge(fake)


@pytest.fixture
def waits() -> list[float]:
    return []


@pytest.fixture
def forge(inner: Forge, waits: list[float]) -> RetryingForge:
    return RetryingForge(inner, sleep=waits.append)


def _bodies(fake: FakeForge, number: int) -> list[str]:
    return [c.body for c in fake.state.repos[REPO].issues[number].comments]


def test_a_lost_answer_did_take_effect(fake: FakeForge, kind: ForgeKind, inner: Forge) -> None:
    """The knob itself: the comment is there, the client heard a 502."""
    fake.fail_after_next(kind.name)
    with pytest.raises(UnavailableError):
        inner.create_comment(ISSUE, "On it.")
    assert _bodies(fake, 1)[-1] == "On it."


def test_a_comment_whose_answer_was_lost_is_posted_once(fake: FakeForge, kind: ForgeKind,
                                                        forge: RetryingForge,
                                                        waits: list[float]) -> None:
    fake.fail_after_next(kind.name)
    posted = forge.create_comment(ISSUE, "On it: run 41.")
    assert _bodies(fake, 1).count("On it: run 41.") == 1
    assert (posted.body, posted.author) == ("On it: run 41.", "opbot")
    assert posted.id == fake.state.repos[REPO].issues[1].comments[-1].id
    assert waits == [1.0]
    assert [e for e in fake.effect_log() if ":comment:" in e] == [
        f"{kind.name}:{REPO}#1:comment:On it: run 41."]


def test_a_comment_that_failed_for_real_is_posted(fake: FakeForge, kind: ForgeKind,
                                                  forge: RetryingForge) -> None:
    fake.fail_next(kind.name)  # refused before it took effect
    forge.create_comment(ISSUE, "On it: run 42.")
    assert _bodies(fake, 1).count("On it: run 42.") == 1


def test_someone_elses_same_words_are_not_the_bots(fake: FakeForge, kind: ForgeKind,
                                                   forge: RetryingForge) -> None:
    fake.add_comment(REPO, 1, "+1", author="alice")
    fake.fail_next(kind.name)
    forge.create_comment(ISSUE, "+1")
    assert [(c.author, c.body) for c in fake.state.repos[REPO].issues[1].comments][-2:] == [
        ("alice", "+1"), ("opbot", "+1")]


def test_a_reply_whose_answer_was_lost_is_posted_once(fake: FakeForge, world: World,
                                                      kind: ForgeKind,
                                                      forge: RetryingForge) -> None:
    fake.fail_after_next(kind.name)
    reply = forge.reply_to_thread(2, kind.thread_id(world), "Clamped in 3f2a.")
    bodies = [c.body for c in world.thread.comments]
    assert bodies.count("Clamped in 3f2a.") == 1
    assert reply.id == world.thread.comments[-1].id


def test_a_pull_request_whose_answer_was_lost_is_opened_once(fake: FakeForge,
                                                             kind: ForgeKind,
                                                             forge: RetryingForge) -> None:
    fake.human_commit(REPO, "opbot/gelu", {"kernels/gelu.py": "x"}, "gelu", author="opbot")
    fake.fail_after_next(kind.name)
    created = forge.create_pull_request(PullRequestDraft("opbot/gelu", "main", "gelu: kernel",
                                                         "Body", ["opbot"]))
    pulls = [p for p in fake.state.repos[REPO].pulls() if p.pull and p.pull.head == "opbot/gelu"]
    assert [p.number for p in pulls] == [created.number]
    assert created.labels == ("opbot",)
    assert pulls[0].labels == ["opbot"]


def test_a_pull_request_that_exists_is_the_answer(fake: FakeForge, world: World,
                                                  forge: RetryingForge) -> None:
    again = forge.create_pull_request(PullRequestDraft(HEAD, "main", "relu again", "", ["opbot"]))
    assert again.number == world.pull.number
    assert len(fake.state.repos[REPO].pulls()) == 1


def test_a_status_set_again_says_the_same(fake: FakeForge, world: World, kind: ForgeKind,
                                         forge: RetryingForge) -> None:
    """A commit status sent twice is harmless: the newest of its name is what shows.
    (A GitHub App's check run is found again instead: test_progress.py.)"""
    fake.fail_after_next(kind.name)
    forge.report_progress(world.head_sha, "success", "Verified.")
    statuses = {(s.name, s.state) for s in fake.state.repos[REPO].statuses}
    assert statuses == {("opbot", "success")}


def test_resolving_again_after_a_lost_answer(fake: FakeForge, world: World, kind: ForgeKind,
                                             forge: RetryingForge) -> None:
    (thread,) = forge.review_threads(2)
    front = "github-graphql" if kind.name == "github" else "gitlab"
    fake.fail_after_next(front)  # the mutation / PUT itself (a node id needs no lookup)
    forge.resolve_thread(2, thread.node_id or thread.id)
    assert world.thread.resolved is True
    assert [e for e in fake.effect_log() if ":resolve:" in e] == [
        f"{kind.effect_target(2)}:resolve:{kind.thread_id(world)}"]


def test_a_reaction_given_twice_is_given(fake: FakeForge, world: World, kind: ForgeKind,
                                         forge: RetryingForge) -> None:
    fake.fail_after_next(kind.name)
    forge.add_reaction(ISSUE, world.human_comment.id, "eyes")
    assert [r.content for r in world.human_comment.reactions] == ["eyes"]
