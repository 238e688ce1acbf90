"""Real OpenAI-compatible endpoints: reasoning output, replies cut off at the output limit,
streaming, strict servers, missing or hostile usage, bounded context and the policy's `llm`
section. The real `openai` client talks to tests/fake_llm.py's scripted server on loopback;
the end-to-end cases run `opbot generate` with the Triton backend on the CPU interpreter."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from bot.agent.conversation import (
    CONTINUE_REQUEST,
    Conversation,
    TokenCount,
    charged,
    estimate_tokens,
)
from bot.agent.llm import (
    Completion,
    LLMError,
    LLMSettings,
    OpenAIChatClient,
    strip_reasoning,
)
from bot.agent.reply import ReplyError
from bot.agent.transcript import Redactor, Transcript, read_transcript
from bot.cli import _llm_choice, _llm_policy
from bot.generation_step import generate_without_credentials
from bot.policy import LLM_POLICY_VARIABLE, PolicyError, llm_policy_json, load_policy
from bot.spec import load_spec
from tests.agent.test_loop import GOOD, KEY, REFERENCE, WRONG
from tests.fake_llm import ScriptedLLM, Step, reply
from tests.support import run_opbot, run_opbot_here

FILES = "```python file=model_new.py\nclass ModelNew: ...\n```\n"


def _client(server: ScriptedLLM, **settings: Any) -> OpenAIChatClient:
    return OpenAIChatClient(LLMSettings(base_url=server.base_url, model="scripted-model",
                                        api_key=KEY, max_retries=0, **settings))


def _conversation(server: ScriptedLLM, tmp_path: Path, **settings: Any) -> Conversation:
    return Conversation(_client(server, **settings),
                        Transcript(tmp_path / "transcript.jsonl", Redactor([KEY])))


def _options(server: ScriptedLLM) -> list[dict[str, Any]]:
    return [{key: value for key, value in request.body.items() if key != "messages"}
            for request in server.requests]


# -- reasoning is never the answer ----------------------------------------------------------


@pytest.mark.parametrize(("raw", "answer"), [
    ("<think>draft\n```python\nwrong\n```\n</think>\nthe answer", "the answer"),
    ("<think>a</think>one <think>b</think>two", "one two"),
    ("<THINKING>\nplan\n</THINKING>\nfinal", "final"),
    ("kept\n<think>cut off while still thinking ```python\nx = 1", "kept\n"),
    ("thinking that the template opened</think>\n\nanswer", "answer"),
    ("no reasoning at all", "no reasoning at all"),
])
def test_reasoning_blocks_are_removed(raw: str, answer: str) -> None:
    assert strip_reasoning(raw) == answer.strip("\n")


def test_a_fenced_draft_inside_a_think_block_is_not_the_answer(tmp_path: Path) -> None:
    raw = f"<think>\n```python file=draft.py\nclass Wrong: ...\n```\n</think>\nHere:\n{FILES}"
    with ScriptedLLM([Step(content=raw, reasoning="```python file=other.py\nx\n```")]) as server:
        conversation = _conversation(server, tmp_path)
        answer = conversation.start("system", "first request")
    assert "draft.py" not in answer
    assert "other.py" not in answer
    assert "file=model_new.py" in answer
    assert conversation.messages[-1] == {"role": "assistant", "content": answer}
    recorded = next(entry for entry in read_transcript(tmp_path / "transcript.jsonl")
                    if entry["kind"] == "reply")
    assert recorded["text"] == raw  # the transcript keeps what the server sent
    assert "other.py" in recorded["reasoning"]


def test_a_reply_of_reasoning_only_says_so(tmp_path: Path) -> None:
    with ScriptedLLM([Step(content="<think>\n```python\nx\n```\nstill thinking</think>")]) \
            as server, pytest.raises(ReplyError, match="only reasoning"):
        _conversation(server, tmp_path).start("system", "first request")


# -- finish_reason: cut off, continued, or given up plainly ---------------------------------


def test_a_cut_off_reply_is_continued_and_joined(tmp_path: Path) -> None:
    whole = f"Here it is:\n{FILES}"
    steps = [Step(content=whole[:20], finish_reason="length"),
             Step(content=whole[20:40], finish_reason="length"), Step(content=whole[40:])]
    with ScriptedLLM(steps) as server:
        conversation = _conversation(server, tmp_path)
        answer = conversation.start("system", "first request")
    assert answer == whole.strip("\n")
    assert len(server.requests) == 3
    last = server.requests[2].body["messages"]
    assert last[-2:] == [{"role": "assistant", "content": whole[:40]},
                         {"role": "user", "content": CONTINUE_REQUEST}]
    assert "cut off at the output limit" in CONTINUE_REQUEST
    # The history keeps one joined turn, not the pieces and the requests to go on.
    assert [item["role"] for item in conversation.messages] == ["system", "user", "assistant"]


def test_a_reply_still_cut_off_becomes_feedback(tmp_path: Path) -> None:
    steps = [Step(content="```python\npart", finish_reason="length") for _ in range(3)]
    with ScriptedLLM([*steps, Step(content=FILES)]) as server:
        conversation = _conversation(server, tmp_path)
        with pytest.raises(ReplyError) as caught:
            conversation.start("system", "first request")
        message = str(caught.value)
        assert "cut off at the output limit" in message
        assert "shorter, complete answer" in message
        assert "no fenced code block" not in message
        conversation.follow_up(message)
    assert len(server.requests) == 4  # the first try and two continuations, then feedback
    assert server.requests[3].last_user_message() == message


def test_a_filtered_reply_gets_a_plain_message(tmp_path: Path) -> None:
    with ScriptedLLM([Step(content="", finish_reason="content_filter")]) as server, \
            pytest.raises(ReplyError, match="content filter withheld the reply"):
        _conversation(server, tmp_path).start("system", "first request")


# -- streaming and strict servers -----------------------------------------------------------


def test_a_streamed_reply_is_joined_with_its_reasoning_and_usage() -> None:
    content = "Here:\n" + FILES
    with ScriptedLLM([Step(content=content, reasoning="let me think", chunks=5)]) as server:
        completion = _client(server).complete([{"role": "user", "content": "x" * 400}])
    assert completion == Completion(text=content, prompt_tokens=100,
                                    completion_tokens=(len(content) + 12) // 4,
                                    finish_reason="stop", reasoning="let me think")
    assert _options(server) == [{"model": "scripted-model", "max_tokens": 16384,
                                 "stream": True, "stream_options": {"include_usage": True}}]


def test_streaming_off_reads_one_body_and_sends_the_settings() -> None:
    with ScriptedLLM([Step(content="answer", reasoning="thought", reasoning_field="reasoning",
                           finish_reason="length")]) as server:
        completion = _client(server, stream=False, temperature=0.2, reasoning_effort="low",
                             max_output_tokens=777).complete([{"role": "user", "content": "q"}])
    assert (completion.text, completion.reasoning, completion.finish_reason) == (
        "answer", "thought", "length")
    assert _options(server) == [{"model": "scripted-model", "max_tokens": 777,
                                 "temperature": 0.2, "reasoning_effort": "low"}]


def test_a_strict_server_loses_the_parameters_it_refuses_once() -> None:
    with ScriptedLLM([Step(content="one"), Step(content="two")],
                     refuse=["stream_options", "reasoning_effort"]) as server:
        client = _client(server, reasoning_effort="high")
        first = client.complete([{"role": "user", "content": "q"}])
        second = client.complete([{"role": "user", "content": "q"}])
    assert (first.text, second.text) == ("one", "two")
    assert sorted(server.refused) == ["reasoning_effort", "stream_options"]
    assert len(server.requests) == 4  # two refusals, then each request once
    assert "reasoning_effort" not in server.requests[-1].body
    assert server.requests[-1].body["stream"] is True  # streaming itself was accepted
    assert first.prompt_tokens is None  # no include_usage, no usage chunk


def test_max_tokens_refused_becomes_max_completion_tokens() -> None:
    with ScriptedLLM([Step(content="ok")], refuse=["max_tokens"]) as server:
        assert _client(server).complete([{"role": "user", "content": "q"}]).text == "ok"
    assert server.requests[-1].body["max_completion_tokens"] == 16384
    assert "max_tokens" not in server.requests[-1].body


def test_a_server_that_ignores_stream_is_asked_without_it() -> None:
    with ScriptedLLM([Step(content="json", ignore_stream=True), Step(content="again"),
                      Step(content="later")]) as server:
        client = _client(server)
        assert client.complete([{"role": "user", "content": "q"}]).text == "again"
        assert client.complete([{"role": "user", "content": "q"}]).text == "later"
    assert [request.body.get("stream") for request in server.requests] == [True, None, None]


def test_a_bad_request_naming_no_parameter_is_a_clear_error() -> None:
    with ScriptedLLM([Step(status=400, content="the prompt is too long")]) as server, \
            pytest.raises(LLMError, match=r"HTTP 400.*the prompt is too long") as caught:
        _client(server).complete([{"role": "user", "content": "q"}])
    assert len(server.requests) == 1
    assert KEY not in str(caught.value)


def test_a_long_stream_is_not_cut_but_a_silent_one_times_out() -> None:
    steps = [Step(content="x" * 80, chunks=8, chunk_delay_s=0.15),
             Step(content="y" * 80, chunks=2, chunk_delay_s=3.0)]
    with ScriptedLLM(steps) as server:
        client = _client(server, timeout_s=0.6)
        started = time.monotonic()
        assert client.complete([{"role": "user", "content": "q"}]).text == "x" * 80
        assert time.monotonic() - started > 0.6  # longer than the timeout, and not cut
        with pytest.raises(LLMError, match=r"went silent for more than 0\.6 s"):
            client.complete([{"role": "user", "content": "q"}])


def test_a_stream_past_its_total_time_is_given_up() -> None:
    with ScriptedLLM([Step(content="z" * 40, chunks=4, chunk_delay_s=0.2)]) as server, \
            pytest.raises(LLMError, match="still streaming"):
        _client(server, total_timeout_s=0.3).complete([{"role": "user", "content": "q"}])


# -- honest token counts --------------------------------------------------------------------


def test_no_usage_is_estimated_and_marked(tmp_path: Path) -> None:
    with ScriptedLLM([Step(content="a" * 400, usage=False)]) as server:
        conversation = _conversation(server, tmp_path, stream=False)
        conversation.start("s" * 396, "u" * 400)
    tokens = conversation.tokens
    assert tokens.completion == 100
    assert tokens.prompt == estimate_tokens(796) + 8  # two messages' template tokens
    assert tokens.to_json() == {"prompt": tokens.prompt, "completion": 100,
                                "total": tokens.total, "estimated": True}


@pytest.mark.parametrize(("reported", "chars", "charged_as"), [
    (None, 400, (100, True)),  # no usage
    (0, 400, (100, True)),  # zero
    (-5000, 400, (100, True)),  # negative: never budget back
    (3, 4000, (1000, True)),  # absurdly small: fewer than 1 token per 8 characters
    (90, 400, (90, False)),  # believable: the server's word
    (5000, 400, (5000, False)),  # more than estimated: the server's word
    (0, 0, (0, False)),  # nothing to count
])
def test_reported_counts_are_taken_only_where_believable(reported: int | None, chars: int,
                                                         charged_as: tuple[int, bool]) -> None:
    assert charged(reported, chars) == charged_as


def test_honest_usage_is_not_marked_estimated() -> None:
    tokens = TokenCount()
    tokens.charge([{"role": "user", "content": "q" * 40}],
                  Completion(text="a" * 40, prompt_tokens=12, completion_tokens=10))
    assert tokens.to_json() == {"prompt": 12, "completion": 10, "total": 22}


# -- bounded context ------------------------------------------------------------------------


def _kernel_reply(number: int) -> Step:
    return Step(content=f"Attempt {number}.\n```python file=model_new.py\n"
                        + "x = 1\n" * 700 + "```\n")


def test_older_turns_are_summarised_and_the_context_stays_bounded(tmp_path: Path) -> None:
    feedback = "\n".join(f"line {index} of the error log" for index in range(300))
    with ScriptedLLM([_kernel_reply(number) for number in range(1, 9)]) as server:
        conversation = _conversation(server, tmp_path)
        conversation.start("system prompt", "first request " * 200)
        for _ in range(7):
            conversation.follow_up(feedback)
    sizes = [len(json.dumps(request.body["messages"])) for request in server.requests]
    # Each request holds the last exchange whole and older ones in a line or a few: later
    # requests are no larger than the fourth one plus a summary line each.
    assert sizes[7] < sizes[3] + 4 * 400
    last = server.requests[7].body["messages"]
    assert last[1]["content"] == "first request " * 200  # the first request, whole
    assert last[2]["content"] == ("[attempt 1's reply: files model_new.py; not repeated]")
    assert last[3]["content"].startswith("line 0 of the error log\n")
    assert "not repeated" in last[3]["content"]
    assert len(last[3]["content"]) < 1000
    assert last[-2]["content"] == conversation.messages[-3]["content"]  # the last reply whole
    assert last[-1]["content"] == feedback
    assert len(conversation.messages) == 2 + 8 + 7  # the history itself is all kept


def test_the_context_budget_is_a_hard_cap(tmp_path: Path) -> None:
    with ScriptedLLM([_kernel_reply(number) for number in range(1, 5)]) as server:
        conversation = _conversation(server, tmp_path)
        conversation.context_tokens = 2000
        conversation.start("system prompt", "first request")
        for _ in range(3):
            conversation.follow_up("y\n" * 1500)
    last = server.requests[-1].body["messages"]
    assert [item["content"] for item in last[:2]] == ["system prompt", "first request"]
    assert len(last) == 4  # the oldest exchanges went; the last reply and request stay


# -- the policy's llm section reaches the client --------------------------------------------


POLICY = """llm:
  defaults: {max_output_tokens: 8000, timeout_s: 45}
  models:
    "scripted-*": {max_output_tokens: 1234, reasoning_effort: low}
    "other-*": {stream: false}
