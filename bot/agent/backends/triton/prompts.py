"""Prompts for drafting kernels: the programming model, the spec, the reference, an example.

Text that comes from people (issue bodies, review comments, hints) is fenced as data and
labelled so: it informs the model, it does not change the rules.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from bot.agent.backends.triton.reply import CANDIDATE_FILE
from bot.agent.prompt_text import fence_data
from bot.spec import OpSpec

TRITON_SYSTEM = f"""You are an expert GPU kernel engineer writing Triton kernels for PyTorch \
operators. Your kernel is verified automatically, then timed.

The contract
- Write ONE Python file that defines `class ModelNew(torch.nn.Module)` with exactly the \
constructor and forward signature of the reference's `Model`, returning the same outputs \
(shapes, dtypes, tuple structure). To get the same parameters, copy the reference's `Model` \
class into your file and write `class ModelNew(Model)` that overrides only `forward`.
- All arithmetic happens inside `@triton.jit` kernels. Outside kernels the wrapper may only \
allocate outputs (torch.empty, torch.empty_like, torch.zeros), take views (view, reshape, \
permute, contiguous, stride, shape) and launch kernels. No torch math (torch.*, F.*, tensor \
methods like .sum() or .exp(), the @ operator), no calling the reference or super().forward, \
no try/except fallbacks, no caching of results, no in-place changes to the inputs, no \
threads or side streams, no changes to timers, the environment or the harness.
- Nothing may run at import time but definitions.

The Triton programming model
- A kernel runs as a grid of programs: `pid = tl.program_id(0)`; each program handles a \
block: `offsets = pid * BLOCK + tl.arange(0, BLOCK)`; BLOCK is a `tl.constexpr` power of two.
- Sizes are rarely multiples of the block: mask every load and store \
(`mask = offsets < n`; `tl.load(ptr + offsets, mask=mask, other=0.0)`).
- Pass strides and sizes as arguments; use 64-bit offsets for large tensors \
(`pid.to(tl.int64)`).
- Reductions: load a [BLOCK_M, BLOCK_N] tile, reduce with tl.sum/tl.max/tl.min(axis=1); loop \
over columns when a row is longer than one block; fill masked lanes with the neutral value.
- Matmul: tile with tl.dot and accumulate in float32; for float32 inputs pass \
input_precision="ieee" (TF32 is not accurate enough).
- Compute in float32 and cast when storing (`.to(out_ptr.dtype.element_ty)`).
- The kernels may run on Triton's CPU interpreter, where libdevice is unavailable: use \
tl.exp, tl.log, tl.sqrt, tl.rsqrt, tl.sigmoid, tl.math.erf, tl.abs, tl.maximum, tl.where; \
write tanh(x) as 2 * tl.sigmoid(2 * x) - 1.

Verification runs your ModelNew against the reference on several seeds, signed random \
inputs, odd sizes that are no multiple of any block size, and per-dtype tolerances; it \
rejects NaN/Inf the reference does not have, wrong shapes or dtypes, and any of the \
forbidden practices above.

