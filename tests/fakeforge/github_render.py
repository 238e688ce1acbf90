"""GitHub JSON objects, built from the spec's own `components/examples`.

Each renderer copies an example and overrides the fields that carry the fake's state;
`point_home` then rewrites every URL the example still holds so that it points back at
the fake (API URLs to the API root, the rest to stub web pages).
"""

from __future__ import annotations

import base64
import re
import zlib
from datetime import datetime
from typing import Any
from urllib.parse import quote

from .gitstore import GitCommit
from .model import (
    CheckRun,
    CiJob,
    CiRun,
    Comment,
    CommitStatus,
    Issue,
    Reaction,
    Repo,
    Review,
    ReviewComment,
    ReviewThread,
    Role,
    State,
)
from .spec import GitHubSpec

_URL = re.compile(r"^https?://([^/]+)")
# GitHub's legacy `permission` field folds the finer roles into admin/write/read/none.
LEGACY_PERMISSION: dict[Role, str] = {"admin": "admin", "maintain": "write", "write": "write",
                                      "triage": "read", "read": "read", "none": "none"}


def ts(moment: datetime | str) -> str:
    if isinstance(moment, str):  # git's ISO 8601 with offset
        return moment
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def node_id(kind: str, ident: int) -> str:
    return base64.b64encode(f"0:{kind}{ident}".encode()).decode()


