"""Planning: real webhook payloads (and variants of them) -> the right action.

GitHub payloads are real deliveries (@octokit/webhooks-examples); each variant is checked
against GitHub's webhook schema so the tests keep speaking the real format. GitLab payloads
follow GitLab's documented examples.
"""

from __future__ import annotations

import copy
import gzip
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from bot.commands import find_regen
from bot.events import plan_event
from tests.support import DATA, run_opbot

WEBHOOKS = DATA / "webhooks"
WEBHOOK_SCHEMA = DATA / "openapi" / "github-webhooks-openapi-12.1.0.json.gz"

FORM_BODY = ("### Operator name\n\nGELU\n\n### Reference (PyTorch)\n\n```python\nimport torch\n"
             "class Model(torch.nn.Module):\n    def forward(self, x):\n"
             "        return torch.nn.functional.gelu(x)\n\ndef get_inputs():\n"
             "    return [torch.randn(64, 64)]\n```\n\n### Target backends\n\n- [X] triton\n"
             "- [ ] ascendc\n\n### Shapes and dtypes\n\n_No response_\n\n### Notes\n\n"
             "_No response_\n")
OP_LABEL = {"id": 1, "node_id": "MDU6TGFiZWwx", "url": "https://api.github.com/repos/x/y/labels/op-request",
            "name": "op-request", "color": "0e8a16", "default": False, "description": None}


def _load(relative: str) -> dict[str, Any]:
    return json.loads((WEBHOOKS / relative).read_text(encoding="utf-8"))


def _set(payload: dict[str, Any], path: str, value: Any) -> None:
    keys = path.split(".")
    target = payload
    for key in keys[:-1]:
        target = target[key]
    target[keys[-1]] = value


Mutation = Callable[[dict[str, Any]], None]


def changes(**values: Any) -> Mutation:
    def apply(payload: dict[str, Any]) -> None:
        for path, value in values.items():
            _set(payload, path.replace("__", "."), value)
    return apply


def both(*mutations: Mutation) -> Mutation:
    def apply(payload: dict[str, Any]) -> None:
        for mutation in mutations:
            mutation(payload)
    return apply


@cache
def _webhook_validator(key: str) -> Any:
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    with gzip.open(WEBHOOK_SCHEMA) as handle:
        spec = json.loads(handle.read())
    registry: Registry[Any] = Registry().with_resource(
        "urn:github-webhooks", Resource.from_contents(spec, default_specification=DRAFT202012))
    pointer = (f"urn:github-webhooks#/webhooks/{key}/post/requestBody/content/"
               "application~1json/schema")
    return Draft202012Validator({"$ref": pointer}, registry=registry)


def _validate_github(event: str, payload: dict[str, Any]) -> None:
    if not WEBHOOK_SCHEMA.exists():
        pytest.skip(f"GitHub's webhook schema is not at {WEBHOOK_SCHEMA}")
    action = payload.get("action")
    key = event.replace("_", "-") + (f"-{action.replace('_', '-')}" if action else "")
    validator = _webhook_validator(key)
    # The examples predate fields schema 12.1.0 requires (reactions, active_lock_reason...):
    # a missing field is forgiven, a present one must have the right type and value.
    errors = sorted((error for error in validator.iter_errors(payload)
                     if error.validator != "required"), key=lambda error: list(error.path))
    assert not errors, [f"{list(error.path)}: {error.message[:200]}" for error in errors[:3]]


def _op_issue(payload: dict[str, Any]) -> None:
    payload["issue"]["labels"] = [OP_LABEL]
    payload["issue"]["body"] = FORM_BODY


def _pr_comment(payload: dict[str, Any]) -> None:
    payload["issue"]["pull_request"] = {
        "url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/1",
        "html_url": "https://github.com/Codertocat/Hello-World/pull/1",
        "diff_url": "https://github.com/Codertocat/Hello-World/pull/1.diff",
        "patch_url": "https://github.com/Codertocat/Hello-World/pull/1.patch",
        "merged_at": None}


def _actions_app(payload: dict[str, Any]) -> dict[str, Any]:
    """GitHub Actions as a check suite's app (the check_run example's own)."""
    app: dict[str, Any] = _load("github/check_run/completed.1.json")["check_run"]["app"]
    return app


