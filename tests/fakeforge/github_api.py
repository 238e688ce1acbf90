"""The GitHub REST front end. Every route is a `paths` key of GitHub's OpenAPI description;
every request and every reply is validated against it (see `GitHubApi.handle`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from werkzeug.datastructures import Headers

from .acts import Act, announce_check, announce_reply, announce_status
from .github_render import GitHubRender
from .model import (
    CheckRun,
    CiJob,
    CiRun,
    Comment,
    CommitStatus,
    Issue,
    PullData,
    Reaction,
    Repo,
    ReviewComment,
    Role,
    State,
    now,
)
from .routing import Router
from .spec import GitHubSpec, SpecRequest, SpecResponse
from .wire import ApiError, Call, Reply, link_header, paginate

if TYPE_CHECKING:
    from .server import FakeServer

Handler = Callable[..., Reply]
router: Router[Handler] = Router()
DOCS = "https://docs.github.com/rest"
ACTIONS_APP = "github-actions"


class GitHubApi:
    def __init__(self, server: FakeServer, spec: GitHubSpec) -> None:
        self.server = server
        self.spec = spec

    @property
    def state(self) -> State:
        return self.server.state

    def handle(self, call: Call) -> Reply:
        match = router.match(call.method, call.path)
        if match is None:
            self.state.validation_errors.append(
                f"{call.method} {call.path}: no such route in the fake (is it in GitHub's API?)")
            return _error(404, "Not Found")
        request = _spec_request(call, match.route.template, match.params)
        request_errors = self.spec.request_errors(request)
        if request_errors:
            self.state.validation_errors.extend(request_errors)
            return _error(422, "fake forge: request does not match GitHub's OpenAPI description")
        reply = self._respond(call, match.route.handler, match.params)
        return self._checked(request, reply)

    def _respond(self, call: Call, handler: Handler, params: dict[str, str]) -> Reply:
        login = self._login(call)
        if login is None:
            return _error(401, "Bad credentials")
        injected = self.state.injected["github"]
        if injected:
            canned = injected.popleft()
            return _error(canned.status, canned.message, canned.headers)
        try:
            reply = handler(self, call, login, **params)
        except ApiError as exc:
            return _error(exc.status, exc.message, errors=exc.errors)
        lost = self.state.lost_answer("github", call.method)  # FakeForge.fail_after_next
        return reply if lost is None else _error(lost, "Server Error")

    def _checked(self, request: SpecRequest, reply: Reply) -> Reply:
        """Validate the reply; GitHub may answer any call with 401/403/429/5xx, which the
        description mostly leaves undeclared, so only declared statuses are checked."""
        if reply.status >= 400 and not self.spec.declares(request.path_pattern,
                                                          request.method, reply.status):
            return reply
        response = SpecResponse(reply.status, reply.body, _headers(reply), reply.content_type)
        errors = self.spec.response_errors(request, response)
        if errors:
            self.state.validation_errors.extend(errors)
            return _error(500, "fake forge: reply does not match GitHub's OpenAPI description")
        return reply

    def _login(self, call: Call) -> str | None:
        scheme, _, token = call.headers.get("authorization", "").partition(" ")
        if scheme.lower() not in ("token", "bearer"):
            return None
        return self.state.tokens.get(token)

    # -- lookups -------------------------------------------------------------------------
    def repo(self, owner: str, name: str) -> Repo:
        repo = self.state.repos.get(f"{owner}/{name}")
        if repo is None:
            raise ApiError(404, "Not Found")
        return repo

    def issue(self, repo: Repo, number: str, *, pull: bool = False) -> Issue:
        issue = repo.issues.get(int(number))
        if issue is None or (pull and issue.pull is None):
            raise ApiError(404, "Not Found")
        return issue

    def render(self, call: Call) -> GitHubRender:
        return GitHubRender(self.spec, self.state, call.root)

    def effect(self, repo: Repo, target: str, kind: str, detail: str) -> None:
        self.state.record("github", repo.full_name, target, kind, detail)


def _spec_request(call: Call, template: str, params: dict[str, str]) -> SpecRequest:
    # The token is none of the validator's business (and must reach no message).
    headers = {k: v for k, v in call.headers.items() if k != "authorization"}
    content_type = call.headers.get("content-type", "application/json")
    return SpecRequest(call.method, call.path, template, params, call.query, headers,
                       call.body or None, content_type.lower())


def _headers(reply: Reply) -> Headers:
    return Headers({"Content-Type": reply.content_type, **reply.headers})


def _error(status: int, message: str, headers: dict[str, str] | None = None,
           errors: list[dict[str, Any]] | None = None) -> Reply:
    body: dict[str, Any] = {"message": message, "documentation_url": DOCS,
                            "status": str(status)}
    if errors:
        body["errors"] = errors
    return Reply.json(status, body, headers)


def _listing(call: Call, items: list[Any], *, default: int = 30,
             key: str | None = None) -> Reply:
    """A page of `items` (rendered already) with Link headers; `key` wraps it as
    {"total_count": n, key: [...]} the way the Actions and Checks APIs do."""
    page = paginate(call, items, default=default)
    body: Any = list(page.items)
    if key is not None:
        body = {"total_count": page.total, key: body}
    return Reply.json(200, body, link_header(call, page))


# -- repository ----------------------------------------------------------------------------
@router.route("GET", "/repos/{owner}/{repo}")
def get_repo(api: GitHubApi, call: Call, login: str, owner: str, repo: str) -> Reply:
    return Reply.json(200, api.render(call).repo(api.repo(owner, repo)))


@router.route("GET", "/repos/{owner}/{repo}/collaborators/{username}/permission")
def get_permission(api: GitHubApi, call: Call, login: str, owner: str, repo: str,
                   username: str) -> Reply:
    found = api.repo(owner, repo)
    if username not in api.state.users:
        raise ApiError(404, "Not Found")
    member = found.members.get(username)
    role: Role = member.role if member else "none"
    return Reply.json(200, api.render(call).permission(username, role))


# -- issues, comments, reactions, labels -----------------------------------------------------
@router.route("GET", "/repos/{owner}/{repo}/issues")
def list_issues(api: GitHubApi, call: Call, login: str, owner: str, repo: str) -> Reply:
    """Issues and pull requests (those with their `pull_request` key), as GitHub lists
    them: state (default open), creator, labels (all of them), sort (created, updated,
    comments) and direction (default: newest first)."""
    found = api.repo(owner, repo)
    state, creator = call.arg("state", "open"), call.arg("creator")
    wanted = [n.strip() for n in (call.arg("labels") or "").split(",") if n.strip()]
    issues = [i for i in found.issues.values() if state in ("all", i.state)
              and (creator is None or i.author.lower() == creator.lower())
              and all(n in i.labels for n in wanted)]
    sort = call.arg("sort") or "created"
    key: Callable[[Issue], Any] = {
        "updated": lambda i: (i.updated_at, i.number),
        "comments": lambda i: (len(i.comments), i.number)}.get(sort, lambda i: i.number)
    issues.sort(key=key, reverse=call.arg("direction", "desc") != "asc")
    render = api.render(call)
    return _listing(call, [render.issue(found, i) for i in issues])


@router.route("POST", "/repos/{owner}/{repo}/issues")
def create_issue(api: GitHubApi, call: Call, login: str, owner: str, repo: str) -> Reply:
    """Anyone who may read the repository may open an issue; labels from a user without
    push access are dropped silently, as GitHub's description says."""
    found = api.repo(owner, repo)
    data = call.json()
    member = found.members.get(login)
    pusher = member is not None and member.role in ("write", "maintain", "admin")
    names = [n if isinstance(n, str) else n.get("name", "") for n in data.get("labels") or []]
    labels = list(dict.fromkeys(n for n in names if n)) if pusher else []
    issue = Issue(found.next_number(), str(data["title"]), data.get("body") or "", login,
                  labels=labels)
    found.issues[issue.number] = issue
    api.effect(found, f"#{issue.number}", "issue-open", issue.title)
    if labels:
        api.effect(found, f"#{issue.number}", "labels", ",".join(labels))
    api.state.announce(Act("issue-opened", found.full_name, login, issue=issue,
                           labels=tuple(labels)))
    location = api.render(call).api(f"/repos/{found.full_name}/issues/{issue.number}")
    return Reply.json(201, api.render(call).issue(found, issue), {"Location": location})


