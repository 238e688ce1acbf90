"""Triton: one Python module per operator, verified on a GPU, on Ascend (triton-ascend) or
on any CPU through Triton's interpreter."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bot.agent.backends.base import BenchContext, Workbench
from bot.agent.backends.triton.package import kernel_file
from bot.agent.backends.triton.workbench import TritonWorkbench
from bot.errors import BadInputError
from runners.base import Backend as Runner
from runners.triton import CandidateNotFoundError, TritonBackend, resolve_candidate

if TYPE_CHECKING:
    from bot.agent.offline.job import OfflineJob, OfflineResult


class TritonAgent:
    name = "triton"
    title = "Triton"

    def open(self, context: BenchContext) -> Workbench:
        return TritonWorkbench(context, context.runner or TritonBackend())

    def generate_offline(self, job: OfflineJob) -> OfflineResult:
        from bot.agent.backends.triton.offline import generate_offline

        return generate_offline(job)

    def runner(self) -> Runner:
        return TritonBackend()

    def resolve_candidate(self, path: Path) -> Path:
        try:
            return resolve_candidate(path)
        except CandidateNotFoundError as exc:
            raise BadInputError(str(exc)) from None

    def kernel_paths(self, op: str) -> tuple[str, ...]:
        return (kernel_file(op),)

    def partial_verification(self, device: str) -> str | None:
        return None  # the interpreter runs the kernel's own code: a real verdict