def _labelled(payload: dict[str, Any]) -> None:
    payload["label"] = copy.deepcopy(OP_LABEL)
    payload["issue"]["labels"] = [OP_LABEL]
    payload["issue"]["body"] = FORM_BODY


GITHUB_CASES: list[tuple[str, str, str, Mutation | None, dict[str, Any]]] = [
    ("issue opened with the label: its labeled delivery is the request", "issues",
     "issues/opened.1.json", _op_issue, {"action": "ignore"}),
    ("issue labelled op-request", "issues", "issues/labeled.1.json", _labelled,
     {"action": "generate", "op": "gelu"}),
    ("issue labelled something else", "issues", "issues/labeled.1.json", None,
     {"action": "ignore"}),
    ("issue opened without the label", "issues", "issues/opened.1.json", None,
     {"action": "ignore"}),
    ("issue edited", "issues", "issues/edited.1.json", None, {"action": "ignore"}),
    ("/regen on an op request", "issue_comment", "issue_comment/created.1.json",
     both(_op_issue, changes(comment__body="/regen")), {"action": "regen", "number": 1}),
    ("/regen after some words on its own line", "issue_comment",
     "issue_comment/created.1.json",
     both(_op_issue, changes(comment__body="Thanks!\n\n/regen --force\n")),
     {"action": "regen", "command": {"force": True}}),
    ("/regen mid-sentence", "issue_comment", "issue_comment/created.1.json",
     both(_op_issue, changes(comment__body="please /regen it")), {"action": "ignore"}),
    ("/regen quoted", "issue_comment", "issue_comment/created.1.json",
     both(_op_issue, changes(comment__body="> /regen\n\nno, let's wait")),
     {"action": "ignore"}),
    ("/regen in a code block", "issue_comment", "issue_comment/created.1.json",
     both(_op_issue, changes(comment__body="```\n/regen\n```")), {"action": "ignore"}),
    ("/regen on an issue that is no op request", "issue_comment",
     "issue_comment/created.1.json", changes(comment__body="/regen"), {"action": "ignore"}),
    ("/regen with flags on a PR", "issue_comment", "issue_comment/created.1.json",
     both(_pr_comment, changes(comment__body='/regen --backend triton --hint "two passes"')),
     {"action": "regen", "target": "pull",
      "command": {"backend": "triton", "hint": "two passes", "problem": None}}),
    ("/regen with an unknown flag", "issue_comment", "issue_comment/created.1.json",
     both(_pr_comment, changes(comment__body="/regen --backnd triton")),
     {"action": "regen", "command": {"problem": "unknown argument '--backnd' (did you mean "
                                     "--backend?). Usage: /regen [--backend triton|ascendc[,...]] "
                                     '[--hint "..."] [--force]'}}),
    ("the bot's own comment", "issue_comment", "issue_comment/created.1.json",
     both(_op_issue, changes(comment__body="/regen", sender__type="Bot")),
     {"action": "ignore"}),
    ("a comment edit", "issue_comment", "issue_comment/edited.1.json", None,
     {"action": "ignore"}),
    ("changes requested on a bot PR", "pull_request_review",
     "pull_request_review/submitted.1.json",
     changes(pull_request__head__ref="opbot/gelu", review__state="changes_requested"),
     {"action": "iterate-review", "op": "gelu", "number": 2}),
    ("a review with a body on a bot PR", "pull_request_review",
     "pull_request_review/submitted.1.json",
     changes(pull_request__head__ref="opbot/gelu", review__body="Use 64-bit offsets"),
     {"action": "iterate-review"}),
    ("a bare approval on a bot PR", "pull_request_review",
     "pull_request_review/submitted.1.json",
     changes(pull_request__head__ref="opbot/gelu", review__state="approved", review__body=None),
     {"action": "ignore"}),
    ("an approval saying LGTM on a bot PR", "pull_request_review",
     "pull_request_review/submitted.1.json",
     changes(pull_request__head__ref="opbot/gelu", review__state="approved", review__body="LGTM"),
     {"action": "ignore"}),
    ("a dismissed review on a bot PR", "pull_request_review",
     "pull_request_review/submitted.1.json",
     changes(pull_request__head__ref="opbot/gelu", review__state="dismissed",
             review__body="no longer relevant"), {"action": "ignore"}),
    ("inline comments only (a commented review) on a bot PR", "pull_request_review",
     "pull_request_review/submitted.1.json",
     changes(pull_request__head__ref="opbot/gelu", review__state="commented", review__body=None),
     {"action": "iterate-review"}),
    ("a review on a fork's PR named opbot/...", "pull_request_review",
     "pull_request_review/submitted.1.json",
     changes(pull_request__head__ref="opbot/gelu", review__state="changes_requested",
             pull_request__head__repo__full_name="mallory/Hello-World"), {"action": "ignore"}),
    ("a review on a PR whose fork was deleted", "pull_request_review",
     "pull_request_review/submitted.1.json",
     changes(pull_request__head__ref="opbot/gelu", review__state="changes_requested",
             pull_request__head__repo=None), {"action": "ignore"}),
    ("a review on a person's PR", "pull_request_review", "pull_request_review/submitted.1.json",
     changes(review__body="Please fix"), {"action": "ignore"}),
    ("a review comment on a bot PR: its review's delivery drives", "pull_request_review_comment",
     "pull_request_review_comment/created.1.json",
     changes(pull_request__head__ref="opbot/softmax"), {"action": "ignore"}),
    ("a review comment on a person's PR", "pull_request_review_comment",
     "pull_request_review_comment/created.1.json", None, {"action": "ignore"}),
    ("a failed check run on a bot branch: its suite reports it", "check_run",
     "check_run/completed.1.json",
     changes(check_run__check_suite__head_branch="opbot/gelu", check_run__conclusion="failure"),
     {"action": "ignore"}),
    ("another CI app's failed check suite on a bot branch", "check_suite",
     "check_suite/completed.1.json",
     changes(check_suite__head_branch="opbot/gelu", check_suite__conclusion="failure"),
     {"action": "iterate-ci", "op": "gelu", "number": 2}),
    ("an Actions check suite: its workflow_run reports it", "check_suite",
     "check_suite/completed.1.json",
     both(changes(check_suite__head_branch="opbot/gelu", check_suite__conclusion="failure"),
          lambda p: p["check_suite"].__setitem__("app", _actions_app(p))),
     {"action": "ignore"}),
    ("a failed workflow run of a fork's opbot/... branch", "workflow_run",
     "workflow_run/completed.1.json",
     changes(workflow_run__head_branch="opbot/gelu", workflow_run__conclusion="failure",
             workflow_run__head_repository__full_name="mallory/octo-repo"),
     {"action": "ignore"}),
    ("a passed check run on a bot branch", "check_run", "check_run/completed.1.json",
     changes(check_run__check_suite__head_branch="opbot/gelu", check_run__conclusion="success"),
     {"action": "ignore"}),
    ("a failed workflow run on a bot branch", "workflow_run", "workflow_run/completed.1.json",
     changes(workflow_run__head_branch="opbot/rms_norm", workflow_run__conclusion="failure"),
     {"action": "iterate-ci", "op": "rms_norm"}),
    ("a failed workflow run on main", "workflow_run", "workflow_run/completed.1.json",
     changes(workflow_run__conclusion="failure"), {"action": "ignore"}),
    ("ping", "ping", "ping/event.1.json", None, {"action": "ignore"}),
    ("push", "push", "push/event.1.json", None, {"action": "ignore"}),
]


