"""Static (AST) anti-cheat check of a candidate's source.

A candidate defines ``class ModelNew(nn.Module)`` (KernelBench convention) whose forward
must compute the operator with kernels of the backend (``@triton.jit`` functions launched as
``kernel[grid](...)``), never with PyTorch, NumPy or the reference. This module reads the
source without running it and names what it finds with one of the static checks of
``runners.base.CheckName``:

- ``static_torch_op``: the forward path computes with PyTorch (``torch.*``, ``F.*``, tensor
  methods such as ``x.sum()``, the ``@`` operator, ``torch.nn`` modules, ``torch.compile``)
  or on the host (NumPy and other array libraries, imported or reached anywhere in the
  file, ``.tolist()``); a PyTorch compute function stored or passed as a value anywhere; a
  ``@triton.jit`` body calling anything but Triton, a few builtins or another kernel.
- ``static_reference_call``: the forward path runs the reference (``Model(...)``,
  ``super().forward``), or the file loads code at run time (an import of the reference,
  importlib, exec, eval).
- ``static_fallback``: an error is caught and PyTorch or the reference does the work instead.
- ``static_stream``: side streams, events, CUDA graphs, threads, processes, work at exit.
- ``static_tamper``: patching PyTorch, the timer or the harness; reaching into frames and
  tracebacks, other modules, namespaces (``__dict__``, ``vars()``, ``getattr`` with a module
  or a computed name), private PyTorch/Triton internals, the garbage collector or memory;
  signals; environment writes; files.
- ``static_structure``: ModelNew is not one plain top-level ``class ModelNew(nn.Module)``
  statement (built by a factory or an assignment, defined twice or conditionally, with a
  metaclass or decorators, rebound afterwards), or the source is too deeply nested or
  chained to check.

"The forward path" is ModelNew.forward (and ``__call__``, ``__getattr__``), the methods it
calls through ``self`` or ``super()``, the functions and classes of the file it names, the
values of the module-level names it reads, transitively; and, wherever they are, lambdas,
nested functions and the functions and classes the file passes around as values (they can
be called from anywhere). ``@triton.jit`` functions are kernel code: ``tl.*`` is fine there.
``__init__`` may use PyTorch freely, but calling a ``torch.nn`` module (or a reference
instance, or anything else) it stored is checked. The stream, tamper and structure checks and
the run-time loading checks cover the whole file except ``if __name__ == "__main__":`` blocks.

A static check cannot type a Python name: ``a + b`` on tensors is left to the run-time check;
the ``@`` operator and the listed tensor methods are flagged whatever they are called on.
The scan is linear in the size of the source and stops at a deadline (``timeout``).
Only the standard library is imported: this runs in the parent process, which starts fast.
"""

from __future__ import annotations

import ast
import re
import time
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
    "static_structure",
    "timeout",
]
TORCH_OP: StaticCheck = "static_torch_op"
REFERENCE: StaticCheck = "static_reference_call"
FALLBACK: StaticCheck = "static_fallback"
STREAM: StaticCheck = "static_stream"
TAMPER: StaticCheck = "static_tamper"
STRUCTURE: StaticCheck = "static_structure"
TIMEOUT: StaticCheck = "timeout"  # the scan itself ran past its deadline
STATIC_CHECKS: tuple[StaticCheck, ...] = (TORCH_OP, REFERENCE, FALLBACK, STREAM, TAMPER,
                                          STRUCTURE)

MAX_SOURCE_BYTES = 2_000_000  # larger sources are left to the caller's size check
MODEL_CLASS = "ModelNew"
MAX_CHAIN = 64  # names in one attribute chain (a.b.c...); longer ones are reported
MAX_MRO = 32  # in-file ancestors of one class; deeper hierarchies are reported
CLOCK_EVERY = 512  # nodes visited between two reads of the clock

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
    "globals", "vars", "exit", "quit", "object", "type", "hasattr", "locals", "dir",
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

# Array and math libraries: importing or reaching one anywhere computes on the host (or
# with another library's kernels). `math` is fine: scalar functions size launches.
HOST_LIBRARIES: frozenset[str] = HOST_COMPUTE_MODULES | frozenset({
    "cupyx", "jaxlib", "mlx", "dask", "pandas", "polars", "cunumeric", "numexpr", "sklearn",
    "array", "statistics", "mpmath", "sympy", "torch_xla", "pyarrow", "xarray", "paddle",
    "mindspore", "tinygrad", "theano", "cython", "Cython", "pythran", "taichi", "warp",
})
# The names those are usually imported as, when reached through another module
# (`triton.runtime.interpreter.np`).
HOST_ALIASES: frozenset[str] = frozenset({"np", "jnp", "cp", "onp", "npx"})
# math functions that reduce a whole iterable to a float (a tensor iterates element by
# element); math.prod stays allowed: it multiplies shapes.
HOST_MATH: frozenset[str] = frozenset({"math.fsum", "math.sumprod", "math.dist"})
# Builtins a @triton.jit body may call (besides triton.* and the file's other kernels).
KERNEL_BUILTINS: frozenset[str] = frozenset({
    "range", "min", "max", "len", "int", "float", "bool", "isinstance", "print", "abs",
    "tuple", "zip", "enumerate", "round", "divmod", "pow", "str", "type",
})
# Attribute names that reach frames, tracebacks, namespaces or internals, on any object.
FRAME_ATTRIBUTES: frozenset[str] = frozenset({
    "__traceback__", "tb_frame", "tb_next", "f_back", "f_locals", "f_globals", "f_builtins",
    "f_code", "f_trace", "gi_frame", "cr_frame", "ag_frame", "gi_code", "cr_code", "ag_code",
    "gi_yieldfrom", "cr_await", "ag_await", "cr_origin",
})
# Builtins that look names up by a string or hand out a namespace.
REFLECTION_BUILTINS: frozenset[str] = frozenset({
    "builtins.getattr", "builtins.setattr", "builtins.delattr", "builtins.hasattr",
})
NAMESPACE_BUILTINS: frozenset[str] = frozenset({
    "builtins.vars", "builtins.globals", "builtins.locals",
})
# Modules a candidate commonly imports whole (besides what `import X` binds): passing one
# around as a value lets the code receiving it reach any of its functions unseen.
KNOWN_MODULES: frozenset[str] = frozenset({
    "torch", "torch.nn", "torch.nn.functional", "torch.cuda", "torch.npu", "torch.linalg",
    "torch.fft", "torch.special", "torch.ops", "torch.ops.aten", "torch.nn.init",
    "torch.testing", "torch.backends", "torch.library", "torch.utils", "torch.autograd",
    "triton", "triton.language", "triton.language.extra", "triton.language.math",
    "triton.runtime", "triton.testing", "torch_npu", "sys", "os", "builtins", "math",
})
# The bases ModelNew may have (the reference's Model too: it reuses its constructor).
MODULE_BASES: frozenset[str] = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})
# Names that make a module-level function the module's attribute hook (PEP 562).
MODULE_HOOKS: frozenset[str] = frozenset({"__getattr__", "__dir__"})

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
SENSE_REASON = ("reading the command line, the folder or the standard streams lets a kernel "
                "tell verification from use, or reach the judge's channel")
