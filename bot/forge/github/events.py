"""GitHub webhook payloads (and Actions event files) -> forge-neutral triggers, comments,
op requests and dispatched plans (bot/forge/inbound.py).

Payloads are untrusted: every field is read through bot/forge/payload.py, and a payload
that is not what it claims is planned `ignore` with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.forge.base import DISPATCH_EVENT
from bot.forge.inbound import (
    Dispatched,
    GenericComment,
    Inbound,
    OpRequest,
    PlanContext,
    Planner,
    Trigger,
    has_trigger,
    ignored,
    op_of_branch,
    scheduled,
)
from bot.forge.payload import get, integer, labels, text

FORGE = "github"
_FAILED_CONCLUSIONS = {"failure", "timed_out", "startup_failure"}
_ACTIONS_APP = "github-actions"


def repo_of(payload: Any) -> str | None:
    return text(get(payload, "repository", "full_name"))


def _ignore(event: str, payload: Any, reason: str) -> Trigger:
    return ignored(FORGE, event, repo_of(payload), reason)


def _author_is_bot(payload: Any, bot_login: str | None) -> bool:
    sender = get(payload, "sender")
    login = text(get(sender, "login"))
    return get(sender, "type") == "Bot" or (bot_login is not None and login == bot_login)


def _from_fork(pull: Any) -> bool:
    """A fork's pull request: its head repository is not the base's (a deleted fork: null).
    The branch name proves nothing: anyone can call a fork's branch `opbot/...`."""
    head = text(get(pull, "head", "repo", "full_name"))
    return head is None or head != text(get(pull, "base", "repo", "full_name"))


def _issue_comment(payload: Mapping[str, Any], event: str, context: PlanContext) -> Inbound:
    if get(payload, "action") != "created":
        return _ignore(event, payload, "only new comments are read (not edits or deletions)")
    issue = get(payload, "issue")
    is_pull = isinstance(get(issue, "pull_request"), Mapping)
    return GenericComment(
        forge=FORGE, event=event, repo=repo_of(payload),
        number=integer(get(issue, "number")), target="pull" if is_pull else "issue",
        body=text(get(payload, "comment", "body")) or "",
        author=text(get(payload, "comment", "user", "login")),
        author_is_bot=_author_is_bot(payload, context.bot_login),
        comment_id=integer(get(payload, "comment", "id")), source="comment",
        issue_labels=None if is_pull else labels(get(issue, "labels")),
        trigger_label=context.trigger_label)


def _review(payload: Mapping[str, Any], event: str, context: PlanContext) -> Inbound:
    if get(payload, "action") != "submitted":
        return _ignore(event, payload, "only submitted reviews are read")
    pull = get(payload, "pull_request")
    return GenericComment(
        forge=FORGE, event=event, repo=repo_of(payload),
        number=integer(get(pull, "number")), target="pull",
        body=text(get(payload, "review", "body")) or "",
        author=text(get(payload, "review", "user", "login")),
        author_is_bot=_author_is_bot(payload, context.bot_login),
        comment_id=integer(get(payload, "review", "id")), source="review",
        head_branch=text(get(pull, "head", "ref")), head_sha=text(get(pull, "head", "sha")),
        review_state=(text(get(payload, "review", "state")) or "").lower(),
        from_fork=_from_fork(pull))


def _review_comment(payload: Mapping[str, Any], event: str, context: PlanContext) -> Inbound:
    # Every inline comment belongs to a review, and GitHub delivers that review as
    # `pull_request_review.submitted` beside the N comments' deliveries: the review is the one
    # delivery that drives iteration, so a review with 3 comments is one run, not four.
    return _ignore(event, payload, "a review comment: its review's pull_request_review "
                   "delivery drives the iteration")


def _issues(payload: Mapping[str, Any], event: str, context: PlanContext) -> Inbound:
    action = get(payload, "action")
    issue = get(payload, "issue")
    added = text(get(payload, "label", "name")) or ""
    trigger = context.trigger_label
    if action == "opened" and has_trigger(labels(get(issue, "labels")), trigger):
        # An issue created with its labels (an issue form) is delivered twice: `opened`, with
        # the labels on it, and `labeled`. The `labeled` delivery is the request.
        return _ignore(event, payload, f"an issue opened with the {trigger} label: its "
                       "`labeled` delivery is the request")
    if not (action == "labeled" and has_trigger((added,), trigger)):
        return _ignore(event, payload, f"an issue event ({action}) that does not add the "
                       f"{trigger} label")
    return OpRequest(forge=FORGE, event=event, repo=repo_of(payload),
                     number=integer(get(issue, "number")),
                     actor=text(get(payload, "sender", "login")),
                     body=text(get(issue, "body")) or "", trigger_label=trigger)