@pytest.mark.parametrize(("event", "file", "mutation", "expected"),
                         [pytest.param(*case[1:], id=case[0]) for case in GITHUB_CASES])
def test_github_plans(event: str, file: str, mutation: Mutation | None,
                      expected: dict[str, Any]) -> None:
    payload = _load(f"github/{file}")
    if mutation is not None:
        mutation(payload)
    _validate_github(event, payload)
    plan = plan_event("github", event, payload).to_json()
    _assert_subset(plan, expected)
    assert plan["reason"]
    if plan["action"] != "ignore":
        assert plan["repo"] == payload["repository"]["full_name"]


def _gitlab_label(title: str) -> dict[str, Any]:
    return {"id": 999, "title": title, "color": "#0e8a16", "project_id": 14,
            "created_at": "2013-12-03T17:15:43Z", "updated_at": "2013-12-03T17:15:43Z",
            "template": False, "description": None, "type": "ProjectLabel", "group_id": 41}


def _gitlab_open_request(payload: dict[str, Any]) -> None:
    payload["labels"] = [_gitlab_label("op-request")]
    payload["object_attributes"]["labels"] = [_gitlab_label("op-request")]
    payload["object_attributes"]["description"] = FORM_BODY


def _gitlab_label_added(payload: dict[str, Any]) -> None:
    payload["object_attributes"]["action"] = "update"
    payload["object_attributes"]["description"] = FORM_BODY
    payload["changes"]["labels"]["current"].append(_gitlab_label("op-request"))


