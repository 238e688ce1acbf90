"""Run the Triton offline generator on one job: trace, lower, plan, write the kernel file.

Runs in the worker process (the reference is user code): `python -m bot.agent.offline`.
"""

from __future__ import annotations

from typing import Any

import torch

from bot.agent.backends.triton.offline.codegen import generate_module
from bot.agent.offline.graph import UnsupportedGraphError, lower_program
from bot.agent.offline.job import OfflineJob, OfflineResult, reference_error
from bot.agent.offline.reference import example_inputs, instantiate, load_reference
from bot.agent.offline.trace import aten_ops, export_reference


def _model_and_examples(job: OfflineJob) -> tuple[Any, list[list[Any]]]:
    module = load_reference(job.reference)
    model = instantiate(module, job.init_args)
    examples = example_inputs(module, job.cases)
    with torch.no_grad():
        for inputs in examples:
            model(*inputs)  # a reference that cannot run is the user's error, not ours
    return model, examples


def generate_offline(job: OfflineJob) -> OfflineResult:
    """The Triton module for the job's reference: one kernel set per traced signature."""
    try:
        model, examples = _model_and_examples(job)
    except Exception as exc:  # noqa: BLE001 - the reference is user code
        return reference_error(exc)
    ops: set[str] = set()
    try:
        programs = [export_reference(model, inputs) for inputs in examples]
        ops.update(name for program in programs for name in aten_ops(program))
        graphs = [lower_program(program) for program in programs]
        source = job.reference.read_text(encoding="utf-8")
        generated = generate_module(graphs, source, job.op_name)
    except UnsupportedGraphError as exc:
        return OfflineResult(status="unsupported", unsupported_ops=exc.ops, reason=str(exc),
                             aten_ops=sorted(ops))
    return OfflineResult(status="generated", source=generated.source,
                         kernels=generated.kernel_names, aten_ops=sorted(ops))
