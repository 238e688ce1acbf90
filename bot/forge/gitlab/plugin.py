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
        from bot.forge.registry import connect_from_environment

        pipeline = environ.get("CI_PIPELINE_ID", "")
        repo = events.repo_of(payload) or environ.get("CI_PROJECT_PATH")
        if not pipeline.isdigit() or not repo:
            raise BadInputError("a dispatched plan runs in the GitLab pipeline the bot "
                                "created (CI_PIPELINE_ID and the plan's project): neither "
                                "is known here")
        forge = connect_from_environment(self.name, repo, environ)
        from bot.forge.gitlab.client import GitLabForge

        assert isinstance(forge, GitLabForge)
        return forge.dispatched_payload(int(pipeline))


PLUGIN = GitLabPlugin()
