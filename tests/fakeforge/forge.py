"""`FakeForge`: one test's handle on the fake — arrange state, then read the effects.

Two kinds of helpers: `add_*`, `open_*` (but `open_fork_pull`) and `human_commit` arrange
state silently, as if it had always been there; `submit_issue_form`, `comment`,
`submit_review`, `close_pull`, `fail_ci`, `open_fork_pull` and `human_push` play a person
(or CI) acting now, and deliver the webhooks the real services would to every subscription
(hooks.py).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable
from pathlib import Path

from .acts import Act
from .gitstore import FIXTURE_ACTOR, BareRepo, Push, git
from .hooks import PERSON_PREFIX, Front, Hooks, Subscription
from .model import (
    ACCESS_LEVEL,
    App,
    CheckRun,
    CiJob,
    CiRun,
    Comment,
    Effect,
    FrontEnd,
    Injected,
    Issue,
    LostAnswer,
    Member,
    PullData,
    Repo,
    Review,
    ReviewComment,
    ReviewThread,
    Role,
    User,
    discussion_id,
    now,
)
from .server import FakeServer

BOT = "opbot"


class FakeForge:
    def __init__(self, server: FakeServer, root: Path, *, token: str | None = None,
                 bot: str = BOT, app: str | None = None) -> None:
        """`token` acts as `bot`; with `app` (a slug), it is that GitHub App's installation
        token instead and the bot is `<app>[bot]`."""
        self.server = server
        self.state = server.reset()
        self.root = root
        self.token = token or f"fake-{secrets.token_hex(12)}"
        self.app = app
        # A client's `git push` carries no token over file://: it is the bot's.
        self.hooks = Hooks(server, self.state, client_login=bot)
        if app is not None:
            self.bot = self.add_app_token(self.token, app).login
            self.hooks.client_login = self.bot
            return
        self.bot = bot
        self.add_user(bot)  # a personal token's user is an ordinary user ("type": "User")
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

    def start_job(self, repo: str, pipeline_id: int, *, by: str | None = None) -> str:
        """GitLab: a runner starts the job of an API-created pipeline (`by`: a person who
        retried it; default, whoever created the pipeline); its CI job token."""
        found = self.state.repos[repo]
        run = next(r for r in found.api_pipelines if r.id == pipeline_id)
        token = f"glcbt-{secrets.token_hex(10)}"
        with self.state.lock:
            self.state.job_tokens[token] = (repo, pipeline_id, by or run.user or found.owner)
        return token

    def add_app_token(self, token: str, slug: str) -> User:
        """An installation token of the GitHub App `slug`: it acts as the App's bot user,
        `<slug>[bot]` (type "Bot"), with write access to every repository (the App is
        installed on all of them). `GET /user` refuses it (403 "Resource not accessible by
        integration"); GraphQL's `viewer` names the bot user. GitLab has no Apps: there the
        token is an ordinary bot user's."""
        with self.state.lock:
            app = self.state.apps.get(slug)
            if app is None:
                app = App(slug, self.state.new_id(), slug, owner=slug)
                self.state.apps[slug] = app
            user = self.add_user(app.login, bot=True, name=slug,
                                 email=f"{self.state.new_id()}+{app.login}@users.noreply.github.com")
            user.app = slug
            self.state.tokens[token] = app.login
            self.state.app_tokens[token] = slug
            for name in self.state.repos:
                self.add_user(app.login, repo=name, role="write")
            return user

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
        for app in list(self.state.apps.values()):  # Apps are installed everywhere
            self.add_user(app.login, repo=full_name, role="write")
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

    def open_fork_pull(self, repo: str, fork_owner: str, branch: str, files: dict[str, str],
                       *, author: str, title: str = "A change from a fork", body: str = "",
                       message: str = "Change from a fork", base: str | None = None,
                       ) -> Issue:
        """A pull request into `repo` from `branch` of `<fork_owner>/<name>`, a fork made
        for it (a real bare repository cloned from `repo`) holding a commit by `author`.
        The head commit also reaches `repo` as refs/pull/<n>/head, as on GitHub."""
        found = self.state.repos[repo]
        fork_name = f"{fork_owner}/{found.name}"
        fork = self.state.repos.get(fork_name) or self._fork(found, fork_name)
        user = self.add_user(author)
        start = base or found.default_branch
        fork.git.commit(branch, files, message, (user.name, user.email), base=start)
        with self.state.lock:
            number = found.next_number()
            git("fetch", "--quiet", fork.git.url, f"+refs/heads/{branch}:refs/pull/{number}/head",
                env={"GIT_DIR": str(found.git.path), "FAKEFORGE_ACTOR": FIXTURE_ACTOR})
            issue = Issue(number, title, body, author,
                          pull=PullData(head=branch, base=start, head_repo=fork_name))
            found.issues[number] = issue
            self.state.announce(Act("pull-opened", repo, author, issue=issue))
        return issue

    def _fork(self, origin: Repo, fork_name: str) -> Repo:
        path = self.root / "git" / f"{fork_name}.git"
        path.parent.mkdir(parents=True, exist_ok=True)
        git("clone", "--quiet", "--bare", origin.git.url, str(path))
        hook = origin.git.path / "hooks" / "post-receive"
        (path / "hooks" / "post-receive").write_text(hook.read_text())
        (path / "hooks" / "post-receive").chmod(0o755)
        fork = Repo(fork_name, self.state.new_id(), origin.default_branch, BareRepo(path),
                    fork_of=origin.full_name)
        with self.state.lock:
            self.state.repos[fork_name] = fork
        self.add_user(fork.owner, repo=fork_name, role="admin")
        return fork

    def add_review(self, repo: str, number: int, author: str, state: str, body: str,
                   commit_id: str | None = None) -> Review:
        """A submitted review (state COMMENTED, CHANGES_REQUESTED or APPROVED, either
        case) on the pull request's head, or on `commit_id`. GitHub lists it under
        /pulls/{n}/reviews; GitLab keeps a review's summary as a plain note (none for an
        empty body)."""
        found = self.state.repos[repo]
        issue = found.issues[number]
        assert issue.pull is not None, f"#{number} is not a pull request"
        with self.state.lock:
            review = Review(self.state.new_id(), author, state.lower(), body,
                            commit_id or found.head_sha(issue))
            issue.pull.reviews.append(review)
        return review

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

    # -- webhooks ------------------------------------------------------------------------
    def subscribe(self, front: Front, url: str, secret: str) -> Subscription:
        """Deliver the webhooks of every later act to `url`, as `front` does, signed with
        `secret` (hooks.py). With `app`, a GitHub subscription is that App's webhook: its
        payloads carry the installation."""
        installation = None
        if front == "github" and self.app is not None:
            installation = 1_000_000 + self.state.apps[self.app].id
        return self.hooks.subscribe(front, url, secret, installation=installation)

    # -- people (and CI) acting now: state changes, and the webhooks they bring ----------
    def submit_issue_form(self, repo: str, title: str, body: str,
                          labels: Iterable[str] = (), *, author: str) -> Issue:
        """An issue created from an issue form: born with its labels. GitHub delivers
        `issues.opened` (labels on it) and an `issues.labeled` per label; GitLab one Issue
        Hook (open)."""
        names = list(labels)
        with self.state.lock:
            issue = self.open_issue(repo, title, body, author=author, labels=names)
            self.state.announce(Act("issue-opened", repo, author, issue=issue,
                                    labels=tuple(names)))
        return issue

    def close_pull(self, repo: str, number: int, *, by: str) -> Issue:
        """A maintainer closes a pull/merge request without merging it: GitHub delivers
        `pull_request.closed` (`merged` false), GitLab a Merge Request Hook (close). It
        keeps the head it had."""
        found = self.state.repos[repo]
        issue = found.issues[number]
        assert issue.pull is not None, f"#{number} is not a pull request"
        with self.state.lock:
            if issue.state == "closed":
                return issue
            issue.pull.closed_head_sha = found.head_sha(issue)
            issue.state = "closed"
            issue.updated_at = now()
            self.state.announce(Act("pull-closed", repo, by, issue=issue))
        return issue

    def comment(self, repo: str, number: int, body: str, *, author: str) -> Comment:
        """A person's comment on an issue or a pull request: `issue_comment.created` /
        a Note Hook."""
        with self.state.lock:
            made = self.add_comment(repo, number, body, author=author)
            issue = self.state.repos[repo].issues[number]
            self.state.announce(Act("comment", repo, author, issue=issue, comment=made))
        return made

    def submit_review(self, repo: str, number: int, *, author: str, state: str = "commented",
                      body: str = "", comments: Iterable[tuple[str, int, str]] = (),
                      ) -> Review:
        """A review of the pull request's head: `state` is commented, changes_requested or
        approved, `comments` are (path, line, body) diff comments, each a new thread.
        GitHub: `pull_request_review.submitted` + a `pull_request_review_comment.created`
        per comment; GitLab: a Note Hook (DiffNote) per comment, one for the summary, and a
        Merge Request Hook (approved) for an approval."""
        found = self.state.repos[repo]
        issue = found.issues[number]
        assert issue.pull is not None, f"#{number} is not a pull request"
        with self.state.lock:
            sha = found.head_sha(issue)
            review = Review(self.state.new_id(), author, state.lower(), body, sha)
            pairs = []
            for path, line, text in comments:
                made = ReviewComment(self.state.new_id(), author, text, sha)
                thread = ReviewThread(discussion_id(made.id), path, line, [made])
                issue.pull.threads.append(thread)
                review.comment_ids.append(made.id)
                pairs.append((thread, made))
            issue.pull.reviews.append(review)
            self.state.announce(Act("review", repo, author, issue=issue, review=review,
                                    review_comments=tuple(pairs)))
        return review

    def fail_ci(self, repo: str, sha: str, *, jobs: dict[str, str], branch: str | None = None,
                passing: Iterable[str] = (), name: str = "CI",
                actor: str | None = None) -> CiRun:
        """A workflow run / pipeline on `sha` failed (`jobs`: failed job names to logs); its
        logs are served by the CI endpoints (as add_failed_run). GitHub delivers
        `check_run.completed` per job (app github-actions), `check_suite.completed`,
        `workflow_job.completed` per job and `workflow_run.completed`; GitLab a Pipeline
        Hook and a Job Hook per job. `actor` (the sender) defaults to whoever pushed `sha`."""
        with self.state.lock:
            run = self.add_failed_run(repo, sha, jobs=jobs, passing=passing, name=name,
                                      branch=branch)
            who = actor or self._pusher_of(repo, sha)
            self.state.announce(Act("ci-failed", repo, who, run=run))
        return run

    def human_push(self, repo: str, branch: str, files: dict[str, str], message: str, *,
                   author: str, base: str | None = None) -> str:
        """A person commits and pushes to `branch` (created from `base`): `push` and a
        `pull_request.synchronize` per open PR of the branch / a Push Hook and a Merge
        Request Hook (update, oldrev), delivered from the push log."""
        user = self.state.users[author]
        found = self.state.repos[repo]
        return found.git.commit(branch, files, message, (user.name, user.email),
                                base=base or found.default_branch,
                                actor=f"{PERSON_PREFIX}{author}")

    def _pusher_of(self, repo: str, sha: str) -> str:
        found = self.state.repos[repo]
        for push in reversed(found.git.pushes()):
            if push.new == sha and push.actor != FIXTURE_ACTOR:
                return self.hooks.pusher(push.actor) or found.owner
        author = self.state.user_by_email(found.git.commit_info(sha).author_email)
        return author.login if author else found.owner

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

    def fail_after_next(self, front: FrontEnd, n: int = 1, *, status: int = 502,
                        methods: Iterable[str] = ("POST", "PUT", "PATCH", "DELETE")) -> None:
        """The next `n` requests to a front end whose method is in `methods` (writes, by
        default) take effect as usual, then answer `status` instead of their reply: an
        answer lost on the way back, where the client cannot tell whether it worked."""
        wanted = frozenset(m.upper() for m in methods)
        self.state.lost[front].extend(LostAnswer(status, wanted) for _ in range(n))

    # -- observing -----------------------------------------------------------------------
    def pushes(self, repo: str) -> list[Push]:
        """Pushes the client made (the fixture's own, and those of people the helpers play,
        are left out)."""
        return [p for p in self.state.repos[repo].git.pushes()
                if not p.actor.startswith(FIXTURE_ACTOR)]

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
