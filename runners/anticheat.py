"""Static (AST) anti-cheat check of a candidate's source.

A candidate defines ``class ModelNew(nn.Module)`` (KernelBench convention) whose forward
must compute the operator with kernels of the backend (``@triton.jit`` functions launched as
``kernel[grid](...)``), never with PyTorch, NumPy or the reference. This module reads the
source without running it and names what it finds with one of the static checks of
``runners.base.CheckName``:

- ``static_torch_op``: the forward path computes with PyTorch (``torch.*``, ``F.*``, tensor
  methods such as ``x.sum()``, the ``@`` operator, ``torch.nn`` modules, ``torch.compile``)
  or on the host (NumPy, ``.tolist()``).
- ``static_reference_call``: the forward path runs the reference (``Model(...)``,
  ``super().forward``), or the file loads code at run time (an import of the reference,
  importlib, exec, eval).
- ``static_fallback``: an error is caught and PyTorch or the reference does the work instead.
- ``static_stream``: side streams, events, CUDA graphs, threads, processes, work at exit.
- ``static_tamper``: patching PyTorch, the timer or the harness; reaching into frames,
  other modules, the garbage collector or memory; signals; environment writes; files.

"The forward path" is ModelNew.forward (and ``__call__``, ``__getattr__``), the methods it
calls through ``self`` or ``super()``, and the functions and classes of the file it names,
transitively. ``@triton.jit`` functions are kernel code: ``tl.*`` is fine there and only
qualified torch/NumPy names are flagged. ``__init__`` may use PyTorch freely, but calling a
``torch.nn`` module (or a reference instance) it stored is flagged. The stream and tamper
checks and the run-time loading checks cover the whole file except ``if __name__ ==
"__main__":`` blocks.

A static check cannot type a Python name: ``a + b`` on tensors is left to the run-time check;
the ``@`` operator and the listed tensor methods are flagged whatever they are called on.
Only the standard library is imported: this runs in the parent process, which starts fast.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from runners.base import SourceLocation

StaticCheck = Literal[
    "static_torch_op",
    "static_reference_call",
    "static_fallback",
    "static_stream",
    "static_tamper",
]
TORCH_OP: StaticCheck = "static_torch_op"
REFERENCE: StaticCheck = "static_reference_call"
FALLBACK: StaticCheck = "static_fallback"
STREAM: StaticCheck = "static_stream"
TAMPER: StaticCheck = "static_tamper"
STATIC_CHECKS: tuple[StaticCheck, ...] = (TORCH_OP, REFERENCE, FALLBACK, STREAM, TAMPER)

MAX_SOURCE_BYTES = 2_000_000  # larger sources are left to the caller's size check
MODEL_CLASS = "ModelNew"

# ---------------------------------------------------------------------------------------
# What the forward path may use. Everything under torch.* that is not listed is flagged.
# ---------------------------------------------------------------------------------------

# torch.<name>: allocate, describe or move data; never compute the operator.
TORCH_ALLOWED: frozenset[str] = frozenset({
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like",
    "full", "full_like", "arange", "tensor", "as_tensor", "as_strided", "broadcast_shapes",
    "promote_types", "result_type", "can_cast", "is_tensor", "is_floating_point", "is_complex",
    "finfo", "iinfo", "Size", "Tensor", "device", "dtype", "layout", "memory_format",
    "get_default_dtype", "get_default_device", "no_grad", "inference_mode", "enable_grad",
    "set_grad_enabled", "is_grad_enabled", "is_inference_mode_enabled", "strided",
    "contiguous_format", "channels_last", "channels_last_3d", "preserve_format",
    # bare namespaces: naming one computes nothing (dynamic lookups are checked apart)
    "nn", "cuda", "npu", "linalg", "fft", "special",
})
TORCH_DTYPES: frozenset[str] = frozenset({
    "float", "float16", "float32", "float64", "half", "double", "bfloat16", "complex32",
    "complex64", "complex128", "cfloat", "cdouble", "chalf", "int", "int8", "int16", "int32",
    "int64", "short", "long", "uint8", "uint16", "uint32", "uint64", "bool", "float8_e4m3fn",
    "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu",
})
# Longer torch names that only wrap a Triton kernel for PyTorch.
TORCH_ALLOWED_QUALIFIED: frozenset[str] = frozenset({
    "torch.library.wrap_triton", "torch.library.triton_op",
})
# torch.nn.<name> that hold data rather than compute.
TORCH_NN_ALLOWED: frozenset[str] = frozenset({
    "Module", "Parameter", "Buffer", "ParameterList", "ParameterDict", "functional",
})
# torch.cuda.<name> / torch.npu.<name>: device queries.
DEVICE_QUERIES: frozenset[str] = frozenset({
    "is_available", "is_initialized", "current_device", "device_count", "device",
    "get_device_properties", "get_device_name", "get_device_capability", "set_device",
    "synchronize", "current_stream", "default_stream", "is_bf16_supported", "get_arch_list",
    "mem_get_info", "memory_allocated", "max_memory_allocated", "memory_reserved",
    "max_memory_reserved",
})
# Tensor methods that compute (a trailing "_" in-place form counts too, e.g. add_).
TENSOR_COMPUTE_METHODS: frozenset[str] = frozenset({
    "abs", "absolute", "acos", "acosh", "add", "addbmm", "addcdiv", "addcmul", "addmm", "addmv",
    "addr", "all", "allclose", "amax", "amin", "aminmax", "angle", "any", "apply_", "argmax",
    "argmin", "argsort", "asin", "asinh", "atan", "atan2", "atanh", "backward", "baddbmm",
    "bincount", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "bmm", "ceil",
    "cholesky", "clamp", "clamp_max", "clamp_min", "clip", "cos", "cosh", "count_nonzero",
    "cross", "cummax", "cummin", "cumprod", "cumsum", "deg2rad", "det", "diag", "diff",
    "digamma", "dist", "div", "divide", "dot", "eq", "equal", "erf", "erfc", "erfinv", "exp",
    "exp2", "expm1", "flip", "fliplr", "flipud", "float_power", "floor", "floor_divide", "fmax",
    "fmin", "fmod", "frac", "gather", "gcd", "ge", "greater", "greater_equal", "gt", "heaviside",
    "histc", "hypot", "i0", "index_add", "index_copy", "index_fill", "index_put",
    "index_reduce", "index_select", "inner", "inverse", "isclose", "isfinite", "isinf",
    "isnan", "isneginf", "isposinf", "kron", "kthvalue", "lcm", "ldexp", "le", "lerp", "less",
    "less_equal", "lgamma", "log", "log10", "log1p", "log2", "log_softmax", "logaddexp",
    "logaddexp2", "logcumsumexp", "logdet", "logical_and", "logical_not", "logical_or",
    "logical_xor", "logit", "logsumexp", "lt", "map_", "map2_", "masked_fill", "masked_scatter",
    "masked_select", "matmul", "matrix_exp", "matrix_power", "max", "maximum", "mean",
    "median", "min", "minimum", "mm", "mode", "msort", "mul", "multiply", "mv", "mvlgamma",
    "nan_to_num", "nanmean", "nanmedian", "nanquantile", "nansum", "ne", "neg", "negative",
    "nextafter", "nonzero", "norm", "not_equal", "outer", "pinverse", "polygamma", "pow",
    "prod", "put", "qr", "quantile", "rad2deg", "reciprocal", "relu", "remainder", "renorm",
    "repeat", "repeat_interleave", "roll", "rot90", "round", "rsqrt", "scatter", "scatter_add",
    "scatter_reduce", "sgn", "sigmoid", "sign", "signbit", "sin", "sinc", "sinh", "slogdet",
    "softmax", "sort", "sqrt", "square", "std", "sub", "subtract", "sum", "sum_to_size", "svd",
    "take", "take_along_dim", "tan", "tanh", "tensordot", "topk", "trace", "triangular_solve",
    "tril", "triu", "true_divide", "trunc", "unique", "unique_consecutive", "var", "vdot",
    "where", "xlogy", "__matmul__", "__rmatmul__", "__imatmul__",
})
# Tensor methods that copy the data to the host to compute there.
TENSOR_HOST_METHODS: frozenset[str] = frozenset({"numpy", "tolist"})
# Tensor methods that are views, metadata, conversions or copies into a buffer: allowed.
# (Unlisted methods are not flagged either; this list wins over the in-place rule above.)
TENSOR_ALLOWED_METHODS: frozenset[str] = frozenset({
    "view", "view_as", "reshape", "reshape_as", "contiguous", "flatten", "unflatten",
    "unsqueeze", "squeeze", "permute", "transpose", "t", "mT", "movedim", "swapaxes",
    "expand", "expand_as", "broadcast_to", "size", "stride", "numel", "dim", "ndimension",
    "element_size", "nelement", "is_contiguous", "data_ptr", "storage_offset", "to", "type",
    "type_as", "float", "half", "bfloat16", "double", "int", "long", "short", "char", "byte",
    "bool", "cpu", "cuda", "npu", "clone", "detach", "detach_", "requires_grad_", "new_empty",
    "new_zeros", "new_ones", "new_full", "new_tensor", "copy_", "fill_", "zero_", "item",
    "split", "tensor_split", "chunk", "narrow", "select", "unbind", "unfold", "diagonal",
    "as_strided", "is_floating_point", "get_device", "untyped_storage", "record_stream",
})
# Modules that compute on the host or with another library's kernels when called.
HOST_COMPUTE_MODULES: frozenset[str] = frozenset({
    "numpy", "scipy", "jax", "cupy", "tensorflow", "numba", "pycuda", "apex", "xformers",
    "flash_attn", "torchvision", "torchaudio",
})
# Names that `from torch import *` (or torch.nn.functional) brings in and that compute.
STAR_COMPUTE_NAMES: frozenset[str] = TENSOR_COMPUTE_METHODS | frozenset({
    "linear", "bilinear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "gelu", "silu", "mish", "elu", "selu", "celu", "leaky_relu", "relu6",
    "hardtanh", "hardswish", "hardsigmoid", "softplus", "softsign", "logsigmoid", "tanhshrink",
    "threshold", "glu", "layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm",
    "normalize", "dropout", "embedding", "one_hot", "pad", "interpolate", "max_pool1d",
    "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool2d",
    "adaptive_max_pool2d", "cross_entropy", "nll_loss", "mse_loss", "l1_loss",
    "smooth_l1_loss", "huber_loss", "kl_div", "binary_cross_entropy", "cosine_similarity",
    "pairwise_distance", "cdist", "einsum", "scaled_dot_product_attention", "softmin",
})
# Bare names that resolve to builtins unless the file binds them.
BUILTIN_NAMES: frozenset[str] = frozenset({
    "open", "exec", "eval", "compile", "__import__", "setattr", "delattr", "getattr",
    "globals", "vars", "exit", "quit", "object", "type",
})
FORWARD_NAMES: frozenset[str] = frozenset({"forward", "__call__", "_call_impl"})
# ModelNew methods the harness's call reaches without naming them.
ROOT_METHODS: tuple[str, ...] = (
    "forward", "__call__", "_call_impl", "_wrapped_call_impl", "__getattr__",
    "__getattribute__",
)
# Methods of a helper class that do not run in its forward.
SKIPPED_METHODS: frozenset[str] = frozenset({
    "backward", "jvp", "vjp", "setup_context", "extra_repr", "__repr__", "__str__",
})
SETATTR_NAMES: frozenset[str] = frozenset({
    "builtins.setattr", "builtins.delattr", "builtins.object.__setattr__",
    "builtins.object.__delattr__", "builtins.type.__setattr__",
})
KERNEL_DECORATORS: frozenset[str] = frozenset({"jit", "autotune", "heuristics"})

# ---------------------------------------------------------------------------------------
# Reasons: each finding says what was seen and why it is not allowed.
# ---------------------------------------------------------------------------------------

TORCH_REASON = "the operator must be computed by the kernel, not by PyTorch"
NN_MODULE_REASON = "a torch.nn module computes with PyTorch; the kernel must compute the operator"
TENSOR_REASON = "a tensor method computes with PyTorch; the kernel must compute the operator"
MATMUL_REASON = "`@` is torch.matmul; the kernel must compute the operator"
HOST_REASON = "computing on the host (NumPy, Python lists) is not a kernel of the backend"
NPU_REASON = "a torch_npu operator is PyTorch's NPU kernel, not the candidate's"
KERNEL_TORCH_REASON = "kernel code must compute with triton.language, not PyTorch or NumPy"
DYNAMIC_REASON = "looking torch functions up by a computed name hides which PyTorch op runs"
REFERENCE_REASON = "the candidate must not run (or load) the reference"
INHERIT_REASON = "the candidate must define a forward that computes with its own kernel"
GLOBALS_REASON = "looking names up in the module namespace can reach the reference"
FALLBACK_REASON = (
    "a kernel that fails must raise, not hand the work to PyTorch or the reference "
    "(the fallback hides the failure from the checks)"
)
THREAD_REASON = "work on another thread or process escapes the timer and the checks"
STREAM_REASON = "work on a side stream, an event or a captured graph can escape the timer"
DEFER_REASON = "work deferred to interpreter exit or garbage collection escapes the timer"
COMPILE_REASON = (
    "torch.compile and TorchScript generate their own kernels; the candidate's kernel must "
    "compute the operator"
)
EXEC_REASON = "code built or imported at run time can load the reference or hide PyTorch calls"
MODULES_REASON = "sys.modules reaches every loaded module, the harness and the reference included"
FRAMES_REASON = "reading stack frames reaches the harness's variables, expected outputs included"
TRACE_REASON = "tracing and import hooks let the candidate rewrite the harness as it runs"
GC_REASON = "the garbage collector hands out every live object, the harness's included"
CTYPES_REASON = "ctypes and cffi can rewrite memory, the timer and the harness included"
SIGNAL_REASON = "signal handlers can dodge the timeout or interrupt the harness"
EXIT_REASON = "ending or signalling the process hides the verdict"
FILE_REASON = "a kernel has no business with files: they can hold cached outputs or harness data"
ENV_REASON = "changing environment variables changes how the harness, PyTorch or Triton behave"
MOCK_REASON = "mock patches PyTorch, the timer or the harness"
DISPATCH_REASON = (
    "overriding PyTorch's dispatch or reaching into torch._C changes what the reference and "
    "the checks compute"
)
HOOK_REASON = "a module hook runs around forward and can replace its output"
HARNESS_REASON = "the candidate must not reach into opbot's verification harness"
PATCH_REASON = "a candidate must not change PyTorch, Triton, the timer or the harness"
NAMESPACE_REASON = "rewriting a namespace can swap functions of PyTorch, the timer or the harness"
INTERNALS_REASON = "reaching into function or class internals can reach the harness or patch it"
HIERARCHY_REASON = "walking the class hierarchy reaches the reference's forward"


@dataclass(frozen=True)
class _Rule:
    """Qualified names (a prefix matches its attributes too) and what using them means."""

    check: StaticCheck
    prefixes: tuple[str, ...]
    reason: str


# Checked on every resolved name in the whole file (imports included), kernels included.
FILE_RULES: tuple[_Rule, ...] = (
    _Rule(STREAM, (
        "threading", "_thread", "multiprocessing", "concurrent", "asyncio", "subprocess",
        "torch.multiprocessing", "torch.futures", "os.fork", "os.forkpty", "os.system",
        "os.popen", "os.spawnl", "os.spawnle", "os.spawnlp", "os.spawnlpe", "os.spawnv",
        "os.spawnve", "os.spawnvp", "os.spawnvpe", "os.posix_spawn", "os.posix_spawnp",
        "os.register_at_fork",
    ), THREAD_REASON),
    _Rule(STREAM, (
        "torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.set_stream",
        "torch.cuda.ExternalStream", "torch.cuda.StreamContext", "torch.cuda.streams",
        "torch.cuda.Event", "torch.cuda.graph", "torch.cuda.graphs", "torch.cuda.CUDAGraph",
        "torch.cuda.make_graphed_callables", "torch.cuda._sleep", "torch.npu.Stream",
        "torch.npu.stream", "torch.npu.set_stream", "torch.npu.Event", "torch.npu.graph",
        "torch.npu.NPUGraph", "torch_npu.npu.Stream", "torch_npu.npu.stream",
        "torch_npu.npu.set_stream", "torch_npu.npu.Event", "torch.Stream", "torch.Event",
    ), STREAM_REASON),
    _Rule(STREAM, ("atexit", "weakref.finalize"), DEFER_REASON),
    _Rule(TORCH_OP, (
        "torch.compile", "torch._dynamo", "torch._inductor", "torch.jit", "torch.cuda.jiterator",
    ), COMPILE_REASON),
    _Rule(REFERENCE, (
        "builtins.exec", "builtins.eval", "builtins.compile", "builtins.__import__", "importlib",
        "runpy", "imp", "zipimport",
    ), EXEC_REASON),
    _Rule(TAMPER, ("sys.modules",), MODULES_REASON),
    _Rule(TAMPER, (
        "sys._getframe", "sys._current_frames", "inspect.currentframe", "inspect.stack",
        "inspect.trace", "inspect.getouterframes", "inspect.getinnerframes",
        "inspect.getframeinfo", "traceback.extract_stack", "traceback.walk_stack",
    ), FRAMES_REASON),
    _Rule(TAMPER, (
        "sys.settrace", "sys.setprofile", "sys.addaudithook", "sys.meta_path", "sys.path_hooks",
        "sys.path_importer_cache",
    ), TRACE_REASON),
    _Rule(TAMPER, ("gc.get_objects", "gc.get_referrers", "gc.get_referents", "gc.callbacks"),
          GC_REASON),
    _Rule(TAMPER, ("ctypes", "_ctypes", "cffi"), CTYPES_REASON),
    _Rule(TAMPER, ("signal",), SIGNAL_REASON),
    _Rule(TAMPER, (
        "os._exit", "os.kill", "os.killpg", "os.abort", "sys.exit", "builtins.exit",
        "builtins.quit",
    ), EXIT_REASON),
    _Rule(TAMPER, (
        "builtins.open", "io.open", "io.FileIO", "os.open", "os.read", "os.fdopen", "os.listdir",
        "os.scandir", "os.walk", "glob", "shutil", "shelve", "pickle.load", "marshal.load",
        "torch.load", "torch.save", "numpy.load", "numpy.save", "numpy.fromfile",
        "numpy.loadtxt", "numpy.memmap",
    ), FILE_REASON),
    _Rule(TAMPER, (
        "os.putenv", "os.unsetenv", "os.environ.update", "os.environ.setdefault",
        "os.environ.pop", "os.environ.popitem", "os.environ.clear", "os.environ.__setitem__",
        "os.environ.__delitem__",
    ), ENV_REASON),
    _Rule(TAMPER, ("unittest.mock", "mock"), MOCK_REASON),
    _Rule(TAMPER, (
        "torch.library.Library", "torch.library.impl", "torch.library.register_kernel",
        "torch.overrides", "torch.utils._python_dispatch", "torch._C",
    ), DISPATCH_REASON),
    _Rule(TAMPER, (
        "torch.nn.modules.module.register_module_forward_hook",
        "torch.nn.modules.module.register_module_forward_pre_hook",
        "torch.nn.modules.module.register_module_full_backward_hook",
    ), HOOK_REASON),
    _Rule(TAMPER, ("runners", "bot", "opbot"), HARNESS_REASON),
)

Verdict = tuple[StaticCheck, str]

# Methods flagged on any receiver the file pass cannot resolve.
METHOD_RULES: dict[str, Verdict] = {
    "wait_stream": (STREAM, STREAM_REASON),
    "wait_event": (STREAM, STREAM_REASON),
    "record_event": (STREAM, STREAM_REASON),
    "read_text": (TAMPER, FILE_REASON),
    "read_bytes": (TAMPER, FILE_REASON),
    "write_text": (TAMPER, FILE_REASON),
    "write_bytes": (TAMPER, FILE_REASON),
    "register_forward_hook": (TAMPER, HOOK_REASON),
    "register_forward_pre_hook": (TAMPER, HOOK_REASON),
    "register_full_backward_hook": (TAMPER, HOOK_REASON),
    "register_full_backward_pre_hook": (TAMPER, HOOK_REASON),
    "register_backward_hook": (TAMPER, HOOK_REASON),
    "exec_module": (REFERENCE, EXEC_REASON),
    "load_module": (REFERENCE, EXEC_REASON),
}
# Attributes flagged on any receiver, anywhere in the file.
DUNDER_RULES: dict[str, Verdict] = {
    "__globals__": (TAMPER, INTERNALS_REASON),
    "__builtins__": (TAMPER, INTERNALS_REASON),
    "__code__": (TAMPER, INTERNALS_REASON),
    "__closure__": (TAMPER, INTERNALS_REASON),
    "__subclasses__": (TAMPER, INTERNALS_REASON),
    "__bases__": (REFERENCE, HIERARCHY_REASON),
    "__base__": (REFERENCE, HIERARCHY_REASON),
    "__mro__": (REFERENCE, HIERARCHY_REASON),
}


@dataclass(frozen=True)
class Finding:
    """One thing the static check saw: which check, why, and where."""

    check: str
    message: str
    line: int
    source_line: str

    def location(self, file: str) -> SourceLocation:
        return SourceLocation(file=file, line=self.line, source_line=self.source_line)


def check_source(source: str, *, filename: str = "<candidate>",
                 reference_names: Collection[str] = ("Model",)) -> list[Finding]:
    """Return the static anti-cheat findings for a candidate's source, in line order.

    Never raises on odd input: a source that does not parse (the loader reports it) or is
    over MAX_SOURCE_BYTES (the caller checks sizes) gives no finding.
    """
    if len(source.encode("utf-8", errors="replace")) > MAX_SOURCE_BYTES:
        return []
    try:
        tree = ast.parse(source, filename=filename)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return []
    refs = frozenset([reference_names] if isinstance(reference_names, str) else reference_names)
    sink = _Sink(re.split(r"\r\n|\r|\n", source))
    mod = _build_module(tree, refs)
    _FileScan(mod, sink).run()
    if mod.model is not None:
        _Scope(mod, mod.model, sink).run()
    return sink.findings()


def summarize(findings: Sequence[Finding]) -> str:
    """One line per finding: ``line N: message``."""
    return "\n".join(f"line {finding.line}: {finding.message}" for finding in findings)


# ---------------------------------------------------------------------------------------
# Small helpers on names and nodes
# ---------------------------------------------------------------------------------------

FuncDef = ast.FunctionDef | ast.AsyncFunctionDef


def _rules_by_prefix() -> dict[str, _Rule]:
    table: dict[str, _Rule] = {}
    for rule in FILE_RULES:
        for prefix in rule.prefixes:
            table.setdefault(prefix, rule)  # the first rule listing a prefix wins
    return table


_RULE_BY_PREFIX = _rules_by_prefix()
_RULE_DEPTH = max(prefix.count(".") + 1 for prefix in _RULE_BY_PREFIX)


def _selects_interpreter(call: ast.Call) -> bool:
    """`os.environ.setdefault("TRITON_INTERPRET", "1")`: a kernel file runnable without a GPU."""
    values = [arg.value if isinstance(arg, ast.Constant) else None for arg in call.args]
    return values == ["TRITON_INTERPRET", "1"] and not call.keywords


def _file_rule(name: str) -> _Rule | None:
    """The rule whose prefix is `name` or one of its parents (`a`, `a.b`, ... of `a.b.c`)."""
    parts = name.split(".", _RULE_DEPTH)
    prefixes = (".".join(parts[:count]) for count in range(1, min(len(parts), _RULE_DEPTH) + 1))
    return next((_RULE_BY_PREFIX[p] for p in prefixes if p in _RULE_BY_PREFIX), None)


def _is_compute_method(name: str) -> bool:
    if name in TENSOR_ALLOWED_METHODS:
        return False
    in_place = name[:-1] if name.endswith("_") and not name.endswith("__") else ""
    return name in TENSOR_COMPUTE_METHODS or in_place in TENSOR_COMPUTE_METHODS


def _method_verdict(name: str) -> Verdict | None:
    if name in TENSOR_HOST_METHODS:
        return TORCH_OP, HOST_REASON
    return (TORCH_OP, TENSOR_REASON) if _is_compute_method(name) else None


def _torch_allowed(name: str) -> bool:
    parts = name.split(".")
    head = parts[1] if len(parts) > 1 else ""
    tail = parts[2] if len(parts) > 2 else ""
    return (
        len(parts) == 1
        or (len(parts) == 2 and head in TORCH_ALLOWED)
        or name in TORCH_ALLOWED_QUALIFIED
        or head in TORCH_DTYPES
        or head in ("version", "__version__", "backends")
        or (head in ("cuda", "npu") and (not tail or tail in DEVICE_QUERIES))
        or (head == "nn" and len(parts) == 3 and tail in TORCH_NN_ALLOWED)
        or (head == "Tensor" and not (tail and _is_compute_method(tail)))
        or parts[-1].endswith(("Error", "Warning", "Exception"))
    )


def _is_torch_module_class(name: str) -> bool:
    """torch.nn.Linear, torch.nn.modules.linear.Linear: a module class that computes."""
    parts = name.split(".")
    return (len(parts) >= 3 and parts[:2] == ["torch", "nn"] and parts[-1][:1].isupper()
            and parts[-1] not in TORCH_NN_ALLOWED)


def _torch_verdict(name: str) -> Verdict | None:
    if _torch_allowed(name):
        return None
    if _is_torch_module_class(name):
        return TORCH_OP, NN_MODULE_REASON
    return TORCH_OP, TENSOR_REASON if name.startswith("torch.Tensor.") else TORCH_REASON


def _names_reference(name: str, refs: frozenset[str]) -> bool:
    parts = name.split(".")
    return parts[-1] in refs or any("reference" in part.lower() for part in parts[:-1])


def _check_reference(name: str, call: bool, refs: frozenset[str]) -> Verdict | None:
    return (REFERENCE, REFERENCE_REASON) if _names_reference(name, refs) else None


def _check_torch(name: str, call: bool, refs: frozenset[str]) -> Verdict | None:
    return _torch_verdict(name) if name.split(".", 1)[0] == "torch" else None


def _check_npu(name: str, call: bool, refs: frozenset[str]) -> Verdict | None:
    parts = name.split(".")
    if parts[0] != "torch_npu" or not call:
        return None
    query = len(parts) > 2 and parts[1] == "npu" and parts[2] in DEVICE_QUERIES
    return None if query else (TORCH_OP, NPU_REASON)


def _check_host(name: str, call: bool, refs: frozenset[str]) -> Verdict | None:
    host = call and name.split(".", 1)[0] in HOST_COMPUTE_MODULES
    return (TORCH_OP, HOST_REASON) if host else None


def _check_builtin(name: str, call: bool, refs: frozenset[str]) -> Verdict | None:
    if name in ("operator.matmul", "operator.imatmul", "operator.__matmul__"):
        return TORCH_OP, MATMUL_REASON
    return (REFERENCE, GLOBALS_REASON) if name == "builtins.globals" else None


_SCOPE_CHECKS: tuple[Callable[[str, bool, frozenset[str]], Verdict | None], ...] = (
    _check_reference, _check_torch, _check_npu, _check_host, _check_builtin,
)


def _scope_verdict(name: str, call: bool, refs: frozenset[str]) -> Verdict | None:
    """What using a resolved name on the forward path means (file rules are reported apart)."""
    if _file_rule(name) is not None:
        return None
    return next((v for v in (f(name, call, refs) for f in _SCOPE_CHECKS) if v), None)


def _kernel_verdict(name: str) -> Verdict | None:
    root = name.split(".", 1)[0]
    torch_op = root == "torch" and not _torch_allowed(name)
    return (TORCH_OP, KERNEL_TORCH_REASON) if torch_op or root in HOST_COMPUTE_MODULES else None


def _shown(node: ast.AST, name: str | None = None) -> str:
    """How the source spells a node (shortened), with its resolved name when different."""
    try:
        text = ast.unparse(node)
    except (RecursionError, ValueError, AttributeError):
        text = name or "an expression"
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{text} ({name})" if name and name != text else text


def _is_self(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _self_attr(node: ast.AST) -> str | None:
    """`self.x` -> "x"."""
    return node.attr if isinstance(node, ast.Attribute) and _is_self(node.value) else None


def _is_super_call(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "super")


def _const_str(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _root_name(node: ast.AST) -> ast.Name | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node if isinstance(node, ast.Name) else None


def _is_main_guard(node: ast.AST) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    sides = [node.test.left, *node.test.comparators]
    names = {side.id for side in sides if isinstance(side, ast.Name)}
    consts = {side.value for side in sides if isinstance(side, ast.Constant)}
    return names == {"__name__"} and consts == {"__main__"}


def _flat_targets(targets: Iterable[ast.expr]) -> Iterator[ast.expr]:
    stack = list(targets)
    while stack:
        target = stack.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            stack.extend(target.elts)
        elif isinstance(target, ast.Starred):
            stack.append(target.value)
        else:
            yield target


def _targets_of(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, (ast.Assign, ast.Delete)):
        return list(node.targets)
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return [node.target]
    return []


def _top_level(tree: ast.Module) -> Iterator[ast.stmt]:
    """Module statements in order, including those in top-level if/try/with blocks."""
    stack: list[ast.stmt] = list(reversed(tree.body))
    while stack:
        stmt = stack.pop()
        yield stmt
        if _is_main_guard(stmt):
            continue
        blocks: list[list[ast.stmt]] = []
        if isinstance(stmt, (ast.If, ast.With)):
            blocks = [stmt.body, stmt.orelse] if isinstance(stmt, ast.If) else [stmt.body]
        elif isinstance(stmt, ast.Try):
            blocks = [stmt.body, *(h.body for h in stmt.handlers), stmt.orelse, stmt.finalbody]
        for block in reversed(blocks):
            stack.extend(reversed(block))


# ---------------------------------------------------------------------------------------
# The module: aliases, definitions, kernels; resolved once
# ---------------------------------------------------------------------------------------

# What calling an object stored under a name runs: ("torch" | "reference" | "class", name).
Held = tuple[str, str]


@dataclass
class _Module:
    tree: ast.Module
    refs: frozenset[str]
    imports: dict[str, str] = field(default_factory=dict)  # local name -> qualified name
    star: list[str] = field(default_factory=list)  # modules imported with `*`
    functions: dict[str, FuncDef] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    kernels: set[int] = field(default_factory=set)  # id() of @triton.jit functions
    bound: set[str] = field(default_factory=set)  # names bound to modules or their members
    instances: dict[str, Held] = field(default_factory=dict)  # module-level objects
    swallowers: set[int] = field(default_factory=set)  # id() of statements that catch errors
    model: ast.ClassDef | None = None
    nodes: list[ast.AST] = field(default_factory=list)  # every node, parents first
    parents: dict[int, ast.AST] = field(default_factory=dict)  # id(node) -> its parent

    def resolve(self, node: ast.AST) -> str | None:
        """`F.relu` -> "torch.nn.functional.relu"; None for what no import binds."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        base = self._resolve_name(node.id)
        if base is None:
            return None
        parts.append(base)
        return ".".join(reversed(parts))

    def _resolve_name(self, name: str) -> str | None:
        if name in self.imports:
            return self.imports[name]
        if name in self.functions or name in self.classes or name in self.instances:
            return None
        if name in BUILTIN_NAMES:
            return f"builtins.{name}"
        star = next((m for m in self.star if m.startswith("torch")), None)
        return f"{star}.{name}" if star and name in STAR_COMPUTE_NAMES else None

    def is_reference(self, node: ast.AST) -> bool:
        """`Model`, `ref.Model`, `load().Model`: an expression naming the reference."""
        if isinstance(node, ast.Name) and node.id in self.refs:
            return True
        if isinstance(node, ast.Attribute) and node.attr in self.refs:
            return True
        name = self.resolve(node)
        return name is not None and _names_reference(name, self.refs)

    def held(self, value: ast.AST) -> Held | None:
        """What an object built by `value` (e.g. `nn.Linear(...)`, `Model()`) runs."""
        if self.is_reference(value):
            return "reference", _shown(value)
        if not isinstance(value, ast.Call):
            return None
        name = self.resolve(value.func)
        if self.is_reference(value.func):
            return "reference", _shown(value.func)
        if name is not None and _is_torch_module_class(name):
            return "torch", name
        func = value.func
        if isinstance(func, ast.Name) and func.id in self.classes:
            return "class", func.id
        return None


