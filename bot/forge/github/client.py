"""GitHubForge: the Forge protocol on PyGithub.

PyGithub objects never leave this module: each method converts them into base.py's
types, and `GithubException` into base.py's errors (messages without the token or the
raw response body).
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import time
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlsplit

from github import Auth, Github, GithubException
from github.Commit import Commit as GhCommit
from github.GithubObject import NotSet
from github.Issue import Issue as GhIssue
from github.IssueComment import IssueComment
from github.PullRequest import PullRequest as GhPullRequest
from github.PullRequestComment import PullRequestComment
from github.Repository import Repository
from github.WorkflowJob import WorkflowJob

from bot.forge.base import (
    DISPATCH_EVENT,
    PERMISSION_ORDER,
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

PUBLIC_API = "https://api.github.com"
LOG_TAIL_CHARS = 20_000
LOG_TIMEOUT_S = 60
# GitHub's legacy `permission` field (admin/write/read/none) when no usable role_name.
_LEGACY_PERMISSION: dict[str, Permission] = {"admin": "admin", "write": "write",
                                              "read": "read", "none": "none"}
_ACTIONS_APP = "github-actions"
_NEXT_LINK = re.compile(r'<([^>]+)>;\s*rel="next"')
# Review states whose body speaks to the author (an approval's text asks for nothing).
_SUMMARY_STATES = ("COMMENTED", "CHANGES_REQUESTED")
# report_progress's states as a check run's status/conclusion, and as a commit status.
_CHECK_RUN: dict[ProgressState, dict[str, str]] = {
    "pending": {"status": "queued"}, "running": {"status": "in_progress"},
    "success": {"status": "completed", "conclusion": "success"},
    "failure": {"status": "completed", "conclusion": "failure"}}
_COMMIT_STATE: dict[ProgressState, str] = {"pending": "pending", "running": "pending",
                                           "success": "success", "failure": "failure"}
STATUS_DESCRIPTION_CHARS = 140  # GitHub refuses a longer commit status description
CHECK_TEXT_CHARS = 65_535  # a check run's output.summary limit


class GitHubForge:
    name: ForgeName = "github"

    def __init__(self, client: Github, repo: str) -> None:
        self.repo = repo
        self._client = client
        # Lazy objects cost no request until a field is read: get_issue(n).get_comments()
        # is one GET, not two.
        self._lazy = client.withLazy(True)
        self._repo_obj: Repository | None = None
        auth = client.requester.auth
        self._token = auth.token if isinstance(auth, Auth.Token) else None
        self._login: str | None = None
        # report_progress: the check run opbot keeps per commit, or commit statuses only
        # once GitHub said check runs are not for this token (not a GitHub App).
        self._check_runs: dict[str, tuple[int, bool]] = {}  # sha -> (id, completed)
        self._statuses_only = False

    @classmethod
    def connect(cls, url: str | None, token: str, repo: str) -> GitHubForge:
        """PyGithub's default pacing between requests stays (GitHub asks for it); its
        retries are off, so a rate limit reaches the caller as RateLimitedError."""
        client = Github(base_url=url or PUBLIC_API, auth=Auth.Token(token), retry=None)
        return cls(client, repo)

    # -- who the token is ---------------------------------------------------------------
    def whoami(self) -> str:
        """`GET /user`; an App installation token is refused there (403 "Resource not
        accessible by integration") and asks GraphQL's `viewer`, which names the App's bot
        user, `<slug>[bot]`: the login its comments carry."""
        if self._login is None:
            with self._errors("read who the token is"):
                try:
                    _, data = self._client.requester.requestJsonAndCheck("GET", "/user")
                    login = data["login"]
                except GithubException as exc:
                    if exc.status != 403 or _rate_limited(_lower(exc.headers)):
                        raise
                    _, answer = self._client.requester.graphql_query(_VIEWER_QUERY, {})
                    login = answer["data"]["viewer"]["login"]
            self._login = str(login)
        return self._login

    @property
    def _repo(self) -> Repository:
        if self._repo_obj is None:
            self._repo_obj = self._lazy.get_repo(self.repo)
        return self._repo_obj

    # -- issues, comments, reactions, labels --------------------------------------------
    def get_issue(self, number: int) -> Issue:
        with self._errors(f"get issue #{number}"):
            return _issue(self._repo.get_issue(number))

    def find_issue(self, title: str, author: str) -> Issue | None:
        """GitHub's issues list holds pull requests too (those carry `pull_request`), and
        filters by creator but not by title: read as plain JSON, oldest first (a PyGithub
        Issue would fetch itself again to say it has no `pull_request`)."""
        with self._errors(f"find the issue {title!r} by {author}"):
            for item in self._json_pages(f"/repos/{self.repo}/issues", state="open",
                                         creator=author, sort="created", direction="asc"):
                if item.get("pull_request") is None and item.get("title") == title \
                        and (item.get("user") or {}).get("login") == author:
                    return _json_issue(item)
        return None

    def create_issue(self, title: str, body: str, labels: Sequence[str] = ()) -> Issue:
        # GitHub drops the labels of a user without push access silently; the Issue says
        # what it really got.
        with self._errors(f"open the issue {title!r}"):
            return _issue(self._repo.create_issue(title, body=body, labels=list(labels)))

    def list_comments(self, target: Target) -> list[Comment]:
        # PR conversation comments are issue comments on GitHub.
        with self._errors(f"list comments on #{target.number}"):
            return [_comment(c) for c in self._repo.get_issue(target.number).get_comments()]

    def create_comment(self, target: Target, body: str) -> Comment:
        with self._errors(f"comment on #{target.number}"):
            return _comment(self._repo.get_issue(target.number).create_comment(body))

    def update_comment(self, target: Target, comment_id: int, body: str) -> Comment:
        with self._errors(f"edit comment {comment_id}"):
            comment = self._repo.get_issue(target.number).get_comment(comment_id)
            comment.edit(body)
            return _comment(comment)

    def add_reaction(self, target: Target, comment_id: int | None, reaction: Reaction) -> None:
        with self._errors(f"react on #{target.number}"):
            issue = self._repo.get_issue(target.number)
            if comment_id is None:
                issue.create_reaction(reaction)
            else:
                issue.get_comment(comment_id).create_reaction(reaction)

    def add_labels(self, target: Target, labels: list[str]) -> None:
        if not labels:
            return
        # PyGithub's add_to_labels posts a bare JSON array; GitHub's description asks for
        # {"labels": [...]}, so this one call goes through the requester.
        with self._errors(f"label #{target.number}"):
            self._client.requester.requestJsonAndCheck(
                "POST", f"/repos/{self.repo}/issues/{target.number}/labels",
                input={"labels": list(labels)})

    # -- people -------------------------------------------------------------------------
    def permission(self, login: str) -> Permission:
        url = f"/repos/{self.repo}/collaborators/{quote(login, safe='')}/permission"
        with self._errors(f"permission of {login}"):
            try:
                _, data = self._client.requester.requestJsonAndCheck("GET", url)
            except GithubException as exc:
                if exc.status == 404:  # no such user, or not a collaborator
                    return "none"
                raise
            return _permission(data)

    # -- branches, commits, files -------------------------------------------------------
    def default_branch(self) -> str:
        with self._errors("read the repository"):
            return self._repo.default_branch

    def push_url(self) -> str:
        with self._errors("read the repository"):
            return without_credentials(self._repo.clone_url)

    def git_credentials(self) -> tuple[str, str]:
        token = self._current_token()
        if not token:
            raise ForgeError("GitHub: no token to give git")
        return "x-access-token", token

    def _current_token(self) -> str | None:
        """The token requests carry now (an App installation's is renewed as it expires)."""
        auth = self._client.requester.auth
        token = getattr(auth, "token", None) if auth is not None else None
        return str(token) if token else self._token

    def branch_head(self, branch: str) -> str | None:
        with self._errors(f"read branch {branch}"):
            try:
                return self._repo.get_branch(branch).commit.sha
            except GithubException as exc:
                if exc.status == 404:
                    return None
                raise

    def commits_since(self, branch: str, base: str) -> list[Commit]:
        with self._errors(f"compare {base}...{branch}"):
            return [_commit(c) for c in self._repo.compare(base, branch).commits]

    def file_content(self, path: str, ref: str) -> str | None:
        with self._errors(f"read {path}@{ref}"):
            try:
                content = self._repo.get_contents(path, ref=ref)
            except GithubException as exc:
                if exc.status == 404:
                    return None
                raise
            if isinstance(content, list) or content.type != "file":
                return None  # a directory, symlink or submodule is no file content
            return content.decoded_content.decode("utf-8", errors="replace")

    # -- pull requests ------------------------------------------------------------------
    def find_pull_request(self, head_branch: str) -> PullRequest | None:
        owner = self.repo.split("/", 1)[0]
        with self._errors(f"find the pull request from {head_branch}"):
            pulls = self._repo.get_pulls(state="open", head=f"{owner}:{head_branch}")
            return next((_pull(p) for p in pulls), None)

    def closed_pull_requests(self, head_branch: str) -> list[PullRequest]:
        owner = self.repo.split("/", 1)[0]
        with self._errors(f"list the closed pull requests from {head_branch}"):
            pulls = self._repo.get_pulls(state="closed", head=f"{owner}:{head_branch}",
                                         sort="created", direction="desc")
            return [_pull(pull) for pull in pulls]

    def get_pull_request(self, number: int) -> PullRequest:
        with self._errors(f"get pull request #{number}"):
            return _pull(self._repo.get_pull(number))

    def create_pull_request(self, draft: PullRequestDraft) -> PullRequest:
        with self._errors(f"open a pull request from {draft.head_branch}"):
            try:
                pull = self._repo.create_pull(base=draft.base_branch, head=draft.head_branch,
                                              title=draft.title, body=draft.body)
            except GithubException as exc:
                existing = self.find_pull_request(draft.head_branch) \
                    if exc.status in (409, 422) else None
                if existing is not None:
                    raise ConflictError(f"GitHub: a pull request from {draft.head_branch} "
                                        f"already exists: #{existing.number}") from exc
                raise
            created = _pull(pull)
        if not draft.labels:
            return created
        self.add_labels(Target("pull", created.number), draft.labels)
        labels = (*created.labels, *(n for n in draft.labels if n not in created.labels))
        return dataclasses.replace(created, labels=labels)

    def update_pull_request(self, number: int, *, title: str | None = None,
                            body: str | None = None) -> PullRequest:
        if title is None and body is None:
            return self.get_pull_request(number)
        with self._errors(f"update pull request #{number}"):
            pull = self._repo.get_pull(number)
            pull.edit(title=NotSet if title is None else title,
                      body=NotSet if body is None else body)
            return _pull(pull)

    def review_threads(self, number: int) -> list[ReviewThread]:
        # Read as plain JSON: a thread's first comment has no in_reply_to_id, and asking a
        # PyGithub object for it would fetch that comment again, once per thread.
        with self._errors(f"list review comments on #{number}"):
            comments = list(self._json_pages(f"/repos/{self.repo}/pulls/{number}/comments"))
        with self._errors(f"read which review threads are resolved on #{number}"):
            nodes = self._thread_nodes(number)
        threads = []
        for thread in _threads(comments):
            node_id, resolved = nodes.get(int(thread.id), (None, False))
            threads.append(dataclasses.replace(thread, node_id=node_id, resolved=resolved))
        return threads

    def _thread_nodes(self, number: int) -> dict[int, tuple[str, bool]]:
        """Each thread's GraphQL id and whether it is resolved (only GraphQL knows), by the
        REST id of its first comment."""
        owner, name = self.repo.split("/", 1)
        found: dict[int, tuple[str, bool]] = {}
        after: str | None = None
        while True:
            _, data = self._client.requester.graphql_query(
                _THREADS_QUERY, {"owner": owner, "name": name, "number": number, "after": after})
            connection = data["data"]["repository"]["pullRequest"]["reviewThreads"]
            for thread in connection["nodes"]:
                first = thread["comments"]["nodes"]
                if first and first[0]["databaseId"] is not None:
                    found[int(first[0]["databaseId"])] = (str(thread["id"]),
                                                          bool(thread["isResolved"]))
            if not connection["pageInfo"]["hasNextPage"]:
                return found
            after = connection["pageInfo"]["endCursor"]

    def resolve_thread(self, number: int, thread_id: str) -> None:
        """GraphQL's resolveReviewThread, which takes the thread's node id: a REST id
        (ReviewThread.id) is looked up first."""
        node_id = thread_id
        if thread_id.isdigit():
            with self._errors(f"find review thread {thread_id} on #{number}"):
                known = self._thread_nodes(number).get(int(thread_id))
            if known is None:
                raise NotFoundError(f"GitHub: no review thread {thread_id} on #{number}")
            node_id = known[0]
        with self._errors(f"resolve review thread {thread_id} on #{number}"):
            self._client.requester.graphql_query(_RESOLVE_THREAD_MUTATION,
                                                 {"input": {"threadId": node_id}})

    def review_summaries(self, number: int) -> list[Comment]:
        with self._errors(f"list reviews on #{number}"):
            head = self._repo.get_pull(number).head.sha
            reviews = list(self._json_pages(f"/repos/{self.repo}/pulls/{number}/reviews"))
        return [_review_comment(r) for r in reviews
                if r.get("body") and r.get("state") in _SUMMARY_STATES
                and r.get("commit_id") == head]

    def reply_to_thread(self, number: int, thread_id: str, body: str) -> Comment:
        if not thread_id.isdigit():
            raise NotFoundError(f"GitHub: no review thread {thread_id!r} on #{number}")
        with self._errors(f"reply to review thread {thread_id} on #{number}"):
            reply = self._repo.get_pull(number).create_review_comment_reply(int(thread_id), body)
            return _comment(reply)

    # -- CI -----------------------------------------------------------------------------
    def failed_jobs(self, sha: str) -> list[FailedJob]:
        with self._errors(f"list failed CI jobs for {sha[:12]}"):
            failed, action_job_ids = self._failed_actions_jobs(sha)
            for check in self._repo.get_commit(sha).get_check_runs(status="completed"):
                # Actions jobs are check runs too (same id); only other apps' remain, and
                # opbot's own progress report is no CI job.
                if check.conclusion != "failure" or check.id in action_job_ids \
                        or (check.app is not None and check.app.slug == _ACTIONS_APP) \
                        or check.name == PROGRESS_NAME:
                    continue
                output = check.output
                text = "\n\n".join(p for p in (output.title, output.summary, output.text) if p)
                failed.append(FailedJob(check.name, check.html_url, _tail(text)))
            return failed

    def report_progress(self, sha: str, state: ProgressState, summary: str,
                        url: str | None = None) -> None:
        """A check run named PROGRESS_NAME on `sha`: the one this instance made, else the
        newest of that name GitHub lists (a retry or another process finds it), updated;
        a new one when there is none, or when a finished one is to show work again. Only
        GitHub Apps may write check runs: on a 403 this instance writes commit statuses
        (context PROGRESS_NAME) from then on."""
        if not self._statuses_only:
            try:
                self._report_check_run(sha, state, summary, url)
                return
            except ForbiddenError:
                self._statuses_only = True
        description = summary.strip().splitlines()[0] if summary.strip() else state
        if len(description) > STATUS_DESCRIPTION_CHARS:
            description = description[:STATUS_DESCRIPTION_CHARS - 1] + "…"
        data = {"state": _COMMIT_STATE[state], "context": PROGRESS_NAME,
                "description": description}
        if url:
            data["target_url"] = url
        with self._errors(f"set the {PROGRESS_NAME} status of {sha[:12]}"):
            self._client.requester.requestJsonAndCheck(
                "POST", f"/repos/{self.repo}/statuses/{sha}", input=data)

    def _report_check_run(self, sha: str, state: ProgressState, summary: str,
                          url: str | None) -> None:
        title = summary.strip().splitlines()[0][:200] if summary.strip() else state
        data: dict[str, Any] = {**_CHECK_RUN[state], "output": {
            "title": title, "summary": summary[:CHECK_TEXT_CHARS] or state}}
        if url:
            data["details_url"] = url
        done = state in ("success", "failure")
        with self._errors(f"report progress on {sha[:12]}"):
            known = self._check_runs.get(sha) or self._find_check_run(sha)
            if known is not None and not (known[1] and not done):
                self._client.requester.requestJsonAndCheck(
                    "PATCH", f"/repos/{self.repo}/check-runs/{known[0]}", input=data)
                self._check_runs[sha] = (known[0], done)
                return
            _, created = self._client.requester.requestJsonAndCheck(
                "POST", f"/repos/{self.repo}/check-runs",
                input={"name": PROGRESS_NAME, "head_sha": sha, **data})
            self._check_runs[sha] = (int(created["id"]), done)

    def _find_check_run(self, sha: str) -> tuple[int, bool] | None:
        """(id, completed) of the newest check run named PROGRESS_NAME on `sha`."""
        newest: dict[str, Any] | None = None
        for check in self._json_pages(f"/repos/{self.repo}/commits/{sha}/check-runs",
                                      key="check_runs", check_name=PROGRESS_NAME):
            if check.get("name") == PROGRESS_NAME \
                    and (newest is None or int(check["id"]) > int(newest["id"])):
                newest = check
        if newest is None:
            return None
        return int(newest["id"]), newest.get("status") == "completed"

    def dispatch_plan(self, plan: Mapping[str, Any]) -> Dispatch:
        # PyGithub's create_repository_dispatch does not check the status (a 5xx reads as
        # False, not an error), so this one call goes through the requester.
        with self._errors("dispatch a plan to GitHub Actions"):
            self._client.requester.requestJsonAndCheck(
                "POST", f"/repos/{self.repo}/dispatches",
                input={"event_type": DISPATCH_EVENT, "client_payload": {"plan": dict(plan)}})
        return Dispatch()

    def _failed_actions_jobs(self, sha: str) -> tuple[list[FailedJob], set[int]]:
        failed: list[FailedJob] = []
        seen: set[int] = set()
        for run in self._repo.get_workflow_runs(head_sha=sha, status="failure"):
            if run.conclusion != "failure":
                continue
            for job in run.jobs():
                seen.add(job.id)
                if job.conclusion == "failure":
                    failed.append(FailedJob(f"{run.name} / {job.name}", job.html_url,
                                            self._job_log(job)))
        return failed, seen

    def _job_log(self, job: WorkflowJob) -> str:
        """GitHub redirects to a pre-signed URL; it gets no token (it needs none)."""
        location = job.logs_url()
        if urlsplit(location).scheme not in ("http", "https"):
            raise ForgeError(f"GitHub: unexpected log location for job {job.id}")
        try:
            # The scheme is checked above: only http(s) reaches urlopen.
            with urllib.request.urlopen(location, timeout=LOG_TIMEOUT_S) as response:  # noqa: S310
                data: bytes = response.read()
        except OSError as exc:
            raise ForgeError(f"GitHub: could not download the log of job {job.id}") from exc
        return _tail(data.decode("utf-8", errors="replace"))

    def _json_pages(self, path: str, key: str | None = None,
                    **query: Any) -> Iterator[dict[str, Any]]:
        """Every item of a JSON list endpoint, following its Link rel="next" pages; `key`
        names the list in endpoints that wrap it ({"total_count": n, key: [...]})."""
        url: str | None = path
        params: dict[str, Any] | None = {"per_page": self._client.per_page, **query}
        while url is not None:
            headers, data = self._client.requester.requestJsonAndCheck("GET", url,
                                                                       parameters=params)
            yield from (data.get(key) if key is not None and data else data) or []
            url, params = _next_link(str(headers.get("link", ""))), None

    # -- errors -------------------------------------------------------------------------
    @contextlib.contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except GithubException as exc:
            raise _translate(exc, action, self._token) from exc
        except OSError as exc:  # requests' connection errors derive from OSError
            raise UnavailableError(scrub(f"GitHub: {action}: {type(exc).__name__}",
                                         self._token)) from exc


# -- conversions ---------------------------------------------------------------------------
def _names(labels: Iterable[Any]) -> tuple[str, ...]:
    return tuple(str(label.name) for label in labels)


def _issue(issue: GhIssue) -> Issue:
    return Issue(number=issue.number, title=issue.title, body=issue.body or "",
                 author=issue.user.login, labels=_names(issue.labels), state=issue.state,
                 url=issue.html_url)


def _json_issue(issue: Mapping[str, Any]) -> Issue:
    return Issue(number=int(issue["number"]), title=str(issue["title"]),
                 body=str(issue.get("body") or ""), author=str(issue["user"]["login"]),
                 labels=tuple(str(n["name"]) if isinstance(n, Mapping) else str(n)
                              for n in issue.get("labels") or ()),
                 state=str(issue["state"]), url=str(issue["html_url"]))


def _comment(comment: IssueComment | PullRequestComment) -> Comment:
    return Comment(id=comment.id, body=comment.body or "", author=comment.user.login,
                   url=comment.html_url)


def _json_comment(comment: Mapping[str, Any]) -> Comment:
    return Comment(id=int(comment["id"]), body=str(comment.get("body") or ""),
                   author=str(comment["user"]["login"]), url=str(comment["html_url"]))


def _pull(pull: GhPullRequest) -> PullRequest:
    # merged_at is in list items too; reading `merged` would cost a request per PR.
    state = "merged" if pull.merged_at is not None else pull.state
    # A deleted fork leaves head.repo null (github.com/github/rest-api-description/
    # issues/424): still a fork's pull request.
    head_repo = pull.head.repo.full_name if pull.head.repo is not None else None
    base_repo = pull.base.repo.full_name if pull.base.repo is not None else None
    return PullRequest(number=pull.number, title=pull.title, body=pull.body or "",
                       author=pull.user.login, head_branch=pull.head.ref,
                       head_sha=pull.head.sha, base_branch=pull.base.ref, state=state,
                       url=pull.html_url, labels=_names(pull.labels),
                       from_fork=head_repo is None or head_repo != base_repo,
                       head_repo=head_repo)


def _review_comment(review: Mapping[str, Any]) -> Comment:
    user = review.get("user") or {}
    return Comment(id=int(review["id"]), body=str(review.get("body") or ""),
                   author=str(user.get("login") or "ghost"), url=str(review["html_url"]))


def _commit(commit: GhCommit) -> Commit:
    git = commit.commit
    return Commit(sha=commit.sha, message=git.message, author_name=git.author.name,
                  author_email=git.author.email,
                  author_login=commit.author.login if commit.author is not None else None)


_THREADS_QUERY = """
query($owner: String!, $name: String!, $number: Int!, $after: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: 100, after: $after) {
        pageInfo { hasNextPage endCursor }
        nodes { id isResolved comments(first: 1) { nodes { databaseId } } }
      }
    }
  }
}"""
_RESOLVE_THREAD_MUTATION = """
mutation($input: ResolveReviewThreadInput!) {
  resolveReviewThread(input: $input) { thread { id isResolved } }
}"""
_VIEWER_QUERY = "query { viewer { login } }"


def _threads(comments: list[dict[str, Any]]) -> list[ReviewThread]:
    """REST has no thread object: replies name their thread's first comment (whether a
    thread is resolved comes from GraphQL, see `review_threads`)."""
    by_id = {int(c["id"]): c for c in comments}

    def root_of(comment: dict[str, Any]) -> int:
        while comment.get("in_reply_to_id") in by_id:
            comment = by_id[comment["in_reply_to_id"]]
        return int(comment["id"])

    grouped: dict[int, list[dict[str, Any]]] = {}
    for comment in sorted(comments, key=lambda c: int(c["id"])):
        grouped.setdefault(root_of(comment), []).append(comment)
    threads = []
    for root_id, members in grouped.items():
        line = members[0].get("line") or members[0].get("original_line")
        threads.append(ReviewThread(id=str(root_id),
                                    comments=tuple(_json_comment(c) for c in members),
                                    path=members[0].get("path"),
                                    line=int(line) if line is not None else None))
    return threads


def _next_link(link: str) -> str | None:
    found = _NEXT_LINK.search(link)
    return found.group(1) if found else None


def _permission(data: Mapping[str, Any]) -> Permission:
    role = data.get("role_name")
    if role in PERMISSION_ORDER:
        return role  # type: ignore[no-any-return]
    return _LEGACY_PERMISSION.get(str(data.get("permission")), "none")


def _tail(text: str) -> str:
    return text[-LOG_TAIL_CHARS:]


# -- errors --------------------------------------------------------------------------------


def _translate(exc: GithubException, action: str, token: str | None) -> ForgeError:
    headers = _lower(exc.headers)
    data = exc.data
    detail = str(data.get("message", ""))[:200] if isinstance(data, Mapping) else ""
    errors = data.get("errors") if isinstance(data, Mapping) else None
    graphql = [e for e in errors if isinstance(e, Mapping)] if isinstance(errors, list) else []
    if graphql and not detail:  # a GraphQL answer: 200 with errors, PyGithub's 400
        detail = "; ".join(str(e.get("message", ""))[:200] for e in graphql)
    message = scrub(f"GitHub {exc.status} on {action}: {detail}".rstrip(": "), token)
    status = exc.status
    if any(e.get("type") == "FORBIDDEN" for e in graphql):
        return ForbiddenError(message)
    if status == 404:
        return NotFoundError(message)
    if status == 429 or (status == 403 and _rate_limited(headers)):
        return RateLimitedError(message, _retry_after(headers))
    if status == 403:
        return ForbiddenError(message)
    if status == 409:
        return ConflictError(message)
    if status >= 500:
        return UnavailableError(message)
    return ForgeError(message)


def _lower(headers: Mapping[str, Any] | None) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in (headers or {}).items()}


def _rate_limited(headers: Mapping[str, str]) -> bool:
    return headers.get("x-ratelimit-remaining") == "0" or "retry-after" in headers


def _retry_after(headers: Mapping[str, str]) -> float | None:
    with contextlib.suppress(ValueError):
        if "retry-after" in headers:
            return max(0.0, float(headers["retry-after"]))
        if "x-ratelimit-reset" in headers:
            return max(0.0, float(headers["x-ratelimit-reset"]) - time.time())
    return None


def identity(url: str | None, token: str) -> str:
    """The login `token` acts as (GitHubForge.whoami, which needs no repository)."""
    return GitHubForge.connect(url, token, repo="").whoami()