@router.route("GET", "/repos/{owner}/{repo}/issues/{issue_number}")
def get_issue(api: GitHubApi, call: Call, login: str, owner: str, repo: str,
              issue_number: str) -> Reply:
    found = api.repo(owner, repo)
    return Reply.json(200, api.render(call).issue(found, api.issue(found, issue_number)))


@router.route("GET", "/repos/{owner}/{repo}/issues/{issue_number}/comments")
def list_comments(api: GitHubApi, call: Call, login: str, owner: str, repo: str,
                  issue_number: str) -> Reply:
    found = api.repo(owner, repo)
    issue = api.issue(found, issue_number)
    render = api.render(call)
    return _listing(call, [render.comment(found, issue, c) for c in issue.comments])


@router.route("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments")
def create_comment(api: GitHubApi, call: Call, login: str, owner: str, repo: str,
                   issue_number: str) -> Reply:
    found = api.repo(owner, repo)
    issue = api.issue(found, issue_number)
    comment = Comment(api.state.new_id(), login, call.json()["body"])
    issue.comments.append(comment)
    api.effect(found, f"#{issue.number}", "comment", comment.body)
    api.state.announce(Act("comment", found.full_name, login, issue=issue, comment=comment))
    return Reply.json(201, api.render(call).comment(found, issue, comment))