def _build_module(tree: ast.Module, refs: frozenset[str]) -> _Module:
    mod = _Module(tree, refs)
    nodes, parents = mod.nodes, mod.parents
    nodes.append(tree)
    for node in nodes:  # breadth first, like ast.walk, noting each node's parent
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
            nodes.append(child)
    _collect_imports(mod, nodes)
    _collect_top_level(mod)
    _collect_bound(mod, nodes)
    _collect_kernels(mod, nodes)
    _collect_swallowers(mod, nodes, parents)
    mod.model = _find_model(mod)
    return mod


def _collect_imports(mod: _Module, nodes: list[ast.AST]) -> None:
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".", 1)[0]
                mod.imports[alias.asname or root] = alias.name if alias.asname else root
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            for alias in node.names:
                if alias.name == "*":
                    mod.star.append(base)
                    continue
                name = f"{base}.{alias.name}" if base else alias.name
                mod.imports[alias.asname or alias.name] = name


def _collect_top_level(mod: _Module) -> None:
    for stmt in _top_level(mod.tree):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            mod.functions[stmt.name] = stmt
        elif isinstance(stmt, ast.ClassDef):
            mod.classes[stmt.name] = stmt
        elif (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
              and isinstance(stmt.targets[0], ast.Name)):
            _collect_assignment(mod, stmt.targets[0].id, stmt.value)


