"""The GitLab REST front end (/api/v4), as python-gitlab drives it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .acts import Act, announce_reply, announce_status
from .gitlab_render import REACTION, GitLabRender
from .model import (
    CiJob,
    CiRun,
    Comment,
    CommitStatus,
    Issue,
    PullData,
    Reaction,
    Repo,
    ReviewComment,
    State,
    now,
)
from .routing import Router
from .wire import ApiError, Call, Reply, link_header, paginate

if TYPE_CHECKING:
    from .server import FakeServer

Handler = Callable[..., Reply]
router: Router[Handler] = Router()
KINDS = {"issues": "#", "merge_requests": "!"}


class GitLabApi:
    def __init__(self, server: FakeServer) -> None:
        self.server = server

    @property
    def state(self) -> State:
        return self.server.state

    def handle(self, call: Call) -> Reply:
        login = self._login(call)
        if login is None:
            return Reply.json(401, {"message": "401 Unauthorized"})
        injected = self.state.injected["gitlab"]
        if injected:
            canned = injected.popleft()
            if canned.status == 429:  # GitLab's throttle answers in plain text
                return Reply.text(429, "Retry later\n", canned.headers)
            return Reply.json(canned.status, {"message": canned.message}, canned.headers)
        match = router.match(call.method, call.path)
        if match is None:
            self.state.validation_errors.append(f"{call.method} {call.path}: no such route "
                                                "in the fake GitLab")
            return Reply.json(404, {"error": "404 Not Found"})
        try:
            reply = match.route.handler(self, call, login, **match.params)
        except ApiError as exc:
            return Reply.json(exc.status, {"message": exc.message})
        lost = self.state.lost_answer("gitlab", call.method)  # FakeForge.fail_after_next
        return reply if lost is None else Reply.json(lost, {"message": f"{lost} Bad Gateway"})

    def _login(self, call: Call) -> str | None:
        job = self.state.job_tokens.get(call.headers.get("job-token") or "")
        if job is not None:
            return job[2]
        token = call.headers.get("private-token")
        if token is None:
            scheme, _, token = call.headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer":
                return None
        return self.state.tokens.get(token)

    # -- lookups -------------------------------------------------------------------------
    def project(self, ident: str) -> Repo:
        """By numeric id or by URL-encoded path, both as GitLab accepts them."""
        repo = self.state.repo_by_id(int(ident)) if ident.isdigit() else \
            self.state.repos.get(ident)
        if repo is None:
            raise ApiError(404, "404 Project Not Found")
        return repo

    def issue(self, repo: Repo, kind: str, iid: str) -> Issue:
        issue = repo.issues.get(int(iid)) if iid.isdigit() else None
        want_mr = kind == "merge_requests"
        if kind not in KINDS or issue is None or (issue.pull is not None) != want_mr:
            raise ApiError(404, "404 Not found")
        return issue

    def render(self, call: Call) -> GitLabRender:
        return GitLabRender(self.state, call.root, self.server.gitlab_url)

    def effect(self, repo: Repo, kind: str, issue: Issue, what: str, detail: str) -> None:
        self.state.record("gitlab", repo.full_name, f"{KINDS[kind]}{issue.number}", what,
                          detail)


def _listing(call: Call, items: list[Any]) -> Reply:
    """A page with GitLab's pagination headers and a Link header that points back here."""
    page = paginate(call, items, default=20)
    headers = {"X-Page": str(page.number), "X-Per-Page": str(page.per_page),
               "X-Total": str(page.total), "X-Total-Pages": str(page.last),
               "X-Next-Page": str(page.number + 1) if page.number < page.last else "",
               "X-Prev-Page": str(page.number - 1) if page.number > 1 else "",
               **link_header(call, page)}
    return Reply.json(200, list(page.items), headers)