GITLAB_CASES: list[tuple[str, str, str, Mutation | None, dict[str, Any]]] = [
    ("issue opened with the label", "Issue Hook", "issue_hook.json", _gitlab_open_request,
     {"action": "generate", "number": 23, "op": "gelu", "repo": "gitlabhq/gitlab-test"}),
    ("label added on update", "Issue Hook", "issue_hook.json", _gitlab_label_added,
     {"action": "generate", "number": 23}),
    ("issue without the label", "Issue Hook", "issue_hook.json", None, {"action": "ignore"}),
    ("/regen note on an op request", "Note Hook", "note_hook_issue.json",
     both(changes(object_attributes__note="/regen"),
          lambda p: p["issue"]["labels"].append(_gitlab_label("op-request"))),
     {"action": "regen", "number": 17, "target": "issue"}),
    ("a review note on a bot MR", "Note Hook", "note_hook_merge_request.json",
     changes(merge_request__source_branch="opbot/gelu"),
     {"action": "iterate-review", "number": 1, "op": "gelu", "target": "pull"}),
    ("a plain MR note on a bot MR", "Note Hook", "note_hook_merge_request.json",
     changes(merge_request__source_branch="opbot/gelu", object_attributes__type=None),
     {"action": "ignore"}),
    ("/regen on a bot MR", "Note Hook", "note_hook_merge_request.json",
     changes(merge_request__source_branch="opbot/gelu", object_attributes__type=None,
             object_attributes__note="/regen --force"),
     {"action": "regen", "number": 1, "command": {"force": True}}),
    ("a review note on a person's MR", "Note Hook", "note_hook_merge_request.json", None,
     {"action": "ignore"}),
    ("a review note on a fork's MR named opbot/...", "Note Hook",
     "note_hook_merge_request.json",
     changes(merge_request__source_branch="opbot/gelu", merge_request__source_project_id=99),
     {"action": "ignore"}),
    ("/regen on a fork's MR named opbot/...", "Note Hook", "note_hook_merge_request.json",
     changes(merge_request__source_branch="opbot/gelu", object_attributes__type=None,
             object_attributes__note="/regen", merge_request__source_project_id=99),
     {"action": "ignore"}),
    ("the bot's own diff note", "Note Hook", "note_hook_merge_request.json",
     changes(merge_request__source_branch="opbot/gelu", user__username="opbot"),
     {"action": "ignore"}),
    ("a failed pipeline on a bot branch", "Pipeline Hook", "pipeline_hook.json",
     changes(object_attributes__ref="opbot/gelu"),
     {"action": "iterate-ci", "op": "gelu", "number": 1}),
    ("a passed pipeline on a bot branch", "Pipeline Hook", "pipeline_hook.json",
     changes(object_attributes__ref="opbot/gelu", object_attributes__status="success"),
     {"action": "ignore"}),
    # A hook does not carry the schedule's variables: the scan runs in CI (opbot-scan).
    ("a scheduled pipeline (the nightly scan's, or an hourly lint's)", "Pipeline Hook",
     "pipeline_hook.json",
     changes(object_attributes__source="schedule", object_attributes__status="running"),
     {"action": "ignore"}),
    ("the bot's own failed status, an external pipeline", "Pipeline Hook",
     "pipeline_hook.json",
     changes(object_attributes__ref="opbot/gelu", object_attributes__source="external",
             user__username="opbot"),
     {"action": "ignore"}),
    ("another CI's failed external pipeline", "Pipeline Hook", "pipeline_hook.json",
     changes(object_attributes__ref="opbot/gelu", object_attributes__source="external"),
     {"action": "iterate-ci"}),
    ("a failed pipeline on master", "Pipeline Hook", "pipeline_hook.json", None,
     {"action": "ignore"}),
    ("a failed pipeline of a fork's MR", "Pipeline Hook", "pipeline_hook.json",
     changes(object_attributes__ref="opbot/gelu", merge_request__source_project_id=99),
     {"action": "ignore"}),
    ("a job event", "Job Hook", "job_hook.json", None, {"action": "ignore"}),
    ("a merge request event", "Merge Request Hook", "merge_request_hook.json", None,
     {"action": "ignore"}),
    ("a push", "Push Hook", "push_hook.json", None, {"action": "ignore"}),
]


