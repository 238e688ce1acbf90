"""GitLab webhook payloads for the fake's acts, field for field as GitLab's "Webhook events"
page shows them (tests/data/webhooks/gitlab/*.json hold those examples; each payload starts
from one and gets the fake's state written into it, keeping each field's format).

Which hooks an act makes (README.md, "Webhooks", cites the docs for each):
  issue-opened    one Issue Hook, action open, labels already on it
  labeled         Issue Hook / Merge Request Hook, action update, changes.labels
  comment         Note Hook (action create);  comment-edited: Note Hook (action update)
  review          a Note Hook (DiffNote) per diff comment, one for the summary (if any);
                  an approval is a Merge Request Hook, action approved
  review-reply    Note Hook (DiffNote, in the discussion)
  pull-opened     Merge Request Hook, action open;  pull-edited: action update, changes
  pull-closed     Merge Request Hook, action close
  push            Push Hook + Merge Request Hook (action update, oldrev) per open MR
  thread-resolved nothing (no webhook event for resolving a discussion)
  ci-failed       Pipeline Hook (status failed; merge_request when an MR is open) +
                  a Job Hook per job
  progress        a commit status that changed the status of its commit's external
                  pipeline (one made for it where the commit had no pipeline): Pipeline
                  Hook, source external; a check run (GitHub's only), a status that joined
                  a CI pipeline, or one that left it as it was: nothing
"""

from __future__ import annotations

import copy
import functools
import json
import zlib
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from .acts import FINISHED, GITLAB_STATE, Act
from .model import (
    CiJob,
    CiRun,
    Comment,
    CommitStatus,
    Issue,
    Repo,
    ReviewComment,
    ReviewThread,
    State,
)

EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "webhooks" / "gitlab"
GITLAB_VERSION = "17.5.0"

Rendered = tuple[str, dict[str, Any]]  # (X-Gitlab-Event, payload)


