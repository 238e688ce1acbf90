"""Parallel first drafts: independent chats asked at once, the best one goes on, every
chat's tokens counted against the one budget; through the real `openai` client too."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from bot.agent.backends.base import Candidate
from bot.agent.conversation import Conversation
from bot.agent.drafters import LLMDrafter
from bot.agent.llm import Completion, LLMError, Message
from bot.agent.reply import ReplyError
from bot.agent.transcript import Redactor, Transcript
from tests.agent.table_bench import TableBench
from tests.agent.test_loop import GOOD, WRONG, _generate
from tests.fake_llm import ScriptedLLM, reply


class _Bench(TableBench):
    def system_prompt(self) -> str:
        return "system"

    def first_request(self, hint: str | None) -> str:
        return "write it"

    def parse_reply(self, text: str) -> Candidate:
        if "code" not in text:
            raise ReplyError("the reply has no fenced code block")
        return Candidate(files={"kernel.py": text}, written={"kernel.py": text})


class _Client:
    """Answers each chat by the order it arrives; holds every chat until all have asked,
    so the test fails unless the requests are in flight at once."""

    def __init__(self, answers: list[str | None], together: int) -> None:
        self.answers = answers
        self.barrier = threading.Barrier(together, timeout=10)
        self.lock = threading.Lock()

    def complete(self, messages: Sequence[Message]) -> Completion:
        self.barrier.wait()
        with self.lock:
            answer = self.answers.pop(0)
        if answer is None:
            raise LLMError("the LLM endpoint answered HTTP 500")
        return Completion(text=answer, prompt_tokens=100, completion_tokens=10)


def _drafter(tmp_path: Path, client: _Client) -> LLMDrafter:
    transcript = Transcript(tmp_path / "t.jsonl", Redactor([]))
    return LLMDrafter(bench=_Bench({}), conversation=Conversation(client, transcript),
                      model="m")


def test_drafts_are_asked_at_once_and_every_chat_is_counted(tmp_path: Path) -> None:
    drafter = _drafter(tmp_path, _Client(["code one", "prose only", None], together=3))
    drafted = drafter.first_many(3)
    kinds = sorted(type(item).__name__ for item in drafted)
    assert kinds == ["Candidate", "ReplyError", "ReplyError"]
    failed = [str(item) for item in drafted if isinstance(item, ReplyError)]
    assert any("got no reply: the LLM endpoint answered HTTP 500" in text for text in failed)
    assert drafter.tokens.prompt == 200  # both chats that got an answer are charged
    kept = next(index for index, item in enumerate(drafted) if isinstance(item, Candidate))
    drafter.keep(kept)
    assert drafter.conversation.messages[-1]["content"] == "code one"


def test_an_endpoint_failing_every_chat_is_an_llm_error(tmp_path: Path) -> None:
    drafter = _drafter(tmp_path, _Client([None, None], together=2))
    with pytest.raises(LLMError):
        drafter.first_many(2)


def test_first_drafts_through_the_cli(tmp_path: Path) -> None:
    with ScriptedLLM([reply(WRONG), reply(GOOD), reply(WRONG)]) as server:
        code, result, _ = _generate(server, tmp_path / "out", "--first-drafts", "3")
    assert code == 0, result
    assert result["status"] == "passed"
    assert len(server.requests) == 3
    assert all(len(request.body["messages"]) == 2 for request in server.requests)
    assert result["attempts"] == 3  # every draft asked for counts
    assert (tmp_path / "out" / "triton" / "relu.py").read_text(encoding="utf-8").strip() == \
        GOOD.strip()
