"""GitHub's environment: the variables holding the token and API URL, and what an Actions
job's environment says about the event that started it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from bot.forge.plugin import CiInput

TOKEN_VARIABLES = ("OPBOT_GITHUB_TOKEN", "GITHUB_TOKEN")
URL_VARIABLES = ("OPBOT_GITHUB_URL", "GITHUB_API_URL")


def in_actions(environ: Mapping[str, str]) -> bool:
    # An event name alone counts too: it is how a local run imitates an Actions job.
    return environ.get("GITHUB_ACTIONS") == "true" or bool(environ.get("GITHUB_EVENT_NAME"))


def ci_input(environ: Mapping[str, str]) -> CiInput:
    """Actions names the event in GITHUB_EVENT_NAME and writes its payload to the file
    GITHUB_EVENT_PATH names."""
    path = environ.get("GITHUB_EVENT_PATH")
    return CiInput(event=environ.get("GITHUB_EVENT_NAME") or None,
                   payload_path=Path(path) if path else None,
                   scheduled_payload={"repository": {"full_name":
                                                     environ.get("GITHUB_REPOSITORY")}},
                   system="GitHub Actions")