STORAGE_REASON = "raw storage and pickling hand the tensor's bytes to host code"
MATCH_REASON = "a match pattern looks attributes up where no name shows them"
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
DICT_REASON = (
    "__dict__, vars(), globals() and locals() read or rewrite a namespace by name: they can "
    "fetch or swap PyTorch's functions unseen"
)
INTERNALS_REASON = "reaching into function or class internals can reach the harness or patch it"
HIERARCHY_REASON = "walking the class hierarchy reaches the reference's forward"
REFLECT_REASON = (
    "looking attributes up by a string hides what is reached: a PyTorch function, the "
    "harness, a patch"
)
MODULE_VALUE_REASON = (
    "a module passed around as a value lets the code receiving it reach any of its "
    "functions unseen"
)
PRIVATE_REASON = (
    "private PyTorch/Triton internals can switch off dispatch, patch kernels or reach the "
    "harness"
)
TRITON_INTERNALS_REASON = (
    "Triton's runtime internals (interpreter, JIT, cache, compiler) decide what a kernel "
    "launch runs"
)
VALUE_REASON = (
    "stored or passed as a value, it can be called where the checks cannot see its name; "
    "the kernel must compute the operator"
)
KERNEL_CALL_REASON = (
    "a @triton.jit body may call only triton/tl, a few builtins and other @triton.jit "
    "functions: under the CPU interpreter anything else runs as Python, PyTorch included"
)
HOST_LIBRARY_REASON = (
    "array and math libraries compute on the host or with their own kernels; the kernel "
    "must compute the operator"
)
STRUCTURE_REASON = "ModelNew must be one plain top-level `class ModelNew(nn.Module):` statement"
REBIND_REASON = "the harness would run another forward than the one the checks read"
NESTING_REASON = "a source too deeply nested or chained cannot be checked"
TIMEOUT_MESSAGE = "the static scan ran past its deadline, so the candidate was not fully checked"


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
        "runpy", "imp", "zipimport", "torch.utils.cpp_extension", "pkgutil",
    ), EXEC_REASON),
    _Rule(TAMPER, ("sys.modules",), MODULES_REASON),
    _Rule(TAMPER, (
        "sys._getframe", "sys._current_frames", "inspect.currentframe", "inspect.stack",
        "inspect.trace", "inspect.getouterframes", "inspect.getinnerframes",
        "inspect.getframeinfo", "traceback.extract_stack", "traceback.walk_stack",
        "sys.exc_info", "sys.exception", "sys.last_traceback", "sys.last_exc", "sys.last_value",
        "sys.last_type", "sys._current_exceptions", "traceback.walk_tb", "traceback.extract_tb",
        "traceback.TracebackException", "traceback.StackSummary", "types.FrameType",
        "types.TracebackType",
    ), FRAMES_REASON),
    _Rule(TAMPER, (
        "inspect.getmembers", "inspect.getmembers_static", "inspect.getattr_static",
        "inspect.getmodule", "inspect.getclosurevars", "operator.attrgetter",
        "operator.methodcaller",
    ), REFLECT_REASON),
    _Rule(TAMPER, ("types.FunctionType", "types.CodeType", "types.LambdaType", "types.MethodType",
                   "types.ModuleType", "copyreg"), INTERNALS_REASON),
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
        # Descriptors: the worker's channel to the judge is one (its answers can be forged).
        "os.write", "os.dup", "os.dup2", "os.fstat", "os.pipe", "os.pipe2", "os.close",
        "os.closerange", "os.lseek", "os.set_blocking", "os.sendfile", "os.writev",
        "os.pwrite", "os.pread", "os.readv", "os.preadv", "os.pwritev", "os.truncate",
        "os.ftruncate", "os.stat", "os.lstat", "os.readlink", "os.symlink", "os.link",
        "os.mkfifo", "os.mknod", "os.unlink", "os.remove", "os.rename", "os.replace",
        "os.mkdir", "os.makedirs", "os.rmdir", "os.chmod", "os.chdir", "os.path", "pathlib",
        "io", "socket", "tempfile", "mmap", "fcntl",
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
    _Rule(TAMPER, ("os.getcwd", "sys.argv",
                   "sys.orig_argv", "sys.flags", "sys.stdout", "sys.stderr", "sys.__stdout__",
                   "sys.__stderr__", "sys.stdin"), SENSE_REASON),
    _Rule(TAMPER, (
        "torch.library.Library", "torch.library.impl", "torch.library.register_kernel",
        "torch.overrides", "torch.utils._python_dispatch", "torch._C",
    ), DISPATCH_REASON),
    _Rule(TAMPER, (
        "torch.nn.modules.module.register_module_forward_hook",
        "torch.nn.modules.module.register_module_forward_pre_hook",
        "torch.nn.modules.module.register_module_full_backward_hook",
    ), HOOK_REASON),
    _Rule(TAMPER, (
        "triton.runtime.interpreter", "triton.runtime.jit", "triton.runtime.cache",
        "triton.runtime.build", "triton.compiler", "triton._C", "triton.backends",
    ), TRITON_INTERNALS_REASON),
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
# Attribute names flagged on any object, anywhere (and as getattr()'s constant name).
ATTRIBUTE_RULES: dict[str, Verdict] = {
    **DUNDER_RULES,
    **{attribute: (TAMPER, FRAMES_REASON) for attribute in FRAME_ATTRIBUTES},
    "__dict__": (TAMPER, DICT_REASON),
    "__setattr__": (TAMPER, REFLECT_REASON),
    "__delattr__": (TAMPER, REFLECT_REASON),
    "__getattribute__": (TAMPER, REFLECT_REASON),
    "__loader__": (TAMPER, INTERNALS_REASON),
    "__spec__": (TAMPER, INTERNALS_REASON),
    "__reduce__": (TAMPER, STORAGE_REASON),
    "__reduce_ex__": (TAMPER, STORAGE_REASON),
    "__getstate__": (TAMPER, STORAGE_REASON),
    "untyped_storage": (TAMPER, STORAGE_REASON),
    "_typed_storage": (TAMPER, STORAGE_REASON),
    "storage": (TAMPER, STORAGE_REASON),
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


def _match_patterns(tree: ast.Module, sink: _Sink) -> None:
    """`case object(softmax=f)` reads an attribute no Attribute node names: flagged."""
    for node in ast.walk(tree):
        if isinstance(node, ast.MatchClass) and node.kwd_attrs:
            sink.add(TAMPER, node, f"matches attributes {', '.join(node.kwd_attrs)} in a "
                                   f"class pattern: {MATCH_REASON}")


def check_source(source: str, *, filename: str = "<candidate>",
                 reference_names: Collection[str] = ("Model",),
                 deadline: float | None = None) -> list[Finding]:
    """Return the static anti-cheat findings for a candidate's source, in line order.

    `deadline` is a `time.monotonic()` value: past it the scan stops and answers what it
    found with a "timeout" finding. Never raises on odd input: a source that does not parse
    (the loader reports it) or is over MAX_SOURCE_BYTES (the caller checks sizes) gives no
    finding; one nested too deeply to parse or check gives a static_structure finding.
    """
    clock = _Clock(deadline)
    if clock.expired():
        return [Finding(TIMEOUT, TIMEOUT_MESSAGE, 0, "")]
    if len(source.encode("utf-8", errors="replace")) > MAX_SOURCE_BYTES:
        return []
    sink = _Sink(re.split(r"\r\n|\r|\n", source))
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        if "too many nested" in str(exc.msg):
            sink.add_line(STRUCTURE, exc.lineno or 0, f"the source nests too deeply to parse "
                                                       f"({exc.msg}): {NESTING_REASON}")
        return sink.findings()
    except (RecursionError, MemoryError):
        sink.add_line(STRUCTURE, 0, f"the source nests too deeply to parse: {NESTING_REASON}")
        return sink.findings()
    except (ValueError, OverflowError):
        return []
    refs = frozenset([reference_names] if isinstance(reference_names, str) else reference_names)
    try:
        _match_patterns(tree, sink)
        mod = _build_module(tree, refs, clock)
        _FileScan(mod, sink, clock).run()
        if mod.model is not None:
            _Scope(mod, mod.model, sink, clock).run()
    except _DeadlinePassed:
        sink.add_line(TIMEOUT, 0, TIMEOUT_MESSAGE)
    except (RecursionError, MemoryError):
        sink.add_line(STRUCTURE, 0, f"the source nests too deeply to check: {NESTING_REASON}")
    return sink.findings()


def summarize(findings: Sequence[Finding]) -> str:
    """One line per finding: ``line N: message``."""
    return "\n".join(f"line {finding.line}: {finding.message}" for finding in findings)


class _DeadlinePassed(Exception):
    """The scan ran past its deadline."""


class _Clock:
    """Reads time.monotonic() once every CLOCK_EVERY ticks, and raises past the deadline."""

    def __init__(self, deadline: float | None) -> None:
        self.deadline = deadline
        self.ticks = 0

    def expired(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline

    def tick(self) -> None:
        if self.deadline is None:
            return
        self.ticks += 1
        if self.ticks >= CLOCK_EVERY:
            self.ticks = 0
            if time.monotonic() > self.deadline:
                raise _DeadlinePassed


# ---------------------------------------------------------------------------------------
# Small helpers on names and nodes
# ---------------------------------------------------------------------------------------

FuncDef = ast.FunctionDef | ast.AsyncFunctionDef
Scoped = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef


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


def _is_dunder(part: str) -> bool:
    return len(part) > 4 and part.startswith("__") and part.endswith("__")


def _name_verdict(name: str) -> Verdict | None:
    """File-wide verdict on a resolved name: the rules, then frames, internals, hosts."""
    rule = _file_rule(name)
    return (rule.check, rule.reason) if rule is not None else _extra_verdict(name)


def _extra_verdict(name: str) -> Verdict | None:
    """Frames, namespaces and internals reached by name; array libraries reached by name."""
    parts = name.split(".")
    attribute = next((ATTRIBUTE_RULES[p] for p in parts[1:] if p in ATTRIBUTE_RULES), None)
    if attribute is not None:
        return attribute
    if parts[0] == "inspect" and "frame" in parts[-1].lower():
        return TAMPER, FRAMES_REASON
    if parts[0] in ("torch", "triton", "torch_npu") and any(
            part.startswith("_") and not _is_dunder(part) for part in parts[1:]):
        return TAMPER, PRIVATE_REASON
    return (TORCH_OP, HOST_LIBRARY_REASON) if _reaches_host(name) else None


def _reaches_host(name: str) -> bool:
    """numpy.exp, math.fsum, triton.runtime.interpreter.np: an array library reached."""
    parts = name.split(".")
    return (parts[0] in HOST_LIBRARIES or name in HOST_MATH
            or any(p in HOST_LIBRARIES or p in HOST_ALIASES for p in parts[1:]))


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


def _value_verdict(name: str) -> Verdict | None:
    """A compute function of PyTorch (or the host) named as a value, not called."""
    root = name.split(".", 1)[0]
    if root == "torch":
        return _torch_verdict(name)
    if root in HOST_LIBRARIES:
        return TORCH_OP, HOST_LIBRARY_REASON
    if root == "torch_npu":
        return _check_npu(name, True, frozenset())
    return _check_builtin(name, True, frozenset()) if root == "operator" else None


def _kernel_verdict(name: str) -> Verdict | None:
    root = name.split(".", 1)[0]
    torch_op = root == "torch" and not _torch_allowed(name)
    return (TORCH_OP, KERNEL_TORCH_REASON) if torch_op or root in HOST_COMPUTE_MODULES else None


def _is_small(node: ast.AST, limit: int = 48) -> bool:
    """Whether `node` has at most `limit` nodes (counted without walking a large tree)."""
    stack, count = [node], 0
    while stack:
        count += 1
        if count > limit:
            return False
        stack.extend(ast.iter_child_nodes(stack.pop()))
    return True


def _brief(node: ast.AST, depth: int = 3) -> str:
    """How the source spells a node, eliding the inside of a large one (bounded work)."""
    if _is_small(node):
        try:
            return ast.unparse(node)
        except (RecursionError, ValueError, AttributeError):
            return "..."
    if depth == 0:
        return "..."
    if isinstance(node, ast.Call):
        return f"{_brief(node.func, depth - 1)}(...)"
    if isinstance(node, ast.Attribute):
        return f"{_brief(node.value, depth - 1)}.{node.attr}"
    if isinstance(node, ast.Subscript):
        return f"{_brief(node.value, depth - 1)}[...]"
    return "..."


def _shown(node: ast.AST, name: str | None = None) -> str:
    """How the source spells a node (shortened), with its resolved name when different."""
    text = _brief(node)
    text = text if len(text) <= 60 else text[:57] + "..."
    if name is not None and len(name) > 80:
        name = name[:77] + "..."
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
    """What a statement (or a loop, a with item, a comprehension, `:=`) binds."""
    if isinstance(node, (ast.Assign, ast.Delete)):
        return list(node.targets)
    if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor,
                         ast.comprehension, ast.NamedExpr)):
        return [node.target]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [item.optional_vars for item in node.items if item.optional_vars is not None]
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
    modules: set[str] = field(default_factory=set)  # qualified names bound by `import x`
    star: list[str] = field(default_factory=list)  # modules imported with `*`
    functions: dict[str, FuncDef] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    kernels: set[int] = field(default_factory=set)  # id() of @triton.jit functions
    kernel_names: set[str] = field(default_factory=set)  # their names, nested ones included
    bound: set[str] = field(default_factory=set)  # names bound to modules or their members
    instances: dict[str, Held] = field(default_factory=dict)  # module-level objects
    # module-level names (and names declared `global`) -> the values assigned to them
    global_values: dict[str, list[ast.expr]] = field(default_factory=dict)
    swallowers: set[int] = field(default_factory=set)  # id() of statements that catch errors
    model: ast.ClassDef | None = None
    nodes: list[ast.AST] = field(default_factory=list)  # every node, parents first
    parents: dict[int, ast.AST] = field(default_factory=dict)  # id(node) -> its parent
    resolved: dict[int, str | None] = field(default_factory=dict)  # resolve()'s memo
    too_long: set[int] = field(default_factory=set)  # chains over MAX_CHAIN names
    # filled by the file pass: code that can run wherever it is passed
    escaping: list[tuple[Scoped, ast.ClassDef | None]] = field(default_factory=list)

    def resolve(self, node: ast.AST) -> str | None:
        """`F.relu` -> "torch.nn.functional.relu"; None for what no import binds."""
        if not isinstance(node, ast.Attribute):
            return self._resolve_name(node.id) if isinstance(node, ast.Name) else None
        if id(node) in self.resolved:
            return self.resolved[id(node)]
        chain: list[ast.Attribute] = []
        current: ast.AST = node
        while isinstance(current, ast.Attribute) and id(current) not in self.resolved:
            chain.append(current)
            current = current.value
        if len(chain) > MAX_CHAIN:  # walked to the end once: every link is memoised below
            self.too_long.add(id(node))
            base = None
        elif isinstance(current, ast.Attribute):
            base = self.resolved[id(current)]
        else:
            base = self._resolve_name(current.id) if isinstance(current, ast.Name) else None
        for link in reversed(chain):
            base = None if base is None else f"{base}.{link.attr}"
            self.resolved[id(link)] = base
        return base

    def _resolve_name(self, name: str) -> str | None:
        if name in self.imports:
            return self.imports[name]
        if name in self.functions or name in self.classes or name in self.instances:
            return None
        if name in BUILTIN_NAMES:
            return f"builtins.{name}"
        star = next((m for m in self.star if m.startswith("torch")), None)
        return f"{star}.{name}" if star and name in STAR_COMPUTE_NAMES else None

    def is_module(self, name: str) -> bool:
        return name in self.modules or name in KNOWN_MODULES

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
        items: list[ast.AST] = []  # `[nn.ReLU(), Helper()]`: what its items run (one level)
        if isinstance(value, (ast.List, ast.Tuple, ast.Set)):
            items = list(value.elts)
        elif isinstance(value, ast.Dict):
            items = list(value.values)
        if items:
            return next((h for h in map(self._held_one, items) if h is not None), None)
        return self._held_one(value)

    def _held_one(self, value: ast.AST) -> Held | None:
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

    def enclosing_class(self, node: ast.AST) -> ast.ClassDef | None:
        """The class whose method (or body) holds `node`, if any."""
        current = self.parents.get(id(node))
        while current is not None and not isinstance(current, (ast.ClassDef, ast.Module)):
            current = self.parents.get(id(current))
        return current if isinstance(current, ast.ClassDef) else None


