"""The static (AST) anti-cheat check: a table of candidate snippets and the checks they fire."""

from __future__ import annotations

import ast
import gc
import sys
import textwrap
import time
from collections.abc import Collection
from pathlib import Path

import pytest

from runners.anticheat.findings import Finding
from runners.anticheat.rules import STATIC_CHECKS
from runners.anticheat.scan import check_source, summarize
from runners.base import CHECK_NAMES
from tests.support import CANDIDATES, DATA, REPO

TORCH_OP = "static_torch_op"
REFERENCE = "static_reference_call"
FALLBACK = "static_fallback"
STREAM = "static_stream"
TAMPER = "static_tamper"
STRUCTURE = "static_structure"

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
     {TORCH_OP, TAMPER}),
    ("getattr_computed_name", candidate('name = "soft" + "max"\nreturn getattr(F, name)(x, -1)'),
     {TORCH_OP, TAMPER}),
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
     {TORCH_OP, STRUCTURE}),
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
    ("modelnew_is_model", HEADER + REFERENCE_CLASS + "\nModelNew = Model\n",
     {REFERENCE, STRUCTURE}),
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
     {STRUCTURE}),
    ("harness_import", candidate("return launch(x)", extra="from runners import harness"),
     {TAMPER}),
    # --- static_tamper: frames and tracebacks ---------------------------------------------
    ("traceback_to_caller_locals",
     candidate("try:\n    raise ValueError\nexcept ValueError as exc:\n"
               "    seen = exc.__traceback__.tb_frame.f_back.f_locals\nreturn launch(x)"),
     {TAMPER}),
    ("generator_frame", candidate("g = (i for i in [0])\nreturn g.gi_frame.f_back.f_locals['out']"),
     {TAMPER}),
    ("coroutine_frame",
     candidate("return launch(x)", extra="async def co():\n    pass\n\nFRAME = co().cr_frame\n"),
     {TAMPER}),
    ("frame_globals_by_getattr", candidate('f = getattr(self._tb, "tb_frame")\nreturn launch(x)'),
     {TAMPER}),
    ("sys_exc_info",
     candidate("try:\n    1 / 0\nexcept ZeroDivisionError:\n    tb = sys.exc_info()[2]\n"
               "return launch(x)", extra="import sys"), {TAMPER}),
    ("sys_exception", candidate("e = sys.exception()\nreturn launch(x)", extra="import sys"),
     {TAMPER}),
    ("inspect_any_frame_function",
     candidate("return launch(x)", extra="import inspect\nF0 = inspect.getouterframes"), {TAMPER}),
    # --- static_tamper: reflection and namespaces -------------------------------------------
    ("sys_modules_subscript", candidate('return sys.modules["torch"].relu(x)', extra="import sys"),
     {TAMPER, TORCH_OP}),
    ("getattr_module_at_module_level",
     candidate("return RELU(launch(x))", extra='RELU = getattr(torch, "relu")'),
     {TAMPER, TORCH_OP}),
    ("getattr_self_computed_name",
     candidate('name = "_p" + "ost"\nreturn getattr(self, name)(launch(x))',
               methods="def _post(self, y):\n    return y"), {TAMPER}),
    ("hasattr_computed_name", candidate("ok = hasattr(torch, self.name)\nreturn launch(x)"),
     {TAMPER}),
    ("getattr_unpacked", candidate("return getattr(*self.where)(x)"), {TAMPER}),
    ("dict_update_swaps_relu",
     candidate("return launch(x)", extra="torch.__dict__.update(relu=torch.abs)"),
     {TAMPER, TORCH_OP}),
    ("dict_read", candidate("return torch.__dict__['relu'](launch(x))"), {TAMPER}),
    ("self_dict_write", candidate("self.__dict__['forward'] = launch\nreturn launch(x)"),
     {TAMPER}),
    ("vars_on_module", candidate("return vars(F)['relu'](x)"), {TAMPER}),
    ("globals_at_module_level",
     candidate("return launch(x)", extra="G = globals()"), {TAMPER}),
    ("locals_in_forward", candidate("names = locals()\nreturn launch(x)"), {TAMPER}),
    ("dir_on_module", candidate("names = dir(torch)\nreturn launch(x)"), {TAMPER}),
    ("object_setattr",
     candidate("return launch(x)", init='object.__setattr__(self, "forward", print)'),
     {TAMPER}),
    ("getattr_passed_as_value",
     candidate("return launch(x)", extra="import functools\n"
               "RELU = functools.reduce(getattr, ['nn', 'functional', 'relu'], torch)"),
     {TAMPER}),
    ("getattr_aliased", candidate("return launch(x)", extra="lookup = getattr"), {TAMPER}),
    ("module_passed_as_value",
     candidate("return _apply(torch, x)",
               extra='def _apply(lib, t):\n    return getattr(lib, "relu")(t)\n'),
     {TAMPER, TORCH_OP}),
    ("module_aliased_locally", candidate("lib = F\nreturn lib.gelu(launch(x))"), {TAMPER}),
    ("rebind_torch_isnan",
     candidate("return launch(x)", extra="torch.isnan = lambda t: t != t"), {TAMPER}),
    ("rebind_functional_relu",
     candidate("return launch(x)", extra="torch.nn.functional.relu = torch.abs"),
     {TAMPER, TORCH_OP}),
    ("rebind_triton_language",
     candidate("return launch(x)", extra="triton.language.maximum = tl.minimum"), {TAMPER}),
    ("rebind_by_for_target",
     candidate("return launch(x)", extra="for torch.relu in [print]:\n    pass"), {TAMPER}),
    # --- static_tamper: private PyTorch and Triton internals -------------------------------
    ("disable_torch_function",
     candidate("with torch._C.DisableTorchFunction():\n    return launch(x)"), {TAMPER}),
    ("disable_torch_dispatch_import",
     candidate("return launch(x)", extra="from torch._C import _DisableTorchDispatch"), {TAMPER}),
    ("disable_torch_function_subclass",
     candidate("return launch(x)", extra="from torch._C import DisableTorchFunctionSubclass"),
     {TAMPER}),
    ("torch_overrides", candidate("return launch(x)", extra="import torch.overrides"),
     {TAMPER}),
    ("torch_refs", candidate("return torch._refs.relu(x)"), {TAMPER}),
    ("torch_ops_private", candidate("return launch(x)", extra="OPS = torch._ops.ops"), {TAMPER}),
    ("torch_prims_import", candidate("return launch(x)", extra="from torch import _prims"),
     {TAMPER}),
    ("triton_interpreter",
     candidate("return launch(x)", extra="from triton.runtime import interpreter"), {TAMPER}),
    ("triton_jit_internals",
     candidate("return launch(x)", extra="triton.runtime.jit.JITFunction.run = print"),
     {TAMPER}),
    # --- static_torch_op: array libraries anywhere -----------------------------------------
    ("numpy_import_alone", candidate("return launch(x)", extra="import numpy as np"), {TORCH_OP}),
    ("numpy_through_dict",
     candidate("return torch.as_tensor(LIBS['n'].exp(x.cpu()))",
               extra="import numpy\nLIBS = {'n': numpy}"), {TORCH_OP}),
    ("numpy_through_interpreter",
     candidate("return torch.as_tensor(triton.runtime.interpreter.np.exp(x.cpu()))"),
     {TORCH_OP, TAMPER}),
    ("numpy_from_import", candidate("return launch(x)", extra="from numpy import exp"),
     {TORCH_OP}),
    ("scipy_special", candidate("return launch(x)", extra="import scipy.special as ss"),
     {TORCH_OP}),
    ("jax_numpy", candidate("return launch(x)", extra="import jax.numpy as jnp"), {TORCH_OP}),
    ("pandas", candidate("return launch(x)", extra="import pandas as pd"), {TORCH_OP}),
    ("math_fsum_over_tensor", candidate("return x.new_tensor(math.fsum(x))",
                                        extra="import math"), {TORCH_OP}),
    # --- static_torch_op: what a @triton.jit body calls ------------------------------------
    ("kernel_calls_plain_helper", candidate("return launch2(x)", extra='''
def _helper(v):
    return torch.relu(v)

@triton.jit
def k2(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, _helper(tl.load(x_ptr + offs)))

def launch2(x):
    k2[(1,)](x, BLOCK=16)
    return x
'''), {TORCH_OP}),
    ("kernel_passes_plain_combine_fn", candidate("return launch2(x)", extra='''
def _add(a, b):
    return a + b

@triton.jit
def k2(x_ptr, BLOCK: tl.constexpr):
    v = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(x_ptr, tl.reduce(v, 0, _add))

def launch2(x):
    k2[(1,)](x, BLOCK=16)
    return x
'''), {TORCH_OP}),
    ("kernel_calls_its_argument", candidate("return launch2(x)", extra='''
@triton.jit
def k2(x_ptr, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, FN(tl.load(x_ptr + offs)))

def launch2(x):
    k2[(1,)](x, print, BLOCK=16)
    return x
'''), {TORCH_OP}),
    ("kernel_calls_through_container", candidate("return launch2(x)", extra='''
ACTS = {"relu": print}

@triton.jit
def k2(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, ACTS["relu"](tl.load(x_ptr + offs)))

def launch2(x):
    k2[(1,)](x, BLOCK=16)
    return x
'''), {TORCH_OP}),
    ("kernel_calls_math", candidate("return launch2(x)", extra='''
import math

@triton.jit
def k2(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, math.exp(tl.load(x_ptr + offs)))

def launch2(x):
    k2[(1,)](x, BLOCK=16)
    return x
'''), {TORCH_OP}),
    # --- static_torch_op: compute functions hidden in values -------------------------------
    ("torch_fn_in_list", candidate("return OPS[0](launch(x))", extra="OPS = [torch.relu]"),
     {TORCH_OP}),
    ("torch_fn_in_dict", candidate("return OPS['act'](launch(x))",
                                   extra="OPS = {'act': F.gelu}"), {TORCH_OP}),
    ("torch_fn_default_argument",
     candidate("return self.post(launch(x))",
               methods="def post(self, y, op=F.relu):\n    return op(y)"), {TORCH_OP}),
    ("torch_fn_partial", candidate("return P(launch(x))",
                                   extra="import functools\nP = functools.partial(torch.relu)"),
     {TORCH_OP}),
    ("torch_fn_in_lambda_in_init", candidate("return self.act(launch(x))",
                                             init="self.act = lambda t: torch.relu(t)"),
     {TORCH_OP}),
    ("closure_from_factory",
     candidate("return self.act(launch(x))", init="self.act = _make()",
               extra="def _make():\n    def inner(t):\n        return t.relu()\n\n"
                     "    return inner\n"),
     {TORCH_OP}),
    ("helper_stored_then_called",
     candidate("return self.act(launch(x))", init="self.act = _post",
               extra="def _post(t):\n    return torch.sigmoid(t)\n"), {TORCH_OP}),
    ("helper_registered_in_module_list",
     candidate("return _REGISTRY[-1](launch(x))",
               extra="_REGISTRY = []\n\ndef _post(t):\n    return t.tanh()\n\n"
                     "_REGISTRY.append(_post)\n"), {TORCH_OP}),
    ("factory_value_read_in_forward",
     candidate("return _ACT(launch(x))",
               extra="def _make():\n    return nn.GELU()\n\n_ACT = _make()\n"), {TORCH_OP}),
    ("nn_modules_in_module_level_list",
     candidate("return _OPS[0](launch(x))", extra="_OPS = [nn.ReLU()]"), {TORCH_OP}),
    ("lambda_stored_by_the_inherited_reference",
     candidate("return self.act(launch(x))", bases="Model", reference=True).replace(
         "self.weight = nn.Parameter(torch.randn(n))",
         "self.weight = nn.Parameter(torch.randn(n))\n        self.act = lambda t: t.relu()"),
     {TORCH_OP}),
    ("class_passed_as_value",
     candidate("return self.h.run(launch(x))", init="self.h = _build(_Helper)",
               extra="class _Helper:\n    def run(self, t):\n        return t.exp()\n\n"
                     "def _build(cls):\n    return cls()\n"), {TORCH_OP}),
    # --- static_structure -----------------------------------------------------------------
    ("modelnew_from_factory",
     HEADER + "\ndef make():\n    class ModelNew(nn.Module):\n        def forward(self, x):\n"
              "            return launch(x)\n    return ModelNew\n\nModelNew = make()\n",
     {STRUCTURE}),
    ("modelnew_from_type",
     HEADER + "\nModelNew = type('ModelNew', (nn.Module,), {'forward': lambda self, x: x})\n",
     {STRUCTURE}),
    ("modelnew_conditional",
     HEADER + "\nif torch.cuda.is_available():\n    class ModelNew(nn.Module):\n"
              "        def forward(self, x):\n            return launch(x)\n", {STRUCTURE}),
    ("modelnew_twice", candidate("return launch(x)") + candidate("return launch(x)"),
     {STRUCTURE}),
    ("modelnew_metaclass", candidate("return launch(x)", bases="nn.Module, metaclass=Meta",
                                     extra="class Meta(type):\n    pass\n"), {STRUCTURE}),
    ("modelnew_decorated",
     candidate("return launch(x)").replace("class ModelNew", "@keep\nclass ModelNew"),
     {STRUCTURE}),
    ("modelnew_other_base", candidate("return launch(x)", bases="Base",
                                      extra="class Base(nn.Module):\n    pass\n"), {STRUCTURE}),
    ("base_with_metaclass",
     candidate("return launch(x)", bases="Model", reference=True).replace(
         "class Model(nn.Module):", "class Model(nn.Module, metaclass=type):"), {STRUCTURE}),
    ("base_with_init_subclass",
     candidate("return launch(x)", bases="Model", reference=True).replace(
         "class Model(nn.Module):",
         "class Model(nn.Module):\n    def __init_subclass__(cls):\n        cls.forward = print\n"),
     {STRUCTURE}),
    ("modelnew_forward_assigned_in_body",
     candidate("return launch(x)", methods="__call__ = launch"), {STRUCTURE}),
    ("self_forward_rebound_in_init",
     candidate("return launch(x)", init="self.forward = launch"), {STRUCTURE}),
    ("setattr_forward_constant",
     candidate("return launch(x)", init='setattr(self, "forward", launch)'), {STRUCTURE}),
    ("class_swapped", candidate("return launch(x)", init="self.__class__ = nn.Module"),
     {STRUCTURE}),
    ("output_class_swapped",
     candidate("out = launch(x)\nout.__class__ = Fake\nreturn out",
               extra="class Fake(torch.Tensor):\n    pass\n"), {TAMPER}),
    ("modelnew_deleted", candidate("return launch(x)") + "del ModelNew\n", {STRUCTURE}),
    ("modelnew_imported", HEADER + "\nfrom elsewhere import ModelNew\n", {STRUCTURE}),
    ("modelnew_declared_global",
     HEADER + "\ndef setup():\n    global ModelNew\n    ModelNew = None\n", {STRUCTURE}),
    ("module_level_getattr", HEADER + "\ndef __getattr__(name):\n    return None\n",
     {STRUCTURE}),
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
    ("honest_reflection_and_probes", candidate(
        'w = getattr(self, "weight", None)\nhas_npu = hasattr(torch, "npu")\n'
        'dt = getattr(x, "dtype")\nreturn launch(x)',
        init="self.weight = nn.Parameter(torch.randn(4))")),
    ("attribute_path_reduce", candidate(
        'w = functools.reduce(getattr, "fc.weight".split("."), self)\nreturn launch(x)',
        init="self.fc = nn.Linear(4, 4)", extra="import functools")),
    ("type_checks_and_annotations", candidate(
        "assert isinstance(x, torch.Tensor) and not isinstance(self, (nn.Linear, nn.Conv2d))\n"
        "return self._run(x)",
        methods="def _run(self, t: torch.Tensor, gen: torch.Generator | None = None)"
                " -> torch.Tensor:\n    return launch(t)")),
    ("autograd_function_base", candidate("return _Copy.apply(x)", extra='''
class _Copy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        return launch(t)
''')),
    ("autotune_heuristics_grid_lambda", candidate("return launch2(x)", extra='''
@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})],
                 key=["n"])
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def k2(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in tl.static_range(2):
        acc += _twice(tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32))
    acc = tl.where(acc > 0, acc, 0.0) + min(1, 2) * 0 + tl.cdiv(n, BLOCK) * 0
    tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=offs < n)


@triton.jit
def _twice(v):
    return v * 2


def launch2(x):
    out = torch.empty_like(x)
    grid = lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)  # noqa: E731
    k2[grid](x, out, x.numel())
    return out
''')),
    ("kernel_reduce_with_jit_combine", candidate("return launch2(x)", extra='''
@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def k2(x_ptr, out_ptr, BLOCK: tl.constexpr):
    v = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(out_ptr, tl.reduce(v, 0, _add))


def launch2(x):
    out = torch.empty(1, device=x.device, dtype=x.dtype)
    k2[(1,)](x, out, BLOCK=16)
    return out
''')),
    ("launch_helpers_in_a_dispatch_table", candidate("return _pick(x)(self, x)", extra='''
def _launch_2d(module, t):
    return launch(t)


def _launch_1d(module, t):
    return launch(t)


_VARIANTS = {2: _launch_2d, 1: _launch_1d}
DTYPES = {torch.float16: tl.float16, torch.float32: tl.float32}


def _pick(t):
    return _VARIANTS[t.dim()]
''')),
    ("nested_grid_function", candidate("return _wrap(x)", extra='''
def _wrap(t):
    def grid(meta):
        return (triton.cdiv(t.numel(), meta["BLOCK"]),)
    out = torch.empty_like(t)
    copy_kernel[grid](t, out, t.numel(), BLOCK=1024)
    return out
''')),
    ("reference_subclass_and_math", candidate(
        "n = math.prod(x.shape)\nblock = max(16, 1 << math.ceil(math.log2(max(n, 1))))\n"
        "return launch(x)", bases="Model", reference=True, extra="import math")),
    ("torch_no_grad_decorator", candidate("return launch(x)").replace(
        "    def forward(self", "    @torch.no_grad()\n    def forward(self")),
    ("module_alias_at_module_level", candidate("return launch(x)", extra="tlang = tl")),
    ("reference_keeps_its_own_lambdas_and_values", candidate(
        "return launch(x)", bases="Model", reference=True).replace(
        "self.weight = nn.Parameter(torch.randn(n))",
        "self.weight = nn.Parameter(torch.randn(n))\n        self.act = lambda t: F.relu(t)"
        "\n        self.alt = torch.tanh")),
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
    modules = sorted((REPO / "runners" / "anticheat").glob("*.py"))
    assert modules
    trees = [ast.parse(module.read_text(encoding="utf-8")) for module in modules]
    imported = {alias.name.split(".")[0] for tree in trees for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {(node.module or "").split(".")[0] for tree in trees for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom)}
    allowed = set(sys.stdlib_module_names) | {"runners", "__future__"}
    assert imported <= allowed, imported - allowed




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


