"""One Forge interface for every forge; shared types; typed errors.

Each forge converts its wire format into these types at its boundary (GitLab's merge
request `iid` is a `number`, "merge request" wording stays inside bot/forge/gitlab/), and
turns its client's exceptions into the errors below, so nothing above matches on forge
error text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

# A key of bot/forge/registry.py: a plain string, so a new forge needs no edit here.
ForgeName = str
TargetKind = Literal["issue", "pull"]
Permission = Literal["none", "read", "triage", "write", "maintain", "admin"]
PERMISSION_ORDER: tuple[Permission, ...] = ("none", "read", "triage", "write", "maintain",
                                            "admin")
Reaction = Literal["+1", "-1", "eyes", "rocket", "confused"]
# Where a run stands, as `report_progress` shows it on a commit.
ProgressState = Literal["pending", "running", "success", "failure"]
# The name opbot's check run (GitHub) / commit status (both forges) goes by.
PROGRESS_NAME = "opbot"
# What a plan handed to CI is called on both forges: GitHub's repository_dispatch
# event_type, and the object_kind of the file GitLab's pipeline gets (see dispatch_plan).
DISPATCH_EVENT = "opbot"


def at_least(permission: Permission, minimum: Permission) -> bool:
    return PERMISSION_ORDER.index(permission) >= PERMISSION_ORDER.index(minimum)


class ForgeError(Exception):
    """A forge request failed; the message is safe to show (no token, no raw body)."""


class NotFoundError(ForgeError):
    pass


class ForbiddenError(ForgeError):
    """The bot's token lacks the permission for this request."""


class RateLimitedError(ForgeError):
    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class UnavailableError(ForgeError):
    """The forge failed on its side (5xx, a dropped connection): worth retrying."""


class ConflictError(ForgeError):
    """The request clashes with the forge's state (e.g. a PR for this branch exists)."""


@dataclass(frozen=True)
class Target:
    """An issue or a pull/merge request, by number (GitLab: iid)."""

    kind: TargetKind
    number: int


@dataclass(frozen=True)
class Comment:
    """A comment, note, reply or review summary. `author` is the login exactly as the
    forge reports it: a GitHub App writes as `<slug>[bot]`, so comparing it with
    `Forge.whoami()` tells the bot's own comments from anyone else's."""

    id: int
    body: str
    author: str
    url: str = ""


@dataclass(frozen=True)
class Issue:
    number: int
    title: str
    body: str
    author: str
    labels: tuple[str, ...] = ()
    state: str = "open"
    url: str = ""


@dataclass(frozen=True)
class PullRequest:
    number: int
    title: str
    body: str
    author: str
    head_branch: str
    head_sha: str
    base_branch: str
    state: str = "open"  # open | closed | merged
    url: str = ""
    labels: tuple[str, ...] = ()
    # Where the head branch lives. A fork's branch name proves nothing about who wrote
    # it: GitHub compares head.repo with base.repo (a deleted fork: head.repo null, still
    # a fork), GitLab source_project_id with target_project_id. head_repo is that
    # repository's name ("owner/name"), None where the forge no longer knows it.
    from_fork: bool = False
    head_repo: str | None = None


@dataclass(frozen=True)
class Commit:
    sha: str
    message: str
    author_name: str
    author_email: str
    author_login: str | None = None  # the forge account, when the forge knows it


@dataclass(frozen=True)
class ReviewThread:
    """A review discussion on a pull request; `id` is what `reply_to_thread` and
    `resolve_thread` name (GitHub: the REST id of its first comment; GitLab: the
    discussion id). `comments` are oldest first. `node_id` is GitHub's GraphQL id of the
    thread (None on GitLab, whose `id` serves both)."""

    id: str
    comments: tuple[Comment, ...]
    path: str | None = None
    line: int | None = None
    resolved: bool = False
    node_id: str | None = None

    @property
    def last_author(self) -> str | None:
        """Who wrote the newest comment (None for an empty thread): a thread whose last
        word is the bot's needs no answer from it."""
        return self.comments[-1].author if self.comments else None


@dataclass(frozen=True)
class FailedJob:
    """A failed CI job (GitHub Actions job / check run, GitLab job) and its log's end."""

    name: str
    url: str
    log: str = ""


@dataclass(frozen=True)
class FileChange:
    path: str
    content: str


@dataclass(frozen=True)
class Dispatch:
    """A plan handed to the CI system. GitLab names the pipeline it created; GitHub's
    repository_dispatch answers 204 and names no run, so both fields stay None there."""

    id: int | None = None
    url: str | None = None


@dataclass
class PullRequestDraft:
    head_branch: str
    base_branch: str
    title: str
    body: str
    labels: list[str] = field(default_factory=list)


