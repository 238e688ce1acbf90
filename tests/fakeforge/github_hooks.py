"""GitHub webhook payloads for the fake's acts, varied from real deliveries.

Each payload starts from a real delivery vendored in tests/data/webhooks/github (npm
`@octokit/webhooks-examples`): its own nested objects keep their shape (each event and
action has its own schema) and get the fake's state written into them; `point_home` sends
every URL left over back to the fake. hooks.py validates the result against GitHub's
webhook schemas before it goes out.

Which deliveries an act makes (README.md, "Webhooks", cites the docs for each):
  issue-opened    issues.opened (labels on it) + issues.labeled per label
  labeled         issues.labeled / pull_request.labeled, per added label
  comment         issue_comment.created;  comment-edited: issue_comment.edited
  review          pull_request_review.submitted + pull_request_review_comment.created each
  review-reply    pull_request_review_comment.created + pull_request_review.submitted
                  (GitHub wraps a lone reply in a review: state commented, no body)
  pull-opened     pull_request.opened;  pull-edited: pull_request.edited
  pull-closed     pull_request.closed (merged: false)
  push            push + pull_request.synchronize for each open PR of the branch
  thread-resolved pull_request_review_thread.resolved
  ci-failed       check_run.completed per job, check_suite.completed, workflow_job.completed
                  per job, workflow_run.completed
  progress        a check run: check_run.created / .completed (both when made completed),
                  check_suite.completed once all of that App's check runs on the commit
                  are; a commit status: status (no real delivery vendored: a minimal one)
"""

from __future__ import annotations

import copy
import functools
import json
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .acts import Act
from .github_render import node_id, ts
from .model import (
    App,
    CheckRun,
    CiJob,
    CiRun,
    Comment,
    CommitStatus,
    Issue,
    Repo,
    Review,
    ReviewComment,
    ReviewThread,
    State,
    now,
)

EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "webhooks" / "github"
# (event, action) -> the vendored real delivery each payload is varied from.
TEMPLATES: dict[tuple[str, str | None], str] = {
    ("issues", "opened"): "issues/opened.1.json",
    ("issues", "labeled"): "issues/labeled.1.json",
    ("issue_comment", "created"): "issue_comment/created.2.json",
    ("issue_comment", "edited"): "issue_comment/edited.1.json",
    ("pull_request", "opened"): "pull_request/opened.2.json",
    # The package has no `edited` delivery: the `opened` one plus `changes` is one.
    ("pull_request", "edited"): "pull_request/opened.2.json",
    ("pull_request", "labeled"): "pull_request/labeled.1.json",
    # No `closed` delivery either: the `opened` one, closed, is one.
    ("pull_request", "closed"): "pull_request/opened.2.json",
    ("pull_request", "synchronize"): "pull_request/synchronize.1.json",
    ("pull_request_review", "submitted"): "pull_request_review/submitted.2.json",
    ("pull_request_review_comment", "created"): "pull_request_review_comment/created.2.json",
    ("pull_request_review_thread", "resolved"): "pull_request_review_thread/resolved.1.json",
    ("push", None): "push/event.1.json",
    ("check_run", "created"): "check_run/created.2.json",
    ("check_run", "completed"): "check_run/completed.1.json",
    ("check_suite", "completed"): "check_suite/completed.1.json",
    ("workflow_job", "completed"): "workflow_job/completed.1.json",
    ("workflow_run", "completed"): "workflow_run/completed.2.json",
}
ACTIONS_APP = App("github-actions", 15368, "GitHub Actions", "github")
_URL = re.compile(r"^https?://([^/]+)")
# A check suite's conclusion is its check runs' of the highest priority ("Using the REST
# API to interact with checks": timed_out, success, neutral -> timed_out).
CONCLUSION_PRIORITY = ("action_required", "cancelled", "timed_out", "failure", "stale",
                       "neutral", "skipped", "success")
# A commit status in GitHub's words (pending, success, failure, error): GitLab's statuses
# share the model.
GITHUB_STATE = {"created": "pending", "running": "pending", "failed": "failure",
                "canceled": "error"}

Rendered = tuple[str, dict[str, Any]]  # (X-GitHub-Event, payload)