def _build_module(tree: ast.Module, refs: frozenset[str], clock: _Clock) -> _Module:
    mod = _Module(tree, refs)
    nodes, parents = mod.nodes, mod.parents
    nodes.append(tree)
    for node in nodes:  # breadth first, like ast.walk, noting each node's parent
        clock.tick()
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
            nodes.append(child)
    _collect_imports(mod, nodes)
    _collect_top_level(mod)
    mod.resolved.clear()  # aliases made at module level resolve from here on
    _collect_globals(mod, nodes)
    _collect_bound(mod, nodes)
    _collect_kernels(mod, nodes)
    _collect_swallowers(mod, nodes, parents)
    mod.model = _find_model(mod)
    return mod


def _is_type_argument(mod: _Module, node: ast.AST) -> bool:
    """The class(es) `isinstance(x, ...)` or `issubclass(c, ...)` test against."""
    parent = mod.parents.get(id(node))
    if isinstance(parent, ast.Tuple):
        node, parent = parent, mod.parents.get(id(parent))
    return (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name)
            and parent.func.id in ("isinstance", "issubclass") and len(parent.args) == 2
            and parent.args[1] is node)


def _collect_imports(mod: _Module, nodes: list[ast.AST]) -> None:
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".", 1)[0]
                mod.imports[alias.asname or root] = alias.name if alias.asname else root
                mod.modules.add(alias.name if alias.asname else root)
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