def _collect_assignment(mod: _Module, name: str, value: ast.expr) -> None:
    """`F = torch.nn.functional` is an alias; `_fc = nn.Linear(4, 4)` an object to watch."""
    alias = mod.resolve(value) if isinstance(value, (ast.Name, ast.Attribute)) else None
    held = mod.held(value)
    if alias is not None:
        mod.imports[name] = alias
    elif held is not None:
        mod.instances[name] = held


def _collect_bound(mod: _Module, nodes: list[ast.AST]) -> None:
    mod.bound.update(mod.imports)
    for node in nodes:
        if isinstance(node, ast.Assign) and mod.resolve(node.value) is not None:
            mod.bound.update(t.id for t in _flat_targets(node.targets) if isinstance(t, ast.Name))


def _collect_kernels(mod: _Module, nodes: list[ast.AST]) -> None:
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                _is_kernel_decorator(mod, dec) for dec in node.decorator_list):
            mod.kernels.add(id(node))


def _is_kernel_decorator(mod: _Module, decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = mod.resolve(target) or ""
    return name.split(".", 1)[0] == "triton" and name.rsplit(".", 1)[-1] in KERNEL_DECORATORS


def _collect_swallowers(mod: _Module, nodes: list[ast.AST], parents: dict[int, ast.AST]) -> None:
    """Mark each statement that contains a handler the code runs on after (in its function)."""
    for node in nodes:
        start: ast.AST | None = None
        if isinstance(node, ast.ExceptHandler) and _falls_through(node.body):
            start = parents.get(id(node))
        elif isinstance(node, (ast.With, ast.AsyncWith)) and any(
                mod.resolve(_call_func(item.context_expr)) == "contextlib.suppress"
                for item in node.items):
            start = node
        while start is not None and not isinstance(
                start, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef,
                        ast.Module)) and id(start) not in mod.swallowers:
            mod.swallowers.add(id(start))
            start = parents.get(id(start))


