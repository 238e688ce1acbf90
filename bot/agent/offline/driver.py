"""Run the offline generator on one reference: trace, lower, plan, write the kernel file.

Runs in a worker process (the reference is user code): `python -m bot.agent.offline`.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runners.base import CaseSpec


@dataclass(frozen=True)
class OfflineResult:
    status: str  # "generated" | "unsupported" | "error"
    source: str = ""
    kernels: list[str] = field(default_factory=list)
    unsupported_ops: list[str] = field(default_factory=list)
    reason: str = ""
    files: dict[str, str] = field(default_factory=dict)  # Ascend C: the package's files

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "source": self.source, "kernels": self.kernels,
                "unsupported_ops": self.unsupported_ops, "reason": self.reason,
                "files": self.files}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OfflineResult:
        return cls(status=str(data.get("status", "error")), source=str(data.get("source", "")),
                   kernels=list(data.get("kernels", [])),
                   unsupported_ops=list(data.get("unsupported_ops", [])),
                   reason=str(data.get("reason", "")),
                   files={str(key): str(value)
                          for key, value in (data.get("files") or {}).items()})


def _load_reference(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("opbot_reference", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules["opbot_reference"] = module
    spec.loader.exec_module(module)
    return module


def _signature(values: list[Any]) -> tuple[tuple[int, str], ...]:
    import torch

    return tuple((value.dim(), str(value.dtype)) for value in values
                 if isinstance(value, torch.Tensor))


def example_inputs(module: Any, cases: list[CaseSpec]) -> list[list[Any]]:
    """One example input list per distinct signature (ranks and dtypes) among the cases."""
    import torch

    if not cases:
        torch.manual_seed(0)
        return [list(module.get_inputs())]
    from runners.harness.inputs import prepare_spec_case

    examples: dict[tuple[tuple[int, str], ...], list[Any]] = {}
    for case in cases:
        values = prepare_spec_case(case).inputs
        examples.setdefault(_signature(values), values)
    return list(examples.values())


def generate_ascendc(reference: Path, *, init_args: list[Any] | None, cases: list[CaseSpec],
                     op_name: str, generation: str) -> OfflineResult:
    """The Ascend C package for an elementwise reference (see bot.agent.offline.ascendc)."""
    from bot.agent.offline.ascendc import PackageOptions, Unsupported, generate_from_reference

    options = PackageOptions(generation="asc" if generation == "asc" else "legacy",
                             cases=tuple(case.to_json() for case in cases))
    try:
        result = generate_from_reference(reference, op_name, cases=cases, init_args=init_args,
                                         options=options)
    except Exception as exc:  # noqa: BLE001 - the reference is user code
        return OfflineResult(status="error", reason=f"the reference failed to run: "
                             f"{type(exc).__name__}: {exc}")
    if isinstance(result, Unsupported):
        return OfflineResult(status="unsupported", unsupported_ops=list(result.ops),
                             reason=result.reason)
    return OfflineResult(status="generated", files=dict(result.files))


def generate(reference: Path, *, init_args: list[Any] | None, cases: list[CaseSpec],
             op_name: str) -> OfflineResult:
    import torch

    from bot.agent.offline.codegen import generate_module
    from bot.agent.offline.graph import UnsupportedGraphError, lower_program
    from bot.agent.offline.trace import export_reference

    try:
        module = _load_reference(reference)
        args = list(init_args) if init_args is not None else (
            list(module.get_init_inputs()) if hasattr(module, "get_init_inputs") else [])
        torch.manual_seed(0)
        model = module.Model(*args)
        examples = example_inputs(module, cases)
        with torch.no_grad():
            for inputs in examples:
                model(*inputs)  # a reference that cannot run is the user's error, not ours
    except Exception as exc:  # noqa: BLE001 - the reference is user code
        return OfflineResult(status="error", reason=f"the reference failed to run: "
                             f"{type(exc).__name__}: {exc}")
    try:
        graphs = [lower_program(export_reference(model, inputs)) for inputs in examples]
        source = reference.read_text(encoding="utf-8")
        generated = generate_module(graphs, source, op_name)
    except UnsupportedGraphError as exc:
        return OfflineResult(status="unsupported", unsupported_ops=exc.ops, reason=str(exc))
    return OfflineResult(status="generated", source=generated.source,
                         kernels=generated.kernel_names)