def _comment(api: GitHubApi, found: Repo, comment_id: str) -> tuple[Issue, Comment]:
    hit = found.find_comment(int(comment_id))
    if hit is None:
        raise ApiError(404, "Not Found")
    return hit


@router.route("GET", "/repos/{owner}/{repo}/issues/comments/{comment_id}")
def get_comment(api: GitHubApi, call: Call, login: str, owner: str, repo: str,
                comment_id: str) -> Reply:
    found = api.repo(owner, repo)
    issue, comment = _comment(api, found, comment_id)
    return Reply.json(200, api.render(call).comment(found, issue, comment))


@router.route("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}")
def update_comment(api: GitHubApi, call: Call, login: str, owner: str, repo: str,
                   comment_id: str) -> Reply:
    found = api.repo(owner, repo)
    issue, comment = _comment(api, found, comment_id)
    if comment.author != login:
        raise ApiError(403, "Must have admin rights to Repository.")
    old = comment.body
    comment.body = call.json()["body"]
    comment.updated_at = now()
    api.effect(found, f"#{issue.number}", "comment-edit", f"{comment.id}:{comment.body}")
    api.state.announce(Act("comment-edited", found.full_name, login, issue=issue,
                           comment=comment, changes={"body": old}))
    return Reply.json(200, api.render(call).comment(found, issue, comment))


def _react(api: GitHubApi, call: Call, login: str, found: Repo, issue: Issue,
           reactions: list[Reaction], which: str = "") -> Reply:
    content = call.json()["content"]
    existing = next((r for r in reactions if r.user == login and r.content == content), None)
    if existing is not None:  # GitHub answers 200 with the reaction already there
        return Reply.json(200, api.render(call).reaction(existing))
    reaction = Reaction(api.state.new_id(), content, login)
    reactions.append(reaction)
    api.effect(found, f"#{issue.number}", "reaction", f"{which}{content}")
    return Reply.json(201, api.render(call).reaction(reaction))


@router.route("POST", "/repos/{owner}/{repo}/issues/{issue_number}/reactions")
def react_issue(api: GitHubApi, call: Call, login: str, owner: str, repo: str,
                issue_number: str) -> Reply:
    found = api.repo(owner, repo)
    issue = api.issue(found, issue_number)
    return _react(api, call, login, found, issue, issue.reactions)


@router.route("POST", "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions")
def react_comment(api: GitHubApi, call: Call, login: str, owner: str, repo: str,
                  comment_id: str) -> Reply:
    found = api.repo(owner, repo)
    issue, comment = _comment(api, found, comment_id)
    return _react(api, call, login, found, issue, comment.reactions, f"comment-{comment.id}:")


