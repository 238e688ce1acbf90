"""What happened on the fake, in forge-neutral terms: one `Act` per client request that
changed something (or per helper that plays a person), announced on the state
(`State.announce`) for the webhook deliveries in hooks.py to render per front end.

One act can become several deliveries (a review with comments, a failed CI run), and the
same act renders as GitHub's events for a GitHub subscription and GitLab's hooks for a
GitLab one: both front ends look at one model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from .model import CiRun, Comment, Issue, Review, ReviewComment, ReviewThread, State

ActKind = Literal[
    "issue-opened",  # an issue was created (labels already on it)
    "labeled",  # labels were added to an issue or a pull request
    "comment",  # a comment on an issue or a pull request
    "comment-edited",
    "review",  # a review was submitted, with its diff comments (threads)
    "review-reply",  # a reply in a diff thread (GitHub makes a review for it)
    "pull-opened",
    "pull-edited",
    "push",  # a branch moved (from the bare repository's push log)
    "thread-resolved",  # a diff thread was resolved (its comments in review_comments)
    "ci-failed",  # a workflow run / pipeline failed
]


@dataclass(frozen=True)
class Act:
    kind: ActKind
    repo: str  # full name
    actor: str  # login of whoever acted (the token's user, or the person a helper plays)
    issue: Issue | None = None
    comment: Comment | None = None
    # Diff comments: (thread, comment) pairs, for "review" and "review-reply".
    review_comments: tuple[tuple[ReviewThread, ReviewComment], ...] = ()
    review: Review | None = None
    labels: tuple[str, ...] = ()  # added labels ("labeled", "issue-opened")
    previous_labels: tuple[str, ...] = ()
    changes: dict[str, str] = field(default_factory=dict)  # field -> its old value
    ref: str = ""  # "push": refs/heads/<branch>
    before: str = ""
    after: str = ""
    run: CiRun | None = None  # "ci-failed"


def announce_reply(state: State, repo: str, issue: Issue, thread: ReviewThread,
                   reply: ReviewComment) -> Review:
    """A reply in a diff thread, as both front ends record it: GitHub wraps a lone reply
    in a review of its own (state commented, no body), listed with the pull request's
    reviews; GitLab's summary notes skip it (no body)."""
    assert issue.pull is not None
    review = Review(state.new_id(), reply.author, "commented", "", reply.commit_id,
                    [reply.id])
    issue.pull.reviews.append(review)
    state.announce(Act("review-reply", repo, reply.author, issue=issue, review=review,
                       review_comments=((thread, reply),)))
    return review
