"""GitLab JSON objects, field for field as GitLab's REST docs show them.

GitLab publishes no OpenAPI for these endpoints, so the shapes follow the documented
examples ("Issues API", "Notes API", "Merge requests API", "Discussions API", "Emoji
reactions API", "Branches", "Repositories", "Repository files", "Pipelines", "Jobs",
"Group and project members", "Users"). Every URL points back at the fake.
"""

from __future__ import annotations

import base64
import hashlib
import zlib
from datetime import datetime
from typing import Any
from urllib.parse import quote

from .gitstore import GitCommit
from .model import (
    CiJob,
    CiRun,
    Comment,
    CommitStatus,
    Issue,
    Member,
    PullData,
    Reaction,
    Repo,
    ReviewComment,
    ReviewThread,
    State,
)

# GitHub's reaction names (the model's) to GitLab's award emoji names, and back.
EMOJI = {"+1": "thumbsup", "-1": "thumbsdown", "eyes": "eyes", "rocket": "rocket",
         "confused": "confused", "heart": "heart", "hooray": "tada", "laugh": "laughing"}
REACTION = {v: k for k, v in EMOJI.items()}
PIPELINE_STATUS = {"failure": "failed", "success": "success", "cancelled": "canceled",
                   "skipped": "skipped", "created": "created"}


def ts(moment: datetime | str) -> str:
    if isinstance(moment, str):  # git's ISO 8601 with offset, as GitLab passes it on
        return moment
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")


