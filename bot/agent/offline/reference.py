"""Load a KernelBench-format reference and build what a generator traces: the model and
one example input list per traced signature. This runs user code: call it in the worker.

On the CPU interpreter a reference past the work budget is traced at the scaled-down sizes
the harness verifies it on (runners.harness.scaling): the same plan, so a size the kernel
takes from the model's parameters (a LayerNorm's normalized shape) matches the verification.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from runners.base import CaseSpec

_PLAN = "__opbot_scale_plan__"  # the module's scale plan, set by instantiate()


class NotAPythonFileError(ValueError):
    """The reference path cannot be imported as a Python module."""


def load_reference(path: Path, module_name: str = "opbot_reference") -> ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise NotAPythonFileError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def init_arguments(module: ModuleType, init_args: Sequence[Any] | None) -> list[Any]:
    """The given init args, else the reference's get_init_inputs(), else none."""
    if init_args is not None:
        return list(init_args)
    return list(module.get_init_inputs()) if hasattr(module, "get_init_inputs") else []


def instantiate(module: ModuleType, init_args: Sequence[Any] | None) -> Any:
    """The reference's Model, seeded so its parameters match the harness's."""
    import torch

    arguments = init_arguments(module, init_args)
    plan = _cpu_plan(module, arguments)
    if plan is not None:
        arguments = list(plan.init_after)
    torch.manual_seed(0)
    return module.Model(*arguments)


def _cpu_plan(module: ModuleType, arguments: Sequence[Any]) -> Any:
    """The harness's scale plan for this reference on this machine (None: real sizes),
    applied to the module's size constants and kept on the module for example_inputs().
    UnscalableError when it is too big for the CPU and cannot be scaled."""
    from runners.harness import scaling

    if scaling.on_accelerator() or not hasattr(module, "get_inputs"):
        return None
    plan = scaling.plan_for_reference(module, arguments, ())
    if plan is not None:
        scaling.apply_to_constants(module, plan)
        setattr(module, _PLAN, plan)
    return plan


def _signature(values: list[Any]) -> tuple[tuple[int, str], ...]:
    import torch

    return tuple((value.dim(), str(value.dtype)) for value in values
                 if isinstance(value, torch.Tensor))


def example_inputs(module: ModuleType, cases: list[CaseSpec]) -> list[list[Any]]:
    """One example input list per distinct signature (ranks and dtypes) among the cases."""
    import torch

    from runners.harness import scaling

    plan = getattr(module, _PLAN, None)
    if not cases:
        torch.manual_seed(0)
        if plan is not None:
            return [scaling.scaled_inputs(plan, module.get_inputs, torch.Generator())]
        return [list(module.get_inputs())]
    from runners.harness.inputs import prepare_spec_case

    if plan is not None:
        cases = [scaling.scale_case(case, plan) for case in cases]

    examples: dict[tuple[tuple[int, str], ...], list[Any]] = {}
    for case in cases:
        values = prepare_spec_case(case).inputs
        examples.setdefault(_signature(values), values)
    return list(examples.values())
