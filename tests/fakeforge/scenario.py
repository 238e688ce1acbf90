"""A small standard world both forges' tests start from (same numbers on both)."""

from __future__ import annotations

from dataclasses import dataclass

from .forge import FakeForge
from .model import Comment, Issue, ReviewThread

REPO = "octo/kernels"
HEAD = "opbot/relu"
KERNEL_PATH = "kernels/relu.py"


@dataclass(frozen=True)
class World:
    repo: str
    issue: Issue  # #1, by alice, labelled op-request
    human_comment: Comment  # alice's, on #1
    bot_comment: Comment  # opbot's, on #1
    pull: Issue  # #2, opbot's, from HEAD into main
    thread: ReviewThread  # alice's diff comment on #2, with bob's reply
    head_sha: str


def standard_world(fake: FakeForge, repo: str = REPO) -> World:
    fake.add_repo(repo)
    fake.add_user("alice", repo=repo, role="maintain")
    fake.add_user("bob", repo=repo, role="triage")
    issue = fake.open_issue(repo, "Add a relu kernel", "op: relu\ndtype: float32",
                            author="alice", labels=["op-request"])
    human = fake.add_comment(repo, issue.number, "/opbot generate", author="alice")
    bot = fake.add_comment(repo, issue.number, "Working on it.", author=fake.bot)
    head_sha = fake.human_commit(repo, HEAD, {KERNEL_PATH: "def relu(x):\n    return x\n"},
                                 "Add relu kernel", author=fake.bot)
    pull = fake.open_pull(repo, HEAD, title="relu: Triton kernel", body="Generated.",
                          author=fake.bot, labels=["opbot"])
    thread = fake.add_review_thread(repo, pull.number, path=KERNEL_PATH, line=2,
                                    body="Please clamp at zero.", author="alice",
                                    replies=[("bob", "+1, and add a test.")])
    return World(repo, issue, human, bot, pull, thread, head_sha)
