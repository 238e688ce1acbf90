"""HTTP plumbing shared by both front ends: a request, a reply, pagination, errors."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlencode

T = TypeVar("T")
JSON = "application/json; charset=utf-8"


@dataclass
class Call:
    """One request, as a front end sees it (path relative to the front end's root)."""

    method: str
    path: str  # raw, still percent-encoded
    query: list[tuple[str, str]]
    headers: dict[str, str]  # lower-case names
    body: bytes
    root: str  # absolute URL of the front end's root, e.g. http://127.0.0.1:5000/gitlab/api/v4

    def arg(self, name: str, default: str | None = None) -> str | None:
        return next((v for k, v in self.query if k == name), default)

    def int_arg(self, name: str, default: int) -> int:
        value = self.arg(name)
        return int(value) if value and value.isdigit() else default

    def json(self) -> Any:
        if not self.body:
            return {}
        try:
            return json.loads(self.body)
        except ValueError as exc:
            raise ApiError(400, "Problems parsing JSON") from exc

    def url(self, **replace: str) -> str:
        """This request's own URL with some query parameters replaced (for Link headers)."""
        query = [(k, v) for k, v in self.query if k not in replace] + sorted(replace.items())
        return f"{self.root}{self.path}" + (f"?{urlencode(query)}" if query else "")


@dataclass
class Reply:
    status: int
    body: bytes = b""
    content_type: str = JSON
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, status: int, value: Any, headers: dict[str, str] | None = None) -> Reply:
        return cls(status, json.dumps(value).encode(), JSON, dict(headers or {}))

    @classmethod
    def text(cls, status: int, text: str, headers: dict[str, str] | None = None) -> Reply:
        return cls(status, text.encode(), "text/plain; charset=utf-8", dict(headers or {}))

    @classmethod
    def redirect(cls, location: str) -> Reply:
        return cls(302, b"", "text/html; charset=utf-8", {"Location": location})


class ApiError(Exception):
    """Raised by a handler for an error reply (404, 409, 422 ...) in the forge's format."""

    def __init__(self, status: int, message: str, errors: list[dict[str, Any]] | None = None,
                 ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors or []


@dataclass(frozen=True)
class Page:
    items: Sequence[Any]
    number: int
    per_page: int
    total: int

    @property
    def last(self) -> int:
        return max(1, -(-self.total // self.per_page))


def paginate(call: Call, items: Sequence[T], *, default: int, maximum: int = 100) -> Page:
    per_page = max(1, min(call.int_arg("per_page", default), maximum))
    number = max(1, call.int_arg("page", 1))
    start = (number - 1) * per_page
    return Page(items[start:start + per_page], number, per_page, len(items))


def link_header(call: Call, page: Page) -> dict[str, str]:
    """RFC 8288 `Link` with next/last/first/prev, each pointing back at this server."""
    rels: list[tuple[str, int]] = []
    if page.number < page.last:
        rels += [("next", page.number + 1), ("last", page.last)]
    if page.number > 1:
        rels += [("first", 1), ("prev", page.number - 1)]
    if not rels:
        return {}
    per_page = str(page.per_page)
    links = [f'<{call.url(page=str(n), per_page=per_page)}>; rel="{rel}"' for rel, n in rels]
    return {"Link": ", ".join(links)}
