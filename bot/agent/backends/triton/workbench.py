"""One Triton generation: prompts, reply parsing, the judge, the package files.

Triton candidates are one Python module (`triton/<op>.py` defining ModelNew). They run
everywhere (GPU, Ascend through triton-ascend, any CPU through the interpreter), so a
candidate can always be verified; static checks are the judge's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.agent.backends.base import (
    BenchContext,
    Candidate,
    DraftUnsupported,
    Precheck,
    TuningVariant,
)
from bot.agent.backends.triton.masks import unmasked_note
from bot.agent.backends.triton.package import kernel_file, package_files
from bot.agent.backends.triton.prompts import (
    TRITON_SYSTEM,
    first_request,
    retry_request,
    tuning_request,
)
from bot.agent.backends.triton.reply import parse_reply
from bot.agent.backends.triton.tuning import tuning_variants as launch_variants
from bot.agent.feedback import timing_feedback, verification_feedback
from bot.agent.offline.run import generate_in_worker
from bot.agent.package import write_files
from bot.errors import BadInputError
from bot.spec import OpSpec
from runners.base import Backend as Runner
from runners.base import VerifyResult

LLM_HINT = ("configure an LLM endpoint to generate it: `opbot generate REF --llm openai "
            "--llm-base-url URL --llm-model NAME` with the key in OPBOT_LLM_API_KEY (any "
            "OpenAI-compatible server: OpenAI, DeepSeek, Qwen, vLLM, Ollama)")
INTERPRETER_CAVEAT = (
    "These timings come from Triton's CPU interpreter, which runs each program instance in "
    "Python/NumPy: they say nothing about speed on a GPU or an NPU. Run `opbot generate` on "
    "a runner with a device for meaningful numbers."
)

# Failures a missing mask causes: a dead worker, wrong values, NaN/Inf from garbage reads.
_BOUNDS_SYMPTOMS = frozenset({"crash", "values", "nan_inf"})


@dataclass
class TritonWorkbench:
    context: BenchContext
    runner: Runner
    # The first request's starting draft, kept: a restart asks again without re-tracing.
    _prompt_draft: list[str | None] = field(default_factory=list, init=False)
    traced_ops: list[str] = field(default_factory=list, init=False)  # from the offline trace

    @property
    def kernel(self) -> str:
        return kernel_file(self.context.spec.name)

    def start_record(self) -> dict[str, Any]:
        return {}

    def offline_draft(self) -> Candidate:
        spec = self.context.spec
        drafted = generate_in_worker(self.context.reference, op_name=spec.name,
                                     init_args=None if spec.init_args is None
                                     else list(spec.init_args), cases=spec.cases())
        if drafted.status == "error":
            raise BadInputError(f"{spec.spec_path}: {drafted.reason}")
        self.traced_ops = list(drafted.aten_ops)
        if drafted.status == "unsupported":
            raise DraftUnsupported(drafted.reason, drafted.unsupported_ops)
        return self.adopt({self.kernel: drafted.source})

    def _draft_for_prompt(self) -> str | None:
        """The review's kernel, else the offline generator's draft, else none (the prompt
        then carries a worked example of the same category)."""
        if self.context.starting_draft is not None:
            return self.context.starting_draft
        if not self._prompt_draft:
            self.context.progress("preparing a starting draft with the offline generator")
            try:
                self._prompt_draft.append(self.offline_draft().files[self.kernel])
            except DraftUnsupported:
                self._prompt_draft.append(None)
        return self._prompt_draft[0]

    def system_prompt(self) -> str:
        return TRITON_SYSTEM

    def first_request(self, hint: str | None) -> str:
        draft = self._draft_for_prompt()
        return first_request(self.context.spec, draft=draft, hint=hint,
                             traced_ops=self.traced_ops)

    def retry_request(self, feedback: str) -> str:
        return retry_request(feedback)

    def tuning_request(self, feedback: str) -> str:
        return tuning_request(feedback)

    def parse_reply(self, text: str) -> Candidate:
        return self.adopt({self.kernel: parse_reply(text).source})

    def restore(self, candidate: Candidate) -> None:
        pass  # every reply is the whole file: nothing builds on an earlier draft

    def adopt(self, written: Mapping[str, str]) -> Candidate:
        # One module: whatever single file was written is the kernel.
        source = written.get(self.kernel, next(iter(written.values()), ""))
        return Candidate(files={self.kernel: source}, written={self.kernel: source})

    def precheck(self, candidate: Candidate) -> Precheck:
        return Precheck(ok=True)  # the judge's static scan runs with the verification

    def unverifiable(self) -> str | None:
        availability = self.runner.availability()  # any CPU, once triton is installed
        return None if availability.available else availability.reason

    def verify(self, candidate: Candidate, folder: Path, *, time_it: bool) -> VerifyResult:
        write_files(folder, candidate.files)
        spec = self.context.spec
        return self.runner.verify(spec.to_request(
            folder / self.kernel, backend="triton", reference_file=self.context.reference,
            time_it=time_it, timeout_s=self.context.timeout_s))

    def feedback(self, result: VerifyResult, candidate: Candidate) -> str:
        text = verification_feedback(result)
        # Out-of-bounds symptoms: point at the accesses that have no mask, by line.
        if {reason.check for reason in result.reasons} & _BOUNDS_SYMPTOMS:
            note = unmasked_note(candidate.files.get(self.kernel, ""))
            if note:
                text += "\n\n" + note
        return text

    def timing_feedback(self, result: VerifyResult) -> str:
        return timing_feedback(result.timing) if result.timing else ""

    def tuning_variants(self, candidate: Candidate) -> list[TuningVariant]:
        # Launch configurations (block sizes, warps, stages) read from the source; the
        # loop times them with the same judge and keeps the fastest verified one.
        source = candidate.files.get(self.kernel, "")
        return [TuningVariant(label=variant.label, detail=variant.detail,
                              candidate=self.adopt({self.kernel: variant.source}))
                for variant in launch_variants(source)]

    def write_package(self, out: Path, candidate: Candidate, spec: OpSpec) -> None:
        write_files(out, package_files(spec, candidate.files[self.kernel]))

    def perf_notes(self, result: VerifyResult | None) -> list[str]:
        if result is not None and result.timing is not None and result.device.startswith("cpu"):
            return [f"> {INTERPRETER_CAVEAT}"]
        reason = self.unverifiable()
        if result is None and reason is not None:
            return [f"Timings: not measured here ({reason})."]
        return []

    def unsupported_message(self, error: DraftUnsupported) -> str:
        return (f"the offline generator cannot lower this reference ({error}; ops: "
                f"{', '.join(error.ops) or '-'}); {LLM_HINT}")

    def unverified_message(self, out: Path) -> str:
        return (f"the Triton package is written to {out} but not verified: "
                f"{self.unverifiable()}. Verify it where triton runs: `opbot verify "
                f"{out / 'op.yaml'} {out / self.kernel}`")
