"""Explicit forge registry: a name maps to a Forge class; unknown names are refused."""

from __future__ import annotations

from typing import Protocol

from .base import Forge
from .github import GitHubForge
from .gitlab import GitLabForge


class _Connectable(Protocol):
    def __call__(self, url: str | None, token: str, repo: str) -> Forge: ...


FORGES: dict[str, _Connectable] = {
    GitHubForge.name: GitHubForge.connect,
    GitLabForge.name: GitLabForge.connect,
}


def connect(name: str, *, url: str | None, token: str, repo: str) -> Forge:
    """A Forge for `repo` on the forge called `name` (url None: the public instance)."""
    factory = FORGES.get(name)
    if factory is None:
        valid = ", ".join(sorted(FORGES))
        raise ValueError(f"unknown forge {name!r}; valid forges: {valid}")
    return factory(url, token, repo)
