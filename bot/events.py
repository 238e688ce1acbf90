"""A webhook delivery (or an Actions event file) -> a plan: what the bot should do, and why.

Planning reads only the payload: no forge call, no side effect, so `--dry-run` is exact.
Comments from every source (GitHub issue comments, review bodies, review comments; GitLab
notes) become one GenericComment first, as in Prow, and one function plans them all.
Payloads are untrusted: every field is read defensively, and a malformed payload is
planned `ignore` with the reason, never an exception.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from bot.commands import RegenCommand, find_regen
from bot.forge.base import DISPATCH_EVENT, ForgeName, TargetKind
from bot.issue_form import op_name_from_body

Action = Literal["generate", "regen", "iterate-review", "iterate-ci", "scan", "ignore"]
ACTIONS: tuple[str, ...] = get_args(Action)

TRIGGER_LABEL = "op-request"
BOT_BRANCH_PREFIX = "opbot/"
_FAILED_CONCLUSIONS = {"failure", "timed_out", "startup_failure"}


@dataclass(frozen=True)
class Plan:
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
        return cls(action=action, reason=str(data.get("reason", "")),
                   forge="gitlab" if data.get("forge") == "gitlab" else "github",
                   event=str(data.get("event", "")), repo=data.get("repo"),
                   number=_int(data.get("number")), op=data.get("op"),
                   actor=data.get("actor"), target=data.get("target"),
                   head_branch=data.get("head_branch"), head_sha=data.get("head_sha"),
                   comment_id=_int(data.get("comment_id")),
                   command=RegenCommand(**command) if isinstance(command, dict) else None)


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


# -- safe payload access -----------------------------------------------------------------


def _get(payload: Any, *path: str) -> Any:
    current = payload
    for key in path:
        if not isinstance(current, Mapping):
            return None
        current = current.get(key)
    return current


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _labels(items: Any) -> tuple[str, ...]:
    if not isinstance(items, list):
        return ()
    names = [_str(item.get("name")) or _str(item.get("title")) if isinstance(item, Mapping)
             else _str(item) for item in items]
    return tuple(name for name in names if name)


@dataclass(frozen=True)
class PlanContext:
    """What planning knows besides the payload: the bot's own login and the trigger label."""

    bot_login: str | None = None
    trigger_label: str = TRIGGER_LABEL


def _has_trigger(labels: tuple[str, ...], trigger: str) -> bool:
    # Forges treat label names case-insensitively; so does the bot.
    return any(label.lower() == trigger.lower() for label in labels)


def op_of_branch(branch: str | None) -> str | None:
    if branch and branch.startswith(BOT_BRANCH_PREFIX) and len(branch) > len(BOT_BRANCH_PREFIX):
        return branch[len(BOT_BRANCH_PREFIX):]
    return None


# -- comments ---------------------------------------------------------------------------


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
    command = find_regen(comment.body)
    if command is not None:
        if comment.target == "issue":
            if comment.issue_labels is not None and not _has_trigger(comment.issue_labels,
                                                                     comment.trigger_label):
                return plan("ignore", f"/regen on an issue without the {comment.trigger_label} "
                            "label")
            return plan("regen", "/regen on an op request issue", command=command)
        if comment.head_branch is not None and op_of_branch(comment.head_branch) is None:
            return plan("ignore", "/regen on a pull request that is not the bot's")
        return plan("regen", "/regen on a pull request", command=command)
    if comment.target != "pull" or op_of_branch(comment.head_branch) is None:
        return plan("ignore", "a comment with no command, not a review of a bot pull request")
    if comment.source == "review":
        if comment.review_state == "changes_requested" or comment.body.strip():
            return plan("iterate-review", "a review with a body or changes requested on a "
                        "bot pull request")
        return plan("ignore", "a review without a body or requested changes")
    if comment.source == "review_comment":
        return plan("iterate-review", "a review comment on a bot pull request")
    return plan("ignore", "a plain comment on a bot pull request (reviews and review "
                "comments drive iteration; /regen regenerates)")


# -- GitHub -----------------------------------------------------------------------------


