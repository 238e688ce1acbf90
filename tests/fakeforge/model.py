"""The fake forge's state: one forge-neutral model that both front ends render.

Issues and pull/merge requests share one number space per repository (GitHub's way; on
GitLab the same numbers serve as iids). Reactions are stored under GitHub's names and
mapped to GitLab's award emoji names at the GitLab front end.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

from .gitstore import BareRepo

Role = Literal["none", "read", "triage", "write", "maintain", "admin"]
FrontEnd = Literal["github", "gitlab", "github-graphql"]

# GitLab access levels for each role (GitLab has no triage: reporter is closest).
ACCESS_LEVEL: dict[Role, int] = {"read": 20, "triage": 20, "write": 30, "maintain": 40,
                                 "admin": 50}


def now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


@dataclass
class User:
    login: str
    id: int
    name: str
    email: str
    bot: bool = False
    app: str | None = None  # an App's bot user ("<slug>[bot]"): the App's slug


@dataclass
class App:
    """A GitHub App: its installation tokens act as its bot user, `<slug>[bot]`."""

    slug: str
    id: int
    name: str
    owner: str

    @property
    def login(self) -> str:
        return f"{self.slug}[bot]"


@dataclass
class Review:
    """A submitted pull request review: a state, a summary body, and the ids of the
    review comments it brought (GitHub creates one for every diff comment, replies too)."""

    id: int
    author: str
    state: str  # commented | changes_requested | approved (GitHub's webhook spelling)
    body: str
    commit_id: str
    comment_ids: list[int] = field(default_factory=list)
    submitted_at: datetime = field(default_factory=now)


@dataclass
class Member:
    role: Role
    access_level: int | None  # GitLab; None: not a member there
    inherited: bool = False  # GitLab: a member through the parent group only


@dataclass
class Reaction:
    id: int
    content: str  # GitHub's name: +1, -1, eyes, rocket, confused, heart, hooray, laugh
    user: str
    created_at: datetime = field(default_factory=now)


@dataclass
class Comment:
    id: int
    author: str
    body: str
    created_at: datetime = field(default_factory=now)
    updated_at: datetime = field(default_factory=now)
    reactions: list[Reaction] = field(default_factory=list)


@dataclass
class ReviewComment:
    id: int
    author: str
    body: str
    commit_id: str
    created_at: datetime = field(default_factory=now)
    reactions: list[Reaction] = field(default_factory=list)


@dataclass
class ReviewThread:
    """A diff discussion: GitHub renders its comments flat (in_reply_to_id = root)."""

    discussion_id: str
    path: str
    line: int
    comments: list[ReviewComment]
    resolved: bool = False

    @property
    def root(self) -> ReviewComment:
        return self.comments[0]


@dataclass
class PullData:
    head: str
    base: str
    merged: bool = False
    draft: bool = False
    threads: list[ReviewThread] = field(default_factory=list)
    closed_head_sha: str | None = None  # a closed PR keeps the head it had
    head_repo: str | None = None  # a fork's full name; None: the base repository itself
    reviews: list[Review] = field(default_factory=list)


@dataclass
class Issue:
    number: int
    title: str
    body: str
    author: str
    labels: list[str] = field(default_factory=list)
    state: Literal["open", "closed"] = "open"
    comments: list[Comment] = field(default_factory=list)
    reactions: list[Reaction] = field(default_factory=list)
    created_at: datetime = field(default_factory=now)
    updated_at: datetime = field(default_factory=now)
    pull: PullData | None = None

    @property
    def id(self) -> int:
        # Stable, distinct from numbers and other ids.
        return 1_000_000 + self.number


@dataclass
class CiJob:
    id: int
    name: str
    conclusion: str  # success | failure | cancelled ...
    log: str
    stage: str = "test"


@dataclass
class CiRun:
    """A GitHub Actions workflow run / a GitLab pipeline."""

    id: int
    number: int
    name: str
    sha: str
    branch: str
    conclusion: str
    jobs: list[CiJob]
    created_at: datetime = field(default_factory=now)
    # A pipeline created through the API: who created it, and the variables it was given.
    user: str | None = None
    variables: list[dict[str, str]] = field(default_factory=list)


@dataclass
class CheckRun:
    """A check run from a non-Actions app (GitHub only); `conclusion` is None until its
    status is completed."""

    id: int
    name: str
    sha: str
    conclusion: str | None
    title: str
    summary: str
    app: str = "external-ci"
    status: str = "completed"  # queued | in_progress | completed
    details_url: str | None = None


@dataclass
class CommitStatus:
    """A commit status (GitHub `POST /statuses/{sha}`, GitLab `POST /statuses/{sha}`),
    in the forge's own state words (GitHub failure, GitLab failed ...)."""

    id: int
    sha: str
    name: str  # GitHub's context, GitLab's name
    state: str
    description: str
    target_url: str | None
    creator: str
    created_at: datetime = field(default_factory=now)
    updated_at: datetime = field(default_factory=now)


@dataclass
class ExternalPipeline:
    """GitLab's pipeline for commit statuses posted on a commit that has no pipeline
    (source `external`): its status follows theirs (`external_status`). Delivered as
    Pipeline Hooks; the pipelines API does not serve it."""

    id: int
    iid: int
    sha: str
    ref: str
    user: str  # who posted the status that made it
    status: str = "created"  # GitLab's pipeline status
    status_ids: list[int] = field(default_factory=list)  # its jobs: CommitStatus ids
    created_at: datetime = field(default_factory=now)
    updated_at: datetime = field(default_factory=now)


