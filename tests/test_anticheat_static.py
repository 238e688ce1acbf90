"""The static (AST) anti-cheat check: a table of candidate snippets and the checks they fire."""

from __future__ import annotations

import ast
import sys
import textwrap
from collections.abc import Collection
from pathlib import Path

import pytest

from runners.anticheat import (
    STATIC_CHECKS,
    Finding,
    check_source,
    summarize,
)
from runners.base import CHECK_NAMES

TORCH_OP = "static_torch_op"
REFERENCE = "static_reference_call"
FALLBACK = "static_fallback"
STREAM = "static_stream"
TAMPER = "static_tamper"

HEADER = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def launch(x):
    out = torch.empty_like(x)
    copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out
'''

REFERENCE_CLASS = '''
class Model(nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n))

    def forward(self, x):
        return torch.relu(x * self.weight)
'''


def candidate(forward: str, *, init: str = "", extra: str = "", bases: str = "nn.Module",
              methods: str = "", reference: bool = False) -> str:
    """A candidate file: imports, a copy kernel and launcher, ModelNew with this forward."""
    init_body = textwrap.indent(textwrap.dedent(init).strip() or "pass", " " * 8)
    forward_body = textwrap.indent(textwrap.dedent(forward).strip(), " " * 8)
    more = textwrap.indent(textwrap.dedent(methods).strip(), " " * 4)
    parts = [
        HEADER,
        REFERENCE_CLASS if reference else "",
        textwrap.dedent(extra),
        f"class ModelNew({bases}):",
        "    def __init__(self, *args):",
        "        super().__init__()",
        init_body,
        "",
        "    def forward(self, x, y=None):",
        forward_body,
        "",
        more,
        "",
    ]
    return "\n".join(parts)


def checks(source: str, reference_names: Collection[str] = ("Model",)) -> set[str]:
    return {finding.check for finding in check_source(source, reference_names=reference_names)}


# (id, source, expected set of checks)
FIRING: list[tuple[str, str, set[str]]] = [
    # --- static_torch_op: every spelling of a PyTorch call --------------------------------
    ("torch_softmax", candidate("return torch.softmax(launch(x), dim=-1)"), {TORCH_OP}),
    ("F_relu", candidate("return F.relu(launch(x))"), {TORCH_OP}),
    ("torch_nn_functional_relu", candidate("return torch.nn.functional.relu(launch(x))"),
     {TORCH_OP}),
    ("from_torch_import_softmax",
     candidate("return softmax(launch(x), -1)", extra="from torch import softmax"), {TORCH_OP}),
    ("from_functional_import_relu_as_r",
     candidate("return r(launch(x))", extra="from torch.nn.functional import relu as r"),
     {TORCH_OP}),
    ("from_torch_nn_import_functional_as",
     candidate("return fn.gelu(launch(x))", extra="from torch.nn import functional as fn"),
     {TORCH_OP}),
    ("import_torch_as_th", candidate("return th.sum(launch(x))", extra="import torch as th"),
     {TORCH_OP}),
    ("star_import", candidate("return softmax(launch(x), -1)", extra="from torch import *"),
     {TORCH_OP}),
    ("module_level_alias",
     candidate("return _sm(launch(x), -1)", extra="_sm = torch.softmax"), {TORCH_OP}),
    ("local_alias_of_op", candidate("op = torch.softmax\nreturn op(launch(x), -1)"), {TORCH_OP}),
    ("getattr_on_torch", candidate('return getattr(torch, "softmax")(launch(x), -1)'),
     {TORCH_OP}),
    ("getattr_computed_name", candidate('name = "soft" + "max"\nreturn getattr(F, name)(x, -1)'),
     {TORCH_OP}),
    ("tensor_method_sum", candidate("y = launch(x)\nreturn y.sum(dim=1)"), {TORCH_OP}),
    ("tensor_method_inplace", candidate("y = launch(x)\ny.mul_(2)\nreturn y"), {TORCH_OP}),
    ("tensor_method_chain", candidate("return launch(x).exp().clamp(min=0)"), {TORCH_OP}),
    ("torch_Tensor_method", candidate("return torch.Tensor.sum(launch(x))"), {TORCH_OP}),
    ("matmul_operator", candidate("return launch(x) @ y"), {TORCH_OP}),
    ("matmul_augassign", candidate("z = launch(x)\nz @= y\nreturn z"), {TORCH_OP}),
    ("operator_matmul", candidate("return operator.matmul(x, y)", extra="import operator"),
     {TORCH_OP}),
    ("aten_op", candidate("return torch.ops.aten.relu.default(launch(x))"), {TORCH_OP}),
    ("torch_linalg", candidate("return torch.linalg.norm(launch(x))"), {TORCH_OP}),
    ("torch_special", candidate("return torch.special.expit(launch(x))"), {TORCH_OP}),
    ("torch_fft", candidate("return torch.fft.fft(launch(x))"), {TORCH_OP}),
    ("torch_compile_in_forward", candidate("return torch.compile(launch)(x)"), {TORCH_OP}),
    ("torch_compile_decorator",
     candidate("return fast(x)", extra="@torch.compile\ndef fast(x):\n    return x * 2\n"),
     {TORCH_OP}),
    ("torch_jit_script", candidate("return torch.jit.script(launch)(x)"), {TORCH_OP}),
    ("nn_module_built_and_called", candidate("return torch.nn.ReLU()(launch(x))"), {TORCH_OP}),
    ("nn_module_held_and_called", candidate("return self.fc(x)", init="self.fc = nn.Linear(4, 4)"),
     {TORCH_OP}),
    ("nn_module_held_forward", candidate("return self.fc.forward(x)",
                                         init="self.fc = nn.Linear(4, 4)"), {TORCH_OP}),
    ("nn_module_sequential_index",
     candidate("return self.layers[0](x)", init="self.layers = nn.ModuleList([nn.ReLU()])"),
     {TORCH_OP}),
    ("nn_module_module_level",
     candidate("return _act(launch(x))", extra="_act = nn.GELU()"), {TORCH_OP}),
    ("inherits_nn_linear_forward", candidate("return super().forward(x)", bases="nn.Linear"),
     {TORCH_OP}),
    ("numpy_on_host",
     candidate("return torch.as_tensor(np.exp(x.cpu().numpy()))", extra="import numpy as np"),
     {TORCH_OP}),
    ("tolist_on_host", candidate("return torch.tensor([max(v, 0) for v in x.tolist()])"),
     {TORCH_OP}),
    ("helper_function_computes",
     candidate("return _post(launch(x))", extra="def _post(y):\n    return y.sigmoid()\n"),
     {TORCH_OP}),
    ("helper_method_computes",
     candidate("return self._post(launch(x))",
               methods="def _post(self, y):\n    return torch.tanh(y)"), {TORCH_OP}),
    ("transitive_helpers",
     candidate("return _a(x)",
               extra="def _a(x):\n    return _b(launch(x))\n\ndef _b(y):\n    return F.silu(y)\n"),
     {TORCH_OP}),
    ("autograd_function",
     candidate("return _Relu.apply(x)", extra=(
         "class _Relu(torch.autograd.Function):\n"
         "    @staticmethod\n"
         "    def forward(ctx, x):\n"
         "        return torch.relu(x)\n"
         "    @staticmethod\n"
         "    def backward(ctx, g):\n"
         "        return g * 2\n")), {TORCH_OP}),
    ("torch_inside_kernel",
     candidate("return launch2(x)", extra=(
         "@triton.jit\n"
         "def bad_kernel(x_ptr, BLOCK: tl.constexpr):\n"
         "    torch.relu(x_ptr)\n\n"
         "def launch2(x):\n"
         "    bad_kernel[(1,)](x, BLOCK=16)\n"
         "    return x\n")), {TORCH_OP}),
    ("call_dunder_override",
     candidate("return launch(x)", methods="def __call__(self, x):\n    return torch.relu(x)"),
     {TORCH_OP}),
    # --- static_reference_call -----------------------------------------------------------
    ("super_forward", candidate("launch(x)\nreturn super().forward(x)", bases="Model",
                                reference=True), {REFERENCE}),
    ("super_explicit_forward",
     candidate("launch(x)\nreturn super(ModelNew, self).forward(x)", bases="Model",
               reference=True), {REFERENCE}),
    ("model_instance_called", candidate("return Model()(x)", reference=True), {REFERENCE}),
    ("model_forward_called", candidate("return Model.forward(self, x)", reference=True),
     {REFERENCE}),
    ("model_held_in_init", candidate("return self.ref(x)", init="self.ref = Model()",
                                     reference=True), {REFERENCE}),
    ("no_forward_inherits_reference",
     HEADER + REFERENCE_CLASS + "\nclass ModelNew(Model):\n    pass\n", {REFERENCE}),
    ("modelnew_is_model", HEADER + REFERENCE_CLASS + "\nModelNew = Model\n", {REFERENCE}),
    ("import_reference", candidate("return launch(x)", extra="from reference import Model"),
     {REFERENCE}),
    ("import_module_named_reference",
     candidate("return launch(x)", extra="import my_reference_impl as impl"), {REFERENCE}),
    ("eval_in_forward", candidate('return eval("torch.relu")(x)'), {REFERENCE}),
    ("exec_in_forward", candidate('exec("y = x")\nreturn launch(x)'), {REFERENCE}),
    ("dunder_import", candidate('return __import__("reference").Model()(x)'), {REFERENCE}),
    ("importlib_in_forward",
     candidate('return importlib.import_module("ref").Model()(x)', extra="import importlib"),
     {REFERENCE}),
    ("mro_walk", candidate("return type(self).__mro__[1].forward(self, x)"), {REFERENCE}),
    ("reference_class_imported_by_name",
     candidate("return launch(x)", extra="from kb.level1.relu import Model"), {REFERENCE}),
    # --- static_fallback -----------------------------------------------------------------
    ("except_returns_torch",
     candidate("try:\n    return launch(x)\nexcept Exception:\n    return torch.relu(x)"),
     {FALLBACK}),
    ("bare_except_then_torch",
     candidate("try:\n    return launch(x)\nexcept:\n    pass\nreturn torch.softmax(x, -1)"),
     {FALLBACK}),
    ("except_flag_then_torch",
     candidate("ok = True\ntry:\n    out = launch(x)\nexcept RuntimeError:\n    ok = False\n"
               "if not ok:\n    out = x.relu()\nreturn out"), {FALLBACK}),
    ("contextlib_suppress",
     candidate("with contextlib.suppress(Exception):\n    return launch(x)\nreturn F.relu(x)",
               extra="import contextlib"), {FALLBACK}),
    ("except_calls_reference",
     candidate("try:\n    return launch(x)\nexcept Exception:\n    return Model()(x)",
               reference=True), {FALLBACK}),
    ("except_calls_super_forward",
     candidate("try:\n    return launch(x)\nexcept Exception:\n    return super().forward(x)",
               bases="Model", reference=True), {FALLBACK}),
    ("except_calls_torch_helper",
     candidate("try:\n    return launch(x)\nexcept Exception:\n    return _slow(x)",
               extra="def _slow(x):\n    return torch.relu(x)\n"), {FALLBACK, TORCH_OP}),
    # --- static_stream -------------------------------------------------------------------
    ("threading_thread",
     candidate("t = threading.Thread(target=launch, args=(x,))\nt.start()\nreturn x",
               extra="import threading"), {STREAM}),
    ("thread_pool",
     candidate("return ThreadPoolExecutor().submit(launch, x).result()",
               extra="from concurrent.futures import ThreadPoolExecutor"), {STREAM}),
    ("multiprocessing", candidate("return multiprocessing.Pool(2).map(launch, [x])[0]",
                                  extra="import multiprocessing"), {STREAM}),
    ("asyncio", candidate("return asyncio.run(work(x))", extra="import asyncio"), {STREAM}),
    ("side_stream",
     candidate("s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    out = launch(x)\n"
               "return out"), {STREAM}),
    ("wait_stream", candidate("torch.cuda.current_stream().wait_stream(self.s)\nreturn launch(x)"),
     {STREAM}),
    ("cuda_graph", candidate("g = torch.cuda.CUDAGraph()\nreturn launch(x)"), {STREAM}),
    ("atexit_module_level",
     candidate("return launch(x)", extra="import atexit\natexit.register(print, 'bye')"),
     {STREAM}),
    ("os_fork", candidate("os.fork()\nreturn launch(x)", extra="import os"), {STREAM}),
    # --- static_tamper -------------------------------------------------------------------
    ("patched_elapsed_time",
     candidate("return launch(x)",
               extra="torch.cuda.Event.elapsed_time = lambda self, other: 0.001"), {TAMPER}),
    ("patched_event_via_import",
     candidate("return launch(x)",
               extra="from torch.cuda import Event\nEvent.elapsed_time = lambda s, o: 0.001"),
     {TAMPER}),
    ("patched_perf_counter",
     candidate("return launch(x)", extra="import time\ntime.perf_counter = lambda: 0.0"),
     {TAMPER}),
    ("patched_allclose", candidate("return launch(x)",
                                   extra="torch.allclose = lambda *a, **k: True"), {TAMPER}),
    ("patched_assert_close",
     candidate("return launch(x)", extra="torch.testing.assert_close = lambda *a, **k: None"),
     {TAMPER}),
    ("patched_do_bench",
     candidate("return launch(x)", extra="triton.testing.do_bench = lambda *a, **k: 0.001"),
     {TAMPER}),
    ("setattr_on_torch",
     candidate("return launch(x)", extra='setattr(torch, "allclose", lambda *a, **k: True)'),
     {TAMPER}),
    ("patched_builtins", candidate("return launch(x)",
                                   extra="import builtins\nbuiltins.print = lambda *a: None"),
     {TAMPER}),
    ("patched_in_forward", candidate("torch.cuda.synchronize = lambda: None\nreturn launch(x)"),
     {TAMPER}),
    ("patched_tf32_flag",
     candidate("return launch(x)", extra="torch.backends.cuda.matmul.allow_tf32 = True"),
     {TAMPER}),
    ("patched_reference", candidate("return launch(x)", reference=True,
                                    extra="Model.forward = lambda self, x: x"), {TAMPER}),
    ("sys_modules", candidate('ref = sys.modules["reference"]\nreturn launch(x)',
                              extra="import sys"), {TAMPER}),
    ("sys_getframe", candidate("frame = sys._getframe(1)\nreturn launch(x)", extra="import sys"),
     {TAMPER}),
    ("inspect_stack", candidate("inspect.stack()\nreturn launch(x)", extra="import inspect"),
     {TAMPER}),
    ("inspect_currentframe",
     candidate("f = inspect.currentframe().f_back\nreturn launch(x)", extra="import inspect"),
     {TAMPER}),
    ("gc_get_objects", candidate("objs = gc.get_objects()\nreturn launch(x)", extra="import gc"),
     {TAMPER}),
    ("ctypes", candidate("return launch(x)", extra="import ctypes"), {TAMPER}),
    ("environ_write", candidate("return launch(x)",
                                extra='import os\nos.environ["TRITON_INTERPRET"] = "1"'),
     {TAMPER}),
    ("environ_setdefault_other", candidate(
        "return launch(x)", extra='import os\nos.environ.setdefault("TRITON_INTERPRET", "0")'),
     {TAMPER}),
    ("environ_setdefault_secret", candidate(
        "return launch(x)", extra='import os\nos.environ.setdefault("OPBOT_LLM_API_KEY", "1")'),
     {TAMPER}),
    ("signal", candidate("return launch(x)", extra="import signal\nsignal.alarm(0)"), {TAMPER}),
    ("open_in_forward", candidate('open("/tmp/out.pt", "rb").read()\nreturn launch(x)'),
     {TAMPER}),
    ("torch_load_cached", candidate('return torch.load("/tmp/expected.pt")'), {TAMPER}),
    ("torch_function_override",
     candidate("return launch(x)", extra=(
         "class Sneaky(torch.Tensor):\n"
         "    @classmethod\n"
         "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
         "        return True\n")), {TAMPER}),
    ("forward_hook", candidate("return launch(x)",
                               init="self.register_forward_hook(lambda m, i, o: o)"), {TAMPER}),
    ("rebind_forward_outside_class", candidate("return launch(x)") + "ModelNew.forward = print\n",
     {TAMPER}),
    ("harness_import", candidate("return launch(x)", extra="from runners import harness"),
     {TAMPER}),
]

CLEAN: list[tuple[str, str]] = [
    ("triton_softmax_tutorial", '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_stride + cols, num / den, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        block = triton.next_power_of_2(n_cols)
        softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=block)
        return out
'''),
    ("views_and_metadata", candidate('''
flat = x.contiguous().view(-1)
shape = x.shape
n = flat.numel()
assert x.dim() >= 1 and x.is_contiguous() and x.size(0) == shape[0]
tmp = launch(flat.reshape(-1, 1).squeeze(1).unsqueeze(0).flatten())
out = x.new_empty(shape)
out.view(-1).copy_(tmp)
scratch = torch.zeros(n, dtype=torch.float32, device=x.device).fill_(0)
first, second = out.chunk(2, dim=0) if shape[0] % 2 == 0 else (out, out)
eps = torch.finfo(x.dtype).eps
x16 = x.to(torch.float16).float().transpose(0, -1).permute(*range(x.dim())).detach().clone()
return out.view(shape)
''')),
    ("subclass_uses_weight", candidate("return launch(x * 1) if self.weight is not None else x",
                                       bases="Model", reference=True)),
    ("nn_linear_weights_passed_to_kernel", candidate(
        "out = torch.empty(x.shape[0], self.fc.out_features, device=x.device)\n"
        "mm_kernel[(1,)](x, self.fc.weight, self.fc.bias, out, BLOCK=16)\nreturn out",
        init="self.fc = nn.Linear(4, 4)",
        extra=("@triton.autotune(configs=[triton.Config({'BLOCK': 16})], key=['n'])\n"
               "@triton.jit\n"
               "def mm_kernel(x_ptr, w_ptr, b_ptr, o_ptr, BLOCK: tl.constexpr):\n"
               "    acc = tl.sum(tl.load(x_ptr + tl.arange(0, BLOCK)), axis=0)\n"
               "    tl.store(o_ptr, acc)\n"))),
    ("try_except_reraises", candidate('''
try:
    return launch(x)
except RuntimeError as exc:
    raise RuntimeError(f"kernel failed for shape {tuple(x.shape)}") from exc
''')),
    ("try_except_oom_reraises", candidate('''
try:
    out = launch(x)
except torch.cuda.OutOfMemoryError:
    raise
return out
''')),
    ("helpers_called_from_forward", candidate(
        "return _wrap(x)",
        extra="def _grid(n):\n    return (triton.cdiv(n, 1024),)\n\n"
              "def _wrap(x):\n    out = torch.empty_like(x)\n"
              "    copy_kernel[_grid(x.numel())](x, out, x.numel(), BLOCK=1024)\n"
              "    return out\n")),
    ("cuda_queries", candidate('''
device = x.device if torch.cuda.is_available() else torch.device("cpu")
props = torch.cuda.get_device_properties(0) if torch.cuda.is_available() else None
n_sm = props.multi_processor_count if props is not None else 1
return launch(x.to(device))
''')),
    ("torch_only_in_init_and_unrelated_code", candidate(
        "return launch(x)",
        init="self.weight = nn.Parameter(torch.randn(4, 4).softmax(-1) @ torch.eye(4))\n"
             "self.scale = torch.sqrt(torch.tensor(4.0)).item()",
        extra="def reference_check(x):\n    return torch.softmax(x, -1).sum()\n\n"
              "def get_inputs():\n    return [torch.randn(4, 4)]\n") + '''

if __name__ == "__main__":
    import time
    start = torch.cuda.Event(enable_timing=True)
    x = torch.randn(4, 4)
    print(torch.allclose(ModelNew()(x), torch.softmax(x, -1)), time.perf_counter())
'''),
    ("kernel_uses_tl_reductions", candidate("return launch2(x)", extra='''
@triton.jit
def reduce_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    m = tl.max(x, axis=0)
    s = tl.sum(tl.exp(x - m), axis=0)
    tl.store(out_ptr, tl.log(s) + m + x.to(tl.float32).sum(axis=0) * 0)


def launch2(x):
    out = torch.empty((), dtype=x.dtype, device=x.device)
    reduce_kernel[(1,)](x, out, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return out
''')),
    ("python_arithmetic_is_left_to_runtime",
     candidate("n = max(x.numel(), 1)\nscale = 1.0 / math.sqrt(n)\nreturn launch(x) * scale + 1",
               extra="import math")),
    ("unicode_source", candidate("größe = x.numel()  # naïve ünïcode ✓\nreturn launch(x)",
                                 extra='NAME = "ソフトマックス"')),
    ("env_reads_are_fine", candidate('debug = os.environ.get("DEBUG", "0")\nreturn launch(x)',
                                     extra="import os")),
    ("interpreter_selection_is_fine", candidate(
        "return launch(x)", extra='import os\nos.environ.setdefault("TRITON_INTERPRET", "1")')),
]