@functools.cache
def _example(name: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads((EXAMPLES / name).read_text(encoding="utf-8"))
    return value


def template(name: str) -> dict[str, Any]:
    return copy.deepcopy(_example(name))


def _time(like: Any, moment: datetime | str) -> str:
    """`moment` in the format the example used for this field."""
    if isinstance(moment, str):  # git's ISO 8601
        return moment
    if isinstance(like, str) and like.endswith(" UTC"):
        return moment.strftime("%Y-%m-%d %H:%M:%S UTC")
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _stamp(target: dict[str, Any], **moments: datetime | str) -> None:
    for key, moment in moments.items():
        target[key] = _time(target.get(key), moment)


class GitLabHooks:
    """Renders acts as GitLab hooks, every URL pointing at the fake's GitLab (`web_root`)."""

    def __init__(self, state: State, web_root: str) -> None:
        self.state = state
        self.web_root = web_root  # .../gitlab

    def web(self, repo: Repo, path: str = "") -> str:
        return f"{self.web_root}/{repo.full_name}{path}"

    # -- acts ----------------------------------------------------------------------------
    def render(self, act: Act) -> list[Rendered]:
        repo = self.state.repos[act.repo]
        render: dict[str, Callable[[Act, Repo], list[Rendered]]] = {
            "issue-opened": self._issue_opened, "labeled": self._labeled,
            "comment": self._comment, "comment-edited": self._comment,
            "review": self._review, "review-reply": self._review_reply,
            "pull-opened": self._pull_opened, "pull-edited": self._pull_edited,
            "pull-closed": self._pull_closed, "push": self._push, "ci-failed": self._ci_failed,
            "thread-resolved": lambda act, repo: [],  # GitLab has no hook for it
            "progress": self._progress,
        }
        return render[act.kind](act, repo)

    def _issue_opened(self, act: Act, repo: Repo) -> list[Rendered]:
        issue = _need(act.issue)
        payload = self._issue_hook(repo, issue, act.actor, "open")
        payload["changes"] = {}
        return [("Issue Hook", payload)]

    def _labeled(self, act: Act, repo: Repo) -> list[Rendered]:
        issue = _need(act.issue)
        change = {"labels": {"previous": [self._label(repo, n) for n in act.previous_labels],
                             "current": [self._label(repo, n) for n in issue.labels]}}
        if issue.pull is not None:
            payload = self._mr_hook(repo, issue, act.actor, "update")
            payload["changes"] = change
            return [("Merge Request Hook", payload)]
        payload = self._issue_hook(repo, issue, act.actor, "update")
        payload["changes"] = change
        return [("Issue Hook", payload)]

    def _comment(self, act: Act, repo: Repo) -> list[Rendered]:
        issue, comment = _need(act.issue), _need(act.comment)
        action = "update" if act.kind == "comment-edited" else "create"
        return [("Note Hook", self._note_hook(repo, issue, comment, act.actor, action))]

    def _review(self, act: Act, repo: Repo) -> list[Rendered]:
        issue, review = _need(act.issue), _need(act.review)
        found = [("Note Hook", self._note_hook(repo, issue, comment, act.actor, "create",
                                               thread=thread))
                 for thread, comment in act.review_comments]
        if review.body:  # the review's summary: a plain note (gitlab_api.summary_notes)
            summary = Comment(review.id, review.author, review.body,
                              created_at=review.submitted_at, updated_at=review.submitted_at)
            found.append(("Note Hook", self._note_hook(repo, issue, summary, act.actor,
                                                       "create")))
        if review.state == "approved":
            found.append(("Merge Request Hook",
                          {**self._mr_hook(repo, issue, act.actor, "approved"), "changes": {}}))
        return found

    def _review_reply(self, act: Act, repo: Repo) -> list[Rendered]:
        issue = _need(act.issue)
        thread, comment = act.review_comments[0]
        return [("Note Hook", self._note_hook(repo, issue, comment, act.actor, "create",
                                              thread=thread))]

    def _pull_opened(self, act: Act, repo: Repo) -> list[Rendered]:
        payload = self._mr_hook(repo, _need(act.issue), act.actor, "open")
        payload["changes"] = {}
        return [("Merge Request Hook", payload)]

    def _pull_closed(self, act: Act, repo: Repo) -> list[Rendered]:
        payload = self._mr_hook(repo, _need(act.issue), act.actor, "close")
        payload["changes"] = {}
        return [("Merge Request Hook", payload)]

    def _pull_edited(self, act: Act, repo: Repo) -> list[Rendered]:
        issue = _need(act.issue)
        payload = self._mr_hook(repo, issue, act.actor, "update")
        current = {"title": issue.title, "body": issue.body}
        payload["changes"] = {("description" if name == "body" else name):
                              {"previous": old, "current": current.get(name)}
                              for name, old in act.changes.items()}
        return [("Merge Request Hook", payload)]

    def _push(self, act: Act, repo: Repo) -> list[Rendered]:
        payload = template("push_hook.json")
        user = self._user(act.actor)
        commits = repo.git.between(act.before, act.after) \
            if act.before.strip("0") and repo.git.resolve(act.before) else \
            repo.git.log(act.after, "-1")
        payload.update(
            before=act.before, after=act.after, ref=act.ref,
            ref_protected=act.ref == f"refs/heads/{repo.default_branch}",
            checkout_sha=act.after, user_id=user["id"], user_name=user["name"],
            user_username=user["username"], user_email=user["email"],
            user_avatar=user["avatar_url"], project_id=repo.id,
            project=self._project(repo), repository=self._repository(repo),
            commits=[self._commit(repo, c.sha) for c in commits[-20:]],
            total_commits_count=len(commits))
        found: list[Rendered] = [("Push Hook", payload)]
        branch = act.ref.removeprefix("refs/heads/")
        for base in self.state.repos.values():
            for pull in base.pulls():
                data = pull.pull
                assert data is not None
                if pull.state == "open" and data.head == branch and \
                        (data.head_repo or base.full_name) == repo.full_name:
                    update = self._mr_hook(base, pull, act.actor, "update")
                    update["object_attributes"]["oldrev"] = act.before
                    update["changes"] = {}
                    found.append(("Merge Request Hook", update))
        return found

    def _ci_failed(self, act: Act, repo: Repo) -> list[Rendered]:
        run = _need(act.run)
        pipeline = template("pipeline_hook.json")
        attributes = pipeline["object_attributes"]
        merge_request = next((p for p in repo.pulls() if p.state == "open"
                              and repo.head_sha(p) == run.sha), None)
        commit = repo.git.commit_info(run.sha)
        attributes.update(
            id=run.id, iid=run.number, name=run.name, ref=run.branch, tag=False, sha=run.sha,
            before_sha=commit.parents[0] if commit.parents else "0" * 40,
            source="merge_request_event" if merge_request else "push", status="failed",
            detailed_status="failed", stages=sorted({j.stage for j in run.jobs}),
            duration=60, queued_duration=1, variables=[],
            url=self.web(repo, f"/-/pipelines/{run.id}"))
        _stamp(attributes, created_at=run.created_at, finished_at=run.created_at)
        pipeline["merge_request"] = self._pipeline_mr(repo, merge_request) \
            if merge_request else None
        pipeline.update(user=self._user(act.actor), project=self._project(repo),
                        commit=self._commit(repo, run.sha, short=True),
                        builds=[self._build(repo, run, job, act.actor) for job in run.jobs])
        found: list[Rendered] = [("Pipeline Hook", pipeline)]
        found += [("Job Hook", self._job_hook(repo, run, job, act.actor)) for job in run.jobs]
        return found

    def _progress(self, act: Act, repo: Repo) -> list[Rendered]:
        """A Pipeline Hook for a change of an external pipeline's status (acts.py,
        announce_status); nothing else a progress report does has a hook."""
        if act.pipeline is None:
            return []
        pipeline = act.pipeline
        statuses = [s for s in repo.statuses if s.id in pipeline.status_ids]
        payload = template("pipeline_hook.json")
        attributes = payload["object_attributes"]
        merge_request = next((p for p in repo.pulls() if p.state == "open"
                              and repo.head_sha(p) == pipeline.sha), None)
        commit = repo.git.commit_info(pipeline.sha)
        finished = pipeline.status in FINISHED
        attributes.update(
            id=pipeline.id, iid=pipeline.iid, name=None, ref=pipeline.ref, tag=False,
            sha=pipeline.sha, before_sha="0" * 40, source="external",
            status=pipeline.status, detailed_status=pipeline.status, stages=["external"],
            duration=int((pipeline.updated_at - pipeline.created_at).total_seconds())
            if finished else None, queued_duration=None, variables=[],
            url=self.web(repo, f"/-/pipelines/{pipeline.id}"))
        _stamp(attributes, created_at=pipeline.created_at)
        if finished:
            _stamp(attributes, finished_at=pipeline.updated_at)
        else:
            attributes["finished_at"] = None
        payload["merge_request"] = self._pipeline_mr(repo, merge_request) \
            if merge_request else None
        payload.update(user=self._user(pipeline.user), project=self._project(repo),
                       commit=self._commit(repo, commit.sha, short=True),
                       source_pipeline=None,
                       builds=[self._external_build(s) for s in _latest(statuses)])
        return [("Pipeline Hook", payload)]

    def _external_build(self, status: CommitStatus) -> dict[str, Any]:
        """A commit status as a job of its external pipeline (stage `external`)."""
        value: dict[str, Any] = template("pipeline_hook.json")["builds"][1]
        state = GITLAB_STATE.get(status.state, status.state)
        value.update(id=status.id, stage="external", name=status.name, status=state,
                     duration=None, queued_duration=None,
                     failure_reason=None, when="on_success", manual=False,
                     allow_failure=False, user=self._user(status.creator), runner=None,
                     environment=None)
        _stamp(value, created_at=status.created_at, started_at=status.created_at)
        if state in FINISHED:
            _stamp(value, finished_at=status.updated_at)
        else:
            value["finished_at"] = None
        return value

    # -- objects -------------------------------------------------------------------------
    def _user(self, login: str) -> dict[str, Any]:
        known = self.state.users.get(login)
        ident = known.id if known else zlib.crc32(login.encode()) % 10_000_000
        return {"id": ident, "name": known.name if known else login, "username": login,
                "avatar_url": f"{self.web_root}/uploads/-/system/user/avatar/{ident}/avatar.png",
                "email": known.email if known else "[REDACTED]"}

    def _project(self, repo: Repo) -> dict[str, Any]:
        value: dict[str, Any] = template("issue_hook.json")["project"]
        web = self.web(repo)
        value.update(id=repo.id, name=repo.name, description="", web_url=web,
                     avatar_url=None, git_ssh_url=repo.git.url, git_http_url=repo.git.url,
                     namespace=repo.owner, visibility_level=0,
                     path_with_namespace=repo.full_name, default_branch=repo.default_branch,
                     ci_config_path=None, homepage=web, url=repo.git.url,
                     ssh_url=repo.git.url, http_url=repo.git.url)
        return value

    def _repository(self, repo: Repo) -> dict[str, Any]:
        return {"name": repo.name, "url": repo.git.url, "description": "",
                "homepage": self.web(repo)}

    def _label(self, repo: Repo, name: str) -> dict[str, Any]:
        value: dict[str, Any] = copy.deepcopy(template("issue_hook.json")["labels"][0])
        ident = zlib.crc32(f"{repo.full_name}:{name}".encode()) % 10_000_000
        value.update(id=ident, title=name, color="#ededed", project_id=repo.id,
                     description="", type="ProjectLabel", group_id=None)
        _stamp(value, created_at=repo.created_at, updated_at=repo.created_at)
        return value

    def _commit(self, repo: Repo, sha: str, *, short: bool = False) -> dict[str, Any]:
        commit = repo.git.commit_info(sha)
        value: dict[str, Any] = {
            "id": commit.sha, "message": commit.message + "\n", "title": commit.title,
            "timestamp": commit.committed_at,
            "url": self.web(repo, f"/-/commit/{commit.sha}"),
            "author": {"name": commit.author_name, "email": commit.author_email}}
        if not short:
            value.update(added=[], modified=[], removed=[])
        return value

    def _issue_attributes(self, target: dict[str, Any], repo: Repo, issue: Issue) -> None:
        author = self.state.users.get(issue.author)
        target.update(
            id=issue.id, iid=issue.number, title=issue.title, description=issue.body,
            author_id=author.id if author else 0, project_id=repo.id,
            assignee_ids=[], assignee_id=None, updated_by_id=None, milestone_id=None,
            state="opened" if issue.state == "open" else "closed",
            labels=[self._label(repo, n) for n in issue.labels],
            url=self.web(repo, f"/-/issues/{issue.number}"))
        _stamp(target, created_at=issue.created_at, updated_at=issue.updated_at)

    def _issue_hook(self, repo: Repo, issue: Issue, actor: str, action: str,
                    ) -> dict[str, Any]:
        payload = template("issue_hook.json")
        attributes = payload["object_attributes"]
        self._issue_attributes(attributes, repo, issue)
        attributes.update(action=action, type="Issue", escalation_status=None,
                          escalation_policy=None, severity="unknown", health_status=None,
                          discussion_locked=None)
        payload.update(user=self._user(actor), project=self._project(repo),
                       repository=self._repository(repo),
                       labels=[self._label(repo, n) for n in issue.labels])
        for key in ("assignee", "assignees"):  # GitLab sends them for assigned issues only
            payload.pop(key, None)
        return payload

    def _mr_attributes(self, target: dict[str, Any], repo: Repo, issue: Issue) -> None:
        pull = issue.pull
        assert pull is not None
        author = self.state.users.get(issue.author)
        source = self.state.repos.get(pull.head_repo) if pull.head_repo else repo
        head = repo.head_sha(issue)
        state = "merged" if pull.merged else ("opened" if issue.state == "open" else "closed")
        target.update(
            id=issue.id, iid=issue.number, target_branch=pull.base, source_branch=pull.head,
            source_project_id=source.id if source else 0, target_project_id=repo.id,
            author_id=author.id if author else 0, assignee_id=None, title=issue.title,
            description=issue.body, milestone_id=None, state=state,
            merge_status="can_be_merged", detailed_merge_status="mergeable",
            labels=[self._label(repo, n) for n in issue.labels], draft=pull.draft,
            work_in_progress=pull.draft,
            url=self.web(repo, f"/-/merge_requests/{issue.number}"))
        _stamp(target, created_at=issue.created_at, updated_at=issue.updated_at)
        if head.strip("0"):
            commit = repo.git.commit_info(head)  # a fork's too: refs/pull/<n>/head has it
            target["last_commit"] = {
                "id": commit.sha, "message": commit.message + "\n", "title": commit.title,
                "timestamp": commit.committed_at,
                "url": self.web(repo, f"/-/commit/{commit.sha}"),
                "author": {"name": commit.author_name, "email": commit.author_email}}
        if "source" in target:
            target["source"] = self._project(source or repo)
        if "target" in target:
            target["target"] = self._project(repo)

    def _mr_hook(self, repo: Repo, issue: Issue, actor: str, action: str) -> dict[str, Any]:
        payload = template("merge_request_hook.json")
        attributes = payload["object_attributes"]
        self._mr_attributes(attributes, repo, issue)
        attributes["action"] = action
        payload.update(user=self._user(actor), project=self._project(repo),
                       repository=self._repository(repo),
                       labels=[self._label(repo, n) for n in issue.labels])
        return payload

    def _note_hook(self, repo: Repo, issue: Issue, note: Comment | ReviewComment, actor: str,
                   action: str, *, thread: ReviewThread | None = None) -> dict[str, Any]:
        on_mr = issue.pull is not None
        payload = template("note_hook_merge_request.json" if on_mr else "note_hook_issue.json")
        attributes = payload["object_attributes"]
        author = self.state.users.get(note.author)
        anchor = f"/-/merge_requests/{issue.number}" if on_mr else f"/-/issues/{issue.number}"
        attributes.update(
            id=note.id, note=note.body, noteable_type="MergeRequest" if on_mr else "Issue",
            author_id=author.id if author else 0, project_id=repo.id, attachment=None,
            line_code=None, commit_id="", noteable_id=issue.id, system=False, st_diff=None,
            url=self.web(repo, f"{anchor}#note_{note.id}"), action=action)
        _stamp(attributes, created_at=note.created_at,
               updated_at=getattr(note, "updated_at", note.created_at))
        if thread is not None:
            base = repo.git.resolve(issue.pull.base) if issue.pull else None
            attributes.update(type="DiffNote", discussion_id=thread.discussion_id,
                              position={"base_sha": base, "start_sha": base,
                                        "head_sha": thread.root.commit_id,
                                        "old_path": thread.path, "new_path": thread.path,
                                        "position_type": "text", "old_line": None,
                                        "new_line": thread.line})
        else:
            attributes["type"] = None
            attributes.pop("position", None)
            attributes["discussion_id"] = zlib.crc32(f"note-{note.id}".encode()).to_bytes(
                4, "big").hex() * 10
        payload.update(user=self._user(actor), project_id=repo.id,
                       project=self._project(repo), repository=self._repository(repo))
        if on_mr:
            self._mr_attributes(payload["merge_request"], repo, issue)
            payload["merge_request"].pop("action", None)
        else:
            self._issue_attributes(payload["issue"], repo, issue)
        return payload

    def _pipeline_mr(self, repo: Repo, issue: Issue) -> dict[str, Any]:
        value: dict[str, Any] = template("pipeline_hook.json")["merge_request"]
        pull = issue.pull
        assert pull is not None
        source = self.state.repos.get(pull.head_repo) if pull.head_repo else repo
        value.update(id=issue.id, iid=issue.number, title=issue.title,
                     source_branch=pull.head, source_project_id=(source or repo).id,
                     target_branch=pull.base, target_project_id=repo.id, state="opened",
                     merge_status="can_be_merged", detailed_merge_status="mergeable",
                     url=self.web(repo, f"/-/merge_requests/{issue.number}"))
        return value

    def _build(self, repo: Repo, run: CiRun, job: CiJob, actor: str) -> dict[str, Any]:
        value: dict[str, Any] = template("pipeline_hook.json")["builds"][1]  # the failed `test` job
        value.update(id=job.id, stage=job.stage, name=job.name,
                     status="failed" if job.conclusion == "failure" else "success",
                     duration=60, queued_duration=1,
                     failure_reason="script_failure" if job.conclusion == "failure" else None,
                     when="on_success", manual=False, allow_failure=False,
                     user=self._user(actor), runner=None, environment=None)
        _stamp(value, created_at=run.created_at, started_at=run.created_at,
               finished_at=run.created_at)
        return value

    def _job_hook(self, repo: Repo, run: CiRun, job: CiJob, actor: str) -> dict[str, Any]:
        payload = template("job_hook.json")
        commit = repo.git.commit_info(run.sha)
        failed = job.conclusion == "failure"
        payload.update(
            ref=run.branch, tag=False,
            before_sha=commit.parents[0] if commit.parents else "0" * 40, sha=run.sha,
            build_id=job.id, build_name=job.name, build_stage=job.stage,
            build_status="failed" if failed else "success", build_duration=60.0,
            build_queued_duration=1.0, build_allow_failure=False,
            build_failure_reason="script_failure" if failed else "unknown_failure",
            retries_count=0, pipeline_id=run.id, project_id=repo.id,
            project_name=f"{repo.owner} / {repo.name}", user=self._user(actor),
            repository={"name": repo.name, "description": "", "homepage": self.web(repo),
                        "git_ssh_url": repo.git.url, "git_http_url": repo.git.url,
                        "visibility_level": 0},
            project=self._project(repo), runner=None, environment=None)
        _stamp(payload, build_created_at=run.created_at, build_started_at=run.created_at,
               build_finished_at=run.created_at)
        payload["commit"].update(
            id=run.id, name=run.name, sha=run.sha, message=commit.message + "\n",
            author_name=commit.author_name, author_email=commit.author_email,
            author_url=None, status="failed", duration=60)
        _stamp(payload["commit"], started_at=run.created_at, finished_at=run.created_at)
        return payload


def _latest(statuses: list[CommitStatus]) -> list[CommitStatus]:
    """The newest status of each name (a retried job hides the one before)."""
    found: dict[str, CommitStatus] = {}
    for status in statuses:
        found[status.name] = status
    return list(found.values())


def _need(value: Any) -> Any:
    assert value is not None, "an act lacks what its kind needs"
    return value