def _github_author_is_bot(payload: Any, bot_login: str | None) -> bool:
    sender = _get(payload, "sender")
    login = _str(_get(sender, "login"))
    return _get(sender, "type") == "Bot" or (bot_login is not None and login == bot_login)


def _github_issue_comment(payload: Any, event: str, context: PlanContext) -> Plan:
    if _get(payload, "action") != "created":
        return _ignore("github", event, payload, "only new comments are read (not edits or "
                       "deletions)")
    issue = _get(payload, "issue")
    is_pull = isinstance(_get(issue, "pull_request"), Mapping)
    return plan_comment(GenericComment(
        forge="github", event=event, repo=_str(_get(payload, "repository", "full_name")),
        number=_int(_get(issue, "number")), target="pull" if is_pull else "issue",
        body=_str(_get(payload, "comment", "body")) or "",
        author=_str(_get(payload, "comment", "user", "login")),
        author_is_bot=_github_author_is_bot(payload, context.bot_login),
        comment_id=_int(_get(payload, "comment", "id")), source="comment",
        issue_labels=None if is_pull else _labels(_get(issue, "labels")),
        trigger_label=context.trigger_label))


def _github_review(payload: Any, event: str, context: PlanContext) -> Plan:
    if _get(payload, "action") != "submitted":
        return _ignore("github", event, payload, "only submitted reviews are read")
    pull = _get(payload, "pull_request")
    return plan_comment(GenericComment(
        forge="github", event=event, repo=_str(_get(payload, "repository", "full_name")),
        number=_int(_get(pull, "number")), target="pull",
        body=_str(_get(payload, "review", "body")) or "",
        author=_str(_get(payload, "review", "user", "login")),
        author_is_bot=_github_author_is_bot(payload, context.bot_login),
        comment_id=_int(_get(payload, "review", "id")), source="review",
        head_branch=_str(_get(pull, "head", "ref")), head_sha=_str(_get(pull, "head", "sha")),
        review_state=(_str(_get(payload, "review", "state")) or "").lower()))


def _github_review_comment(payload: Any, event: str, context: PlanContext) -> Plan:
    if _get(payload, "action") != "created":
        return _ignore("github", event, payload, "only new review comments are read")
    pull = _get(payload, "pull_request")
    return plan_comment(GenericComment(
        forge="github", event=event, repo=_str(_get(payload, "repository", "full_name")),
        number=_int(_get(pull, "number")), target="pull",
        body=_str(_get(payload, "comment", "body")) or "",
        author=_str(_get(payload, "comment", "user", "login")),
        author_is_bot=_github_author_is_bot(payload, context.bot_login),
        comment_id=_int(_get(payload, "comment", "id")), source="review_comment",
        head_branch=_str(_get(pull, "head", "ref")), head_sha=_str(_get(pull, "head", "sha"))))


def _github_issues(payload: Any, event: str, context: PlanContext) -> Plan:
    action = _get(payload, "action")
    issue = _get(payload, "issue")
    labels = _labels(_get(issue, "labels"))
    added = _str(_get(payload, "label", "name")) or ""
    trigger = context.trigger_label
    triggered = (action == "labeled" and _has_trigger((added,), trigger)) or (
        action == "opened" and _has_trigger(labels, trigger))
    if not triggered:
        return _ignore("github", event, payload, f"an issue event ({action}) that does not add "
                       f"the {context.trigger_label} label")
    body = _str(_get(issue, "body")) or ""
    return Plan(action="generate", reason=f"an issue labelled {context.trigger_label}",
                forge="github",
                event=event, repo=_str(_get(payload, "repository", "full_name")),
                number=_int(_get(issue, "number")), op=op_name_from_body(body),
                actor=_str(_get(payload, "sender", "login")), target="issue")


