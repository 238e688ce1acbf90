"""Any Forge, with its calls retried when the forge asks to wait or fails on its side.

A rate limit waits what the forge says (Retry-After, X-RateLimit-Reset, folded into
`retry_after_s` by each forge), within a cap; a 5xx or a dropped connection backs off
exponentially. Other errors (404, 403, a conflict) are answers, not failures: no retry.

A 5xx or a dropped connection is ambiguous: the request may have taken effect with only
its answer lost. Reads and updates may simply run again (they set a state), but a create
that runs again creates twice. So the creates look first, before they try again, for what
the lost try made:
- `create_comment`: the newest comment on the target by `whoami()` with exactly that body;
- `create_pull_request`: the open PR from the draft's branch into its base (also after a
  ConflictError: that PR is what was asked for), with the draft's labels added;
- `reply_to_thread`: the newest comment in the thread by `whoami()` with that body;
- `create_issue`: the oldest open issue by `whoami()` with exactly that title
  (`find_issue`; the labels come in the same request, so it has what it could get);
- `dispatch_plan` is retried only after a rate limit (the forge refused it before acting):
  a second dispatch cannot be told from the first, so after a 5xx the error reaches the
  caller, whose queue decides (`opbot serve --dispatch` retries it, knowingly).
Finding an old comment of the bot's with the very same body, posted before the call, is
the price of this: bodies that carry a run's own details (markers, ids) avoid it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from bot.forge.base import (
    Comment,
    ConflictError,
    Dispatch,
    Forge,
    ForgeError,
    Issue,
    PullRequest,
    PullRequestDraft,
    RateLimitedError,
    Target,
    UnavailableError,
)

MAX_WAIT_S = 300.0
T = TypeVar("T")


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
            return self._retry(lambda: attribute(*args, **kwargs))

        return call

    def _retry(self, attempt: Callable[[], T],
               on: tuple[type[Exception], ...] = (RateLimitedError, UnavailableError)) -> T:
        retrying = Retrying(retry=retry_if_exception_type(on),
                            stop=stop_after_attempt(self._attempts), wait=_wait,
                            sleep=self._sleep, reraise=True)
        return retrying(attempt)

    # -- creates: never twice ----------------------------------------------------------------
    def create_comment(self, target: Target, body: str) -> Comment:
        return self._create_once(
            lambda: self._inner.create_comment(target, body),
            lambda: _newest_own(self._inner.list_comments(target), self._me(), body))

    def reply_to_thread(self, number: int, thread_id: str, body: str) -> Comment:
        def made() -> Comment | None:
            thread = next((t for t in self._inner.review_threads(number)
                           if thread_id in (t.id, t.node_id)), None)
            return _newest_own(list(thread.comments), self._me(), body) if thread else None

        return self._create_once(lambda: self._inner.reply_to_thread(number, thread_id, body),
                                 made)

    def create_pull_request(self, draft: PullRequestDraft) -> PullRequest:
        lost = False

        def attempt() -> PullRequest:
            nonlocal lost
            if lost:
                made = self._existing_pull(draft)
                if made is not None:
                    return made
            try:
                return self._inner.create_pull_request(draft)
            except UnavailableError:
                lost = True
                raise
            except ConflictError:
                made = self._existing_pull(draft)
                if made is None:
                    raise
                return made

        return self._retry(attempt)

    def _existing_pull(self, draft: PullRequestDraft) -> PullRequest | None:
        found = self._inner.find_pull_request(draft.head_branch)
        if found is None or found.base_branch != draft.base_branch:
            return None
        missing = [name for name in draft.labels if name not in found.labels]
        if missing:  # the lost try may have opened the PR and not labelled it
            self._inner.add_labels(Target("pull", found.number), missing)
            found = self._inner.get_pull_request(found.number)
        return found

    def create_issue(self, title: str, body: str, labels: Sequence[str] = ()) -> Issue:
        def made() -> Issue | None:
            me = self._me()  # not knowing who the bot is, a second issue beats a wrong one
            return self._inner.find_issue(title, me) if me is not None else None

        return self._create_once(lambda: self._inner.create_issue(title, body, labels), made)

    def _create_once(self, create: Callable[[], T], made: Callable[[], T | None]) -> T:
        """`create`, retried; after an answer lost on the way back, what `made` finds is
        taken for it instead of creating a second one."""
        lost = False

        def attempt() -> T:
            nonlocal lost
            if lost:
                found = made()
                if found is not None:
                    return found
            try:
                return create()
            except UnavailableError:
                lost = True
                raise

        return self._retry(attempt)

    def dispatch_plan(self, plan: Mapping[str, Any]) -> Dispatch:
        return self._retry(lambda: self._inner.dispatch_plan(plan), on=(RateLimitedError,))

    def _me(self) -> str | None:
        """The bot's login (cached by the forge); None where the token may not ask."""
        try:
            return self._inner.whoami()
        except (RateLimitedError, UnavailableError):
            raise
        except ForgeError:
            return None


def _newest_own(comments: list[Comment], me: str | None, body: str) -> Comment | None:
    """The newest comment by `me` with exactly `body`; not knowing who the bot is, only
    the newest comment of all, if it has that body."""
    if me is None:
        return comments[-1] if comments and comments[-1].body == body else None
    return next((c for c in reversed(comments) if c.author == me and c.body == body), None)