@dataclass
class Repo:
    full_name: str
    id: int
    default_branch: str
    git: BareRepo
    issues: dict[int, Issue] = field(default_factory=dict)
    members: dict[str, Member] = field(default_factory=dict)
    runs: list[CiRun] = field(default_factory=list)
    # Pipelines created through GitLab's API (no jobs run, no hooks): readable by id.
    api_pipelines: list[CiRun] = field(default_factory=list)
    check_runs: list[CheckRun] = field(default_factory=list)
    created_at: datetime = field(default_factory=now)
    statuses: list[CommitStatus] = field(default_factory=list)
    fork_of: str | None = None  # the full name of the repository this one forks
    # GitLab: pipelines made for commit statuses on commits without one (ExternalPipeline).
    external_pipelines: list[ExternalPipeline] = field(default_factory=list)
    # GitLab: who may set pipeline variables (Settings > CI/CD > Variables): "developer"
    # (GitLab's old default, unrestricted), "maintainer", "owner" or "no_one_allowed".
    pipeline_variables_role: str = "developer"

    @property
    def owner(self) -> str:
        return self.full_name.rsplit("/", 1)[0]

    @property
    def name(self) -> str:
        return self.full_name.rsplit("/", 1)[1]

    def next_number(self) -> int:
        return max(self.issues, default=0) + 1

    def pulls(self) -> list[Issue]:
        return [i for i in self.issues.values() if i.pull is not None]

    def head_sha(self, issue: Issue) -> str:
        """A pull request's head: the branch tip in git while it is open."""
        assert issue.pull is not None
        if issue.pull.closed_head_sha:
            return issue.pull.closed_head_sha
        if issue.pull.head_repo not in (None, self.full_name):
            # A fork's commits reach the base repository as refs/pull/<n>/head, as on
            # GitHub (GitLab: refs/merge-requests/<iid>/head).
            return self.git.resolve(f"refs/pull/{issue.number}/head") or "0" * 40
        return self.git.resolve(issue.pull.head) or "0" * 40

    def find_comment(self, comment_id: int) -> tuple[Issue, Comment] | None:
        for issue in self.issues.values():
            for comment in issue.comments:
                if comment.id == comment_id:
                    return issue, comment
        return None

    def find_thread(self, issue: Issue, key: int | str) -> ReviewThread | None:
        """By discussion id (GitLab) or by the id of any of its comments (GitHub)."""
        assert issue.pull is not None
        for thread in issue.pull.threads:
            if thread.discussion_id == key or any(c.id == key for c in thread.comments):
                return thread
        return None


@dataclass(frozen=True)
class Effect:
    """Something a client did to the forge, e.g. `github:o/r#3:comment:hello`."""

    forge: str  # github | gitlab | git
    repo: str
    target: str  # "#3" (issue or GitHub PR), "!3" (GitLab MR), "" (the repo)
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.forge}:{self.repo}{self.target}:{self.kind}:{self.detail}"


@dataclass(frozen=True)
class LostAnswer:
    """A request that takes effect and then answers `status` (a proxy timing out, a
    dropped connection): the client cannot know that it worked."""

    status: int
    methods: frozenset[str]


@dataclass
class Injected:
    """A canned response for the next request to one front end (rate limit, 5xx)."""

    status: int
    headers: dict[str, str]
    message: str


class State:
    """Everything one test arranges and observes; the server swaps in a fresh one."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.users: dict[str, User] = {}
        self.repos: dict[str, Repo] = {}
        self.tokens: dict[str, str] = {}  # token -> login
        # GitLab CI job tokens of running jobs -> (project, pipeline id, who started the job)
        self.job_tokens: dict[str, tuple[str, int, str]] = {}
        self.apps: dict[str, App] = {}  # slug -> GitHub App
        self.app_tokens: dict[str, str] = {}  # installation token -> the App's slug
        # Called with each act a client's request did (tests/fakeforge/acts.py), under the
        # lock: the webhook deliveries (tests/fakeforge/hooks.py) listen here.
        self.listeners: list[Callable[[Any], None]] = []
        self.effects: list[Effect] = []
        self.validation_errors: list[str] = []
        self.injected: dict[FrontEnd, deque[Injected]] = {"github": deque(), "gitlab": deque(),
                                                        "github-graphql": deque()}
        self.requests: list[str] = []  # "METHOD path" per request seen (no headers, no query)
        # Lost answers: the next matching requests take effect, then get this status
        # instead of their reply (FakeForge.fail_after_next).
        self.lost: dict[FrontEnd, deque[LostAnswer]] = {"github": deque(), "gitlab": deque(),
                                                        "github-graphql": deque()}
        self._ids = itertools.count(101)

    def new_id(self) -> int:
        return next(self._ids)

    def user_by_email(self, email: str) -> User | None:
        return next((u for u in self.users.values() if u.email.lower() == email.lower()), None)

    def user_by_id(self, user_id: int) -> User | None:
        return next((u for u in self.users.values() if u.id == user_id), None)

    def repo_by_id(self, repo_id: int) -> Repo | None:
        return next((r for r in self.repos.values() if r.id == repo_id), None)

    def record(self, forge: str, repo: str, target: str, kind: str, detail: str) -> None:
        self.effects.append(Effect(forge, repo, target, kind, detail))

    def lost_answer(self, front: FrontEnd, method: str) -> int | None:
        """The status to answer a request that just took effect with, if its answer is to
        be lost (the first waiting LostAnswer whose methods include `method`)."""
        waiting = self.lost[front]
        if waiting and method.upper() in waiting[0].methods:
            return waiting.popleft().status
        return None

    def announce(self, act: Any) -> None:
        """An act (tests/fakeforge/acts.py) for whoever delivers webhooks for it."""
        for listener in list(self.listeners):
            listener(act)


def discussion_id(seed: int) -> str:
    """GitLab discussion ids are 40 hex characters."""
    return hashlib.sha1(f"discussion-{seed}".encode()).hexdigest()
