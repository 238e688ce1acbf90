"""One chat with the model: requests and replies recorded, tokens counted honestly, replies
cut off at the output limit continued, and the context kept bounded. Backend-neutral: what
is asked and how replies are read belong to the backend's workbench.

What the caller gets back is the answer only: reasoning (<think> blocks, a server's
`reasoning_content`) never reaches the reply parser; the transcript keeps the raw text.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NoReturn

from bot.agent.llm import (
    ChatClient,
    Completion,
    LLMBudgetSpent,
    LLMError,
    Message,
    strip_reasoning,
)
from bot.agent.reply import ReplyError, fenced_blocks
from bot.agent.transcript import Transcript

# Prompts above this many estimated tokens lose their oldest exchanges.
DEFAULT_CONTEXT_TOKENS = 60_000
# Times a reply cut off at the output limit is continued before the attempt is given up.
MAX_CONTINUATIONS = 2
_CHARS_PER_TOKEN = 4
# No tokenizer packs more than this many characters into a token on average (runs of
# spaces aside): a reported count below chars / this is not believable.
_MAX_CHARS_PER_TOKEN = 8
_TOKENS_PER_MESSAGE = 4  # the chat template's own tokens around each message
_FEEDBACK_LINES = 8  # what is left of older feedback
_FEEDBACK_CHARS = 800

CONTINUE_REQUEST = ("Your reply was cut off at the output limit. Continue exactly where it "
                    "stopped, without repeating anything already written and without any "
                    "preamble.")
CUT_OFF = ("the reply was cut off at the output limit ({pieces} parts, the last one still "
           "cut off): send a shorter, complete answer: only the files the candidate needs, "
           "each complete in its fenced code block, and little or no explanation")
FILTERED = ("the endpoint's content filter withheld the reply: answer again with the "
            "complete files in fenced code blocks and brief, plain explanations")
ONLY_REASONING = ("the reply held only reasoning (a <think> block or the server's reasoning "
                  "field) and no answer: after thinking, answer with the complete files in "
                  "fenced code blocks")


def estimate_tokens(chars: int) -> int:
    """About four characters a token, rounded up."""
    return -(-max(0, chars) // _CHARS_PER_TOKEN)


def charged(reported: int | None, chars: int, overhead: int = 0) -> tuple[int, bool]:
    """The tokens to charge for `chars` characters and whether they are estimated: the
    server's count where it is believable, else a local estimate. Missing, zero, negative
    or absurdly small counts (fewer than one token per eight characters) would give budget
    back, so they are replaced by the estimate, never added as they are."""
    if chars <= 0 and overhead <= 0:
        return max(0, reported or 0), False
    if reported is not None and reported > 0 and reported >= chars // _MAX_CHARS_PER_TOKEN:
        return reported, False
    return estimate_tokens(chars) + overhead, True


@dataclass
class TokenCount:
    prompt: int = 0
    completion: int = 0
    estimated: bool = False  # some of it is a local estimate: the server reported none

    @property
    def total(self) -> int:
        return self.prompt + self.completion

    def add(self, completion: Completion) -> None:
        # A buggy or hostile endpoint must not give budget back.
        self.prompt += max(0, completion.prompt_tokens or 0)
        self.completion += max(0, completion.completion_tokens or 0)

    def merge(self, other: TokenCount) -> None:
        """Another chat's count, added (parallel drafts share one budget)."""
        self.prompt += other.prompt
        self.completion += other.completion
        self.estimated = self.estimated or other.estimated

    def charge(self, request: Sequence[Message], completion: Completion) -> bool:
        """Count one exchange: the server's figures where believable, estimates otherwise;
        True when some of it was estimated."""
        prompt, prompt_estimated = charged(
            completion.prompt_tokens, sum(len(item["content"]) for item in request),
            _TOKENS_PER_MESSAGE * len(request))
        reply, reply_estimated = charged(completion.completion_tokens,
                                         len(completion.text) + len(completion.reasoning))
        self.prompt += prompt
        self.completion += reply
        self.estimated = self.estimated or prompt_estimated or reply_estimated
        return prompt_estimated or reply_estimated

    def charge_broken(self, request: Sequence[Message], received_chars: int) -> None:
        """A reply that broke off after `received_chars` characters: estimated."""
        prompt, _ = charged(None, sum(len(item["content"]) for item in request),
                            _TOKENS_PER_MESSAGE * len(request))
        self.prompt += prompt
        self.completion += estimate_tokens(received_chars)
        self.estimated = True

    def to_json(self) -> dict[str, int]:
        data = {"prompt": self.prompt, "completion": self.completion, "total": self.total}
        if self.estimated:
            data["estimated"] = True
        return data


def _summary(number: int, reply: str) -> str:
    """An older reply in a line: the model has newer ones; the files name what it was."""
    if reply.startswith("[") and "\n" not in reply and len(reply) < 300:
        return reply  # already a note (a cut-off or withheld reply)
    blocks = fenced_blocks(reply)
    names = [name for _, name, _ in blocks if name]
    if names:
        what = f"files {', '.join(dict.fromkeys(names))}"
    elif blocks:
        what = f"{len(blocks)} code block{'s' if len(blocks) > 1 else ''} without file names"
    else:
        what = "no code"
    return f"[attempt {number}'s reply: {what}; not repeated]"