@pytest.mark.parametrize(("event", "file", "mutation", "expected"),
                         [pytest.param(*case[1:], id=case[0]) for case in GITLAB_CASES])
def test_gitlab_plans(event: str, file: str, mutation: Mutation | None,
                      expected: dict[str, Any]) -> None:
    payload = _load(f"gitlab/{file}")
    if mutation is not None:
        mutation(payload)
    _assert_subset(plan_event("gitlab", event, payload, bot_login="opbot").to_json(), expected)


def _assert_subset(actual: dict[str, Any], expected: dict[str, Any]) -> None:
    for key, value in expected.items():
        if isinstance(value, dict):
            _assert_subset(actual[key], value)
        else:
            assert actual[key] == value, (key, actual)


@pytest.mark.parametrize("payload", [[], "text", {"action": "created"},
                                     {"issue": "not an object", "action": "created"},
                                     {"comment": {"body": 5}, "action": "created"}])
def test_malformed_payloads_are_ignored(payload: Any) -> None:
    plan = plan_event("github", "issue_comment", payload)
    assert plan.action == "ignore"


def test_regen_finds_only_line_leading_commands() -> None:
    assert find_regen("/regen") is not None
    assert find_regen("  /REGEN --force").force  # type: ignore[union-attr]
    assert find_regen("/regenerate") is None
    assert find_regen("x /regen") is None
    problem = find_regen('/regen --hint "unclosed').problem  # type: ignore[union-attr]
    assert problem is not None
    assert "Usage" in problem


def test_event_cli_dry_run(tmp_path: Path) -> None:
    payload = _load("github/issues/labeled.1.json")
    _labelled(payload)
    path = tmp_path / "payload.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    run = run_opbot("event", "--forge", "github", "--event", "issues", "--payload", str(path),
                    "--dry-run", "--json")
    assert run.code == 0, run.stderr
    plan = run.json()
    assert (plan["action"], plan["op"], plan["number"]) == ("generate", "gelu", 1)


def test_event_cli_reads_the_actions_environment(tmp_path: Path) -> None:
    path = tmp_path / "event.json"
    path.write_text(json.dumps({"schedule": "0 3 * * *",
                                "repository": {"full_name": "acme/kernels"}}),
                    encoding="utf-8")
    run = run_opbot("event", "--dry-run", "--json",
                    env={"GITHUB_EVENT_NAME": "schedule", "GITHUB_EVENT_PATH": str(path)})
    assert run.code == 0, run.stderr
    assert run.json()["action"] == "scan"
    assert run.json()["repo"] == "acme/kernels"


@pytest.mark.parametrize("content", ["{not json", "\x00\xff"])
def test_event_cli_bad_payload_is_a_clean_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content.encode("latin-1"))
    run = run_opbot("event", "--forge", "github", "--event", "issues", "--payload", str(path),
                    "--dry-run", "--json")
    assert run.code == 2
    assert "Traceback" not in run.stderr


def test_labels_match_whatever_their_case() -> None:
    payload = _load("github/issues/labeled.1.json")
    _labelled(payload)
    payload["label"]["name"] = "Op-Request"
    assert plan_event("github", "issues", payload).action == "generate"


def test_the_trigger_label_comes_from_the_policy() -> None:
    payload = _load("github/issues/labeled.1.json")
    _labelled(payload)
    payload["label"]["name"] = "kernel-request"
    assert plan_event("github", "issues", payload).action == "ignore"
    plan = plan_event("github", "issues", payload, trigger_label="kernel-request")
    assert plan.action == "generate"


def test_a_workflow_run_without_a_head_repository_is_a_forks() -> None:
    """GitHub's description never makes workflow_run.head_repository null, but a deleted
    fork's pull request has head.repo null: were a run to say the same, it is a fork's."""
    payload = _load("github/workflow_run/completed.1.json")
    payload["workflow_run"].update(head_branch="opbot/gelu", conclusion="failure")
    assert plan_event("github", "workflow_run", payload).action == "iterate-ci"
    payload["workflow_run"]["head_repository"] = None
    assert plan_event("github", "workflow_run", payload).action == "ignore"
