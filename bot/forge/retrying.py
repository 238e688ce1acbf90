"""Any Forge, with its calls retried when the forge asks to wait or fails on its side.

A rate limit waits what the forge says (Retry-After, X-RateLimit-Reset, folded into
`retry_after_s` by each forge), within a cap; a 5xx or a dropped connection backs off
exponentially. Other errors (404, 403, a conflict) are answers, not failures: no retry.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from bot.forge.base import Forge, RateLimitedError, UnavailableError

MAX_WAIT_S = 300.0


def _wait(state: RetryCallState) -> float:
    error = state.outcome.exception() if state.outcome else None
    if isinstance(error, RateLimitedError) and error.retry_after_s is not None:
        return min(max(error.retry_after_s, 0.0), MAX_WAIT_S)
    return float(min(2 ** (state.attempt_number - 1), 60))


class RetryingForge:
    """Wraps a Forge: every method call goes through the retry policy above."""

    def __init__(self, inner: Forge, *, attempts: int = 5,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._inner = inner
        self._attempts = attempts
        self._sleep = sleep

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if not callable(attribute):
            return attribute

        @functools.wraps(attribute)
        def call(*args: Any, **kwargs: Any) -> Any:
            retrying = Retrying(retry=retry_if_exception_type((RateLimitedError,
                                                               UnavailableError)),
                                stop=stop_after_attempt(self._attempts), wait=_wait,
                                sleep=self._sleep, reraise=True)
            return retrying(attribute, *args, **kwargs)

        return call
