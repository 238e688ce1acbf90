"""Story: alice reviews the bot's pull request (a summary and three inline comments); the bot
makes one new version from all four and answers each thread. Then alice approves it, and
the bot leaves it alone."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.fakeforge import FakeServer
from tests.fakeforge.hooks import Front
from tests.stories.support import (
    KERNEL_PATH,
    REFERENCE_PATH,
    Story,
    good_kernel_steps,
    story,
)

SUMMARY = "Close, but please make it safe for tensors with more than 2**31 elements."
INLINE = [(KERNEL_PATH, 11, "Compute the offsets in 64 bits here."),
          (KERNEL_PATH, 13, "Keep the masked load for the tail block."),
          (REFERENCE_PATH, 5, "Leave the reference as it is: it is the spec.")]


@dataclass
class Reviewed:
    told: Story
    pull: int


@pytest.fixture(scope="module")
def reviewed(server: FakeServer, front: Front,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reviewed]:
    with story(server, tmp_path_factory.mktemp(f"review-{front}"), front,
               llm_steps=good_kernel_steps()) as told:
        told.request_op()
        told.settle()
        yield Reviewed(told, told.pull().number)


def test_a_review_with_a_summary_and_three_comments_makes_one_run(reviewed: Reviewed) -> None:
    told, number = reviewed.told, reviewed.pull
    assert told.llm is not None
    asked, pushed = len(told.llm.requests), len(told.pushes())
    told.fake.submit_review("octo/kernels", number, author="alice", state="changes_requested",
                            body=SUMMARY, comments=INLINE)
    made = told.settle()
    runs = told.jobs(made)
    assert list(runs.values()) == ["iterate-review"], told.summary()
    prompts = told.llm.requests[asked:]
    assert len(prompts) == 1, told.summary()  # one run, one model call (the kernel passes)
    text = prompts[0].text()
    for said in [SUMMARY, *(body for _, _, body in INLINE)]:
        assert said in text, f"the prompt lacks {said!r}\n{told.summary()}"
    assert len(told.pushes()) == pushed + 1, told.summary()
    pull = told.fake.state.repos["octo/kernels"].issues[number].pull
    assert pull is not None
    threads = pull.threads[-3:]
    replies = [[c for c in t.comments if c.author == told.bot_login] for t in threads]
    assert [len(r) for r in replies] == [1, 1, 1], told.summary()  # one answer per thread
    # The new version changed the kernel file, not the reference: only its threads close.
    assert [t.resolved for t in threads] == [True, True, False], told.summary()


def test_an_approval_changes_nothing(reviewed: Reviewed) -> None:
    told, number = reviewed.told, reviewed.pull
    assert told.llm is not None
    asked, pushed = len(told.llm.requests), len(told.pushes())
    comments = len(told.effects("comment")) + len(told.effects("comment-edit"))
    told.fake.submit_review("octo/kernels", number, author="alice", state="approved",
                            body="LGTM")
    made = told.settle()
    assert told.jobs(made) == {}, told.summary()
    assert len(told.llm.requests) == asked, told.summary()
    assert len(told.pushes()) == pushed, told.summary()
    assert len(told.effects("comment")) + len(told.effects("comment-edit")) == comments, \
        told.summary()