@router.route("POST", "/repos/{owner}/{repo}/issues/{issue_number}/labels")
def add_labels(api: GitHubApi, call: Call, login: str, owner: str, repo: str,
               issue_number: str) -> Reply:
    found = api.repo(owner, repo)
    issue = api.issue(found, issue_number)
    payload = call.json()
    names = payload.get("labels", []) if isinstance(payload, dict) else payload
    added = [n if isinstance(n, str) else n["name"] for n in names]
    before = list(issue.labels)
    for name in added:
        if name not in issue.labels:
            issue.labels.append(name)
    api.effect(found, f"#{issue.number}", "labels", ",".join(added))
    if issue.labels != before:  # a label already there is no event
        api.state.announce(Act("labeled", found.full_name, login, issue=issue,
                               labels=tuple(n for n in issue.labels if n not in before),
                               previous_labels=tuple(before)))
    render = api.render(call)
    return Reply.json(200, [render.label(found, name) for name in issue.labels])


# -- branches, commits, contents -----------------------------------------------------------
@router.route("GET", "/repos/{owner}/{repo}/branches/{branch}")
def get_branch(api: GitHubApi, call: Call, login: str, owner: str, repo: str,
               branch: str) -> Reply:
    found = api.repo(owner, repo)
    sha = found.git.branches().get(branch)
    if sha is None:
        raise ApiError(404, "Branch not found")
    return Reply.json(200, api.render(call).branch(found, branch, sha))


@router.route("GET", "/repos/{owner}/{repo}/compare/{basehead}")
def compare(api: GitHubApi, call: Call, login: str, owner: str, repo: str,
            basehead: str) -> Reply:
    from .github_compare import comparison
    return comparison(api, call, api.repo(owner, repo), basehead)


@router.route("GET", "/repos/{owner}/{repo}/contents/{path}")
def get_contents(api: GitHubApi, call: Call, login: str, owner: str, repo: str,
                 path: str) -> Reply:
    found = api.repo(owner, repo)
    ref = call.arg("ref") or found.default_branch
    blob = found.git.blob(ref, path) if found.git.resolve(ref) else None
    if blob is None:
        raise ApiError(404, "Not Found")
    sha, data = blob
    return Reply.json(200, api.render(call).content(found, path, ref, sha, data))


# -- pull requests -------------------------------------------------------------------------
@router.route("GET", "/repos/{owner}/{repo}/pulls")
def list_pulls(api: GitHubApi, call: Call, login: str, owner: str, repo: str) -> Reply:
    found = api.repo(owner, repo)
    state, head, base = call.arg("state", "open"), call.arg("head"), call.arg("base")
    pulls = [p for p in found.pulls() if p.pull is not None
             and state in ("all", p.state)
             and head in (None, f"{head_owner(found, p)}:{p.pull.head}")
             and base in (None, p.pull.base)]
    # GitHub's default order: newest first (sort=created, direction=desc).
    pulls.sort(key=lambda p: p.number, reverse=call.arg("direction", "desc") != "asc")
    render = api.render(call)
    return _listing(call, [render.pull(found, p, simple=True) for p in pulls])


@router.route("POST", "/repos/{owner}/{repo}/pulls")
def create_pull(api: GitHubApi, call: Call, login: str, owner: str, repo: str) -> Reply:
    found = api.repo(owner, repo)
    data = call.json()
    head = data["head"].split(":", 1)[-1]
    for name in (head, data["base"]):
        if found.git.resolve(name) is None:
            raise ApiError(422, "Validation Failed", [
                {"resource": "PullRequest", "field": "head" if name == head else "base",
                 "code": "invalid"}])
    if any(p.pull and p.pull.head == head and p.state == "open"
           and head_owner(found, p) == found.owner for p in found.issues.values()):
        raise ApiError(422, "Validation Failed", [
            {"resource": "PullRequest", "code": "custom",
             "message": f"A pull request already exists for {found.owner}:{head}."}])
    issue = Issue(found.next_number(), data.get("title", ""), data.get("body") or "", login,
                  pull=PullData(head=head, base=data["base"], draft=bool(data.get("draft"))))
    found.issues[issue.number] = issue
    api.effect(found, f"#{issue.number}", "pr-open", f"{head}->{data['base']}:{issue.title}")
    api.state.announce(Act("pull-opened", found.full_name, login, issue=issue))
    return Reply.json(201, api.render(call).pull(found, issue))


