"""Story: the bot's pull request fails CI. One failure makes one fix; a failure reported
again for a head the pull request no longer has makes none; past the repository's cap on
fixes per pull request, the bot stops fixing.

The cap is `budgets.ci_fixes_per_pull` in the repository's .opbot.yaml (a policy field being
added to policies/schema.json): set to 1 here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.fakeforge import FakeServer
from tests.fakeforge.hooks import Front
from tests.stories.support import BRANCH, REPO, Story, good_kernel_steps, story

POLICY = "budgets:\n  ci_fixes_per_pull: 1\n"
FAILURE = ("FAILED tests/test_relu.py::test_big_tensor - AssertionError: mismatch at index "
           "2147483648\n")


@dataclass
class Failing:
    told: Story
    pull: int
    first_head: str


@pytest.fixture(scope="module")
def failing(server: FakeServer, front: Front,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Failing]:
    with story(server, tmp_path_factory.mktemp(f"ci-{front}"), front,
               llm_steps=good_kernel_steps(), policy=POLICY) as told:
        told.request_op()
        told.settle()
        yield Failing(told, told.pull().number, told.head())


def _counts(told: Story) -> tuple[int, int]:
    assert told.llm is not None
    return len(told.llm.requests), len(told.pushes())


def test_a_ci_failure_makes_exactly_one_fix_run(failing: Failing) -> None:
    told = failing.told
    asked, pushed = _counts(told)
    told.fake.fail_ci(REPO, failing.first_head, branch=BRANCH, jobs={"unit-tests": FAILURE})
    made = told.settle()
    # check runs, check suite, workflow jobs and the run (GitHub), or the pipeline and its
    # jobs (GitLab): one failure, one run
    assert list(told.jobs(made).values()) == ["iterate-ci"], told.summary()
    assert told.llm is not None
    assert len(told.llm.requests) == asked + 1, told.summary()
    assert "mismatch at index 2147483648" in told.llm.requests[-1].text()
    assert len(told.pushes()) == pushed + 1, told.summary()
    assert told.head() != failing.first_head


def test_a_failure_on_a_stale_head_does_nothing(failing: Failing) -> None:
    told = failing.told
    before = set(told.jobs())
    asked, pushed = _counts(told)
    # CI re-run on the commit the bot has already replaced, failing again.
    told.fake.fail_ci(REPO, failing.first_head, branch=BRANCH, jobs={"unit-tests": FAILURE})
    made = told.settle()
    assert set(told.jobs(made)) <= before, told.summary()  # no new job
    assert _counts(told) == (asked, pushed), told.summary()


def test_failures_past_the_cap_are_capped(failing: Failing) -> None:
    """budgets.ci_fixes_per_pull: 1, and the first test spent it."""
    told = failing.told
    asked, pushed = _counts(told)
    said = len(told.fake.state.effects)  # (effects lists pushes last: not a stable prefix)
    told.fake.fail_ci(REPO, told.head(), branch=BRANCH, jobs={"unit-tests": FAILURE})
    told.settle()
    assert _counts(told) == (asked, pushed), told.summary()
    # ... and the bot says why it stopped, on the pull request.
    news = [e for e in told.fake.state.effects[said:] if e.kind in ("comment", "comment-edit")
            and e.target.endswith(str(failing.pull))]
    assert any("fix" in e.detail for e in news), told.summary()