def _labels(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    return [v.strip() for v in str(value or "").split(",") if v.strip()]


# -- projects, users, members --------------------------------------------------------------
@router.route("GET", "/projects/{id}")
def get_project(api: GitLabApi, call: Call, login: str, id: str) -> Reply:
    return Reply.json(200, api.render(call).project(api.project(id)))


@router.route("GET", "/users")
def list_users(api: GitLabApi, call: Call, login: str) -> Reply:
    wanted = (call.arg("username") or "").lower()
    users = [u for u in api.state.users.values() if not wanted or u.login.lower() == wanted]
    render = api.render(call)
    return _listing(call, [render.user(u.login) for u in users])


def _member(api: GitLabApi, call: Call, id: str, user_id: str, *, inherited: bool) -> Reply:
    repo = api.project(id)
    user = api.state.user_by_id(int(user_id)) if user_id.isdigit() else None
    member = repo.members.get(user.login) if user else None
    if user is None or member is None or member.access_level is None \
            or (member.inherited and not inherited):
        raise ApiError(404, "404 Not found")
    return Reply.json(200, api.render(call).member(user.login, member))


@router.route("GET", "/projects/{id}/members/all/{user_id}")
def get_member_all(api: GitLabApi, call: Call, login: str, id: str, user_id: str) -> Reply:
    return _member(api, call, id, user_id, inherited=True)


@router.route("GET", "/projects/{id}/members/{user_id}")
def get_member(api: GitLabApi, call: Call, login: str, id: str, user_id: str) -> Reply:
    return _member(api, call, id, user_id, inherited=False)


# -- issues and merge requests -------------------------------------------------------------
@router.route("GET", "/projects/{id}/issues")
def list_issues(api: GitLabApi, call: Call, login: str, id: str) -> Reply:
    """Issues only (merge requests have their own list): state (opened, closed, all; by
    default all), author_username, labels (all of them), search (case-insensitive, in
    title and description unless `in` narrows it), order_by created_at/updated_at, sort
    (default desc: newest first)."""
    repo = api.project(id)
    state, author = call.arg("state") or "all", call.arg("author_username")
    wanted = _labels(call.arg("labels"))
    search = (call.arg("search") or "").lower()
    fields = _labels(call.arg("in") or "title,description")
    issues = [i for i in repo.issues.values() if i.pull is None
              and state in ("all", "opened" if i.state == "open" else "closed")
              and (author is None or i.author.lower() == author.lower())
              and all(n in i.labels for n in wanted)
              and (not search or any(search in text.lower() for text in (
                  i.title if "title" in fields else "",
                  i.body if "description" in fields else "")))]
    if call.arg("order_by") == "updated_at":
        issues.sort(key=lambda i: (i.updated_at, i.number))
    else:
        issues.sort(key=lambda i: i.number)
    if call.arg("sort") != "asc":
        issues.reverse()
    render = api.render(call)
    return _listing(call, [render.issue(repo, i) for i in issues])


@router.route("POST", "/projects/{id}/issues")
def create_issue(api: GitLabApi, call: Call, login: str, id: str) -> Reply:
    """title (required), description, labels (comma-separated or a list)."""
    repo = api.project(id)
    data = call.json()
    if not str(data.get("title") or "").strip():
        return Reply.json(400, {"message": {"title": ["can't be blank"]}})
    issue = Issue(repo.next_number(), str(data["title"]), data.get("description") or "",
                  login, labels=list(dict.fromkeys(_labels(data.get("labels")))))
    repo.issues[issue.number] = issue
    api.effect(repo, "issues", issue, "issue-open", issue.title)
    if issue.labels:
        api.effect(repo, "issues", issue, "labels", ",".join(issue.labels))
    api.state.announce(Act("issue-opened", repo.full_name, login, issue=issue,
                           labels=tuple(issue.labels)))
    return Reply.json(201, api.render(call).issue(repo, issue))


@router.route("GET", "/projects/{id}/issues/{iid}")
def get_issue(api: GitLabApi, call: Call, login: str, id: str, iid: str) -> Reply:
    repo = api.project(id)
    return Reply.json(200, api.render(call).issue(repo, api.issue(repo, "issues", iid)))


def _update(api: GitLabApi, call: Call, repo: Repo, kind: str, issue: Issue,
            login: str = "") -> list[str]:
    """PUT on an issue or merge request: the fields opbot sends, recorded as effects."""
    data = call.json()
    before = {"labels": list(issue.labels), "title": issue.title, "body": issue.body}
    if "add_labels" in data:
        added = _labels(data["add_labels"])
        issue.labels += [n for n in added if n not in issue.labels]
        api.effect(repo, kind, issue, "labels", ",".join(added))
    if "labels" in data:
        issue.labels = _labels(data["labels"])
        api.effect(repo, kind, issue, "labels-set", ",".join(issue.labels))
    changed = [k for k in ("title", "description") if k in data]
    if "title" in data:
        issue.title = data["title"]
    if "description" in data:
        issue.body = data["description"] or ""
    if changed:
        api.effect(repo, kind, issue, "pr-update" if issue.pull else "issue-update",
                   ",".join("body" if k == "description" else k for k in changed))
    issue.updated_at = now()
    _announce_update(api, login, repo, issue, before)
    return changed


def _announce_update(api: GitLabApi, login: str, repo: Repo, issue: Issue,
                     before: dict[str, Any]) -> None:
    """The hooks a PUT brings: labels added (Issue / Merge Request Hook with
    changes.labels), a merge request's new title or description (Merge Request Hook)."""
    added = tuple(n for n in issue.labels if n not in before["labels"])
    if added:
        api.state.announce(Act("labeled", repo.full_name, login, issue=issue, labels=added,
                               previous_labels=tuple(before["labels"])))
    edits = {k: before[k] for k in ("title", "body") if before[k] != getattr(issue, k)}
    if edits and issue.pull is not None:
        api.state.announce(Act("pull-edited", repo.full_name, login, issue=issue,
                               changes=edits))


@router.route("PUT", "/projects/{id}/issues/{iid}")
def update_issue(api: GitLabApi, call: Call, login: str, id: str, iid: str) -> Reply:
    repo = api.project(id)
    issue = api.issue(repo, "issues", iid)
    _update(api, call, repo, "issues", issue, login)
    return Reply.json(200, api.render(call).issue(repo, issue))


@router.route("GET", "/projects/{id}/{kind}/{iid}/notes")
def list_notes(api: GitLabApi, call: Call, login: str, id: str, kind: str, iid: str) -> Reply:
    repo = api.project(id)
    issue = api.issue(repo, kind, iid)
    render = api.render(call)
    notes = [(c.id, render.note(repo, issue, c)) for c in [*issue.comments,
                                                           *summary_notes(issue)]]
    for thread in issue.pull.threads if issue.pull else []:
        notes += [(c.id, render.note(repo, issue, c, thread=thread)) for c in thread.comments]
    # GitLab's default order is newest first (sort=desc).
    ordered = sorted(notes, key=lambda pair: pair[0], reverse=call.arg("sort") != "asc")
    return _listing(call, [n for _, n in ordered])


@router.route("POST", "/projects/{id}/{kind}/{iid}/notes")
def create_note(api: GitLabApi, call: Call, login: str, id: str, kind: str, iid: str) -> Reply:
    repo = api.project(id)
    issue = api.issue(repo, kind, iid)
    note = Comment(api.state.new_id(), login, call.json()["body"])
    issue.comments.append(note)
    api.effect(repo, kind, issue, "comment", note.body)
    api.state.announce(Act("comment", repo.full_name, login, issue=issue, comment=note))
    return Reply.json(201, api.render(call).note(repo, issue, note))


def _note(repo: Repo, issue: Issue, note_id: str) -> Comment:
    note = next((c for c in issue.comments if str(c.id) == note_id), None)
    if note is None:
        raise ApiError(404, "404 Note Not Found")
    return note


@router.route("GET", "/projects/{id}/{kind}/{iid}/notes/{note_id}")
def get_note(api: GitLabApi, call: Call, login: str, id: str, kind: str, iid: str,
             note_id: str) -> Reply:
    repo = api.project(id)
    issue = api.issue(repo, kind, iid)
    return Reply.json(200, api.render(call).note(repo, issue, _note(repo, issue, note_id)))


@router.route("PUT", "/projects/{id}/{kind}/{iid}/notes/{note_id}")
def update_note(api: GitLabApi, call: Call, login: str, id: str, kind: str, iid: str,
                note_id: str) -> Reply:
    repo = api.project(id)
    issue = api.issue(repo, kind, iid)
    note = _note(repo, issue, note_id)
    if note.author != login:
        raise ApiError(403, "403 Forbidden")
    old = note.body
    note.body = call.json()["body"]
    note.updated_at = now()
    api.effect(repo, kind, issue, "comment-edit", f"{note.id}:{note.body}")
    api.state.announce(Act("comment-edited", repo.full_name, login, issue=issue, comment=note,
                           changes={"body": old}))
    return Reply.json(200, api.render(call).note(repo, issue, note))


def _award(api: GitLabApi, call: Call, login: str, repo: Repo, kind: str, issue: Issue,
           reactions: list[Reaction], awardable: tuple[int, str], target: str) -> Reply:
    name = call.json()["name"]
    content = REACTION.get(name, name)
    if any(r.user == login and r.content == content for r in reactions):
        # GitLab refuses a second identical award from the same user.
        raise ApiError(404, "404 Award Emoji Name has already been taken")
    reaction = Reaction(api.state.new_id(), content, login)
    reactions.append(reaction)
    api.effect(repo, kind, issue, "reaction", f"{target}{name}")  # the name on the wire
    return Reply.json(201, api.render(call).award(reaction, *awardable))


@router.route("POST", "/projects/{id}/{kind}/{iid}/award_emoji")
def award_issue(api: GitLabApi, call: Call, login: str, id: str, kind: str, iid: str) -> Reply:
    repo = api.project(id)
    issue = api.issue(repo, kind, iid)
    awardable = (issue.id, "MergeRequest" if issue.pull else "Issue")
    return _award(api, call, login, repo, kind, issue, issue.reactions, awardable, "")


@router.route("POST", "/projects/{id}/{kind}/{iid}/notes/{note_id}/award_emoji")
def award_note(api: GitLabApi, call: Call, login: str, id: str, kind: str, iid: str,
               note_id: str) -> Reply:
    repo = api.project(id)
    issue = api.issue(repo, kind, iid)
    note = _note(repo, issue, note_id)
    return _award(api, call, login, repo, kind, issue, note.reactions, (note.id, "Note"),
                  f"note-{note.id}:")


# -- merge requests ------------------------------------------------------------------------
@router.route("GET", "/projects/{id}/merge_requests")
def list_mrs(api: GitLabApi, call: Call, login: str, id: str) -> Reply:
    repo = api.project(id)
    render = api.render(call)
    state, source = call.arg("state", "all"), call.arg("source_branch")
    target = call.arg("target_branch")
    mrs = [render.merge_request(repo, i) for i in repo.pulls()]
    mrs = [m for m in mrs if state in ("all", m["state"])
           and source in (None, m["source_branch"]) and target in (None, m["target_branch"])]
    # GitLab lists newest first.
    return _listing(call, sorted(mrs, key=lambda m: -m["iid"]))


@router.route("POST", "/projects/{id}/merge_requests")
def create_mr(api: GitLabApi, call: Call, login: str, id: str) -> Reply:
    repo = api.project(id)
    data = call.json()
    source, target = data["source_branch"], data["target_branch"]
    for name in (source, target):
        if repo.git.resolve(name) is None:
            raise ApiError(422, f"Invalid branch: {name}")
    existing = next((i for i in repo.pulls() if i.state == "open" and i.pull
                     and i.pull.head == source and i.pull.base == target
                     and i.pull.head_repo in (None, repo.full_name)), None)
    if existing is not None:
        return Reply.json(409, {"message": [
            "Another open merge request already exists for this source branch: "
            f"!{existing.number}"]})
    issue = Issue(repo.next_number(), data["title"], data.get("description") or "", login,
                  labels=_labels(data.get("labels")), pull=PullData(head=source, base=target))
    repo.issues[issue.number] = issue
    api.effect(repo, "merge_requests", issue, "pr-open", f"{source}->{target}:{issue.title}")
    if issue.labels:
        api.effect(repo, "merge_requests", issue, "labels", ",".join(issue.labels))
    api.state.announce(Act("pull-opened", repo.full_name, login, issue=issue))
    return Reply.json(201, api.render(call).merge_request(repo, issue))


@router.route("GET", "/projects/{id}/merge_requests/{iid}")
def get_mr(api: GitLabApi, call: Call, login: str, id: str, iid: str) -> Reply:
    repo = api.project(id)
    issue = api.issue(repo, "merge_requests", iid)
    return Reply.json(200, api.render(call).merge_request(repo, issue))


@router.route("PUT", "/projects/{id}/merge_requests/{iid}")
def update_mr(api: GitLabApi, call: Call, login: str, id: str, iid: str) -> Reply:
    repo = api.project(id)
    issue = api.issue(repo, "merge_requests", iid)
    _update(api, call, repo, "merge_requests", issue, login)
    return Reply.json(200, api.render(call).merge_request(repo, issue))


@router.route("GET", "/projects/{id}/merge_requests/{iid}/discussions")
def list_discussions(api: GitLabApi, call: Call, login: str, id: str, iid: str) -> Reply:
    repo = api.project(id)
    issue = api.issue(repo, "merge_requests", iid)
    assert issue.pull is not None
    render = api.render(call)
    items = [(t.root.id, render.discussion(repo, issue, t)) for t in issue.pull.threads]
    items += [(c.id, render.comment_discussion(repo, issue, c))
              for c in [*issue.comments, *summary_notes(issue)]]
    return _listing(call, [d for _, d in sorted(items, key=lambda pair: pair[0])])


@router.route("POST", "/projects/{id}/merge_requests/{iid}/discussions/{discussion_id}/notes")
def reply_discussion(api: GitLabApi, call: Call, login: str, id: str, iid: str,
                     discussion_id: str) -> Reply:
    repo = api.project(id)
    issue = api.issue(repo, "merge_requests", iid)
    thread = repo.find_thread(issue, discussion_id)
    if thread is None:
        raise ApiError(404, "404 Discussion Not Found")
    note = ReviewComment(api.state.new_id(), login, call.json()["body"], repo.head_sha(issue))
    thread.comments.append(note)
    api.effect(repo, "merge_requests", issue, "reply", f"{thread.discussion_id}:{note.body}")
    announce_reply(api.state, repo.full_name, issue, thread, note)
    return Reply.json(201, api.render(call).note(repo, issue, note, thread=thread))


# -- repository ----------------------------------------------------------------------------
@router.route("GET", "/projects/{id}/repository/branches/{branch}")
def get_branch(api: GitLabApi, call: Call, login: str, id: str, branch: str) -> Reply:
    repo = api.project(id)
    sha = repo.git.branches().get(branch)
    if sha is None:
        raise ApiError(404, "404 Branch Not Found")
    return Reply.json(200, api.render(call).branch(repo, branch, sha))


@router.route("GET", "/projects/{id}/repository/compare")
def compare(api: GitLabApi, call: Call, login: str, id: str) -> Reply:
    repo = api.project(id)
    base, head = (repo.git.resolve(call.arg(k) or "") for k in ("from", "to"))
    if base is None or head is None:
        raise ApiError(404, "404 Ref Not Found")
    # Default (straight=false) compares from the merge base, like `git diff from...to`.
    start = base if call.arg("straight") == "true" else (repo.git.merge_base(base, head) or base)
    commits = repo.git.between(start, head)
    render = api.render(call)
    rendered = [render.commit(repo, c) for c in commits]
    return Reply.json(200, {
        "commit": rendered[-1] if rendered else None, "commits": rendered, "diffs": [],
        "compare_timeout": False, "compare_same_ref": base == head,
        "web_url": render.web(repo, f"/-/compare/{base}...{head}")})


@router.route("GET", "/projects/{id}/repository/files/{file_path}")
def get_file(api: GitLabApi, call: Call, login: str, id: str, file_path: str) -> Reply:
    repo = api.project(id)
    ref = call.arg("ref") or repo.default_branch
    commit = repo.git.resolve(ref)
    blob = repo.git.blob(commit, file_path) if commit else None
    if commit is None or blob is None:
        raise ApiError(404, "404 File Not Found")
    return Reply.json(200, api.render(call).file(file_path, ref, blob[0], blob[1], commit))


# -- CI ------------------------------------------------------------------------------------
@router.route("GET", "/projects/{id}/pipelines")
def list_pipelines(api: GitLabApi, call: Call, login: str, id: str) -> Reply:
    repo = api.project(id)
    render = api.render(call)
    sha, status, ref = call.arg("sha"), call.arg("status"), call.arg("ref")
    pipelines = [render.pipeline(repo, r) for r in reversed(repo.runs)]  # newest first
    return _listing(call, [p for p in pipelines if sha in (None, p["sha"])
                           and status in (None, p["status"]) and ref in (None, p["ref"])])


def _variables(value: Any) -> list[dict[str, str]]:
    """Pipeline variables as GitLab takes them: [{key, value, variable_type}], env_var by
    default; anything else is a 400, as on GitLab."""
    if not isinstance(value, list) or not all(isinstance(v, dict) and isinstance(
            v.get("key"), str) and isinstance(v.get("value"), str) for v in value):
        raise ApiError(400, "variables is invalid")
    found = [{"key": v["key"], "value": v["value"],
              "variable_type": v.get("variable_type", "env_var")} for v in value]
    if any(v["variable_type"] not in ("env_var", "file") for v in found):
        raise ApiError(400, "variables[variable_type] does not have a valid value")
    return found


@router.route("POST", "/projects/{id}/pipeline")
def create_pipeline(api: GitLabApi, call: Call, login: str, id: str) -> Reply:
    """A pipeline on a ref, source "api": recorded as an effect; no jobs run. Developers
    and above may create one (and pass variables, GitLab's default)."""
    repo = api.project(id)
    member = repo.members.get(login)
    if member is None or (member.access_level or 0) < 30:
        raise ApiError(403, "403 Forbidden")
    data = call.json()
    ref = data.get("ref")
    sha = repo.git.resolve(ref) if isinstance(ref, str) else None
    if sha is None:
        return Reply.json(400, {"message": {"base": ["Reference not found"]}})
    variables = _variables(data.get("variables", []))
    needed = {"developer": 30, "maintainer": 40, "owner": 50}.get(
        repo.pipeline_variables_role, 1000)
    if variables and (member.access_level or 0) < needed:
        raise ApiError(403, "403 Forbidden - Insufficient permissions to set pipeline "
                            "variables")
    api.state.record("gitlab", repo.full_name, "", "pipeline",
                     f"{ref}:{json.dumps(variables, sort_keys=True)}")
    run = CiRun(api.state.new_id(), len(repo.runs) + 1, "pipeline", sha, ref, "created", [],
                user=login, variables=variables)
    with api.state.lock:
        repo.api_pipelines.append(run)
    return Reply.json(201, api.render(call).pipeline(repo, run, source="api"))


def _pipeline(repo: Repo, pipeline_id: str) -> CiRun:
    run = next((r for r in [*repo.runs, *repo.api_pipelines] if str(r.id) == pipeline_id),
               None)
    if run is None:
        raise ApiError(404, "404 Not found")
    return run


@router.route("GET", "/projects/{id}/pipelines/{pipeline_id}")
def get_pipeline(api: GitLabApi, call: Call, login: str, id: str, pipeline_id: str) -> Reply:
    repo = api.project(id)
    run = _pipeline(repo, pipeline_id)
    return Reply.json(200, api.render(call).pipeline(
        repo, run, source="api" if run in repo.api_pipelines else "push", detail=True))


@router.route("GET", "/job")
def current_job(api: GitLabApi, call: Call, login: str) -> Reply:
    """The job a CI job token belongs to (only a job token may ask)."""
    found = api.state.job_tokens.get(call.headers.get("job-token") or "")
    if found is None:
        raise ApiError(401, "401 Unauthorized")
    repo_name, pipeline_id, user = found
    repo = api.state.repos[repo_name]
    run = _pipeline(repo, str(pipeline_id))
    return Reply.json(200, {"id": pipeline_id * 10 + 1, "status": "running", "stage": "opbot",
                            "name": "opbot-job", "ref": run.branch, "tag": False,
                            "user": api.render(call).user(user),
                            "pipeline": {**api.render(call).pipeline(repo, run, source="api"),
                                         "project_id": repo.id}})


@router.route("GET", "/projects/{id}/pipelines/{pipeline_id}/variables")
def list_pipeline_variables(api: GitLabApi, call: Call, login: str, id: str,
                            pipeline_id: str) -> Reply:
    """The variables a pipeline was created with; GitLab shows them to Maintainers (and
    to the pipeline's creator)."""
    repo = api.project(id)
    run = _pipeline(repo, pipeline_id)
    member = repo.members.get(login)
    if login != run.user and (member is None or (member.access_level or 0) < 40):
        raise ApiError(403, "403 Forbidden")
    return _listing(call, [dict(v) for v in run.variables])


@router.route("GET", "/projects/{id}/pipelines/{pipeline_id}/jobs")
def list_pipeline_jobs(api: GitLabApi, call: Call, login: str, id: str,
                       pipeline_id: str) -> Reply:
    repo = api.project(id)
    run = _pipeline(repo, pipeline_id)
    scopes = {v for k, v in call.query if k in ("scope", "scope[]")}
    render = api.render(call)
    jobs = [render.job(repo, run, j) for j in run.jobs]
    return _listing(call, [j for j in jobs if not scopes or j["status"] in scopes])


def _find_job(repo: Repo, job_id: str) -> tuple[CiRun, CiJob]:
    for run in repo.runs:
        for job in run.jobs:
            if str(job.id) == job_id:
                return run, job
    raise ApiError(404, "404 Not found")


@router.route("GET", "/projects/{id}/jobs/{job_id}")
def get_job(api: GitLabApi, call: Call, login: str, id: str, job_id: str) -> Reply:
    repo = api.project(id)
    run, job = _find_job(repo, job_id)
    return Reply.json(200, api.render(call).job(repo, run, job))


@router.route("GET", "/projects/{id}/jobs/{job_id}/trace")
def get_trace(api: GitLabApi, call: Call, login: str, id: str, job_id: str) -> Reply:
    _, job = _find_job(api.project(id), job_id)
    return Reply.text(200, job.log)


# -- who the token is; review summaries; resolving discussions; commit statuses ------------
def summary_notes(issue: Issue) -> list[Comment]:
    """A submitted review's summary is a plain note on GitLab (GitHub lists reviews under
    /pulls/{n}/reviews instead); a review without a body leaves none."""
    reviews = issue.pull.reviews if issue.pull else []
    return [Comment(r.id, r.author, r.body, created_at=r.submitted_at,
                    updated_at=r.submitted_at) for r in reviews if r.body]


@router.route("GET", "/user")
def get_current_user(api: GitLabApi, call: Call, login: str) -> Reply:
    return Reply.json(200, api.render(call).current_user(login))


@router.route("GET", "/projects/{id}/repository/commits/{sha}")
def get_commit(api: GitLabApi, call: Call, login: str, id: str, sha: str) -> Reply:
    repo = api.project(id)
    found = repo.git.resolve(sha)
    if found is None:
        raise ApiError(404, "404 Commit Not Found")
    return Reply.json(200, api.render(call).commit(repo, repo.git.commit_info(found)))


def _developer_or(repo: Repo, login: str, author: str) -> bool:
    member = repo.members.get(login)
    return login == author or (member is not None and (member.access_level or 0) >= 30)


@router.route("PUT", "/projects/{id}/merge_requests/{iid}/discussions/{discussion_id}")
def resolve_discussion(api: GitLabApi, call: Call, login: str, id: str, iid: str,
                       discussion_id: str) -> Reply:
    """Resolve or reopen a diff discussion (`resolved` in the query or the body): the
    merge request's author and developers may."""
    repo = api.project(id)
    issue = api.issue(repo, "merge_requests", iid)
    thread = repo.find_thread(issue, discussion_id)
    if thread is None:
        raise ApiError(404, "404 Discussion Not Found")
    if not _developer_or(repo, login, issue.author):
        raise ApiError(403, "403 Forbidden")
    raw = call.arg("resolved")
    wanted = call.json().get("resolved") if raw is None else raw
    if wanted is None:
        raise ApiError(400, "resolved is missing")
    resolved = wanted is True or str(wanted).lower() == "true"
    if resolved != thread.resolved:
        thread.resolved = resolved
        api.effect(repo, "merge_requests", issue, "resolve" if resolved else "unresolve",
                   thread.discussion_id)
        if resolved:  # GitLab sends no hook for it; a GitHub subscription hears of it
            api.state.announce(Act("thread-resolved", repo.full_name, login, issue=issue,
                                   review_comments=tuple((thread, c)
                                                         for c in thread.comments)))
    return Reply.json(200, api.render(call).discussion(repo, issue, thread))


def _transition(current: str, wanted: str) -> str:
    """GitLab's commit status state machine, as POST /statuses/:sha drives it: `pending`
    enqueues (from created only), `running` runs (from created or pending), the finished
    states end a created, pending or running status. Anything else is GitLab's 400
    (github.com/jenkinsci/gitlab-plugin/issues/885, .../konflux-ci/integration-service/pull/853)."""
    event = {"pending": "enqueue", "running": "run", "success": "success", "failed": "drop",
             "canceled": "cancel"}[wanted]
    allowed = {"pending": ("created",), "running": ("created", "pending")}.get(
        wanted, ("created", "pending", "running"))
    if current not in allowed:
        raise ApiError(400, f"Cannot transition status via :{event} from :{current} "
                            f"(Reason(s): Status cannot transition via \"{event}\")")
    return wanted


@router.route("POST", "/projects/{id}/statuses/{sha}")
def set_commit_status(api: GitLabApi, call: Call, login: str, id: str, sha: str) -> Reply:
    """A commit status by name: a pending or running one of that name is updated, else a
    new one starts (as GitLab's API does). Developers and above may."""
    repo = api.project(id)
    member = repo.members.get(login)
    if member is None or (member.access_level or 0) < 30:
        raise ApiError(403, "403 Forbidden")
    if repo.git.resolve(sha) != sha:
        raise ApiError(404, "404 Commit Not Found")
    data = {**dict(call.query), **call.json()}
    wanted = str(data.get("state", ""))
    if wanted not in ("pending", "running", "success", "failed", "canceled"):
        raise ApiError(400, "state does not have a valid value")
    name = str(data.get("name") or data.get("context") or "default")
    status = next((s for s in reversed(repo.statuses) if s.sha == sha and s.name == name
                   and s.state in ("pending", "running")), None)
    if status is None:
        status = CommitStatus(api.state.new_id(), sha, name, "created", "", None, login)
        status.state = _transition(status.state, wanted)
        repo.statuses.append(status)
    else:
        status.state = _transition(status.state, wanted)
    status.description = str(data.get("description") or status.description)
    status.target_url = data.get("target_url") or status.target_url
    status.updated_at = now()
    api.state.record("gitlab", repo.full_name, "", "status",
                     f"{name}:{sha}:{status.state}:{status.description}")
    announce_status(api.state, repo.full_name, login, status,
                    ref=str(data["ref"]) if data.get("ref") else None)
    return Reply.json(201, api.render(call).status(status))