def _collect_globals(mod: _Module, nodes: list[ast.AST]) -> None:
    """Values assigned to module-level names, at module level or under `global`."""
    declared = {name for node in nodes if isinstance(node, ast.Global) for name in node.names}
    top = {id(stmt) for stmt in _top_level(mod.tree)}
    for node in nodes:
        value = getattr(node, "value", None)
        if not isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) or (
                not isinstance(value, ast.expr)):
            continue
        for target in _flat_targets(_targets_of(node)):
            if (isinstance(target, ast.Name) and (id(node) in top or target.id in declared)
                    and target.id not in mod.imports and target.id not in mod.instances):
                mod.global_values.setdefault(target.id, []).append(value)


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
            mod.kernel_names.add(node.name)


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

    def has(self, check: StaticCheck, node: ast.AST) -> bool:
        return (check, int(getattr(node, "lineno", 0) or 0)) in self.found

    def add(self, check: StaticCheck, node: ast.AST, message: str) -> None:
        self.add_line(check, int(getattr(node, "lineno", 0) or 0), message)

    def add_line(self, check: StaticCheck, line: int, message: str) -> None:
        if (check, line) in self.found:
            return
        text = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        self.found[(check, line)] = Finding(check, message, line, text[:200])

    def findings(self) -> list[Finding]:
        order: dict[str, int] = {check: index for index, check in enumerate(STATIC_CHECKS)}
        return sorted(self.found.values(), key=lambda f: (f.line, order.get(f.check, 0)))


# ---------------------------------------------------------------------------------------
# Whole-file pass: loading code, streams and threads, tampering, kernels, structure
# ---------------------------------------------------------------------------------------

KERNEL_BODY = 1  # the node is in a @triton.jit body
ANNOTATION = 2  # the node is in an annotation (never evaluated as code here)
IN_REFERENCE = 4  # the node is in the body of a reference class (the forward pass reads it
# when ModelNew inherits from it, through what it stores on self)


