"""GitLabForge: the Forge protocol on python-gitlab.

Harmonized with GitHub at this boundary: a merge request is a PullRequest (its iid is the
number, "opened" is "open"), notes are comments, award emoji are reactions. The words
"merge request" stay in this package.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import gitlab
from gitlab.exceptions import GitlabError
from gitlab.v4.objects import Project

from bot.forge.base import (
    DISPATCH_EVENT,
    PROGRESS_NAME,
    Comment,
    Commit,
    ConflictError,
    Dispatch,
    FailedJob,
    ForbiddenError,
    ForgeError,
    ForgeName,
    Issue,
    NotFoundError,
    Permission,
    ProgressState,
    PullRequest,
    PullRequestDraft,
    RateLimitedError,
    Reaction,
    ReviewThread,
    Target,
    UnavailableError,
)
from bot.forge.common import scrub, without_credentials
from bot.forge.payload import get, integer, text

PUBLIC_URL = "https://gitlab.com"
# python-gitlab waits for ever by default: a silent server would hang a job, the gate or
# the server's worker (PyGithub's default is 15 s a read).
HTTP_TIMEOUT_S = 30.0
LOG_TAIL_CHARS = 20_000
# The caller decides about waiting: python-gitlab would otherwise sleep through up to
# ten 429s (Retry-After each) inside a single call.
_CALL: dict[str, Any] = {"obey_rate_limit": False}
_EMOJI: dict[Reaction, str] = {"+1": "thumbsup", "-1": "thumbsdown", "eyes": "eyes",
                               "rocket": "rocket", "confused": "confused"}
# The file variable a dispatched pipeline gets: GitLab writes its value to a file and sets
# the variable to that file's path, which `opbot event --payload` reads.
PLAN_VARIABLE = "OPBOT_PLAN"
OP_VARIABLE = "OPBOT_OP"
_RESOURCE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")
_STATE = {"opened": "open", "closed": "closed", "locked": "closed", "merged": "merged"}
# Access levels, highest first: owner, maintainer, developer, reporter/planner/guest.
_ACCESS: tuple[tuple[int, Permission], ...] = ((50, "admin"), (40, "maintain"),
                                               (30, "write"), (10, "read"))
_COMMIT_STATE: dict[ProgressState, str] = {"pending": "pending", "running": "running",
                                           "success": "success", "failure": "failed"}
STATUS_DESCRIPTION_CHARS = 255
# GitLab's answer to a commit status set to the pending/running state it already has
# (github.com/jenkinsci/gitlab-plugin/issues/885): the state asked for is there already.
_SAME_STATE = "Cannot transition status"
_ALREADY_AWARDED = "has already been taken"  # the same award emoji from the same user


class GitLabForge:
    name: ForgeName = "gitlab"

    def __init__(self, client: gitlab.Gitlab, repo: str) -> None:
        self.repo = repo
        self._client = client
        self._token: str | None = client.private_token or client.oauth_token \
            or client.job_token
        self._full: Project | None = None
        self._login: str | None = None
        self._project_paths: dict[int, str | None] = {}  # fork projects' paths, by id
        # python-gitlab's errors carry no headers; a response hook keeps the rate-limit
        # ones of this thread's last response for RateLimitedError.retry_after_s.
        self._last = threading.local()
        client.session.hooks["response"].append(self._remember_limits)

    @classmethod
    def connect(cls, url: str | None, token: str, repo: str) -> GitLabForge:
        return cls(gitlab.Gitlab(url=url or PUBLIC_URL, private_token=token,
                                 timeout=HTTP_TIMEOUT_S), repo)

    # -- who the token is ---------------------------------------------------------------
    def whoami(self) -> str:
        if self._login is None:
            with self._errors("read who the token is"):
                data = self._client.http_get("/user", **_CALL)
            if not isinstance(data, Mapping) or not data.get("username"):
                raise ForgeError("GitLab: /user named no user")
            self._login = str(data["username"])
        return self._login

    @property
    def _project(self) -> Project:
        """A lazy handle (no request): its URL paths use the encoded project path."""
        return self._client.projects.get(self.repo, lazy=True)

    def _project_info(self) -> Project:
        if self._full is None:
            self._full = self._client.projects.get(self.repo, **_CALL)
        return self._full

    def _noteable(self, target: Target) -> Any:
        manager = self._project.issues if target.kind == "issue" else \
            self._project.mergerequests
        return manager.get(target.number, lazy=True)

    # -- issues, comments, reactions, labels --------------------------------------------
    def get_issue(self, number: int) -> Issue:
        with self._errors(f"get issue #{number}"):
            data = self._project.issues.get(number, **_CALL).attributes
        return _issue(data)

    def find_issue(self, title: str, author: str) -> Issue | None:
        """GitLab's `search` in titles is a fuzzy match: the exact title is checked here."""
        # `in` is a Python keyword: python-gitlab takes it in `query_parameters`, and then
        # sends no other keyword argument as a query parameter.
        query = {"state": "opened", "author_username": author, "search": title,
                 "in": "title", "order_by": "created_at", "sort": "asc"}
        with self._errors(f"find the issue {title!r} by {author}"):
            found = self._project.issues.list(get_all=True, query_parameters=query, **_CALL)
        mine = (i.attributes for i in found if i.attributes.get("title") == title
                and (i.attributes.get("author") or {}).get("username") == author)
        # Oldest first whatever order the server listed them in (iids grow with time).
        return min((_issue(i) for i in mine), key=lambda i: i.number, default=None)

    def create_issue(self, title: str, body: str, labels: Sequence[str] = ()) -> Issue:
        data = {"title": title, "description": body}
        if labels:
            data["labels"] = ",".join(labels)
        with self._errors(f"open the issue {title!r}"):
            created = self._project.issues.create(data, **_CALL)
        return _issue(created.attributes)

    def list_comments(self, target: Target) -> list[Comment]:
        with self._errors(f"list notes on {_ref(target)}"):
            notes = self._noteable(target).notes.list(get_all=True, sort="asc",
                                                      order_by="created_at", **_CALL)
            base = self._web_url(target)
        # System notes are GitLab's activity log; diff notes are review threads.
        return [_comment(n.attributes, base) for n in notes
                if not n.attributes.get("system") and n.attributes.get("type") != "DiffNote"]

    def create_comment(self, target: Target, body: str) -> Comment:
        with self._errors(f"comment on {_ref(target)}"):
            note = self._noteable(target).notes.create({"body": body}, **_CALL)
            return _comment(note.attributes, self._web_url(target))

    def update_comment(self, target: Target, comment_id: int, body: str) -> Comment:
        with self._errors(f"edit note {comment_id} on {_ref(target)}"):
            data = self._noteable(target).notes.update(comment_id, {"body": body}, **_CALL)
            return _comment(data, self._web_url(target))

    def add_reaction(self, target: Target, comment_id: int | None, reaction: Reaction) -> None:
        awardable = self._noteable(target)
        if comment_id is not None:
            awardable = awardable.notes.get(comment_id, lazy=True)
        with self._errors(f"award emoji on {_ref(target)}"):
            try:
                awardable.awardemojis.create({"name": _EMOJI[reaction]}, **_CALL)
            except GitlabError as exc:
                # GitLab refuses the same award twice (404): it is there, as asked.
                if exc.response_code != 404 or _ALREADY_AWARDED not in str(exc.error_message):
                    raise

    def add_labels(self, target: Target, labels: list[str]) -> None:
        if not labels:
            return
        manager = self._project.issues if target.kind == "issue" else \
            self._project.mergerequests
        with self._errors(f"label {_ref(target)}"):
            # add_labels keeps the labels already there (unlike `labels`).
            manager.update(target.number, {"add_labels": ",".join(labels)}, **_CALL)

    # -- people -------------------------------------------------------------------------
    def permission(self, login: str) -> Permission:
        with self._errors(f"permission of {login}"):
            users = self._client.users.list(username=login, get_all=True, **_CALL)
            if not users:
                return "none"
            try:
                # members/all: inherited (group) members count too.
                member = self._project.members_all.get(users[0].id, **_CALL)
            except GitlabError as exc:
                if exc.response_code == 404:
                    return "none"
                raise
        level = int(member.attributes.get("access_level") or 0)
        return next((perm for floor, perm in _ACCESS if level >= floor), "none")

    # -- branches, commits, files -------------------------------------------------------
    def default_branch(self) -> str:
        with self._errors("read the project"):
            return str(self._project_info().attributes["default_branch"])

    def push_url(self) -> str:
        with self._errors("read the project"):
            return without_credentials(str(self._project_info().attributes["http_url_to_repo"]))

    def git_credentials(self) -> tuple[str, str]:
        if self._client.job_token:
            return "gitlab-ci-token", self._client.job_token
        if not self._token:
            raise ForgeError("GitLab: no token to give git")
        return "oauth2", self._token

    def branch_head(self, branch: str) -> str | None:
        with self._errors(f"read branch {branch}"):
            try:
                found = self._project.branches.get(branch, **_CALL)
            except GitlabError as exc:
                if exc.response_code == 404:
                    return None
                raise
        return str(found.attributes["commit"]["id"])

    def commits_since(self, branch: str, base: str) -> list[Commit]:
        with self._errors(f"compare {base}...{branch}"):
            result = self._project.repository_compare(base, branch, **_CALL)
        commits = _oldest_first(result["commits"]) if isinstance(result, Mapping) else []
        # GitLab's commits carry no account: author_login stays None.
        return [Commit(sha=str(c["id"]), message=str(c["message"]).rstrip("\n"),
                       author_name=str(c["author_name"]), author_email=str(c["author_email"]))
                for c in commits]

    def file_content(self, path: str, ref: str) -> str | None:
        with self._errors(f"read {path}@{ref}"):
            try:
                found = self._project.files.get(file_path=path, ref=ref, **_CALL)
            except GitlabError as exc:
                if exc.response_code == 404:
                    return None
                raise
        return bytes(found.decode()).decode("utf-8", errors="replace")

    # -- merge requests -----------------------------------------------------------------
    def find_pull_request(self, head_branch: str) -> PullRequest | None:
        """The open merge request from this project's `head_branch`: GitLab's filter also
        matches forks' branches of that name, which are someone else's."""
        with self._errors(f"find the merge request from {head_branch}"):
            found = self._project.mergerequests.list(source_branch=head_branch, state="opened",
                                                     get_all=True, **_CALL)
        own = (mr.attributes for mr in found
               if mr.attributes.get("source_project_id") == mr.attributes.get(
                   "target_project_id"))
        return next((self._merge_request(mr) for mr in own), None)

    def closed_pull_requests(self, head_branch: str) -> list[PullRequest]:
        with self._errors(f"list the closed merge requests from {head_branch}"):
            found = [mr for state in ("closed", "merged")
                     for mr in self._project.mergerequests.list(
                         source_branch=head_branch, state=state, get_all=True, **_CALL)]
        own = [mr.attributes for mr in found if mr.attributes.get("source_project_id")
               == mr.attributes.get("target_project_id")]
        own.sort(key=lambda data: int(data.get("iid") or 0), reverse=True)
        return [self._merge_request(data) for data in own]

    def get_pull_request(self, number: int) -> PullRequest:
        with self._errors(f"get merge request !{number}"):
            data = self._project.mergerequests.get(number, **_CALL).attributes
        return self._merge_request(data)

    def _merge_request(self, mr: Mapping[str, Any]) -> PullRequest:
        source, target = mr.get("source_project_id"), mr.get("target_project_id")
        if source == target:
            return _merge_request(mr, self.repo)
        return _merge_request(mr, self._project_path(source), from_fork=True)

    def _project_path(self, project_id: Any) -> str | None:
        """A fork's path, None where it is gone or hidden from the token."""
        if not isinstance(project_id, int):
            return None
        if project_id not in self._project_paths:
            with self._errors(f"read project {project_id}"):
                try:
                    data = self._client.projects.get(project_id, **_CALL).attributes
                    self._project_paths[project_id] = str(data["path_with_namespace"])
                except GitlabError as exc:
                    if exc.response_code not in (403, 404):
                        raise
                    self._project_paths[project_id] = None
        return self._project_paths[project_id]

    def create_pull_request(self, draft: PullRequestDraft) -> PullRequest:
        data = {"source_branch": draft.head_branch, "target_branch": draft.base_branch,
                "title": draft.title, "description": draft.body}
        if draft.labels:
            data["labels"] = ",".join(draft.labels)
        with self._errors(f"open a merge request from {draft.head_branch}"):
            try:
                created = self._project.mergerequests.create(data, **_CALL)
            except GitlabError as exc:
                if exc.response_code == 409:
                    existing = self.find_pull_request(draft.head_branch)
                    which = f": !{existing.number}" if existing else ""
                    raise ConflictError(f"GitLab: a merge request from {draft.head_branch} "
                                        f"already exists{which}") from exc
                raise
        return self._merge_request(created.attributes)

    def update_pull_request(self, number: int, *, title: str | None = None,
                            body: str | None = None) -> PullRequest:
        changes = {k: v for k, v in (("title", title), ("description", body)) if v is not None}
        if not changes:
            return self.get_pull_request(number)
        with self._errors(f"update merge request !{number}"):
            data = self._project.mergerequests.update(number, changes, **_CALL)
        return self._merge_request(data)

    def review_threads(self, number: int) -> list[ReviewThread]:
        with self._errors(f"list discussions on !{number}"):
            discussions = self._project.mergerequests.get(number, lazy=True) \
                .discussions.list(get_all=True, **_CALL)
            base = self._web_url(Target("pull", number))
        threads = (_thread(d.attributes, base) for d in discussions)
        return [t for t in threads if t is not None]

    def reply_to_thread(self, number: int, thread_id: str, body: str) -> Comment:
        discussion = self._project.mergerequests.get(number, lazy=True) \
            .discussions.get(thread_id, lazy=True)
        with self._errors(f"reply to discussion {thread_id} on !{number}"):
            note = discussion.notes.create({"body": body}, **_CALL)
            return _comment(note.attributes, self._web_url(Target("pull", number)))

    def resolve_thread(self, number: int, thread_id: str) -> None:
        with self._errors(f"resolve discussion {thread_id} on !{number}"):
            self._project.mergerequests.get(number, lazy=True).discussions.update(
                thread_id, {"resolved": True}, **_CALL)

    def review_summaries(self, number: int) -> list[Comment]:
        """Individual, non-system notes written since the head commit: GitLab keeps a
        review's summary as a plain note, so a plain comment of that time counts too."""
        with self._errors(f"list discussions on !{number}"):
            head = self.get_pull_request(number).head_sha
            commit = self._project.commits.get(head, **_CALL).attributes
            discussions = self._project.mergerequests.get(number, lazy=True) \
                .discussions.list(get_all=True, **_CALL)
            base = self._web_url(Target("pull", number))
        since = _when(str(commit.get("committed_date") or commit.get("created_at") or ""))
        notes = [n for d in discussions if d.attributes.get("individual_note")
                 for n in d.attributes.get("notes", [])
                 if not n.get("system") and n.get("type") not in ("DiffNote", "DiscussionNote")]
        recent = [n for n in notes if since is None or
                  ((when := _when(str(n.get("created_at") or ""))) is not None and when >= since)]
        return [_comment(n, base) for n in sorted(recent, key=lambda n: int(n["id"]))]

    # -- CI -----------------------------------------------------------------------------
    def failed_jobs(self, sha: str) -> list[FailedJob]:
        failed: list[FailedJob] = []
        with self._errors(f"list failed CI jobs for {sha[:12]}"):
            pipelines = self._project.pipelines.list(sha=sha, status="failed", get_all=True,
                                                     **_CALL)
            for pipeline in pipelines:
                jobs = self._project.pipelines.get(pipeline.id, lazy=True) \
                    .jobs.list(scope="failed", get_all=True, **_CALL)
                for job in jobs:
                    trace = self._project.jobs.get(job.id, lazy=True).trace(**_CALL)
                    text = bytes(trace).decode("utf-8", errors="replace")
                    failed.append(FailedJob(str(job.name), str(job.web_url),
                                            text[-LOG_TAIL_CHARS:]))
        return failed

    def report_progress(self, sha: str, state: ProgressState, summary: str,
                        url: str | None = None) -> None:
        """A commit status named PROGRESS_NAME (GitLab shows it in an external pipeline of
        the commit). GitLab refuses to set pending or running twice (400 "Cannot transition
        status"): the state is there already, so that is no error."""
        description = summary.strip().splitlines()[0] if summary.strip() else state
        if len(description) > STATUS_DESCRIPTION_CHARS:
            description = description[:STATUS_DESCRIPTION_CHARS - 1] + "…"
        data = {"state": _COMMIT_STATE[state], "name": PROGRESS_NAME,
                "description": description}
        if url:
            data["target_url"] = url
        commit = self._project.commits.get(sha, lazy=True)
        with self._errors(f"set the {PROGRESS_NAME} status of {sha[:12]}"):
            try:
                commit.statuses.create(data, **_CALL)
            except GitlabError as exc:
                if exc.response_code != 400 or _SAME_STATE not in str(exc.error_message) \
                        or state not in ("pending", "running"):
                    raise

    def dispatch_plan(self, plan: Mapping[str, Any]) -> Dispatch:
        ref = self.default_branch()  # the default branch's CI config: never an MR's code
        payload = {"object_kind": DISPATCH_EVENT, "plan": dict(plan),
                   "project": {"path_with_namespace": self.repo}}
        variables = [{"key": PLAN_VARIABLE, "value": json.dumps(payload),
                      "variable_type": "file"}]
        op = plan.get("op")
        if isinstance(op, str) and _RESOURCE_NAME.fullmatch(op):
            # The template's resource_group is opbot-$OPBOT_OP: one job per op at a time.
            variables.append({"key": OP_VARIABLE, "value": op, "variable_type": "env_var"})
        with self._errors(f"create a pipeline on {ref}"):
            created = self._project.pipelines.create({"ref": ref, "variables": variables},
                                                     **_CALL)
        data = created.attributes
        return Dispatch(id=int(data["id"]), url=str(data.get("web_url") or "") or None)

    def dispatched_payload(self, pipeline_id: int) -> Any:
        """The plan file the bot gave pipeline `pipeline_id` (dispatch_plan), read from the
        API: only a pipeline the bot's own user created counts. A replay of the bot's own
        earlier pipeline carries the bot's own plan, which the job checks again anyway."""
        what = f"read pipeline {pipeline_id}"
        with self._errors(what):
            pipeline = self._project.pipelines.get(pipeline_id, **_CALL)
        creator = (pipeline.attributes.get("user") or {}).get("username")
        if creator != self.whoami():
            raise ForgeError(f"GitLab: pipeline {pipeline_id} was started by "
                             f"{creator or 'nobody known'}, not by the bot "
                             f"({self.whoami()}): its plan is not the bot's")
        with self._errors(f"read the variables of pipeline {pipeline_id}"):
            variables = pipeline.variables.list(get_all=True, **_CALL)
        value = next((v.attributes.get("value") for v in variables
                      if v.attributes.get("key") == PLAN_VARIABLE), None)
        if not isinstance(value, str):
            raise ForgeError(f"GitLab: pipeline {pipeline_id} carries no {PLAN_VARIABLE}")
        try:
            return json.loads(value)
        except ValueError:
            raise ForgeError(f"GitLab: the {PLAN_VARIABLE} of pipeline {pipeline_id} is "
                             "not JSON") from None

    # -- helpers ------------------------------------------------------------------------
    def _web_url(self, target: Target) -> str:
        kind = "issues" if target.kind == "issue" else "merge_requests"
        web = str(self._project_info().attributes["web_url"])
        return f"{web}/-/{kind}/{target.number}"

    def _remember_limits(self, response: Any, *args: Any, **kwargs: Any) -> None:
        headers = response.headers
        self._last.limits = {k.lower(): headers[k] for k in ("Retry-After", "RateLimit-Reset",
                                                             "RateLimit-Remaining")
                             if k in headers}

    @contextlib.contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except GitlabError as exc:
            limits: dict[str, str] = getattr(self._last, "limits", {})
            raise _translate(exc, action, self._token, limits) from exc
        except OSError as exc:  # requests' connection errors derive from OSError
            raise UnavailableError(scrub(f"GitLab: {action}: {type(exc).__name__}",
                                         self._token)) from exc


