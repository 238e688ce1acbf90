"""GitLab as a ForgePlugin (bot/forge/plugin.py): the one object the registry lists."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bot.errors import BadInputError
from bot.forge.base import DISPATCH_EVENT, Forge
from bot.forge.gitlab import environment, events, webhook
from bot.forge.inbound import Planner
from bot.forge.plugin import CiInput


class GitLabPlugin:
    """Webhooks carrying a secret token, pipelines started with a plan file, the API
    through python-gitlab."""

    name = "gitlab"
    title = "GitLab"
    token_variables = environment.TOKEN_VARIABLES
    url_variables = environment.URL_VARIABLES
    dispatch_event = DISPATCH_EVENT  # the object_kind of a dispatched pipeline's plan file
    rejection = webhook.REJECTION
    signs_body = False

    def authenticate(self, headers: Mapping[str, str], body: bytes,
                     secrets: Sequence[str]) -> bool:
        return webhook.authenticate(headers, body, secrets)

    def event_name(self, headers: Mapping[str, str]) -> str | None:
        return webhook.event_name(headers)

    def delivery_id(self, headers: Mapping[str, str]) -> str | None:
        return webhook.delivery_id(headers)

    def planner(self, event: str) -> Planner | None:
        return events.PLANNERS.get(event)

    def repo_of(self, payload: Any) -> str | None:
        return events.repo_of(payload)

    def detect(self, environ: Mapping[str, str]) -> bool:
        return environment.in_gitlab_ci(environ)

    def ci_input(self, environ: Mapping[str, str]) -> CiInput:
        return environment.ci_input(environ)

    def connect(self, url: str | None, token: str, repo: str) -> Forge:
        from bot.forge.gitlab.client import (
            GitLabForge,  # python-gitlab loads only when a forge is reached
        )

        return GitLabForge.connect(url, token, repo)

    def identity(self, url: str | None, token: str) -> str:
        from bot.forge.gitlab.client import identity

        return identity(url, token)

    def trusted_dispatch(self, payload: Any, environ: Mapping[str, str]) -> Any:
        from bot.forge.common import first_set
        from bot.forge.gitlab.client import payload_of_running_job

        job_token = environ.get("CI_JOB_TOKEN")
        token = first_set(environ, self.token_variables)
        if not job_token:
            raise BadInputError("a dispatched plan runs only in a GitLab CI job of the "
                                "pipeline the bot created: no CI_JOB_TOKEN here")
        if not token:
            raise BadInputError(f"no gitlab token: set {self.token_variables[0]}")
        return payload_of_running_job(first_set(environ, self.url_variables), token, job_token)


PLUGIN = GitLabPlugin()
