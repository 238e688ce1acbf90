"""The mistake catalogue: each class, and the source transformations that inject it.

Every transformation edits a verified kernel as a model would get it wrong, and fails
loudly (MutationNotFound) when the pattern it mutates is not there: a generator change must
not silently turn an injection into a no-op that "passes".

Triton mutations edit the one kernel module; Ascend C ones edit the files a model writes
(the kernel and the tiling header), by their role.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

Backend = Literal["triton", "ascendc"]
# What is expected to catch a variant here: the Triton judge; the Ascend C lint and tiling
# simulator (no CANN); the real-header type-check (a precheck) or a CPU-model run, both of
# which need the devkit's sources (runners/ascendc/cpu_verify.py).
Checker = Literal["judge", "static", "typecheck", "cpu_model"]
REAL_CHECKERS: tuple[Checker, ...] = ("typecheck", "cpu_model")
Role = Literal["kernel", "tiling"]
Edit = Callable[[str], str]


class MutationNotFound(Exception):
    """The pattern a mutation edits is not in the kernel."""


@dataclass(frozen=True)
class MistakeClass:
    key: str
    backend: Backend
    title: str
    # (label, regex): what a competent reader needs to see to know what to fix (oracle.py).
    cues: tuple[tuple[str, str], ...]
    # Pointing at the mutated line names it too (a store without its mask, quoted).
    line_names_it: bool = False
    # Failures confined to this dtype's cases, the others passing, point at its code path.
    failing_dtype_names_it: str | None = None
    caveat: str = ""  # why the checks here may never catch it, said with the results


@dataclass(frozen=True)
class Mutation:
    mistake: MistakeClass
    variant: str
    role: Role
    edit: Edit
    checker: Checker = "judge"
    cue_words: tuple[str, ...] = ()  # words that name this variant (the constant it changes)

    def apply(self, files: Mapping[str, str], roles: Mapping[Role, str]) -> dict[str, str]:
        """The files with the mistake injected; MutationNotFound when it cannot be."""
        name = roles[self.role]
        mutated = self.edit(files[name])
        if mutated == files[name]:
            raise MutationNotFound(f"{self.mistake.key}/{self.variant}: {name} unchanged")
        return {**files, name: mutated}


def substitute(pattern: str, replacement: str, text: str, *, count: int = 0,
               flags: int = re.MULTILINE) -> str:
    """re.sub that fails loudly when the pattern does not occur."""
    result, found = re.subn(pattern, replacement, text, count=count, flags=flags)
    if not found:
        raise MutationNotFound(f"pattern not found: {pattern}")
    return result


def _mask_cues() -> tuple[tuple[str, str], ...]:
    return (("mask", r"\bmask(s|ed|ing)?\b"), ("out of bounds", r"out[- ]of[- ]bounds"),
            ("the tail", r"\btails?\b"))


MISSING_MASK_STORE = MistakeClass(
    "triton.missing_mask_store", "triton", "missing mask on tl.store", _mask_cues(),
    line_names_it=True)
MISSING_MASK_LOAD = MistakeClass(
    "triton.missing_mask_load", "triton", "missing mask on tl.load", _mask_cues(),
    line_names_it=True,
    caveat="an unmasked load past the end reads memory that the masked store or a "
           "tl.where then discards: the interpreter checks no bounds, so only a load whose "
           "values are used (linear_relu's K tail) shows; on a device it may fault")
NON_POW2_BLOCK = MistakeClass(
    "triton.non_pow2_block", "triton", "non-power-of-two BLOCK / tl.arange",
    (("power of two", r"power[- ]of[- ](2|two)"),))
INT32_OFFSETS = MistakeClass(
    "triton.int32_offsets", "triton", "int32 offsets (no int64 promotion)",
    (("int64/int32", r"\bint(64|32)\b"), ("overflow", r"overflow"), ("32-bit", r"32-bit")),
    caveat="int32 offsets wrap only past 2**31 elements (8 GiB of float32); the example "
           "specs' largest case holds 262,144 and their perf shapes 1,048,576, and the CPU "
           "interpreter could not run such a case: no test shape here can reveal it")
TORCH_IN_WRAPPER = MistakeClass(
    "triton.torch_in_wrapper", "triton", "computing with torch in the wrapper",
    (("PyTorch compute", r"(calls|computed with|computes with) PyTorch|PyTorch (compute|op)"),))
TORCH_FALLBACK = MistakeClass(
    "triton.torch_fallback", "triton", "try/except falling back to torch",
    (("fallback", r"fall(s|ing)?[- ]?back"), ("try/except", r"try/except")))
MISSING_FREE_TENSOR = MistakeClass(
    "ascendc.missing_free_tensor", "ascendc", "missing FreeTensor",
    (("FreeTensor", r"FreeTensor"), ("leak", r"\bleak")))
HALF_FLOAT_MIX = MistakeClass(
    "ascendc.half_float_mix", "ascendc", "half/float LocalTensor mix",
    (("both tensor types", r"LocalTensor<half>[\s\S]*LocalTensor<float>|"
                           r"LocalTensor<float>[\s\S]*LocalTensor<half>"),),
    failing_dtype_names_it="float16")
TILING_OUT_OF_STEP = MistakeClass(
    "ascendc.tiling_out_of_step", "ascendc", "tiling header and kernel out of step",
    (("constant differs", r"_tiling\.h: \w+ = \d+, but the kernel uses"),
     ("UB overflow", r"UB overflow")))

CLASSES: tuple[MistakeClass, ...] = (
    MISSING_MASK_STORE, MISSING_MASK_LOAD, NON_POW2_BLOCK, INT32_OFFSETS, TORCH_IN_WRAPPER,
    TORCH_FALLBACK, MISSING_FREE_TENSOR, HALF_FLOAT_MIX, TILING_OUT_OF_STEP)


# --- Triton --------------------------------------------------------------------------------
def _drop_store_masks(source: str) -> str:
    # `tl.store(ptr, value, mask=mask)` -> `tl.store(ptr, value)`, in every kernel.
    return substitute(r"^(?P<head>\s*tl\.store\(.*), mask=[^\n]*\)[ \t]*$", r"\g<head>)", source)


def _drop_load_masks(source: str) -> str:
    # `tl.load(ptr, mask=..., other=0)` -> `tl.load(ptr)`: reads past the end of the tensor.
    return substitute(r"(tl\.load\([^\n]*?), mask=[^\n]*?, other=[^,)\n]+\)", r"\1)", source)


def _non_pow2_blocks(source: str) -> str:
    """Block sizes fitted to the data (1000 elements, K = 100) instead of a power of two."""
    edits = ((r"^(?P<indent>[ \t]*)block = _pointwise_block\(.*\)$", "block = 1000"),
             (r"^(?P<indent>[ \t]*)block_m, block_n = _reduction_blocks\(.*\)$", "block_n = 1000"),
             (r"^(?P<indent>[ \t]*)block_m, block_n, block_k = _matmul_blocks\(.*\)$",
              "block_k = 100"))
    found = 0
    for pattern, line in edits:
        source, count = re.subn(pattern, rf"\g<0>\n\g<indent>{line}", source, flags=re.MULTILINE)
        found += count
    if not found:
        raise MutationNotFound("no block size computed in the launcher")
    return source


def _int32_offsets(source: str) -> str:
    # The int64 block base `(tl.zeros([], tl.int64) + block_id)`, where a kernel has one.
    source = re.sub(r"\(tl\.zeros\(\[\], tl\.int64\) \+ (\w+)\)", r"\1", source)
    return substitute(r"(tl\.arange\([^()]*\))\.to\(tl\.int64\)", r"\1", source, flags=0)


def _forward(tree: ast.Module, class_name: str) -> ast.FunctionDef:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    return item
    raise MutationNotFound(f"no {class_name}.forward")


def _statements(source: str, function: ast.FunctionDef) -> str:
    """The function's body as source (its docstring left out), dedented."""
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    lines = source.splitlines()
    first, last = body[0].lineno, body[-1].end_lineno or body[-1].lineno
    return textwrap.dedent("\n".join(lines[first - 1:last]))


