"""Who the bot is on each forge, so that it never acts on its own events.

The forge says it, from the token (GitHub: `GET /user`, or GraphQL `viewer` for an App
installation token, `<slug>[bot]`; GitLab: `GET /user`): nothing to configure, nothing to
get wrong. `OPBOT_BOT_LOGIN` overrides it, for dry runs with no token and odd setups.
A lookup that fails is tried again after a pause; meanwhile the identity is unknown, and
the planners still ignore anything a bot account sent.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping

from bot.forge import registry
from bot.forge.base import ForgeError

BOT_LOGIN_VARIABLE = "OPBOT_BOT_LOGIN"
RETRY_AFTER_S = 60.0

log = logging.getLogger("opbot.identity")

# (forge name, environment) -> the login its token acts as; raises on failure.
Lookup = Callable[[str, Mapping[str, str]], str]


def login_from_token(forge: str, environ: Mapping[str, str]) -> str:
    """The login the forge's token (from the environment) acts as."""
    plugin = registry.plugin(forge)
    token = next((value for name in plugin.token_variables if (value := environ.get(name))),
                 None)
    if not token:
        raise ForgeError(f"no {plugin.title} token: set {plugin.token_variables[0]}")
    url = next((value for name in plugin.url_variables if (value := environ.get(name))), None)
    return plugin.identity(url, token)


class Identities:
    """The bot's login per forge: the override, else learnt from the token, cached."""

    def __init__(self, environ: Mapping[str, str] | None = None,
                 lookup: Lookup = login_from_token,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._environ = dict(os.environ if environ is None else environ)
        self._override = self._environ.get(BOT_LOGIN_VARIABLE) or None
        self._lookup = lookup
        self._clock = clock
        self._known: dict[str, str] = {}
        self._failed_at: dict[str, float] = {}
        self._lock = threading.Lock()

    def login(self, forge: str) -> str | None:
        if self._override:
            return self._override
        with self._lock:
            if forge in self._known:
                return self._known[forge]
            failed = self._failed_at.get(forge)
            if failed is not None and self._clock() - failed < RETRY_AFTER_S:
                return None
            try:
                found = self._lookup(forge, self._environ)
            except (ForgeError, registry.UnknownForgeError) as exc:
                self._failed_at[forge] = self._clock()
                log.warning("cannot learn the bot's %s identity from its token: %s", forge, exc)
                return None
            self._known[forge] = found
            return found
