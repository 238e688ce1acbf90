"""Where an event comes from on the command line: flags, or the CI system's environment."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.errors import BadInputError
from bot.events import TRIGGER_LABEL, Plan, plan_event
from bot.forge.base import ForgeName

MAX_PAYLOAD_BYTES = 25 * 1024 * 1024  # GitHub caps deliveries at 25 MB
BOT_LOGIN_VARIABLE = "OPBOT_BOT_LOGIN"


@dataclass(frozen=True)
class Delivery:
    forge: ForgeName
    event: str
    payload: Any

    def plan(self, environ: Mapping[str, str] | None = None,
             trigger_label: str = TRIGGER_LABEL) -> Plan:
        env = os.environ if environ is None else environ
        return plan_event(self.forge, self.event, self.payload,
                          bot_login=env.get(BOT_LOGIN_VARIABLE) or None,
                          trigger_label=trigger_label)


def _forge(name: str | None, env: Mapping[str, str]) -> ForgeName:
    if name == "gitlab" or (name is None and env.get("GITLAB_CI") == "true"):
        return "gitlab"
    return "github"


def _read_payload(path: Path) -> Any:
    try:
        if path.stat().st_size > MAX_PAYLOAD_BYTES:
            raise BadInputError(f"{path}: larger than {MAX_PAYLOAD_BYTES // (1024 * 1024)} MB")
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read the payload ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise BadInputError(f"{path}: the payload is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise BadInputError(f"{path}:{exc.lineno}: the payload is not JSON ({exc.msg})"
                            ) from None


def read_event(forge: str | None, event: str | None, payload: Path | None,
               environ: Mapping[str, str] | None = None) -> Delivery:
    """Flags first; in GitHub Actions, GITHUB_EVENT_NAME and GITHUB_EVENT_PATH fill gaps."""
    env = os.environ if environ is None else environ
    name = event or env.get("GITHUB_EVENT_NAME")
    if not name:
        raise BadInputError("no event: pass --event NAME (or run in GitHub Actions)")
    path = payload or (Path(env["GITHUB_EVENT_PATH"]) if env.get("GITHUB_EVENT_PATH") else None)
    if path is None:
        if name != "schedule":
            raise BadInputError("no payload: pass --payload FILE (or run in GitHub Actions)")
        # A GitLab scheduled pipeline has no event file: the project is the CI's own.
        data: Any = {"project": {"path_with_namespace": env.get("CI_PROJECT_PATH")},
                     "repository": {"full_name": env.get("GITHUB_REPOSITORY")}}
    else:
        data = _read_payload(path)
    return Delivery(forge=_forge(forge, env), event=name, payload=data)
