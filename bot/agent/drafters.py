"""Who writes candidates: the offline generator, or an LLM in a conversation.

Both answer `first()` and `revise(feedback)` with the candidate's source, or raise:
NoMoreDrafts (the offline generator has one deterministic draft), DraftUnsupported (it
cannot lower the reference), ReplyError (the model's reply held no candidate; that text
is the feedback), LLMError (the endpoint failed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from bot.agent.backends.triton import prompts
from bot.agent.llm import ChatClient, Completion, Message
from bot.agent.offline.run import generate_in_worker
from bot.agent.reply import parse_reply
from bot.agent.transcript import Transcript
from bot.errors import BadInputError
from bot.spec import OpSpec

# Prompts above this many estimated tokens lose their oldest exchanges.
DEFAULT_CONTEXT_TOKENS = 60_000
_CHARS_PER_TOKEN = 4


class NoMoreDrafts(Exception):
    """The drafter has nothing new to offer."""


class DraftUnsupported(Exception):
    def __init__(self, message: str, ops: Sequence[str]) -> None:
        super().__init__(message)
        self.ops = list(ops)


@dataclass
class TokenCount:
    prompt: int = 0
    completion: int = 0

    @property
    def total(self) -> int:
        return self.prompt + self.completion

    def add(self, completion: Completion) -> None:
        self.prompt += completion.prompt_tokens
        self.completion += completion.completion_tokens

    def to_json(self) -> dict[str, int]:
        return {"prompt": self.prompt, "completion": self.completion, "total": self.total}


class Drafter(Protocol):
    tokens: TokenCount

    @property
    def name(self) -> str:
        ...

    def first(self) -> str:
        ...

    def revise(self, feedback: str) -> str:
        ...

    def tune(self, feedback: str) -> str:
        ...


def offline_draft(spec: OpSpec, reference: Path) -> str:
    """The offline generator's candidate; DraftUnsupported names what it cannot lower."""
    drafted = generate_in_worker(reference, op_name=spec.name,
                                 init_args=None if spec.init_args is None
                                 else list(spec.init_args), cases=spec.cases())
    if drafted.status == "error":
        raise BadInputError(f"{spec.spec_path}: {drafted.reason}")
    if drafted.status == "unsupported":
        raise DraftUnsupported(drafted.reason, drafted.unsupported_ops)
    return drafted.source


@dataclass
class OfflineDrafter:
    spec: OpSpec
    reference: Path
    name: str = "opbot offline generator"
    tokens: TokenCount = field(default_factory=TokenCount)

    def first(self) -> str:
        return offline_draft(self.spec, self.reference)

    def revise(self, feedback: str) -> str:
        raise NoMoreDrafts("the offline generator is deterministic: it has one draft")

    def tune(self, feedback: str) -> str:
        raise NoMoreDrafts("the offline generator does not tune")


@dataclass
class Conversation:
    """One chat with the model: requests and replies recorded, tokens counted, and the
    oldest exchanges dropped when the prompt outgrows the context budget."""

    client: ChatClient
    transcript: Transcript
    context_tokens: int = DEFAULT_CONTEXT_TOKENS
    tokens: TokenCount = field(default_factory=TokenCount)
    messages: list[dict[str, str]] = field(default_factory=list)

    def start(self, system: str, user: str) -> str:
        """A fresh conversation; the reply's text."""
        self.messages = [{"role": "system", "content": system},
                         {"role": "user", "content": user}]
        return self._ask()

    def follow_up(self, user: str) -> str:
        self.messages.append({"role": "user", "content": user})
        return self._ask()

    def _ask(self) -> str:
        self._fit_context()
        request: Sequence[Message] = list(self.messages)
        self.transcript.record("request", messages=request)
        completion = self.client.complete(request)
        self.tokens.add(completion)
        self.transcript.record("reply", text=completion.text,
                               prompt_tokens=completion.prompt_tokens,
                               completion_tokens=completion.completion_tokens)
        self.messages.append({"role": "assistant", "content": completion.text})
        return completion.text

    def _fit_context(self) -> None:
        """Drop the oldest exchanges (never the system prompt or the first request)."""
        def size() -> int:
            return sum(len(item["content"]) for item in self.messages) // _CHARS_PER_TOKEN

        while size() > self.context_tokens and len(self.messages) > 4:
            del self.messages[2:4]


@dataclass
class LLMDrafter:
    """A conversation: the first request, then feedback after each failed attempt."""

    spec: OpSpec
    client: ChatClient
    transcript: Transcript
    model: str
    starting_draft: str | None = None
    hint: str | None = None
    context_tokens: int = DEFAULT_CONTEXT_TOKENS
    tokens: TokenCount = field(default_factory=TokenCount)
    conversation: Conversation = field(init=False)

    def __post_init__(self) -> None:
        # The conversation counts into this drafter's TokenCount: the loop's budget reads it.
        self.conversation = Conversation(self.client, self.transcript, self.context_tokens,
                                         self.tokens)

    @property
    def name(self) -> str:
        return f"LLM {self.model}"

    def first(self) -> str:
        return parse_reply(self.conversation.start(prompts.TRITON_SYSTEM, prompts.first_request(
            self.spec, draft=self.starting_draft, hint=self.hint))).source

    def revise(self, feedback: str) -> str:
        return parse_reply(self.conversation.follow_up(prompts.retry_request(feedback))).source

    def tune(self, feedback: str) -> str:
        return parse_reply(self.conversation.follow_up(prompts.tuning_request(feedback))).source
