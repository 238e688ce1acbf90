"""GitLab webhook payloads (and the file a dispatched pipeline gets) -> forge-neutral
triggers, comments, op requests and dispatched plans (bot/forge/inbound.py).

Harmonized with GitHub here: a merge request's iid is the plan's number, a note on the
diff is a review comment. Payloads are untrusted: every field is read through
bot/forge/payload.py, and a payload that is not what it claims is planned `ignore`.
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

FORGE = "gitlab"


def repo_of(payload: Any) -> str | None:
    return text(get(payload, "project", "path_with_namespace"))


def _ignore(event: str, payload: Any, reason: str) -> Trigger:
    return ignored(FORGE, event, repo_of(payload), reason)


def _from_fork(request: Any) -> bool:
    """A merge request from another project (a fork): its source is not its target."""
    source = integer(get(request, "source_project_id"))
    target = integer(get(request, "target_project_id"))
    return source is not None and target is not None and source != target


def _issue(payload: Mapping[str, Any], event: str, context: PlanContext) -> Inbound:
    attributes = get(payload, "object_attributes")
    action = get(attributes, "action")
    current_labels = labels(get(payload, "labels")) or labels(get(attributes, "labels"))
    previous = labels(get(payload, "changes", "labels", "previous"))
    current = labels(get(payload, "changes", "labels", "current"))
    trigger = context.trigger_label
    added = has_trigger(current, trigger) and not has_trigger(previous, trigger)
    triggered = (action == "open" and has_trigger(current_labels, trigger)) or (
        action == "update" and added)
    if not triggered:
        return _ignore(event, payload, f"an issue event ({action}) that does not add the "
                       f"{trigger} label")
    return OpRequest(forge=FORGE, event=event, repo=repo_of(payload),
                     number=integer(get(attributes, "iid")),
                     actor=text(get(payload, "user", "username")),
                     body=text(get(attributes, "description")) or "", trigger_label=trigger)


def _note(payload: Mapping[str, Any], event: str, context: PlanContext) -> Inbound:
    attributes = get(payload, "object_attributes")
    noteable = get(attributes, "noteable_type")
    author = text(get(payload, "user", "username"))
    is_bot = context.bot_login is not None and author == context.bot_login
    common: dict[str, Any] = {
        "forge": FORGE, "event": event, "repo": repo_of(payload),
        "body": text(get(attributes, "note")) or "", "author": author,
        "author_is_bot": is_bot, "comment_id": integer(get(attributes, "id"))}
    if noteable == "Issue":
        return GenericComment(
            number=integer(get(payload, "issue", "iid")), target="issue", source="comment",
            issue_labels=labels(get(payload, "issue", "labels")),
            trigger_label=context.trigger_label, **common)
    if noteable == "MergeRequest":
        request = get(payload, "merge_request")
        in_review = get(attributes, "type") in ("DiffNote", "DiscussionNote")
        return GenericComment(
            number=integer(get(request, "iid")), target="pull",
            source="review_comment" if in_review else "comment",
            head_branch=text(get(request, "source_branch")),
            head_sha=text(get(request, "last_commit", "id")), from_fork=_from_fork(request),
            **common)
    return _ignore(event, payload, f"a note on a {noteable or 'unknown object'}")


def _pipeline(payload: Mapping[str, Any], event: str, context: PlanContext) -> Inbound:
    attributes = get(payload, "object_attributes")
    status = text(get(attributes, "status"))
    branch = text(get(attributes, "ref"))
    op = op_of_branch(branch)
    source = get(attributes, "source")
    if source == "schedule" and op is None:
        # A pipeline hook does not carry a schedule's variables (GitLab adds them to its
        # jobs only), so a server cannot tell the nightly scan's schedule from an hourly
        # lint's: GitLab's scan runs in CI, the template's opbot-scan job (OPBOT_SCAN=true).
        return _ignore(event, payload, "a scheduled pipeline: GitLab's nightly scan runs "
                       "in CI (the template's opbot-scan job), not on its hook")
    if source == "external" and context.bot_login is not None \
            and text(get(payload, "user", "username")) == context.bot_login:
        # The bot's progress is a commit status; where a commit has no pipeline, GitLab
        # makes an external one of it, and a failed job's status fails it: not CI to fix.
        return _ignore(event, payload, "the bot's own commit status (its progress report)")
    if op is None:
        return _ignore(event, payload, f"a pipeline on {branch or 'an unknown ref'}, not a "
                       "bot branch")
    if _from_fork(get(payload, "merge_request")):
        return _ignore(event, payload, "a pipeline of a fork's merge request: opbot never "
                       "acts on a fork's code")
    if status != "failed":
        return _ignore(event, payload, f"a pipeline {status}: nothing to fix")
    return Trigger(action="iterate-ci", reason="a failed pipeline on a bot branch",
                   forge=FORGE, event=event, repo=repo_of(payload),
                   number=integer(get(payload, "merge_request", "iid")), op=op,
                   actor=text(get(payload, "user", "username")), target="pull",
                   head_branch=branch, head_sha=text(get(attributes, "sha")))


def _dispatch(payload: Mapping[str, Any], event: str, context: PlanContext) -> Inbound:
    """Work `opbot serve` handed to a GitLab pipeline (its OPBOT_PLAN file variable)."""
    if get(payload, "object_kind") != DISPATCH_EVENT:
        return _ignore(event, payload, "a file that is not an opbot dispatch")
    return Dispatched(FORGE, event, repo_of(payload), get(payload, "plan"))


def _schedule(payload: Mapping[str, Any], event: str, context: PlanContext) -> Inbound:
    return scheduled(FORGE, event, repo_of(payload))


PLANNERS: dict[str, Planner] = {
    "Issue Hook": _issue,
    "Note Hook": _note,
    "Pipeline Hook": _pipeline,
    DISPATCH_EVENT: _dispatch,
    "schedule": _schedule,
}
