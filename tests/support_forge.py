"""The fake forge for the forge and bot tests: its server and state, clients, per-forge facts.

The `server`, `fake` and `world` fixtures in tests/conftest.py are built from `fake_server`
and `fake_forge` below; `ForgeKind` holds what differs between GitHub and GitLab for the
shared contract tests (tests/forge/test_contract.py) and the forge-specific ones.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gitlab
from github import Auth, Github

from bot.events import Plan
from bot.forge.base import Dispatch, ForgeName
from bot.forge.github.client import GitHubForge
from bot.forge.gitlab.client import GitLabForge
from tests.fakeforge import FakeForge, FakeServer, require_spec
from tests.fakeforge.scenario import REPO, World


@contextmanager
def fake_server(*, github_spec: bool = True) -> Iterator[FakeServer]:
    """A fake forge server; with `github_spec`, GitHub traffic is validated against the
    OpenAPI description (the test skips where it is missing)."""
    server = FakeServer(require_spec() if github_spec else None)
    try:
        yield server
    finally:
        server.close()


@contextmanager
def fake_forge(server: FakeServer, root: Path, *, app: str | None = None,
               ) -> Iterator[FakeForge]:
    """A fresh state on `server`; on the way out, fails the test if the fake saw dishonesty
    (OpenAPI violations, crashes in the fake). With `app`, the bot's token is that GitHub
    App's installation token (the bot is `<app>[bot]`)."""
    fake = FakeForge(server, root, app=app)
    yield fake
    fake.assert_honest()


def github_client(fake: FakeForge, token: str | None = None, **options: Any) -> Github:
    # No pacing (PyGithub waits 0.25 s between requests, 1 s between writes) and no
    # retries: the tests want each call once, now.
    return Github(base_url=fake.github_url, auth=Auth.Token(token or fake.token), retry=None,
                  seconds_between_requests=0, seconds_between_writes=0, **options)


def gitlab_client(fake: FakeForge, token: str | None = None, **options: Any) -> gitlab.Gitlab:
    return gitlab.Gitlab(url=fake.gitlab_url, private_token=token or fake.token, **options)


@dataclass(frozen=True)
class ForgeKind:
    """One forge as the tests see it: how to reach it and what its answers look like."""

    name: ForgeName
    forge_class: type[GitHubForge] | type[GitLabForge]
    client: Callable[..., Any]  # (fake, token=None, **options) -> the library's client
    api_url: Callable[[FakeForge], str]
    web_root: Callable[[FakeForge], str]  # web pages of REPO start here
    issue_path: str  # "{n}": the issue's number
    pull_path: str  # "{n}": the pull/merge request's number
    comment_anchor: str  # "{id}": the comment's id
    pull_sigil: str  # "#2" / "!2" in effects and messages
    thread_id: Callable[[World], str]  # the standard world's review thread, as replies name it
    unknown_threads: tuple[str, ...]  # thread ids no reply can name
    comment_pages: str  # the request that reads one page of issue #1's comments
    token: str  # a secret of the forge's own format
    wrong_token: str  # a token the forge does not know
    wrong_token_prefix: str
    commit_logins: bool  # commits name the author's forge account
    end_pull: Callable[[FakeForge, int], None]  # the pull/merge request stops being open
    ended_state: str  # ... and says so
    git_username: str  # what git_credentials() pairs with the token

    def forge(self, fake: FakeForge, token: str | None = None, repo: str = REPO,
              **options: Any) -> GitHubForge | GitLabForge:
        return self.forge_class(self.client(fake, token, **options), repo)

    def web(self, fake: FakeForge, path: str) -> str:
        return f"{self.web_root(fake)}{path}"

    def issue_url(self, fake: FakeForge, number: int) -> str:
        return self.web(fake, self.issue_path.format(n=number))

    def pull_url(self, fake: FakeForge, number: int) -> str:
        return self.web(fake, self.pull_path.format(n=number))

    def comment_url(self, fake: FakeForge, number: int, comment_id: int) -> str:
        return self.issue_url(fake, number) + self.comment_anchor.format(id=comment_id)

    def effect_target(self, number: int) -> str:
        """How the effect log names pull/merge request `number`: github:octo/kernels#2."""
        return f"{self.name}:{REPO}{self.pull_sigil}{number}"


