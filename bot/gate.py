"""`opbot event --gate`: whether an event needs the heavy job, decided before a runner is
taken.

The gate plans the event as a real run plans it (the caller does that: bot/cli.py), then
runs the checks `run_plan` runs before any work: the bot's own event, the policy in force
(the operator's, tightened by the repository's `.opbot.yaml`) and `authorize()`, which
reads the actor's permission from the forge. It reads only: the forge it checks with
refuses every other call (ReadOnlyForge), so no comment, reaction or status comes of it.
Only `answer_refused`, which the caller asks for separately (`--answer-refusals`), posts:
the status comment run_plan would have posted, so that a refused person learns why.

The gate only saves runner time; it is not the guard. The heavy job checks everything
again before it acts. So where the gate cannot tell (no token, the forge failing) it
answers run=true and says why: a doubt never drops a request.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NoReturn, cast

from bot.errors import BadInputError
from bot.events import Plan
from bot.forge.base import Forge, ForgeError, Target
from bot.job_settings import JobSettings
from bot.jobs import HUMAN_TRIGGERS, authorization, authorize, command_comment, refusal_text
from bot.policy import Policy
from bot.publish import answer_refusal

# What the heavy job's workflow reads (GITHUB_OUTPUT's `name=value` lines).
OUTPUT_NAMES = ("run", "action", "op")


@dataclass(frozen=True)
class Verdict:
    """The gate's answer for one plan."""

    plan: Plan
    run: bool
    reason: str
    # The forge was asked (the permission, the repository's policy). False: the gate could
    # not tell, and the heavy job checks before it acts.
    checked: bool = True
    refusal: str | None = None  # authorize()'s words, when it refused
    notes: tuple[str, ...] = ()  # what run_plan tells the repository about its .opbot.yaml
    answered: bool = False  # the refusal was posted (answer_refused)

    def to_json(self) -> dict[str, Any]:
        # The plan's fields stay as `--dry-run` prints them, but `reason` is the gate's:
        # why the heavy job runs or not. The plan's own reason is `plan_reason`.
        return {**self.plan.to_json(), "plan_reason": self.plan.reason, "run": self.run,
                "reason": self.reason, "checked": self.checked, "answered": self.answered}

    def summary(self) -> str:
        plan = self.plan
        number = plan.number if plan.number is not None else "-"
        verb = "run" if self.run else "skip"
        return (f"{verb} {plan.action}: {self.reason} ({plan.repo or '-'}#{number}, "
                f"op {plan.op or '-'})")

    def outputs(self) -> dict[str, str]:
        return {"run": "true" if self.run else "false", "action": self.plan.action,
                "op": self.plan.op or ""}


# -- the forge, read only ------------------------------------------------------------------

READS = frozenset({"name", "repo", "whoami", "permission", "default_branch", "file_content",
                   "get_pull_request", "get_issue", "list_comments"})


class WriteRefusedError(RuntimeError):
    """A write asked of the gate's read-only forge: a bug, never a forge's answer (so no
    `except ForgeError` turns it into "cannot tell")."""


class ReadOnlyForge:
    """A Forge that answers reads and refuses everything else, so that the checks the gate
    borrows from run_plan cannot post, react or report, whatever they grow into."""

    def __init__(self, inner: Forge) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name not in READS:
            raise WriteRefusedError(f"the gate only reads: {name} is not a read")
        return getattr(self._inner, name)


class _Unreachable(Exception):
    """The gate has no forge to ask."""


class _NoForge:
    """Stands in for the forge where the gate has none: the checks that need no forge (the
    operator's allowlist and list of repositories) still refuse; any call means "cannot
    tell here"."""

    def __getattr__(self, name: str) -> NoReturn:
        raise _Unreachable(name)


# -- the decision --------------------------------------------------------------------------


def _unchecked(plan: Plan, why: str) -> Verdict:
    return Verdict(plan, True, f"{plan.reason} (not checked here: {why}; the job checks "
                   "before it acts)", checked=False)


def _refused(plan: Plan, refusal: str, notes: tuple[str, ...] = ()) -> Verdict:
    # The words of run_plan's JobOutcome for the same refusal.
    return Verdict(plan, False, f"refused: {refusal}", refusal=refusal, notes=notes)


def decide(plan: Plan, forge: Forge | None, settings: JobSettings,
           unreachable: str = "no forge access") -> Verdict:
    """Whether run_plan would get past its checks: `forge` read only (None: none to ask,
    for the reason `unreachable`); `settings.bot_login` already resolved."""
    if plan.action == "ignore":
        return Verdict(plan, False, plan.reason)
    if plan.action in HUMAN_TRIGGERS and plan.actor and plan.actor == settings.bot_login:
        return Verdict(plan, False, "ignored: the bot's own event")
    if forge is None:
        return _decide_without_forge(plan, settings, unreachable)
    if settings.bot_login is None and plan.action in HUMAN_TRIGGERS | {"help"}:
        # run_plan waits for its own identity before it answers anyone; the gate cannot
        # tell whether the job will learn it (a lookup that failed for a moment).
        return _unchecked(plan, "the bot's own login could not be read")
    try:
        checked = authorization(plan, forge, settings)
    except ForgeError as exc:
        return _unchecked(plan, f"the forge could not be read: {exc}")
    if checked.refusal is not None:
        return _refused(plan, checked.refusal, checked.notes)
    return Verdict(plan, True, f"authorized: {plan.reason}")