def _head(feedback: str) -> str:
    """Older feedback's first lines: what was wrong then, without the whole log."""
    lines = feedback.splitlines()
    head = "\n".join(lines[:_FEEDBACK_LINES])[:_FEEDBACK_CHARS]
    if head == feedback:
        return feedback
    return f"{head}\n[... the rest of this earlier feedback is not repeated]"


def _size(messages: Sequence[Message]) -> int:
    return sum(estimate_tokens(len(item["content"])) + _TOKENS_PER_MESSAGE
               for item in messages)


@dataclass
class Conversation:
    client: ChatClient
    transcript: Transcript
    context_tokens: int = DEFAULT_CONTEXT_TOKENS
    tokens: TokenCount = field(default_factory=TokenCount)
    # The whole history; each request sends a compact view of it (`request`).
    messages: list[dict[str, str]] = field(default_factory=list)
    max_continuations: int = MAX_CONTINUATIONS
    # The generation's budget, so no single reply outlives it: a monotonic deadline and
    # the tokens allowed (both None: unbounded).
    deadline: float | None = None
    token_limit: int | None = None

    def start(self, system: str, user: str) -> str:
        """A fresh conversation; the reply's answer (reasoning removed)."""
        self.messages = [{"role": "system", "content": system},
                         {"role": "user", "content": user}]
        return self._ask()

    def follow_up(self, user: str) -> str:
        self.messages.append({"role": "user", "content": user})
        return self._ask()

    def request(self) -> list[dict[str, str]]:
        """What is sent: the system prompt, the first request and the last exchange whole;
        older replies as one-line summaries, older feedback as its first lines; then, as a
        hard cap, the oldest exchanges dropped while the prompt exceeds the context budget."""
        history = self.messages
        keep_from = max(2, len(history) - 3)
        view = history[:2]
        replies = 0
        for index, item in enumerate(history[2:], start=2):
            if item["role"] == "assistant":
                replies += 1
            if index >= keep_from:
                view.append(item)
            elif item["role"] == "assistant":
                view.append({"role": "assistant", "content": _summary(replies, item["content"])})
            else:
                view.append({"role": item["role"], "content": _head(item["content"])})
        while _size(view) > self.context_tokens and len(view) > 4:
            del view[2:4]
        return view

    def _complete(self, request: list[dict[str, str]], part: int) -> Completion:
        self.transcript.record("request", messages=request,
                               **({"continuation": part} if part else {}))
        try:
            completion = self.client.complete(request, **self._time_left())
        except LLMError as exc:
            if exc.received_chars:  # a reply that broke off is billed all the same
                self.tokens.charge_broken(request, exc.received_chars)
            raise
        estimated = self.tokens.charge(request, completion)
        self.transcript.record(
            "reply", text=completion.text, prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            finish_reason=completion.finish_reason,
            **({"reasoning": completion.reasoning} if completion.reasoning else {}),
            **({"continuation": part} if part else {}),
            **({"tokens_estimated": True} if estimated else {}))
        return completion

    def _ask(self) -> str:
        """One reply, continued while it was cut off at the output limit (up to
        `max_continuations` times) and joined; ReplyError when it cannot be had whole."""
        base = self.request()
        completion = self._complete(base, 0)
        pieces, thought = [completion.text], bool(completion.reasoning)
        while completion.finish_reason == "length" and len(pieces) <= self.max_continuations:
            self._before_continuing(pieces)
            # The partial reply stands as the model's turn, so it can pick up where it was.
            completion = self._complete(
                [*base, {"role": "assistant", "content": "".join(pieces)},
                 {"role": "user", "content": CONTINUE_REQUEST}], len(pieces))
            pieces.append(completion.text)
            thought = thought or bool(completion.reasoning)
        if completion.finish_reason == "content_filter":
            self._failed("[reply withheld by the endpoint's content filter]", FILTERED)
        if completion.finish_reason == "length":
            self._failed("[reply cut off at the output limit; not repeated]",
                         CUT_OFF.format(pieces=len(pieces)))
        raw = "".join(pieces)
        answer = strip_reasoning(raw)
        if not answer.strip() and (thought or answer != raw.strip("\n")):
            self._failed("[reply held only reasoning; not repeated]", ONLY_REASONING)
        self.messages.append({"role": "assistant", "content": answer})
        return answer

    def _time_left(self) -> dict[str, float]:
        if self.deadline is None:
            return {}
        return {"within_s": self.deadline - time.monotonic()}

    def _before_continuing(self, pieces: list[str]) -> None:
        """A continuation resends the partial reply: not past the token budget, and not
        once the partial reply alone outgrows the context."""
        if self.token_limit is not None and self.tokens.total >= self.token_limit:
            self.messages.append({"role": "assistant",
                                  "content": "[reply cut off at the output limit]"})
            raise LLMBudgetSpent(f"the token budget ({self.token_limit}) ran out while the "
                                 "reply was cut off at the output limit")
        if estimate_tokens(sum(len(piece) for piece in pieces)) > self.context_tokens:
            self._failed("[reply cut off at the output limit; not repeated]",
                         CUT_OFF.format(pieces=len(pieces)))

    def _failed(self, note: str, feedback: str) -> NoReturn:
        # The turn stays in the history (roles keep alternating) as a short note.
        self.messages.append({"role": "assistant", "content": note})
        raise ReplyError(feedback)