def _call_func(node: ast.AST) -> ast.AST:
    return node.func if isinstance(node, ast.Call) else node


def _falls_through(body: list[ast.stmt]) -> bool:
    return not body or not isinstance(body[-1], (ast.Raise, ast.Return))


def _find_model(mod: _Module) -> ast.ClassDef | None:
    model = mod.classes.get(MODEL_CLASS)
    for stmt in _top_level(mod.tree):
        if (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name)
                and any(isinstance(t, ast.Name) and t.id == MODEL_CLASS for t in stmt.targets)):
            model = mod.classes.get(stmt.value.id, model)
    return model


# ---------------------------------------------------------------------------------------
# Findings, deduplicated by (check, line)
# ---------------------------------------------------------------------------------------


class _Sink:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.found: dict[tuple[str, int], Finding] = {}

    def add(self, check: StaticCheck, node: ast.AST, message: str) -> None:
        line = int(getattr(node, "lineno", 0) or 0)
        if (check, line) in self.found:
            return
        text = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        self.found[(check, line)] = Finding(check, message, line, text)

    def findings(self) -> list[Finding]:
        order: dict[str, int] = {check: index for index, check in enumerate(STATIC_CHECKS)}
        return sorted(self.found.values(), key=lambda f: (f.line, order.get(f.check, 0)))


