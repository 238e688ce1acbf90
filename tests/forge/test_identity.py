"""Who the token is: `Forge.whoami()` and `ForgePlugin.identity()` on both forges, with a
user's token and (GitHub) a GitHub App installation token, whose comments carry
`<slug>[bot]` — the login the bot must recognise as its own.

Real clients over loopback HTTP against the fake forge; GitHub's traffic is validated
against its OpenAPI description.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from bot.forge import registry
from bot.forge.base import Forge, ForgeError, RateLimitedError, Target, UnavailableError
from bot.forge.github.client import GitHubForge
from tests.fakeforge import FakeForge, FakeServer
from tests.fakeforge.scenario import REPO, World, standard_world
from tests.forge.each_forge import each_forge, fake_server_of_kind  # noqa: F401 (fixtures)
from tests.support_forge import ForgeKind, fake_forge, github_client

ISSUE = Target("issue", 1)


@pytest.fixture
def forge(kind: ForgeKind, fake: FakeForge, world: World) -> Forge:
    return kind.forge(fake)


def test_whoami_is_the_tokens_user_and_is_asked_once(fake: FakeForge, forge: Forge) -> None:
    fake.state.requests.clear()
    assert forge.whoami() == "opbot"
    assert forge.whoami() == "opbot"
    assert len(fake.state.requests) == 1  # GET /user, once


def test_the_plugin_names_the_token_without_a_repository(fake: FakeForge, world: World,
                                                        kind: ForgeKind) -> None:
    fake.add_user("carol")
    fake.add_token("carol-token-0123456789", "carol")
    plugin = registry.plugin(kind.name)
    assert plugin.identity(kind.api_url(fake), "carol-token-0123456789") == "carol"
    assert plugin.identity(kind.api_url(fake), fake.token) == "opbot"


def test_the_bots_comments_carry_its_login(forge: Forge) -> None:
    posted = forge.create_comment(ISSUE, "On it.")
    assert posted.author == forge.whoami()
    assert forge.list_comments(ISSUE)[-1].author == forge.whoami()


def test_failures_are_forge_errors(fake: FakeForge, world: World, kind: ForgeKind) -> None:
    with pytest.raises(ForgeError) as wrong:
        kind.forge(fake, token=kind.wrong_token).whoami()
    assert kind.wrong_token not in str(wrong.value)
    forge = kind.forge(fake)
    fake.fail_next(kind.name, status=502)
    with pytest.raises(UnavailableError):
        forge.whoami()
    assert forge.whoami() == "opbot"  # a failure is not cached


# -- a GitHub App installation token ---------------------------------------------------------
GITHUB_ONLY = pytest.mark.parametrize("kind", ["github"], indirect=True)


@pytest.fixture
def app_fake(server: FakeServer, tmp_path: Path, kind: ForgeKind) -> Iterator[FakeForge]:
    with fake_forge(server, tmp_path / "forge", app="opbot") as fake:
        standard_world(fake)
        yield fake


@GITHUB_ONLY
def test_an_app_is_its_bot_user(app_fake: FakeForge) -> None:
    forge = GitHubForge(github_client(app_fake), REPO)
    app_fake.state.requests.clear()
    assert forge.whoami() == "opbot[bot]"
    # /user refuses an installation token; GraphQL's viewer answers.
    assert app_fake.state.requests == ["GET /user", "POST /graphql"]
    assert forge.whoami() == "opbot[bot]"
    assert len(app_fake.state.requests) == 2


@GITHUB_ONLY
def test_an_apps_comments_are_a_bots(app_fake: FakeForge) -> None:
    forge = GitHubForge(github_client(app_fake), REPO)
    posted = forge.create_comment(ISSUE, "Working on it.")
    assert posted.author == "opbot[bot]" == forge.whoami()
    raw = requests.get(f"{app_fake.github_url}/repos/{REPO}/issues/comments/{posted.id}",
                       headers={"Authorization": f"token {app_fake.token}"}, timeout=10).json()
    assert (raw["user"]["login"], raw["user"]["type"]) == ("opbot[bot]", "Bot")
    # The standard world's bot comment is the App's too; alice's is a person's.
    assert [c.author for c in forge.list_comments(ISSUE)] == ["alice", "opbot[bot]",
                                                              "opbot[bot]"]


@GITHUB_ONLY
def test_an_app_token_through_the_plugin(app_fake: FakeForge) -> None:
    assert registry.plugin("github").identity(app_fake.github_url, app_fake.token) \
        == "opbot[bot]"


@GITHUB_ONLY
def test_a_second_app_on_the_same_fake(app_fake: FakeForge) -> None:
    app_fake.add_app_token("ghs_other_app_token_0123456789", "kernel-ci")
    forge = GitHubForge(github_client(app_fake, token="ghs_other_app_token_0123456789"), REPO)
    assert forge.whoami() == "kernel-ci[bot]"
    assert forge.create_comment(ISSUE, "CI says hi").author == "kernel-ci[bot]"


@GITHUB_ONLY
def test_a_rate_limited_user_lookup_is_not_taken_for_an_app(fake: FakeForge, world: World,
                                                            kind: ForgeKind) -> None:
    forge = kind.forge(fake)
    fake.rate_limit_next("github", status=403, reset_in=30)
    fake.state.requests.clear()
    with pytest.raises(RateLimitedError):
        forge.whoami()
    assert fake.state.requests == ["GET /user"]  # no GraphQL detour
