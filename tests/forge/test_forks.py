"""Pull requests from forks: their branch name proves nothing, their head repository does.

A fork here is a real bare repository cloned from the base one; its pull request uses the
bot's own branch name on purpose. Real clients over loopback HTTP against the fake forge.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests
from github.PullRequest import PullRequest as GhPullRequest

from bot.commands import RegenCommand
from bot.event_input import settle_from_forge
from bot.events import Plan, job_key
from bot.forge import registry
from bot.forge.base import Forge, PullRequestDraft
from bot.forge.github import client as github_module
from tests.fakeforge import FakeForge, git
from tests.fakeforge.scenario import HEAD, KERNEL_PATH, REPO, World
from tests.forge.each_forge import each_forge, fake_server_of_kind  # noqa: F401 (fixtures)
from tests.forge.test_streams import _comment
from tests.support import run_opbot
from tests.support_forge import ForgeKind, github_client

FORK = "mallory/kernels"
EVIL = {KERNEL_PATH: "import os\nos.system('curl evil')\n"}


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


# -- a command on a pull request whose payload does not say whose it is --------------------

def _regen_on_pull(kind: ForgeKind, number: int) -> Plan:
    """What GitHub's issue_comment plans: it names the pull request, not its head."""
    return Plan(action="regen", reason="/regen on a pull request", forge=kind.name,
                event="issue_comment", repo=REPO, number=number, actor="alice",
                target="pull", command=RegenCommand())


def _token_env(kind: ForgeKind, fake: FakeForge) -> dict[str, str]:
    found = registry.plugin(kind.name)
    return {found.token_variables[0]: fake.token, found.url_variables[0]: kind.api_url(fake)}


def test_regen_on_a_fork_is_decided_by_reading_the_pull_request(
        fake: FakeForge, world: World, kind: ForgeKind) -> None:
    number = _fork_pull(fake)
    settled = settle_from_forge(_regen_on_pull(kind, number), _token_env(kind, fake))
    assert (settled.action, settled.command) == ("ignore", None)
    assert "fork" in settled.reason


def test_regen_on_the_bots_pull_request_learns_its_op(
        fake: FakeForge, world: World, kind: ForgeKind) -> None:
    settled = settle_from_forge(_regen_on_pull(kind, world.pull.number),
                                _token_env(kind, fake))
    assert (settled.action, settled.op, settled.head_branch) == ("regen", "relu", HEAD)
    assert settled.head_sha == world.head_sha
    # ... so it shares the job key of every other job on that operator
    assert job_key(settled).endswith(":relu")


def test_regen_on_someone_elses_pull_request_is_ignored(
        fake: FakeForge, world: World, kind: ForgeKind) -> None:
    fake.human_commit(REPO, "feature/x", {"README.md": "x"}, "x", author="alice")
    number = fake.open_pull(REPO, "feature/x", title="x", author="alice").number
    settled = settle_from_forge(_regen_on_pull(kind, number), _token_env(kind, fake))
    assert settled.action == "ignore"
    assert "feature/x" in settled.reason


def test_without_a_token_the_plan_stays_and_says_the_job_checks(
        fake: FakeForge, world: World, kind: ForgeKind) -> None:
    plan = _regen_on_pull(kind, _fork_pull(fake))
    settled = settle_from_forge(plan, {})
    assert settled.action == "regen"
    assert "checked when the job runs" in settled.reason


@pytest.mark.parametrize("kind", ["github"], indirect=True)
def test_dry_run_of_a_real_regen_comment_on_a_fork(fake: FakeForge, world: World,
                                                   kind: ForgeKind, tmp_path: Path) -> None:
    payload = _comment("/regen", on_pull=True)[0][1]
    payload["repository"]["full_name"] = REPO
    payload["issue"]["number"] = _fork_pull(fake)
    path = tmp_path / "comment.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    args = ("event", "--forge", "github", "--event", "issue_comment", "--payload", str(path),
            "--dry-run", "--json")
    checked = run_opbot(*args, env={"OPBOT_BOT_LOGIN": "", **_token_env(kind, fake)})
    assert checked.code == 0, checked.stderr
    assert json.loads(checked.stdout)["action"] == "ignore"
    blind = run_opbot(*args, env={"OPBOT_BOT_LOGIN": "", "OPBOT_GITHUB_TOKEN": "",
                                  "GITHUB_TOKEN": ""})
    assert json.loads(blind.stdout)["action"] == "regen"
