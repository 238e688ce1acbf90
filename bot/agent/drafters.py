"""Who writes candidates: the offline generator, or an LLM in a conversation.

Both answer `first()`, `revise(feedback)`, `restart(request)` and `tune(feedback)` with a
Candidate built by the backend's workbench, or raise: NoMoreDrafts (the offline generator
has one deterministic draft), DraftUnsupported (it cannot lower the reference), ReplyError
(the model's reply held no candidate; that text is the feedback), LLMError (the endpoint
failed).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Protocol

from bot.agent.backends.base import Candidate, NoMoreDrafts, Workbench
from bot.agent.conversation import Conversation, TokenCount
from bot.agent.llm import LLMError
from bot.agent.reply import ReplyError


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

    def first_many(self, count: int) -> list[Candidate | ReplyError]:
        """Up to `count` independent first drafts (a reply without a candidate is its
        ReplyError); `keep(index)` then says which one goes on."""
        ...

    def keep(self, index: int) -> None:
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

    def first_many(self, count: int) -> list[Candidate | ReplyError]:
        return [self.first()]  # deterministic: one draft however many are asked

    def keep(self, index: int) -> None:
        pass

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
    _round: list[Conversation] = field(default_factory=list)  # parallel first chats

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

    def first_many(self, count: int) -> list[Candidate | ReplyError]:
        """`count` chats asked the first request at once (on an interpreter, drafts are cheap
        to judge; diversity beats one long chat). Replies are parsed one by one: a workbench
        keeps state. An endpoint failing for every chat raises; for some, those hold none."""
        system, user = self.bench.system_prompt(), self.bench.first_request(self.hint)
        base = self.conversation
        self._round = [base] + [replace(base, tokens=TokenCount(), messages=[])
                                for _ in range(count - 1)]
        with ThreadPoolExecutor(max_workers=count) as pool:
            answers = list(pool.map(lambda chat: _ask_first(chat, system, user), self._round))
        errors = [item for item in answers if isinstance(item, LLMError)]
        if len(errors) == len(answers):
            raise errors[0]
        for chat in self._round[1:]:  # every chat's tokens count against the one budget
            base.tokens.merge(chat.tokens)
        return [self._parsed(item) for item in answers]

    def _parsed(self, answer: str | ReplyError | LLMError) -> Candidate | ReplyError:
        if isinstance(answer, LLMError):
            return ReplyError(f"this draft got no reply: {answer}")
        if isinstance(answer, ReplyError):
            return answer
        try:
            return self.bench.parse_reply(answer)
        except ReplyError as exc:
            return exc

    def keep(self, index: int) -> None:
        """The chat of draft `index` goes on (its history; the tokens stay counted)."""
        if 0 <= index < len(self._round):
            self.conversation.messages = list(self._round[index].messages)
        self._round = []

    def restart(self, request: str) -> Candidate:
        # The spec and reference again (a fresh chat knows nothing), then the seed.
        return self.bench.parse_reply(self.conversation.start(
            self.bench.system_prompt(),
            f"{self.bench.first_request(self.hint)}\n\n{self.bench.retry_request(request)}"))

    def tune(self, feedback: str) -> Candidate:
        return self.bench.parse_reply(self.conversation.follow_up(
            self.bench.tuning_request(feedback)))


def _ask_first(chat: Conversation, system: str, user: str) -> str | ReplyError | LLMError:
    try:
        return chat.start(system, user)
    except (ReplyError, LLMError) as exc:
        return exc
