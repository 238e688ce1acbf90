"""Story: alice asks for an op with the issue form; the bot opens one pull request, and
everything the bot itself did comes back to it without setting anything off."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.fakeforge import FakeServer
from tests.fakeforge.hooks import Delivery, Front
from tests.fakeforge.model import Issue
from tests.stories.support import Story, story


@dataclass
class Requested:
    told: Story
    issue: Issue
    made: list[Delivery]


@pytest.fixture(scope="module")
def requested(server: FakeServer, front: Front,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Requested]:
    # Serve starts its own warm servers here, as in production (the other stories borrow).
    with story(server, tmp_path_factory.mktemp(f"op-request-{front}"), front,
               own_warm_servers=True) as told:
        issue = told.request_op()
        yield Requested(told, issue, told.settle())


def test_an_op_request_makes_one_generation_and_one_pull_request(requested: Requested,
                                                                  ) -> None:
    told = requested.told
    assert len(told.bot_pulls()) == 1, told.summary()
    assert len(told.effects("pr-open")) == 1, told.summary()
    generations = [job for job, action in told.jobs(requested.made).items()
                   if action == "generate"]
    assert len(generations) == 1, told.summary()  # opened + labeled are one request
    assert len(told.pushes()) == 1, told.summary()
    statuses = told.status_comments(requested.issue.number)
    assert len(statuses) == 1, told.summary()  # one sticky comment, edited in place
    assert f"#{told.pull().number}" in statuses[0]


def test_the_bots_own_events_come_back_and_set_nothing_off(requested: Requested) -> None:
    told = requested.told
    own = told.own_deliveries(requested.made)
    kinds = {d.event for d in own}
    # The fake did deliver the bot's own comment, pull request, labels and push ...
    expected = ({"issue_comment", "pull_request", "push"} if told.front == "github" else
                {"Note Hook", "Merge Request Hook", "Push Hook"})
    assert kinds >= expected, told.summary()
    # ... and the bot recognised itself in each (from its token: no setting names it).
    acted = [d for d in own if not isinstance(d.answer, dict)
             or d.answer.get("action") != "ignore" or d.answer.get("job") is not None]
    assert acted == [], "\n".join(str(d) for d in acted) + "\n" + told.summary()
    assert set(told.jobs(requested.made).values()) == {"generate"}, told.summary()
