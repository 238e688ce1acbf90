"""Dispatch mode (`opbot serve --dispatch`): the server plans, the CI system does the work.

Each queued plan is handed to its forge's CI (a GitHub `repository_dispatch`, a GitLab
pipeline; see `Forge.dispatch_plan`), where `opbot event` carries it out on the runner
fleet. A dispatch is one request, tried again by the queue rather than inside the call:
a rate limit or a forge outage puts the job back in the queue for later (the forge's
Retry-After, else an exponential backoff), so the worker never sleeps through one job
while others wait. After `RetryPolicy.tries` tries, or at once on an error no retry can
fix (no token, no such repository, no permission), the job is finished as failed, and
the issue or pull request hears so (`given_up_text`).

A person's request is checked before it is handed over (`DispatchGuard`): the permission
check the job itself makes, so a refusal is said by the server, in the job's words, and
no CI run starts for it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from bot.events import Plan
from bot.forge.base import Dispatch, Forge, RateLimitedError, Target, UnavailableError
from bot.identity import Identities
from bot.job_settings import JobSettings, SpendLedger
from bot.policy import Policy


@dataclass(frozen=True)
class RetryPolicy:
    """How often, and how far apart, one job's dispatch is tried."""

    tries: int = 8  # backoff 2, 4, ... 256 s: about eight and a half minutes in all
    backoff_s: float = 2.0
    max_delay_s: float = 900.0

    def delay(self, error: Exception, tries: int) -> float | None:
        """Seconds until the next try after `tries` failed ones; None: give up."""
        if not isinstance(error, (RateLimitedError, UnavailableError)) or tries >= self.tries:
            return None
        if isinstance(error, RateLimitedError) and error.retry_after_s is not None:
            return min(max(error.retry_after_s, 0.0), self.max_delay_s)
        return min(self.backoff_s * 2.0 ** (tries - 1), self.max_delay_s)


def dispatch_from_environment(plan: Plan, environ: Mapping[str, str] | None = None) -> Dispatch:
    """Hand `plan` to its forge's CI, with the credentials `opbot serve` runs jobs with."""
    from bot.jobs import forge_from_environment

    return forge_from_environment(plan, environ).dispatch_plan(plan.to_json())


# A URL's user information (`https://user:token@host/...`): credentials, whatever the
# Redactor knows; the host and path stay, so a person can still tell which call failed.
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s@]+@")
REASON_LIMIT = 200  # characters of a forge's error said in public


def strip_url_credentials(text: str) -> str:
    return _URL_CREDENTIALS.sub(r"\1[REDACTED]@", text)


def public_reason(reason: str, limit: int = REASON_LIMIT) -> str:
    """A forge's error text fit to quote: credentials in URLs removed, its first line only
    (a forge may answer with a whole HTML page), at most `limit` characters. Known secret
    values are the caller's Redactor's to remove first."""
    text = strip_url_credentials(reason)
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return line if len(line) <= limit else line[:limit - 1].rstrip() + "\u2026"


def given_up_text(tries: int, reason: str, job: int) -> str:
    """What the issue or pull request is told when its job never reached CI."""
    return (f"opbot could not hand this job to CI after {tries} "
            f"{'try' if tries == 1 else 'tries'}: {reason}; an operator can retry it with "
            f"`opbot queue retry {job}`.")


def _connect(plan: Plan) -> Forge:
    from bot.jobs import forge_from_environment

    return forge_from_environment(plan)


@dataclass(frozen=True)
class DispatchGuard:
    """The server's side of dispatch mode that talks to the forge itself: the permission
    check before a person's request is handed over, and the note when one never was.
    Forge errors are the caller's to retry (no retries here, as for the dispatch)."""

    policy: Policy  # the operator's: the ceiling a repository's .opbot.yaml may tighten
    identities: Identities
    ledger: SpendLedger
    environ: Mapping[str, str] | None = None
    connect: Callable[[Plan], Forge] = _connect

    def _settings(self, plan: Plan) -> JobSettings:
        settings = JobSettings.from_environment(self.environ, self.ledger)
        return replace(settings, policy=self.policy,
                       bot_login=self.identities.login(plan.forge) or settings.bot_login)

    def refusal(self, plan: Plan) -> str | None:
        """Why the job would refuse `plan` (None: hand it over), answered on its thread as
        the job would answer it."""
        from bot.jobs import HUMAN_TRIGGERS, authorization, command_comment, refusal_text
        from bot.publish import answer_refusal

        if plan.action not in HUMAN_TRIGGERS:
            return None
        settings = self._settings(plan)
        if plan.actor and plan.actor == settings.bot_login:
            return None  # the bot's own echo: the job ignores it quietly
        forge = self.connect(plan)
        refused = authorization(plan, forge, settings).refusal
        # Not knowing its own login, the bot cannot find its status comment: each refusal
        # would be a new comment, so none is said (the job is refused all the same).
        if refused is not None and plan.number is not None and settings.bot_login:
            answer_refusal(forge, _target(plan), refusal_text(refused), settings.bot_login,
                           command_comment(plan))
        return refused

    def report(self, plan: Plan, text: str) -> None:
        """`text` as the bot's status comment on the plan's issue or pull request."""
        from bot.publish import upsert_status

        if plan.number is not None:
            upsert_status(self.connect(plan), _target(plan), text,
                          self._settings(plan).bot_login)


def _target(plan: Plan) -> Target:
    return Target("pull" if plan.target == "pull" else "issue", plan.number or 0)