@pytest.mark.parametrize(("source", "expected"),
                         [pytest.param(src, exp, id=name) for name, src, exp in FIRING])
def test_fires(source: str, expected: set[str]) -> None:
    assert checks(source) == expected, summarize(check_source(source))


@pytest.mark.parametrize("source", [pytest.param(src, id=name) for name, src in CLEAN])
def test_clean_candidates_give_no_finding(source: str) -> None:
    findings = check_source(source)
    assert findings == [], summarize(findings)


def test_custom_reference_names() -> None:
    source = candidate("return RefNet()(x)", extra="class RefNet(nn.Module):\n    pass\n")
    assert checks(source, reference_names=("RefNet",)) == {REFERENCE}
    assert checks(source, reference_names=("Model",)) == set()


def test_finding_carries_line_and_stripped_source_line() -> None:
    source = candidate("out = launch(x)\nreturn    torch.relu(out)   ")
    [finding] = check_source(source)
    line = source.splitlines()[finding.line - 1]
    assert finding.check == TORCH_OP
    assert finding.source_line == "return    torch.relu(out)" == line.strip()
    assert "torch.relu" in finding.message
    assert "kernel" in finding.message
    assert finding.location("cand.py").render().startswith(f"cand.py:{finding.line}: return")


def test_findings_are_deduplicated_per_check_and_line() -> None:
    findings = check_source(candidate("return torch.relu(x) + torch.relu(y) + x.sum()"))
    assert [(f.check, f.line) for f in findings] == [(TORCH_OP, findings[0].line)]


