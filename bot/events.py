"""A webhook delivery (or an Actions event file) -> a plan: what the bot should do, and why.

Planning reads only the payload: no forge call, no side effect, so `--dry-run` is exact.
Each forge parses its own payloads (bot/forge/<name>/events.py) into the forge-neutral
types of bot/forge/inbound.py; this module picks the forge from the registry, turns what
the forge reported into a Plan (reading `/regen` commands and op request issues), and keeps
the promise every parser shares: payloads are untrusted, and an unknown event or a
malformed payload is planned `ignore` with the reason, never an exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from bot.commands import RegenCommand, find_command
from bot.forge import registry
from bot.forge.base import ForgeName, PullRequest
from bot.forge.inbound import (
    ACTIONS,
    BOT_BRANCH_PREFIX,
    TRIGGER_LABEL,
    Action,
    Dispatched,
    GenericComment,
    Inbound,
    OpRequest,
    PlanContext,
    Trigger,
    has_trigger,
    ignored,
    op_of_branch,
)
from bot.forge.payload import integer
from bot.issue_form import op_name_from_body

__all__ = ["ACTIONS", "BOT_BRANCH_PREFIX", "TRIGGER_LABEL", "Action", "GenericComment", "Plan",
           "PlanContext", "job_key", "op_of_branch", "plan_comment", "plan_event", "pull_unknown",
           "settle_on_pull"]

# What a parser may raise on a payload that is not what it claims.
_MALFORMED = (TypeError, ValueError, KeyError, AttributeError, IndexError)


@dataclass(frozen=True)
class Plan(Trigger):
    """A trigger with the `/regen` command that asked for it: what a job carries out."""

    command: RegenCommand | None = None

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "reason": self.reason, "forge": self.forge,
                "event": self.event, "repo": self.repo, "number": self.number, "op": self.op,
                "actor": self.actor, "target": self.target, "head_branch": self.head_branch,
                "head_sha": self.head_sha, "comment_id": self.comment_id,
                "command": self.command.to_json() if self.command else None}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Plan:
        command = data.get("command")
        action = data.get("action")
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}")
        # Whether opbot knows the forge is the registry's to say, where the plan is used.
        forge = data.get("forge")
        if not isinstance(forge, str) or not forge:
            raise ValueError(f"the plan names no forge ({forge!r})")
        return cls(action=action, reason=str(data.get("reason", "")), forge=forge,
                   event=str(data.get("event", "")), repo=data.get("repo"),
                   number=integer(data.get("number")), op=data.get("op"),
                   actor=data.get("actor"), target=data.get("target"),
                   head_branch=data.get("head_branch"), head_sha=data.get("head_sha"),
                   comment_id=integer(data.get("comment_id")),
                   command=RegenCommand(**command) if isinstance(command, dict) else None)

    @classmethod
    def of(cls, trigger: Trigger) -> Plan:
        return cls(**{field.name: getattr(trigger, field.name) for field in fields(Trigger)})


# An approval asks for no change ("LGTM" is praise, not a request); a dismissal withdraws one.
_NOTHING_TO_CHANGE = ("approved", "dismissed")


def job_key(plan: Plan) -> str:
    """Jobs with one key run one at a time: one job per operator (or issue) at once."""
    subject = plan.op or (f"#{plan.number}" if plan.number is not None else plan.action)
    return f"{plan.forge}:{plan.repo}:{subject}"


def plan_comment(comment: GenericComment) -> Plan:
    def plan(action: Action, reason: str, **extra: Any) -> Plan:
        return Plan(action=action, reason=reason, forge=comment.forge, event=comment.event,
                    repo=comment.repo, number=comment.number, actor=comment.author,
                    target=comment.target, head_branch=comment.head_branch,
                    head_sha=comment.head_sha, comment_id=comment.comment_id,
                    op=op_of_branch(comment.head_branch), **extra)

    if comment.author_is_bot:
        return plan("ignore", "the comment is the bot's own")
    if comment.number is None or comment.repo is None:
        return plan("ignore", "the payload names no issue or pull request")
    if comment.from_fork:
        return plan("ignore", "a pull request from a fork: opbot never runs a fork's code")
    found = find_command(comment.body)
    if found is not None:
        action: Action = "regen" if found.name == "regen" else \
            "cancel" if found.name == "cancel" else "help"
        where = "an op request issue" if comment.target == "issue" else "a pull request"
        if comment.target == "issue":
            if comment.issue_labels is not None and not has_trigger(comment.issue_labels,
                                                                    comment.trigger_label):
                return plan("ignore", f"/{found.name} on an issue without the "
                            f"{comment.trigger_label} label")
        elif comment.head_branch is not None and op_of_branch(comment.head_branch) is None:
            return plan("ignore", f"/{found.name} on a pull request that is not the bot's")
        return plan(action, f"/{found.name} on {where}", command=found.regen)
    if comment.target != "pull" or op_of_branch(comment.head_branch) is None:
        return plan("ignore", "a comment with no command, not a review of a bot pull request")
    if comment.source == "review":
        if comment.review_state in _NOTHING_TO_CHANGE:
            return plan("ignore", f"a review that asks for nothing ({comment.review_state})")
        return plan("iterate-review", "a review on a bot pull request")
    if comment.source == "review_comment":
        return plan("iterate-review", "a review comment on a bot pull request")
    return plan("ignore", "a plain comment on a bot pull request (reviews and review "
                "comments drive iteration; /regen regenerates)")


def pull_unknown(plan: Plan) -> bool:
    """A plan on a pull request whose payload did not say whose it is: GitHub's
    issue_comment names the pull request but not its head branch nor its head repository."""
    return plan.action in ("regen", "cancel") and plan.target == "pull" \
        and plan.head_branch is None


def settle_on_pull(plan: Plan, pull: PullRequest) -> Plan:
    """`plan` (see pull_unknown) decided by the pull request itself, read from the forge:
    a fork's, or not the bot's, is `ignore`; else the plan learns its op, so that it shares
    one job key with every other job on that operator."""
    def ignore(reason: str) -> Plan:
        return replace(plan, action="ignore", reason=reason, command=None)

    if pull.from_fork:
        return ignore("a pull request from a fork: opbot never runs a fork's code")
    op = op_of_branch(pull.head_branch)
    if op is None:
        return ignore(f"{plan.reason} that is not the bot's (branch `{pull.head_branch}`)")
    return replace(plan, op=op, head_branch=pull.head_branch, head_sha=pull.head_sha)


def _plan_op_request(request: OpRequest) -> Plan:
    return Plan(action="generate", reason=f"an issue labelled {request.trigger_label}",
                forge=request.forge, event=request.event, repo=request.repo,
                number=request.number, op=op_name_from_body(request.body),
                actor=request.actor, target="issue")


def _plan_dispatched(sent: Dispatched) -> Plan:
    """The plan `opbot serve --dispatch` handed to CI, checked as it comes back."""
    def ignore(reason: str) -> Plan:
        return Plan.of(ignored(sent.forge, sent.event, sent.repo, reason))

    if not isinstance(sent.plan, Mapping):
        return ignore("an opbot dispatch without a plan")
    try:
        found = Plan.from_json(sent.plan)
    except (TypeError, ValueError) as exc:
        return ignore(f"an opbot dispatch with a bad plan: {exc}")
    if found.forge != sent.forge:  # its tokens and repository live on the other forge
        return ignore(f"an opbot dispatch of a {found.forge} plan")
    return found


def _plan_of(found: Inbound) -> Plan:
    if isinstance(found, GenericComment):
        return plan_comment(found)
    if isinstance(found, OpRequest):
        return _plan_op_request(found)
    if isinstance(found, Dispatched):
        return _plan_dispatched(found)
    return found if isinstance(found, Plan) else Plan.of(found)


def plan_event(forge: ForgeName, event: str, payload: Any, *, bot_login: str | None = None,
               trigger_label: str = TRIGGER_LABEL) -> Plan:
    """The plan for one delivery; unknown events and malformed payloads are `ignore`.
    An unknown forge raises registry.UnknownForgeError."""
    plugin = registry.plugin(forge)
    planner = plugin.planner(event)
    if planner is None:
        return Plan.of(ignored(forge, event, plugin.repo_of(payload),
                               f"the {event!r} event is not one opbot acts on"))
    if not isinstance(payload, Mapping):
        return Plan.of(ignored(forge, event, None, "the payload is not a JSON object"))
    try:
        return _plan_of(planner(payload, event, PlanContext(bot_login, trigger_label)))
    except _MALFORMED as exc:
        return Plan.of(ignored(forge, event, plugin.repo_of(payload),
                               f"a malformed payload ({type(exc).__name__})"))
