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

from .model import (
    CheckRun,
    CiRun,
    Comment,
    CommitStatus,
    ExternalPipeline,
    Issue,
    Repo,
    Review,
    ReviewComment,
    ReviewThread,
    State,
    now,
)

ActKind = Literal[
    "issue-opened",  # an issue was created (labels already on it)
    "labeled",  # labels were added to an issue or a pull request
    "comment",  # a comment on an issue or a pull request
    "comment-edited",
    "review",  # a review was submitted, with its diff comments (threads)
    "review-reply",  # a reply in a diff thread (GitHub makes a review for it)
    "pull-opened",
    "pull-edited",
    "pull-closed",  # a pull/merge request was closed without being merged
    "push",  # a branch moved (from the bare repository's push log)
    "thread-resolved",  # a diff thread was resolved (its comments in review_comments)
    "ci-failed",  # a workflow run / pipeline failed
    "progress",  # a check run or a commit status was written (a client's progress report)
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
    # "progress": the check run written and what GitHub calls it ("created", "completed"
    # or both; none for a change of status short of completed) ...
    check: CheckRun | None = None
    check_actions: tuple[str, ...] = ()
    # ... or the commit status written, and GitLab's external pipeline when its status
    # changed with it (None: unchanged, or the status joined a CI pipeline of the commit).
    status: CommitStatus | None = None
    pipeline: ExternalPipeline | None = None


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


def announce_check(state: State, repo: str, actor: str, check: CheckRun, *,
                   created: bool, completing: bool) -> None:
    """A check run written by an App: GitHub's `check_run` actions are `created` (a new
    one) and `completed` (a request that completes it, also on creation); a change of
    status short of completed has no action of its own."""
    actions: tuple[str, ...] = ("created",) if created else ()
    if completing and check.status == "completed":
        actions += ("completed",)
    state.announce(Act("progress", repo, actor, check=check, check_actions=actions))


# A commit status in GitLab's words (a GitHub status's too: both forges share the model).
GITLAB_STATE = {"pending": "pending", "running": "running", "success": "success",
                "failed": "failed", "canceled": "canceled", "created": "pending",
                "failure": "failed", "error": "failed"}
FINISHED = ("success", "failed", "canceled")


def external_status(states: list[str]) -> str:
    """An external pipeline's status from its jobs' (GitLab's composite status)."""
    found = [GITLAB_STATE.get(s, "failed") for s in states]
    if "running" in found or ("pending" in found and any(s in FINISHED for s in found)):
        return "running"
    for status in ("pending", "failed", "canceled"):
        if status in found:
            return status
    return "success"


def status_ref(repo: Repo, sha: str) -> str:
    """The branch a commit status without `ref` is for: an open pull request's branch
    whose head is `sha`, else a branch whose head it is, else the default branch."""
    for pull in repo.pulls():
        data = pull.pull
        assert data is not None
        if pull.state == "open" and data.head_repo is None and repo.head_sha(pull) == sha:
            return data.head
    heads = sorted(name for name, head in repo.git.branches().items() if head == sha)
    return heads[0] if heads else repo.default_branch


def announce_status(state: State, repo: str, actor: str, status: CommitStatus, *,
                    ref: str | None = None) -> None:
    """A commit status was written. On GitLab it joins the newest pipeline of its commit
    (and ref, when the request names one); a commit with none gets an external pipeline
    (source `external`) whose status follows its statuses: `pipeline` is set on the act
    when that status changed."""
    found = state.repos[repo]
    pipelines: list[CiRun | ExternalPipeline] = [
        *found.runs, *found.api_pipelines, *found.external_pipelines]
    ours = [p for p in pipelines if p.sha == status.sha and (
        ref is None or (p.ref if isinstance(p, ExternalPipeline) else p.branch) == ref)]
    newest = max(ours, key=lambda p: p.id, default=None)
    if isinstance(newest, CiRun):  # joins a CI pipeline: nothing new to deliver
        state.announce(Act("progress", repo, actor, status=status))
        return
    pipeline = newest
    if pipeline is None:
        pipeline = ExternalPipeline(state.new_id(), len(pipelines) + 1, status.sha,
                                    ref or status_ref(found, status.sha), actor)
        found.external_pipelines.append(pipeline)
    if status.id not in pipeline.status_ids:
        pipeline.status_ids.append(status.id)
    latest: dict[str, CommitStatus] = {}
    for item in found.statuses:
        if item.id in pipeline.status_ids:
            latest[item.name] = item
    before, pipeline.status = pipeline.status, external_status(
        [s.state for s in latest.values()])
    if pipeline.status != before:
        pipeline.updated_at = now()
    state.announce(Act("progress", repo, actor, status=status,
                       pipeline=pipeline if pipeline.status != before else None))
