"""The bot's policy: who may trigger it, budgets, nightly limits, paths, the sandbox.

Defaults come from policies/default.yaml; a repository overrides parts of it with
`.opbot.yaml` read from its default branch (never from the pull request being worked on,
which could otherwise loosen its own rules). Both are validated against
policies/schema.json; an invalid repository policy is an error the bot reports, and the
defaults stay in force.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, cast

import jsonschema
import yaml

from bot.errors import BadInputError
from bot.forge.base import Permission
from runners.sandbox import SandboxPolicy

REPOSITORY_POLICY_PATH = ".opbot.yaml"
MAX_POLICY_BYTES = 64 * 1024


class PolicyError(BadInputError):
    """A policy file is not valid; the message names the field."""


@cache
def _schema() -> dict[str, Any]:
    text = resources.files("policies").joinpath("schema.json").read_text(encoding="utf-8")
    return cast(dict[str, Any], json.loads(text))


@cache
def _default_document() -> dict[str, Any]:
    text = resources.files("policies").joinpath("default.yaml").read_text(encoding="utf-8")
    return cast(dict[str, Any], yaml.safe_load(text))


def _merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _validate(document: Any, source: str) -> dict[str, Any]:
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise PolicyError(f"{source}: a policy is a mapping of settings")
    errors = sorted(jsonschema.Draft202012Validator(_schema()).iter_errors(document),
                    key=lambda error: list(error.absolute_path))
    if errors:
        error = errors[0]
        where = ".".join(str(part) for part in error.absolute_path) or "(top level)"
        raise PolicyError(f"{source}: field {where}: {error.message}")
    return document


@dataclass(frozen=True)
class Policy:
    repositories: tuple[str, ...]
    trigger_label: str
    min_permission: Permission
    attempts: int
    tokens: int
    wall_seconds: float
    usd_per_job: float
    usd_per_day: float
    usd_per_million_tokens: float
    nightly_pull_requests: int
    allowed_paths: tuple[str, ...]
    forbidden_paths: tuple[str, ...]
    max_change_bytes: int
    max_file_bytes: int
    sandbox: SandboxPolicy

    def token_budget(self) -> int:
        """Tokens a job may spend: the token budget, capped by the money budget."""
        if self.usd_per_job <= 0 or self.usd_per_million_tokens <= 0:
            return self.tokens
        affordable = int(self.usd_per_job / self.usd_per_million_tokens * 1_000_000)
        return min(self.tokens, affordable)

    def cost_usd(self, tokens: int) -> float:
        return tokens * self.usd_per_million_tokens / 1_000_000

    def allows_repository(self, repo: str | None) -> bool:
        return not self.repositories or repo in self.repositories

    def folder_for(self, op: str) -> str:
        """The folder a change for `op` may touch (the first allowed pattern)."""
        return self.allowed_paths[0].format(op=op).rstrip("/")


def _from_document(document: Mapping[str, Any]) -> Policy:
    trigger, budgets = document["trigger"], document["budgets"]
    paths, sandbox = document["paths"], document["sandbox"]
    return Policy(
        repositories=tuple(document.get("repositories") or ()),
        trigger_label=str(trigger["label"]),
        min_permission=trigger["min_permission"],
        attempts=int(budgets["attempts"]), tokens=int(budgets["tokens"]),
        wall_seconds=float(budgets["wall_seconds"]), usd_per_job=float(budgets["usd_per_job"]),
        usd_per_day=float(budgets["usd_per_day"]),
        usd_per_million_tokens=float(budgets["usd_per_million_tokens"]),
        nightly_pull_requests=int(document["nightly"]["pull_requests"]),
        allowed_paths=tuple(paths["allowed"]), forbidden_paths=tuple(paths["forbidden"]),
        max_change_bytes=int(paths["max_change_bytes"]),
        max_file_bytes=int(paths["max_file_bytes"]),
        sandbox=SandboxPolicy(allow_unsandboxed=bool(sandbox["allow_unsandboxed"]),
                              network=bool(sandbox["network"]),
                              cpu_seconds=int(sandbox["cpu_seconds"]),
                              memory_bytes=sandbox["memory_bytes"],
                              file_bytes=int(sandbox["file_bytes"]),
                              processes=int(sandbox["processes"])))


def default_policy() -> Policy:
    return _from_document(_validate(_default_document(), "policies/default.yaml"))


def load_policy(text: str | None, source: str = REPOSITORY_POLICY_PATH) -> Policy:
    """The defaults overlaid with a repository's policy text (None: the defaults)."""
    base = _validate(_default_document(), "policies/default.yaml")
    if text is None:
        return _from_document(base)
    if len(text) > MAX_POLICY_BYTES:
        raise PolicyError(f"{source}: larger than {MAX_POLICY_BYTES // 1024} KiB")
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PolicyError(f"{source}: not YAML ({exc})") from None
    return _from_document(_merge(base, _validate(document, source)))