def _github_ci(payload: Any, event: str, context: PlanContext) -> Plan:
    key = {"check_run": "check_run", "check_suite": "check_suite",
           "workflow_run": "workflow_run"}[event]
    item = _get(payload, key)
    if _get(payload, "action") != "completed":
        return _ignore("github", event, payload, "only completed runs are read")
    conclusion = _str(_get(item, "conclusion"))
    if key == "check_run":
        branch = _str(_get(item, "check_suite", "head_branch"))
    else:
        branch = _str(_get(item, "head_branch"))
    sha = _str(_get(item, "head_sha"))
    pulls = _get(item, "pull_requests")
    number = _int(_get(pulls[0], "number")) if isinstance(pulls, list) and pulls else None
    op = op_of_branch(branch)
    if op is None:
        return _ignore("github", event, payload, f"CI on {branch or 'an unknown branch'}, not a "
                       "bot branch")
    if conclusion not in _FAILED_CONCLUSIONS:
        return _ignore("github", event, payload, f"CI concluded {conclusion}: nothing to fix")
    return Plan(action="iterate-ci", reason=f"a failed {key.replace('_', ' ')} on a bot branch",
                forge="github", event=event, repo=_str(_get(payload, "repository", "full_name")),
                number=number, op=op, actor=_str(_get(payload, "sender", "login")),
                target="pull", head_branch=branch, head_sha=sha)


def _dispatched(forge: ForgeName, event: str, payload: Any, plan: Any) -> Plan:
    """The plan `opbot serve --dispatch` handed to CI, as it travelled in the payload."""
    if not isinstance(plan, Mapping):
        return _ignore(forge, event, payload, "an opbot dispatch without a plan")
    try:
        found = Plan.from_json(plan)
    except (TypeError, ValueError) as exc:
        return _ignore(forge, event, payload, f"an opbot dispatch with a bad plan: {exc}")
    if found.forge != forge:  # its tokens and repository live on the other forge
        return _ignore(forge, event, payload, f"an opbot dispatch of a {found.forge} plan")
    return found


def _github_dispatch(payload: Any, event: str, context: PlanContext) -> Plan:
    """Work `opbot serve` handed to the Actions fleet: the plan travels in the payload."""
    if _get(payload, "action") != DISPATCH_EVENT:
        return _ignore("github", event, payload, "a repository_dispatch that is not opbot's")
    return _dispatched("github", event, payload, _get(payload, "client_payload", "plan"))


def _schedule(forge: ForgeName) -> Callable[[Any, str, PlanContext], Plan]:
    def plan(payload: Any, event: str, context: PlanContext) -> Plan:
        repo = _str(_get(payload, "repository", "full_name")) or _str(
            _get(payload, "project", "path_with_namespace"))
        return Plan(action="scan", reason="the nightly schedule", forge=forge, event=event,
                    repo=repo)
    return plan


_GITHUB: dict[str, Callable[[Any, str, PlanContext], Plan]] = {
    "issues": _github_issues,
    "issue_comment": _github_issue_comment,
    "pull_request_review": _github_review,
    "pull_request_review_comment": _github_review_comment,
    "check_run": _github_ci,
    "check_suite": _github_ci,
    "workflow_run": _github_ci,
    "repository_dispatch": _github_dispatch,
    "schedule": _schedule("github"),
}


# -- GitLab -----------------------------------------------------------------------------


def _gitlab_repo(payload: Any) -> str | None:
    return _str(_get(payload, "project", "path_with_namespace"))


def _gitlab_issue(payload: Any, event: str, context: PlanContext) -> Plan:
    attributes = _get(payload, "object_attributes")
    action = _get(attributes, "action")
    labels = _labels(_get(payload, "labels")) or _labels(_get(attributes, "labels"))
    previous = _labels(_get(payload, "changes", "labels", "previous"))
    current = _labels(_get(payload, "changes", "labels", "current"))
    trigger = context.trigger_label
    added = _has_trigger(current, trigger) and not _has_trigger(previous, trigger)
    triggered = (action == "open" and _has_trigger(labels, trigger)) or (
        action == "update" and added)
    if not triggered:
        return _ignore("gitlab", event, payload, f"an issue event ({action}) that does not add "
                       f"the {context.trigger_label} label")
    return Plan(action="generate", reason=f"an issue labelled {context.trigger_label}",
                forge="gitlab",
                event=event, repo=_gitlab_repo(payload), number=_int(_get(attributes, "iid")),
                op=op_name_from_body(_str(_get(attributes, "description")) or ""),
                actor=_str(_get(payload, "user", "username")), target="issue")


