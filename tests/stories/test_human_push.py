"""Story: a person pushes to the bot's branch. The bot stands down (and says so) until
someone asks for `/regen --force`, which rebuilds the branch from the base: the person's
commit is gone from it."""

from __future__ import annotations

from pathlib import Path

from tests.fakeforge import FakeServer
from tests.fakeforge.hooks import Front
from tests.stories.support import BRANCH, REPO, story


def test_a_human_push_makes_the_bot_stand_down_until_forced(
        server: FakeServer, front: Front, tmp_path: Path) -> None:
    with story(server, tmp_path, front) as told:
        told.request_op()
        told.settle()
        number = told.pull().number
        git = told.fake.state.repos[REPO].git
        human = told.fake.human_push(REPO, BRANCH, {"ops/relu/NOTES.md": "tuned by hand\n"},
                                     "Hand tuning", author="alice", base=BRANCH)
        told.settle()
        pushed = len(told.pushes())
        assert told.head() == human, told.summary()

        told.fake.comment(REPO, number, "/regen", author="alice")
        made = told.settle()
        assert len(told.pushes()) == pushed, told.summary()  # stood down
        assert told.head() == human
        assert "A person pushed" in told.status_comments(number)[-1], told.summary()
        assert set(told.jobs(made).values()) <= {"regen"}, told.summary()

        told.fake.comment(REPO, number, "/regen --force", author="alice")
        told.settle()
        assert len(told.pushes()) == pushed + 1, told.summary()
        head = told.head()
        # Rebuilt from the base: the person's commit is no longer on the branch.
        assert git.merge_base(human, head) != human, told.summary()
        assert git.blob(head, "ops/relu/NOTES.md") is None
        assert git.merge_base(head, "main") == git.resolve("main")
