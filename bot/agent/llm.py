"""The LLM client: any OpenAI-compatible Chat Completions endpoint, through `openai`.

Chat Completions is the API every such server offers (OpenAI, DeepSeek, Qwen, vLLM,
Ollama...). Retries with backoff on 429, 5xx, timeouts and dropped connections are the
`openai` client's own, which honours Retry-After; what still fails becomes an LLMError
with a plain message, never one that quotes the key.

Real servers differ, so the client adapts instead of failing:
- replies are streamed by default (Server-Sent Events), and the timeout bounds the silence
  between two chunks, not the whole reply, so a long reasoning reply is not cut while the
  server keeps talking; a server that ignores `stream` is asked again without it;
- an optional parameter a strict server refuses (HTTP 400 naming it) is dropped, and stays
  dropped for the rest of the run;
- reasoning arrives in `reasoning_content` / `reasoning` fields or in <think> blocks;
  `strip_reasoning` keeps it away from the reply parser.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from bot.errors import BadInputError, OpbotError

if TYPE_CHECKING:
    import openai

KEY_VARIABLES = ("OPBOT_LLM_API_KEY", "OPENAI_API_KEY")
BASE_URL_VARIABLE = "OPBOT_LLM_BASE_URL"
MODEL_VARIABLE = "OPBOT_LLM_MODEL"
# Local servers (Ollama, vLLM) accept any key; the client insists on one.
_NO_KEY = "no-key"
# Some providers default to 4K output tokens, less than a three-file reply.
DEFAULT_MAX_OUTPUT_TOKENS = 16_384
DEFAULT_TIMEOUT_S = 180.0
# A server that trickles forever must still end: a whole streamed reply's ceiling.
DEFAULT_TOTAL_S = 3600.0
# Beyond this many characters a reply is a runaway (or hostile) server, not an answer.
MAX_REPLY_CHARS = 4_000_000

Message = Mapping[str, str]

_THINK_OPEN = re.compile(r"<(think|thinking)>", re.IGNORECASE)
# A closing tag left alone: the template opened the block inside the prompt (DeepSeek-R1).
_THINK_CLOSE = re.compile(r"</think(?:ing)?\s*>", re.IGNORECASE)
_FENCE_OPEN = re.compile(r"^(`{3,}|~{3,})", re.MULTILINE)


def _fence_end(text: str, fence: re.Match[str]) -> int:
    closing = re.compile(rf"^{re.escape(fence.group(1))}[ \t]*$", re.MULTILINE)
    found = closing.search(text, fence.end())
    return found.end() if found else len(text)


def strip_reasoning(text: str) -> str:
    """The answer part of a reply: every reasoning block outside the answer's code removed,
    closed or cut off, so nothing the model only thought about (a draft in a fenced block
    included) reads as its answer; a `<think>` written inside a code block stays code."""
    close, fence = _THINK_CLOSE.search(text), _FENCE_OPEN.search(text)
    opened = _THINK_OPEN.search(text)
    if close and (not opened or close.start() < opened.start()) and (
            not fence or close.start() < fence.start()):
        text = text[close.end():]  # the block began in the prompt
    kept, position = [], 0
    while position < len(text):
        think = _THINK_OPEN.search(text, position)
        fence = _FENCE_OPEN.search(text, position)
        if think and (not fence or think.start() < fence.start()):
            kept.append(text[position:think.start()])
            end = re.compile(rf"</{think.group(1)}\s*>", re.IGNORECASE).search(text,
                                                                              think.end())
            position = end.end() if end else len(text)
        elif fence:
            stop = _fence_end(text, fence)
            kept.append(text[position:stop])
            position = stop
        else:
            kept.append(text[position:])
            break
    return "".join(kept).strip("\n")


class LLMError(OpbotError):
    """The endpoint could not give an answer (after the client's retries).
    `received_chars`: what a reply had streamed before it failed (billed all the same)."""

    def __init__(self, message: str, received_chars: int = 0) -> None:
        super().__init__(message)
        self.received_chars = received_chars


class LLMBudgetSpent(LLMError):
    """The budget (its time, or its tokens in the middle of a cut-off reply) ran out while
    a reply was still being had."""


@dataclass(frozen=True)
class LLMSettings:
    base_url: str | None
    model: str
    api_key: str | None
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_retries: int = 4
    # None: the parameter is not sent and the server's default applies.
    max_output_tokens: int | None = DEFAULT_MAX_OUTPUT_TOKENS
    temperature: float | None = None
    reasoning_effort: str | None = None
    stream: bool = True
    total_timeout_s: float = DEFAULT_TOTAL_S

    @classmethod
    def resolve(cls, *, base_url: str | None, model: str | None,
                timeout_s: float = DEFAULT_TIMEOUT_S,
                environ: Mapping[str, str] | None = None) -> LLMSettings:
        env = os.environ if environ is None else environ
        chosen_model = model or env.get(MODEL_VARIABLE)
        if not chosen_model:
            raise BadInputError("--llm openai needs a model: --llm-model NAME (or "
                                f"{MODEL_VARIABLE})")
        key = next((env[name] for name in KEY_VARIABLES if env.get(name)), None)
        return cls(base_url=base_url or env.get(BASE_URL_VARIABLE) or None,
                   model=chosen_model, api_key=key, timeout_s=timeout_s)


def llm_configured(base_url: str | None, environ: Mapping[str, str] | None = None) -> bool:
    """`--llm auto`: an endpoint or a key is configured."""
    env = os.environ if environ is None else environ
    return bool(base_url or env.get(BASE_URL_VARIABLE) or any(env.get(name)
                                                                for name in KEY_VARIABLES))


@dataclass(frozen=True)
class Completion:
    """One reply as the server sent it. Token counts are None where the server reported
    none; the conversation estimates them then."""

    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = "stop"
    reasoning: str = ""


class ChatClient(Protocol):
    def complete(self, messages: Sequence[Message], *,
                 within_s: float | None = None) -> Completion:
        """One chat completion; raise LLMError when none can be had, LLMBudgetSpent when none
        came within `within_s` seconds (the time budget's rest)."""
        ...


class _NoEvents(Exception):
    """A streamed request answered with no event at all: the server ignores `stream`."""


def _text(value: Any) -> str:
    """A text field of a reply; anything else a server sends there counts as nothing."""
    return value if isinstance(value, str) else ""


def _reasoning(part: Any) -> str:
    """The reasoning a message or delta carries: DeepSeek and vLLM call the field
    `reasoning_content`, OpenRouter and newer vLLM `reasoning`."""
    return _text(getattr(part, "reasoning_content", None)) or _text(getattr(part, "reasoning",
                                                                            None))


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if math.isfinite(value) else None


def _usage(usage: Any) -> tuple[int | None, int | None]:
    return (_count(getattr(usage, "prompt_tokens", None)),
            _count(getattr(usage, "completion_tokens", None)))


# The optional parameters a strict server may refuse, by the name it would quote.
_TOKENS, _COMPLETION_TOKENS = "max_tokens", "max_completion_tokens"
_STREAM, _STREAM_OPTIONS = "stream", "stream_options"


def _names_in(text: str, names: Iterable[str]) -> set[str]:
    # Whole words only: "stream" must not match inside "stream_options".
    return {name for name in names if re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text)}


@dataclass
class _Stream:
    """A streamed reply put back together."""

    content: list[str]
    reasoning: list[str]
    finish_reason: str | None = None
    usage: Any = None
    events: int = 0
    chars: int = 0

    def take(self, chunk: Any) -> None:
        self.events += 1
        self.usage = getattr(chunk, "usage", None) or self.usage
        for choice in getattr(chunk, "choices", None) or []:
            if getattr(choice, "index", 0) not in (0, None):
                continue  # we ask for one choice; others are not ours to join
            delta = getattr(choice, "delta", None)
            piece, thought = _text(getattr(delta, "content", None)), _reasoning(delta)
            self.content.append(piece)
            self.reasoning.append(thought)
            self.chars += len(piece) + len(thought)
            self.finish_reason = _text(getattr(choice, "finish_reason", None)) or \
                self.finish_reason

    def completion(self) -> Completion:
        prompt, completion = _usage(self.usage)
        return Completion(text="".join(self.content), prompt_tokens=prompt,
                          completion_tokens=completion, finish_reason=self.finish_reason,
                          reasoning="".join(self.reasoning))


class OpenAIChatClient:
    """ChatClient over the `openai` package's Chat Completions."""

    def __init__(self, settings: LLMSettings) -> None:
        import openai

        self.settings = settings
        # httpx bounds each read, not the whole request: with streaming that is the silence
        # allowed between two chunks.
        self._client = openai.OpenAI(base_url=settings.base_url,
                                     api_key=settings.api_key or _NO_KEY,
                                     timeout=openai.Timeout(settings.timeout_s),
                                     max_retries=settings.max_retries)
        self.refused: set[str] = set()  # optional parameters this server refused
        self._stream = settings.stream
        self._tokens_parameter = _TOKENS

    @property
    def streaming(self) -> bool:
        return self._stream

    def complete(self, messages: Sequence[Message], *,
                 within_s: float | None = None) -> Completion:
        """One completion; with `within_s`, given up when the time budget runs out, however
        the server trickles (httpx's timeouts bound each read, not the whole request)."""
        if within_s is None:
            return self._complete(messages)
        if within_s <= 0:
            raise LLMBudgetSpent("the time budget ran out before the request")
        answer: list[Completion | BaseException] = []

        def ask() -> None:
            try:
                answer.append(self._complete(messages))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                answer.append(exc)

        worker = threading.Thread(target=ask, name="opbot-llm-request", daemon=True)
        worker.start()
        worker.join(within_s)
        if not answer:
            self._abandon()
            raise LLMBudgetSpent(f"the LLM endpoint had not answered when the time budget ran "
                              f"out ({within_s:.0f} s left at the request)")
        if isinstance(answer[0], BaseException):
            raise answer[0]
        return answer[0]

    def _abandon(self) -> None:
        """A request left behind keeps its own connection; later ones get a new client."""
        import openai

        old = self._client
        self._client = openai.OpenAI(base_url=self.settings.base_url,
                                     api_key=self.settings.api_key or _NO_KEY,
                                     timeout=openai.Timeout(self.settings.timeout_s),
                                     max_retries=self.settings.max_retries)
        with contextlib.suppress(Exception):
            old.close()

    def _complete(self, messages: Sequence[Message]) -> Completion:
        import openai

        payload = [{"role": item["role"], "content": item["content"]} for item in messages]
        # Each round drops at least one parameter, so this ends.
        for _ in range(8):
            try:
                return self._request(payload)
            except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
                if not self._drop_refused(exc):
                    raise LLMError(self._status_message(exc)) from None
            except _NoEvents:
                self._stream = False
                self.refused.add(_STREAM)
            except openai.OpenAIError as exc:
                raise self._translated(exc) from None
            except (ValueError, TypeError, KeyError, AttributeError):
                # A 200 whose body is not the JSON it claims (an HTML page, a proxy's).
                raise LLMError("the LLM endpoint answered with a body that is not a chat "
                               "completion (not JSON, or not its shape)") from None
        raise LLMError("the LLM endpoint kept refusing the request's parameters")

    def _arguments(self, payload: list[dict[str, str]]) -> dict[str, Any]:
        settings = self.settings
        arguments: dict[str, Any] = {"model": settings.model, "messages": payload}
        if settings.max_output_tokens is not None and self._tokens_parameter:
            arguments[self._tokens_parameter] = settings.max_output_tokens
        if settings.temperature is not None and "temperature" not in self.refused:
            arguments["temperature"] = settings.temperature
        if settings.reasoning_effort is not None and "reasoning_effort" not in self.refused:
            arguments["reasoning_effort"] = settings.reasoning_effort
        if self._stream:
            arguments[_STREAM] = True
            if _STREAM_OPTIONS not in self.refused:
                arguments[_STREAM_OPTIONS] = {"include_usage": True}
        return arguments

    def _request(self, payload: list[dict[str, str]]) -> Completion:
        arguments = self._arguments(payload)
        response = self._client.chat.completions.create(**arguments)
        if arguments.get(_STREAM):
            return self._read_stream(response)
        return _whole(response)

    def _read_stream(self, stream: openai.Stream[Any]) -> Completion:
        import openai

        reply = _Stream(content=[], reasoning=[])
        deadline = time.monotonic() + self.settings.total_timeout_s
        try:
            for chunk in stream:
                reply.take(chunk)
                if time.monotonic() > deadline:
                    raise LLMError("the LLM endpoint was still streaming its reply after "
                                   f"{self.settings.total_timeout_s:g} s; gave up", reply.chars)
                if reply.chars > MAX_REPLY_CHARS:
                    raise LLMError(f"the LLM endpoint streamed more than {MAX_REPLY_CHARS} "
                                   "characters; gave up on a runaway reply", reply.chars)
        except openai.APITimeoutError:
            raise LLMError("the LLM endpoint went silent for more than "
                           f"{self.settings.timeout_s:g} s in the middle of its streamed "
                           "reply", reply.chars) from None
        except openai.APIConnectionError:
            raise LLMError("the connection to the LLM endpoint dropped in the middle of its "
                           "streamed reply", reply.chars) from None
        except openai.APIError as exc:
            raise LLMError("the LLM endpoint reported an error in the middle of its "
                           f"streamed reply: {self._quoted(exc.message)}", reply.chars) from None
        except ValueError:  # an event whose data is not JSON
            raise LLMError("the LLM endpoint's event stream is not readable (an event that "
                           "is not JSON)", reply.chars) from None
        finally:
            stream.close()
        if reply.events == 0:
            raise _NoEvents
        return reply.completion()

    def _drop_refused(self, exc: openai.APIStatusError) -> bool:
        """Drop the optional parameters a 400 names; False when it names none we sent."""
        said = f"{exc.message} {json.dumps(exc.body, default=str)}"
        sent = [name for name in self._arguments([]) if name not in ("model", "messages")]
        named = _names_in(said, sent)
        if not named:
            return False
        self.refused |= named
        if _TOKENS in named:  # OpenAI's reasoning models want the newer name
            self._tokens_parameter = _COMPLETION_TOKENS
        if _COMPLETION_TOKENS in named:
            self._tokens_parameter = ""
        if _STREAM in named:
            self._stream = False
        return True

    def _quoted(self, message: Any) -> str:
        """A server's own words, short and without the key."""
        text = " ".join(str(message or "").split())[:300]
        if self.settings.api_key:
            text = text.replace(self.settings.api_key, "[REDACTED]")
        return text or "no detail"

    def _status_message(self, exc: openai.APIStatusError) -> str:
        retried = exc.status_code in (408, 409, 429) or exc.status_code >= 500
        after = f" (after {self.settings.max_retries} retries)" if retried else ""
        return (f"the LLM endpoint answered HTTP {exc.status_code}{after}: "
                f"{self._quoted(exc.message)}")

    def _translated(self, exc: Exception) -> LLMError:
        import openai

        if isinstance(exc, openai.APITimeoutError):
            return LLMError(f"the LLM endpoint did not answer within {self.settings.timeout_s:g}"
                            f" s ({self.settings.max_retries} retries)")
        if isinstance(exc, openai.APIStatusError):
            return LLMError(self._status_message(exc))
        if isinstance(exc, openai.APIConnectionError):
            return LLMError("the LLM endpoint cannot be reached "
                            f"({_shown_url(self.settings.base_url)})")
        return LLMError(f"the LLM request failed: {type(exc).__name__}")


def _shown_url(url: str | None) -> str:
    """An endpoint's URL as messages may show it: no user, password or query (keys hide
    there)."""
    if not url:
        return "the default OpenAI URL"
    parts = urlsplit(url)
    host = parts.hostname or "?"
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit((parts.scheme, f"{host}{port}", parts.path, "", ""))


def _whole(response: Any) -> Completion:
    """A non-streamed reply; a hostile or broken body reads as an empty reply."""
    choices = getattr(response, "choices", None) or []
    choice = choices[0] if choices else None
    message = getattr(choice, "message", None)
    prompt, completion = _usage(getattr(response, "usage", None))
    text, reasoning = _text(getattr(message, "content", None)), _reasoning(message)
    if len(text) + len(reasoning) > MAX_REPLY_CHARS:
        raise LLMError(f"the LLM endpoint answered more than {MAX_REPLY_CHARS} characters; "
                       "gave up on a runaway reply", len(text) + len(reasoning))
    return Completion(text=_text(getattr(message, "content", None)), prompt_tokens=prompt,
                      completion_tokens=completion,
                      finish_reason=_text(getattr(choice, "finish_reason", None)) or None,
                      reasoning=_reasoning(message))
