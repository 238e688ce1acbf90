"""The LLM client: any OpenAI-compatible Chat Completions endpoint, through `openai`.

Chat Completions is the API every such server offers (OpenAI, DeepSeek, Qwen, vLLM,
Ollama...). Retries with backoff on 429, 5xx, timeouts and dropped connections are the
`openai` client's own, which honours Retry-After; what still fails becomes an LLMError
with a plain message, never one that quotes the key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from bot.errors import BadInputError, OpbotError

KEY_VARIABLES = ("OPBOT_LLM_API_KEY", "OPENAI_API_KEY")
BASE_URL_VARIABLE = "OPBOT_LLM_BASE_URL"
MODEL_VARIABLE = "OPBOT_LLM_MODEL"
# Local servers (Ollama, vLLM) accept any key; the client insists on one.
_NO_KEY = "no-key"

Message = Mapping[str, str]


class LLMError(OpbotError):
    """The endpoint could not give an answer (after the client's retries)."""


@dataclass(frozen=True)
class LLMSettings:
    base_url: str | None
    model: str
    api_key: str | None
    timeout_s: float = 180.0
    max_retries: int = 4

    @classmethod
    def resolve(cls, *, base_url: str | None, model: str | None, timeout_s: float = 180.0,
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
    text: str
    prompt_tokens: int
    completion_tokens: int


class ChatClient(Protocol):
    def complete(self, messages: Sequence[Message]) -> Completion:
        """One chat completion; raise LLMError when none can be had."""
        ...


class OpenAIChatClient:
    """ChatClient over the `openai` package's Chat Completions."""

    def __init__(self, settings: LLMSettings) -> None:
        import openai

        self.settings = settings
        self._client = openai.OpenAI(base_url=settings.base_url,
                                     api_key=settings.api_key or _NO_KEY,
                                     timeout=settings.timeout_s,
                                     max_retries=settings.max_retries)

    def complete(self, messages: Sequence[Message]) -> Completion:
        import openai

        try:
            response = self._client.chat.completions.create(
                model=self.settings.model,
                messages=[{"role": item["role"], "content": item["content"]}  # type: ignore[misc]
                          for item in messages],
            )
        except openai.APITimeoutError:
            raise LLMError(f"the LLM endpoint did not answer within {self.settings.timeout_s:g}"
                           f" s ({self.settings.max_retries} retries)") from None
        except openai.APIStatusError as exc:
            raise LLMError(f"the LLM endpoint answered HTTP {exc.status_code} "
                           f"(after {self.settings.max_retries} retries where that helps)"
                           ) from None
        except openai.APIConnectionError:
            raise LLMError("the LLM endpoint cannot be reached "
                           f"({self.settings.base_url or 'the default OpenAI URL'})") from None
        except openai.OpenAIError as exc:
            raise LLMError(f"the LLM request failed: {type(exc).__name__}") from None
        choices = getattr(response, "choices", None) or []
        text = (choices[0].message.content or "") if choices else ""
        usage = getattr(response, "usage", None)
        return Completion(text=text,
                          prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                          completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0))
