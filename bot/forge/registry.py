"""Explicit forge registry: a forge's name maps to its ForgePlugin; unknown names are refused.

Adding a forge is a package bot/forge/<name>/ whose plugin.py provides a ForgePlugin
(bot/forge/plugin.py), and its PLUGIN in `_LISTED` below. The webhook receiver, event
planning, the CLI's --forge choices and jobs all reach forges through this module.
"""

from __future__ import annotations

from collections.abc import Mapping

from bot.errors import BadInputError
from bot.forge.base import Forge
from bot.forge.common import first_set
from bot.forge.github.plugin import PLUGIN as GITHUB
from bot.forge.gitlab.plugin import PLUGIN as GITLAB
from bot.forge.plugin import ForgePlugin

_LISTED: tuple[ForgePlugin, ...] = (GITHUB, GITLAB)
PLUGINS: dict[str, ForgePlugin] = {plugin.name: plugin for plugin in _LISTED}
# `opbot event` run outside any CI it recognises reads GitHub payloads, as it always has
# (the CLI's --forge help says so); everything else names its forge.
FALLBACK = GITHUB.name


class UnknownForgeError(BadInputError, ValueError):
    """A forge name no plugin answers to; the message lists the valid ones."""


def names() -> tuple[str, ...]:
    return tuple(PLUGINS)


def plugin(name: str) -> ForgePlugin:
    found = PLUGINS.get(name)
    if found is None:
        valid = ", ".join(sorted(PLUGINS))
        raise UnknownForgeError(f"unknown forge {name!r}; valid forges: {valid}")
    return found


def connect(name: str, *, url: str | None, token: str, repo: str) -> Forge:
    """A Forge for `repo` on the forge called `name` (url None: the public instance)."""
    return plugin(name).connect(url, token, repo)


def connect_from_environment(name: str, repo: str, environ: Mapping[str, str]) -> Forge:
    """A Forge for `repo` with the token and URL the forge's variables hold."""
    found = plugin(name)
    token = first_set(environ, found.token_variables)
    if not token:
        raise BadInputError(f"no {name} token: set {found.token_variables[0]}")
    return found.connect(first_set(environ, found.url_variables), token, repo)


def detect(environ: Mapping[str, str]) -> ForgePlugin:
    """The forge whose CI this process runs in (FALLBACK in none); refused when the
    environment looks like the CI of several."""
    found = [candidate for candidate in PLUGINS.values() if candidate.detect(environ)]
    if len(found) > 1:
        which = ", ".join(candidate.name for candidate in found)
        raise BadInputError(f"the environment looks like the CI of several forges ({which}): "
                            "pass --forge")
    return found[0] if found else PLUGINS[FALLBACK]
