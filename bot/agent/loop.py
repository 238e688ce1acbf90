"""`opbot generate`: draft a candidate, verify it, write the operator package.

The drafter today is the offline generator (one deterministic attempt: it either lowers
the reference or says which ops it cannot). The verification is the same harness
`opbot verify` uses; nothing is called passed that the harness did not pass.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bot.agent.offline.run import generate_in_worker
from bot.errors import BadInputError
from bot.package import write_package
from bot.report import perf_markdown
from bot.spec import InputSpec, OpSpec, write_reference
from runners.base import VerifyResult
from runners.triton import TritonBackend

GenerateStatus = Literal["passed", "failed", "unsupported"]
Progress = Callable[[str], None]

LLM_HINT = ("configure an LLM endpoint to generate it: `opbot generate REF --llm openai "
            "--llm-base-url URL --llm-model NAME` with the key in OPBOT_LLM_API_KEY (any "
            "OpenAI-compatible server: OpenAI, DeepSeek, Qwen, vLLM, Ollama)")


@dataclass
class GenerateOutcome:
    op: str
    status: GenerateStatus
    attempts: int
    backend: str
    out: Path | None
    verification: VerifyResult | None = None
    unsupported_ops: list[str] = field(default_factory=list)
    message: str = ""
    stopped_because: str = ""

    def to_json(self) -> dict[str, Any]:
        result = self.verification
        timing = result.timing if result else None
        return {
            "op": self.op,
            "status": self.status,
            "attempts": self.attempts,
            "backend": self.backend,
            "out": str(self.out) if self.out else None,
            "cases": [case.to_json() for case in result.cases] if result else [],
            "perf": timing.to_json() if timing else None,
            "reasons": [reason.to_json() for reason in result.reasons] if result else [],
            "unsupported_ops": self.unsupported_ops,
            "message": self.message,
            "stopped_because": self.stopped_because,
            "device": result.device if result else None,
            "warnings": result.warnings if result else [],
        }


def _inferred_spec(spec: OpSpec, result: VerifyResult) -> OpSpec:
    """A KernelBench reference's spec, completed with the inputs the harness observed."""
    inferred = result.inferred or {}
    items = inferred.get("inputs")
    if spec.inputs is not None or not items:
        return spec
    inputs = []
    for item in items:
        if "value" in item:
            inputs.append(InputSpec(name=item["name"], value=item["value"]))
        else:
            inputs.append(InputSpec(name=item["name"], dtypes=(item["dtype"],),
                                    shapes=(tuple(item["shape"]),), init=item["init"],
                                    low=item.get("low") if item["init"] == "randint" else None,
                                    high=item.get("high") if item["init"] == "randint" else None))
    init_args = inferred.get("init_args")
    return spec.with_inputs(inputs, init_args if spec.init_args is None else spec.init_args)


def generate(spec: OpSpec, *, backend: str, out: Path, progress: Progress,
             timeout_s: float = 600.0) -> GenerateOutcome:
    if backend != "triton":
        return GenerateOutcome(
            op=spec.name, status="unsupported", attempts=0, backend=backend, out=None,
            message="the offline generator writes Triton kernels only; for Ascend C, "
            + LLM_HINT, stopped_because="unsupported")
    with tempfile.TemporaryDirectory(prefix="opbot-") as tmp:
        workdir = Path(tmp)
        reference = spec.reference_path or workdir / "reference.py"
        if spec.reference_path is None:
            write_reference(spec, reference)
        progress(f"tracing the reference of {spec.name} and writing Triton kernels")
        drafted = generate_in_worker(reference, op_name=spec.name,
                                     init_args=None if spec.init_args is None
                                     else list(spec.init_args), cases=spec.cases())
        if drafted.status == "error":
            raise BadInputError(f"{spec.spec_path}: {drafted.reason}")
        if drafted.status == "unsupported":
            ops = ", ".join(drafted.unsupported_ops) or "-"
            return GenerateOutcome(
                op=spec.name, status="unsupported", attempts=1, backend=backend, out=None,
                unsupported_ops=drafted.unsupported_ops,
                message=f"the offline generator cannot lower this reference ({drafted.reason}; "
                f"ops: {ops}); {LLM_HINT}", stopped_because="unsupported")
        candidate = workdir / "triton" / f"{spec.name}.py"
        candidate.parent.mkdir()
        candidate.write_text(drafted.source, encoding="utf-8")
        progress(f"verifying {len(drafted.kernels)} kernel(s) against the reference")
        result = TritonBackend().verify(spec.to_request(
            candidate, reference_file=reference, time_it=True, timeout_s=timeout_s))
        if any(reason.check == "reference" for reason in result.reasons):
            raise BadInputError(f"{spec.spec_path}: {result.reasons[0].message}")
        full_spec = _inferred_spec(spec, result)
        progress(f"writing the operator package to {out}")
        report = perf_markdown(spec.name, backend, result, attempts=1,
                               generator="opbot offline generator")
        write_package(out, full_spec, drafted.source, report)
    return GenerateOutcome(op=spec.name, status=result.status, attempts=1, backend=backend,
                           out=out, verification=result,
                           stopped_because="passed" if result.passed else "verification")
