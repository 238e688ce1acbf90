"""opbot's progress on a commit: a check run for a GitHub App, a commit status for any other
GitHub token, a commit status on GitLab (whose state machine refuses a repeated pending or
running). Real clients over loopback HTTP against the fake forge.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.forge.base import ForbiddenError, Forge
from bot.forge.github.client import GitHubForge
from bot.forge.gitlab.client import GitLabForge
from bot.forge.retrying import RetryingForge
from tests.fakeforge import FakeForge, FakeServer
from tests.fakeforge.scenario import REPO, World, standard_world
from tests.forge.each_forge import each_forge, fake_server_of_kind  # noqa: F401 (fixtures)
from tests.support_forge import ForgeKind, fake_forge, github_client, gitlab_client

RUN_URL = "https://ci.example.com/opbot/runs/7"
GITHUB_ONLY = pytest.mark.parametrize("kind", ["github"], indirect=True)
GITLAB_ONLY = pytest.mark.parametrize("kind", ["gitlab"], indirect=True)


@pytest.fixture
def app_fake(server: FakeServer, tmp_path: Path) -> Iterator[FakeForge]:
    """The bot as a GitHub App installation: it may write check runs."""
    with fake_forge(server, tmp_path / "forge", app="opbot") as fake:
        yield fake


@pytest.fixture
def app_world(app_fake: FakeForge) -> World:
    return standard_world(app_fake)


def _app(fake: FakeForge) -> GitHubForge:
    return GitHubForge(github_client(fake), REPO)


# -- GitHub: a check run per commit, for an App -------------------------------------------------
@GITHUB_ONLY
def test_a_check_run_follows_the_work(app_fake: FakeForge, app_world: World) -> None:
    sha = app_world.head_sha
    forge = _app(app_fake)
    forge.report_progress(sha, "pending", "Queued behind 2 jobs.")
    forge.report_progress(sha, "running", "Generating relu (attempt 1).", url=RUN_URL)
    forge.report_progress(sha, "success", "Verified on 14 shapes.\n\nDetails follow.")
    assert app_fake.effect_log() == [
        f"github:{REPO}:check-run:opbot:{sha}:queued:-:Queued behind 2 jobs.",
        f"github:{REPO}:check-run-update:opbot:{sha}:in_progress:-:Generating relu (attempt 1).",
        f"github:{REPO}:check-run-update:opbot:{sha}:completed:success:"
        "Verified on 14 shapes.\n\nDetails follow."]
    (check,) = app_fake.state.repos[REPO].check_runs
    assert (check.app, check.title, check.details_url) == ("opbot", "Verified on 14 shapes.",
                                                           RUN_URL)


@GITHUB_ONLY
def test_another_process_continues_the_same_check_run(app_fake: FakeForge,
                                                      app_world: World) -> None:
    sha = app_world.head_sha
    _app(app_fake).report_progress(sha, "running", "Working.")
    _app(app_fake).report_progress(sha, "failure", "Did not verify.")
    (check,) = app_fake.state.repos[REPO].check_runs
    assert (check.status, check.conclusion) == ("completed", "failure")


@GITHUB_ONLY
def test_work_again_after_a_finished_run_is_a_new_check_run(app_fake: FakeForge,
                                                           app_world: World) -> None:
    forge = _app(app_fake)
    forge.report_progress(app_world.head_sha, "failure", "Did not verify.")
    forge.report_progress(app_world.head_sha, "running", "Regenerating.")
    old, new = app_fake.state.repos[REPO].check_runs
    assert (old.status, new.status) == ("completed", "in_progress")


@GITHUB_ONLY
def test_a_check_run_whose_answer_was_lost_is_found_again(app_fake: FakeForge,
                                                          app_world: World) -> None:
    forge = RetryingForge(_app(app_fake), sleep=lambda seconds: None)
    app_fake.fail_after_next("github")  # the check run exists; the client heard a 502
    forge.report_progress(app_world.head_sha, "running", "Working.")
    forge.report_progress(app_world.head_sha, "success", "Verified.")
    (check,) = app_fake.state.repos[REPO].check_runs
    assert (check.status, check.conclusion) == ("completed", "success")


@GITHUB_ONLY
def test_opbots_own_failure_is_no_failed_ci_job(app_fake: FakeForge, app_world: World) -> None:
    forge = _app(app_fake)
    forge.report_progress(app_world.head_sha, "failure", "Did not verify.")
    app_fake.add_check_run(REPO, app_world.head_sha, "external-ci", title="1 test failed")
    assert [job.name for job in forge.failed_jobs(app_world.head_sha)] == ["external-ci"]


# -- GitHub: a commit status for any other token ----------------------------------------------
@GITHUB_ONLY
def test_without_an_app_a_commit_status(fake: FakeForge, world: World) -> None:
    sha = world.head_sha
    forge = GitHubForge(github_client(fake), REPO)
    forge.report_progress(sha, "running", "Generating relu. " + "x" * 300, url=RUN_URL)
    fake.state.requests.clear()
    forge.report_progress(sha, "success", "Verified.")
    # Once told check runs are for Apps, the forge asks no more.
    assert fake.state.requests == [f"POST /repos/{REPO}/statuses/{sha}"]
    first, second = fake.state.repos[REPO].statuses
    assert (first.name, first.state, first.target_url) == ("opbot", "pending", RUN_URL)
    assert len(first.description) == 140
    assert first.description.endswith("…")
    assert (second.state, second.description) == ("success", "Verified.")
    assert not fake.state.repos[REPO].check_runs


@GITHUB_ONLY
def test_a_reader_may_not_report(fake: FakeForge, world: World) -> None:
    fake.add_user("rita", repo=REPO, role="read")
    fake.add_token("rita-token-0123456789", "rita")
    forge = GitHubForge(github_client(fake, token="rita-token-0123456789"), REPO)
    with pytest.raises(ForbiddenError):
        forge.report_progress(world.head_sha, "pending", "Queued.")
    assert fake.state.repos[REPO].statuses == []


# -- GitLab: a commit status ----------------------------------------------------------------
@GITLAB_ONLY
def test_gitlab_commit_status(fake: FakeForge, world: World) -> None:
    sha = world.head_sha
    forge = GitLabForge(gitlab_client(fake), REPO)
    forge.report_progress(sha, "pending", "Queued.")
    forge.report_progress(sha, "running", "Generating.", url=RUN_URL)
    forge.report_progress(sha, "running", "Still generating.")  # GitLab's 400: no error
    forge.report_progress(sha, "failure", "Did not verify.")
    forge.report_progress(sha, "pending", "Again.")  # a new status: the last one ended
    assert fake.effect_log() == [
        f"gitlab:{REPO}:status:opbot:{sha}:pending:Queued.",
        f"gitlab:{REPO}:status:opbot:{sha}:running:Generating.",
        f"gitlab:{REPO}:status:opbot:{sha}:failed:Did not verify.",
        f"gitlab:{REPO}:status:opbot:{sha}:pending:Again."]
    ended, again = fake.state.repos[REPO].statuses
    assert (ended.state, ended.target_url, again.state) == ("failed", RUN_URL, "pending")


@GITLAB_ONLY
def test_gitlab_reporters_are_developers(fake: FakeForge, world: World) -> None:
    fake.add_user("rita", repo=REPO, role="read")
    fake.add_token("rita-token-0123456789", "rita")
    forge = GitLabForge(gitlab_client(fake, token="rita-token-0123456789"), REPO)
    with pytest.raises(ForbiddenError):
        forge.report_progress(world.head_sha, "running", "Working.")


def test_reporting_twice_is_harmless(fake: FakeForge, world: World, kind: ForgeKind) -> None:
    forge: Forge = kind.forge(fake)
    for _ in range(2):
        forge.report_progress(world.head_sha, "pending", "Queued.")
        forge.report_progress(world.head_sha, "success", "Done.")
