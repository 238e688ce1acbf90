"""The row pattern of an Ascend C package: reduce over the last dimension, then a pass over
the row (softmax, log_softmax, RMSNorm, LayerNorm).

Contract (what a kernel of this pattern, generated or written by a model, must follow):
- the inputs share one shape (..., rowLength) and one dtype; they are `rows = numel /
  rowLength` rows, and every output with layout "input" has that shape and dtype;
- parameters (the reference module's weight, bias ...) follow the inputs: one row of
  rowLength float32 values each, the same for every row (op.cpp converts them);
- each entry takes (inputs..., params..., outputs..., rows, rowLength, rowsPerCore,
  rowStride, reduceLength), the fields of the tiling header's TilingData;
- each core takes rowsPerCore consecutive rows starting at blockIdx * rowsPerCore and
  keeps one whole row in UB at a time: a row that does not fit is refused by the host
  tiling (blockDim 0) with a clear message, never split.

The compute chain of a generated kernel (`KernelBody.compute`) is written over float32
LocalTensors: inputs `x0..`, parameters `p0..`, outputs `y0..`, scratch rows `s0..`
(COMPUTE_SLOTS), per-row scalars `t0..` (STAT_SLOTS, one 32-byte block each, the value in
every lane), the row length `count` and STAT_LEN; helpers ReduceRow (a tree reduce in UB
with basic vector instructions) and Broadcast (a per-row scalar over a row).
"""

from __future__ import annotations

from runners.ascendc.contract import (
    Names,
    PackageError,
    PackageRequest,
    declared_constant,
    gm_type,
    indent_lines,
    launch_pieces,
    queue_pieces,
    render_entries,
    render_template,
)


def _row_queues(names: Names) -> dict[str, str]:
    """The per-queue pieces of the row kernel: one TQue per input and per output, the
    float parameters in GM and their load into UB."""
    params = list(enumerate(names.params))
    return {
        **queue_pieces(names, global_length="length", buffer="rowStride",
                       offset="row * rowLength_"),
        "load_params": indent_lines(
            [f"AscendC::DataCopyPad(loaded[{j} * rowStride_], paramGm{j}_, copyParams, "
             "padParams);" for j, _ in params], indent=12),
    }


def _row_views(names: Names, slots: int, stats: int) -> str:
    widen = [f"const AscendC::LocalTensor<float> x{i} = Widen(in{i}, COMPUTE_SLOTS + {i}, count);"
             for i in range(len(names.inputs))]
    params = [f"const AscendC::LocalTensor<float> p{j} = Param({j});"
              for j in range(len(names.params))]
    target = [f"const AscendC::LocalTensor<float> y{k} = "
              f"Target(out{k}, COMPUTE_SLOTS + NUM_INPUTS + {k});"
              for k in range(len(names.outputs))]
    scratch = [f"const AscendC::LocalTensor<float> s{j} = Slot({j});" for j in range(slots)]
    stat = [f"const AscendC::LocalTensor<float> t{j} = Stat({j});" for j in range(stats)]
    return indent_lines(widen + params + target + scratch + stat)


def _check_layouts(request: PackageRequest) -> None:
    if set(request.layouts()) != {"input"}:
        raise PackageError("the rendered row kernel writes outputs shaped like its inputs; "
                           "per-row outputs (layout \"rows\") need a kernel of their own")


def render_row_kernel(request: PackageRequest, names: Names) -> str:
    _check_layouts(request)
    title = ("legacy toolchain (ascendc_library; CANN 8.x, still built by 9.x)"
             if request.generation == "legacy"
             else "ASC toolchain (CANN 9.x, find_package(ASC))")
    gm = gm_type(request.generation)
    body = request.body
    return render_template("kernel_rows.cpp.in", {
        "op": names.op, "summary": body.summary, "generation_title": title,
        "namespace": names.namespace, "class_name": names.class_name,
        "param_list": ", ".join(names.params) or "none",
        "num_inputs": len(names.inputs), "num_params": len(names.params),
        "num_outputs": len(names.outputs), "compute_slots": body.compute_slots,
        "stat_slots": body.stat_slots,
        "init_params": ", ".join(f"{gm} {name}" for name in names.tensors),
        "views": _row_views(names, body.compute_slots, body.stat_slots),
        "compute": indent_lines(body.compute),
        "entries": render_entries(request, names),
        **_row_queues(names),
    })


def render_row_tiling(request: PackageRequest, names: Names, compute_slots: int) -> str:
    return render_template("tiling_rows.h.in", {
        "op": names.op, "guard": f"OPBOT_{names.op.upper()}_TILING_H",
        "num_inputs": len(names.inputs), "num_params": len(names.params),
        "num_outputs": len(names.outputs), "compute_slots": compute_slots,
        "stat_slots": stat_slots_of(request),
    })


def stat_slots_of(request: PackageRequest) -> int:
    """STAT_SLOTS of the kernel: declared in a written kernel, else the body's."""
    if request.kernel_source is None:
        return request.body.stat_slots
    return declared_constant(request.kernel_source, "STAT_SLOTS")


def render_row_binding(request: PackageRequest, names: Names) -> str:
    _check_layouts(request)
    contiguous = [f"{name}_c" for name in names.inputs]
    param_rows = [f"{name}_row" for name in names.params]
    outputs = list(names.outputs)
    many = len(outputs) > 1
    schema_outputs = f"({', '.join(['Tensor'] * len(outputs))})" if many else "Tensor"
    arguments = [*names.inputs, *names.params]
    return render_template("op_rows.cpp.in", {
        "op": names.op, "namespace": names.namespace,
        "arg_list": ", ".join(arguments), "param_list": ", ".join(names.params) or "none",
        **launch_pieces(request, names),
        "launch_params": ", ".join(f"uint8_t* {name}" for name in names.tensors),
        "return_type": (f"std::tuple<{', '.join(['at::Tensor'] * len(outputs))}>" if many
                        else "at::Tensor"),
        "tensor_params": ", ".join(f"const at::Tensor& {name}" for name in arguments),
        "contiguous": indent_lines([f"const at::Tensor {c} = {name}.contiguous();"
                              for c, name in zip(contiguous, names.inputs, strict=True)], indent=4),
        "checked": ", ".join(f'{{"{name}", {c}}}'
                             for name, c in zip(names.inputs, contiguous, strict=True)),
        "param_rows": indent_lines([f'const at::Tensor {row} = ParamRow("{name}", {name}, '
                              f"{contiguous[0]}, rowLength);"
                              for row, name in zip(param_rows, names.params, strict=True)],
                             indent=4),
        "allocate": indent_lines([f"at::Tensor {name} = at::empty_like({contiguous[0]});"
                            for name in outputs], indent=4),
        "first": contiguous[0],
        "result": f"std::make_tuple({', '.join(outputs)})" if many else outputs[0],
        "pointers": ", ".join(f"static_cast<uint8_t*>({name}.data_ptr())"
                              for name in (*contiguous, *param_rows, *outputs)),
        "schema": (f"{names.op}({', '.join(f'Tensor {name}' for name in arguments)}) "
                   f"-> {schema_outputs}"),
    })