"""


def test_the_policy_sets_the_client_per_model_and_flags_win() -> None:
    policy = load_policy(POLICY, source="operator.yaml")
    settings = _llm_choice(policy.llm, base_url="http://127.0.0.1:9/v1", model="Scripted-7B",
                           hint=None, timeout_s=None, draft=None).client.settings
    assert (settings.max_output_tokens, settings.reasoning_effort, settings.stream,
            settings.timeout_s, settings.temperature) == (1234, "low", True, 45.0, None)
    other = _llm_choice(policy.llm, base_url="http://127.0.0.1:9/v1", model="other-1",
                        hint=None, timeout_s=7.0, draft=None).client.settings
    assert (other.max_output_tokens, other.stream, other.timeout_s) == (8000, False, 7.0)


def test_a_child_generate_asks_as_the_operators_policy_says(
        monkeypatch: pytest.MonkeyPatch) -> None:
    operator = load_policy(POLICY, source="operator.yaml")
    defaults = load_policy(None)
    monkeypatch.setenv(LLM_POLICY_VARIABLE, llm_policy_json(operator))
    assert _llm_policy(defaults, None) == operator.llm  # handed down by the bot's job
    assert _llm_policy(defaults, Path("given.yaml")) == defaults.llm  # --policy wins
    monkeypatch.setenv(LLM_POLICY_VARIABLE, '{"defaults": {"stream": "yes"}}')
    with pytest.raises(PolicyError, match=r"OPBOT_LLM_POLICY line 1: llm\.defaults\.stream"):
        _llm_policy(defaults, None)


# -- end to end: `opbot generate` with the Triton backend -----------------------------------


def _generate(server: ScriptedLLM, out: Path, *extra: str) -> dict[str, Any]:
    """`opbot generate --llm openai` in this process (its verifications warm), the real
    openai client talking to the scripted endpoint over loopback."""
    run = run_opbot_here("generate", str(REFERENCE), "--backend", "triton", "--llm", "openai",
                         "--llm-base-url", server.base_url, "--llm-model", "scripted-model",
                         "--out", str(out), "--json", *extra, env={"OPBOT_LLM_API_KEY": KEY})
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    result: dict[str, Any] = run.json()
    return result


def test_a_wrong_draft_in_the_reasoning_does_not_count(tmp_path: Path) -> None:
    draft = f"```python file=draft.py\n{WRONG}\n```"
    content = f"<think>\nA first idea:\n{draft}\nNo, that doubles.\n</think>\n"
    step = Step(content=content + str(reply(GOOD).content),
                reasoning=f"Reasoning field:\n{draft}")
    with ScriptedLLM([step]) as server:
        result = _generate(server, tmp_path / "out")
    assert (result["status"], result["attempts"]) == ("passed", 1)
    assert server.requests[0].body["stream"] is True
    assert (tmp_path / "out" / "triton" / "relu.py").read_text(encoding="utf-8").strip() == \
        GOOD.strip()
    replayed = run_opbot("replay", str(tmp_path / "out" / "transcript.jsonl"), "--json")
    assert replayed.code == 0, replayed.stderr[-2000:]
    assert replayed.json()["consistent"] is True


def test_a_cut_off_reply_is_continued_and_passes(tmp_path: Path) -> None:
    whole = str(reply(GOOD).content)
    middle = len(whole) // 2
    policy = tmp_path / "operator.yaml"
    policy.write_text("llm:\n  defaults: {stream: false}\n  models:\n"
                      "    'scripted-*': {max_output_tokens: 2048}\n", encoding="utf-8")
    steps = [Step(content=whole[:middle], finish_reason="length"),
             Step(content=whole[middle:])]
    with ScriptedLLM(steps) as server:
        result = _generate(server, tmp_path / "out", "--policy", str(policy))
    assert (result["status"], result["attempts"]) == ("passed", 1)
    assert len(server.requests) == 2
    assert "cut off at the output limit" in server.requests[1].last_user_message()
    for request in server.requests:
        assert "stream" not in request.body
        assert request.body["max_tokens"] == 2048


def test_without_usage_the_token_budget_still_stops_the_loop(tmp_path: Path) -> None:
    steps = [Step(content=str(reply(WRONG).content), usage=False) for _ in range(6)]
    with ScriptedLLM(steps) as server:
        result = _generate(server, tmp_path / "out", "--max-attempts", "6",
                           "--max-tokens", "1")
    assert result["stopped_because"] == "budget"
    assert result["attempts"] == 1
    assert len(server.requests) == 1
    assert result["tokens"]["estimated"] is True
    assert result["tokens"]["total"] > 1000


def test_a_strict_server_still_gets_its_kernel(tmp_path: Path) -> None:
    policy = tmp_path / "operator.yaml"
    policy.write_text("llm:\n  models:\n    'scripted-*': {reasoning_effort: medium}\n",
                      encoding="utf-8")
    with ScriptedLLM([reply(GOOD)], refuse=["stream_options", "reasoning_effort"]) as server:
        result = _generate(server, tmp_path / "out", "--policy", str(policy))
    assert (result["status"], result["attempts"]) == ("passed", 1)
    assert sorted(server.refused) == ["reasoning_effort", "stream_options"]
    assert result["tokens"]["estimated"] is True  # no include_usage: no usage chunk


def test_the_bots_generation_step_hands_its_llm_policy_to_the_child(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The job runs `opbot generate` in a child: the operator's `llm` section must reach it."""
    operator = load_policy(POLICY, source="operator.yaml")
    spec = load_spec(REFERENCE)
    with ScriptedLLM([reply(GOOD)]) as server:
        monkeypatch.setenv("OPBOT_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("OPBOT_LLM_MODEL", "scripted-model")
        monkeypatch.setenv("OPBOT_LLM_API_KEY", KEY)
        monkeypatch.delenv(LLM_POLICY_VARIABLE, raising=False)
        (tmp_path / "work").mkdir()
        outcome = generate_without_credentials(spec, backend="triton", out=tmp_path / "out",
                                               workdir=tmp_path / "work", policy=operator,
                                               llm=True)
    assert outcome.status == "passed", outcome.message
    assert _options(server)[0]["max_tokens"] == 1234
    assert _options(server)[0]["reasoning_effort"] == "low"


# -- after an outside attack ----------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_a_trickling_server_cannot_outlive_the_time_budget(tmp_path: Path, stream: bool,
                                                           ) -> None:
    """A byte every half second resets every read timeout; the budget still ends the run,
    as `budget`, with the best attempt written."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(f"llm:\n  defaults: {{stream: {str(stream).lower()}}}\n",
                      encoding="utf-8")
    with ScriptedLLM([reply(WRONG), Step(trickle_s=0.5)]) as server:
        started = time.monotonic()
        result = _generate(server, tmp_path / "out", "--time-budget", "25",
                           "--llm-timeout", "5", "--policy", str(policy))
        took = time.monotonic() - started
    assert result["stopped_because"] == "budget", result
    assert took < 60, took
    assert result["best_attempt"] == 1
    assert (tmp_path / "out" / "triton" / "relu.py").read_text(encoding="utf-8").strip() == \
        WRONG.strip()
    assert any("time budget ran out" in note for note in result["notes"])


def test_a_body_that_is_not_json_is_a_clear_error(tmp_path: Path) -> None:
    page = b"<html><body>502 Bad Gateway</body></html>"
    with ScriptedLLM([Step(raw_body=page)] * 4) as server:
        result = _generate(server, tmp_path / "out", "--max-attempts", "2")
    assert result["stopped_because"] == "llm_error"
    assert "not a chat completion" in " ".join(result["notes"])


def test_continuations_stop_at_the_token_budget(tmp_path: Path) -> None:
    cut = Step(content="x" * 4000, finish_reason="length", usage=False)
    with ScriptedLLM([cut, cut, cut]) as server:
        result = _generate(server, tmp_path / "out", "--max-tokens", "100")
    assert len(server.requests) == 1  # no continuation past the budget
    assert result["stopped_because"] == "budget"


def test_a_stream_that_breaks_off_is_still_billed(tmp_path: Path) -> None:
    conversation = _conversation(ScriptedLLM([]), tmp_path)
    request = [{"role": "user", "content": "y" * 400}]
    conversation.tokens.charge_broken(request, 4000)
    assert conversation.tokens.total >= 1100
    assert conversation.tokens.estimated


def test_a_reply_quoting_the_key_is_never_judged_or_written(tmp_path: Path) -> None:
    leaky = GOOD.replace("import torch", f"import torch\nKEY = {KEY!r}", 1)
    with ScriptedLLM([reply(leaky), reply(GOOD)]) as server:
        result = _generate(server, tmp_path / "out")
    assert result["status"] == "passed"
    assert result["attempts"] == 2
    assert "contain a credential" in server.requests[1].last_user_message()
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(encoding="utf-8", errors="replace"), path


@pytest.mark.parametrize(("raw", "kept"), [
    ("```python\n# parse <think> blocks here\nx = 1\n```", "# parse <think> blocks here"),
    ("```python\nx = 1\n```\nThe code contains no </think> tags.", "x = 1"),
    ("<think>plan</think>\n```python\ny = '<think>'\n```", "y = '<think>'"),
])
def test_think_tags_in_the_answer_stay_the_answer(raw: str, kept: str) -> None:
    assert kept in strip_reasoning(raw)


def test_a_422_naming_a_parameter_drops_it() -> None:
    with ScriptedLLM([Step(status=422, content="unknown field `stream_options`"),
                      reply(GOOD)]) as server:
        completion = _client(server).complete([{"role": "user", "content": "go"}])
    assert "model_new.py" in completion.text
    assert "stream_options" in _options(server)[0]
    assert "stream_options" not in _options(server)[1]


def test_credentials_in_the_base_url_are_never_shown(tmp_path: Path) -> None:
    run = run_opbot("generate", str(REFERENCE), "--backend", "triton", "--llm", "openai",
                    "--llm-base-url", "http://user:sk-URLSECRET1@127.0.0.1:9/v1?api-key=sk-Q2",
                    "--llm-model", "m", "--max-attempts", "1", "--out", str(tmp_path / "o"),
                    "--json", env={"OPBOT_LLM_API_KEY": KEY})
    assert "sk-URLSECRET1" not in run.stdout + run.stderr
    assert "sk-Q2" not in run.stdout + run.stderr
    assert "127.0.0.1:9/v1" in run.stdout