GOOD = sorted(CANDIDATES.glob("*__good_*.py"))
STATIC_DATA = DATA / "static"


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in GOOD])
def test_every_good_candidate_gives_no_finding(path: Path) -> None:
    findings = check_source(path.read_text(encoding="utf-8"), filename=path.name)
    assert findings == [], summarize(findings)


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name)
                                  for p in sorted(STATIC_DATA.glob("generated_*.py"))])
def test_offline_generator_kernels_give_no_finding(path: Path) -> None:
    """Files written by `opbot generate` (offline generator): reference, kernels, launcher,
    `class ModelNew(Model)`, `hasattr(torch, "npu")`, `functools.reduce(getattr, ...)`."""
    findings = check_source(path.read_text(encoding="utf-8"), filename=path.name)
    assert findings == [], summarize(findings)


def test_generated_kernel_data_is_present() -> None:
    assert GOOD
    assert len(list(STATIC_DATA.glob("generated_*.py"))) >= 3


# --- speed, deadline, nesting ----------------------------------------------------------


def hostile_source(attributes: int = 4200, helpers: int = 150, chain: int = 600,
                   chains: int = 3) -> str:
    """About 110 KB built to make a naive scan quadratic: thousands of class attributes read
    through self, helpers chained through fallbacks, methods calling methods, long attribute
    and call chains. (It took the previous scan about 6 s of CPU.)"""
    parts = ["import torch", "import torch.nn as nn", ""]
    for i in range(helpers):
        nxt = f"f{i + 1}(x)" if i + 1 < helpers else "torch.relu(x)"
        parts.append(f"def f{i}(x):\n    try:\n        return x\n    except Exception:\n"
                     f"        return {nxt}")
    parts.append("class ModelNew(nn.Module):")
    parts.append("    " + " = ".join(f"a{i}" for i in range(attributes)) + " = 0")
    parts.extend(f"    def m{i}(self, x):\n        return self.m{i + 1}(x)" for i in range(helpers))
    parts.append("    def forward(self, x):")
    parts.extend(f"        y{k} = x" + ".a" * chain for k in range(chains))
    parts.extend(f"        z{k} = x" + ".abs()" * (chain // 2) for k in range(chains))
    for start in range(0, attributes, 50):
        names = ", ".join(f"self.a{i}" for i in range(start, min(start + 50, attributes)))
        parts.append(f"        x = ({names})")
    parts.append("        return f0(self.m0(x))")
    return "\n".join(parts) + "\n"


def _scan_seconds(source: str) -> float:
    """The best of three scans in this thread's CPU time, with the collector off: on a test
    worker's large heap a full collection landing in one scan (not the scan itself) once
    made the ratio below 5x, in wall time and in CPU time alike."""
    best = float("inf")
    gc.disable()
    try:
        for _ in range(3):
            start = time.thread_time()
            check_source(source)
            best = min(best, time.thread_time() - start)
    finally:
        gc.enable()
    return best


def test_hostile_source_is_scanned_in_linear_time() -> None:
    source = hostile_source()
    assert 90_000 < len(source) < 150_000
    findings = check_source(source)
    checks_seen = {f.check for f in findings}
    assert {TORCH_OP, FALLBACK, STRUCTURE} <= checks_seen, summarize(findings)
    elapsed = _scan_seconds(source)
    # Linear is the ratio below; this bound only catches a scan gone pathological (about
    # 1 s on a 2-core machine).
    assert elapsed < 10.0, f"{elapsed:.2f} s"
    # twice the source, about twice the time (with room for noise): no quadratic term
    double = hostile_source(attributes=8400, helpers=300, chains=6)
    assert _scan_seconds(double) < 4 * max(elapsed, 0.05)


def test_deadline_in_the_past_stops_at_once() -> None:
    start = time.perf_counter()
    findings = check_source(hostile_source(), deadline=time.monotonic() - 1.0)
    assert time.perf_counter() - start < 0.5
    assert [(f.check, f.line) for f in findings] == [("timeout", 0)]
    assert "deadline" in findings[0].message


def test_deadline_passing_during_the_scan_stops_it() -> None:
    source = hostile_source()  # a full scan takes several times the 0.02 s allowed
    # This thread's CPU seconds, not wall (a loaded machine stretches the wall clock) nor the
    # process's (a test worker's other threads lend warm servers to other processes).
    start = time.thread_time()
    findings = check_source(source, deadline=time.monotonic() + 0.02)
    elapsed = time.thread_time() - start
    assert "timeout" in {f.check for f in findings}
    assert elapsed < 1.0, f"{elapsed:.2f} CPU s"


def test_no_deadline_and_a_far_one_change_nothing() -> None:
    source = candidate("return torch.relu(x)")
    assert check_source(source, deadline=time.monotonic() + 60) == check_source(source)


@pytest.mark.parametrize("source", [
    pytest.param("y = " + "(" * 5000 + "x" + ")" * 5000 + "\n", id="parentheses"),
    pytest.param("y = " + "[" * 5000 + "]" * 5000 + "\n", id="brackets"),
    pytest.param("y = " + "-" * 5000 + "x\n", id="unary_operators"),
    pytest.param("y = " + " + ".join(["x"] * 20_000) + "\n", id="long_sum"),
    pytest.param("y = x" + ".a" * 5000 + "\n", id="attribute_chain_5000"),
    pytest.param("y = torch" + ".a" * 100 + ".relu(x)\n", id="attribute_chain_100"),
])
def test_deep_nesting_gives_a_structure_finding(source: str) -> None:
    findings = check_source(candidate("return launch(x)", extra=source))
    assert STRUCTURE in {f.check for f in findings}, summarize(findings)
    assert any("nest" in f.message or "chains" in f.message for f in findings)


def test_deep_class_hierarchy_is_reported_not_walked() -> None:
    classes = "".join(f"class C{i}(C{i - 1}):\n    pass\n" for i in range(1, 200))
    source = candidate("return launch(x)", extra="class C0(nn.Module):\n    pass\n" + classes,
                       bases="C199")
    findings = check_source(source)
    assert STRUCTURE in {f.check for f in findings}
    assert any("ancestors" in f.message for f in findings), summarize(findings)


# --- messages of the new rules ----------------------------------------------------------


def test_structure_messages_name_the_construct_and_line() -> None:
    source = HEADER + ("\ndef make():\n    class ModelNew(nn.Module):\n"
                       "        def forward(self, x):\n            return launch(x)\n"
                       "    return ModelNew\n\nModelNew = make()\n")
    findings = check_source(source)
    lines = source.splitlines()
    assert [f.check for f in findings] == [STRUCTURE, STRUCTURE]
    assert "factory" in findings[0].message
    assert lines[findings[0].line - 1].strip().startswith("class ModelNew")
    assert findings[1].source_line == "ModelNew = make()"


def test_kernel_call_message_names_kernel_and_helper() -> None:
    source = candidate("return launch2(x)", extra='''
def _helper(v):
    return v

@triton.jit
def k2(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, _helper(tl.load(x_ptr + offs)))

def launch2(x):
    k2[(1,)](x, BLOCK=16)
    return x
''')
    [finding] = check_source(source)
    assert finding.check == TORCH_OP
    assert "kernel k2" in finding.message
    assert "_helper()" in finding.message
    assert "interpreter" in finding.message


def test_frame_message_names_the_attribute() -> None:
    source = candidate("return launch(x)", init="self.f = self.__traceback__.tb_frame")
    [finding] = check_source(source)
    assert finding.check == TAMPER
    assert "tb_frame" in finding.message
    assert "frames" in finding.message
