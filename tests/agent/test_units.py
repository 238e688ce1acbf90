"""Feedback shaping, redaction and LLM settings: the agent loop's backend-neutral small parts.
(Triton reply parsing and prompts: tests/backends/triton/test_prompts_and_replies.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from bot.agent.feedback import truncate_middle, verification_feedback
from bot.agent.llm import LLMSettings, llm_configured
from bot.agent.transcript import REDACTED, Redactor
from bot.errors import BadInputError
from runners.base import CaseResult, Failure, SourceLocation, VerifyResult
from runners.harness.compare import _nan_inf_failure


def _failure(case: str, error: float) -> Failure:
    return Failure(check="values", case=case, output=0, message="m",
                   details={"max_abs_err": error, "max_rel_err": error, "mismatches": 3,
                            "total": 10, "atol": 1e-5, "rtol": 1.3e-6,
                            "first_mismatches": [{"index": [0, 8], "expected": 1.0,
                                                  "actual": 0.0}],
                            "mismatch_index_ranges": [[0, 1, 2], [8, 9, 10]]})


def test_feedback_groups_repeats_and_names_the_tail() -> None:
    cases = [CaseResult("tail-1", [[2, 10]], ["float32"], 1, False),
             CaseResult("main", [[64, 100]], ["float32"], 0, False)]
    result = VerifyResult(status="failed", reasons=[_failure("tail-1", 1.5),
                                                    _failure("main", 2.25)],
                          cases=cases, stages=[], device="cpu")
    text = verification_feedback(result)
    assert "1 distinct problem" in text
    assert "input shapes 2x10" in text
    assert "max abs error 1.5" in text
    assert "expected 1, got 0" in text
    assert "indices 8..9 of 10" in text
    assert "main (max abs error 2.25)" in text


def test_nan_only_in_the_last_columns_is_called_the_tail() -> None:
    """A missing load mask that reads garbage past each row's end shows as NaN there."""
    expected = np.zeros((37, 77), dtype=np.float32)
    actual = expected.copy()
    actual[:, 76] = np.nan
    failure = _nan_inf_failure(expected, actual, "main", 0)
    assert failure is not None
    assert failure.details["mismatch_index_ranges"] == [[0, 36, 37], [76, 76, 77]]
    case = CaseResult("main", [[37, 77]], ["float32"], 0, False)
    text = verification_feedback(VerifyResult("failed", [failure], [case], []))
    assert "indices 76..76 of 77: the tail (a missing or wrong mask" in text


def test_nan_spread_over_the_row_is_not_called_the_tail() -> None:
    expected = np.zeros((4, 8), dtype=np.float32)
    actual = expected.copy()
    actual[1, 2] = np.nan
    failure = _nan_inf_failure(expected, actual, "main", 0)
    assert failure is not None
    text = verification_feedback(VerifyResult("failed", [failure], [], []))
    assert "the tail" not in text
    assert "[[1, 1, 4], [2, 2, 8]]" in text


def test_feedback_for_errors_shows_the_line_not_the_harness() -> None:
    failure = Failure(check="run", case="main", message="NameError: name 'y' is not defined",
                      location=SourceLocation("/tmp/x/attempt-1/relu.py", 12, "    z = y + 1"),
                      log_tail="Traceback ... runners/harness/session.py ...")
    text = verification_feedback(VerifyResult("failed", [failure], [], []))
    assert "line 12 of relu.py: z = y + 1" in text
    assert "NameError" in text
    assert "harness" not in text
    assert "/tmp/x" not in text


def test_long_logs_lose_their_middle() -> None:
    text = "start " + "x" * 10_000 + " end"
    cut = truncate_middle(text, 500)
    assert len(cut) <= 560
    assert cut.startswith("start")
    assert cut.endswith(" end")
    assert "characters cut" in cut


def test_redaction() -> None:
    redactor = Redactor.from_environment(
        extra=["sk-live-123456"], environ={"GITHUB_TOKEN": "ghp_abcdef", "HOME": "/root",
                                           "OPBOT_WEBHOOK_SECRET": "hush-hush"})
    scrubbed = redactor.scrub({"text": "key sk-live-123456 token ghp_abcdef at /root",
                               "list": ["hush-hush"]})
    assert scrubbed == {"text": f"key {REDACTED} token {REDACTED} at /root",
                        "list": [REDACTED]}


def test_llm_settings() -> None:
    env = {"OPENAI_API_KEY": "k1", "OPBOT_LLM_MODEL": "m"}
    settings = LLMSettings.resolve(base_url=None, model=None, environ=env)
    assert (settings.model, settings.api_key) == ("m", "k1")
    env["OPBOT_LLM_API_KEY"] = "k2"
    assert LLMSettings.resolve(base_url="http://x/v1", model="n", environ=env).api_key == "k2"
    with pytest.raises(BadInputError, match="--llm-model"):
        LLMSettings.resolve(base_url=None, model=None, environ={})
    assert llm_configured(None, {"OPENAI_API_KEY": "k"})
    assert not llm_configured(None, {})