def _close(fake: FakeForge, number: int) -> None:
    fake.state.repos[REPO].issues[number].state = "closed"


def _merge(fake: FakeForge, number: int) -> None:
    pull = fake.state.repos[REPO].issues[number].pull
    assert pull is not None
    pull.merged = True


GITHUB = ForgeKind(
    name="github", forge_class=GitHubForge, client=github_client,
    api_url=lambda fake: fake.github_url,
    web_root=lambda fake: f"{fake.github_url}/_web/github.com/{REPO}",
    issue_path="/issues/{n}", pull_path="/pull/{n}", comment_anchor="#issuecomment-{id}",
    pull_sigil="#", thread_id=lambda world: str(world.thread.root.id),
    unknown_threads=("not-a-thread", "999999"),
    comment_pages=f"GET /repos/{REPO}/issues/1/comments",
    token="ghp_" + "S3cr3t" * 6, wrong_token="ghp_wrong_" + "x" * 30,
    wrong_token_prefix="ghp_wrong_", commit_logins=True,
    end_pull=_close, ended_state="closed", git_username="x-access-token")

GITLAB = ForgeKind(
    name="gitlab", forge_class=GitLabForge, client=gitlab_client,
    api_url=lambda fake: fake.gitlab_url,
    web_root=lambda fake: f"{fake.gitlab_url}/{REPO}",
    issue_path="/-/issues/{n}", pull_path="/-/merge_requests/{n}", comment_anchor="#note_{id}",
    pull_sigil="!", thread_id=lambda world: world.thread.discussion_id,
    unknown_threads=("0" * 40,),
    comment_pages="GET /gitlab/api/v4/projects/octo%2Fkernels/issues/1/notes",
    token="glpat-" + "S3cr3t" * 5, wrong_token="glpat-wrong-" + "x" * 20,
    wrong_token_prefix="glpat-wrong-",
    commit_logins=False,  # GitLab's commits name no account: the email tells who
    end_pull=_merge, ended_state="merged", git_username="oauth2")

KINDS = {kind.name: kind for kind in (GITHUB, GITLAB)}


@dataclass(frozen=True)
class CiDelivery:
    """Work a client handed to CI on the fake, as `opbot event` in that CI job reads it:
    `--event <event> --payload <file holding payload>`."""

    forge: ForgeName
    repo: str
    ref: str | None  # GitLab's pipeline ref; GitHub dispatches run on the default branch
    event: str
    payload: dict[str, Any]
    variable_type: str | None = None  # GitLab: how the pipeline got the file


def ci_deliveries(fake: FakeForge) -> list[CiDelivery]:
    """Every repository_dispatch and API-created pipeline the fake recorded, in order."""
    found: list[CiDelivery] = []
    for effect in fake.effects:
        if effect.forge == "github" and effect.kind == "dispatch":
            event_type, client_payload = effect.detail.split(":", 1)
            # The repository_dispatch webhook body, as Actions writes it to GITHUB_EVENT_PATH;
            # its sender is whoever's token sent it: the bot's.
            found.append(CiDelivery("github", effect.repo, None, "repository_dispatch", {
                "action": event_type, "client_payload": json.loads(client_payload),
                "repository": {"full_name": effect.repo},
                "sender": {"login": fake.bot, "type": "Bot"}}))
        elif effect.forge == "gitlab" and effect.kind == "pipeline":
            ref, variables = effect.detail.split(":", 1)
            for variable in json.loads(variables):
                if variable["key"] == "OPBOT_PLAN":
                    found.append(CiDelivery("gitlab", effect.repo, ref, "opbot",
                                            json.loads(variable["value"]),
                                            variable["variable_type"]))
    return found



class RecordingDispatcher:
    """A dispatch callable (`opbot serve --dispatch`'s hand-over) that fails with `errors`,
    in order, then succeeds; it keeps every plan it was handed."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.sent: list[Plan] = []

    def __call__(self, plan: Plan) -> Dispatch:
        self.sent.append(plan)
        if self.errors:
            raise self.errors.pop(0)
        return Dispatch(id=42, url="https://ci.example/pipelines/42")