# ---------------------------------------------------------------------------------------
# Whole-file pass: loading code, streams and threads, tampering, torch inside kernels
# ---------------------------------------------------------------------------------------


class _FileScan:
    def __init__(self, mod: _Module, sink: _Sink) -> None:
        self.mod = mod
        self.sink = sink
        self.closed: set[int] = set()  # nodes whose children are not visited
        self.handlers: dict[type[ast.AST], Callable[[Any, str | None], bool]] = {
            ast.Import: self._on_import,
            ast.ImportFrom: self._on_import_from,
            ast.Name: self._on_chain,
            ast.Attribute: self._on_chain,
            ast.Call: self._on_call,
            ast.Assign: self._on_targets,
            ast.AugAssign: self._on_targets,
            ast.AnnAssign: self._on_targets,
            ast.Delete: self._on_targets,
            ast.FunctionDef: self._on_def,
            ast.AsyncFunctionDef: self._on_def,
        }

    def run(self) -> None:
        """Visit every node once, parents first, skipping what a parent's handler closed."""
        kernel_of: dict[int, str] = {}
        for node in self.mod.nodes:
            parent = self.mod.parents.get(id(node))
            if id(node) in self.closed or (parent is not None and id(parent) in self.closed):
                self.closed.add(id(node))
                continue
            kernel = kernel_of.get(id(parent)) if parent is not None else None
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                    id(node) in self.mod.kernels):
                kernel = node.name
            if kernel is not None:
                kernel_of[id(node)] = kernel
            handler = self.handlers.get(type(node))
            if _is_main_guard(node) or (handler is not None and handler(node, kernel)):
                self.closed.add(id(node))

    def _module_used(self, name: str, node: ast.AST) -> None:
        # torch members (torch.cuda.Event, torch.compile) are flagged where used, not here
        rule = None if name.startswith("torch.") else _file_rule(name)
        if rule is not None:
            self.sink.add(rule.check, node, f"imports {name}: {rule.reason}")
        parts = name.split(".")
        if (name == "__main__" or parts[-1] in self.mod.refs
                or any("reference" in part.lower() for part in parts)):
            self.sink.add(REFERENCE, node, f"imports {name}: {REFERENCE_REASON}")

    def _on_import(self, node: ast.Import, kernel: str | None) -> bool:
        for alias in node.names:
            self._module_used(alias.name, node)
        return True

    def _on_import_from(self, node: ast.ImportFrom, kernel: str | None) -> bool:
        base = node.module or ""
        if base:
            self._module_used(base, node)
        for alias in node.names:
            self._module_used(f"{base}.{alias.name}" if base else alias.name, node)
        return True

    def _on_chain(self, node: ast.Name | ast.Attribute, kernel: str | None) -> bool:
        if not isinstance(node.ctx, ast.Load):
            return False
        name = self.mod.resolve(node)
        if name is None:
            self._on_unresolved(node)
            return False
        rule = _file_rule(name)
        verdict = (rule.check, rule.reason) if rule else None
        if verdict is None and kernel is not None:
            verdict = _kernel_verdict(name)
        if verdict is not None:
            where = f"kernel {kernel} uses" if kernel else "uses"
            self.sink.add(verdict[0], node, f"{where} {_shown(node, name)}: {verdict[1]}")
        return True

    def _on_unresolved(self, node: ast.Name | ast.Attribute) -> None:
        attr = node.attr if isinstance(node, ast.Attribute) else node.id
        verdict = DUNDER_RULES.get(attr)
        if verdict is not None:
            self.sink.add(verdict[0], node, f"uses {attr}: {verdict[1]}")

    def _on_call(self, node: ast.Call, kernel: str | None) -> bool:
        func = node.func
        name = self.mod.resolve(func)
        if name == "os.environ.setdefault" and _selects_interpreter(node):
            return True  # choosing Triton's CPU interpreter when none is chosen is benign
        verdict = METHOD_RULES.get(func.attr) if isinstance(func, ast.Attribute) else None
        if name is None and verdict is not None:
            self.sink.add(verdict[0], node, f"calls {_shown(func)}(): {verdict[1]}")
        if name in SETATTR_NAMES and node.args:
            self._patched(node.args[0], node)
        return False

    def _on_targets(self, node: ast.stmt, kernel: str | None) -> bool:
        """Assignments: report patches, then scan everything but the patched targets."""
        value = getattr(node, "value", None)
        patched: set[int] = set()
        for target in _flat_targets(_targets_of(node)):
            if isinstance(target, ast.Attribute) and self._patched(target, target):
                patched.add(id(target))
            elif isinstance(target, ast.Subscript):
                self._namespace_write(target)
            elif (isinstance(target, ast.Name) and target.id == MODEL_CLASS
                  and value is not None and self.mod.is_reference(value)):
                self.sink.add(REFERENCE, node, f"makes ModelNew the reference: {REFERENCE_REASON}")
        self.closed.update(patched)
        return False

    def _patched(self, target: ast.expr, node: ast.AST) -> bool:
        """An attribute of a module, the reference or ModelNew assigned from outside."""
        root = _root_name(target)
        shown = _shown(target, self.mod.resolve(target))
        if root is None:
            return False
        if root.id in self.mod.bound:
            self.sink.add(TAMPER, node, f"patches {shown}: {PATCH_REASON}")
        elif root.id in self.mod.refs:
            self.sink.add(TAMPER, node, f"patches the reference ({shown}): {PATCH_REASON}")
        elif self.mod.model is not None and root.id == self.mod.model.name:
            self.sink.add(TAMPER, node, f"rebinds {shown} outside the class body: it can "
                                        "replace the forward the checks read")
        else:
            return False
        return True

    def _namespace_write(self, target: ast.Subscript) -> None:
        value = target.value
        name = self.mod.resolve(value)
        if name == "os.environ":
            self.sink.add(TAMPER, target, f"writes {_shown(target)}: {ENV_REASON}")
        elif (isinstance(value, ast.Attribute) and value.attr == "__dict__") or (
                isinstance(value, ast.Call)
                and self.mod.resolve(value.func) in ("builtins.globals", "builtins.vars")):
            self.sink.add(TAMPER, target, f"writes {_shown(target)}: {NAMESPACE_REASON}")

    def _on_def(self, node: FuncDef, kernel: str | None) -> bool:
        if node.name in ("__torch_function__", "__torch_dispatch__"):
            self.sink.add(TAMPER, node, f"defines {node.name}: {DISPATCH_REASON}")
        return False


