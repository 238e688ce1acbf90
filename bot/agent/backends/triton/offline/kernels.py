"""The three kernel templates: pointwise, row reduction, tiled matmul with an epilogue.

Each template builds the index of the value it stores, asks the Emitter for that value,
and returns the kernel's source plus the launcher lines that allocate, size and launch it.
Sizes are runtime arguments (never constexpr), so one compiled kernel serves every shape;
block sizes are chosen in the launcher, larger in the interpreter (fewer programs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bot.agent.backends.triton.offline.emit import Emitter, Index
from bot.agent.backends.triton.offline.values import FLOAT, INT, Value, kind_of
from bot.agent.offline.graph import Node, Size, UnsupportedGraphError, product
from bot.agent.offline.sizes import python_size

_INDENT = "    "


@dataclass
class KernelSource:
    name: str
    source: str
    launch: list[str]  # launcher lines (allocation of the output is done by the caller)
    helpers: set[str] = field(default_factory=set)


def _decompose(emitter: Emitter, flat: str, sizes: Sequence[Size], stem: str) -> list[str]:
    """Row-major indices of `flat` over `sizes` (the last dim varies fastest)."""
    names = ["0"] * len(sizes)
    remaining = flat
    for dim in range(len(sizes) - 1, -1, -1):
        size = sizes[dim]
        if size.is_Integer and int(size) == 1:
            continue
        if dim == 0 or all(s.is_Integer and int(s) == 1 for s in sizes[:dim]):
            names[dim] = emitter.assign(remaining, INT, stem).code
            break
        size_code = emitter.size(size)
        names[dim] = emitter.assign(f"{remaining} % {size_code}", INT, stem).code
        remaining = f"({remaining} // {size_code})"
    return names


def _store_code(value: Value, shape_hint: str) -> str:
    if value.literal:
        return f"tl.full({shape_hint}, {value.code}, tl.float32)"
    return value.code


def _header(name: str, params: Sequence[str], constexprs: Sequence[str]) -> str:
    arguments = list(params) + [f"{item}: tl.constexpr" for item in constexprs]
    lines = ["@triton.jit", f"def {name}("]
    lines += [f"{_INDENT}{argument}," for argument in arguments]
    lines.append("):")
    return "\n".join(lines)


def _body(lines: Sequence[str], depth: int = 1) -> list[str]:
    return [f"{_INDENT * depth}{line}" for line in lines]


# Grid-stride loops: a program handles blocks pid, pid + programs, ... On GPUs and the CPU
# the launcher starts one program per block (one trip each); on an NPU it starts one per
# physical core, because programs beyond that run in costly extra rounds (triton-ascend).
_BLOCKS_LOOP = "for block_id in range(tl.program_id(0), num_blocks, tl.num_programs(0)):"
_BLOCK_START = "(tl.zeros([], tl.int64) + block_id)"  # 64-bit offsets, in every mode


def _streams(emitter: Emitter) -> int:
    """Tensors a kernel reads or writes: what its block size must fit into fast memory."""
    return sum(1 for param in emitter.params if param.endswith("_ptr"))


def pointwise_kernel(name: str, node: Node, emitter: Emitter, buffer: str) -> KernelSource:
    """out[i] = f(inputs)[i] over the flat, contiguous output."""
    numel = product(node.shape)
    numel_code = emitter.size(numel)
    blocks = emitter.param("num_blocks", "num_blocks")
    body = emitter.lines
    body.append(f"offsets = {_BLOCK_START} * BLOCK + tl.arange(0, BLOCK).to(tl.int64)")
    body.append(f"mask = offsets < {numel_code}")
    index = tuple(_decompose(emitter, "offsets", node.shape, "i"))
    value = emitter.value(node, index)
    out = emitter.param("out_ptr", buffer)
    body.append(f"tl.store({out} + offsets, {_store_code(value, '[BLOCK]')}"
                f".to({out}.dtype.element_ty), mask=mask)")
    loop = _BLOCKS_LOOP.replace("num_blocks", blocks)
    source = "\n".join([_header(name, emitter.params, ["BLOCK"]), *_body([loop]),
                        *_body(body, 2)])
    numel_py = python_size(numel)
    launch = [
        f"block = _pointwise_block({numel_py}, {_streams(emitter)}, device)",
        f"num_blocks = triton.cdiv({numel_py}, block)",
        f"{name}[(_programs(num_blocks, device),)](",
        *[f"{_INDENT}{arg}," for arg in emitter.launch_args],
        f"{_INDENT}BLOCK=block,",
        ")",
    ]
    return KernelSource(name, source, launch, emitter.helpers)


# Per reduction: the value masked lanes take, and how a block and a running value combine.
_NEUTRAL = {"sum": "0.0", "mean": "0.0", "prod": "1.0", "amax": '-float("inf")',
            "amin": 'float("inf")', "argmax": '-float("inf")', "argmin": 'float("inf")',
            "any": "0", "all": "1"}


def reduction_kernel(name: str, node: Node, emitter: Emitter, buffer: str) -> KernelSource:
    """out[row] = reduce over the reduced dims of f(inputs)[row, col], looping over columns."""
    source_node: Node = node.args[0]
    dims: list[int] = node.params["dims"]
    kept = [dim for dim in range(source_node.rank) if dim not in dims]
    rows = product([source_node.shape[dim] for dim in kept])
    cols = product([source_node.shape[dim] for dim in dims])
    op = node.op
    float_input = kind_of(source_node.dtype) == FLOAT or op in ("mean",)
    lines = emitter.lines
    rows_code = emitter.size(rows)
    cols_code = emitter.size(cols)
    blocks = emitter.param("num_blocks", "num_blocks")
    lines.append(f"rows = {_BLOCK_START} * BLOCK_M + tl.arange(0, BLOCK_M).to(tl.int64)")
    lines.append(f"row_mask = rows < {rows_code}")
    lines.append("rows2 = rows[:, None]")
    row_index = _decompose(emitter, "rows2", [source_node.shape[d] for d in kept], "k")
    _init_accumulator(lines, op, float_input)
    lines.append(f"for start in range(0, {cols_code}, BLOCK_N):")
    loop = Emitter(materialized=emitter.materialized, mask="mask", params=emitter.params,
                   launch_args=emitter.launch_args, helpers=emitter.helpers,
                   _param_by_launch=emitter._param_by_launch, _counter=emitter._counter)
    loop.lines.append("cols = (start + tl.arange(0, BLOCK_N).to(tl.int64))[None, :]")
    loop.lines.append(f"mask = row_mask[:, None] & (cols < {cols_code})")
    col_index = _decompose(loop, "cols", [source_node.shape[d] for d in dims], "r")
    index = ["0"] * source_node.rank
    for dim, code in zip(kept, row_index, strict=True):
        index[dim] = code
    for dim, code in zip(dims, col_index, strict=True):
        index[dim] = code
    value = loop.value(source_node, tuple(index))
    _combine(loop.lines, op, value, float_input)
    lines.extend(_body(loop.lines))
    emitter._counter = loop._counter
    result = _finalize(op, emitter.size(node.params["count"]) if op == "mean" else "")
    out = emitter.param("out_ptr", buffer)
    lines.append(f"tl.store({out} + rows, {result}.to({out}.dtype.element_ty), mask=row_mask)")
    loop_line = _BLOCKS_LOOP.replace("num_blocks", blocks)
    source = "\n".join([_header(name, emitter.params, ["BLOCK_M", "BLOCK_N"]),
                        *_body([loop_line]), *_body(lines, 2)])
    rows_py, cols_py = python_size(rows), python_size(cols)
    launch = [
        f"block_m, block_n = _reduction_blocks({rows_py}, {cols_py}, {_streams(emitter)}, "
        "device)",
        f"num_blocks = triton.cdiv({rows_py}, block_m)",
        f"{name}[(_programs(num_blocks, device),)](",
        *[f"{_INDENT}{arg}," for arg in emitter.launch_args],
        f"{_INDENT}BLOCK_M=block_m,",
        f"{_INDENT}BLOCK_N=block_n,",
        ")",
    ]
    return KernelSource(name, source, launch, emitter.helpers)


def _init_accumulator(lines: list[str], op: str, float_input: bool) -> None:
    if op in ("sum", "mean"):
        dtype = "tl.float32" if float_input else "tl.int64"
        lines.append(f"total = tl.zeros([BLOCK_M], {dtype})")
        if float_input:
            lines.append("compensation = tl.zeros([BLOCK_M], tl.float32)  # Kahan summation")
    elif op == "prod":
        lines.append("total = tl.full([BLOCK_M], 1.0, tl.float32)")
    elif op in ("amax", "amin"):
        dtype = "tl.float32" if float_input else "tl.int64"
        start = _NEUTRAL[op] if float_input else (
            "-9223372036854775807" if op == "amax" else "9223372036854775807")
        lines.append(f"total = tl.full([BLOCK_M], {start}, {dtype})")
    elif op in ("argmax", "argmin"):
        lines.append(f"best = tl.full([BLOCK_M], {_NEUTRAL[op]}, tl.float32)")
        lines.append("best_index = tl.zeros([BLOCK_M], tl.int64)")
    elif op in ("any", "all"):
        lines.append(f"total = tl.full([BLOCK_M], {_NEUTRAL[op]}, tl.int32)")
    else:
        raise UnsupportedGraphError([f"reduction {op}"])


def _combine(lines: list[str], op: str, value: Value, float_input: bool) -> None:
    code = value.code
    if value.literal:
        code = f"tl.full([BLOCK_M, BLOCK_N], {value.code}, tl.float32)"
    if op in ("sum", "mean"):
        if float_input:
            lines.append(f"block = tl.sum(tl.where(mask, {code}, 0.0), axis=1)")
            lines.append("corrected = block - compensation")
            lines.append("running = total + corrected")
            lines.append("compensation = (running - total) - corrected")
            lines.append("total = running")
        else:
            lines.append(f"total += tl.sum(tl.where(mask, {code}.to(tl.int64), 0), axis=1)")
    elif op == "prod":
        lines.append(f"total = total * tl.reduce(tl.where(mask, {code}, 1.0), 1, _multiply)")
    elif op in ("amax", "amin"):
        pick = "tl.max" if op == "amax" else "tl.min"
        better = ">" if op == "amax" else "<"
        if not float_input:
            lines.append(f"values = tl.where(mask, {code}.to(tl.int64), total[:, None])")
            lines.append(f"total = {'tl.maximum' if op == 'amax' else 'tl.minimum'}"
                         f"(total, {pick}(values, axis=1))")
            return
        lines.append(f"values = tl.where(mask, {code}, {_NEUTRAL[op]})")
        lines.append("has_nan = tl.max((values != values).to(tl.int32), axis=1) > 0")
        lines.append(f"block = tl.where(has_nan, float(\"nan\"), {pick}(values, axis=1))")
        # NaN wins, as in PyTorch; a NaN already found stays.
        lines.append(f"total = tl.where(total != total, total, tl.where((block != block) | "
                     f"(block {better} total), block, total))")
    elif op in ("argmax", "argmin"):
        pick = "tl.max" if op == "argmax" else "tl.min"
        better = ">" if op == "argmax" else "<"
        lines.append(f"values = tl.where(mask, {code}.to(tl.float32), {_NEUTRAL[op]})")
        lines.append("is_nan = values != values")
        lines.append("has_nan = tl.max(is_nan.to(tl.int32), axis=1) > 0")
        lines.append(f"block = tl.where(has_nan, float(\"nan\"), {pick}(values, axis=1))")
        lines.append("hits = tl.where(has_nan[:, None], is_nan, values == block[:, None]) & mask")
        lines.append("block_index = tl.min(tl.where(hits, cols, 9223372036854775807), axis=1)")
        # The first index wins ties: a later block replaces only a strictly better value.
        lines.append(f"take = (best == best) & ((block != block) | (block {better} best))")
        lines.append("best = tl.where(take, block, best)")
        lines.append("best_index = tl.where(take, block_index, best_index)")
    elif op in ("any", "all"):
        pick = "tl.max" if op == "any" else "tl.min"
        function = "tl.maximum" if op == "any" else "tl.minimum"
        lines.append(f"flags = tl.where(mask, ({code} != 0).to(tl.int32), {_NEUTRAL[op]})")
        lines.append(f"total = {function}(total, {pick}(flags, axis=1))")


def _finalize(op: str, count: str) -> str:
    if op == "mean":
        return f"(total / {count})"
    if op in ("argmax", "argmin"):
        return "best_index"
    if op in ("any", "all"):
        return "(total != 0)"
    return "total"


def matmul_kernel(name: str, product: Node, end: Node, emitter: Emitter, *, buffer: str,
                  operand_exprs: tuple[str, str]) -> KernelSource:
    """A tiled matmul (batched when 3D); the epilogue `end` is computed on the tile."""
    batched = product.op == "bmm"
    left_expr, right_expr = operand_exprs
    lines = emitter.lines
    shape = product.shape
    m_size, n_size = shape[-2], shape[-1]
    k_size = product.args[0].shape[-1]
    a = emitter.param("a_ptr", left_expr)
    b = emitter.param("b_ptr", right_expr)
    m_code, n_code, k_code = emitter.size(m_size), emitter.size(n_size), emitter.size(k_size)
    strides = {}
    for label, expr, rank_dims in (("a", left_expr, ("m", "k")), ("b", right_expr, ("k", "n"))):
        offset = 1 if batched else 0
        if batched:
            strides[f"{label}_b"] = emitter.param(f"{label}_stride_b", f"{expr}.stride(0)")
        for position, dim_name in enumerate(rank_dims):
            strides[f"{label}_{dim_name}"] = emitter.param(
                f"{label}_stride_{dim_name}", f"{expr}.stride({position + offset})")
    tiles_m = emitter.param("tiles_m", "tiles_m")
    tiles_n = emitter.param("tiles_n", "tiles_n")
    blocks = emitter.param("num_blocks", "num_blocks")
    # Tiles in (batch, row, column) order, one program per tile or a core's share of them.
    lines.append(f"tile = {_BLOCK_START}")
    lines.append(f"pid_b = tile // ({tiles_m} * {tiles_n})")
    lines.append(f"pid_m = (tile // {tiles_n}) % {tiles_m}")
    lines.append(f"pid_n = tile % {tiles_n}")
    lines.append("rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M).to(tl.int64))[:, None]")
    lines.append("rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N).to(tl.int64))[None, :]")
    a_base = f"{a} + pid_b * {strides['a_b']}" if batched else a
    b_base = f"{b} + pid_b * {strides['b_b']}" if batched else b
    lines.append("acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)")
    lines.append(f"for k0 in range(0, {k_code}, BLOCK_K):")
    lines.extend(_body([
        "rk = k0 + tl.arange(0, BLOCK_K).to(tl.int64)",
        f"a = tl.load({a_base} + rm * {strides['a_m']} + rk[None, :] * {strides['a_k']}, "
        f"mask=(rm < {m_code}) & (rk[None, :] < {k_code}), other=0.0)",
        f"b = tl.load({b_base} + rk[:, None] * {strides['b_k']} + rn * {strides['b_n']}, "
        f"mask=(rk[:, None] < {k_code}) & (rn < {n_code}), other=0.0)",
        "if FP32_DOT:",
        "    # IEEE fp32: TF32 would be a precision shortcut the verifier rejects",
        '    acc += tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")',
        "else:",
        "    acc += tl.dot(a, b)",
    ]))
    lines.append(f"mask = (rm < {m_code}) & (rn < {n_code})")
    emitter.virtual[product] = Value("acc", FLOAT)
    index: Index = ("pid_b", "rm", "rn") if batched else ("rm", "rn")
    value = emitter.value(end, index)
    out = emitter.param("out_ptr", buffer)
    flat = f"pid_b * {m_code} * {n_code} + rm * {n_code} + rn" if batched else f"rm * {n_code} + rn"
    lines.append(f"tl.store({out} + {flat}, {_store_code(value, '[BLOCK_M, BLOCK_N]')}"
                 f".to({out}.dtype.element_ty), mask=mask)")
    loop_line = _BLOCKS_LOOP.replace("num_blocks", blocks)
    source = "\n".join([_header(name, emitter.params,
                                ["BLOCK_M", "BLOCK_N", "BLOCK_K", "FP32_DOT"]),
                        *_body([loop_line]), *_body(lines, 2)])
    m_py, n_py, k_py = python_size(m_size), python_size(n_size), python_size(k_size)
    batch_py = python_size(shape[0]) if batched else "1"
    launch = [
        f"block_m, block_n, block_k = _matmul_blocks({m_py}, {n_py}, {k_py}, device)",
        f"tiles_m = triton.cdiv({m_py}, block_m)",
        f"tiles_n = triton.cdiv({n_py}, block_n)",
        f"num_blocks = tiles_m * tiles_n * {batch_py}",
        f"{name}[(_programs(num_blocks, device, cube=True),)](",
        *[f"{_INDENT}{arg}," for arg in emitter.launch_args],
        f"{_INDENT}BLOCK_M=block_m,",
        f"{_INDENT}BLOCK_N=block_n,",
        f"{_INDENT}BLOCK_K=block_k,",
        f"{_INDENT}FP32_DOT=_fp32_dot({left_expr}, {right_expr}),",
        ")",
    ]
    return KernelSource(name, source, launch, emitter.helpers)

