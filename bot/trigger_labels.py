"""The trigger label of each repository, for a server that plans many repositories.

A repository may choose its own label in `.opbot.yaml` (`trigger.label`) on its default
branch. Planning reads only the payload, so the server looks the label up before it plans
an issue event: one read of the file, cached for a while, and the operator's label whenever
the file is missing, invalid or unreadable (the job checks the label again before it
works, with the policy in force).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from bot.errors import OpbotError
from bot.forge.base import ForgeError
from bot.policy import REPOSITORY_POLICY_PATH, Policy, PolicyError, repository_policy

CACHE_S = 300.0

log = logging.getLogger("opbot.labels")

# (forge, repository) -> the text of its .opbot.yaml on the default branch (None: none).
PolicyText = Callable[[str, str], str | None]


def policy_text_from_environment(environ: Mapping[str, str]) -> PolicyText:
    def read(forge: str, repo: str) -> str | None:
        from bot.forge.registry import connect_from_environment

        found = connect_from_environment(forge, repo, environ)
        return found.file_content(REPOSITORY_POLICY_PATH, found.default_branch())
    return read


class TriggerLabels:
    """Each repository's trigger label: its own if its policy names one, else the
    operator's."""

    def __init__(self, ceiling: Policy, read: PolicyText | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._ceiling = ceiling
        self._read = read
        self._clock = clock
        self._cache: dict[tuple[str, str], tuple[float, str]] = {}
        self._lock = threading.Lock()

    @property
    def default(self) -> str:
        return self._ceiling.trigger_label

    def label_for(self, forge: str, repo: str | None) -> str:
        if self._read is None or repo is None:
            return self.default
        key = (forge, repo)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None and self._clock() - cached[0] < CACHE_S:
                return cached[1]
        label = self._lookup(forge, repo)
        with self._lock:
            self._cache[key] = (self._clock(), label)
        return label

    def _lookup(self, forge: str, repo: str) -> str:
        assert self._read is not None
        try:
            text = self._read(forge, repo)
            return repository_policy(self._ceiling, text).policy.trigger_label
        except PolicyError:
            return self.default  # the job tells the repository what is wrong with the file
        except (ForgeError, OpbotError) as exc:
            log.warning("cannot read %s's policy, using the label %r: %s", repo, self.default,
                        exc)
            return self.default
