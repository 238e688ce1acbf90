"""Dispatch mode (`opbot serve --dispatch`): the server plans, the CI system does the work.

Each queued plan is handed to its forge's CI (a GitHub `repository_dispatch`, a GitLab
pipeline; see `Forge.dispatch_plan`), where `opbot event` carries it out on the runner
fleet. A dispatch is one request, tried again by the queue rather than inside the call:
a rate limit or a forge outage puts the job back in the queue for later (the forge's
Retry-After, else an exponential backoff), so the worker never sleeps through one job
while others wait. After `RetryPolicy.tries` tries, or at once on an error no retry can
fix (no token, no such repository, no permission), the job is finished as failed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bot.events import Plan
from bot.forge.base import Dispatch, RateLimitedError, UnavailableError


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