def test_findings_are_in_line_order_with_every_check_named() -> None:
    source = candidate("import threading\nthreading.Thread()\nreturn torch.relu(x)",
                       extra="import time\ntime.perf_counter = lambda: 0.0")
    findings = check_source(source)
    assert [f.line for f in findings] == sorted(f.line for f in findings)
    assert {f.check for f in findings} == {TORCH_OP, STREAM, TAMPER}
    assert set(STATIC_CHECKS) <= set(CHECK_NAMES)


def test_fallback_message_names_the_fallback() -> None:
    source = candidate("try:\n    return launch(x)\nexcept Exception:\n    return torch.relu(x)")
    [finding] = check_source(source)
    assert finding.check == FALLBACK
    assert "torch.relu" in finding.message
    assert "after catching an error" in finding.message


def test_summarize() -> None:
    findings = [Finding(TORCH_OP, "forward calls torch.relu: no", 12, "return torch.relu(x)"),
                Finding(TAMPER, "patches time.perf_counter: no", 30, "time.perf_counter = f")]
    assert summarize(findings) == ("line 12: forward calls torch.relu: no\n"
                                   "line 30: patches time.perf_counter: no")
    assert summarize([]) == ""


@pytest.mark.parametrize("source", [
    pytest.param("def forward(self, x):\n    return (", id="syntax_error"),
    pytest.param("x = 1\x00", id="null_byte"),
    pytest.param("", id="empty"),
    pytest.param("import torch\nclass ModelNew:\n    pass\n", id="no_forward"),
    pytest.param("import torch\ntorch.relu(torch.ones(1))\n", id="no_model_class"),
])
def test_odd_input_gives_no_finding(source: str) -> None:
    assert check_source(source) == []