@router.route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}")
def get_pull(api: GitHubApi, call: Call, login: str, owner: str, repo: str,
             pull_number: str) -> Reply:
    found = api.repo(owner, repo)
    return Reply.json(200, api.render(call).pull(found, api.issue(found, pull_number, pull=True)))


@router.route("PATCH", "/repos/{owner}/{repo}/pulls/{pull_number}")
def update_pull(api: GitHubApi, call: Call, login: str, owner: str, repo: str,
                pull_number: str) -> Reply:
    found = api.repo(owner, repo)
    issue = api.issue(found, pull_number, pull=True)
    data = call.json()
    changed = [k for k in ("title", "body") if k in data]
    old = {"title": issue.title, "body": issue.body}
    if "title" in data:
        issue.title = data["title"]
    if "body" in data:
        issue.body = data["body"] or ""
    issue.updated_at = now()
    api.effect(found, f"#{issue.number}", "pr-update", ",".join(changed))
    edits = {k: old[k] for k in changed if old[k] != getattr(issue, k)}
    if edits:  # GitHub sends `edited` only when a title or body really changed
        api.state.announce(Act("pull-edited", found.full_name, login, issue=issue,
                               changes=edits))
    return Reply.json(200, api.render(call).pull(found, issue))


@router.route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/comments")
def list_review_comments(api: GitHubApi, call: Call, login: str, owner: str, repo: str,
                         pull_number: str) -> Reply:
    found = api.repo(owner, repo)
    issue = api.issue(found, pull_number, pull=True)
    assert issue.pull is not None
    render = api.render(call)
    flat = sorted(((c, t) for t in issue.pull.threads for c in t.comments),
                  key=lambda pair: pair[0].id)
    return _listing(call, [render.review_comment(found, issue, t, c) for c, t in flat])


@router.route("POST", "/repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies")
def reply_review_comment(api: GitHubApi, call: Call, login: str, owner: str, repo: str,
                         pull_number: str, comment_id: str) -> Reply:
    found = api.repo(owner, repo)
    issue = api.issue(found, pull_number, pull=True)
    thread = found.find_thread(issue, int(comment_id))
    if thread is None:
        raise ApiError(404, "Not Found")
    reply = ReviewComment(api.state.new_id(), login, call.json()["body"], found.head_sha(issue))
    thread.comments.append(reply)
    api.effect(found, f"#{issue.number}", "reply", f"{thread.root.id}:{reply.body}")
    announce_reply(api.state, found.full_name, issue, thread, reply)
    return Reply.json(201, api.render(call).review_comment(found, issue, thread, reply))


# -- CI ------------------------------------------------------------------------------------
@router.route("POST", "/repos/{owner}/{repo}/dispatches")
def create_dispatch(api: GitHubApi, call: Call, login: str, owner: str, repo: str) -> Reply:
    """A repository_dispatch event: recorded, no workflow runs. Needs write access."""
    found = api.repo(owner, repo)
    member = found.members.get(login)
    if member is None or member.role not in ("write", "maintain", "admin"):
        raise ApiError(403, "Resource not accessible by personal access token")
    data = call.json()
    payload = json.dumps(data.get("client_payload") or {}, sort_keys=True)
    api.effect(found, "", "dispatch", f"{data['event_type']}:{payload}")
    return Reply(204)


@router.route("GET", "/repos/{owner}/{repo}/actions/runs")
def list_runs(api: GitHubApi, call: Call, login: str, owner: str, repo: str) -> Reply:
    found = api.repo(owner, repo)
    sha, status, branch = call.arg("head_sha"), call.arg("status"), call.arg("branch")
    runs = [r for r in found.runs
            if (sha is None or r.sha == sha) and (branch is None or r.branch == branch)
            and (status in (None, "completed") or r.conclusion == status)]
    render = api.render(call)
    return _listing(call, [render.workflow_run(found, r) for r in runs], key="workflow_runs")


def _run(found: Repo, run_id: str) -> CiRun:
    run = next((r for r in found.runs if r.id == int(run_id)), None)
    if run is None:
        raise ApiError(404, "Not Found")
    return run