def _rewrite_forward(source: str, body: Callable[[str, str], str]) -> str:
    """ModelNew.forward's body replaced by body(launch, reference): `launch` is the
    statement that runs the kernels, `reference` the embedded Model.forward's body."""
    tree = ast.parse(source)
    forward = _forward(tree, "ModelNew")
    returned = forward.body[-1]
    if not isinstance(returned, ast.Return) or returned.value is None:
        raise MutationNotFound("ModelNew.forward does not end in a return")
    launch = ast.get_source_segment(source, returned.value)
    if launch is None:
        raise MutationNotFound("ModelNew.forward's launch has no source")
    reference = _statements(source, _forward(tree, "Model"))
    lines = source.splitlines(keepends=True)
    start, end = forward.body[0].lineno, returned.end_lineno or returned.lineno
    new_body = textwrap.indent(body(launch, reference), " " * 8)
    return "".join([*lines[:start - 1], new_body.rstrip("\n") + "\n", *lines[end:]])


def _torch_in_wrapper(source: str) -> str:
    # The kernels still run (so a kernel is launched), but PyTorch computes the result.
    return _rewrite_forward(source, lambda launch, reference: f"{launch}\n{reference}\n")


def _torch_fallback(source: str) -> str:
    return _rewrite_forward(source, lambda launch, reference: (
        f"try:\n    return {launch}\nexcept Exception:\n"
        f"{textwrap.indent(reference, ' ' * 4)}\n"))