class _FileScan:
    def __init__(self, mod: _Module, sink: _Sink, clock: _Clock) -> None:
        self.mod = mod
        self.sink = sink
        self.clock = clock
        self.closed: set[int] = set()  # nodes whose children are not visited
        self.marks: dict[int, int] = {}  # flags a parent gives one of its children (inherited)
        self.roles: dict[int, str] = {}  # "base" | "decorator": a child's role in its parent
        self.flags_of: dict[int, int] = {}
        self.kernel_of: dict[int, FuncDef] = {}
        self.kernel: FuncDef | None = None  # the kernel the current node is in
        self.flags = 0  # the current node's flags
        self.kernel_locals: dict[int, frozenset[str]] = {}
        self.model_defs: list[ast.ClassDef] = []
        self.top = {id(stmt) for stmt in _top_level(mod.tree)}
        self.handlers: dict[type[ast.AST], Callable[[Any], bool]] = {
            ast.Import: self._on_import,
            ast.ImportFrom: self._on_import_from,
            ast.Name: self._on_chain,
            ast.Attribute: self._on_chain,
            ast.Call: self._on_call,
            ast.Assign: self._on_targets,
            ast.AugAssign: self._on_targets,
            ast.AnnAssign: self._on_targets,
            ast.Delete: self._on_targets,
            ast.For: self._on_targets,
            ast.AsyncFor: self._on_targets,
            ast.With: self._on_targets,
            ast.AsyncWith: self._on_targets,
            ast.comprehension: self._on_targets,
            ast.NamedExpr: self._on_targets,
            ast.FunctionDef: self._on_def,
            ast.AsyncFunctionDef: self._on_def,
            ast.Lambda: self._on_lambda,
            ast.ClassDef: self._on_class,
            ast.Global: self._on_global,
        }

    def run(self) -> None:
        """Visit every node once, parents first, skipping what a parent's handler closed."""
        mod = self.mod
        for node in mod.nodes:
            self.clock.tick()
            key = id(node)
            parent = mod.parents.get(key)
            parent_key = id(parent) if parent is not None else 0
            if key in self.closed or parent_key in self.closed:
                self.closed.add(key)
                continue
            kernel = self.kernel_of.get(parent_key)
            flags = self.flags_of.get(parent_key, 0) | self.marks.pop(key, 0)
            if isinstance(node, ast.ClassDef) and node.name in mod.refs:
                flags |= IN_REFERENCE
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and key in mod.kernels:
                kernel = node
                flags &= ~KERNEL_BODY  # its decorators and arguments are not its body
                for stmt in node.body:
                    self.marks[id(stmt)] = self.marks.get(id(stmt), 0) | KERNEL_BODY
            if kernel is not None:
                self.kernel_of[key] = kernel
            if flags:
                self.flags_of[key] = flags
            self.kernel, self.flags = kernel, flags
            handler = self.handlers.get(type(node))
            if _is_main_guard(node) or (handler is not None and handler(node)):
                self.closed.add(key)
        self._check_model_statements()

    # -- context ------------------------------------------------------------------------

    @property
    def in_body(self) -> bool:
        return bool(self.flags & KERNEL_BODY)

    def _kernel_says(self, verb: str) -> str:
        return f"kernel {self.kernel.name} {verb}" if self.kernel is not None else verb

    def _mark(self, node: ast.AST | None, flag: int) -> None:
        if node is not None:
            self.marks[id(node)] = self.marks.get(id(node), 0) | flag

    def _parent(self, node: ast.AST) -> ast.AST | None:
        return self.mod.parents.get(id(node))

    def _scope_of(self, node: ast.AST) -> ast.AST | None:
        """The nearest function, lambda, class or module around `node`."""
        current = self._parent(node)
        while current is not None and not isinstance(current, (
                ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Module)):
            current = self._parent(current)
        return current

    def _locals_of(self, kernel: FuncDef) -> frozenset[str]:
        """A kernel's parameters and the names it assigns."""
        if id(kernel) not in self.kernel_locals:
            args = kernel.args
            names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
            names.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
            names.update(n.id for n in ast.walk(kernel)
                         if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load))
            self.kernel_locals[id(kernel)] = frozenset(names)
        return self.kernel_locals[id(kernel)]

    # -- imports ------------------------------------------------------------------------

    def _module_used(self, name: str, node: ast.AST) -> None:
        # torch members (torch.cuda.Event, torch.compile) are flagged where used, not here;
        # but importing a tampering tool (torch._C, torch.overrides) is flagged at once
        verdict = _name_verdict(name)
        if name.startswith("torch.") and verdict is not None and verdict[0] != TAMPER:
            verdict = None
        if verdict is not None:
            self.sink.add(verdict[0], node, f"imports {name}: {verdict[1]}")
        parts = name.split(".")
        if (name == "__main__" or parts[-1] in self.mod.refs
                or any("reference" in part.lower() for part in parts)):
            self.sink.add(REFERENCE, node, f"imports {name}: {REFERENCE_REASON}")

    def _on_import(self, node: ast.Import) -> bool:
        for alias in node.names:
            self._module_used(alias.name, node)
            self._binds_model(alias.asname or alias.name.split(".", 1)[0], node, "an import")
        return True

    def _on_import_from(self, node: ast.ImportFrom) -> bool:
        base = node.module or ""
        if base:
            self._module_used(base, node)
        for alias in node.names:
            self._module_used(f"{base}.{alias.name}" if base else alias.name, node)
            self._binds_model(alias.asname or alias.name, node, "an import")
        return True

    # -- names --------------------------------------------------------------------------

    def _on_chain(self, node: ast.Name | ast.Attribute) -> bool:
        if isinstance(node, ast.Attribute) and node.attr in ATTRIBUTE_RULES:
            check, reason = ATTRIBUTE_RULES[node.attr]
            self.sink.add(check, node, f"uses {_shown(node)}: {reason}")
        if not isinstance(node.ctx, ast.Load):
            return False
        name = self.mod.resolve(node)
        if name is None:
            self._on_unresolved(node)
            return False
        verdict = _name_verdict(name)
        if verdict is None and self.kernel is not None:
            verdict = _kernel_verdict(name)
        if verdict is not None:
            self.sink.add(verdict[0], node, f"{self._kernel_says('uses')} "
                                            f"{_shown(node, name)}: {verdict[1]}")
            if verdict[0] != TORCH_OP and _reaches_host(name):
                self.sink.add(TORCH_OP, node, f"reaches {_shown(node, name)}: "
                                              f"{HOST_LIBRARY_REASON}")
        elif not self.flags & ANNOTATION:
            self._on_value(node, name)
        return True

    def _on_unresolved(self, node: ast.Name | ast.Attribute) -> None:
        if id(node) in self.mod.too_long:
            self.sink.add(STRUCTURE, node, f"chains more than {MAX_CHAIN} attribute names: "
                                           f"{NESTING_REASON}")
        if not isinstance(node, ast.Name):
            return
        verdict = ATTRIBUTE_RULES.get(node.id)
        if verdict is not None:
            self.sink.add(verdict[0], node, f"uses {node.id}: {verdict[1]}")
        function = self.mod.functions.get(node.id)
        cls = self.mod.classes.get(node.id)
        parent = self._parent(node)
        if self.flags & IN_REFERENCE:
            return
        if function is not None and id(function) not in self.mod.kernels:
            if self.in_body:
                self.sink.add(TORCH_OP, node, f"{self._kernel_says('uses')} {node.id}, a plain "
                                              f"Python function: {KERNEL_CALL_REASON}")
            elif not (isinstance(parent, ast.Call) and parent.func is node) and (
                    self.roles.get(id(node)) != "decorator"):
                self.mod.escaping.append((function, None))  # passed around as a value
        elif (cls is not None and node.id != MODEL_CLASS and node.id not in self.mod.refs
              and self.roles.get(id(node)) != "base"):
            self.mod.escaping.append((cls, None))

    def _on_value(self, node: ast.Name | ast.Attribute, name: str) -> None:
        """A resolved name used as a value: not called, where the forward pass sees it."""
        parent = self._parent(node)
        if isinstance(parent, ast.Call) and parent.func is node:
            return
        if self.mod.is_module(name):
            if not self._module_value_ok(node, parent):
                self.sink.add(TAMPER, node, f"passes the module {_shown(node, name)} around as "
                                            f"a value: {MODULE_VALUE_REASON}")
        elif name in REFLECTION_BUILTINS or name in NAMESPACE_BUILTINS or name == "builtins.dir":
            if not (name == "builtins.getattr" and self._reduces_getattr(node, parent)):
                self.sink.add(TAMPER, node, f"passes {name.removeprefix('builtins.')} around as "
                                            f"a value: {REFLECT_REASON}")
        elif (self.kernel is None and not self.flags & IN_REFERENCE
              and not self._type_argument(node, parent)):
            verdict = _value_verdict(name)
            if verdict is not None:
                self.sink.add(verdict[0], node, f"refers to {_shown(node, name)} as a value: "
                                                f"{VALUE_REASON}")

    def _module_value_ok(self, node: ast.AST, parent: ast.AST | None) -> bool:
        """`hasattr(torch, "npu")`, and `F = torch.nn.functional` at module level (an alias)."""
        if isinstance(parent, ast.Call) and parent.args[:1] == [node]:
            probe = self.mod.resolve(parent.func) == "builtins.hasattr"
            return probe and len(parent.args) == 2 and _const_str(parent.args[1]) is not None
        return (isinstance(parent, ast.Assign) and id(parent) in self.top
                and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name))

    def _reduces_getattr(self, node: ast.AST, parent: ast.AST | None) -> bool:
        """`functools.reduce(getattr, "a.b".split("."), obj)` on an object, not a module."""
        return (isinstance(parent, ast.Call) and len(parent.args) == 3
                and parent.args[0] is node and not parent.keywords
                and self.mod.resolve(parent.func) == "functools.reduce"
                and self.mod.resolve(parent.args[2]) is None)

    def _type_argument(self, node: ast.AST, parent: ast.AST | None) -> bool:
        """`isinstance(m, nn.Linear)`, `class Helper(torch.autograd.Function)`."""
        return self.roles.get(id(node)) == "base" or _is_type_argument(self.mod, node)

    # -- calls --------------------------------------------------------------------------

    def _on_call(self, node: ast.Call) -> bool:
        func = node.func
        name = self.mod.resolve(func)
        if name == "os.environ.setdefault" and _selects_interpreter(node):
            return True  # choosing Triton's CPU interpreter when none is chosen is benign
        verdict = METHOD_RULES.get(func.attr) if isinstance(func, ast.Attribute) else None
        if name is None and verdict is not None:
            self.sink.add(verdict[0], node, f"calls {_shown(func)}(): {verdict[1]}")
        if name in SETATTR_NAMES and node.args:
            self._patched(node.args[0], node)
        if name in REFLECTION_BUILTINS:
            self._reflection(node, name.removeprefix("builtins."))
        elif name in NAMESPACE_BUILTINS or (name == "builtins.dir" and node.args
                                            and self.mod.resolve(node.args[0]) is not None):
            self.sink.add(TAMPER, node, f"calls {_shown(node)}: {DICT_REASON}")
        if self.in_body:
            self._kernel_call(node, func, name)
        return False

    def _reflection(self, node: ast.Call, fname: str) -> None:
        """getattr/setattr/delattr/hasattr: a constant name on an object of the file only."""
        args = node.args
        if node.keywords or any(isinstance(arg, ast.Starred) for arg in args) or len(args) < 2:
            self.sink.add(TAMPER, node, f"calls {fname}() with unpacked arguments: "
                                        f"{REFLECT_REASON}")
            return
        obj, key = args[0], args[1]
        attr = _const_str(key)
        base = self.mod.resolve(obj)
        if attr is None:
            self.sink.add(TAMPER, node, f"calls {fname}() with a computed name "
                                        f"({_shown(key)}): {REFLECT_REASON}")
        elif attr in ATTRIBUTE_RULES:
            check, reason = ATTRIBUTE_RULES[attr]
            self.sink.add(check, node, f"calls {fname}() on {attr!r}: {reason}")
        elif fname in ("setattr", "delattr") and attr in ROOT_METHODS:
            self.sink.add(STRUCTURE, node, f"rebinds {attr} with {fname}(): {REBIND_REASON}")
        elif base is not None and fname == "hasattr":
            verdict = _name_verdict(f"{base}.{attr}")
            if verdict is not None:
                self.sink.add(verdict[0], node, f"probes {base}.{attr}: {verdict[1]}")
        elif base is not None:
            self.sink.add(TAMPER, node, f"calls {fname}({_shown(obj, base)}, {attr!r}) on a "
                                        f"module: {REFLECT_REASON}")

    def _kernel_call(self, node: ast.Call, func: ast.expr, name: str | None) -> None:
        """What a @triton.jit body calls: triton, a few builtins, the file's other kernels."""
        kernel = self.kernel
        if kernel is None:
            return
        if name is not None:
            builtin = name.startswith("builtins.") and name[9:] in KERNEL_BUILTINS
            if not (name.split(".", 1)[0] == "triton" or builtin or _name_verdict(name)
                    or _kernel_verdict(name)):
                self._kernel_bad(node, f"calls {_shown(func, name)}")
            return
        if isinstance(func, ast.Name):
            ident = func.id
            function = self.mod.functions.get(ident)
            local = ident in self._locals_of(kernel)
            if function is not None and not local:
                if id(function) not in self.mod.kernels:
                    self._kernel_bad(node, f"calls {ident}(), a plain Python function")
            elif local:
                self._kernel_bad(node, f"calls {ident}(), a value passed in or computed there")
            elif ident in self.mod.kernel_names and function is None:
                return  # a @triton.jit function defined in a function
            elif ident not in KERNEL_BUILTINS or ident in self.mod.classes or (
                    ident in self.mod.global_values):
                self._kernel_bad(node, f"calls {ident}(), which is not a @triton.jit function")
            return
        root = _root_name(func) if isinstance(func, ast.Attribute) else None
        if root is None and isinstance(func, ast.Attribute):
            return  # a method of a computed value: `tl.load(p).to(tl.float32)`
        if root is None:
            self._kernel_bad(node, f"calls {_shown(func)}, a computed callable")
        elif root.id not in self._locals_of(kernel) and (
                root.id in self.mod.functions or root.id in self.mod.classes
                or root.id in self.mod.global_values or root.id in self.mod.instances):
            self._kernel_bad(node, f"calls {_shown(func)}, a method of the module-level "
                                   f"{root.id}")

    def _kernel_bad(self, node: ast.AST, what: str) -> None:
        self.sink.add(TORCH_OP, node, f"{self._kernel_says(what)}: {KERNEL_CALL_REASON}")

    # -- bindings -----------------------------------------------------------------------

    def _on_targets(self, node: ast.AST) -> bool:
        """Assignments and other bindings: report patches, then scan all but patched targets."""
        value = getattr(node, "value", None)
        if isinstance(node, ast.AnnAssign):
            self._mark(node.annotation, ANNOTATION)
        patched: set[int] = set()
        for target in _flat_targets(_targets_of(node)):
            if isinstance(target, ast.Attribute):
                if self._patched(target, target):
                    patched.add(id(target))
                elif target.attr == "__class__" and _is_self(target.value):
                    self.sink.add(STRUCTURE, target, f"assigns {_shown(target)}: it swaps the "
                                                     f"class the checks read")
                elif target.attr == "__class__":
                    self.sink.add(TAMPER, target, f"assigns {_shown(target)}: an object whose "
                                                  f"class is swapped can fake what the checks "
                                                  f"compare")
                elif target.attr in ROOT_METHODS:
                    self.sink.add(STRUCTURE, target, f"assigns {_shown(target)}: {REBIND_REASON}")
            elif isinstance(target, ast.Subscript):
                self._namespace_write(target)
            elif isinstance(target, ast.Name) and target.id == MODEL_CLASS:
                if value is not None and self.mod.is_reference(value):
                    self.sink.add(REFERENCE, node, f"makes ModelNew the reference: "
                                                   f"{REFERENCE_REASON}")
                kind = "deletes" if isinstance(node, ast.Delete) else "binds"
                self.sink.add(STRUCTURE, target, f"{kind} the name ModelNew outside a class "
                                                 f"statement: {STRUCTURE_REASON}")
        self.closed.update(patched)
        return False

    def _binds_model(self, bound: str, node: ast.AST, how: str) -> None:
        if bound == MODEL_CLASS:
            self.sink.add(STRUCTURE, node, f"binds ModelNew with {how}: {STRUCTURE_REASON}")

    def _patched(self, target: ast.expr, node: ast.AST) -> bool:
        """An attribute of a module, the reference or ModelNew assigned from outside."""
        root = _root_name(target)
        if root is None:
            return False
        shown = _shown(target, self.mod.resolve(target))
        if root.id in self.mod.bound:
            self.sink.add(TAMPER, node, f"patches {shown}: {PATCH_REASON}")
        elif root.id in self.mod.refs:
            self.sink.add(TAMPER, node, f"patches the reference ({shown}): {PATCH_REASON}")
        elif root.id == MODEL_CLASS or (self.mod.model is not None
                                        and root.id == self.mod.model.name):
            self.sink.add(STRUCTURE, node, f"rebinds {shown} outside the class body: "
                                           f"{REBIND_REASON}")
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

    def _on_global(self, node: ast.Global) -> bool:
        if MODEL_CLASS in node.names:
            self.sink.add(STRUCTURE, node, f"declares ModelNew global in a function, which can "
                                           f"then rebind it: {STRUCTURE_REASON}")
        return True

    # -- definitions --------------------------------------------------------------------

    def _on_def(self, node: FuncDef) -> bool:
        if node.name in ("__torch_function__", "__torch_dispatch__"):
            self.sink.add(TAMPER, node, f"defines {node.name}: {DISPATCH_REASON}")
        args = node.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            self._mark(arg.annotation if arg is not None else None, ANNOTATION)
        self._mark(node.returns, ANNOTATION)
        self.roles.update((id(decorator), "decorator") for decorator in node.decorator_list)
        self._binds_model(node.name, node, "a def statement")
        if node.name in MODULE_HOOKS and self.mod.functions.get(node.name) is node:
            self.sink.add(STRUCTURE, node, f"defines a module-level {node.name}: it can hand "
                                           f"the harness a ModelNew no class statement defines")
        escapes = self.kernel is None and not self.flags & IN_REFERENCE
        if escapes and isinstance(self._scope_of(node), (ast.FunctionDef, ast.AsyncFunctionDef,
                                                         ast.Lambda)):
            self.mod.escaping.append((node, self.mod.enclosing_class(node)))  # a closure
        return False

    def _on_lambda(self, node: ast.Lambda) -> bool:
        if self.kernel is None and not self.flags & IN_REFERENCE:
            self.mod.escaping.append((node, self.mod.enclosing_class(node)))
        return False

    def _on_class(self, node: ast.ClassDef) -> bool:
        self.roles.update((id(decorator), "decorator") for decorator in node.decorator_list)
        self.roles.update((id(base), "base") for base in node.bases)
        if node.name == MODEL_CLASS:
            self.model_defs.append(node)
        return False

    # -- ModelNew: one plain top-level class statement ----------------------------------

    def _check_model_statements(self) -> None:
        defs = self.model_defs
        for extra in defs[1:]:
            self.sink.add(STRUCTURE, extra, f"defines class ModelNew again (first at line "
                                            f"{defs[0].lineno}): {STRUCTURE_REASON}")
        for cls in defs:
            scope = self._scope_of(cls)
            if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                where = "inside a function (a factory)"
            elif isinstance(scope, ast.ClassDef):
                where = f"inside class {scope.name}"
            else:
                where = "" if self._parent(cls) is scope else "inside an if/try/with/for block"
            if where:
                self.sink.add(STRUCTURE, cls, f"defines class ModelNew {where}: "
                                              f"{STRUCTURE_REASON}")
            for base in cls.bases:
                name = self.mod.resolve(base)
                allowed = name in MODULE_BASES or (isinstance(base, ast.Name)
                                                   and base.id in self.mod.refs)
                if not allowed:
                    self.sink.add(STRUCTURE, cls, f"derives ModelNew from {_shown(base, name)}: "
                                                  f"{STRUCTURE_REASON} (or the reference's "
                                                  f"Model)")
        model = self.mod.model
        seen: set[int] = set()
        stack = [model] if model is not None else []
        while stack and len(seen) <= MAX_MRO:
            cls = stack.pop()
            if id(cls) in seen:
                continue
            seen.add(id(cls))
            self._plain_class(cls)
            stack.extend(self.mod.classes[base.id] for base in cls.bases
                         if isinstance(base, ast.Name) and base.id in self.mod.classes)

    def _plain_class(self, cls: ast.ClassDef) -> None:
        """No metaclass, class keywords, decorators or subclass hooks on ModelNew or its bases."""
        what = "ModelNew" if cls.name == MODEL_CLASS else f"{cls.name}, a base of ModelNew,"
        for keyword in cls.keywords:
            self.sink.add(STRUCTURE, cls, f"{what} takes {keyword.arg or '**'}=: a metaclass "
                                          f"can rewrite the class after the checks read it")
        for decorator in cls.decorator_list:
            self.sink.add(STRUCTURE, decorator, f"{what} is decorated with {_shown(decorator)}: "
                                                f"a class decorator can replace the class")
        for stmt in cls.body:
            bound = [t.id for t in _flat_targets(_targets_of(stmt)) if isinstance(t, ast.Name)]
            for name in bound:
                if name in ROOT_METHODS:
                    self.sink.add(STRUCTURE, stmt, f"{what} binds {name} by an assignment, not "
                                                   f"a def: {REBIND_REASON}")
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name in (
                    "__init_subclass__", "__class_getitem__", "__set_name__"):
                self.sink.add(STRUCTURE, stmt, f"{what} defines {stmt.name}: it runs as "
                                               f"classes are made and can rewrite ModelNew")