# -- conversions ---------------------------------------------------------------------------
def _ref(target: Target) -> str:
    return f"#{target.number}" if target.kind == "issue" else f"!{target.number}"


def _issue(data: Mapping[str, Any]) -> Issue:
    return Issue(number=int(data["iid"]), title=str(data["title"]),
                 body=str(data.get("description") or ""),
                 author=str(data["author"]["username"]),
                 labels=tuple(str(n) for n in data.get("labels", ())),
                 state=_STATE.get(str(data["state"]), str(data["state"])),
                 url=str(data["web_url"]))


def _comment(note: Mapping[str, Any], base_url: str) -> Comment:
    return Comment(id=int(note["id"]), body=str(note.get("body") or ""),
                   author=str(note["author"]["username"]), url=f"{base_url}#note_{note['id']}")


def _merge_request(mr: Mapping[str, Any], head_repo: str | None, *,
                   from_fork: bool = False) -> PullRequest:
    state = str(mr["state"])
    return PullRequest(number=int(mr["iid"]), title=str(mr["title"]),
                       body=str(mr.get("description") or ""),
                       author=str(mr["author"]["username"]),
                       head_branch=str(mr["source_branch"]), head_sha=str(mr.get("sha") or ""),
                       base_branch=str(mr["target_branch"]), state=_STATE.get(state, state),
                       url=str(mr["web_url"]), labels=tuple(str(n) for n in mr.get("labels", ())),
                       from_fork=from_fork, head_repo=head_repo)


