"""The Ascend C package for an elementwise reference: lower each traced graph, render.

`generate` takes IR graphs (one per traced dtype); `generate_from_model` traces a module
first and `generate_from_reference` loads a KernelBench-format reference (user code: the
worker calls it, see `driver`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from bot.agent.backends.ascendc.offline.lower import Lowered, Unsupported, lower
from bot.agent.backends.ascendc.offline.rows import LoweredRows, lower_rows
from bot.agent.offline.reference import (
    NotAPythonFileError,
    example_inputs,
    instantiate,
    load_reference,
)
from runners.ascendc.cpu_verify import vector_cores
from runners.ascendc.package import (
    DEFAULT_NPU_ARCH,
    DEFAULT_SOC,
    KERNEL_DTYPES,
    Generation,
    KernelBody,
    PackageRequest,
    render_package,
)
from runners.ascendc.tiling import RowTilingConfig, row_fit_problem

if TYPE_CHECKING:
    from bot.agent.offline.graph import Graph
    from runners.base import CaseSpec


@dataclass(frozen=True)
class Generated:
    op: str
    generation: Generation
    body: KernelBody
    inputs: tuple[str, ...]
    outputs: int
    dtypes: tuple[str, ...]
    files: dict[str, str]
    status: Literal["generated"] = "generated"


@dataclass(frozen=True)
class PackageOptions:
    """What the package needs besides the kernel: where it builds and what it tests."""

    generation: Generation = "legacy"
    cases: tuple[Mapping[str, Any], ...] = ()
    tolerances: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    init_args: Sequence[Any] | None = None
    perf_case: Mapping[str, Any] | None = None
    derive_tail_cases: bool = True
    soc: str = DEFAULT_SOC
    npu_arch: str = DEFAULT_NPU_ARCH


def generate(graphs: Sequence[Graph], op: str,
             options: PackageOptions | None = None) -> Generated | Unsupported:
    """The package for a reference traced once per dtype (one graph each).

    The kernel is one template over the element type, so every dtype's graph must lower
    to the same compute chain (float casts aside, they do for the elementwise family).
    """
    options = options or PackageOptions()
    if not graphs:
        return Unsupported((), "no traced graph to generate from")
    lowered = _lower_all(graphs)
    if isinstance(lowered, Unsupported):
        return lowered
    first = lowered[0]
    for other in lowered[1:]:
        if (other.body.compute, other.inputs, other.outputs) != \
                (first.body.compute, first.inputs, first.outputs):
            return Unsupported((), f"the {other.dtype} trace computes differently from the "
                               f"{first.dtype} one; one kernel template cannot serve both")
    dtypes = tuple(dict.fromkeys(item.dtype for item in lowered))
    params = first.params if isinstance(first, LoweredRows) else ()
    request = PackageRequest(
        op=op, generation=options.generation, body=first.body, inputs=first.inputs,
        outputs=first.outputs, dtypes=dtypes, cases=options.cases,
        tolerances=options.tolerances, init_args=options.init_args,
        perf_case=options.perf_case, derive_tail_cases=options.derive_tail_cases,
        soc=options.soc, npu_arch=options.npu_arch,
        pattern="rows" if isinstance(first, LoweredRows) else "elementwise", params=params)
    if request.pattern == "rows":
        too_long = row_fit_problems(request, [*options.cases,
                                              *([options.perf_case] if options.perf_case
                                                else [])])
        if too_long:
            return Unsupported(("row too long for UB",), too_long[0])
    return Generated(op=op, generation=options.generation, body=first.body,
                     inputs=first.inputs, outputs=first.outputs, dtypes=dtypes,
                     files=render_package(request))


def _lower_all(graphs: Sequence[Graph]) -> list[Lowered] | Unsupported:
    """Every graph lowered by one generator: the elementwise one, else the row one (for
    graphs with a reduction); the first failure says why neither applies."""
    elementwise: list[Lowered] = []
    for graph in graphs:
        result = lower(graph)
        if isinstance(result, Unsupported):
            if not any(node.kind == "reduce" for node in graph.nodes):
                return result
            return _lower_rows_all(graphs)
        elementwise.append(result)
    return elementwise


def _lower_rows_all(graphs: Sequence[Graph]) -> list[Lowered] | Unsupported:
    rows: list[Lowered] = []
    for graph in graphs:
        result = lower_rows(graph)
        if isinstance(result, Unsupported):
            return result
        rows.append(result)
    return rows


def _case_rows(case: Mapping[str, Any]) -> tuple[int, int, str] | None:
    """(rows, row length, dtype) of a case's first tensor input."""
    tensors = [item for item in case.get("inputs", []) if item.get("kind") == "tensor"]
    if not tensors:
        return None
    shape = [int(dim) for dim in tensors[0]["shape"]] or [1]
    numel = 1
    for dim in shape:
        numel *= dim
    return (numel // shape[-1] if shape[-1] else 0), shape[-1], str(tensors[0]["dtype"])


def row_fit_problems(request: PackageRequest, cases: Sequence[Mapping[str, Any]]) -> list[str]:
    """Why some case's rows do not fit in UB (the row pattern keeps a whole row there)."""
    problems: list[str] = []
    for case in cases:
        found = _case_rows(case)
        if found is None or found[2] not in KERNEL_DTYPES:
            continue
        rows, length, dtype = found
        config = RowTilingConfig(
            rows=max(rows, 1), row_length=length, dtype_bytes=KERNEL_DTYPES[dtype].size,
            cores=vector_cores(request.soc), inputs=len(request.inputs),
            params=len(request.params), outputs=request.outputs,
            compute_slots=request.body.compute_slots, stat_slots=request.body.stat_slots)
        problem = row_fit_problem(config)
        if problem:
            problems.append(f"case {case.get('name', '?')} ({dtype}): {problem}")
    return problems


def generate_from_model(model: Any, examples: Sequence[Sequence[Any]], op: str,
                        options: PackageOptions | None = None) -> Generated | Unsupported:
    """Trace `model` on each example input list (one per dtype) and generate."""
    from bot.agent.offline.graph import UnsupportedGraphError, lower_program
    from bot.agent.offline.trace import export_reference

    graphs: list[Graph] = []
    for inputs in examples:
        try:
            graphs.append(lower_program(export_reference(model, list(inputs))))
        except UnsupportedGraphError as exc:
            return Unsupported(tuple(exc.ops), str(exc))
    return generate(graphs, op, options)


def generate_from_reference(reference: Path, op: str, *, cases: Sequence[CaseSpec],
                            init_args: Sequence[Any] | None,
                            options: PackageOptions | None = None) -> Generated | Unsupported:
    """Load a KernelBench-format reference and generate. It runs user code: call it in a
    worker process, as `driver.generate_offline` is."""
    try:
        module = load_reference(reference, "opbot_ascendc_reference")
    except NotAPythonFileError as exc:
        return Unsupported((), str(exc))
    model = instantiate(module, init_args)
    examples = example_inputs(module, list(cases))
    base = options or PackageOptions()
    options = replace(base, cases=base.cases or tuple(case.to_json() for case in cases),
                      init_args=base.init_args if base.init_args is not None else init_args)
    return generate_from_model(model, examples, op, options)
