"""One Forge interface for every forge; shared types; typed errors.

Each forge converts its wire format into these types at its boundary (GitLab's merge
request `iid` is a `number`, "merge request" wording stays inside bot/forge/gitlab/), and
turns its client's exceptions into the errors below, so nothing above matches on forge
error text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

# A key of bot/forge/registry.py: a plain string, so a new forge needs no edit here.
ForgeName = str
TargetKind = Literal["issue", "pull"]
Permission = Literal["none", "read", "triage", "write", "maintain", "admin"]
PERMISSION_ORDER: tuple[Permission, ...] = ("none", "read", "triage", "write", "maintain",
                                            "admin")
Reaction = Literal["+1", "-1", "eyes", "rocket", "confused"]
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


@dataclass(frozen=True)
class Commit:
    sha: str
    message: str
    author_name: str
    author_email: str
    author_login: str | None = None  # the forge account, when the forge knows it


@dataclass(frozen=True)
class ReviewThread:
    """A review discussion on a pull request; `id` is what a reply names."""

    id: str
    comments: tuple[Comment, ...]
    path: str | None = None
    line: int | None = None
    resolved: bool = False


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

    # -- issues, comments, reactions, labels --------------------------------------------
    def get_issue(self, number: int) -> Issue: ...
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
        """A URL `git push` can use (credentials included where the forge needs them)."""
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
    def get_pull_request(self, number: int) -> PullRequest: ...
    def create_pull_request(self, draft: PullRequestDraft) -> PullRequest: ...
    def update_pull_request(self, number: int, *, title: str | None = None,
                            body: str | None = None) -> PullRequest: ...
    def review_threads(self, number: int) -> list[ReviewThread]: ...
    def reply_to_thread(self, number: int, thread_id: str, body: str) -> Comment: ...

    # -- CI -----------------------------------------------------------------------------
    def failed_jobs(self, sha: str) -> list[FailedJob]:
        """Failed CI jobs for a commit, each with the end of its log."""
        ...
    def dispatch_plan(self, plan: Mapping[str, Any]) -> Dispatch:
        """Hand a plan (`Plan.to_json()`) to the repository's CI, on its default branch
        (never a pull request's code): GitHub gets a `repository_dispatch` event
        DISPATCH_EVENT with the plan in `client_payload.plan`; GitLab a pipeline whose file
        variable OPBOT_PLAN holds `{"object_kind": DISPATCH_EVENT, "plan": ...}`. Not
        idempotent: a retry after a lost answer may dispatch twice."""
        ...