@functools.cache
def _example(relative: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads((EXAMPLES / relative).read_text(encoding="utf-8"))
    return value


def template(event: str, action: str | None) -> dict[str, Any]:
    """A fresh copy of the real delivery for (event, action), with its action set."""
    value: dict[str, Any] = copy.deepcopy(_example(TEMPLATES[(event, action)]))
    if action is not None:
        value["action"] = action
    value.pop("organization", None)  # the fake's repositories belong to users
    value.pop("installation", None)  # added back for an App's subscription
    return value


class GitHubHooks:
    """Renders acts as GitHub deliveries, every URL pointing at the fake (`root`)."""

    def __init__(self, state: State, root: str, *, installation: int | None = None) -> None:
        self.state = state
        self.root = root
        self.installation = installation

    # -- URLs ----------------------------------------------------------------------------
    def api(self, path: str) -> str:
        return f"{self.root}{path}"

    def web(self, path: str) -> str:
        return f"{self.root}/_web/github.com{path}"

    def point_home(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: self.point_home(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.point_home(v) for v in value]
        if isinstance(value, str):
            found = _URL.match(value)
            if found and not value.startswith(self.root):
                host, rest = found.group(1), value[found.end():]
                return self.api(rest) if host == "api.github.com" else \
                    f"{self.root}/_web/{host}{rest}"
        return value

    # -- acts ----------------------------------------------------------------------------
    def render(self, act: Act) -> list[Rendered]:
        repo = self.state.repos[act.repo]
        render: dict[str, Callable[[Act, Repo], list[Rendered]]] = {
            "issue-opened": self._issue_opened, "labeled": self._labeled,
            "comment": self._comment, "comment-edited": self._comment_edited,
            "review": self._review, "review-reply": self._review_reply,
            "pull-opened": self._pull_opened, "pull-edited": self._pull_edited,
            "pull-closed": self._pull_closed, "push": self._push, "ci-failed": self._ci_failed,
            "thread-resolved": self._thread_resolved, "progress": self._progress,
        }
        found = render[act.kind](act, repo)
        return [(event, self._finish(payload, repo, act.actor)) for event, payload in found]

    def _finish(self, payload: dict[str, Any], repo: Repo, actor: str) -> dict[str, Any]:
        if "repository" in payload:
            self._fill_repo(payload["repository"], repo)
        if "sender" in payload:
            self._fill_user(payload["sender"], actor)
        if self.installation is not None:
            payload["installation"] = {"id": self.installation,
                                       "node_id": node_id("Installation", self.installation)}
        return self.point_home(payload)  # type: ignore[no-any-return]

    def _issue_opened(self, act: Act, repo: Repo) -> list[Rendered]:
        issue = _need(act.issue)
        opened = template("issues", "opened")
        self._fill_issue(opened["issue"], repo, issue)
        found: list[Rendered] = [("issues", opened)]
        return found + self._labeled(act, repo)

    def _labeled(self, act: Act, repo: Repo) -> list[Rendered]:
        issue = _need(act.issue)
        found: list[Rendered] = []
        for name in act.labels:
            if issue.pull is not None:
                payload = template("pull_request", "labeled")
                payload["number"] = issue.number
                self._fill_pull(payload["pull_request"], repo, issue)
                event = "pull_request"
            else:
                payload = template("issues", "labeled")
                self._fill_issue(payload["issue"], repo, issue)
                event = "issues"
            payload["label"] = self._label(repo, name)
            found.append((event, payload))
        return found

    def _comment(self, act: Act, repo: Repo) -> list[Rendered]:
        issue, comment = _need(act.issue), _need(act.comment)
        payload = template("issue_comment", "created")
        self._fill_issue(payload["issue"], repo, issue)
        self._fill_comment(payload["comment"], repo, issue, comment)
        return [("issue_comment", payload)]

    def _comment_edited(self, act: Act, repo: Repo) -> list[Rendered]:
        issue, comment = _need(act.issue), _need(act.comment)
        payload = template("issue_comment", "edited")
        self._fill_issue(payload["issue"], repo, issue)
        self._fill_comment(payload["comment"], repo, issue, comment)
        payload["changes"] = {"body": {"from": act.changes.get("body", "")}}
        return [("issue_comment", payload)]

    def _review(self, act: Act, repo: Repo) -> list[Rendered]:
        issue, review = _need(act.issue), _need(act.review)
        submitted = template("pull_request_review", "submitted")
        self._fill_pull(submitted["pull_request"], repo, issue)
        self._fill_review(submitted["review"], repo, issue, review)
        found: list[Rendered] = [("pull_request_review", submitted)]
        for thread, comment in act.review_comments:
            found.append(self._review_comment(repo, issue, thread, comment, review.id))
        return found

    def _review_reply(self, act: Act, repo: Repo) -> list[Rendered]:
        issue, review = _need(act.issue), _need(act.review)
        thread, comment = act.review_comments[0]
        created = self._review_comment(repo, issue, thread, comment, review.id)
        submitted = template("pull_request_review", "submitted")
        self._fill_pull(submitted["pull_request"], repo, issue)
        self._fill_review(submitted["review"], repo, issue, review)
        return [created, ("pull_request_review", submitted)]

    def _review_comment(self, repo: Repo, issue: Issue, thread: ReviewThread,
                        comment: ReviewComment, review_id: int) -> Rendered:
        payload = template("pull_request_review_comment", "created")
        self._fill_pull(payload["pull_request"], repo, issue)
        self._fill_review_comment(payload["comment"], repo, issue, thread, comment, review_id)
        return ("pull_request_review_comment", payload)

    def _thread_resolved(self, act: Act, repo: Repo) -> list[Rendered]:
        issue = _need(act.issue)
        assert issue.pull is not None
        payload = template("pull_request_review_thread", "resolved")
        self._fill_pull(payload["pull_request"], repo, issue)
        thread = act.review_comments[0][0]
        shape = payload["thread"]["comments"][0]
        reviews = {c: r.id for r in issue.pull.reviews for c in r.comment_ids}
        payload["thread"] = {"node_id": f"PRRT_{thread.root.id}", "comments": [
            self._fill_review_comment(copy.deepcopy(shape), repo, issue, thread, comment,
                                      reviews.get(comment.id, comment.id))
            for _, comment in act.review_comments]}
        return [("pull_request_review_thread", payload)]

    def _pull_opened(self, act: Act, repo: Repo) -> list[Rendered]:
        return self._pull_event("opened", act, repo)

    def _pull_closed(self, act: Act, repo: Repo) -> list[Rendered]:
        return self._pull_event("closed", act, repo)

    def _pull_edited(self, act: Act, repo: Repo) -> list[Rendered]:
        rendered = self._pull_event("edited", act, repo)
        rendered[0][1]["changes"] = {name: {"from": old} for name, old in act.changes.items()}
        return rendered

    def _pull_event(self, action: str, act: Act, repo: Repo) -> list[Rendered]:
        issue = _need(act.issue)
        payload = template("pull_request", action)
        payload["number"] = issue.number
        self._fill_pull(payload["pull_request"], repo, issue)
        return [("pull_request", payload)]

    def _push(self, act: Act, repo: Repo) -> list[Rendered]:
        payload = template("push", None)
        branch = act.ref.removeprefix("refs/heads/")
        commits = repo.git.between(act.before, act.after) \
            if act.before.strip("0") and repo.git.resolve(act.before) else \
            repo.git.log(act.after, "-1")
        rendered = [self._push_commit(repo, c.sha) for c in commits]
        pusher = self.state.users.get(act.actor)
        payload.update(
            ref=act.ref, before=act.before, after=act.after, created=not act.before.strip("0"),
            deleted=not act.after.strip("0"), forced=False, base_ref=None,
            compare=self.web(f"/{repo.full_name}/compare/{act.before[:12]}...{act.after[:12]}"),
            commits=rendered, head_commit=rendered[-1] if rendered else None,
            pusher={"name": act.actor,
                    "email": pusher.email if pusher else f"{act.actor}@users.example.com"})
        found: list[Rendered] = [("push", payload)]
        for base, pull in _pulls_of_branch(self.state, repo, branch):
            synchronize = template("pull_request", "synchronize")
            synchronize.update(number=pull.number, before=act.before, after=act.after)
            self._fill_pull(synchronize["pull_request"], base, pull)
            self._fill_repo(synchronize["repository"], base)
            found.append(("pull_request", synchronize))
        return found

    def _push_commit(self, repo: Repo, sha: str) -> dict[str, Any]:
        value: dict[str, Any] = copy.deepcopy(_example(TEMPLATES[("push", None)])["head_commit"])
        commit = repo.git.commit_info(sha)
        value.update(id=commit.sha, tree_id=repo.git.resolve(f"{sha}^{{tree}}") or "",
                     distinct=True, message=commit.message, timestamp=commit.committed_at,
                     url=self.web(f"/{repo.full_name}/commit/{commit.sha}"))
        for role, name, email in (("author", commit.author_name, commit.author_email),
                                  ("committer", commit.committer_name,
                                   commit.committer_email)):
            user = self.state.user_by_email(email)
            value[role] = {"name": name, "email": email,
                           "username": user.login if user else name}
        return value

    def _ci_failed(self, act: Act, repo: Repo) -> list[Rendered]:
        run = _need(act.run)
        pulls, fork = _ci_pulls(self.state, repo, run.sha)
        suite_id = run.id + 500_000
        suite = Suite(suite_id, run.sha, None if fork else run.branch, "completed",
                      run.conclusion, ACTIONS_APP, run.created_at, pulls, len(run.jobs))
        found: list[Rendered] = []
        for job in run.jobs:
            check = template("check_run", "completed")
            self._fill_check_run(
                check["check_run"], repo, suite, ident=job.id, name=job.name,
                status="completed", conclusion=job.conclusion,
                details_url=self.web(f"/{repo.full_name}/actions/runs/{run.id}/job/{job.id}"),
                title=f"{job.name} {job.conclusion}", summary="", started_at=run.created_at,
                completed_at=run.created_at)
            found.append(("check_run", check))
        completed = template("check_suite", "completed")
        self._fill_check_suite(completed["check_suite"], repo, suite)
        found.append(("check_suite", completed))
        for job in run.jobs:
            workflow_job = template("workflow_job", "completed")
            self._fill_workflow_job(workflow_job["workflow_job"], repo, run, job)
            found.append(("workflow_job", workflow_job))
        workflow_run = template("workflow_run", "completed")
        self._fill_workflow_run(workflow_run, repo, run, pulls, fork, suite_id, act.actor)
        found.append(("workflow_run", workflow_run))
        return found

    def _progress(self, act: Act, repo: Repo) -> list[Rendered]:
        if act.status is not None:
            return [("status", self._status(repo, act.status))]
        check = _need(act.check)
        suite = self._app_suite(repo, check)
        found: list[Rendered] = []
        for action in act.check_actions:
            payload = template("check_run", action)
            moment = now()
            self._fill_check_run(
                payload["check_run"], repo, suite, ident=check.id, name=check.name,
                status=check.status, conclusion=check.conclusion,
                details_url=check.details_url or self.web(f"/{check.app}/runs/{check.id}"),
                title=check.title, summary=check.summary, started_at=moment,
                completed_at=moment if check.status == "completed" else None)
            found.append(("check_run", payload))
        if "completed" in act.check_actions and suite.status == "completed":
            completed = template("check_suite", "completed")
            self._fill_check_suite(completed["check_suite"], repo, suite)
            found.append(("check_suite", completed))
        return found

    def _app_suite(self, repo: Repo, check: CheckRun) -> Suite:
        """The check suite of `check`: every check run of its App on its commit."""
        app = self.state.apps.get(check.app) or App(
            check.app, zlib.crc32(check.app.encode()) % 10_000_000, check.app, repo.owner)
        runs = [c for c in repo.check_runs if c.app == check.app and c.sha == check.sha]
        pulls, fork = _ci_pulls(self.state, repo, check.sha)
        done = all(c.status == "completed" for c in runs)
        status = "completed" if done else \
            "queued" if all(c.status == "queued" for c in runs) else "in_progress"
        conclusion = next((c for c in CONCLUSION_PRIORITY
                           if any(r.conclusion == c for r in runs)), None) if done else None
        ident = 20_000_000 + zlib.crc32(f"{repo.full_name}:{app.slug}:{check.sha}".encode()) \
            % 10_000_000
        branch = None if fork else \
            next((p.pull.head for p in pulls if p.pull is not None), None) or \
            next((b for b, head in sorted(repo.git.branches().items()) if head == check.sha),
                 None)
        return Suite(ident, check.sha, branch, status, conclusion, app, now(), pulls,
                     len(runs))

    def _status(self, repo: Repo, status: CommitStatus) -> dict[str, Any]:
        """A `status` delivery. tests/data/webhooks/github has no real one: the fields are
        those GitHub's webhook schema requires (`webhook-status`), `repository` and
        `sender` shaped like another delivery's, `commit` like the REST API's commit."""
        shape = template("check_suite", "completed")
        branches = []
        for name, head in sorted(repo.git.branches().items()):
            if head == status.sha or repo.git.merge_base(status.sha, head) == status.sha:
                branches.append({"name": name, "protected": name == repo.default_branch,
                                 "commit": {"sha": head, "url": self.api(
                                     f"/repos/{repo.full_name}/commits/{head}")}})
        return {
            "id": status.id, "sha": status.sha, "name": repo.full_name,
            "target_url": status.target_url, "avatar_url": None, "context": status.name,
            "description": status.description or None,
            "state": GITHUB_STATE.get(status.state, status.state),
            "commit": self._rest_commit(repo, status.sha), "branches": branches[:10],
            "created_at": ts(status.created_at), "updated_at": ts(status.updated_at),
            "repository": shape["repository"], "sender": shape["sender"],
        }

    def _rest_commit(self, repo: Repo, sha: str) -> dict[str, Any]:
        """A commit as the REST API shows it (GET /repos/{o}/{r}/commits/{sha})."""
        commit = repo.git.commit_info(sha)
        api = f"/repos/{repo.full_name}"
        value: dict[str, Any] = {
            "sha": sha, "node_id": node_id("Commit", zlib.crc32(sha.encode())),
            "url": self.api(f"{api}/commits/{sha}"),
            "html_url": self.web(f"/{repo.full_name}/commit/{sha}"),
            "comments_url": self.api(f"{api}/commits/{sha}/comments"),
            "commit": {
                "author": {"name": commit.author_name, "email": commit.author_email,
                           "date": commit.authored_at},
                "committer": {"name": commit.committer_name,
                              "email": commit.committer_email,
                              "date": commit.committed_at},
                "message": commit.message, "comment_count": 0,
                "url": self.api(f"{api}/git/commits/{sha}"),
                "tree": {"sha": repo.git.resolve(f"{sha}^{{tree}}") or "",
                         "url": self.api(f"{api}/git/trees/{sha}")},
                "verification": {"verified": False, "reason": "unsigned", "signature": None,
                                 "payload": None, "verified_at": None}},
            "parents": [{"sha": parent, "url": self.api(f"{api}/commits/{parent}"),
                         "html_url": self.web(f"/{repo.full_name}/commit/{parent}")}
                        for parent in commit.parents]}
        for role, email in (("author", commit.author_email),
                            ("committer", commit.committer_email)):
            user = self.state.user_by_email(email)
            shape = template("check_suite", "completed")["sender"]
            value[role] = self._fill_user(shape, user.login) if user else None
        return value

    # -- objects -------------------------------------------------------------------------
    def _fill_user(self, target: dict[str, Any], login: str) -> dict[str, Any]:
        known = self.state.users.get(login)
        ident = known.id if known else zlib.crc32(login.encode()) % 10_000_000
        kind = "Bot" if known and known.bot else "User"
        old = target.get("login", "")
        for key, value in list(target.items()):
            if key.endswith("_url") and isinstance(value, str) and old:
                target[key] = value.replace(f"/users/{old}", f"/users/{quote(login)}")
        target.update(login=login, id=ident, node_id=node_id(kind, ident),
                      avatar_url=self.web(f"/avatars/u/{ident}"),
                      url=self.api(f"/users/{quote(login)}"),
                      html_url=self.web(f"/apps/{known.app}" if known and known.app
                                        else f"/{login}"),
                      type=kind, site_admin=False)
        if "name" in target:
            target["name"] = known.name if known else login
        if "email" in target:
            target["email"] = known.email if known else None
        return target

    def _fill_repo(self, target: dict[str, Any], repo: Repo) -> dict[str, Any]:
        old = target.get("full_name", "")
        for key, value in list(target.items()):
            if isinstance(value, str) and old and f"/{old}" in value:
                target[key] = value.replace(f"/repos/{old}", f"/repos/{repo.full_name}") \
                    .replace(f"github.com/{old}", f"github.com/{repo.full_name}")
        target.update(id=repo.id, node_id=node_id("Repository", repo.id), name=repo.name,
                      full_name=repo.full_name, private=True,
                      url=self.api(f"/repos/{repo.full_name}"),
                      html_url=self.web(f"/{repo.full_name}"),
                      fork=repo.fork_of is not None)
        if isinstance(target.get("owner"), dict):
            self._fill_user(target["owner"], repo.owner)
        optional = {"clone_url": repo.git.url, "git_url": repo.git.url,
                    "ssh_url": repo.git.url, "svn_url": self.web(f"/{repo.full_name}"),
                    "default_branch": repo.default_branch, "master_branch": repo.default_branch,
                    "visibility": "private", "archived": False, "disabled": False,
                    "open_issues_count": sum(i.state == "open" for i in repo.issues.values())}
        for key, value in optional.items():
            if key in target:
                target[key] = value
        for key in ("created_at", "updated_at", "pushed_at"):
            if key in target:  # push payloads keep epoch seconds here, the others ISO 8601
                target[key] = int(repo.created_at.timestamp()) \
                    if isinstance(target[key], int) else ts(repo.created_at)
        if "has_issues" in target:  # a full repository: fields older examples lack
            target.setdefault("has_discussions", False)
            target.setdefault("topics", [])
            target.setdefault("visibility", "private")
        return target

    def _label(self, repo: Repo, name: str) -> dict[str, Any]:
        value: dict[str, Any] = copy.deepcopy(_example(TEMPLATES[("issues", "labeled")])["label"])
        ident = zlib.crc32(f"{repo.full_name}:{name}".encode())
        value.update(id=ident, node_id=node_id("Label", ident), name=name, default=False,
                     url=self.api(f"/repos/{repo.full_name}/labels/{quote(name)}"),
                     description="", color="ededed")
        return value

    def _association(self, repo: Repo, login: str) -> str:
        if login == repo.owner:
            return "OWNER"
        return "COLLABORATOR" if login in repo.members else "CONTRIBUTOR"

    def _fill_issue(self, target: dict[str, Any], repo: Repo, issue: Issue) -> dict[str, Any]:
        base = f"/repos/{repo.full_name}/issues/{issue.number}"
        kind = "pull" if issue.pull else "issues"
        target.update(
            url=self.api(base), repository_url=self.api(f"/repos/{repo.full_name}"),
            labels_url=self.api(f"{base}/labels{{/name}}"),
            comments_url=self.api(f"{base}/comments"), events_url=self.api(f"{base}/events"),
            html_url=self.web(f"/{repo.full_name}/{kind}/{issue.number}"), id=issue.id,
            node_id=node_id("Issue", issue.id), number=issue.number, title=issue.title,
            body=issue.body, labels=[self._label(repo, n) for n in issue.labels],
            state=issue.state, locked=False, assignee=None, assignees=[], milestone=None,
            comments=len(issue.comments), created_at=ts(issue.created_at),
            updated_at=ts(issue.updated_at), closed_at=None,
            author_association=self._association(repo, issue.author),
            active_lock_reason=None)
        self._fill_user(target["user"], issue.author)
        if issue.pull is not None:
            pull = f"/{repo.full_name}/pull/{issue.number}"
            target["pull_request"] = {
                "url": self.api(f"/repos/{repo.full_name}/pulls/{issue.number}"),
                "html_url": self.web(pull), "diff_url": self.web(f"{pull}.diff"),
                "patch_url": self.web(f"{pull}.patch"), "merged_at": None}
        else:
            target.pop("pull_request", None)
        return target

    def _app(self, app: App) -> dict[str, Any]:
        example = _example(TEMPLATES[("check_run", "completed")])
        value: dict[str, Any] = copy.deepcopy(example["check_run"]["app"])
        value.update(id=app.id, slug=app.slug, node_id=node_id("App", app.id), name=app.name,
                     html_url=self.web(f"/apps/{app.slug}"), external_url=self.web(
                         f"/apps/{app.slug}"))
        self._fill_user(value["owner"], app.owner)
        return value

    def _performed_via(self, login: str) -> dict[str, Any] | None:
        known = self.state.users.get(login)
        app = self.state.apps.get(known.app) if known and known.app else None
        return self._app(app) if app else None

    def _fill_comment(self, target: dict[str, Any], repo: Repo, issue: Issue,
                      comment: Comment) -> dict[str, Any]:
        kind = "pull" if issue.pull else "issues"
        target.update(
            url=self.api(f"/repos/{repo.full_name}/issues/comments/{comment.id}"),
            html_url=self.web(f"/{repo.full_name}/{kind}/{issue.number}"
                              f"#issuecomment-{comment.id}"),
            issue_url=self.api(f"/repos/{repo.full_name}/issues/{issue.number}"),
            id=comment.id, node_id=node_id("IssueComment", comment.id), body=comment.body,
            created_at=ts(comment.created_at), updated_at=ts(comment.updated_at),
            author_association=self._association(repo, comment.author),
            performed_via_github_app=self._performed_via(comment.author))
        self._fill_user(target["user"], comment.author)
        return target

    def _fill_ref(self, target: dict[str, Any], repo: Repo | None, branch: str,
                  sha: str) -> dict[str, Any]:
        owner = repo.owner if repo else "ghost"
        target.update(label=f"{owner}:{branch}", ref=branch, sha=sha)
        self._fill_user(target["user"], owner)
        if repo is None:
            target["repo"] = None  # a fork deleted since
        elif isinstance(target.get("repo"), dict):
            self._fill_repo(target["repo"], repo)
        return target

    def _fill_pull(self, target: dict[str, Any], repo: Repo, issue: Issue) -> dict[str, Any]:
        pull = issue.pull
        assert pull is not None
        base = f"/repos/{repo.full_name}/pulls/{issue.number}"
        issue_api = f"/repos/{repo.full_name}/issues/{issue.number}"
        web = f"/{repo.full_name}/pull/{issue.number}"
        head_sha = repo.head_sha(issue)
        target.update(
            url=self.api(base), id=issue.id, node_id=node_id("PullRequest", issue.id),
            html_url=self.web(web), diff_url=self.web(f"{web}.diff"),
            patch_url=self.web(f"{web}.patch"), issue_url=self.api(issue_api),
            number=issue.number, state="closed" if issue.state == "closed" else "open",
            locked=False, title=issue.title, body=issue.body,
            created_at=ts(issue.created_at), updated_at=ts(issue.updated_at),
            closed_at=ts(issue.updated_at) if issue.state == "closed" else None,
            merged_at=ts(issue.updated_at) if pull.merged else None,
            merge_commit_sha=None, assignee=None, assignees=[], requested_reviewers=[],
            requested_teams=[], labels=[self._label(repo, n) for n in issue.labels],
            milestone=None, commits_url=self.api(f"{base}/commits"),
            review_comments_url=self.api(f"{base}/comments"),
            review_comment_url=self.api(f"/repos/{repo.full_name}/pulls/comments{{/number}}"),
            comments_url=self.api(f"{issue_api}/comments"),
            statuses_url=self.api(f"/repos/{repo.full_name}/statuses/{head_sha}"),
            author_association=self._association(repo, issue.author), draft=pull.draft)
        self._fill_user(target["user"], issue.author)
        head_repo = repo if pull.head_repo is None else self.state.repos.get(pull.head_repo)
        self._fill_ref(target["head"], head_repo, pull.head, head_sha)
        self._fill_ref(target["base"], repo, pull.base, repo.git.resolve(pull.base) or "")
        links = {"self": base, "issue": issue_api, "comments": f"{issue_api}/comments",
                 "review_comments": f"{base}/comments",
                 "review_comment": f"/repos/{repo.full_name}/pulls/comments{{/number}}",
                 "commits": f"{base}/commits",
                 "statuses": f"/repos/{repo.full_name}/statuses/{head_sha}"}
        target["_links"] = {k: {"href": self.api(v)} for k, v in links.items()}
        target["_links"]["html"] = {"href": self.web(web)}
        optional: dict[str, Any] = {
            "merged": pull.merged, "comments": len(issue.comments),
            "review_comments": sum(len(t.comments) for t in pull.threads),
            "maintainer_can_modify": False, "mergeable": None, "rebaseable": None,
            "mergeable_state": "unknown", "merged_by": None}
        for key, value in optional.items():
            if key in target:
                target[key] = value
        return target

    def _fill_review(self, target: dict[str, Any], repo: Repo, issue: Issue,
                     review: Review) -> dict[str, Any]:
        pull_api = self.api(f"/repos/{repo.full_name}/pulls/{issue.number}")
        html = self.web(f"/{repo.full_name}/pull/{issue.number}#pullrequestreview-{review.id}")
        target.update(id=review.id, node_id=node_id("PullRequestReview", review.id),
                      body=review.body or None, commit_id=review.commit_id,
                      submitted_at=ts(review.submitted_at), state=review.state,
                      html_url=html, pull_request_url=pull_api,
                      author_association=self._association(repo, review.author))
        target["_links"] = {"html": {"href": html}, "pull_request": {"href": pull_api}}
        self._fill_user(target["user"], review.author)
        return target

    def _fill_review_comment(self, target: dict[str, Any], repo: Repo, issue: Issue,
                             thread: ReviewThread, comment: ReviewComment,
                             review_id: int) -> dict[str, Any]:
        api = self.api(f"/repos/{repo.full_name}/pulls/comments/{comment.id}")
        web = self.web(f"/{repo.full_name}/pull/{issue.number}#discussion_r{comment.id}")
        pull_api = self.api(f"/repos/{repo.full_name}/pulls/{issue.number}")
        target.update(
            url=api, pull_request_review_id=review_id, id=comment.id,
            node_id=node_id("PullRequestReviewComment", comment.id),
            diff_hunk=f"@@ -{thread.line} +{thread.line} @@", path=thread.path, position=1,
            original_position=1, commit_id=comment.commit_id,
            original_commit_id=thread.root.commit_id, body=comment.body,
            created_at=ts(comment.created_at), updated_at=ts(comment.created_at),
            html_url=web, pull_request_url=pull_api,
            author_association=self._association(repo, comment.author), start_line=None,
            original_start_line=None, start_side=None, line=thread.line,
            original_line=thread.line, side="RIGHT")
        target["_links"] = {"self": {"href": api}, "html": {"href": web},
                            "pull_request": {"href": pull_api}}
        if comment is thread.root:
            target.pop("in_reply_to_id", None)
        else:
            target["in_reply_to_id"] = thread.root.id
        self._fill_user(target["user"], comment.author)
        return target

    # -- CI ------------------------------------------------------------------------------
    def _pull_refs(self, repo: Repo, pulls: list[Issue]) -> list[dict[str, Any]]:
        """The minimal pull requests check suites and workflow runs list."""
        def side(branch: str, sha: str) -> dict[str, Any]:
            return {"ref": branch, "sha": sha, "repo": {
                "id": repo.id, "url": self.api(f"/repos/{repo.full_name}"), "name": repo.name}}

        found = []
        for pull in pulls:
            assert pull.pull is not None
            found.append({
                "url": self.api(f"/repos/{repo.full_name}/pulls/{pull.number}"),
                "id": pull.id, "number": pull.number,
                "head": side(pull.pull.head, repo.head_sha(pull)),
                "base": side(pull.pull.base, repo.git.resolve(pull.pull.base) or "")})
        return found

    def _fill_suite(self, target: dict[str, Any], repo: Repo, suite: Suite) -> None:
        parent = repo.git.commit_info(suite.sha).parents
        target.update(
            id=suite.id, node_id=node_id("CheckSuite", suite.id), head_branch=suite.branch,
            head_sha=suite.sha, status=suite.status, conclusion=suite.conclusion,
            before=parent[0] if parent else "0" * 40, after=suite.sha,
            url=self.api(f"/repos/{repo.full_name}/check-suites/{suite.id}"),
            pull_requests=self._pull_refs(repo, suite.pulls), app=self._app(suite.app),
            created_at=ts(suite.created_at), updated_at=ts(suite.created_at))

    def _fill_check_run(self, target: dict[str, Any], repo: Repo, suite: Suite, *,
                        ident: int, name: str, status: str, conclusion: str | None,
                        details_url: str, title: str, summary: str, started_at: datetime,
                        completed_at: datetime | None) -> None:
        api = f"/repos/{repo.full_name}/check-runs/{ident}"
        target.update(
            id=ident, node_id=node_id("CheckRun", ident), head_sha=suite.sha,
            external_id=str(ident), url=self.api(api),
            html_url=self.web(f"/{repo.full_name}/runs/{ident}"), details_url=details_url,
            status=status, conclusion=conclusion, name=name, started_at=ts(started_at),
            completed_at=ts(completed_at) if completed_at else None,
            app=self._app(suite.app), pull_requests=self._pull_refs(repo, suite.pulls))
        target["output"].update(title=title, summary=summary, text=None,
                                annotations_count=0, annotations_url=self.api(
                                    f"{api}/annotations"))
        self._fill_suite(target["check_suite"], repo, suite)

    def _fill_check_suite(self, target: dict[str, Any], repo: Repo, suite: Suite) -> None:
        self._fill_suite(target, repo, suite)
        target.update(latest_check_runs_count=suite.runs, check_runs_url=self.api(
            f"/repos/{repo.full_name}/check-suites/{suite.id}/check-runs"))
        commit = repo.git.commit_info(suite.sha)
        target["head_commit"].update(
            id=commit.sha, tree_id=repo.git.resolve(f"{suite.sha}^{{tree}}") or "",
            message=commit.message, timestamp=commit.committed_at,
            author={"name": commit.author_name, "email": commit.author_email},
            committer={"name": commit.committer_name, "email": commit.committer_email})

    def _fill_workflow_job(self, target: dict[str, Any], repo: Repo, run: CiRun,
                           job: CiJob) -> None:
        api = f"/repos/{repo.full_name}"
        target.update(
            id=job.id, run_id=run.id, run_url=self.api(f"{api}/actions/runs/{run.id}"),
            run_attempt=1, node_id=node_id("WorkflowJob", job.id), head_sha=run.sha,
            head_branch=run.branch, url=self.api(f"{api}/actions/jobs/{job.id}"),
            html_url=self.web(f"/{repo.full_name}/actions/runs/{run.id}/job/{job.id}"),
            status="completed", conclusion=job.conclusion, name=job.name,
            started_at=ts(run.created_at), completed_at=ts(run.created_at),
            created_at=ts(run.created_at), workflow_name=run.name,
            check_run_url=self.api(f"{api}/check-runs/{job.id}"))
        target["steps"] = [{"name": job.name, "status": "completed",
                            "conclusion": job.conclusion, "number": 1,
                            "started_at": ts(run.created_at),
                            "completed_at": ts(run.created_at)}]

    def _fill_workflow_run(self, payload: dict[str, Any], repo: Repo, run: CiRun,
                           pulls: list[Issue], fork: Repo | None, suite_id: int,
                           actor: str) -> None:
        target = payload["workflow_run"]
        api = f"/repos/{repo.full_name}/actions/runs/{run.id}"
        workflow_id = zlib.crc32(f"{repo.full_name}:{run.name}".encode()) % 10_000_000
        commit = repo.git.commit_info(run.sha)
        target.update(
            name=run.name, id=run.id, node_id=node_id("WorkflowRun", run.id),
            head_branch=run.branch, head_sha=run.sha, display_title=commit.title,
            run_number=run.number, run_attempt=1,
            event="pull_request" if pulls or fork else "push", status="completed",
            conclusion=run.conclusion, workflow_id=workflow_id, check_suite_id=suite_id,
            check_suite_node_id=node_id("CheckSuite", suite_id),
            check_suite_url=self.api(f"/repos/{repo.full_name}/check-suites/{suite_id}"),
            url=self.api(api), html_url=self.web(f"/{repo.full_name}/actions/runs/{run.id}"),
            jobs_url=self.api(f"{api}/jobs"), logs_url=self.api(f"{api}/logs"),
            artifacts_url=self.api(f"{api}/artifacts"), cancel_url=self.api(f"{api}/cancel"),
            rerun_url=self.api(f"{api}/rerun"), previous_attempt_url=None,
            workflow_url=self.api(f"/repos/{repo.full_name}/actions/workflows/{workflow_id}"),
            pull_requests=self._pull_refs(repo, pulls), created_at=ts(run.created_at),
            updated_at=ts(run.created_at), run_started_at=ts(run.created_at),
            path=".github/workflows/ci.yml")
        target["head_commit"].update(
            id=commit.sha, tree_id=repo.git.resolve(f"{run.sha}^{{tree}}") or "",
            message=commit.message, timestamp=commit.committed_at,
            author={"name": commit.author_name, "email": commit.author_email},
            committer={"name": commit.committer_name, "email": commit.committer_email})
        self._fill_repo(target["repository"], repo)
        self._fill_repo(target["head_repository"], fork or repo)
        for who in ("actor", "triggering_actor"):  # whoever pushed the commit
            if isinstance(target.get(who), dict):
                self._fill_user(target[who], actor)
        payload["workflow"].update(
            id=workflow_id, name=run.name, node_id=node_id("Workflow", workflow_id),
            path=".github/workflows/ci.yml",
            url=self.api(f"/repos/{repo.full_name}/actions/workflows/{workflow_id}"),
            html_url=self.web(f"/{repo.full_name}/blob/{repo.default_branch}"
                              "/.github/workflows/ci.yml"),
            badge_url=self.web(f"/{repo.full_name}/workflows/{quote(run.name)}/badge.svg"))


@dataclass(frozen=True)
class Suite:
    """A check suite: the check runs of one App on one commit."""

    id: int
    sha: str
    branch: str | None  # None for a fork's commits (the Checks API looks in the repo only)
    status: str
    conclusion: str | None
    app: App
    created_at: datetime
    pulls: list[Issue]
    runs: int  # latest_check_runs_count


def _need(value: Any) -> Any:
    assert value is not None, "an act lacks what its kind needs"
    return value


def _pulls_of_branch(state: State, repo: Repo, branch: str) -> list[tuple[Repo, Issue]]:
    """Open pull requests whose head is `branch` of `repo`, in `repo` or (forks) elsewhere."""
    found = []
    for base in state.repos.values():
        for pull in base.pulls():
            data = pull.pull
            assert data is not None
            head_repo = data.head_repo or base.full_name
            if pull.state == "open" and data.head == branch and head_repo == repo.full_name:
                found.append((base, pull))
    return found


def _ci_pulls(state: State, repo: Repo, sha: str) -> tuple[list[Issue], Repo | None]:
    """The same-repository open PRs whose head is `sha` (what `pull_requests` lists), and
    the fork whose PR it ran for (GitHub then lists no PR at all)."""
    same, fork = [], None
    for pull in repo.pulls():
        data = pull.pull
        assert data is not None
        if pull.state != "open" or repo.head_sha(pull) != sha:
            continue
        if data.head_repo is None:
            same.append(pull)
        else:
            fork = state.repos.get(data.head_repo)
    return ([] if fork else same), fork
