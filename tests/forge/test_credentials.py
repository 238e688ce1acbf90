"""Credentials for git never ride in a URL: `Forge.git_credentials()` hands them over, and
`git_credential_env` makes git read them from its environment through a credential helper
(checked here with git itself)."""

from __future__ import annotations

import os
import subprocess

import gitlab
import pytest

from bot.forge.common import git_credential_env, without_credentials
from bot.forge.gitlab.client import GitLabForge


def _fill(env: dict[str, str]) -> dict[str, str]:
    """What git's credential machinery answers for an https remote."""
    done = subprocess.run(["git", "credential", "fill"], input="protocol=https\n"
                          "host=git.example.com\npath=o/r.git\n\n", capture_output=True,
                          text=True, check=True, timeout=30,
                          env={**os.environ, "GIT_TERMINAL_PROMPT": "0", **env})
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


def test_git_reads_the_credentials_from_the_environment() -> None:
    token = "ghs_sec ret$(touch pwned)`id`\"'"  # nothing in it is ever run
    answer = _fill(git_credential_env("x-access-token", token))
    assert (answer["username"], answer["password"]) == ("x-access-token", token)


def test_the_helper_answers_only_get() -> None:
    env = git_credential_env("oauth2", "glpat-abc")
    helper = env["GIT_CONFIG_VALUE_1"]
    assert helper.startswith("!")  # a shell snippet: git runs `sh -c '<snippet> "$@"'`
    for action, expected in (("get", "username=oauth2\npassword=glpat-abc\n"),
                             ("store", ""), ("erase", "")):
        done = subprocess.run(["sh", "-c", helper[1:] + ' "$@"', "helper", action],
                              capture_output=True, text=True, check=True, timeout=30,
                              env={**os.environ, **env})
        assert done.stdout == expected


def test_configured_helpers_are_set_aside() -> None:
    # A helper from the user's config would answer first; the environment's list resets it.
    env = {"GIT_CONFIG_PARAMETERS": "'credential.helper'='!echo password=leaked; :'",
           **git_credential_env("oauth2", "glpat-abc")}
    assert _fill(env)["password"] == "glpat-abc"


@pytest.mark.parametrize(("url", "expected"), [
    ("https://x-access-token:tok@github.com/o/r.git", "https://github.com/o/r.git"),
    ("https://gitlab.example.com:8443/g/p.git", "https://gitlab.example.com:8443/g/p.git"),
    ("https://oauth2:a@b@gitlab.example.com/g/p.git", "https://gitlab.example.com/g/p.git"),
    ("file:///srv/git/o/r.git", "file:///srv/git/o/r.git"),
])
def test_without_credentials(url: str, expected: str) -> None:
    assert without_credentials(url) == expected


def test_a_gitlab_job_token_is_the_ci_tokens() -> None:
    client = gitlab.Gitlab(url="https://gitlab.example.com", job_token="job-token-123")
    forge = GitLabForge(client, "g/p")
    assert forge.git_credentials() == ("gitlab-ci-token", "job-token-123")
