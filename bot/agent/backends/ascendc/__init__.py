"""Ascend C: a CANN operator package per operator (kernel, tiling, binding, build, tests),
checked statically here and built, tested and timed on an Ascend runner."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bot.agent.backends.ascendc.workbench import AscendCWorkbench, toolchain_generation
from bot.agent.backends.base import BenchContext, Workbench
from bot.errors import BadInputError
from runners.ascendc.backend import AscendCBackend, resolve_package
from runners.ascendc.package import PackageError, kernel_file_name
from runners.base import Backend as Runner

if TYPE_CHECKING:
    from bot.agent.offline.job import OfflineJob, OfflineResult


class AscendCAgent:
    name = "ascendc"
    title = "Ascend C"

    def open(self, context: BenchContext) -> Workbench:
        runner = context.runner or AscendCBackend()
        # A replay rebuilds the packages for the toolchain they were written for.
        generation = context.recorded.get("generation") or toolchain_generation(runner)
        bench = AscendCWorkbench(context, runner, "asc" if generation == "asc" else "legacy",
                                 runner.availability())
        if context.drafting == "llm":
            bench.start_from_templates()
        return bench

    def generate_offline(self, job: OfflineJob) -> OfflineResult:
        from bot.agent.backends.ascendc.offline import generate_offline

        return generate_offline(job)

    def runner(self) -> Runner:
        return AscendCBackend()

    def resolve_candidate(self, path: Path) -> Path:
        try:
            return resolve_package(path)
        except PackageError as exc:
            raise BadInputError(str(exc)) from None

    def kernel_paths(self, op: str) -> tuple[str, ...]:
        return tuple(f"ascendc/{kernel_file_name(op, generation)}"
                     for generation in ("asc", "legacy"))

    def partial_verification(self, device: str) -> str | None:
        if device.startswith("npu"):
            return None
        return (f"judged on {device}, not built with CANN nor run on an NPU: an Ascend "
                "runner's nightly scan verifies it")
