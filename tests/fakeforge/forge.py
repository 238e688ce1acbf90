"""`FakeForge`: one test's handle on the fake — arrange state, then read the effects."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable
from pathlib import Path

from .gitstore import FIXTURE_ACTOR, BareRepo, Push
from .model import (
    ACCESS_LEVEL,
    CheckRun,
    CiJob,
    CiRun,
    Comment,
    Effect,
    FrontEnd,
    Injected,
    Issue,
    Member,
    PullData,
    Repo,
    ReviewComment,
    ReviewThread,
    Role,
    User,
    discussion_id,
)
from .server import FakeServer

BOT = "opbot"


class FakeForge:
    def __init__(self, server: FakeServer, root: Path, *, token: str | None = None,
                 bot: str = BOT) -> None:
        self.server = server
        self.state = server.reset()
        self.root = root
        self.token = token or f"fake-{secrets.token_hex(12)}"
        self.bot = bot
        self.add_user(bot, bot=True)
        self.state.tokens[self.token] = bot

    # -- where the clients connect -------------------------------------------------------
    @property
    def github_url(self) -> str:
        return self.server.root

    @property
    def gitlab_url(self) -> str:
        return self.server.gitlab_url

    # -- arranging state -----------------------------------------------------------------
    def add_user(self, login: str, *, repo: str | None = None, role: Role = "write",
                 access_level: int | None = None, inherited: bool = False,
                 email: str | None = None, name: str | None = None, bot: bool = False) -> User:
        """A user; with `repo`, also a collaborator (GitHub role / GitLab access level)."""
        with self.state.lock:
            user = self.state.users.get(login)
            if user is None:
                user = User(login, self.state.new_id(), name or login.title(),
                            email or f"{login}@users.example.com", bot=bot)
                self.state.users[login] = user
            if repo is not None:
                level = access_level if access_level is not None else ACCESS_LEVEL.get(role)
                self.state.repos[repo].members[login] = Member(role, level, inherited)
            return user

    def add_token(self, token: str, login: str) -> None:
        self.state.tokens[token] = login

    def add_repo(self, full_name: str, *, default_branch: str = "main",
                 files: dict[str, str] | None = None, owner_role: Role = "admin") -> Repo:
        owner = full_name.rsplit("/", 1)[0]
        user = self.add_user(owner)
        path = self.root / "git" / f"{full_name}.git"
        path.parent.mkdir(parents=True, exist_ok=True)
        git = BareRepo.create(path, default_branch, files or {"README.md": "# fake\n"},
                              (user.name, user.email))
        repo = Repo(full_name, self.state.new_id(), default_branch, git)
        with self.state.lock:
            self.state.repos[full_name] = repo
        self.add_user(owner, repo=full_name, role=owner_role)
        self.add_user(self.bot, repo=full_name, role="write")
        return repo

    def open_issue(self, repo: str, title: str, body: str = "", *, author: str,
                   labels: Iterable[str] = ()) -> Issue:
        found = self.state.repos[repo]
        with self.state.lock:
            issue = Issue(found.next_number(), title, body, author, labels=list(labels))
            found.issues[issue.number] = issue
        return issue

    def open_pull(self, repo: str, head: str, *, title: str, author: str, body: str = "",
                  base: str | None = None, labels: Iterable[str] = ()) -> Issue:
        found = self.state.repos[repo]
        with self.state.lock:
            issue = Issue(found.next_number(), title, body, author, labels=list(labels),
                          pull=PullData(head=head, base=base or found.default_branch))
            found.issues[issue.number] = issue
        return issue

    def add_comment(self, repo: str, number: int, body: str, *, author: str) -> Comment:
        with self.state.lock:
            comment = Comment(self.state.new_id(), author, body)
            self.state.repos[repo].issues[number].comments.append(comment)
        return comment

    def add_review_thread(self, repo: str, number: int, *, path: str, line: int, body: str,
                          author: str, replies: Iterable[tuple[str, str]] = (),
                          resolved: bool = False) -> ReviewThread:
        """A diff comment and its replies ((author, body) pairs) on a pull request."""
        found = self.state.repos[repo]
        issue = found.issues[number]
        assert issue.pull is not None, f"#{number} is not a pull request"
        with self.state.lock:
            sha = found.head_sha(issue)
            comments = [ReviewComment(self.state.new_id(), author, body, sha)]
            comments += [ReviewComment(self.state.new_id(), who, text, sha)
                         for who, text in replies]
            thread = ReviewThread(discussion_id(comments[0].id), path, line, comments, resolved)
            issue.pull.threads.append(thread)
        return thread

    def human_commit(self, repo: str, branch: str, files: dict[str, str], message: str, *,
                     author: str, base: str | None = None) -> str:
        """A real commit by a registered user, pushed to `branch` (created from `base`)."""
        user = self.state.users[author]
        found = self.state.repos[repo]
        return found.git.commit(branch, files, message, (user.name, user.email),
                                base=base or found.default_branch)

    def add_failed_run(self, repo: str, sha: str, *, jobs: dict[str, str],
                       passing: Iterable[str] = (), name: str = "CI",
                       branch: str | None = None) -> CiRun:
        """A failed workflow run / pipeline for `sha`: `jobs` maps failed job names to logs."""
        found = self.state.repos[repo]
        with self.state.lock:
            made = [CiJob(self.state.new_id(), job, "failure", log) for job, log in jobs.items()]
            made += [CiJob(self.state.new_id(), job, "success", "ok\n") for job in passing]
            run = CiRun(self.state.new_id(), len(found.runs) + 1, name, sha,
                        branch or found.default_branch, "failure", made)
            found.runs.append(run)
        return run

    def add_check_run(self, repo: str, sha: str, name: str, *, conclusion: str = "failure",
                      title: str = "", summary: str = "") -> CheckRun:
        """A check run from another CI app (GitHub only): no Actions job behind it."""
        with self.state.lock:
            check = CheckRun(self.state.new_id(), name, sha, conclusion, title, summary)
            self.state.repos[repo].check_runs.append(check)
        return check

    # -- canned failures -----------------------------------------------------------------
    def rate_limit_next(self, front: FrontEnd, n: int = 1, *, status: int | None = None,
                        retry_after: int | None = None, reset_in: int | None = None) -> None:
        """The next `n` requests to a front end are throttled the way that forge does it."""
        if front == "github":
            headers, message = _github_limit(retry_after, reset_in)
            code = status or 403
        else:
            headers, message = _gitlab_limit(retry_after, reset_in), "Retry later"
            code = status or 429
        self.state.injected[front].extend(Injected(code, headers, message) for _ in range(n))

    def fail_next(self, front: FrontEnd, n: int = 1, *, status: int = 502,
                  message: str | None = None) -> None:
        """The next `n` requests get `status` (5xx by default) with `message`."""
        text = message or ("Server Error" if front == "github" else f"{status} Server Error")
        self.state.injected[front].extend(Injected(status, {}, text) for _ in range(n))

    # -- observing -----------------------------------------------------------------------
    def pushes(self, repo: str) -> list[Push]:
        """Pushes the client made (the fixture's own are left out)."""
        return [p for p in self.state.repos[repo].git.pushes() if p.actor != FIXTURE_ACTOR]

    @property
    def effects(self) -> list[Effect]:
        """Every effect so far, client pushes included (as `git:<repo>:push:<ref>:<sha>`)."""
        pushes = [Effect("git", name, "", "push", f"{p.ref}:{p.new}")
                  for name in self.state.repos for p in self.pushes(name)]
        return [*self.state.effects, *pushes]

    def effect_log(self) -> list[str]:
        return [str(e) for e in self.effects]

    @property
    def validation_errors(self) -> list[str]:
        return list(self.state.validation_errors)

    def assert_honest(self) -> None:
        """No request or reply broke GitHub's description, and the fake did not crash."""
        errors = self.validation_errors
        assert not errors, "fake forge validation errors:\n" + "\n".join(errors)


def _github_limit(retry_after: int | None, reset_in: int | None,
                  ) -> tuple[dict[str, str], str]:
    if retry_after is not None:  # a secondary rate limit: Retry-After says how long
        return ({"Retry-After": str(retry_after)},
                "You have exceeded a secondary rate limit. Please wait a few minutes "
                "before you try again.")
    reset = int(time.time()) + (reset_in if reset_in is not None else 60)
    return ({"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "0",
             "X-RateLimit-Used": "5000", "X-RateLimit-Reset": str(reset),
             "X-RateLimit-Resource": "core"},
            "API rate limit exceeded for user ID 1.")


def _gitlab_limit(retry_after: int | None, reset_in: int | None) -> dict[str, str]:
    wait = retry_after if retry_after is not None else (reset_in or 60)
    reset = int(time.time()) + wait
    return {"Retry-After": str(wait), "RateLimit-Limit": "600", "RateLimit-Observed": "601",
            "RateLimit-Remaining": "0", "RateLimit-Reset": str(reset),
            "RateLimit-ResetTime": time.strftime("%a, %d %b %Y %H:%M:%S GMT",
                                                 time.gmtime(reset))}