def test_huge_source_is_left_to_the_caller() -> None:
    source = candidate("return torch.relu(x)") + "#" * 2_100_000
    assert check_source(source) == []


def test_deep_nesting_does_not_raise() -> None:
    body = "".join("    " * depth + "if x is not None:\n" for depth in range(1, 90))
    nested = "def f(x):\n" + body + "    " * 90 + "return torch.relu(x)\n"
    chain = "y = " + " + ".join(["x"] * 20_000) + "\n"
    for source in (nested, chain, candidate("return launch(x)", extra=nested + chain)):
        assert isinstance(check_source(source), list)


def test_does_not_import_torch_or_triton() -> None:
    module = Path(__file__).resolve().parents[1] / "runners" / "anticheat.py"
    tree = ast.parse(module.read_text(encoding="utf-8"))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom)}
    allowed = set(sys.stdlib_module_names) | {"runners", "__future__"}
    assert imported <= allowed, imported - allowed


CANDIDATES = Path(__file__).resolve().parent / "data" / "candidates"


def _corpus() -> list[tuple[str, str]]:
    """Shared candidates whose `# expect:` says passed or names a static check."""
    cases = []
    for path in sorted(CANDIDATES.glob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        expect = lines[0].removeprefix("# expect:").split() if lines else []
        if expect[:1] == ["passed"] or (expect[:1] == ["failed"] and len(expect) > 1
                                        and expect[1].startswith("static_")):
            cases.append((path.name, "passed" if expect[0] == "passed" else expect[1]))
    return cases


@pytest.mark.parametrize(("name", "expect"), _corpus())
def test_shared_candidates(name: str, expect: str) -> None:
    findings = check_source((CANDIDATES / name).read_text(encoding="utf-8"), filename=name)
    if expect == "passed":
        assert findings == [], summarize(findings)
    else:
        assert expect in {f.check for f in findings}, summarize(findings)