TRITON_MUTATIONS: tuple[Mutation, ...] = (
    Mutation(MISSING_MASK_STORE, "every tl.store without its mask", "kernel", _drop_store_masks),
    Mutation(MISSING_MASK_LOAD, "every tl.load without mask/other", "kernel", _drop_load_masks),
    Mutation(NON_POW2_BLOCK, "launcher sets BLOCK = 1000 (BLOCK_N, BLOCK_K likewise)",
             "kernel", _non_pow2_blocks),
    Mutation(INT32_OFFSETS, "offsets left int32 (no .to(tl.int64), no int64 block base)",
             "kernel", _int32_offsets),
    Mutation(TORCH_IN_WRAPPER, "forward launches the kernels, returns the PyTorch result",
             "kernel", _torch_in_wrapper),
    Mutation(TORCH_FALLBACK, "forward wraps the launch in try/except -> PyTorch", "kernel",
             _torch_fallback),
)


# --- Ascend C ------------------------------------------------------------------------------
def _without_first_free(queue: str) -> Edit:
    def edit(kernel: str) -> str:
        return substitute(rf"^[ \t]*{queue}\d*_\.FreeTensor\(\w+\);[ \t]*\n", "", kernel, count=1)
    return edit


def _float_into_half(kernel: str) -> str:
    # The float32 result written straight into the half output tile (no Cast back).
    return substitute(r"Narrow\((\w+), (\w+), count\);", r"AscendC::Adds(\1, \2, 0.0f, count);",
                      kernel, count=1)


def _half_into_float(kernel: str) -> str:
    # The half input tile handed to a float32 vector op (no Cast up).
    return substitute(r"(AscendC::\w+\(\w+, )x0(, )", r"\1in0\2", kernel, count=1)


def _half_reinterpreted(kernel: str) -> str:
    # The cast "fixed" by reinterpreting the half tile's bytes as float: it compiles.
    return substitute(r"Widen\(in0, [^;]*\)", "in0.template ReinterpretCast<float>()", kernel,
                      count=1)


def _step_constant(name: str, delta: int) -> Edit:
    def edit(text: str) -> str:
        match = re.search(rf"\b{name} = (\d+);", text)
        if match is None:
            raise MutationNotFound(f"no {name} constant")
        value = max(int(match[1]) + delta, 0)
        return text[:match.start(1)] + str(value) + text[match.end(1):]
    return edit


def _fixed_tile_length(kernel: str) -> str:
    # The kernel walks its range in its own tile length, not the one the host sized UB for.
    return substitute(r"tileLength_ = tileLength;", "tileLength_ = 4096;", kernel, count=1)


ASCENDC_MUTATIONS: tuple[Mutation, ...] = (
    Mutation(MISSING_FREE_TENSOR, "input queue's FreeTensor dropped", "kernel",
             _without_first_free("inQueue"), "static"),
    Mutation(MISSING_FREE_TENSOR, "output queue's FreeTensor dropped", "kernel",
             _without_first_free("outQueue"), "static"),
    Mutation(HALF_FLOAT_MIX, "float result passed as the half output tile", "kernel",
             _float_into_half, "typecheck"),
    Mutation(HALF_FLOAT_MIX, "half input tile passed to a float op", "kernel",
             _half_into_float, "typecheck"),
    Mutation(HALF_FLOAT_MIX, "half tile reinterpreted as float (compiles)", "kernel",
             _half_reinterpreted, "cpu_model"),
    Mutation(TILING_OUT_OF_STEP, "header COMPUTE_SLOTS one lower", "tiling",
             _step_constant("COMPUTE_SLOTS", -1), "static", ("COMPUTE_SLOTS",)),
    Mutation(TILING_OUT_OF_STEP, "kernel COMPUTE_SLOTS one higher", "kernel",
             _step_constant("COMPUTE_SLOTS", 1), "static", ("COMPUTE_SLOTS",)),
    Mutation(TILING_OUT_OF_STEP, "kernel BUFFER_NUM one higher", "kernel",
             _step_constant("BUFFER_NUM", 1), "static", ("BUFFER_NUM",)),
    Mutation(TILING_OUT_OF_STEP, "kernel hard-codes tileLength_ = 4096", "kernel",
             _fixed_tile_length, "cpu_model", ("tileLength_?",)),
)
