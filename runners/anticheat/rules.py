"""What the static scan allows and flags: the allow-lists, the reasons it gives, and the
rule tables that map qualified names, methods and attributes to a check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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

# What the forward path may use. Everything under torch.* that is not listed is flagged.

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
# The package whose decorated functions are kernel code, and its kernel decorators.
KERNEL_PACKAGE = "triton"
KERNEL_DECORATORS: frozenset[str] = frozenset({"jit", "autotune", "heuristics"})
# Packages whose private names (a leading "_") a candidate must not reach.
PRIVATE_GUARDED: frozenset[str] = frozenset({"torch", KERNEL_PACKAGE, "torch_npu"})

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

# Reasons: each finding says what was seen and why it is not allowed.

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
class Rule:
    """Qualified names (a prefix matches its attributes too) and what using them means."""

    check: StaticCheck
    prefixes: tuple[str, ...]
    reason: str


# Checked on every resolved name in the whole file (imports included), kernels included.
FILE_RULES: tuple[Rule, ...] = (
    Rule(STREAM, (
        "threading", "_thread", "multiprocessing", "concurrent", "asyncio", "subprocess",
        "torch.multiprocessing", "torch.futures", "os.fork", "os.forkpty", "os.system",
        "os.popen", "os.spawnl", "os.spawnle", "os.spawnlp", "os.spawnlpe", "os.spawnv",
        "os.spawnve", "os.spawnvp", "os.spawnvpe", "os.posix_spawn", "os.posix_spawnp",
        "os.register_at_fork",
    ), THREAD_REASON),
    Rule(STREAM, (
        "torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.set_stream",
        "torch.cuda.ExternalStream", "torch.cuda.StreamContext", "torch.cuda.streams",
        "torch.cuda.Event", "torch.cuda.graph", "torch.cuda.graphs", "torch.cuda.CUDAGraph",
        "torch.cuda.make_graphed_callables", "torch.cuda._sleep", "torch.npu.Stream",
        "torch.npu.stream", "torch.npu.set_stream", "torch.npu.Event", "torch.npu.graph",
        "torch.npu.NPUGraph", "torch_npu.npu.Stream", "torch_npu.npu.stream",
        "torch_npu.npu.set_stream", "torch_npu.npu.Event", "torch.Stream", "torch.Event",
    ), STREAM_REASON),
    Rule(STREAM, ("atexit", "weakref.finalize"), DEFER_REASON),
    Rule(TORCH_OP, (
        "torch.compile", "torch._dynamo", "torch._inductor", "torch.jit", "torch.cuda.jiterator",
    ), COMPILE_REASON),
    Rule(REFERENCE, (
        "builtins.exec", "builtins.eval", "builtins.compile", "builtins.__import__", "importlib",
        "runpy", "imp", "zipimport", "torch.utils.cpp_extension", "pkgutil",
    ), EXEC_REASON),
    Rule(TAMPER, ("sys.modules",), MODULES_REASON),
    Rule(TAMPER, (
        "sys._getframe", "sys._current_frames", "inspect.currentframe", "inspect.stack",
        "inspect.trace", "inspect.getouterframes", "inspect.getinnerframes",
        "inspect.getframeinfo", "traceback.extract_stack", "traceback.walk_stack",
        "sys.exc_info", "sys.exception", "sys.last_traceback", "sys.last_exc", "sys.last_value",
        "sys.last_type", "sys._current_exceptions", "traceback.walk_tb", "traceback.extract_tb",
        "traceback.TracebackException", "traceback.StackSummary", "types.FrameType",
        "types.TracebackType",
    ), FRAMES_REASON),
    Rule(TAMPER, (
        "inspect.getmembers", "inspect.getmembers_static", "inspect.getattr_static",
        "inspect.getmodule", "inspect.getclosurevars", "operator.attrgetter",
        "operator.methodcaller",
    ), REFLECT_REASON),
    Rule(TAMPER, ("types.FunctionType", "types.CodeType", "types.LambdaType", "types.MethodType",
                   "types.ModuleType", "copyreg"), INTERNALS_REASON),
    Rule(TAMPER, (
        "sys.settrace", "sys.setprofile", "sys.addaudithook", "sys.meta_path", "sys.path_hooks",
        "sys.path_importer_cache",
    ), TRACE_REASON),
    Rule(TAMPER, ("gc.get_objects", "gc.get_referrers", "gc.get_referents", "gc.callbacks"),
          GC_REASON),
    Rule(TAMPER, ("ctypes", "_ctypes", "cffi"), CTYPES_REASON),
    Rule(TAMPER, ("signal",), SIGNAL_REASON),
    Rule(TAMPER, (
        "os._exit", "os.kill", "os.killpg", "os.abort", "sys.exit", "builtins.exit",
        "builtins.quit",
    ), EXIT_REASON),
    Rule(TAMPER, (
        "builtins.open", "io.open", "io.FileIO", "os.open", "os.read", "os.fdopen", "os.listdir",
        # Descriptors: the worker's channel to the judge is one (its answers can be forged).
        "os.write", "os.dup", "os.dup2", "os.fstat", "os.pipe", "os.pipe2", "os.close",
        "os.closerange", "os.lseek", "os.set_blocking", "os.sendfile", "os.writev",
        "os.pwrite", "os.pread", "os.readv", "os.preadv", "os.pwritev", "os.truncate",
        "os.eventfd", "os.eventfd_read", "os.eventfd_write", "os.splice",
        "os.copy_file_range", "os.memfd_create", "os.posix_spawn", "os.posix_spawnp",
        "os.ftruncate", "os.stat", "os.lstat", "os.readlink", "os.symlink", "os.link",
        "os.mkfifo", "os.mknod", "os.unlink", "os.remove", "os.rename", "os.replace",
        "os.mkdir", "os.makedirs", "os.rmdir", "os.chmod", "os.chdir", "os.path", "pathlib",
        "io", "socket", "tempfile", "mmap", "fcntl",
        "os.scandir", "os.walk", "glob", "shutil", "shelve", "pickle.load", "marshal.load",
        "torch.load", "torch.save", "numpy.load", "numpy.save", "numpy.fromfile",
        "numpy.loadtxt", "numpy.memmap",
    ), FILE_REASON),
    Rule(TAMPER, (
        "os.putenv", "os.unsetenv", "os.environ.update", "os.environ.setdefault",
        "os.environ.pop", "os.environ.popitem", "os.environ.clear", "os.environ.__setitem__",
        "os.environ.__delitem__",
    ), ENV_REASON),
    Rule(TAMPER, ("unittest.mock", "mock"), MOCK_REASON),
    Rule(TAMPER, ("os.getcwd", "sys.argv",
                   "sys.orig_argv", "sys.flags", "sys.stdout", "sys.stderr", "sys.__stdout__",
                   "sys.__stderr__", "sys.stdin"), SENSE_REASON),
    Rule(TAMPER, (
        "torch.library.Library", "torch.library.impl", "torch.library.register_kernel",
        "torch.overrides", "torch.utils._python_dispatch", "torch._C",
    ), DISPATCH_REASON),
    Rule(TAMPER, (
        "torch.nn.modules.module.register_module_forward_hook",
        "torch.nn.modules.module.register_module_forward_pre_hook",
        "torch.nn.modules.module.register_module_full_backward_hook",
    ), HOOK_REASON),
    Rule(TAMPER, (
        "triton.runtime.interpreter", "triton.runtime.jit", "triton.runtime.cache",
        "triton.runtime.build", "triton.compiler", "triton._C", "triton.backends",
    ), TRITON_INTERNALS_REASON),
    Rule(TAMPER, ("runners", "bot", "opbot"), HARNESS_REASON),
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