# ---------------------------------------------------------------------------------------
# Forward-path pass: what ModelNew's forward computes with
# ---------------------------------------------------------------------------------------


@dataclass
class _Unit:
    """A body to scan: a function, a method, or a class body."""

    key: int
    decorators: list[ast.expr]
    body: list[ast.stmt]
    owner: ast.ClassDef | None
    where: str  # how messages name it: "forward", "_launch() (reached from forward)", ...


Work = tuple[ast.AST, bool]  # a node to visit, and whether it runs after a caught error


class _Scope:
    def __init__(self, mod: _Module, model: ast.ClassDef, sink: _Sink) -> None:
        self.mod = mod
        self.model = model
        self.sink = sink
        self.queue: list[_Unit] = []
        self.seen: set[int] = set()
        self.edges: dict[int, set[int]] = {}
        self.dirty: set[int] = set()  # units that compute with PyTorch or the reference
        self.fallback_calls: list[tuple[int, ast.AST, str, str]] = []
        self.unit = _Unit(id(model), [], [], model, "the body of class ModelNew")
        self.stack: list[Work] = []
        self.mro_cache: dict[int, list[ast.ClassDef]] = {}
        self.attrs_cache: dict[int, dict[str, Held]] = {}
        self.handlers: dict[type[ast.AST], Callable[[Any, bool], bool]] = {
            ast.Call: self._on_call,
            ast.Attribute: self._on_attribute,
            ast.Name: self._on_name,
            ast.BinOp: self._on_matmul,
            ast.AugAssign: self._on_matmul,
            ast.ExceptHandler: self._on_handler,
            ast.FunctionDef: self._on_def,
            ast.AsyncFunctionDef: self._on_def,
        }

    # -- driving ------------------------------------------------------------------------

    def run(self) -> None:
        self._roots()
        while self.queue:
            self._walk(self.queue.pop())
        self._report_fallback_calls()

    def _roots(self) -> None:
        for name in ROOT_METHODS:
            found = self._lookup(self.model, name)
            if found is not None and found[1] is not None and found[0].name not in self.mod.refs:
                self._add_unit(found[1], found[0], root=True)
        forward = self._lookup(self.model, "forward")
        if forward is None or forward[0].name in self.mod.refs:
            self._inherited_forward()
        for cls in self._mro(self.model):
            if cls.name not in self.mod.refs:
                body = [s for s in cls.body if not isinstance(s, (ast.FunctionDef,
                                                                   ast.AsyncFunctionDef))]
                self.queue.append(_Unit(id(cls), [], body, cls, f"the body of class {cls.name}"))

    def _inherited_forward(self) -> None:
        torch_base = self._torch_base(self.model)
        if self._reference_derived(self.model):
            self.sink.add(REFERENCE, self.model, "ModelNew defines no forward of its own, so it "
                                                 f"runs the reference's: {INHERIT_REASON}")
        elif torch_base is not None:
            self.sink.add(TORCH_OP, self.model, "ModelNew defines no forward of its own, so it "
                                                f"runs {torch_base}.forward: {NN_MODULE_REASON}")

    def _add_unit(self, fn: FuncDef, owner: ast.ClassDef | None, root: bool = False) -> None:
        if id(fn) in self.seen:
            return
        self.seen.add(id(fn))
        if owner is self.model and fn.name == "forward":
            where = "forward"
        else:
            label = f"{owner.name}.{fn.name}" if owner is not None else f"{fn.name}()"
            where = label if root else f"{label} (reached from forward)"
        self.queue.append(_Unit(id(fn), list(fn.decorator_list), fn.body, owner, where))

    def _enqueue(self, fn: FuncDef, owner: ast.ClassDef | None, fb: bool, site: ast.AST) -> None:
        self.edges.setdefault(self.unit.key, set()).add(id(fn))
        if fb:
            self.fallback_calls.append((id(fn), site, self.unit.where, _shown(site)))
        self._add_unit(fn, owner)

    def _walk(self, unit: _Unit) -> None:
        self.unit = unit
        self.stack = [(decorator, False) for decorator in unit.decorators]
        self.stack.extend(self._block(unit.body, False))
        while self.stack:
            node, fb = self.stack.pop()
            handler = self.handlers.get(type(node))
            if handler is None or not handler(node, fb):
                self._push_children(node, fb)

    def _block(self, stmts: list[ast.stmt], fb: bool) -> list[Work]:
        """Statements of a block; those after one that swallowed an error are fallbacks."""
        work: list[Work] = []
        for stmt in stmts:
            work.append((stmt, fb))
            fb = fb or id(stmt) in self.mod.swallowers
        return work

    def _push_children(self, node: ast.AST, fb: bool) -> None:
        for _, value in ast.iter_fields(node):
            if isinstance(value, ast.AST):
                self.stack.append((value, fb))
            elif isinstance(value, list):
                stmts = [item for item in value if isinstance(item, ast.stmt)]
                self.stack.extend(self._block(stmts, fb))
                self.stack.extend((item, fb) for item in value
                                  if isinstance(item, ast.AST) and not isinstance(item, ast.stmt))

    # -- reporting ----------------------------------------------------------------------

    def _report(self, check: StaticCheck, node: ast.AST, what: str, reason: str,
                fb: bool) -> None:
        if check in (TORCH_OP, REFERENCE):
            self.dirty.add(self.unit.key)
        if fb and check in (TORCH_OP, REFERENCE):
            self.sink.add(FALLBACK, node, f"{self.unit.where} {what} after catching an error: "
                                          f"{FALLBACK_REASON}")
        else:
            self.sink.add(check, node, f"{self.unit.where} {what}: {reason}")

    def _report_fallback_calls(self) -> None:
        changed = True
        while changed:
            changed = False
            for caller, callees in self.edges.items():
                if caller not in self.dirty and callees & self.dirty:
                    self.dirty.add(caller)
                    changed = True
        for key, site, where, shown in self.fallback_calls:
            if key in self.dirty:
                self.sink.add(FALLBACK, site, f"{where} falls back to {shown} after catching an "
                                              "error, and it computes with PyTorch or the "
                                              f"reference: {FALLBACK_REASON}")

    # -- node handlers (True: children handled) -----------------------------------------

    def _on_call(self, node: ast.Call, fb: bool) -> bool:
        func = node.func
        name = self.mod.resolve(func)
        if name is not None:
            self._qualified(name, func, fb, call=True)
            if name == "builtins.getattr":
                self._getattr(node, fb)
        elif isinstance(func, ast.Attribute):
            self._method(func, fb)
        elif isinstance(func, ast.Name):
            self._plain_name(func, fb, call=True)
        else:
            self._other_callee(func, fb)
        self.stack.extend((arg, fb) for arg in node.args)
        self.stack.extend((keyword.value, fb) for keyword in node.keywords)
        return True

    def _on_attribute(self, node: ast.Attribute, fb: bool) -> bool:
        name = self.mod.resolve(node)
        if name is not None:
            self._qualified(name, node, fb, call=False)
            return True
        if _is_self(node.value):  # a bound method passed along, e.g. as a callback
            found = self._lookup(self._owner(), node.attr)
            if found is not None and found[1] is not None and found[0].name not in self.mod.refs:
                self._enqueue(found[1], found[0], fb, node)
        return False

    def _on_name(self, node: ast.Name, fb: bool) -> bool:
        if isinstance(node.ctx, ast.Load):
            name = self.mod.resolve(node)
            if name is not None:
                self._qualified(name, node, fb, call=False)
            else:
                self._plain_name(node, fb, call=False)
        return True

    def _on_matmul(self, node: ast.BinOp | ast.AugAssign, fb: bool) -> bool:
        if isinstance(node.op, ast.MatMult):
            self._report(TORCH_OP, node, "multiplies with `@`", MATMUL_REASON, fb)
        return False

    def _on_handler(self, node: ast.ExceptHandler, fb: bool) -> bool:
        if node.type is not None:
            self.stack.append((node.type, fb))
        self.stack.extend(self._block(node.body, True))
        return True

    def _on_def(self, node: FuncDef, fb: bool) -> bool:
        return id(node) in self.mod.kernels  # a nested kernel: its body is kernel code

    # -- what a name or a call means ----------------------------------------------------

    def _qualified(self, name: str, node: ast.AST, fb: bool, call: bool) -> None:
        verdict = _scope_verdict(name, call, self.mod.refs)
        if verdict is not None:
            verb = "calls" if call else "uses"
            self._report(verdict[0], node, f"{verb} {_shown(node, name)}", verdict[1], fb)

    def _plain_name(self, node: ast.Name, fb: bool, call: bool) -> None:
        ident = node.id
        held = self.mod.instances.get(ident)
        function = self.mod.functions.get(ident)
        if ident in self.mod.refs:
            verb = "calls" if call else "uses"
            self._report(REFERENCE, node, f"{verb} the reference {ident}", REFERENCE_REASON, fb)
        elif function is not None:
            if id(function) not in self.mod.kernels:
                self._enqueue(function, None, fb, node)
        elif ident in self.mod.classes:
            if ident != self.model.name:
                self._expand(self.mod.classes[ident], fb, node, with_init=True)
        elif held is not None:
            self._run_held(held, ident, node, fb)

    def _method(self, func: ast.Attribute, fb: bool) -> None:
        value, attr = func.value, func.attr
        if _is_super_call(value):
            self._super(attr, func, fb)
            return
        held_attr = _self_attr(value)
        if _is_self(value):
            self._self_call(attr, func, fb)
        elif held_attr is not None and (attr in FORWARD_NAMES or self._held_kind(held_attr)
                                        == "class"):
            self._held_call(held_attr, func, fb)
        elif not (isinstance(value, ast.Name) and (
                value.id in self.mod.classes or value.id in self.mod.functions)):
            verdict = _method_verdict(attr)
            if verdict is not None:
                self._report(verdict[0], func, f"calls {_shown(func)}()", verdict[1], fb)
        self.stack.append((value, fb))

    def _other_callee(self, func: ast.expr, fb: bool) -> None:
        """`kernel[grid](...)` is a launch; `self.layers[0](x)` runs a held module."""
        if isinstance(func, ast.Subscript):
            held_attr = _self_attr(func.value)
            if held_attr is not None:
                self._held_call(held_attr, func, fb)
        self.stack.append((func, fb))

    def _self_call(self, attr: str, node: ast.AST, fb: bool) -> None:
        found = self._lookup(self._owner(), attr)
        if found is None:
            self._held_call(attr, node, fb)
        elif found[0].name in self.mod.refs and attr in FORWARD_NAMES:
            self._report(REFERENCE, node, f"calls {found[0].name}.{attr} through self",
                         REFERENCE_REASON, fb)
        elif found[1] is not None:
            self._enqueue(found[1], found[0], fb, node)

    def _super(self, attr: str, node: ast.AST, fb: bool) -> None:
        owner = self._owner()
        found = self._lookup_in(self._mro(owner)[1:], attr)
        in_reference = found is not None and found[0].name in self.mod.refs
        torch_base = self._torch_base(owner) if found is None else None
        if attr in FORWARD_NAMES and (in_reference or (
                found is None and self._reference_derived(owner))):
            self._report(REFERENCE, node, f"calls super().{attr}, the reference's",
                         REFERENCE_REASON, fb)
        elif attr in FORWARD_NAMES and torch_base is not None:
            self._report(TORCH_OP, node, f"calls super().{attr}, {torch_base}'s",
                         NN_MODULE_REASON, fb)
        elif found is not None and found[1] is not None:
            self._enqueue(found[1], found[0], fb, node)

    def _held_kind(self, attr: str) -> str | None:
        held = self._attrs(self._owner()).get(attr)
        return held[0] if held is not None else None

    def _held_call(self, attr: str, node: ast.AST, fb: bool) -> None:
        held = self._attrs(self._owner()).get(attr)
        if held is not None:
            self._run_held(held, f"self.{attr}", node, fb)

    def _run_held(self, held: Held, shown: str, node: ast.AST, fb: bool) -> None:
        kind, name = held
        if kind == "class" and name in self.mod.classes:
            self._expand(self.mod.classes[name], fb, node, with_init=False)
        elif kind == "torch":
            self._report(TORCH_OP, node, f"calls {shown}, a {name}", NN_MODULE_REASON
                         + " (pass its .weight/.bias to a kernel instead)", fb)
        elif kind == "reference":
            self._report(REFERENCE, node, f"calls {shown}, an instance of the reference {name}",
                         REFERENCE_REASON, fb)

    def _getattr(self, node: ast.Call, fb: bool) -> None:
        """`getattr(torch, "softmax")`, `getattr(x, "sum")`, `getattr(self, "_launch")`."""
        if len(node.args) < 2:
            return
        obj, key = node.args[0], node.args[1]
        base = self.mod.resolve(obj)
        attr = key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None
        if base is not None and attr is not None:
            self._qualified(f"{base}.{attr}", node, fb, call=True)
        elif base is not None and base.split(".", 1)[0] in ("torch", "numpy"):
            self._report(TORCH_OP, node, f"calls {_shown(node)}", DYNAMIC_REASON, fb)
        elif attr is not None and _is_self(obj):
            self._self_call(attr, node, fb)
        elif attr is not None and _method_verdict(attr) is not None:
            self._report(TORCH_OP, node, f"calls {_shown(node)}", TENSOR_REASON, fb)

    def _expand(self, cls: ast.ClassDef, fb: bool, site: ast.AST, with_init: bool) -> None:
        """A helper class named on the forward path: its methods (and bases') run there."""
        skipped = SKIPPED_METHODS if with_init else SKIPPED_METHODS | {"__init__", "__new__"}
        for owner in self._mro(cls):
            if owner.name in self.mod.refs or owner is self.model:
                continue
            for stmt in owner.body:
                if (isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
                        and stmt.name not in skipped and id(stmt) not in self.mod.kernels):
                    self._enqueue(stmt, owner, fb, site)

    # -- classes ------------------------------------------------------------------------

    def _owner(self) -> ast.ClassDef:
        return self.unit.owner if self.unit.owner is not None else self.model

    def _mro(self, cls: ast.ClassDef) -> list[ast.ClassDef]:
        """cls, then its in-file bases depth first (a close enough linearisation)."""
        if id(cls) in self.mro_cache:
            return self.mro_cache[id(cls)]
        order: list[ast.ClassDef] = []
        seen: set[int] = set()
        stack = [cls]
        while stack:
            current = stack.pop()
            if id(current) in seen:
                continue
            seen.add(id(current))
            order.append(current)
            bases = [self.mod.classes[base.id] for base in current.bases
                     if isinstance(base, ast.Name) and base.id in self.mod.classes]
            stack.extend(reversed(bases))
        self.mro_cache[id(cls)] = order
        return order

    def _lookup(self, cls: ast.ClassDef, name: str) -> tuple[ast.ClassDef, FuncDef | None] | None:
        return self._lookup_in(self._mro(cls), name)

    @staticmethod
    def _lookup_in(classes: list[ast.ClassDef],
                   name: str) -> tuple[ast.ClassDef, FuncDef | None] | None:
        """The first class defining `name`, and its function (None for a class attribute)."""
        for cls in classes:
            for stmt in reversed(cls.body):
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
                    return cls, stmt
                targets = [t for t in _flat_targets(_targets_of(stmt)) if isinstance(t, ast.Name)]
                if any(target.id == name for target in targets):
                    return cls, None
        return None

    def _bases(self, cls: ast.ClassDef) -> Iterator[ast.expr]:
        for current in self._mro(cls):
            yield from current.bases

    def _reference_derived(self, cls: ast.ClassDef) -> bool:
        return (any(c.name in self.mod.refs for c in self._mro(cls))
                or any(self.mod.is_reference(base) for base in self._bases(cls)))

    def _torch_base(self, cls: ast.ClassDef) -> str | None:
        names = (self.mod.resolve(base) for base in self._bases(cls))
        return next((name for name in names if name and _is_torch_module_class(name)), None)

    def _attrs(self, cls: ast.ClassDef) -> dict[str, Held]:
        """What __init__ stores on self: `self.fc = nn.Linear(...)`, `self.ref = Model()`."""
        if id(cls) in self.attrs_cache:
            return self.attrs_cache[id(cls)]
        attrs: dict[str, Held] = {}
        for owner in reversed(self._mro(cls)):
            found = self._lookup_in([owner], "__init__")
            init = found[1] if found is not None else None
            for node in ast.walk(init) if init is not None else ():
                attrs.update(self._stored(node))
        self.attrs_cache[id(cls)] = attrs
        return attrs

    def _stored(self, node: ast.AST) -> Iterator[tuple[str, Held]]:
        for key, value in self._stores(node):
            held = self.mod.held(value)
            if held is not None:
                yield key, held

    def _stores(self, node: ast.AST) -> list[tuple[str, ast.expr]]:
        """`self.x = v`, `setattr(self, "x", v)`, `self.add_module("x", v)` -> [("x", v)]."""
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            value = node.value
            names = (_self_attr(target) for target in _flat_targets(_targets_of(node)))
            return [(name, value) for name in names if name is not None]
        if not isinstance(node, ast.Call) or len(node.args) < 2:
            return []
        func, args = node.func, node.args
        if self.mod.resolve(func) == "builtins.setattr" and len(args) == 3 and _is_self(args[0]):
            key, value = _const_str(args[1]), args[2]
        elif (isinstance(func, ast.Attribute) and _is_self(func.value)
              and func.attr in ("add_module", "register_module")):
            key, value = _const_str(args[0]), args[1]
        else:
            return []
        return [(key, value)] if key is not None else []
