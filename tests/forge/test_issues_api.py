"""Finding and opening issues (the nightly scan's dashboard), and a pull request closed
unmerged: both forges, real clients over loopback HTTP against the fake forge, whose GitHub
traffic is checked against the OpenAPI description (`assert_honest` in the fixture's
teardown, and at the end of the tests here).
"""

from __future__ import annotations

import pytest

from bot.forge.base import Forge
from bot.forge.retrying import RetryingForge
from tests.fakeforge import FakeForge
from tests.fakeforge.scenario import HEAD, REPO, World
from tests.forge.each_forge import each_forge, fake_server_of_kind  # noqa: F401 (fixtures)
from tests.support_forge import ForgeKind

TITLE = "opbot: nightly scan"
# Nothing listens here: the deliveries are rendered (and GitHub's validated) all the same.
NOWHERE = "http://127.0.0.1:9/webhook"


@pytest.fixture
def forge(kind: ForgeKind, fake: FakeForge, world: World) -> Forge:
    return kind.forge(fake)


def _titled(fake: FakeForge, title: str) -> list[int]:
    return [i.number for i in fake.state.repos[REPO].issues.values()
            if i.title == title and i.pull is None]


def test_an_issue_created_is_found(fake: FakeForge, kind: ForgeKind, forge: Forge) -> None:
    created = forge.create_issue(TITLE, "The dashboard.", ["opbot-scan"])
    assert (created.title, created.body, created.author) == (TITLE, "The dashboard.", "opbot")
    assert (created.labels, created.state) == (("opbot-scan",), "open")
    assert created.url == kind.issue_url(fake, created.number)
    assert _titled(fake, TITLE) == [created.number]
    assert forge.find_issue(TITLE, "opbot") == created
    assert forge.get_issue(created.number) == created
    assert f"{kind.name}:{REPO}#{created.number}:issue-open:{TITLE}" in fake.effect_log()
    fake.assert_honest()


def test_only_that_authors_open_issue_with_exactly_that_title(
        fake: FakeForge, kind: ForgeKind, forge: Forge) -> None:
    fake.open_issue(REPO, TITLE, "someone else's", author="alice")
    fake.open_pull(REPO, "opbot/scan", title=TITLE, author=fake.bot)  # a PR, not an issue
    fake.open_issue(REPO, f"{TITLE} (old)", author=fake.bot)
    fake.open_issue(REPO, TITLE.upper(), author=fake.bot)
    closed = fake.open_issue(REPO, TITLE, author=fake.bot)
    closed.state = "closed"
    assert forge.find_issue(TITLE, "opbot") is None
    found = forge.find_issue(TITLE, "alice")
    assert found is not None
    assert (found.author, found.body) == ("alice", "someone else's")
    created = forge.create_issue(TITLE, "mine", [])
    assert forge.find_issue(TITLE, "opbot") == created
    fake.assert_honest()


def test_the_oldest_of_two_is_found(fake: FakeForge, forge: Forge) -> None:
    first = forge.create_issue(TITLE, "first", [])
    second = forge.create_issue(TITLE, "second", [])
    assert first.number < second.number
    found = forge.find_issue(TITLE, "opbot")
    assert found is not None
    assert (found.number, found.body) == (first.number, "first")


def test_find_reads_every_page(fake: FakeForge, kind: ForgeKind, world: World) -> None:
    forge = kind.forge(fake, per_page=2)
    for n in range(5):
        fake.open_issue(REPO, f"{TITLE} {n}", author=fake.bot)
    last = fake.open_issue(REPO, TITLE, author=fake.bot)
    found = forge.find_issue(TITLE, "opbot")
    assert found is not None
    assert found.number == last.number


def test_a_new_issue_is_announced(fake: FakeForge, kind: ForgeKind, forge: Forge) -> None:
    fake.subscribe(kind.name, NOWHERE, "secret")  # type: ignore[arg-type]
    created = forge.create_issue(TITLE, "The dashboard.", ["opbot-scan"])
    made = [(d.event, d.action) for d in fake.hooks.deliveries]
    if kind.name == "github":
        assert made == [("issues", "opened"), ("issues", "labeled")]
        opened = fake.hooks.of("issues", "opened")[0].payload["issue"]
        assert (opened["number"], opened["title"]) == (created.number, TITLE)
        assert [label["name"] for label in opened["labels"]] == ["opbot-scan"]
    else:
        assert made == [("Issue Hook", "open")]
        attributes = fake.hooks.deliveries[0].payload["object_attributes"]
        assert (attributes["iid"], attributes["title"]) == (created.number, TITLE)
    assert {d.sender for d in fake.hooks.deliveries} == {"opbot"}
    fake.hooks.close()
    fake.assert_honest()


def test_an_issue_whose_answer_was_lost_is_created_once(fake: FakeForge, kind: ForgeKind,
                                                        forge: Forge) -> None:
    waits: list[float] = []
    retrying = RetryingForge(forge, sleep=waits.append)
    fake.fail_after_next(kind.name)
    created = retrying.create_issue(TITLE, "The dashboard.", ["opbot-scan"])
    assert _titled(fake, TITLE) == [created.number]
    assert created.labels == ("opbot-scan",)
    assert waits == [1.0]
    assert [e for e in fake.effect_log() if ":issue-open:" in e] == [
        f"{kind.name}:{REPO}#{created.number}:issue-open:{TITLE}"]


def test_an_issue_refused_before_it_was_made_is_created(fake: FakeForge, kind: ForgeKind,
                                                        forge: Forge) -> None:
    fake.open_issue(REPO, TITLE, "someone else's", author="alice")
    fake.fail_next(kind.name)
    created = RetryingForge(forge, sleep=lambda _: None).create_issue(TITLE, "mine", [])
    assert created.author == "opbot"
    assert len(_titled(fake, TITLE)) == 2


def test_a_closed_pull_request_says_closed(fake: FakeForge, kind: ForgeKind, world: World,
                                           forge: Forge) -> None:
    fake.subscribe(kind.name, NOWHERE, "secret")  # type: ignore[arg-type]
    head = forge.get_pull_request(world.pull.number).head_sha
    fake.close_pull(REPO, world.pull.number, by="alice")
    pull = forge.get_pull_request(world.pull.number)
    assert (pull.state, pull.head_sha) == ("closed", head)
    assert forge.find_pull_request(HEAD) is None
    (delivery,) = fake.hooks.deliveries
    assert delivery.sender == "alice"
    if kind.name == "github":
        assert (delivery.event, delivery.action) == ("pull_request", "closed")
        payload = delivery.payload["pull_request"]
        assert (payload["state"], payload["merged"]) == ("closed", False)
        assert payload["closed_at"] is not None
    else:
        assert (delivery.event, delivery.action) == ("Merge Request Hook", "close")
        assert delivery.payload["object_attributes"]["state"] == "closed"
    fake.close_pull(REPO, world.pull.number, by="alice")  # closed already: nothing new
    assert len(fake.hooks.deliveries) == 1
    fake.hooks.close()
    fake.assert_honest()


def test_labels_need_push_access_on_github(fake: FakeForge, kind: ForgeKind,
                                           world: World) -> None:
    """GitHub drops the labels of a new issue from a user without push access, silently;
    GitLab keeps them. The Issue says what the forge really made."""
    fake.add_token("bobs-token", "bob")  # triage
    created = kind.forge(fake, token="bobs-token").create_issue(TITLE, "", ["opbot-scan"])
    assert created.author == "bob"
    assert created.labels == (() if kind.name == "github" else ("opbot-scan",))
    assert fake.state.repos[REPO].issues[created.number].labels == list(created.labels)
