"""GitHub's official REST OpenAPI description: loading, quirk fixes, examples, validation.

The description is vendored in tests/data/openapi (MIT), with the shared data folder
beside the checkout as a fallback; never the network. When both are missing, `require_spec`
skips the caller with a reason that names the path. openapi-core is imported only when a
spec is loaded, so the GitLab front end works without it.
"""

from __future__ import annotations

import copy
import functools
import gzip
import importlib.util
import json
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SPEC_NAME = "github-rest-openapi-23.0.2.json.gz"
# Vendored in the repository (tests/data/openapi, MIT); the shared folder is the fallback.
VENDORED = Path(__file__).resolve().parents[1] / "data" / "openapi"
SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
SPEC_PATH = (VENDORED if (VENDORED / SPEC_NAME).is_file() else SHARED_DATA) / SPEC_NAME
# The spec's only server; requests are validated as if sent there.
SPEC_HOST = "https://api.github.com"


def require_spec(path: Path = SPEC_PATH) -> GitHubSpec:
    """The loaded spec, or a pytest skip whose reason names the missing file."""
    import pytest

    if not path.is_file():
        pytest.skip(f"GitHub's REST OpenAPI description is missing: {path} "
                    "(expected in tests/data/openapi or the shared data folder)")
    if importlib.util.find_spec("openapi_core") is None:
        pytest.skip("openapi-core is not installed: it validates the fake's GitHub traffic "
                    "against the description (pip install 'openapi-core>=0.23')")
    return load_spec(path)


@functools.cache
def load_spec(path: Path = SPEC_PATH) -> GitHubSpec:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        raw = json.load(fh)
    _allow_null_in_nullable_enums(raw)
    return GitHubSpec(raw)


def _allow_null_in_nullable_enums(node: Any) -> None:
    """OpenAPI 3.0 `nullable: true` with an `enum` lacking null rejects valid nulls."""
    if isinstance(node, dict):
        enum = node.get("enum")
        if node.get("nullable") and isinstance(enum, list) and None not in enum:
            enum.append(None)
        for value in node.values():
            _allow_null_in_nullable_enums(value)
    elif isinstance(node, list):
        for value in node:
            _allow_null_in_nullable_enums(value)


# Examples that do not validate against their own schema as published: each gets the
# missing field a real response carries.
def _fix_repository(value: dict[str, Any]) -> None:
    value.setdefault("has_discussions", False)


def _fix_pull_request(value: dict[str, Any]) -> None:
    for team in value.get("requested_teams", []):
        team.setdefault("type", "organization")  # the enum: enterprise | organization


def _fix_job(value: dict[str, Any]) -> None:
    value.setdefault("created_at", value.get("started_at"))


_EXAMPLE_FIXES: dict[str, Callable[[dict[str, Any]], None]] = {
    "full-repository": _fix_repository,
    "pull-request": _fix_pull_request,
    "job": _fix_job,
}


@dataclass
class SpecRequest:
    """openapi-core's Request protocol, plus the route template the fake matched."""

    method: str
    path: str
    path_pattern: str
    path_params: Mapping[str, str]
    query: Iterable[tuple[str, str]]
    headers: Mapping[str, str]
    body: bytes | None
    content_type: str
    host_url: str = SPEC_HOST
    parameters: Any = field(init=False)  # openapi-core's RequestParameters

    def __post_init__(self) -> None:
        from openapi_core.datatypes import RequestParameters
        from werkzeug.datastructures import Headers, ImmutableMultiDict

        self.method = self.method.lower()
        self.parameters = RequestParameters(
            query=ImmutableMultiDict(list(self.query)),
            header=Headers(dict(self.headers)),
            path=dict(self.path_params),
        )


@dataclass
class SpecResponse:
    status_code: int
    data: bytes | None
    headers: Any  # werkzeug Headers: case-insensitive, as openapi-core expects
    content_type: str


class GitHubSpec:
    def __init__(self, raw: dict[str, Any]) -> None:
        from openapi_core import Config, OpenAPI

        self.raw = raw
        self._examples: dict[str, Any] = raw["components"]["examples"]
        # The published description is known-good: skipping its meta-validation saves ~1 s
        # (None turns it off, as openapi-core documents; its type hint leaves None out).
        config = Config(spec_validator_cls=None)  # type: ignore[arg-type]
        self.api = OpenAPI.from_dict(raw, config=config)
        # openapi-core's validators cache lazily; one request at a time keeps that safe.
        self._lock = threading.Lock()

    def has_path(self, template: str) -> bool:
        return template in self.raw["paths"]

    def declares(self, template: str, method: str, status: int) -> bool:
        responses = self.raw["paths"][template][method.lower()]["responses"]
        return str(status) in responses or "default" in responses

    def example(self, name: str) -> dict[str, Any]:
        """A fresh copy of `components/examples/<name>`, fixed where it needs it."""
        value = copy.deepcopy(self._examples[name]["value"])
        fix = _EXAMPLE_FIXES.get(name)
        if fix is not None:
            fix(value)
        return value  # type: ignore[no-any-return]

    def request_errors(self, request: SpecRequest) -> list[str]:
        with self._lock:
            errors = list(self.api.iter_request_errors(request))
        return [_describe(request, "request", err) for err in errors]

    def response_errors(self, request: SpecRequest, response: SpecResponse) -> list[str]:
        from openapi_core.templating.responses.exceptions import ResponseNotFound

        with self._lock:
            try:
                errors = list(self.api.iter_response_errors(request, response))
            except ResponseNotFound as exc:
                errors = [exc]
        return [_describe(request, f"response {response.status_code}", err) for err in errors]


def _describe(request: SpecRequest, what: str, err: Exception) -> str:
    """One line per problem: which call, what failed, and the schema errors' messages."""
    details = [str(err)[:200]]
    for cause in {id(c): c for c in (err.__cause__, err.__context__) if c}.values():
        for schema_error in getattr(cause, "schema_errors", ()) or ():
            location = "/".join(str(p) for p in schema_error.path)
            details.append(f"{location}: {schema_error.message[:200]}")
    return f"{request.method.upper()} {request.path} {what}: " + " | ".join(details)