def _when(text: str) -> datetime | None:
    """GitLab's timestamps ("...Z" or with an offset) as aware datetimes."""
    with contextlib.suppress(ValueError):
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        return moment if moment.tzinfo is not None else None
    return None


def _thread(discussion: Mapping[str, Any], base_url: str) -> ReviewThread | None:
    """A discussion on the diff (holding DiffNote notes); None for plain comments."""
    notes = [n for n in discussion.get("notes", []) if not n.get("system")]
    diff_notes = [n for n in notes if n.get("type") == "DiffNote"]
    if not diff_notes:
        return None
    position = diff_notes[0].get("position") or {}
    line = position.get("new_line") or position.get("old_line")
    resolvable = [n for n in notes if n.get("resolvable")]
    return ReviewThread(id=str(discussion["id"]),
                        comments=tuple(_comment(n, base_url) for n in notes),
                        path=position.get("new_path") or position.get("old_path"),
                        line=int(line) if line is not None else None,
                        resolved=bool(resolvable) and all(n.get("resolved") for n in resolvable))


def _oldest_first(commits: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Parents before children, whatever order the server listed them in."""
    pending = list(commits)
    ids = {c["id"] for c in pending}
    done: set[str] = set()
    ordered: list[Mapping[str, Any]] = []
    while pending:
        ready = [c for c in pending
                 if all(p in done or p not in ids for p in c.get("parent_ids", ()))]
        if not ready:  # no parent data to go on: keep the server's order
            ready = pending[:1]
        for commit in ready:
            ordered.append(commit)
            done.add(commit["id"])
            pending.remove(commit)
    return ordered


# -- errors --------------------------------------------------------------------------------


def _translate(exc: GitlabError, action: str, token: str | None,
               limits: Mapping[str, str]) -> ForgeError:
    code = exc.response_code
    detail = str(exc.error_message)[:200]
    message = scrub(f"GitLab {code} on {action}: {detail}".rstrip(": "), token)
    if code == 404:
        return NotFoundError(message)
    if code == 429 or (code == 403 and limits.get("ratelimit-remaining") == "0"):
        return RateLimitedError(message, _retry_after(limits))
    if code == 403:
        return ForbiddenError(message)
    if code == 409:
        return ConflictError(message)
    if code is not None and code >= 500:
        return UnavailableError(message)
    return ForgeError(message)


def _retry_after(limits: Mapping[str, str]) -> float | None:
    with contextlib.suppress(ValueError):
        if "retry-after" in limits:
            return max(0.0, float(limits["retry-after"]))
        if "ratelimit-reset" in limits:
            return max(0.0, float(limits["ratelimit-reset"]) - time.time())
    return None


def identity(url: str | None, token: str) -> str:
    """The login `token` acts as (GitLabForge.whoami, which needs no project)."""
    return GitLabForge.connect(url, token, repo="").whoami()


def payload_of_running_job(url: str | None, token: str, job_token: str) -> Any:
    """The plan file of the pipeline whose job this process runs, as the bot created it.

    Every environment variable of a pipeline may be set by whoever starts one (the plan
    file, CI_PIPELINE_ID, GITLAB_USER_LOGIN), so the job asks GitLab with its own job token
    which job it is: that job must have been started by the bot (a person's retry of an
    old bot job is refused), in a pipeline the bot created, whose OPBOT_PLAN names the
    project the pipeline runs in. The plan comes from the API, not from the file."""
    base = url or PUBLIC_URL
    try:
        job = gitlab.Gitlab(url=base, job_token=job_token,
                            timeout=HTTP_TIMEOUT_S).http_get("/job", **_CALL)
    except GitlabError as exc:
        raise ForgeError(scrub(f"GitLab {exc.response_code} on reading this CI job with its "
                               "job token: not a running job of this GitLab", job_token)
                         ) from exc
    except OSError as exc:
        raise UnavailableError(f"GitLab: read this CI job: {type(exc).__name__}") from exc
    bot_client = gitlab.Gitlab(url=base, private_token=token, timeout=HTTP_TIMEOUT_S)
    forge = GitLabForge(bot_client, repo="")  # one client: who the bot is is asked once
    bot = forge.whoami()
    started_by = text(get(job, "user", "username"))
    if started_by != bot:
        raise ForgeError(f"GitLab: this job was started by {started_by or 'nobody known'}, "
                         f"not by the bot ({bot})")
    pipeline = integer(get(job, "pipeline", "id"))
    project_id = integer(get(job, "pipeline", "project_id"))
    if pipeline is None or project_id is None:
        raise ForgeError("GitLab: this job names no pipeline")
    with forge._errors(f"read project {project_id}"):
        project = bot_client.projects.get(project_id, **_CALL).attributes
    path = str(project.get("path_with_namespace"))
    _require_restricted_variables(project, path)
    forge.repo = path
    payload = forge.dispatched_payload(pipeline)
    planned = payload.get("plan") if isinstance(payload, Mapping) else None
    repo = planned.get("repo") if isinstance(planned, Mapping) else None
    if repo != path:
        raise ForgeError(f"GitLab: the plan of pipeline {pipeline} is for {repo!r}, and the "
                         f"pipeline runs in {path}")
    return payload


# Who may set pipeline variables, where a dispatched job may trust its environment.
_RESTRICTED_ROLES = ("maintainer", "owner", "no_one_allowed")


def _require_restricted_variables(project: Mapping[str, Any], path: str) -> None:
    """Whoever may set a pipeline's variables controls its jobs' environment — the API URL
    the job asks, the opbot it installs — next to the bot's token: only Maintainers (the
    bot's own role) may, or the plan is not carried out."""
    restricted = project.get("restrict_user_defined_variables")
    role = project.get("ci_pipeline_variables_minimum_override_role") or (
        "maintainer" if restricted else None)
    if restricted is not True or role not in _RESTRICTED_ROLES:
        raise ForgeError(f"GitLab: in {path}, {role or 'anyone who may run a pipeline'} may "
                         "set pipeline variables, and with them the environment of the job "
                         "that holds the bot's token: set Settings > CI/CD > Variables > "
                         "'Minimum role to use pipeline variables' to Maintainer, and give "
                         "the bot's token the Maintainer role")