class Forge(Protocol):
    """Everything opbot does on a forge, for one repository."""

    name: ForgeName
    repo: str  # as the forge names it: "owner/name" (GitHub), "group/project" (GitLab)

    # -- who the token is -----------------------------------------------------------------
    def whoami(self) -> str:
        """The login the token acts as, exactly as the forge writes it as a comment's
        author (a GitHub App installation: `<slug>[bot]`). Asked once, then cached."""
        ...

    # -- issues, comments, reactions, labels --------------------------------------------
    def get_issue(self, number: int) -> Issue: ...
    def find_issue(self, title: str, author: str) -> Issue | None:
        """The oldest open issue (never a pull/merge request) titled exactly `title` that
        `author` opened; None if none."""
        ...
    def create_issue(self, title: str, body: str, labels: Sequence[str] = ()) -> Issue:
        """A new issue, opened by the token's user, born with `labels`. Not idempotent on
        its own: RetryingForge looks with `find_issue(title, whoami())` after a lost answer."""
        ...
    def list_comments(self, target: Target) -> list[Comment]: ...
    def create_comment(self, target: Target, body: str) -> Comment: ...
    def update_comment(self, target: Target, comment_id: int, body: str) -> Comment: ...
    def add_reaction(self, target: Target, comment_id: int | None, reaction: Reaction) -> None:
        """React to a comment (or, with comment_id None, to the issue/PR itself)."""
        ...
    def add_labels(self, target: Target, labels: list[str]) -> None: ...

    # -- people -------------------------------------------------------------------------
    def permission(self, login: str) -> Permission:
        """The actor's permission on the repository, read from the API."""
        ...

    # -- branches, commits, files -------------------------------------------------------
    def default_branch(self) -> str: ...
    def push_url(self) -> str:
        """The repository's URL for `git clone`/`git push`, without credentials: git gets
        those from `git_credentials()` through a credential helper, never in a URL (URLs
        end up in logs, error messages and .git/config)."""
        ...
    def git_credentials(self) -> tuple[str, str]:
        """(username, password) for git over HTTPS: GitHub ("x-access-token", token),
        GitLab ("oauth2", token) or ("gitlab-ci-token", job token)."""
        ...
    def branch_head(self, branch: str) -> str | None: ...
    def commits_since(self, branch: str, base: str) -> list[Commit]:
        """Commits on `branch` that `base` lacks, oldest first."""
        ...
    def file_content(self, path: str, ref: str) -> str | None: ...

    # -- pull/merge requests ------------------------------------------------------------
    def find_pull_request(self, head_branch: str) -> PullRequest | None:
        """The open PR/MR from this branch, if any."""
        ...
    def closed_pull_requests(self, head_branch: str) -> list[PullRequest]:
        """PRs/MRs from this repository's branch that were closed (merged or not), newest
        first."""
        ...
    def get_pull_request(self, number: int) -> PullRequest: ...
    def create_pull_request(self, draft: PullRequestDraft) -> PullRequest: ...
    def update_pull_request(self, number: int, *, title: str | None = None,
                            body: str | None = None) -> PullRequest: ...
    def review_threads(self, number: int) -> list[ReviewThread]: ...
    def reply_to_thread(self, number: int, thread_id: str, body: str) -> Comment: ...
    def resolve_thread(self, number: int, thread_id: str) -> None:
        """Mark a review thread resolved (`thread_id`: `ReviewThread.id`; GitHub also
        takes its `node_id`). Resolving a resolved thread is no error."""
        ...
    def review_summaries(self, number: int) -> list[Comment]:
        """What reviewers wrote outside the inline threads about the PR's current head,
        oldest first. GitHub: reviews with a body, state COMMENTED or CHANGES_REQUESTED,
        submitted on the head commit. GitLab, which keeps a review's summary as a plain
        note: the merge request's individual, non-system notes written since the head
        commit (so every plain comment of that time counts, the bot's own included)."""
        ...

    # -- CI -----------------------------------------------------------------------------
    def failed_jobs(self, sha: str) -> list[FailedJob]:
        """Failed CI jobs for a commit, each with the end of its log (opbot's own progress
        reports, PROGRESS_NAME, are none of them)."""
        ...
    def report_progress(self, sha: str, state: ProgressState, summary: str,
                        url: str | None = None) -> None:
        """Show where opbot's work on commit `sha` stands, under PROGRESS_NAME, linking to
        `url`. GitHub: a check run, created once per sha and then updated (only GitHub Apps
        may create check runs: other tokens get a commit status instead); GitLab: a commit
        status. Repeating a report is harmless."""
        ...
    def dispatch_plan(self, plan: Mapping[str, Any]) -> Dispatch:
        """Hand a plan (`Plan.to_json()`) to the repository's CI, on its default branch
        (never a pull request's code): GitHub gets a `repository_dispatch` event
        DISPATCH_EVENT with the plan in `client_payload.plan`; GitLab a pipeline whose file
        variable OPBOT_PLAN holds `{"object_kind": DISPATCH_EVENT, "plan": ...}`. Not
        idempotent: a retry after a lost answer may dispatch twice, so RetryingForge
        retries it only after a rate limit."""
        ...