# ---------------------------------------------------------------------------------------
# Forward-path pass: what ModelNew's forward computes with
# ---------------------------------------------------------------------------------------


@dataclass
class _Unit:
    """A body to scan: a function, a method, a class body, a lambda or a value."""

    key: int
    decorators: list[ast.expr]
    body: Sequence[ast.AST]
    owner: ast.ClassDef | None
    where: str  # how messages name it: "forward", "_launch() (reached from forward)", ...


Work = tuple[ast.AST, bool]  # a node to visit, and whether it runs after a caught error
Found = tuple[ast.ClassDef, FuncDef | None]  # the class defining a name, and its function


class _Scope:
    def __init__(self, mod: _Module, model: ast.ClassDef, sink: _Sink, clock: _Clock) -> None:
        self.mod = mod
        self.model = model
        self.sink = sink
        self.clock = clock
        self.queue: list[_Unit] = []
        self.seen: set[int] = set()
        self.edges: dict[int, set[int]] = {}
        self.dirty: set[int] = set()  # units that compute with PyTorch or the reference
        self.fallback_calls: list[tuple[int, ast.AST, str, str]] = []
        self.unit = _Unit(id(model), [], [], model, "the body of class ModelNew")
        self.stack: list[Work] = []
        self.synthetic: dict[tuple[str, int], int] = {}  # keys of expansions and values
        self.derived_cache: dict[int, bool] = {}
        self.torch_base_cache: dict[int, str | None] = {}
        self.mro_cache: dict[int, list[ast.ClassDef]] = {}
        self.index_cache: dict[int, dict[str, FuncDef | None]] = {}
        self.lookup_cache: dict[tuple[int, str], Found | None] = {}
        self.attrs_cache: dict[int, tuple[dict[str, Held], dict[str, list[ast.expr]]]] = {}
        self.own_cache: dict[int, tuple[dict[str, Held], dict[str, list[ast.expr]]]] = {}
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
        self._escaping()

    def _escaping(self) -> None:
        """Code that can run wherever it is passed: lambdas, closures, functions and classes
        used as values. It is scanned as if forward called it."""
        done: set[int] = set()
        for item, owner in self.mod.escaping:
            if id(item) in done:
                continue
            done.add(id(item))
            if isinstance(item, ast.Lambda):
                self._add_value(item.body, owner, f"the lambda at line {item.lineno}")
            elif isinstance(item, ast.ClassDef):
                if item is not self.model and item.name not in self.mod.refs:
                    # __init__ runs where the class is called; forward expands it there
                    self._expand(item, False, item, with_init=False)
            elif id(item) not in self.seen and id(item) not in self.mod.kernels:
                self.seen.add(id(item))
                self.queue.append(_Unit(id(item), list(item.decorator_list), item.body, owner,
                                        f"{item.name}() (passed around or nested, it can run "
                                        "anywhere)"))

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

    def _add_value(self, value: ast.expr, owner: ast.ClassDef | None, where: str) -> None:
        """An expression scanned as forward-path code: a lambda's body, a stored value."""
        if id(value) in self.seen:
            return
        self.seen.add(id(value))
        self.queue.append(_Unit(id(value), [], [value], owner, where))

    def _key(self, kind: str, node: ast.AST) -> int:
        """A unit key for what is not one node: a class expanded, a name's values."""
        return self.synthetic.setdefault((kind, id(node)), -1 - len(self.synthetic))

    def _edge(self, callee: int, fb: bool, site: ast.AST) -> None:
        self.edges.setdefault(self.unit.key, set()).add(callee)
        if fb:
            self.fallback_calls.append((callee, site, self.unit.where, _shown(site)))

    def _enqueue(self, fn: FuncDef, owner: ast.ClassDef | None, fb: bool, site: ast.AST) -> None:
        self._edge(id(fn), fb, site)
        self._add_unit(fn, owner)

    def _walk(self, unit: _Unit) -> None:
        self.unit = unit
        self.stack = [(decorator, False) for decorator in unit.decorators]
        self.stack.extend(self._block([n for n in unit.body if isinstance(n, ast.stmt)], False))
        self.stack.extend((n, False) for n in unit.body if not isinstance(n, ast.stmt))
        while self.stack:
            self.clock.tick()
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
            if not self.sink.has(FALLBACK, node):
                self.sink.add(FALLBACK, node, f"{self.unit.where} {what} after catching an "
                                              f"error: {FALLBACK_REASON}")
        elif not self.sink.has(check, node):
            self.sink.add(check, node, f"{self.unit.where} {what}: {reason}")

    def _report_fallback_calls(self) -> None:
        """Units that reach PyTorch or the reference, through any chain of calls."""
        callers: dict[int, list[int]] = {}
        for caller, callees in self.edges.items():
            for callee in callees:
                callers.setdefault(callee, []).append(caller)
        pending = list(self.dirty)
        while pending:
            for caller in callers.get(pending.pop(), ()):
                if caller not in self.dirty:
                    self.dirty.add(caller)
                    pending.append(caller)
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
        if _name_verdict(name) is not None or (not call and _is_type_argument(self.mod, node)):
            return  # the file pass reports it; `isinstance(m, nn.Linear)` computes nothing
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
        elif ident in self.mod.global_values:
            values = self.mod.global_values[ident]
            self._values(self._key("global", values[0]), values, fb, node, owner=None,
                         where=f"the value of {ident} (read on the forward path)")

    def _values(self, key: int, values: list[ast.expr], fb: bool, site: ast.AST, *,
                owner: ast.ClassDef | None, where: str) -> None:
        """Values stored under a name the forward path reads or calls: scanned there too."""
        self._edge(key, fb, site)
        if key in self.seen:
            return
        self.seen.add(key)
        stored = self.edges.setdefault(key, set())
        for value in values:
            stored.add(id(value))
            self._add_value(value, owner, where)

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
            elif isinstance(func.value, ast.Name) and func.value.id in self.mod.instances:
                self._run_held(self.mod.instances[func.value.id], func.value.id, func, fb)
        self.stack.append((func, fb))

    def _self_call(self, attr: str, node: ast.AST, fb: bool, *, values: bool = True) -> None:
        found = self._lookup(self._owner(), attr)
        if found is None:
            self._held_call(attr, node, fb, values=values)
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
        held = self._attrs(self._owner())[0].get(attr)
        return held[0] if held is not None else None

    def _held_call(self, attr: str, node: ast.AST, fb: bool, *, values: bool = True) -> None:
        owner = self._owner()
        held, stored = self._attrs(owner)
        if attr in held:
            self._run_held(held[attr], f"self.{attr}", node, fb)
        elif values and attr in stored:  # a function, a lambda, a partial, a factory's product
            self._values(self._key(f"self.{attr}", owner), stored[attr], fb, node, owner=owner,
                         where=f"the value of self.{attr} (called on the forward path)")

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
            parent = self.mod.parents.get(id(node))
            called = isinstance(parent, ast.Call) and parent.func is node
            self._self_call(attr, node, fb, values=called)
        elif attr is not None and _method_verdict(attr) is not None:
            self._report(TORCH_OP, node, f"calls {_shown(node)}", TENSOR_REASON, fb)

    def _expand(self, cls: ast.ClassDef, fb: bool, site: ast.AST, with_init: bool) -> None:
        """A helper class named on the forward path: its methods (and bases') run there."""
        key = self._key("init" if with_init else "class", cls)
        self._edge(key, fb, site)
        if key in self.seen:
            return
        self.seen.add(key)
        skipped = SKIPPED_METHODS if with_init else SKIPPED_METHODS | {"__init__", "__new__"}
        methods = self.edges.setdefault(key, set())
        for owner in self._mro(cls):
            if owner.name in self.mod.refs or owner is self.model:
                continue
            for stmt in owner.body:
                if (isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
                        and stmt.name not in skipped and id(stmt) not in self.mod.kernels):
                    methods.add(id(stmt))
                    self._add_unit(stmt, owner)

    # -- classes (each lookup memoised: the scan stays linear in the source) -------------

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
            if len(order) == MAX_MRO:
                self.sink.add(STRUCTURE, current, f"class {current.name} is more than {MAX_MRO} "
                                                  f"in-file ancestors above {cls.name}: "
                                                  f"{NESTING_REASON}")
                break
            seen.add(id(current))
            order.append(current)
            bases = [self.mod.classes[base.id] for base in current.bases
                     if isinstance(base, ast.Name) and base.id in self.mod.classes]
            stack.extend(reversed(bases))
        self.mro_cache[id(cls)] = order
        return order

    def _index(self, cls: ast.ClassDef) -> dict[str, FuncDef | None]:
        """What a class body binds: a name -> its function (None for any other binding)."""
        if id(cls) not in self.index_cache:
            index: dict[str, FuncDef | None] = {}
            for stmt in cls.body:  # a later binding wins, as when the body runs
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    index[stmt.name] = stmt
                for target in _flat_targets(_targets_of(stmt)):
                    if isinstance(target, ast.Name):
                        index[target.id] = None
            self.index_cache[id(cls)] = index
        return self.index_cache[id(cls)]

    def _lookup(self, cls: ast.ClassDef, name: str) -> Found | None:
        key = (id(cls), name)
        if key not in self.lookup_cache:
            self.lookup_cache[key] = self._lookup_in(self._mro(cls), name)
        return self.lookup_cache[key]

    def _lookup_in(self, classes: list[ast.ClassDef], name: str) -> Found | None:
        """The first class defining `name`, and its function (None for a class attribute)."""
        for cls in classes:
            index = self._index(cls)
            if name in index:
                return cls, index[name]
        return None

    def _bases(self, cls: ast.ClassDef) -> Iterator[ast.expr]:
        for current in self._mro(cls):
            yield from current.bases

    def _reference_derived(self, cls: ast.ClassDef) -> bool:
        if id(cls) not in self.derived_cache:
            self.derived_cache[id(cls)] = (
                any(c.name in self.mod.refs for c in self._mro(cls))
                or any(self.mod.is_reference(base) for base in self._bases(cls)))
        return self.derived_cache[id(cls)]

    def _torch_base(self, cls: ast.ClassDef) -> str | None:
        if id(cls) not in self.torch_base_cache:
            names = (self.mod.resolve(base) for base in self._bases(cls))
            self.torch_base_cache[id(cls)] = next(
                (name for name in names if name and _is_torch_module_class(name)), None)
        return self.torch_base_cache[id(cls)]

    def _attrs(self, cls: ast.ClassDef) -> tuple[dict[str, Held], dict[str, list[ast.expr]]]:
        """What the methods of cls and its bases store on self: `self.fc = nn.Linear(...)`,
        `self.ref = Model()` (held), and any other value (`self.act = make_act()`)."""
        if id(cls) not in self.attrs_cache:
            held: dict[str, Held] = {}
            values: dict[str, list[ast.expr]] = {}
            for owner in reversed(self._mro(cls)):
                own_held, own_values = self._own_attrs(owner)
                held.update(own_held)
                for name, stored in own_values.items():
                    values.setdefault(name, []).extend(stored)
            self.attrs_cache[id(cls)] = held, values
        return self.attrs_cache[id(cls)]

    def _own_attrs(self, cls: ast.ClassDef) -> tuple[dict[str, Held],
                                                      dict[str, list[ast.expr]]]:
        if id(cls) not in self.own_cache:
            held: dict[str, Held] = {}
            values: dict[str, list[ast.expr]] = {}
            for node in ast.walk(cls):
                self.clock.tick()
                for key, value in self._stores(node):
                    kind = self.mod.held(value)
                    if kind is not None:
                        held[key] = kind
                    else:
                        values.setdefault(key, []).append(value)
            self.own_cache[id(cls)] = held, values
        return self.own_cache[id(cls)]

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
