"""GitHub as a ForgePlugin (bot/forge/plugin.py): the one object the registry lists."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bot.forge.base import Forge
from bot.forge.github import environment, events, webhook
from bot.forge.inbound import Planner
from bot.forge.plugin import CiInput


class GitHubPlugin:
    """Webhooks signed with HMAC-SHA256, Actions event files, the API through PyGithub."""

    name = "github"
    title = "GitHub"
    token_variables = environment.TOKEN_VARIABLES
    url_variables = environment.URL_VARIABLES
    dispatch_event = "repository_dispatch"
    rejection = webhook.REJECTION
    signs_body = True

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
        return environment.in_actions(environ)

    def ci_input(self, environ: Mapping[str, str]) -> CiInput:
        return environment.ci_input(environ)

    def connect(self, url: str | None, token: str, repo: str) -> Forge:
        from bot.forge.github.client import (
            GitHubForge,  # PyGithub loads only when a forge is reached
        )

        return GitHubForge.connect(url, token, repo)

    def identity(self, url: str | None, token: str) -> str:
        from bot.forge.github.client import identity

        return identity(url, token)

    def trusted_dispatch(self, payload: Any, environ: Mapping[str, str]) -> Any:
        return payload  # the runner wrote it; events.py checks the sender is the bot


PLUGIN = GitHubPlugin()