class GitHubRender:
    def __init__(self, spec: GitHubSpec, state: State, root: str) -> None:
        self.spec = spec
        self.state = state
        self.root = root

    # -- URLs ----------------------------------------------------------------------------
    def api(self, path: str) -> str:
        return f"{self.root}{path}"

    def web(self, path: str) -> str:
        return f"{self.root}/_web/github.com{path}"

    def point_home(self, value: Any) -> Any:
        """Every absolute URL left from an example now points back at the fake."""
        if isinstance(value, dict):
            return {k: self.point_home(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.point_home(v) for v in value]
        if isinstance(value, str):
            found = _URL.match(value)
            if found and not value.startswith(self.root):
                host = found.group(1)
                rest = value[found.end():]
                return self.api(rest) if host == "api.github.com" else \
                    f"{self.root}/_web/{host}{rest}"
        return value

    # -- people and repositories ---------------------------------------------------------
    def user(self, login: str) -> dict[str, Any]:
        known = self.state.users.get(login)
        value = self.spec.example("simple-user")
        ident = known.id if known else zlib.crc32(login.encode()) % 10_000_000
        value.update(login=login, id=ident, node_id=node_id("User", ident),
                     url=self.api(f"/users/{login}"), html_url=self.web(f"/{login}"),
                     type="Bot" if known and known.bot else "User", site_admin=False)
        for key in list(value):
            if key.endswith("_url") and key not in ("url", "html_url", "avatar_url"):
                value[key] = re.sub(r"/users/[^/{]+", f"/users/{login}", value[key])
        return self.point_home(value)  # type: ignore[no-any-return]

    def repo(self, repo: Repo) -> dict[str, Any]:
        value = self.spec.example("full-repository")
        base = f"/repos/{repo.full_name}"
        for key, url in list(value.items()):
            if isinstance(url, str) and "/repos/octocat/Hello-World" in url:
                value[key] = url.replace("/repos/octocat/Hello-World", base)
        value.update(
            id=repo.id, node_id=node_id("Repository", repo.id), name=repo.name,
            full_name=repo.full_name, owner=self.user(repo.owner), private=True,
            visibility="private", url=self.api(base), html_url=self.web(f"/{repo.full_name}"),
            clone_url=repo.git.url, default_branch=repo.default_branch,
            created_at=ts(repo.created_at), updated_at=ts(repo.created_at),
            pushed_at=ts(repo.created_at), fork=repo.fork_of is not None, archived=False,
            disabled=False,
            open_issues_count=sum(i.state == "open" for i in repo.issues.values()),
        )
        for key in ("organization", "parent", "source", "template_repository"):
            value.pop(key, None)  # a plain user-owned repository has none of these
        return self.point_home(value)  # type: ignore[no-any-return]

    def permission(self, login: str, role: Role) -> dict[str, Any]:
        value = self.spec.example(
            "repository-collaborator-permission-response-if-user-has-admin-permissions")
        value.update(permission=LEGACY_PERMISSION[role], role_name=role)
        at_least = ["read", "triage", "write", "maintain", "admin"]
        rank = at_least.index(role) if role in at_least else -1
        value["user"] = {**self.user(login), "role_name": role, "permissions": {
            "pull": rank >= 0, "triage": rank >= 1, "push": rank >= 2, "maintain": rank >= 3,
            "admin": rank >= 4}}
        return self.point_home(value)  # type: ignore[no-any-return]

    def label(self, repo: Repo, name: str) -> dict[str, Any]:
        value = self.spec.example("label")
        ident = zlib.crc32(f"{repo.full_name}:{name}".encode())
        value.update(id=ident, node_id=node_id("Label", ident), name=name, default=False,
                     url=self.api(f"/repos/{repo.full_name}/labels/{quote(name)}"),
                     description="", color="ededed")
        return self.point_home(value)  # type: ignore[no-any-return]

    def reaction(self, reaction: Reaction) -> dict[str, Any]:
        value = self.spec.example("reaction")
        value.update(id=reaction.id, node_id=node_id("Reaction", reaction.id),
                     user=self.user(reaction.user), content=reaction.content,
                     created_at=ts(reaction.created_at))
        return self.point_home(value)  # type: ignore[no-any-return]

    # -- issues, comments, pull requests -------------------------------------------------
    def issue(self, repo: Repo, issue: Issue) -> dict[str, Any]:
        value = self.spec.example("issue")
        base = f"/repos/{repo.full_name}/issues/{issue.number}"
        kind = "pull" if issue.pull else "issues"
        value.update(
            id=issue.id, node_id=node_id("Issue", issue.id), number=issue.number,
            url=self.api(base), repository_url=self.api(f"/repos/{repo.full_name}"),
            labels_url=self.api(f"{base}/labels{{/name}}"),
            comments_url=self.api(f"{base}/comments"),
            events_url=self.api(f"{base}/events"),
            html_url=self.web(f"/{repo.full_name}/{kind}/{issue.number}"),
            state=issue.state, title=issue.title, body=issue.body, user=self.user(issue.author),
            labels=[self.label(repo, name) for name in issue.labels], assignee=None,
            assignees=[], milestone=None, locked=False, active_lock_reason=None,
            comments=len(issue.comments), closed_at=None, closed_by=None,
            created_at=ts(issue.created_at), updated_at=ts(issue.updated_at),
            author_association="OWNER" if issue.author == repo.owner else "CONTRIBUTOR",
            state_reason=None,
        )
        if issue.pull:
            pull = f"/repos/{repo.full_name}/pulls/{issue.number}"
            value["pull_request"] = {
                "url": self.api(pull),
                "html_url": self.web(f"/{repo.full_name}/pull/{issue.number}"),
                "diff_url": self.web(f"/{repo.full_name}/pull/{issue.number}.diff"),
                "patch_url": self.web(f"/{repo.full_name}/pull/{issue.number}.patch"),
                "merged_at": None}
        else:
            value.pop("pull_request", None)
        return self.point_home(value)  # type: ignore[no-any-return]

    def comment(self, repo: Repo, issue: Issue, comment: Comment) -> dict[str, Any]:
        value = self.spec.example("issue-comment")
        kind = "pull" if issue.pull else "issues"
        value.update(
            id=comment.id, node_id=node_id("IssueComment", comment.id), body=comment.body,
            url=self.api(f"/repos/{repo.full_name}/issues/comments/{comment.id}"),
            html_url=self.web(f"/{repo.full_name}/{kind}/{issue.number}#issuecomment-{comment.id}"),
            issue_url=self.api(f"/repos/{repo.full_name}/issues/{issue.number}"),
            user=self.user(comment.author), created_at=ts(comment.created_at),
            updated_at=ts(comment.updated_at),
            author_association="OWNER" if comment.author == repo.owner else "CONTRIBUTOR",
        )
        return self.point_home(value)  # type: ignore[no-any-return]

    def pull(self, repo: Repo, issue: Issue, *, simple: bool = False) -> dict[str, Any]:
        assert issue.pull is not None
        value = self.spec.example("pull-request-simple" if simple else "pull-request")
        base = f"/repos/{repo.full_name}/pulls/{issue.number}"
        issue_api = f"/repos/{repo.full_name}/issues/{issue.number}"
        web = f"/{repo.full_name}/pull/{issue.number}"
        head_sha = repo.head_sha(issue)
        value.update(
            id=issue.id, node_id=node_id("PullRequest", issue.id), number=issue.number,
            url=self.api(base), html_url=self.web(web), diff_url=self.web(f"{web}.diff"),
            patch_url=self.web(f"{web}.patch"), issue_url=self.api(issue_api),
            commits_url=self.api(f"{base}/commits"),
            review_comments_url=self.api(f"{base}/comments"),
            review_comment_url=self.api(f"/repos/{repo.full_name}/pulls/comments{{/number}}"),
            comments_url=self.api(f"{issue_api}/comments"),
            statuses_url=self.api(f"/repos/{repo.full_name}/statuses/{head_sha}"),
            state="closed" if issue.state == "closed" else "open", locked=False,
            title=issue.title, body=issue.body, user=self.user(issue.author),
            labels=[self.label(repo, name) for name in issue.labels], milestone=None,
            active_lock_reason=None, created_at=ts(issue.created_at),
            updated_at=ts(issue.updated_at), closed_at=None, merge_commit_sha=None,
            merged_at=ts(issue.updated_at) if issue.pull.merged else None,
            assignee=None, assignees=[], requested_reviewers=[], requested_teams=[],
            head=self._ref(self.state.repos.get(issue.pull.head_repo or "", repo),
                           issue.pull.head, head_sha),
            base=self._ref(repo, issue.pull.base, repo.git.resolve(issue.pull.base) or ""),
            author_association="OWNER" if issue.author == repo.owner else "CONTRIBUTOR",
            auto_merge=None, draft=issue.pull.draft,
        )
        value["_links"] = {
            "self": {"href": self.api(base)}, "html": {"href": self.web(web)},
            "issue": {"href": self.api(issue_api)},
            "comments": {"href": self.api(f"{issue_api}/comments")},
            "review_comments": {"href": self.api(f"{base}/comments")},
            "review_comment": {"href": self.api(
                f"/repos/{repo.full_name}/pulls/comments{{/number}}")},
            "commits": {"href": self.api(f"{base}/commits")},
            "statuses": {"href": self.api(f"/repos/{repo.full_name}/statuses/{head_sha}")},
        }
        if not simple:
            value.update(merged=issue.pull.merged, merged_by=None, mergeable=None,
                         rebaseable=None, mergeable_state="unknown",
                         comments=len(issue.comments),
                         review_comments=sum(len(t.comments) for t in issue.pull.threads),
                         commits=len(repo.git.between(issue.pull.base, head_sha))
                         if repo.git.resolve(issue.pull.base) else 0)
        return self.point_home(value)  # type: ignore[no-any-return]

    def _ref(self, repo: Repo, branch: str, sha: str) -> dict[str, Any]:
        return {"label": f"{repo.owner}:{branch}", "ref": branch, "sha": sha,
                "user": self.user(repo.owner), "repo": self.repo(repo)}

    def review_comment(self, repo: Repo, issue: Issue, thread: ReviewThread,
                       comment: ReviewComment) -> dict[str, Any]:
        value = self.spec.example("pull-request-review-comment")
        api = self.api(f"/repos/{repo.full_name}/pulls/comments/{comment.id}")
        web = self.web(f"/{repo.full_name}/pull/{issue.number}#discussion_r{comment.id}")
        pull_api = self.api(f"/repos/{repo.full_name}/pulls/{issue.number}")
        value.update(
            url=api, id=comment.id, node_id=node_id("PullRequestReviewComment", comment.id),
            pull_request_review_id=comment.id, path=thread.path, commit_id=comment.commit_id,
            original_commit_id=comment.commit_id, user=self.user(comment.author),
            body=comment.body, created_at=ts(comment.created_at),
            updated_at=ts(comment.created_at), html_url=web, pull_request_url=pull_api,
            author_association="OWNER" if comment.author == repo.owner else "CONTRIBUTOR",
            line=thread.line, original_line=thread.line, start_line=None,
            original_start_line=None, start_side=None, side="RIGHT", position=1,
            original_position=1, subject_type="line",
        )
        value["_links"] = {"self": {"href": api}, "html": {"href": web},
                           "pull_request": {"href": pull_api}}
        if comment is thread.root:
            value.pop("in_reply_to_id", None)
        else:
            value["in_reply_to_id"] = thread.root.id
        return self.point_home(value)  # type: ignore[no-any-return]

    # -- git -----------------------------------------------------------------------------
    def commit(self, repo: Repo, commit: GitCommit) -> dict[str, Any]:
        value = self.spec.example("commit-comparison")["commits"][0]
        api = f"/repos/{repo.full_name}"
        author = self.state.user_by_email(commit.author_email)
        committer = self.state.user_by_email(commit.committer_email)
        value.update(
            url=self.api(f"{api}/commits/{commit.sha}"), sha=commit.sha,
            node_id=node_id("Commit", zlib.crc32(commit.sha.encode())),
            html_url=self.web(f"/{repo.full_name}/commit/{commit.sha}"),
            comments_url=self.api(f"{api}/commits/{commit.sha}/comments"),
            author=self.user(author.login) if author else None,
            committer=self.user(committer.login) if committer else None,
            parents=[{"sha": p, "url": self.api(f"{api}/commits/{p}"),
                      "html_url": self.web(f"/{repo.full_name}/commit/{p}")}
                     for p in commit.parents],
        )
        value["commit"].update(
            url=self.api(f"{api}/git/commits/{commit.sha}"), message=commit.message,
            author={"name": commit.author_name, "email": commit.author_email,
                    "date": commit.authored_at},
            committer={"name": commit.committer_name, "email": commit.committer_email,
                       "date": commit.committed_at},
            comment_count=0,
        )
        tree = value["commit"]["tree"]
        tree["url"] = self.api(f"{api}/git/trees/{tree['sha']}")
        value.pop("files", None)
        value.pop("stats", None)
        return self.point_home(value)  # type: ignore[no-any-return]

    def branch(self, repo: Repo, name: str, sha: str) -> dict[str, Any]:
        value = self.spec.example("branch-with-protection")
        value.update(name=name, commit=self.commit(repo, repo.git.commit_info(sha)),
                     protected=False)
        value["_links"] = {"self": self.api(f"/repos/{repo.full_name}/branches/{quote(name)}"),
                           "html": self.web(f"/{repo.full_name}/tree/{quote(name)}")}
        value["protection_url"] = self.api(
            f"/repos/{repo.full_name}/branches/{quote(name)}/protection")
        value["protection"] = {"enabled": False, "required_status_checks": {
            "enforcement_level": "off", "contexts": [], "checks": []}}
        return self.point_home(value)  # type: ignore[no-any-return]

    def content(self, repo: Repo, path: str, ref: str, sha: str, data: bytes) -> dict[str, Any]:
        value = self.spec.example("content-file")
        api = self.api(f"/repos/{repo.full_name}/contents/{quote(path)}?ref={quote(ref)}")
        git_url = self.api(f"/repos/{repo.full_name}/git/blobs/{sha}")
        html = self.web(f"/{repo.full_name}/blob/{quote(ref)}/{quote(path)}")
        value.update(
            type="file", encoding="base64", size=len(data), name=path.rsplit("/", 1)[-1],
            path=path, content=base64.encodebytes(data).decode(), sha=sha, url=api,
            git_url=git_url, html_url=html,
            download_url=self.web(f"/raw/{repo.full_name}/{quote(ref)}/{quote(path)}"),
        )
        value["_links"] = {"git": git_url, "self": api, "html": html}
        return self.point_home(value)  # type: ignore[no-any-return]

    # -- CI ------------------------------------------------------------------------------
    def workflow_run(self, repo: Repo, run: CiRun) -> dict[str, Any]:
        value = self.spec.example("workflow-run")
        api = f"/repos/{repo.full_name}/actions/runs/{run.id}"
        value.update(
            id=run.id, name=run.name, node_id=node_id("WorkflowRun", run.id),
            head_branch=run.branch, head_sha=run.sha, run_number=run.number,
            display_title=run.name, status="completed", conclusion=run.conclusion,
            url=self.api(api), html_url=self.web(f"/{repo.full_name}/actions/runs/{run.id}"),
            jobs_url=self.api(f"{api}/jobs"), logs_url=self.api(f"{api}/logs"),
            cancel_url=self.api(f"{api}/cancel"), rerun_url=self.api(f"{api}/rerun"),
            artifacts_url=self.api(f"{api}/artifacts"), previous_attempt_url=None,
            created_at=ts(run.created_at), updated_at=ts(run.created_at),
            run_started_at=ts(run.created_at), actor=self.user(repo.owner),
            triggering_actor=self.user(repo.owner), pull_requests=[],
            repository=self._minimal_repo(repo), head_repository=self._minimal_repo(repo),
        )
        value["head_commit"].update(id=run.sha)
        return self.point_home(value)  # type: ignore[no-any-return]

    def _minimal_repo(self, repo: Repo) -> dict[str, Any]:
        full = self.repo(repo)
        keep = self.spec.example("workflow-run")["repository"]
        return {k: full.get(k, v) for k, v in keep.items()}

    def job(self, repo: Repo, run: CiRun, job: CiJob) -> dict[str, Any]:
        value = self.spec.example("job")
        api = f"/repos/{repo.full_name}"
        value.update(
            id=job.id, run_id=run.id, run_url=self.api(f"{api}/actions/runs/{run.id}"),
            node_id=node_id("WorkflowJob", job.id), head_sha=run.sha,
            url=self.api(f"{api}/actions/jobs/{job.id}"),
            html_url=self.web(f"/{repo.full_name}/actions/runs/{run.id}/job/{job.id}"),
            status="completed", conclusion=job.conclusion, name=job.name,
            check_run_url=self.api(f"{api}/check-runs/{job.id}"),
            created_at=ts(run.created_at), started_at=ts(run.created_at),
            completed_at=ts(run.created_at), workflow_name=run.name, head_branch=run.branch,
        )
        value["steps"] = [{"name": job.name, "status": "completed",
                           "conclusion": job.conclusion, "number": 1,
                           "started_at": ts(run.created_at), "completed_at": ts(run.created_at)}]
        return self.point_home(value)  # type: ignore[no-any-return]

    def check_run(self, repo: Repo, check: CheckRun, *, details_url: str | None = None,
                  ) -> dict[str, Any]:
        value = self.spec.example("check-run")
        api = f"/repos/{repo.full_name}/check-runs/{check.id}"
        value.update(
            id=check.id, head_sha=check.sha, node_id=node_id("CheckRun", check.id),
            external_id=str(check.id), url=self.api(api),
            html_url=self.web(f"/{repo.full_name}/runs/{check.id}"),
            details_url=details_url or check.details_url
            or self.web(f"/{check.app}/runs/{check.id}"),
            status=check.status, conclusion=check.conclusion, name=check.name,
            pull_requests=[],
        )
        if check.status != "completed":
            value["completed_at"] = None
        value["output"].update(title=check.title, summary=check.summary, text=None,
                               annotations_count=0,
                               annotations_url=self.api(f"{api}/annotations"))
        value["app"].update(slug=check.app, name=check.app)
        return self.point_home(value)  # type: ignore[no-any-return]

    # -- the token's user; reviews; commit statuses --------------------------------------
    def authenticated_user(self, login: str) -> dict[str, Any]:
        """`GET /user` for a user's token: the private view of that user."""
        value = self.spec.example("private-user")
        value.update({k: v for k, v in self.user(login).items() if k in value})
        known = self.state.users.get(login)
        value.update(user_view_type="private", name=known.name if known else login,
                     email=known.email if known else None, company=None, blog="",
                     location=None, bio=None, twitter_username=None)
        return self.point_home(value)  # type: ignore[no-any-return]

    def review(self, repo: Repo, issue: Issue, review: Review) -> dict[str, Any]:
        value = self.spec.example("pull-request-review")
        web = self.web(f"/{repo.full_name}/pull/{issue.number}#pullrequestreview-{review.id}")
        pull_api = self.api(f"/repos/{repo.full_name}/pulls/{issue.number}")
        value.update(
            id=review.id, node_id=node_id("PullRequestReview", review.id),
            user=self.user(review.author), body=review.body, state=review.state.upper(),
            html_url=web, pull_request_url=pull_api, submitted_at=ts(review.submitted_at),
            commit_id=review.commit_id,
            author_association="OWNER" if review.author == repo.owner else "CONTRIBUTOR",
        )
        value["_links"] = {"html": {"href": web}, "pull_request": {"href": pull_api}}
        return self.point_home(value)  # type: ignore[no-any-return]

    def status(self, repo: Repo, status: CommitStatus) -> dict[str, Any]:
        value = self.spec.example("status")
        value.update(
            url=self.api(f"/repos/{repo.full_name}/statuses/{status.sha}"),
            id=status.id, node_id=node_id("StatusContext", status.id), state=status.state,
            description=status.description, target_url=status.target_url,
            context=status.name, created_at=ts(status.created_at),
            updated_at=ts(status.updated_at), creator=self.user(status.creator),
        )
        return self.point_home(value)  # type: ignore[no-any-return]
