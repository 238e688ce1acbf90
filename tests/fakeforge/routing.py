"""A small router keyed by path templates (GitHub's are the spec's own `paths` keys)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar
from urllib.parse import unquote

H = TypeVar("H", bound=Callable[..., object])

# Parameters whose values hold slashes on the real forges (file paths, branch names,
# `base...head`); every other parameter is one path segment.
GREEDY_PARAMS = frozenset({"path", "branch", "basehead"})


@dataclass(frozen=True)
class Route(Generic[H]):
    method: str
    template: str
    pattern: re.Pattern[str]
    handler: H


@dataclass(frozen=True)
class Match(Generic[H]):
    route: Route[H]
    params: dict[str, str]


def compile_template(template: str) -> re.Pattern[str]:
    parts = re.split(r"(\{[^}]+\})", template)
    regex = ""
    for part in parts:
        if part.startswith("{") and part.endswith("}"):
            name = part[1:-1]
            regex += f"(?P<{name}>.+)" if name in GREEDY_PARAMS else f"(?P<{name}>[^/]+)"
        else:
            regex += re.escape(part)
    return re.compile(f"^{regex}$")


class Router(Generic[H]):
    def __init__(self) -> None:
        self.routes: list[Route[H]] = []

    def add(self, method: str, template: str, handler: H) -> None:
        self.routes.append(Route(method.upper(), template, compile_template(template), handler))

    def route(self, method: str, template: str) -> Callable[[H], H]:
        def register(handler: H) -> H:
            self.add(method, template, handler)
            return handler
        return register

    def match(self, method: str, raw_path: str) -> Match[H] | None:
        """Match on the raw (still percent-encoded) path, then decode each parameter."""
        for route in self.routes:
            if route.method != method.upper():
                continue
            found = route.pattern.match(raw_path)
            if found:
                params = {k: unquote(v) for k, v in found.groupdict().items()}
                return Match(route, params)
        return None

    def allows(self, raw_path: str) -> list[str]:
        return sorted({r.method for r in self.routes if r.pattern.match(raw_path)})
