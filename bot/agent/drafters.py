"""Who writes candidates: the offline generator, or an LLM in a conversation.

Both answer `first()`, `revise(feedback)`, `restart(request)` and `tune(feedback)` with a
Candidate built by the backend's workbench, or raise: NoMoreDrafts (the offline generator
has one deterministic draft), DraftUnsupported (it cannot lower the reference), ReplyError
(the model's reply held no candidate; that text is the feedback), LLMError (the endpoint
failed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from bot.agent.backends.base import Candidate, NoMoreDrafts, Workbench
from bot.agent.conversation import Conversation, TokenCount


class Drafter(Protocol):
    @property
    def tokens(self) -> TokenCount:
        ...

    @property
    def name(self) -> str:
        ...

    def first(self) -> Candidate:
        ...

    def revise(self, feedback: str) -> Candidate:
        ...

    def restart(self, request: str) -> Candidate:
        """A fresh conversation, seeded with the best attempt and what was tried."""
        ...

    def tune(self, feedback: str) -> Candidate:
        ...


@dataclass
class OfflineDrafter:
    bench: Workbench
    name: str = "opbot offline generator"
    tokens: TokenCount = field(default_factory=TokenCount)

    def first(self) -> Candidate:
        return self.bench.offline_draft()

    def revise(self, feedback: str) -> Candidate:
        raise NoMoreDrafts("the offline generator is deterministic: it has one draft")

    def restart(self, request: str) -> Candidate:
        raise NoMoreDrafts("the offline generator is deterministic: it has one draft")

    def tune(self, feedback: str) -> Candidate:
        raise NoMoreDrafts("the offline generator does not tune")


@dataclass
class LLMDrafter:
    """A conversation: the first request, then feedback after each failed attempt."""

    bench: Workbench
    conversation: Conversation
    model: str
    hint: str | None = None

    @property
    def name(self) -> str:
        return f"LLM {self.model}"

    @property
    def tokens(self) -> TokenCount:
        return self.conversation.tokens

    def first(self) -> Candidate:
        return self.bench.parse_reply(self.conversation.start(
            self.bench.system_prompt(), self.bench.first_request(self.hint)))

    def revise(self, feedback: str) -> Candidate:
        return self.bench.parse_reply(self.conversation.follow_up(
            self.bench.retry_request(feedback)))

    def restart(self, request: str) -> Candidate:
        # The spec and reference again (a fresh chat knows nothing), then the seed.
        return self.bench.parse_reply(self.conversation.start(
            self.bench.system_prompt(),
            f"{self.bench.first_request(self.hint)}\n\n{self.bench.retry_request(request)}"))

    def tune(self, feedback: str) -> Candidate:
        return self.bench.parse_reply(self.conversation.follow_up(
            self.bench.tuning_request(feedback)))
