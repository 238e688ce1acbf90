"""GitLab's environment: the variables holding the token and API URL, and what a GitLab CI
job's environment says about the event that started it."""

from __future__ import annotations

from collections.abc import Mapping

from bot.forge.plugin import CiInput

TOKEN_VARIABLES = ("OPBOT_GITLAB_TOKEN", "GITLAB_TOKEN")
URL_VARIABLES = ("OPBOT_GITLAB_URL", "CI_SERVER_URL")


def in_gitlab_ci(environ: Mapping[str, str]) -> bool:
    return environ.get("GITLAB_CI") == "true"


def ci_input(environ: Mapping[str, str]) -> CiInput:
    """GitLab CI writes no event file: the pipeline's job passes --event (and --payload for
    a dispatched plan); a scheduled pipeline's project is the CI's own."""
    return CiInput(scheduled_payload={"project": {"path_with_namespace":
                                                  environ.get("CI_PROJECT_PATH")}})
