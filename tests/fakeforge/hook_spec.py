"""GitHub's official webhook schemas (npm `@octokit/openapi-webhooks` 12.1.0): every GitHub
payload the fake delivers is validated against the schema of its event and action.

The description is vendored in tests/data/openapi (MIT), with the shared data folder beside
the checkout as a fallback; never the network. `require_hook_spec` skips the caller with a
reason that names the missing file. It is OpenAPI 3.1, so its schemas are JSON Schema 2020-12
and jsonschema validates them as they are.
"""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path
from typing import Any

from .spec import SHARED_DATA, VENDORED

HOOK_SPEC_NAME = "github-webhooks-openapi-12.1.0.json.gz"
HOOK_SPEC_PATH = (VENDORED if (VENDORED / HOOK_SPEC_NAME).is_file() else SHARED_DATA) \
    / HOOK_SPEC_NAME
_BASE_URI = "urn:github-webhooks-openapi"


def require_hook_spec(path: Path = HOOK_SPEC_PATH) -> HookSpec:
    """The loaded schemas, or a pytest skip whose reason names the missing file."""
    import pytest

    if not path.is_file():
        pytest.skip(f"GitHub's webhook OpenAPI description is missing: {path} "
                    "(expected in tests/data/openapi or the shared data folder)")
    return load_hook_spec(path)


@functools.cache
def load_hook_spec(path: Path = HOOK_SPEC_PATH) -> HookSpec:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return HookSpec(json.load(fh))


def schema_name(event: str, action: str | None) -> str:
    """`issues`, `labeled` -> `webhook-issues-labeled`; `push`, None -> `webhook-push`."""
    name = f"webhook-{event.replace('_', '-')}"
    return f"{name}-{action.replace('_', '-')}" if action else name


class HookSpec:
    def __init__(self, raw: dict[str, Any]) -> None:
        from referencing import Registry
        from referencing.jsonschema import DRAFT202012

        self.raw = raw
        self._schemas: dict[str, Any] = raw["components"]["schemas"]
        self._registry: Registry[Any] = Registry().with_resource(
            _BASE_URI, DRAFT202012.create_resource(raw))

    def has(self, event: str, action: str | None) -> bool:
        return schema_name(event, action) in self._schemas

    def required_headers(self, event: str, action: str | None) -> list[str]:
        """The headers GitHub documents for this delivery (User-Agent, X-GitHub-Delivery...)."""
        key = schema_name(event, action).removeprefix("webhook-")
        operation = self.raw["webhooks"].get(key, {}).get("post", {})
        return [p["name"] for p in operation.get("parameters", [])
                if p.get("in") == "header" and p.get("required")]

    @functools.lru_cache(maxsize=64)
    def _validator(self, name: str) -> Any:
        from jsonschema import Draft202012Validator

        return Draft202012Validator({"$ref": f"{_BASE_URI}#/components/schemas/{name}"},
                                    registry=self._registry)

    def errors(self, event: str, action: str | None, payload: Any) -> list[str]:
        """One line per problem, empty when the payload is valid for its event and action."""
        name = schema_name(event, action)
        if name not in self._schemas:
            return [f"{event}.{action}: GitHub documents no such webhook ({name})"]
        found = sorted(self._validator(name).iter_errors(payload),
                       key=lambda error: list(error.absolute_path))
        return [f"{event}.{action} payload: {'/'.join(str(p) for p in e.absolute_path)}: "
                f"{e.message[:200]}" for e in found]