@router.route("GET", "/repos/{owner}/{repo}/actions/runs/{run_id}")
def get_run(api: GitHubApi, call: Call, login: str, owner: str, repo: str,
            run_id: str) -> Reply:
    found = api.repo(owner, repo)
    return Reply.json(200, api.render(call).workflow_run(found, _run(found, run_id)))


@router.route("GET", "/repos/{owner}/{repo}/actions/runs/{run_id}/jobs")
def list_jobs(api: GitHubApi, call: Call, login: str, owner: str, repo: str,
              run_id: str) -> Reply:
    found = api.repo(owner, repo)
    run = _run(found, run_id)
    render = api.render(call)
    return _listing(call, [render.job(found, run, j) for j in run.jobs], key="jobs")


def _job(found: Repo, job_id: str) -> tuple[CiRun, CiJob]:
    for run in found.runs:
        for job in run.jobs:
            if job.id == int(job_id):
                return run, job
    raise ApiError(404, "Not Found")


@router.route("GET", "/repos/{owner}/{repo}/actions/jobs/{job_id}")
def get_job(api: GitHubApi, call: Call, login: str, owner: str, repo: str,
            job_id: str) -> Reply:
    found = api.repo(owner, repo)
    run, job = _job(found, job_id)
    return Reply.json(200, api.render(call).job(found, run, job))


@router.route("GET", "/repos/{owner}/{repo}/actions/jobs/{job_id}/logs")
def job_logs(api: GitHubApi, call: Call, login: str, owner: str, repo: str,
             job_id: str) -> Reply:
    """GitHub answers with a redirect to a short-lived, pre-signed download URL."""
    _, job = _job(api.repo(owner, repo), job_id)
    return Reply.redirect(api.server.blob_url(f"job-logs-{job.id}.txt", job.log))


@router.route("GET", "/repos/{owner}/{repo}/commits/{ref}/check-runs")
def list_check_runs(api: GitHubApi, call: Call, login: str, owner: str, repo: str,
                    ref: str) -> Reply:
    found = api.repo(owner, repo)
    sha = found.git.resolve(ref)
    if sha is None:
        raise ApiError(404, "No commit found for SHA")
    render = api.render(call)
    # Actions jobs are check runs too (same id), as on GitHub.
    checks = [(CheckRun(j.id, j.name, r.sha, j.conclusion, j.name, "", ACTIONS_APP),
               render.job(found, r, j)["html_url"]) for r in found.runs for j in r.jobs]
    checks += [(c, None) for c in found.check_runs]
    name = call.arg("check_name")
    wanted = [render.check_run(found, c, details_url=url) for c, url in checks
              if c.sha == sha and name in (None, c.name)]
    return _listing(call, wanted, key="check_runs")


# -- who the token is; reviews; progress on a commit (check runs, statuses); forks ---------
def head_owner(found: Repo, issue: Issue) -> str:
    """The owner in a pull request's head label (`owner:branch`): a fork's owner for a
    fork's pull request, so `?head=<base owner>:<branch>` never finds one."""
    assert issue.pull is not None
    return (issue.pull.head_repo or found.full_name).rsplit("/", 1)[0]


# An installation token cannot read /user: GitHub says "Resource not accessible by
# integration" (e.g. github.com/pingdotgg/t3code/pull/11273); GraphQL's viewer answers.
INTEGRATION_REFUSED = "Resource not accessible by integration"


@router.route("GET", "/user")
def get_authenticated_user(api: GitHubApi, call: Call, login: str) -> Reply:
    user = api.state.users.get(login)
    if user is not None and user.app is not None:
        raise ApiError(403, INTEGRATION_REFUSED)
    return Reply.json(200, api.render(call).authenticated_user(login))


@router.route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews")
def list_reviews(api: GitHubApi, call: Call, login: str, owner: str, repo: str,
                 pull_number: str) -> Reply:
    """Submitted reviews, oldest first (GitHub lists them in chronological order)."""
    found = api.repo(owner, repo)
    issue = api.issue(found, pull_number, pull=True)
    assert issue.pull is not None
    render = api.render(call)
    return _listing(call, [render.review(found, issue, r) for r in issue.pull.reviews])