def _decide_without_forge(plan: Plan, settings: JobSettings, why: str) -> Verdict:
    """The operator's policy alone: a repository's .opbot.yaml can only tighten it, so a
    refusal under it stands; whatever needs the forge (the permission) is left to the job."""
    try:
        refusal = authorize(plan, cast(Forge, _NoForge()), settings)
    except _Unreachable:
        return _unchecked(plan, why)
    if refusal is not None:
        return _refused(plan, refusal)
    return _unchecked(plan, why)  # the repository's own policy was not read


# -- the forge, from the environment -------------------------------------------------------


def _whoami(forge: Forge) -> str | None:
    with contextlib.suppress(ForgeError):
        return forge.whoami()
    return None


# The gate's whole answer must come well inside its job's time limit: a forge that asks for
# long waits (a rate limit's Retry-After) is "cannot tell here", and the heavy job checks.
GATE_DEADLINE_S = 60.0


class OutOfTimeError(ForgeError):
    """The forge asked the gate to wait past its deadline."""


def _sleep_until(deadline: float) -> Callable[[float], None]:
    def sleep(seconds: float) -> None:
        if time.monotonic() + seconds > deadline:
            raise OutOfTimeError(f"the forge asked to wait {seconds:.0f} s, past the gate's "
                                 f"{GATE_DEADLINE_S:.0f} s")
        time.sleep(seconds)
    return sleep


def _connect(plan: Plan, environ: Mapping[str, str]) -> Forge:
    from bot.forge.retrying import RetryingForge
    from bot.jobs import forge_from_environment

    deadline = time.monotonic() + GATE_DEADLINE_S
    return cast(Forge, RetryingForge(forge_from_environment(plan, environ),
                                     sleep=_sleep_until(deadline)))


def gate_event(plan: Plan, *, policy: Policy, bot_login: str | None = None,
               environ: Mapping[str, str] | None = None,
               answer_refusals: bool = False) -> Verdict:
    """The gate for `plan` with the credentials the environment holds. `policy` is the
    operator's (the ceiling); `bot_login` who the bot is, where the caller knows."""
    env = os.environ if environ is None else environ
    settings = JobSettings.from_environment(env)
    settings = replace(settings, policy=policy, bot_login=bot_login or settings.bot_login)
    if plan.action == "ignore":  # nothing to ask the forge
        return decide(plan, None, settings)
    try:
        forge = _connect(plan, env)
    except BadInputError as exc:  # no token (or no repository): nothing to read with
        return decide(plan, None, settings, unreachable=str(exc))
    settings = replace(settings, bot_login=settings.bot_login or _whoami(forge))
    verdict = decide(plan, cast(Forge, ReadOnlyForge(forge)), settings)
    if answer_refusals:
        verdict = answer_refused(verdict, forge, settings.bot_login)
        if verdict.run and verdict.checked and plan.action in ANSWERED_HERE:
            verdict = _answer_here(verdict, forge, settings)
    return verdict


# Requests the gate job answers itself on its hosted runner: no accelerator needed to list
# the commands, or to say that a CI run is cancelled in the CI system.
ANSWERED_HERE = frozenset({"help", "cancel"})


def _answer_here(verdict: Verdict, forge: Forge, settings: JobSettings) -> Verdict:
    from bot.jobs import run_plan

    try:
        outcome = run_plan(verdict.plan, forge, settings)
    except ForgeError as exc:  # the heavy job tries again
        return replace(verdict, reason=f"{verdict.reason} (answering here failed: {exc})")
    if not outcome.ok:  # the heavy job tries again
        return replace(verdict, reason=f"{verdict.reason} (answering here failed: "
                       f"{outcome.summary})")
    return replace(verdict, run=False, answered=True,
                   reason=f"answered by the gate: {outcome.summary}")


# -- answering a refused person ------------------------------------------------------------


def answer_refused(verdict: Verdict, forge: Forge, bot_login: str | None) -> Verdict:
    """Tell the person whose request was refused why, as run_plan would have (the bot's
    status comment, or a thumbs-down where it already keeps one; never the notes on the
    repository's .opbot.yaml, which go with work the bot carries out). Only a person's
    request on an issue or pull request is answered (a CI event or the nightly scan has no
    one to tell)."""
    plan = verdict.plan
    if verdict.refusal is None or plan.action not in HUMAN_TRIGGERS or plan.number is None:
        return verdict
    target = Target(plan.target or "issue", plan.number)
    try:
        answer_refusal(forge, target, refusal_text(verdict.refusal), bot_login,
                       command_comment(plan))
    except ForgeError as exc:
        return replace(verdict, reason=f"{verdict.reason} (the answer could not be posted: "
                       f"{exc})")
    return replace(verdict, answered=True)


# -- GitHub Actions' step outputs ----------------------------------------------------------

_LINE_BREAKS = re.compile(r"[\x00-\x1f\x7f\u0085\u2028\u2029]+")


def output_lines(verdict: Verdict) -> str:
    """`name=value` lines for GITHUB_OUTPUT. A value is one line, whatever the payload put
    in it: a line break would end it and start a forged output of its own."""
    return "".join(f"{name}={_LINE_BREAKS.sub(' ', value)}\n"
                   for name, value in verdict.outputs().items())


def write_outputs(verdict: Verdict, environ: Mapping[str, str] | None = None) -> bool:
    """Append the outputs to the file GITHUB_OUTPUT names; False where it names none."""
    env = os.environ if environ is None else environ
    path = env.get("GITHUB_OUTPUT")
    if not path:
        return False
    with Path(path).open("a", encoding="utf-8") as stream:  # appended to, as Actions does
        stream.write(output_lines(verdict))
    return True