Reply with the complete file in one fenced block whose info string names it:
```python file={CANDIDATE_FILE}
...
```"""

_ELEMENTWISE_EXAMPLE = '''import torch
import triton
import triton.language as tl


class Model(torch.nn.Module):
    def forward(self, x, y):
        return torch.relu(x) * y


@triton.jit
def relu_mul_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    y = tl.load(y_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    out = tl.where(x > 0, x, 0.0) * y
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(Model):
    def forward(self, x, y):
        x = x.contiguous()
        y = y.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu_mul_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
        return out
'''

_REDUCTION_EXAMPLE = '''import torch
import triton
import triton.language as tl


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


@triton.jit
def softmax_kernel(x_ptr, out_ptr, rows, cols, stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * stride
    # Pass 1: the row maximum, looping over blocks of columns.
    running_max = tl.full([BLOCK_N], -float("inf"), tl.float32)
    for start in range(0, cols, BLOCK_N):
        offsets = start + tl.arange(0, BLOCK_N)
        values = tl.load(base + offsets, mask=offsets < cols, other=-float("inf"))
        running_max = tl.maximum(running_max, values.to(tl.float32))
    row_max = tl.max(running_max, axis=0)
    # Pass 2: the sum of exponentials.
    total = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, cols, BLOCK_N):
        offsets = start + tl.arange(0, BLOCK_N)
        values = tl.load(base + offsets, mask=offsets < cols, other=-float("inf"))
        total += tl.exp(values.to(tl.float32) - row_max)
    row_sum = tl.sum(total, axis=0)
    # Pass 3: normalise and store.
    for start in range(0, cols, BLOCK_N):
        offsets = start + tl.arange(0, BLOCK_N)
        mask = offsets < cols
        values = tl.load(base + offsets, mask=mask, other=-float("inf"))
        result = tl.exp(values.to(tl.float32) - row_max) / row_sum
        tl.store(out_ptr + row * cols + offsets, result.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(Model):
    def forward(self, x):
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        out = torch.empty_like(x2)
        rows, cols = x2.shape
        block_n = min(triton.next_power_of_2(cols), 4096)
        softmax_kernel[(rows,)](x2, out, rows, cols, x2.stride(0), BLOCK_N=block_n)
        return out.view(x.shape)
'''

_MATMUL_EXAMPLE = '''import torch
import triton
import triton.language as tl


class Model(torch.nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = torch.nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))


@triton.jit
def linear_relu_kernel(a_ptr, w_ptr, bias_ptr, out_ptr, M, N, K,
                       stride_am, stride_ak, stride_wn, stride_wk,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0).to(tl.int64)
    pid_n = tl.program_id(1).to(tl.int64)
    rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M))[:, None]
    rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N))[None, :]
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rm * stride_am + rk[None, :] * stride_ak,
                    mask=(rm < M) & (rk[None, :] < K), other=0.0)
        # W is [N, K]: read it transposed as a [BLOCK_K, BLOCK_N] tile.
        w = tl.load(w_ptr + rn * stride_wn + rk[:, None] * stride_wk,
                    mask=(rn < N) & (rk[:, None] < K), other=0.0)
        acc += tl.dot(a, w, input_precision="ieee")
    bias = tl.load(bias_ptr + rn, mask=rn < N, other=0.0)
    out = tl.maximum(acc + bias, 0.0)
    tl.store(out_ptr + rm * N + rn, out.to(out_ptr.dtype.element_ty), mask=(rm < M) & (rn < N))


class ModelNew(Model):
    def forward(self, x):
        weight, bias = self.linear.weight, self.linear.bias
        M, K = x.shape
        N = weight.shape[0]
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
        linear_relu_kernel[grid](x, weight, bias, out, M, N, K, x.stride(0), x.stride(1),
                                 weight.stride(0), weight.stride(1),
                                 BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)
        return out
'''

_MATMUL_WORDS = re.compile(r"matmul|\bmm\b|bmm|einsum|Linear|linear|@")
_REDUCTION_WORDS = re.compile(r"softmax|sum|mean|max|min|norm|argm|prod|var\(|std\(|loss")
# Traced aten operators (after decomposition) that make an operator a matmul or a reduction.
_MATMUL_OPS = frozenset({"mm", "bmm", "addmm", "baddbmm", "matmul", "linear", "convolution",
                         "_convolution", "conv2d", "conv1d", "conv3d", "einsum", "dot"})
_REDUCTION_OPS = frozenset({"sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin",
                            "prod", "var", "std", "var_mean", "_softmax", "_log_softmax",
                            "logsumexp", "native_layer_norm", "cumsum", "norm",
                            "linalg_vector_norm", "nll_loss_forward"})
_MATMUL = ("matmul with a bias and activation epilogue", _MATMUL_EXAMPLE)
_REDUCTION = ("row reduction (softmax) with column loops", _REDUCTION_EXAMPLE)
_ELEMENTWISE = ("elementwise", _ELEMENTWISE_EXAMPLE)


def example_for(reference_source: str, traced_ops: Sequence[str] = ()) -> tuple[str, str]:
    """An in-category worked example: (category, code). By what the traced reference calls
    when it could be traced (a conv2d named "blur" is a matmul); else by its source."""
    if traced_ops:
        ops = set(traced_ops)
        if ops & _MATMUL_OPS:
            return _MATMUL
        return _REDUCTION if ops & _REDUCTION_OPS else _ELEMENTWISE
    if _MATMUL_WORDS.search(reference_source):
        return _MATMUL
    if _REDUCTION_WORDS.search(reference_source):
        return _REDUCTION
    return _ELEMENTWISE


def _inputs_text(spec: OpSpec) -> str:
    if spec.inputs is None:
        return "Inputs: as the reference's get_inputs() makes them (see below)."
    lines = ["Inputs (checked in every listed shape and dtype):"]
    for item in spec.inputs:
        if item.is_tensor:
            shapes = "; ".join("x".join(str(size) for size in shape) for shape in item.shapes)
            lines.append(f"- {item.name}: dtypes {', '.join(item.dtypes)}; shapes {shapes}")
        else:
            lines.append(f"- {item.name}: the value {item.value!r}")
    return "\n".join(lines)


def first_request(spec: OpSpec, *, draft: str | None, hint: str | None,
                  traced_ops: Sequence[str] = ()) -> str:
    parts = [f"Operator: {spec.name}"]
    if spec.description:
        parts.append(f"Description: {spec.description}")
    parts.append(_inputs_text(spec))
    tolerances = ", ".join(f"{name} atol={tol.atol:g} rtol={tol.rtol:g}"
                           for name, tol in spec.tolerance_table().items())
    parts.append(f"Tolerances: {tolerances}.")
    if spec.init_args is not None:
        parts.append(f"Constructor arguments: {list(spec.init_args)!r}")
    parts.append(f"The reference (PyTorch):\n```python\n{spec.reference_source.strip()}\n```")
    if draft:
        parts.append("A correct but unoptimised draft from opbot's offline generator for this "
                     f"same operator, as a starting point:\n```python\n{draft.strip()}\n```")
    else:
        category, example = example_for(spec.reference_source, traced_ops)
        parts.append(f"A worked example of the same category ({category}), for another "
                     f"operator:\n```python\n{example.strip()}\n```")
    if hint:
        parts.append(fence_data("Notes from the requester", hint))
    parts.append(f"Write the candidate now: the complete file in one ```python "
                 f"file={CANDIDATE_FILE} block.")
    return "\n\n".join(parts)


def retry_request(feedback: str) -> str:
    return (f"Your previous candidate failed verification.\n\n{feedback}\n\n"
            f"Fix it and reply with the complete corrected file in one ```python "
            f"file={CANDIDATE_FILE} block.")


def tuning_request(feedback: str) -> str:
    return (f"{feedback}\n\nReply with the complete faster file in one ```python "
            f"file={CANDIDATE_FILE} block; it must still pass verification.")