def _ci_fork(item: Any, payload: Any) -> bool:
    """A workflow run of a fork's code (a pull_request run from a fork names its head repo;
    a deleted fork's, null). A check suite names no head repository."""
    if isinstance(item, Mapping) and "head_repository" in item \
            and item["head_repository"] is None:
        return True
    head = text(get(item, "head_repository", "full_name"))
    base = text(get(item, "repository", "full_name")) or repo_of(payload)
    return head is not None and head != base


def _ci(payload: Mapping[str, Any], event: str, context: PlanContext) -> Inbound:
    """One failed CI run is delivered as check_run (one per job), check_suite and
    workflow_run: exactly one of them may start a fix. Actions runs are read from
    workflow_run; other CI apps' from their check_suite; a check_run never (its suite
    reports the whole run)."""
    item = get(payload, event)
    if get(payload, "action") != "completed":
        return _ignore(event, payload, "only completed runs are read")
    if event == "check_run":
        return _ignore(event, payload, "a check run: its check suite (or workflow run) "
                       "reports the whole CI run")
    slug = text(get(item, "app", "slug"))
    if event == "check_suite" and slug == _ACTIONS_APP:
        return _ignore(event, payload, "a GitHub Actions check suite: its workflow_run "
                       "delivery reports the run")
    if event == "check_suite" and slug is not None and context.bot_login == f"{slug}[bot]":
        # The bot reports its own progress as a check run: a failed job of its own ends its
        # suite, which must never come back as CI to fix (a loop).
        return _ignore(event, payload, "the bot's own check suite (its progress report)")
    if _ci_fork(item, payload):
        return _ignore(event, payload, "CI on a fork's code: opbot never acts on it")
    conclusion = text(get(item, "conclusion"))
    branch = text(get(item, "head_branch"))
    pulls = get(item, "pull_requests")
    number = integer(get(pulls[0], "number")) if isinstance(pulls, list) and pulls else None
    op = op_of_branch(branch)
    if op is None:
        return _ignore(event, payload, f"CI on {branch or 'an unknown branch'}, not a bot "
                       "branch")
    if conclusion not in _FAILED_CONCLUSIONS:
        return _ignore(event, payload, f"CI concluded {conclusion}: nothing to fix")
    return Trigger(action="iterate-ci", reason=f"a failed {event.replace('_', ' ')} on a bot "
                   "branch", forge=FORGE, event=event, repo=repo_of(payload), number=number,
                   op=op, actor=text(get(payload, "sender", "login")), target="pull",
                   head_branch=branch, head_sha=text(get(item, "head_sha")))


def _dispatch(payload: Mapping[str, Any], event: str, context: PlanContext) -> Inbound:
    """Work `opbot serve` handed to the Actions fleet: the plan travels in the payload."""
    if get(payload, "action") != DISPATCH_EVENT:
        return _ignore(event, payload, "a repository_dispatch that is not opbot's")
    sender = text(get(payload, "sender", "login"))
    if context.bot_login is None:
        # Whoever sent it could have written any plan, naming any actor: unknown sender,
        # unknown plan (set OPBOT_BOT_LOGIN, or a token whose user can be read).
        return _ignore(event, payload, "an opbot dispatch, but the bot's own login is "
                       "unknown, so its sender cannot be checked")
    if sender != context.bot_login:
        # Anyone with write access may send a repository_dispatch; a plan names its actor,
        # whose permission the job checks: only the bot's own server may hand one over.
        return _ignore(event, payload, f"an opbot dispatch sent by {sender or 'nobody'}, "
                       "not by the bot")
    return Dispatched(FORGE, event, repo_of(payload), get(payload, "client_payload", "plan"))


def _schedule(payload: Mapping[str, Any], event: str, context: PlanContext) -> Inbound:
    return scheduled(FORGE, event, repo_of(payload))


PLANNERS: dict[str, Planner] = {
    "issues": _issues,
    "issue_comment": _issue_comment,
    "pull_request_review": _review,
    "pull_request_review_comment": _review_comment,
    "check_run": _ci,
    "check_suite": _ci,
    "workflow_run": _ci,
    "repository_dispatch": _dispatch,
    "schedule": _schedule,
}
