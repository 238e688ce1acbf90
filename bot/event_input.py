"""Where an event comes from on the command line: flags, or the CI system's environment
(each forge says what its CI provides: bot/forge/<name>/environment.py)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bot.errors import BadInputError
from bot.events import TRIGGER_LABEL, Plan, plan_event, pull_unknown, settle_on_pull
from bot.forge import registry
from bot.forge.base import ForgeError, ForgeName
from bot.identity import BOT_LOGIN_VARIABLE, Identities
from bot.payload_json import PayloadError, load_payload

MAX_PAYLOAD_BYTES = 25 * 1024 * 1024  # GitHub caps deliveries at 25 MB


@dataclass(frozen=True)
class Delivery:
    forge: ForgeName
    event: str
    payload: Any

    def plan(self, identities: Identities | None = None,
             trigger_label: str = TRIGGER_LABEL) -> Plan:
        """The delivery's plan; the bot's own events are known by `identities` (default:
        the OPBOT_BOT_LOGIN override alone, which touches nothing: dry runs)."""
        who = identities or Identities(lookup=_no_lookup)
        return plan_event(self.forge, self.event, self.payload, bot_login=who.login(self.forge),
                          trigger_label=trigger_label)


def _no_lookup(forge: str, environ: Mapping[str, str]) -> str:
    raise ForgeError(f"a dry run does not ask {forge} who the bot is (set {BOT_LOGIN_VARIABLE})")


def _read_payload(path: Path) -> Any:
    try:
        if path.stat().st_size > MAX_PAYLOAD_BYTES:
            raise BadInputError(f"{path}: larger than {MAX_PAYLOAD_BYTES // (1024 * 1024)} MB")
        return load_payload(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read the payload ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise BadInputError(f"{path}: the payload is not UTF-8 text") from None
    except PayloadError as exc:
        where = f"{path}:{exc.line}" if exc.line is not None else f"{path}"
        raise BadInputError(f"{where}: the payload is {exc.reason}") from None


def read_event(forge: str | None, event: str | None, payload: Path | None,
               environ: Mapping[str, str] | None = None) -> Delivery:
    """Flags first; the forge's CI environment (GitHub Actions' GITHUB_EVENT_NAME and
    GITHUB_EVENT_PATH) fills gaps. Without --forge, the CI this runs in names the forge."""
    env = os.environ if environ is None else environ
    plugin = registry.plugin(forge) if forge is not None else registry.detect(env)
    ci = plugin.ci_input(env)
    elsewhere = f" (or run in {ci.system})" if ci.system else ""
    name = event or ci.event
    if not name:
        raise BadInputError(f"no event: pass --event NAME{elsewhere}")
    path = payload or ci.payload_path
    if path is None:
        if name != "schedule":
            raise BadInputError(f"no payload: pass --payload FILE{elsewhere}")
        data: Any = dict(ci.scheduled_payload)
    else:
        data = _read_payload(path)
        if name == "schedule" and isinstance(data, dict):
            # A scheduled run's event file need not name the repository: the CI's does.
            data = {**ci.scheduled_payload, **data}
    return Delivery(forge=plugin.name, event=name, payload=data)


def settle_from_forge(plan: Plan, environ: Mapping[str, str] | None = None) -> Plan:
    """A plan the payload left open (events.pull_unknown: a `/regen` comment on a GitHub
    pull request) decided by reading the pull request — read only, with the token the
    environment holds. Without a token, or when the read fails, the plan stays as it was
    and says so: the job reads the pull request again before it does anything."""
    if not pull_unknown(plan) or plan.repo is None or plan.number is None:
        return plan
    env = os.environ if environ is None else environ
    try:
        forge = registry.connect_from_environment(plan.forge, plan.repo, env)
        pull = forge.get_pull_request(plan.number)
    except (BadInputError, ForgeError) as exc:
        return replace(plan, reason=f"{plan.reason} (whether it is the bot's, and not a "
                       f"fork's, is checked when the job runs: {exc})")
    return settle_on_pull(plan, pull)