def _gitlab_note(payload: Any, event: str, context: PlanContext) -> Plan:
    attributes = _get(payload, "object_attributes")
    noteable = _get(attributes, "noteable_type")
    author = _str(_get(payload, "user", "username"))
    is_bot = context.bot_login is not None and author == context.bot_login
    common: dict[str, Any] = {
        "forge": "gitlab", "event": event, "repo": _gitlab_repo(payload),
        "body": _str(_get(attributes, "note")) or "", "author": author,
        "author_is_bot": is_bot, "comment_id": _int(_get(attributes, "id"))}
    if noteable == "Issue":
        return plan_comment(GenericComment(
            number=_int(_get(payload, "issue", "iid")), target="issue", source="comment",
            issue_labels=_labels(_get(payload, "issue", "labels")),
            trigger_label=context.trigger_label, **common))
    if noteable == "MergeRequest":
        request = _get(payload, "merge_request")
        in_review = _get(attributes, "type") in ("DiffNote", "DiscussionNote")
        return plan_comment(GenericComment(
            number=_int(_get(request, "iid")), target="pull",
            source="review_comment" if in_review else "comment",
            head_branch=_str(_get(request, "source_branch")),
            head_sha=_str(_get(request, "last_commit", "id")), **common))
    return _ignore("gitlab", event, payload, f"a note on a {noteable or 'unknown object'}")


def _gitlab_pipeline(payload: Any, event: str, context: PlanContext) -> Plan:
    attributes = _get(payload, "object_attributes")
    status = _str(_get(attributes, "status"))
    branch = _str(_get(attributes, "ref"))
    op = op_of_branch(branch)
    if _get(attributes, "source") == "schedule" and op is None:
        if status in ("created", "pending", "running"):
            return _schedule("gitlab")(payload, event, context)
        return _ignore("gitlab", event, payload, f"a scheduled pipeline now {status}")
    if op is None:
        return _ignore("gitlab", event, payload, f"a pipeline on {branch or 'an unknown ref'}, "
                       "not a bot branch")
    if status != "failed":
        return _ignore("gitlab", event, payload, f"a pipeline {status}: nothing to fix")
    return Plan(action="iterate-ci", reason="a failed pipeline on a bot branch", forge="gitlab",
                event=event, repo=_gitlab_repo(payload),
                number=_int(_get(payload, "merge_request", "iid")), op=op,
                actor=_str(_get(payload, "user", "username")), target="pull",
                head_branch=branch, head_sha=_str(_get(attributes, "sha")))


def _gitlab_dispatch(payload: Any, event: str, context: PlanContext) -> Plan:
    """Work `opbot serve` handed to a GitLab pipeline (its OPBOT_PLAN file variable)."""
    if _get(payload, "object_kind") != DISPATCH_EVENT:
        return _ignore("gitlab", event, payload, "a file that is not an opbot dispatch")
    return _dispatched("gitlab", event, payload, _get(payload, "plan"))


_GITLAB: dict[str, Callable[[Any, str, PlanContext], Plan]] = {
    "Issue Hook": _gitlab_issue,
    "Note Hook": _gitlab_note,
    "Pipeline Hook": _gitlab_pipeline,
    DISPATCH_EVENT: _gitlab_dispatch,
    "schedule": _schedule("gitlab"),
}


def _ignore(forge: ForgeName, event: str, payload: Any, reason: str) -> Plan:
    repo = _str(_get(payload, "repository", "full_name")) or _gitlab_repo(payload)
    return Plan(action="ignore", reason=reason, forge=forge, event=event, repo=repo)


def plan_event(forge: ForgeName, event: str, payload: Any, *, bot_login: str | None = None,
               trigger_label: str = TRIGGER_LABEL) -> Plan:
    """The plan for one delivery; unknown events and malformed payloads are `ignore`."""
    handlers = _GITHUB if forge == "github" else _GITLAB
    handler = handlers.get(event)
    if handler is None:
        return _ignore(forge, event, payload, f"the {event!r} event is not one opbot acts on")
    if not isinstance(payload, Mapping):
        return _ignore(forge, event, payload, "the payload is not a JSON object")
    try:
        return handler(payload, event, PlanContext(bot_login, trigger_label))
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
        return _ignore(forge, event, payload, f"a malformed payload ({type(exc).__name__})")
