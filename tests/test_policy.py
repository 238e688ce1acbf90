"""Policies: the operator's ceiling, repositories that may only tighten it, invalid files
reported at their line, hostile files refused quickly, limits on changes."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from bot.policy import (
    _RULES,
    MAX_POLICY_BYTES,
    Policy,
    PolicyError,
    default_policy,
    load_policy,
    repository_policy,
)
from bot.publish import ChangeLimits, PublishError, check_change
from bot.queue import JobQueue

CEILING = default_policy()


def _value(policy: Policy, attribute: str) -> Any:
    """`sandbox.network` reads policy.sandbox.network; other names are Policy fields."""
    value: Any = policy
    for part in attribute.split("."):
        value = getattr(value, part)
    return value


# -- the defaults and the operator's policy ------------------------------------------------


def test_the_defaults() -> None:
    policy = default_policy()
    assert policy.trigger_label == "op-request"
    assert policy.min_permission == "write"
    assert policy.attempts == 6
    assert policy.ci_fixes_per_pull == 3
    assert policy.review_settle_seconds == 20
    assert policy.folder_for("gelu") == "ops/gelu"
    assert ".github/" in policy.forbidden_paths
    assert not policy.sandbox.allow_unsandboxed
    assert not policy.sandbox.network


def test_the_operator_may_loosen_the_defaults() -> None:
    policy = load_policy("trigger: {min_permission: triage}\nbudgets: {attempts: 20}\n"
                         "sandbox: {allow_unsandboxed: true, network: true}\n"
                         "repositories: [acme/kernels]\n", source="operator.yaml")
    assert policy.min_permission == "triage"
    assert policy.attempts == 20
    assert policy.sandbox.allow_unsandboxed
    assert policy.sandbox.network
    assert policy.tokens == CEILING.tokens  # untouched settings keep their default
    assert policy.allows_repository("acme/kernels")
    assert not policy.allows_repository("acme/other")


def test_the_operators_file_is_checked_like_any_other() -> None:
    with pytest.raises(PolicyError, match=r"^operator\.yaml line 2: budgets\.attempts: "):
        load_policy("budgets:\n  attempts: 0\n", source="operator.yaml")


def test_money_caps_the_token_budget() -> None:
    policy = load_policy("budgets: {tokens: 1000000, usd_per_job: 0.5, "
                         "usd_per_million_tokens: 10}\n")
    assert policy.token_budget() == 50_000
    assert policy.cost_usd(100_000) == pytest.approx(1.0)


# -- a repository under the ceiling --------------------------------------------------------


LOOSENINGS = [
    # (.opbot.yaml, attribute, value kept, the note says)
    ("sandbox: {allow_unsandboxed: true}", "sandbox.allow_unsandboxed", False,
     "sandbox.allow_unsandboxed: the operator's policy does not allow true; kept false"),
    ("sandbox: {network: true}", "sandbox.network", False,
     "sandbox.network: the operator's policy does not allow true; kept false"),
    ("budgets: {attempts: 50}", "attempts", 6,
     "budgets.attempts: the operator's policy allows at most 6, not 50; kept 6"),
    ("budgets: {tokens: 900000}", "tokens", 200_000, "budgets.tokens: "),
    ("budgets: {wall_seconds: 99999}", "wall_seconds", 1800, "budgets.wall_seconds: "),
    ("budgets: {usd_per_job: 9.5}", "usd_per_job", 2.0, "not 9.5; kept 2"),
    ("budgets: {usd_per_job: 0}", "usd_per_job", 2.0,
     "budgets.usd_per_job: 0 (no limit) would remove the operator's limit of 2; kept 2"),
    ("budgets: {usd_per_day: 0}", "usd_per_day", 20.0, "budgets.usd_per_day: 0 (no limit)"),
    ("budgets: {usd_per_day: 100}", "usd_per_day", 20.0, "budgets.usd_per_day: "),
    ("budgets: {usd_per_million_tokens: 0.01}", "usd_per_million_tokens", 5.0,
     "budgets.usd_per_million_tokens: the endpoint's price is the operator's to state"),
    ("budgets: {ci_fixes_per_pull: 10}", "ci_fixes_per_pull", 3, "budgets.ci_fixes_per_pull"),
    ("budgets: {review_settle_seconds: 61}", "review_settle_seconds", 60,
     "(3 times its 20), not 61; kept 60"),
    ("nightly: {pull_requests: 50}", "nightly_pull_requests", 3, "nightly.pull_requests: "),
    ("paths: {max_change_bytes: 999999999}", "max_change_bytes", 8388608, "paths.max_change"),
    ("paths: {max_file_bytes: 999999999}", "max_file_bytes", 2097152, "paths.max_file_bytes"),
    ("sandbox: {cpu_seconds: 99999}", "sandbox.cpu_seconds", 3600, "sandbox.cpu_seconds: "),
    ("sandbox: {memory_bytes: 99999999999}", "sandbox.memory_bytes", 17179869184,
     "sandbox.memory_bytes: "),
    ("sandbox: {memory_bytes: null}", "sandbox.memory_bytes", 17179869184,
     "sandbox.memory_bytes: null (no limit) would remove"),
    ("sandbox: {file_bytes: 99999999999}", "sandbox.file_bytes", 536870912, "sandbox.file_"),
    ("sandbox: {processes: 99999}", "sandbox.processes", 1024, "sandbox.processes: "),
    ("trigger: {min_permission: read}", "min_permission", "write",
     "trigger.min_permission: the operator's policy requires at least write, not read"),
    ("trigger: {min_permission: none}", "min_permission", "write", "trigger.min_permission"),
    ("repositories: [evil/fork]", "repositories", (),
     "repositories: the operator's list of repositories stands, not [evil/fork]; kept []"),
    ("paths: {allowed: ['src/']}", "allowed_paths", ("ops/{op}/",),
     "paths.allowed: the operator's policy does not allow src/; dropped"),
    ("paths: {allowed: []}", "allowed_paths", ("ops/{op}/",),
     "paths.allowed: no folder the operator's policy allows is left; kept [ops/{op}/]"),
    ("paths: {allowed: ['ops/{op}/../../.github/']}", "allowed_paths", ("ops/{op}/",),
     "does not allow ops/{op}/../../.github/; dropped"),
    ("paths: {allowed: ['ops/{op}/{op.__class__}/']}", "allowed_paths", ("ops/{op}/",),
     "dropped"),
    ("paths: {allowed: ['ops/gelu/']}", "allowed_paths", ("ops/{op}/",), "dropped"),
    ("paths: {forbidden: []}", "forbidden_paths", CEILING.forbidden_paths,
     "paths.forbidden: a repository can add forbidden paths, not remove the operator's"),
]


@pytest.mark.parametrize(("text", "attribute", "kept", "note"), LOOSENINGS,
                         ids=[row[0] for row in LOOSENINGS])
def test_a_repository_cannot_loosen_the_ceiling(text: str, attribute: str, kept: Any,
                                                note: str) -> None:
    found = repository_policy(CEILING, text + "\n")
    assert _value(found.policy, attribute) == kept
    assert any(note in line for line in found.refused), found.refused


TIGHTENINGS = [
    # (.opbot.yaml, attribute, value in force)
    ("sandbox: {allow_unsandboxed: false, network: false}", "sandbox.network", False),
    ("budgets: {attempts: 2}", "attempts", 2),
    ("budgets: {tokens: 5000}", "tokens", 5000),
    ("budgets: {wall_seconds: 60.5}", "wall_seconds", 60.5),
    ("budgets: {usd_per_job: 0.25}", "usd_per_job", 0.25),
    ("budgets: {usd_per_day: 1}", "usd_per_day", 1.0),
    ("budgets: {usd_per_million_tokens: 5}", "usd_per_million_tokens", 5.0),
    ("budgets: {ci_fixes_per_pull: 0}", "ci_fixes_per_pull", 0),
    ("budgets: {review_settle_seconds: 0}", "review_settle_seconds", 0),
    ("budgets: {review_settle_seconds: 45}", "review_settle_seconds", 45),  # neutral: may rise
    ("nightly: {pull_requests: 0}", "nightly_pull_requests", 0),
    ("paths: {max_change_bytes: 1024, max_file_bytes: 512}", "max_file_bytes", 512),
    ("sandbox: {cpu_seconds: 60, file_bytes: 4096, processes: 64}", "sandbox.processes", 64),
    ("sandbox: {memory_bytes: 1073741824}", "sandbox.memory_bytes", 1073741824),
    ("trigger: {min_permission: maintain}", "min_permission", "maintain"),
    ("trigger: {min_permission: write}", "min_permission", "write"),
    ("trigger: {label: kernel-please}", "trigger_label", "kernel-please"),
    ("repositories: []", "repositories", ()),
    ("paths: {allowed: ['ops/{op}/triton/', 'ops/{op}/']}", "allowed_paths",
     ("ops/{op}/triton/", "ops/{op}/")),
    ("paths: {forbidden: ['ops/{op}/secret/', '.github/']}", "forbidden_paths",
     (*CEILING.forbidden_paths, "ops/{op}/secret/")),
    ("version: 1", "attempts", 6),
]


@pytest.mark.parametrize(("text", "attribute", "value"), TIGHTENINGS,
                         ids=[row[0] for row in TIGHTENINGS])
def test_a_repository_may_tighten_the_ceiling(text: str, attribute: str, value: Any) -> None:
    found = repository_policy(CEILING, text + "\n")
    assert _value(found.policy, attribute) == value
    assert found.refused == ()


def test_the_folder_inside_the_ceiling_is_where_changes_go() -> None:
    found = repository_policy(CEILING, "paths: {allowed: ['src/', 'ops/{op}/triton/']}\n")
    assert found.policy.allowed_paths == ("ops/{op}/triton/",)
    assert found.policy.folder_for("gelu") == "ops/gelu/triton"
    assert found.refused == ("paths.allowed: the operator's policy does not allow src/; "
                             "dropped",)


def test_limits_where_the_operator_has_none() -> None:
    unlimited = load_policy("budgets: {usd_per_job: 0, usd_per_day: 0}\n"
                            "sandbox: {memory_bytes: null}\n")
    found = repository_policy(unlimited, "budgets: {usd_per_job: 1.5}\n"
                                         "sandbox: {memory_bytes: 1073741824}\n")
    assert found.policy.usd_per_job == 1.5
    assert found.policy.usd_per_day == 0
    assert found.policy.sandbox.memory_bytes == 1073741824
    assert found.refused == ()
    assert repository_policy(unlimited, "budgets: {usd_per_day: 0}\n").refused == ()


def test_a_repository_may_turn_off_what_the_operator_allows() -> None:
    loose = load_policy("sandbox: {allow_unsandboxed: true, network: true}\n")
    found = repository_policy(loose, "sandbox: {network: false}\n")
    assert found.policy.sandbox.allow_unsandboxed
    assert not found.policy.sandbox.network
    assert repository_policy(loose, "sandbox: {network: true}\n").policy.sandbox.network


def test_the_operators_repository_list_and_price_stand() -> None:
    ceiling = load_policy("repositories: [acme/kernels]\nbudgets: {usd_per_million_tokens: 8}\n")
    found = repository_policy(ceiling, "repositories: []\nbudgets: {usd_per_million_tokens: 8}\n")
    assert found.policy.repositories == ("acme/kernels",)
    assert found.policy.usd_per_million_tokens == 8
    assert found.refused == ("repositories: the operator's list of repositories stands, "
                             "not []; kept [acme/kernels]",)


def test_every_refusal_is_reported_once() -> None:
    found = repository_policy(CEILING, "sandbox: {allow_unsandboxed: true, network: true}\n"
                                       "budgets: {attempts: 50, tokens: 10}\n"
                                       "trigger: {label: mine, min_permission: none}\n")
    assert len(found.refused) == 4
    assert found.policy.tokens == 10  # a tightening beside refusals still applies
    assert found.policy.trigger_label == "mine"


@pytest.mark.parametrize("text", [None, "", "# nothing but a comment\n", "---\n", "{}\n",
                                  "budgets: {}\n"])
def test_no_settings_leave_the_ceiling(text: str | None) -> None:
    found = repository_policy(CEILING, text)
    assert found.policy == CEILING
    assert found.refused == ()


def test_tightening_keeps_sandbox_settings_a_file_cannot_express() -> None:
    from dataclasses import replace

    ceiling = replace(CEILING, sandbox=replace(CEILING.sandbox, devices=False,
                                               extra_devices=("/dev/davinci0",)))
    found = repository_policy(ceiling, "sandbox: {processes: 64}\n")
    assert found.policy.sandbox.devices is False
    assert found.policy.sandbox.extra_devices == ("/dev/davinci0",)


def _schema_settings(schema: dict[str, Any], prefix: str = "") -> set[str]:
    fields: set[str] = set()
    for key, value in schema["properties"].items():
        if value.get("type") == "object" and "properties" in value:
            fields |= _schema_settings(value, f"{prefix}{key}.")
        else:
            fields.add(f"{prefix}{key}")
    return fields


def test_every_setting_in_the_schema_has_a_rule() -> None:
    text = resources.files("policies").joinpath("schema.json").read_text(encoding="utf-8")
    assert _schema_settings(json.loads(text)) == set(_RULES)


# -- invalid files name the file, the line and the field -----------------------------------


INVALID = [
    # (.opbot.yaml, the whole message, or its start)
    ("version: 1\n\ntrigger:\n  label: ops\n\nbudgets:\n  attempts: -1\n",
     ".opbot.yaml line 7: budgets.attempts: -1 is less than the minimum of 1"),
    ("budgets:\n  attempts: [1\n", ".opbot.yaml line 3, column 1: not valid YAML: expected ',' "
     "or ']', but got '<stream end>', while parsing a flow sequence (it starts on line 2)"),
    ("trigger:\n  label: a: b\n", ".opbot.yaml line 2, column 11: not valid YAML: mapping "
     "values are not allowed here"),
    ("trigger:\n\tlabel: x\n", ".opbot.yaml line 2, column 1: not valid YAML:"),
    ("sandbox:\n  cpu_seconds: 10\n  network: maybe\n",
     ".opbot.yaml line 3: sandbox.network: 'maybe' is not of type 'boolean'"),
    ("budgets:\n  attempts: three\n", ".opbot.yaml line 2: budgets.attempts: 'three' is not "
     "of type 'integer'"),
    ("trigger:\n  label: x\n  lable: y\n", ".opbot.yaml line 3: trigger.lable: not a setting "
     "opbot knows (known here: label, min_permission)"),
    ("budgets: {attempts: 2}\nsandboxx: {}\n", ".opbot.yaml line 2: sandboxx: not a setting "
     "opbot knows"),
    ("nightly:\n  pull_requests: -3\n", ".opbot.yaml line 2: nightly.pull_requests: -3 is "
     "less than the minimum of 0"),
    ("budgets:\n  ci_fixes_per_pull: -1\n", ".opbot.yaml line 2: budgets.ci_fixes_per_pull:"),
    ("budgets:\n  review_settle_seconds: -5\n", ".opbot.yaml line 2: budgets.review_settle"),
    ("budgets: 5\n", ".opbot.yaml line 1: budgets: 5 is not of type 'object'"),
    ("paths:\n  allowed: ops/\n", ".opbot.yaml line 2: paths.allowed: 'ops/' is not of type "
     "'array'"),
    ("paths:\n  forbidden:\n    - docs/\n    - {a: 1}\n", ".opbot.yaml line 4: "
     "paths.forbidden.1: {'a': 1} is not of type 'string'"),
    ("trigger:\n  min_permission: god\n", ".opbot.yaml line 2: trigger.min_permission: 'god' "
     "is not one of"),
    ("budgets:\n  attempts: 0\n  tokens: 0\n", ".opbot.yaml line 2: budgets.attempts: 0 is "
     "less than the minimum of 1 (and 1 more problem)"),
    ("budgets:\n  wall_seconds: .nan\n", ".opbot.yaml line 2: budgets.wall_seconds: not a "
     "finite number"),
    ("budgets:\n  wall_seconds: .inf\n", ".opbot.yaml line 2: budgets.wall_seconds: not a "
     "finite number"),
    ("trigger:\n  label: 2001-13-45\n", ".opbot.yaml line 2, column 10: cannot read the value"),
    ("budgets:\n  attempts: 2\n  attempts: 50\n", ".opbot.yaml line 3, column 3: 'attempts' "
     "is set twice"),
    ("sandbox: !!python/object/apply:os.system ['true']\n",
     ".opbot.yaml line 1, column 10: not valid YAML: could not determine a constructor"),
    ("a: 1\n---\nb: 2\n", ".opbot.yaml line 2, column 1: not valid YAML: but found another "
     "document"),
    ("trigger:\n  label: \x00\n", ".opbot.yaml line 2: not valid YAML: unacceptable character"),
    ("trigger:\n  label: \"op\u202erequest\"\n", ".opbot.yaml line 2: trigger.label: "
     "'op\\u202erequest' holds control, invisible or bidirectional characters"),
    ("- a list\n", ".opbot.yaml line 1: a policy is a mapping of settings, not a list"),
    ("just words\n", ".opbot.yaml line 1: a policy is a mapping of settings, not a single"),
    ("42\n", ".opbot.yaml line 1: a policy is a mapping of settings, not a single value"),
]


@pytest.mark.parametrize(("text", "message"), INVALID, ids=[row[0] for row in INVALID])
def test_an_invalid_file_names_the_line_and_the_field(text: str, message: str) -> None:
    with pytest.raises(PolicyError) as caught:
        repository_policy(CEILING, text)
    assert str(caught.value).startswith(message), str(caught.value)
    assert caught.value.line is not None


def test_the_error_carries_its_parts() -> None:
    with pytest.raises(PolicyError) as caught:
        repository_policy(CEILING, "\n\nbudgets: {attempts: 0}\n", source="x/.opbot.yaml")
    assert (caught.value.file, caught.value.line, caught.value.field) == (
        "x/.opbot.yaml", 3, "budgets.attempts")


def test_the_size_cap() -> None:
    big = "# " + "x" * MAX_POLICY_BYTES + "\n"
    with pytest.raises(PolicyError, match=r"^\.opbot\.yaml: larger than 64 KiB"):
        repository_policy(CEILING, big)
    # Counted in bytes, not characters: 30,000 three-byte characters are 90 KB.
    with pytest.raises(PolicyError, match="larger than"):
        repository_policy(CEILING, "# " + "€" * 30_000 + "\n")
    with pytest.raises(PolicyError, match="larger than"):
        load_policy(big, source="operator.yaml")


BILLION_LAUGHS = "\n".join([
    'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]',
    *(f"{chr(ord('a') + i)}: &{chr(ord('a') + i)} [" + ", ".join([f"*{chr(ord('a') + i - 1)}"]
      * 9) + "]" for i in range(1, 9)),
    "paths: {forbidden: *i}",
]) + "\n"

HOSTILE = [
    # (.opbot.yaml, the message says)
    (BILLION_LAUGHS, r"line 2, column 8: YAML aliases \(\*name\) are not allowed"),
    ("base: &b {network: true}\nsandbox: *b\n", "line 2, column 10: YAML aliases"),
    ("sandbox:\n  <<: {network: true}\n", "line 2, column 3: merge keys"),
    ("x: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper than 16 levels"),
    ("x: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n", "nested deeper than 16 levels"),
    ("[" * 60_000 + "\n", "nested deeper than 16 levels"),
    ("budgets:\n  tokens: " + "9" * 5000 + "\n", "line 2, column 11: a value longer than 1024"),
    ("trigger:\n  label: '" + "x" * 2000 + "'\n", "line 2, column 10: a value longer than"),
]


@pytest.mark.parametrize(("text", "message"), HOSTILE,
                         ids=["billion laughs", "alias", "merge key", "deep lists",
                              "deep mappings", "unclosed nesting", "huge number",
                              "huge string"])
def test_a_hostile_file_is_refused_quickly(text: str, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        repository_policy(CEILING, text)


def test_a_large_honest_file_is_read() -> None:
    entries = "".join(f"    - ops/{{op}}/secret{index}/\n" for index in range(2000))
    found = repository_policy(CEILING, "paths:\n  forbidden:\n" + entries)
    assert len(found.policy.forbidden_paths) == len(CEILING.forbidden_paths) + 2000


def test_the_message_is_plain_text() -> None:
    with pytest.raises(PolicyError) as caught:
        repository_policy(CEILING, "budgets:\n  attempts: [1\n")
    assert "\n" not in str(caught.value)
    assert not re.search(r"<unicode string>|\^", str(caught.value))


# -- limits on changes and money ------------------------------------------------------------


def test_changes_outside_the_operator_folder_are_refused(tmp_path: Path) -> None:
    (tmp_path / "ops" / "gelu").mkdir(parents=True)
    (tmp_path / "ops" / "gelu" / "op.yaml").write_text("name: gelu\n", encoding="utf-8")
    assert check_change(tmp_path, "ops/gelu") == ["ops/gelu/op.yaml"]
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    with pytest.raises(PublishError, match="forbids"):
        check_change(tmp_path, ".github/workflows")
    (tmp_path / "ops" / "gelu" / "link").symlink_to("/etc/passwd")
    with pytest.raises(PublishError, match="symbolic link"):
        check_change(tmp_path, "ops/gelu")
    (tmp_path / "ops" / "gelu" / "link").unlink()
    (tmp_path / "ops" / "gelu" / "blob.bin").write_bytes(b"\x00\x01")
    with pytest.raises(PublishError, match="binary"):
        check_change(tmp_path, "ops/gelu")
    (tmp_path / "ops" / "gelu" / "blob.bin").unlink()
    (tmp_path / "ops" / "gelu" / "big.txt").write_text("x" * 5000, encoding="utf-8")
    with pytest.raises(PublishError, match="larger"):
        check_change(tmp_path, "ops/gelu", ChangeLimits(max_file_bytes=4096))


def test_daily_spend_is_kept_per_repository(tmp_path: Path) -> None:
    queue = JobQueue(tmp_path / "q.sqlite3")
    queue.record("acme/kernels", 1.25)
    queue.record("acme/kernels", 0.5)
    queue.record("acme/other", 3.0)
    assert queue.spent_today("acme/kernels") == pytest.approx(1.75)
    assert queue.spent_today("nobody/else") == 0.0


# -- the runner host's limits (runners/provision/job_limits.py applies them) ---------------


def test_runner_limits_default_and_from_the_operators_file() -> None:
    assert CEILING.runner.memory_bytes == 64 * 1024**3
    assert (CEILING.runner.pids, CEILING.runner.cpus_per_job, CEILING.runner.cpusets) == (
        4096, 0, ())
    policy = load_policy("runner:\n  pids: 512\n  cpusets: {'1': '24-47', '0': '0-23,96-119'}\n",
                         source="operator.yaml")
    assert policy.runner.pids == 512
    assert policy.runner.cpusets == (("0", "0-23,96-119"), ("1", "24-47"))
    assert policy.runner.shm_bytes == CEILING.runner.shm_bytes  # the rest stays default


@pytest.mark.parametrize(("text", "says"), [
    ("runner:\n  cpusets: {'0': '0-3; rm -rf /'}\n", "operator.yaml line 2: runner.cpusets.0"),
    ("runner:\n  cpusets: {npu0: '0-3'}\n", "runner.cpusets"),
    ("runner:\n  memory_bytes: 1024\n", "runner.memory_bytes: 1024 is less than the minimum"),
    ("runner:\n  privileged: true\n", "runner"),
])
def test_runner_limits_that_are_not_valid_are_refused_with_the_place(text: str,
                                                                      says: str) -> None:
    with pytest.raises(PolicyError) as caught:
        load_policy(text, source="operator.yaml")
    assert says in str(caught.value)


def test_a_repository_cannot_change_the_runner_hosts_limits() -> None:
    found = repository_policy(CEILING, "runner:\n  pids: 100000\n  memory_bytes: null\n"
                                       "  cpusets: {'0': '0-255'}\n")
    assert found.policy.runner == CEILING.runner
    assert len(found.refused) == 3
    assert all("runner host's limits are its operator's" in note for note in found.refused)


# -- the LLM request settings (the operator's alone) ---------------------------------------


def test_llm_settings_default_and_per_model() -> None:
    assert CEILING.llm.defaults.max_output_tokens == 16384
    assert CEILING.llm.defaults.stream is True
    assert CEILING.llm.defaults.temperature is None  # not sent: the provider's default
    assert CEILING.llm.defaults.reasoning_effort is None
    policy = load_policy("llm:\n  defaults: {timeout_s: 300}\n  models:\n"
                         "    'deepseek-r1*': {max_output_tokens: 32768, temperature: 0.6}\n"
                         "    '*distill*': {temperature: null, stream: false}\n",
                         source="operator.yaml")
    assert policy.llm.defaults.max_output_tokens == 16384  # untouched keys keep the default
    r1 = policy.llm.for_model("DeepSeek-R1")
    assert (r1.max_output_tokens, r1.temperature, r1.stream, r1.timeout_s) == (
        32768, 0.6, True, 300.0)
    distilled = policy.llm.for_model("deepseek-r1-distill-qwen-32b")  # both match; later wins
    assert (distilled.max_output_tokens, distilled.temperature, distilled.stream) == (
        32768, None, False)
    assert policy.llm.for_model("gpt-4o") == policy.llm.defaults


@pytest.mark.parametrize(("text", "says"), [
    ("llm:\n  defaults:\n    reasoning_effort: extreme\n",
     "operator.yaml line 3: llm.defaults.reasoning_effort"),
    ("llm:\n  defaults:\n    max_output_tokens: 0\n", "llm.defaults.max_output_tokens: 0 is less"),
    ("llm:\n  models:\n    'gpt-*': {top_k: 5}\n", "llm.models.gpt-*.top_k: not a setting"),
    ("llm:\n  defaults: {timeout_s: .inf}\n", "llm.defaults.timeout_s: not a finite number"),
])
def test_llm_settings_that_are_not_valid_are_refused_with_the_place(text: str,
                                                                   says: str) -> None:
    with pytest.raises(PolicyError) as caught:
        load_policy(text, source="operator.yaml")
    assert says in str(caught.value)


def test_a_repository_cannot_change_the_llm_settings() -> None:
    ceiling = load_policy("llm:\n  models:\n    'gpt-*': {temperature: 0.2}\n")
    found = repository_policy(ceiling, "llm:\n  defaults: {max_output_tokens: 100000}\n"
                                       "  models:\n    'gpt-*': {temperature: 1.5}\n")
    assert found.policy.llm == ceiling.llm
    assert len(found.refused) == 2
    assert all("LLM request settings are the operator's" in note for note in found.refused)
    assert repository_policy(ceiling, "budgets: {attempts: 2}\n").policy.llm == ceiling.llm
    # Repeating part of the operator's settings changes nothing, so nothing is refused.
    same = repository_policy(ceiling, "llm:\n  defaults: {stream: true}\n  models:\n"
                                      "    'gpt-*': {temperature: 0.2}\n")
    assert same.refused == ()
    assert same.policy == ceiling
