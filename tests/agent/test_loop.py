"""The LLM loop end to end: `opbot generate --llm openai` driving the real `openai` client
against a scripted OpenAI-compatible server on loopback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fake_llm import ScriptedLLM, Step, reply
from tests.support import CANDIDATES, REPO, run_opbot, run_opbot_here

KEY = "sk-opbot-test-7f3a9c1e5b"
REFERENCE = CANDIDATES / "refs" / "relu.py"
GOOD = (CANDIDATES / "relu__good_tutorial.py").read_text(encoding="utf-8")
# A kernel Triton rejects: the error text must reach the next request.
BROKEN = GOOD.replace("tl.load(", "tl.no_such_load(", 1)
# Runs, but computes the wrong thing: the mismatch figures must reach the next request.
WRONG = GOOD.replace("tl.maximum(x, 0.0)", "x * 2.0", 1)


def _generate(server: ScriptedLLM, out: Path, *extra: str) -> tuple[int, dict[str, object], str]:
    """`opbot generate --llm openai` in this process, its verifications warm (the command
    line's own process: test_auto_uses_a_configured_endpoint and test_cli.py)."""
    run = run_opbot_here("generate", str(REFERENCE), "--backend", "triton", "--llm", "openai",
                         "--llm-base-url", server.base_url, "--llm-model", "scripted-model",
                         "--out", str(out), "--json", *extra,
                         env={"OPBOT_LLM_API_KEY": KEY})
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    return run.code, run.json(), run.stdout + run.stderr


def test_wrong_candidates_differ_from_the_good_one() -> None:
    assert BROKEN != GOOD
    assert WRONG != GOOD


def test_compile_error_then_mismatch_then_pass(tmp_path: Path) -> None:
    with ScriptedLLM([reply(BROKEN), reply(WRONG), reply(GOOD)]) as server:
        code, result, output = _generate(server, tmp_path / "out")
    assert code == 0
    assert result["status"] == "passed"
    assert result["attempts"] == 3
    assert result["stopped_because"] == "passed"
    assert result["tokens"]["total"] > 0  # type: ignore[index]
    requests = server.requests
    assert len(requests) == 3
    for request in requests:
        assert request.headers["authorization"] == f"Bearer {KEY}"
        assert request.body["model"] == "scripted-model"
        assert KEY not in json.dumps(request.body)
    assert "no_such_load" in requests[1].last_user_message()
    transcript = [json.loads(line) for line in (tmp_path / "out" / "transcript.jsonl")
                  .read_text(encoding="utf-8").splitlines()]
    second = next(entry for entry in transcript
                  if entry["kind"] == "verdict" and entry["attempt"] == 2)
    values = next(reason for reason in second["result"]["reasons"]
                  if reason["check"] == "values")
    third_prompt = requests[2].last_user_message()
    assert f"max abs error {values['details']['max_abs_err']:.6g}" in third_prompt
    assert "First mismatches" in third_prompt
    assert KEY not in output
    assert KEY not in (tmp_path / "out" / "transcript.jsonl").read_text(encoding="utf-8")
    assert (tmp_path / "out" / "triton" / "relu.py").read_text(encoding="utf-8").strip() == \
        GOOD.strip()
    # A KernelBench reference: the package's tests run the cases the harness observed.
    tests = (tmp_path / "out" / "tests" / "test_relu.py").read_text(encoding="utf-8")
    assert "CASES = []" not in tests
    assert "CASES = [" in tests


def test_budget_exhaustion_fails_with_the_last_error(tmp_path: Path) -> None:
    with ScriptedLLM([reply(WRONG), reply(BROKEN)]) as server:
        code, result, _ = _generate(server, tmp_path / "out", "--max-attempts", "2")
    assert code == 1
    assert result["status"] == "failed"
    assert result["stopped_because"] == "budget"
    assert result["attempts"] == 2
    assert "no_such_load" in str(result["message"])
    perf = (tmp_path / "out" / "PERF.md").read_text(encoding="utf-8")
    assert "FAILED" in perf or "failed" in perf
    assert "No attempt passed: the package holds attempt 1 of 2, the best one" in perf
    # The best attempt is kept: the one that ran (wrong values), not the one that broke.
    assert result["best_attempt"] == 1
    assert "kept attempt 1, the best of 2: ran, with wrong values" in str(result["message"])
    assert (tmp_path / "out" / "triton" / "relu.py").read_text(encoding="utf-8").strip() == \
        WRONG.strip()
    assert any(reason["check"] == "values" for reason in result["reasons"])  # type: ignore
    assert "Worse than the best so far, attempt 1" in server.requests[1].last_user_message() \
        or "Attempt 1: ran, with wrong values" in server.requests[1].last_user_message()


def test_a_stuck_model_gets_a_fresh_conversation_from_the_best(tmp_path: Path) -> None:
    other = BROKEN.replace("tl.no_such_load(", "tl.no_such_load( ", 1)
    with ScriptedLLM([reply(WRONG), reply(BROKEN), reply(other), reply(GOOD)]) as server:
        code, result, _ = _generate(server, tmp_path / "out")
    assert code == 0, result
    assert result["attempts"] == 4
    restart = server.requests[3].body["messages"]
    assert [message["role"] for message in restart] == ["system", "user"]  # a fresh chat
    seed = str(restart[1]["content"])
    assert "Start again from the best one so far, attempt 1" in seed
    assert "x * 2.0" in seed  # the best draft itself
    assert "- attempt 2:" in seed
    assert "- attempt 3:" in seed
    assert any("a fresh conversation from attempt 1" in note
               for note in result["notes"])  # type: ignore[union-attr]


def test_replies_without_code_are_answered_and_retried(tmp_path: Path) -> None:
    with ScriptedLLM([Step(content="I would use a grid of programs."), reply(GOOD)]) as server:
        code, result, _ = _generate(server, tmp_path / "out")
    assert code == 0
    assert result["attempts"] == 2
    assert "no fenced code block" in server.requests[1].last_user_message()


def test_rate_limits_and_server_errors_are_retried(tmp_path: Path) -> None:
    steps = [Step(status=429, headers={"Retry-After": "0"}),
             Step(status=500, headers={"Retry-After": "0"}), reply(GOOD)]
    with ScriptedLLM(steps) as server:
        code, result, _ = _generate(server, tmp_path / "out")
    assert code == 0
    assert result["attempts"] == 1
    assert len(server.requests) == 3


def test_a_dead_endpoint_is_a_clean_failure(tmp_path: Path) -> None:
    steps = [Step(status=503, headers={"Retry-After": "0"}) for _ in range(10)]
    with ScriptedLLM(steps) as server:
        code, result, output = _generate(server, tmp_path / "out")
    assert code == 1
    assert result["status"] == "failed"
    assert result["stopped_because"] == "llm_error"
    assert "503" in " ".join(result["notes"])  # type: ignore[arg-type]
    assert len(server.requests) == 5  # the first try and four retries
    assert KEY not in output


def test_timeouts_are_retried_then_fail_cleanly(tmp_path: Path) -> None:
    steps = [Step(delay_s=3.0, content="late") for _ in range(6)]
    with ScriptedLLM(steps) as server:
        code, result, _ = _generate(server, tmp_path / "out", "--llm-timeout", "0.5")
    assert code == 1
    assert result["stopped_because"] == "llm_error"
    assert "did not answer" in " ".join(result["notes"])  # type: ignore[arg-type]


def test_auto_uses_a_configured_endpoint(tmp_path: Path) -> None:
    with ScriptedLLM([reply(GOOD)]) as server:
        run = run_opbot("generate", str(REFERENCE), "--out", str(tmp_path / "out"), "--json",
                        "--llm-model", "m", env={"OPBOT_LLM_BASE_URL": server.base_url})
    assert run.code == 0, run.stderr
    assert len(server.requests) == 1


def test_replay_reverifies_each_recorded_candidate(tmp_path: Path) -> None:
    with ScriptedLLM([reply(WRONG), reply(GOOD)]) as server:
        code, _, _ = _generate(server, tmp_path / "out")
    assert code == 0
    run = run_opbot("replay", str(tmp_path / "out" / "transcript.jsonl"), "--json")
    report = run.json()
    assert run.code == 0
    assert report["consistent"] is True
    assert [(item["recorded"], item["replayed"]) for item in report["attempts"]] == [
        ("failed", "failed"), ("passed", "passed")]


@pytest.mark.parametrize("text", ["", "not json at all\n"])
def test_replay_rejects_what_is_not_a_transcript(tmp_path: Path, text: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(text, encoding="utf-8")
    run = run_opbot("replay", str(path))
    assert run.code == 2
    assert "Traceback" not in run.stderr


def test_no_model_is_a_clear_error() -> None:
    run = run_opbot("generate", str(REFERENCE), "--llm", "openai", cwd=REPO,
                    env={"OPBOT_LLM_MODEL": ""})
    assert run.code == 2
    assert "--llm-model" in run.stderr
