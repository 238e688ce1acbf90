"""What a forge's payload parser reports about a delivery, in forge-neutral terms.

Each forge package turns its wire format into these types at its boundary (its
`events.py`): a Trigger it could decide alone (a failed CI run, the schedule, a payload to
ignore), an OpRequest (an issue labelled for the bot), a GenericComment (from anywhere a
person can write one, as in Prow), or a Dispatched plan coming back from CI. bot/events.py
turns each into a Plan; what a comment's command means is decided there, not here, so the
forge layer needs neither the command parser nor the issue form.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from bot.forge.base import ForgeName, TargetKind

Action = Literal["generate", "regen", "iterate-review", "iterate-ci", "scan", "help", "cancel",
                 "ignore"]
ACTIONS: tuple[str, ...] = get_args(Action)

TRIGGER_LABEL = "op-request"
BOT_BRANCH_PREFIX = "opbot/"


@dataclass(frozen=True)
class Trigger:
    """What a delivery asks of the bot, decided (bot/events.py's Plan adds a command)."""

    action: Action
    reason: str
    forge: ForgeName
    event: str
    repo: str | None = None
    number: int | None = None
    op: str | None = None
    actor: str | None = None
    target: TargetKind | None = None
    head_branch: str | None = None
    head_sha: str | None = None
    comment_id: int | None = None


@dataclass(frozen=True)
class OpRequest:
    """An issue that got the trigger label: its body names the operator."""

    forge: ForgeName
    event: str
    repo: str | None
    number: int | None
    actor: str | None
    body: str
    trigger_label: str = TRIGGER_LABEL


@dataclass(frozen=True)
class GenericComment:
    """A comment from anywhere a person can write one to the bot."""

    forge: ForgeName
    event: str
    repo: str | None
    number: int | None
    target: TargetKind
    body: str
    author: str | None
    author_is_bot: bool
    comment_id: int | None
    source: Literal["comment", "review", "review_comment"]
    head_branch: str | None = None  # known for reviews and MR notes, not for PR comments
    head_sha: str | None = None
    issue_labels: tuple[str, ...] | None = None  # known for issue comments
    review_state: str | None = None
    trigger_label: str = TRIGGER_LABEL
    # The pull request's head lives in another repository (a fork): its code is never run.
    # None where the payload does not say (a PR's issue comment): the job checks the API.
    from_fork: bool | None = None


@dataclass(frozen=True)
class Dispatched:
    """A plan `opbot serve --dispatch` handed to CI, as it travelled (unchecked JSON)."""

    forge: ForgeName
    event: str
    repo: str | None
    plan: Any


Inbound = Trigger | OpRequest | GenericComment | Dispatched


@dataclass(frozen=True)
class PlanContext:
    """What parsing knows besides the payload: the bot's own login and the trigger label."""

    bot_login: str | None = None
    trigger_label: str = TRIGGER_LABEL


# A forge's parser for one event: (payload, event name, context) -> what it amounts to. It
# may raise on a malformed payload (TypeError, ValueError, KeyError, ...): bot/events.py
# plans those `ignore`.
Planner = Callable[[Mapping[str, Any], str, PlanContext], Inbound]


def has_trigger(labels: tuple[str, ...], trigger: str) -> bool:
    # Forges treat label names case-insensitively; so does the bot.
    return any(label.lower() == trigger.lower() for label in labels)


def op_of_branch(branch: str | None) -> str | None:
    if branch and branch.startswith(BOT_BRANCH_PREFIX) and len(branch) > len(BOT_BRANCH_PREFIX):
        return branch[len(BOT_BRANCH_PREFIX):]
    return None


def ignored(forge: ForgeName, event: str, repo: str | None, reason: str) -> Trigger:
    return Trigger(action="ignore", reason=reason, forge=forge, event=event, repo=repo)


def scheduled(forge: ForgeName, event: str, repo: str | None) -> Trigger:
    return Trigger(action="scan", reason="the nightly schedule", forge=forge, event=event,
                   repo=repo)
