"""The LLM conversation that drafts Ascend C packages: the first request, then feedback.

Answers are the files the model wrote, by name (bot/agent/backends/ascendc/reply.py); a reply
without a usable kernel raises ReplyError, whose text is the next feedback.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.agent.backends.ascendc import prompts as prompts_ascendc
from bot.agent.backends.ascendc.reply import parse_ascendc_reply
from bot.agent.backends.ascendc.skeleton import Skeleton
from bot.agent.drafters import Conversation, TokenCount
from bot.spec import OpSpec


@dataclass
class AscendCDrafter:
    spec: OpSpec
    skeleton: Skeleton  # the starting package: the offline generator's, or the templates'
    conversation: Conversation
    model: str
    hint: str | None = None

    @property
    def name(self) -> str:
        return f"LLM {self.model}"

    @property
    def tokens(self) -> TokenCount:
        return self.conversation.tokens

    def first(self) -> dict[str, str]:
        skeleton = self.skeleton
        request = prompts_ascendc.first_request(
            self.spec.name, self.spec.reference_source, inputs=skeleton.inputs,
            outputs=skeleton.outputs, dtypes=skeleton.dtypes, generation=skeleton.generation,
            files=skeleton.model_files(), has_draft=skeleton.has_draft, hint=self.hint)
        text = self.conversation.start(prompts_ascendc.system_prompt(skeleton.generation),
                                       request)
        return parse_ascendc_reply(text, skeleton.writable)

    def revise(self, feedback: str) -> dict[str, str]:
        writable = self.skeleton.writable
        text = self.conversation.follow_up(prompts_ascendc.retry_request(feedback, writable))
        return parse_ascendc_reply(text, writable)