class GitLabRender:
    def __init__(self, state: State, api_root: str, web_root: str) -> None:
        self.state = state
        self.api_root = api_root  # .../gitlab/api/v4
        self.web_root = web_root  # .../gitlab

    def api(self, path: str) -> str:
        return f"{self.api_root}{path}"

    def web(self, repo: Repo, path: str = "") -> str:
        return f"{self.web_root}/{repo.full_name}{path}"

    # -- people and projects -------------------------------------------------------------
    def user(self, login: str) -> dict[str, Any]:
        known = self.state.users.get(login)
        ident = known.id if known else zlib.crc32(login.encode()) % 10_000_000
        return {"id": ident, "username": login, "name": known.name if known else login,
                "public_email": None, "state": "active", "locked": False,
                "avatar_url": f"{self.web_root}/uploads/-/system/user/avatar/{ident}/avatar.png",
                "web_url": f"{self.web_root}/{login}"}

    def member(self, login: str, member: Member) -> dict[str, Any]:
        return {**self.user(login), "access_level": member.access_level,
                "created_at": "2024-01-01T00:00:00.000Z", "created_by": None,
                "expires_at": None, "group_saml_identity": None, "membership_state": "active"}

    def project(self, repo: Repo) -> dict[str, Any]:
        group, name = repo.owner, repo.name
        return {
            "id": repo.id, "description": None, "name": name,
            "name_with_namespace": f"{group} / {name}", "path": name,
            "path_with_namespace": repo.full_name, "created_at": ts(repo.created_at),
            "default_branch": repo.default_branch, "tag_list": [], "topics": [],
            "ssh_url_to_repo": repo.git.url, "http_url_to_repo": repo.git.url,
            "web_url": self.web(repo),
            "readme_url": self.web(repo, f"/-/blob/{repo.default_branch}/README.md"),
            "forks_count": 0, "avatar_url": None, "star_count": 0,
            "last_activity_at": ts(repo.created_at),
            "namespace": {"id": zlib.crc32(group.encode()) % 100_000, "name": group,
                          "path": group, "kind": "group", "full_path": group, "parent_id": None,
                          "avatar_url": None, "web_url": f"{self.web_root}/groups/{group}"},
            "visibility": "private", "archived": False, "empty_repo": False,
            "issues_enabled": True, "merge_requests_enabled": True, "jobs_enabled": True,
            "restrict_user_defined_variables": repo.pipeline_variables_role != "developer",
            "ci_pipeline_variables_minimum_override_role": repo.pipeline_variables_role,
            "open_issues_count": sum(i.state == "open" and not i.pull
                                     for i in repo.issues.values()),
            "_links": {key: self.api(f"/projects/{repo.id}{path}") for key, path in (
                ("self", ""), ("issues", "/issues"), ("merge_requests", "/merge_requests"),
                ("repo_branches", "/repository/branches"), ("labels", "/labels"),
                ("events", "/events"), ("members", "/members"))},
        }

    # -- issues, merge requests, notes ---------------------------------------------------
    def _common(self, repo: Repo, issue: Issue, kind: str, sigil: str) -> dict[str, Any]:
        return {
            "id": issue.id, "iid": issue.number, "project_id": repo.id, "title": issue.title,
            "description": issue.body, "state": "opened" if issue.state == "open" else "closed",
            "created_at": ts(issue.created_at), "updated_at": ts(issue.updated_at),
            "closed_at": None, "closed_by": None, "labels": list(issue.labels),
            "milestone": None, "author": self.user(issue.author), "assignees": [],
            "assignee": None, "user_notes_count": len(issue.comments),
            "upvotes": sum(r.content == "+1" for r in issue.reactions),
            "downvotes": sum(r.content == "-1" for r in issue.reactions),
            "discussion_locked": None,
            "web_url": self.web(repo, f"/-/{kind}/{issue.number}"),
            "references": {"short": f"{sigil}{issue.number}", "relative": f"{sigil}{issue.number}",
                           "full": f"{repo.full_name}{sigil}{issue.number}"},
            "time_stats": {"time_estimate": 0, "total_time_spent": 0,
                           "human_time_estimate": None, "human_total_time_spent": None},
            "task_completion_status": {"count": 0, "completed_count": 0},
        }

    def issue(self, repo: Repo, issue: Issue) -> dict[str, Any]:
        base = f"/projects/{repo.id}/issues/{issue.number}"
        return {**self._common(repo, issue, "issues", "#"), "type": "ISSUE",
                "issue_type": "issue", "confidential": False, "due_date": None,
                "merge_requests_count": 0, "has_tasks": False, "severity": "UNKNOWN",
                "moved_to_id": None, "service_desk_reply_to": None,
                "_links": {"self": self.api(base), "notes": self.api(f"{base}/notes"),
                           "award_emoji": self.api(f"{base}/award_emoji"),
                           "project": self.api(f"/projects/{repo.id}"),
                           "closed_as_duplicate_of": None}}

    def merge_request(self, repo: Repo, issue: Issue) -> dict[str, Any]:
        assert issue.pull is not None
        pull = issue.pull
        state = "merged" if pull.merged else ("opened" if issue.state == "open" else "closed")
        return {**self._common(repo, issue, "merge_requests", "!"), "state": state,
                "merged_by": None, "merge_user": None, "merged_at": None,
                "target_branch": pull.base, "source_branch": pull.head, "reviewers": [],
                "source_project_id": self._source_project_id(repo, pull),
                "target_project_id": repo.id,
                "draft": pull.draft, "work_in_progress": pull.draft, "imported": False,
                "imported_from": "none", "merge_when_pipeline_succeeds": False,
                "merge_status": "can_be_merged", "detailed_merge_status": "mergeable",
                "sha": repo.head_sha(issue), "merge_commit_sha": None,
                "squash_commit_sha": None, "should_remove_source_branch": None,
                "force_remove_source_branch": False, "prepared_at": ts(issue.created_at),
                "reference": f"!{issue.number}", "squash": False,
                "squash_on_merge": False, "has_conflicts": False,
                "blocking_discussions_resolved": all(t.resolved for t in pull.threads)}

    def note(self, repo: Repo, issue: Issue, note: Comment | ReviewComment, *,
             thread: ReviewThread | None = None) -> dict[str, Any]:
        noteable = "MergeRequest" if issue.pull else "Issue"
        value: dict[str, Any] = {
            "id": note.id, "type": None, "body": note.body, "attachment": None,
            "author": self.user(note.author), "created_at": ts(note.created_at),
            "updated_at": ts(getattr(note, "updated_at", note.created_at)), "system": False,
            "noteable_id": issue.id, "noteable_type": noteable, "noteable_iid": issue.number,
            "project_id": repo.id, "resolvable": False, "confidential": False,
            "internal": False, "imported": False, "imported_from": "none",
            "commands_changes": {},
        }
        if thread is not None:
            value.update(type="DiffNote", resolvable=True, resolved=thread.resolved,
                         resolved_by=None, resolved_at=None,
                         position=self._position(repo, issue, thread))
        return value

    def _position(self, repo: Repo, issue: Issue, thread: ReviewThread) -> dict[str, Any]:
        assert issue.pull is not None
        base = repo.git.resolve(issue.pull.base)
        return {"base_sha": base, "start_sha": base, "head_sha": thread.root.commit_id,
                "old_path": thread.path, "new_path": thread.path, "position_type": "text",
                "old_line": None, "new_line": thread.line, "line_range": None}

    def discussion(self, repo: Repo, issue: Issue, thread: ReviewThread) -> dict[str, Any]:
        return {"id": thread.discussion_id, "individual_note": False,
                "notes": [self.note(repo, issue, c, thread=thread) for c in thread.comments]}

    def comment_discussion(self, repo: Repo, issue: Issue, comment: Comment) -> dict[str, Any]:
        """A plain comment is a one-note discussion of its own."""
        digest = hashlib.sha1(f"note-{comment.id}".encode()).hexdigest()
        return {"id": digest, "individual_note": True,
                "notes": [self.note(repo, issue, comment)]}

    def award(self, reaction: Reaction, awardable_id: int, awardable_type: str,
              ) -> dict[str, Any]:
        return {"id": reaction.id, "name": EMOJI.get(reaction.content, reaction.content),
                "user": self.user(reaction.user), "created_at": ts(reaction.created_at),
                "updated_at": ts(reaction.created_at), "awardable_id": awardable_id,
                "awardable_type": awardable_type, "url": None}

    # -- repository ----------------------------------------------------------------------
    def commit(self, repo: Repo, commit: GitCommit) -> dict[str, Any]:
        return {"id": commit.sha, "short_id": commit.sha[:8], "created_at": commit.committed_at,
                "parent_ids": list(commit.parents), "title": commit.title,
                "message": commit.message + "\n", "author_name": commit.author_name,
                "author_email": commit.author_email, "authored_date": commit.authored_at,
                "committer_name": commit.committer_name,
                "committer_email": commit.committer_email,
                "committed_date": commit.committed_at, "trailers": {}, "extended_trailers": {},
                "web_url": self.web(repo, f"/-/commit/{commit.sha}")}

    def branch(self, repo: Repo, name: str, sha: str) -> dict[str, Any]:
        return {"name": name, "merged": False, "protected": name == repo.default_branch,
                "default": name == repo.default_branch, "developers_can_push": False,
                "developers_can_merge": False, "can_push": True,
                "web_url": self.web(repo, f"/-/tree/{quote(name)}"),
                "commit": self.commit(repo, repo.git.commit_info(sha))}

    def file(self, path: str, ref: str, sha: str, data: bytes, commit_id: str,
             ) -> dict[str, Any]:
        return {"file_name": path.rsplit("/", 1)[-1], "file_path": path, "size": len(data),
                "encoding": "base64", "content": base64.b64encode(data).decode(),
                "content_sha256": hashlib.sha256(data).hexdigest(), "ref": ref,
                "blob_id": sha, "commit_id": commit_id, "last_commit_id": commit_id,
                "execute_filemode": False}

    # -- CI ------------------------------------------------------------------------------
    def pipeline(self, repo: Repo, run: CiRun, source: str = "push", *,
                 detail: bool = False) -> dict[str, Any]:
        """A pipeline as lists show it; `detail`: as GET of the one pipeline shows it."""
        found = {"id": run.id, "iid": run.number, "project_id": repo.id, "sha": run.sha,
                "ref": run.branch, "status": PIPELINE_STATUS.get(run.conclusion, "failed"),
                "source": source, "created_at": ts(run.created_at),
                "updated_at": ts(run.created_at),
                "web_url": self.web(repo, f"/-/pipelines/{run.id}")}
        if detail:
            found["user"] = self.user(run.user or repo.owner)
        return found

    def job(self, repo: Repo, run: CiRun, job: CiJob) -> dict[str, Any]:
        commit = repo.git.commit_info(run.sha)
        return {"id": job.id, "status": PIPELINE_STATUS.get(job.conclusion, "failed"),
                "stage": job.stage, "name": job.name, "ref": run.branch, "tag": False,
                "coverage": None, "allow_failure": False, "created_at": ts(run.created_at),
                "started_at": ts(run.created_at), "finished_at": ts(run.created_at),
                "erased_at": None, "duration": 1.0, "queued_duration": 0.1,
                "user": self.user(repo.owner), "commit": self.commit(repo, commit),
                "pipeline": self.pipeline(repo, run),
                "failure_reason": "script_failure" if job.conclusion == "failure" else None,
                "web_url": self.web(repo, f"/-/jobs/{job.id}"),
                "project": {"ci_job_token_scope_enabled": False}, "artifacts": [],
                "artifacts_expire_at": None, "runner": None, "tag_list": [],
                "archived": False}

    # -- the token's user; forks; commit statuses ----------------------------------------
    def current_user(self, login: str) -> dict[str, Any]:
        """`GET /user`: the token's user, with the fields only its owner sees."""
        known = self.state.users.get(login)
        return {**self.user(login), "created_at": "2024-01-01T00:00:00.000Z", "bio": "",
                "location": None, "public_email": None, "skype": "", "linkedin": "",
                "twitter": "", "website_url": "", "organization": None,
                "email": known.email if known else None, "bot": bool(known and known.bot),
                "is_admin": False, "can_create_group": True, "can_create_project": True,
                "two_factor_enabled": False, "external": False, "private_profile": False}

    def _source_project_id(self, repo: Repo, pull: PullData) -> int:
        """A fork's merge request comes from the fork's project."""
        source = self.state.repos.get(pull.head_repo or "")
        if source is not None:
            return source.id
        return repo.id if pull.head_repo in (None, repo.full_name) else \
            zlib.crc32((pull.head_repo or "").encode()) % 10_000_000  # a deleted fork

    def status(self, status: CommitStatus) -> dict[str, Any]:
        finished = status.state in ("success", "failed", "canceled")
        return {"id": status.id, "sha": status.sha, "ref": None, "status": status.state,
                "name": status.name, "target_url": status.target_url,
                "description": status.description or None, "coverage": None,
                "allow_failure": False, "created_at": ts(status.created_at),
                "started_at": ts(status.created_at) if status.state != "pending" else None,
                "finished_at": ts(status.updated_at) if finished else None,
                "author": self.user(status.creator)}
