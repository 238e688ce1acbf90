"""One chat with the model: requests and replies recorded, tokens counted, and the oldest
exchanges dropped when the prompt outgrows the context budget. Backend-neutral: what is
asked and how replies are read belong to the backend's workbench."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bot.agent.llm import ChatClient, Completion, Message
from bot.agent.transcript import Transcript

# Prompts above this many estimated tokens lose their oldest exchanges.
DEFAULT_CONTEXT_TOKENS = 60_000
_CHARS_PER_TOKEN = 4


@dataclass
class TokenCount:
    prompt: int = 0
    completion: int = 0

    @property
    def total(self) -> int:
        return self.prompt + self.completion

    def add(self, completion: Completion) -> None:
        # A buggy or hostile endpoint must not give budget back.
        self.prompt += max(0, completion.prompt_tokens)
        self.completion += max(0, completion.completion_tokens)

    def to_json(self) -> dict[str, int]:
        return {"prompt": self.prompt, "completion": self.completion, "total": self.total}


@dataclass
class Conversation:
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