def _writer(api: GitHubApi, found: Repo, login: str) -> None:
    """Push access, as for a dispatch (see create_dispatch)."""
    member = found.members.get(login)
    if member is None or member.role not in ("write", "maintain", "admin"):
        raise ApiError(403, "Resource not accessible by personal access token")


# Check runs are for GitHub Apps only; any other token hears "You must authenticate via a
# GitHub App." (github.com/actions/github-script/issues/118,
# github.com/EnricoMi/publish-unit-test-result-action/issues/53).
APP_REQUIRED = "You must authenticate via a GitHub App."


def _apply_check(check: CheckRun, data: dict[str, Any]) -> None:
    if "status" in data:
        check.status = data["status"]
    if data.get("conclusion"):
        check.status, check.conclusion = "completed", data["conclusion"]
    elif check.status != "completed":
        check.conclusion = None
    output = data.get("output") or {}
    check.title = output.get("title", check.title)
    check.summary = output.get("summary", check.summary)
    if "details_url" in data:
        check.details_url = data["details_url"]


def _check_effect(api: GitHubApi, found: Repo, kind: str, check: CheckRun) -> None:
    api.effect(found, "", kind, f"{check.name}:{check.sha}:{check.status}:"
               f"{check.conclusion or '-'}:{check.summary}")


@router.route("POST", "/repos/{owner}/{repo}/check-runs")
def create_check_run(api: GitHubApi, call: Call, login: str, owner: str, repo: str) -> Reply:
    found = api.repo(owner, repo)
    user = api.state.users.get(login)
    if user is None or user.app is None:
        raise ApiError(403, APP_REQUIRED)
    data = call.json()
    sha = found.git.resolve(data["head_sha"])
    if sha is None or sha != data["head_sha"]:
        raise ApiError(422, "No commit found for SHA: " + str(data["head_sha"]))
    check = CheckRun(api.state.new_id(), data["name"], sha, None, "", "", app=user.app,
                     status="queued")
    _apply_check(check, data)
    found.check_runs.append(check)
    _check_effect(api, found, "check-run", check)
    announce_check(api.state, found.full_name, login, check, created=True, completing=True)
    return Reply.json(201, api.render(call).check_run(found, check))


@router.route("PATCH", "/repos/{owner}/{repo}/check-runs/{check_run_id}")
def update_check_run(api: GitHubApi, call: Call, login: str, owner: str, repo: str,
                     check_run_id: str) -> Reply:
    found = api.repo(owner, repo)
    user = api.state.users.get(login)
    if user is None or user.app is None:
        raise ApiError(403, APP_REQUIRED)
    check = next((c for c in found.check_runs if c.id == int(check_run_id)), None)
    if check is None:
        raise ApiError(404, "Not Found")
    if check.app != user.app:  # only the App that created a check run may change it
        raise ApiError(403, INTEGRATION_REFUSED)
    data = call.json()
    _apply_check(check, data)
    _check_effect(api, found, "check-run-update", check)
    announce_check(api.state, found.full_name, login, check, created=False,
                   completing=bool(data.get("conclusion")) or data.get("status") == "completed")
    return Reply.json(200, api.render(call).check_run(found, check))


@router.route("POST", "/repos/{owner}/{repo}/statuses/{sha}")
def create_status(api: GitHubApi, call: Call, login: str, owner: str, repo: str,
                  sha: str) -> Reply:
    """A commit status: the latest one per context is what GitHub shows. Needs push
    access; a description longer than 140 characters is refused."""
    found = api.repo(owner, repo)
    _writer(api, found, login)
    if found.git.resolve(sha) != sha:
        raise ApiError(422, f"No commit found for SHA: {sha}")
    data = call.json()
    description = data.get("description") or ""
    if len(description) > 140:
        raise ApiError(422, "Validation Failed", [
            {"resource": "Status", "code": "custom", "field": "description",
             "message": "description is too long (maximum is 140 characters)"}])
    status = CommitStatus(api.state.new_id(), sha, data.get("context") or "default",
                          data["state"], description, data.get("target_url"), login)
    found.statuses.append(status)
    api.effect(found, "", "status", f"{status.name}:{sha}:{status.state}:{description}")
    announce_status(api.state, found.full_name, login, status)
    return Reply.json(201, api.render(call).status(found, status))
