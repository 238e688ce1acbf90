"""Policies: defaults, repository overrides from the default branch, limits on changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.policy import PolicyError, default_policy, load_policy
from bot.publish import ChangeLimits, PublishError, check_change
from bot.queue import JobQueue


def test_the_defaults() -> None:
    policy = default_policy()
    assert policy.trigger_label == "op-request"
    assert policy.min_permission == "write"
    assert policy.attempts == 6
    assert policy.folder_for("gelu") == "ops/gelu"
    assert ".github/" in policy.forbidden_paths
    assert not policy.sandbox.allow_unsandboxed
    assert not policy.sandbox.network


def test_a_repository_overrides_parts() -> None:
    policy = load_policy("trigger: {min_permission: maintain}\nbudgets: {attempts: 3}\n"
                         "repositories: [acme/kernels]\n")
    assert policy.min_permission == "maintain"
    assert policy.attempts == 3
    assert policy.tokens == default_policy().tokens  # untouched settings keep their default
    assert policy.allows_repository("acme/kernels")
    assert not policy.allows_repository("acme/other")


def test_money_caps_the_token_budget() -> None:
    policy = load_policy("budgets: {tokens: 1000000, usd_per_job: 0.5, "
                         "usd_per_million_tokens: 10}\n")
    assert policy.token_budget() == 50_000
    assert policy.cost_usd(100_000) == pytest.approx(1.0)


@pytest.mark.parametrize(("text", "field"), [
    ("trigger: {min_permission: god}\n", "trigger.min_permission"),
    ("budgets: {attempts: 0}\n", "budgets.attempts"),
    ("sandbox: {network: maybe}\n", "sandbox.network"),
    ("unknown_key: 1\n", "(top level)"),
    ("- a list\n", ""),
    ("key: [unclosed\n", ""),
])
def test_invalid_policies_name_the_field(text: str, field: str) -> None:
    with pytest.raises(PolicyError, match=field.replace("(", r"\(").replace(")", r"\)")):
        load_policy(text)


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
