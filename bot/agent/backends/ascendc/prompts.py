"""Prompts for drafting Ascend C kernels: the programming model, the contract, an example.

The model writes three files: the kernel, the host tiling header and the torch binding;
opbot renders everything else (CMake, build.sh, CPU twin, tests, benchmark) from
runners/ascendc/package.py, so the contract below is what that code expects (see
bot/agent/backends/ascendc/skeleton.py for why the model may not write the rest). Prompts are
tagged by toolchain generation ("legacy": ascendc_library, the default before CANN 9 and
still built by CANN 9; "asc": CANN 9.x's ASC language) because the
kernel qualifiers, pointer types and launch differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache

from bot.agent.backends.ascendc.reply import RENDERED_BY_OPBOT
from bot.agent.prompt_text import fence_data
from runners.ascendc.package import KERNEL_DTYPES, Generation, kernel_file_name, make_names

_GENERATION_NOTES: dict[str, str] = {
    "legacy": """Toolchain: the "legacy" generation (ascendc_library; CANN 8.x, still built by 9.x)
- The kernel file is a .cpp built by ascendc.cmake's ascendc_library(); the host launches \
each entry with ACLRT_LAUNCH_KERNEL(<entry>)(blockDim, stream, args...) from the generated \
aclrtlaunch_<entry>.h.
- Entries are `extern "C" __global__ __aicore__ void <entry>(GM_ADDR x, ...)`; GM_ADDR is \
`__gm__ uint8_t*`.
- CPU twin debugging uses tikicpulib (ICPU_RUN_KF); the macro __CCE_KT_TEST__ or \
ASCENDC_CPU_DEBUG marks CPU builds. The profiler is `msprof op`.""",
    "asc": """Toolchain: CANN 9.x (the "asc" generation, ASC language)
- The kernel file is a .asc built with find_package(ASC) and --npu-arch=dav-2201; the \
host includes it and launches `<entry><<<numBlocks, 0, stream>>>(args...)` (the second \
argument is dynUBufSize, 0).
- Entries are `extern "C" __global__ __vector__ void <entry>(__gm__ uint8_t* x, ...)`; \
pointers are spelled with __gm__ (no GM_ADDR), and there are no aclrtlaunch_* headers.
- CPU twin debugging builds the same source with CMAKE_ASC_RUN_MODE=cpu (macro \
ASCENDC_CPU_DEBUG); qualifiers become empty there, so never overload on __gm__ alone. The \
profiler is `msopprof`.""",
}

_MODEL = """You are an expert Ascend C engineer writing vector (AIV) kernels for Huawei \
Ascend NPUs (Atlas A2/A3, dav-2201). Your kernel is built, tested against a PyTorch \
reference on the NPU, then timed.

The Ascend C programming model
- A launch runs numBlocks blocks; a vector-only kernel's blocks are AIV cores (A2/A3 have \
separate cube (AIC) and vector (AIV) cores, 1 AIC : 2 AIV per AI Core). Each block reads \
AscendC::GetBlockIdx() and works on its own range of global memory (GM).
- Data moves GM -> UB (the core's 192 KB Unified Buffer; 8 KB + 256 B of it are reserved, \
the rest is yours) -> vector unit -> UB -> GM. UB buffers are 32-byte aligned.
- One AscendC::TPipe owns the UB. AscendC::TQue<AscendC::QuePosition::VECIN, BUFFER_NUM> \
queues carry tiles in, VECOUT queues carry results out; pipe.InitBuffer(queue, BUFFER_NUM, \
bytes) sizes them. With BUFFER_NUM = 2 (double buffering) the copy-in of tile i+1 overlaps \
the compute of tile i.
- Every tile follows CopyIn -> Compute -> CopyOut: CopyIn: AllocTensor, DataCopyPad GM->UB, \
EnQue. Compute: DeQue inputs, AllocTensor the output, vector ops, EnQue the output, \
FreeTensor the inputs. CopyOut: DeQue, DataCopyPad UB->GM, FreeTensor. Every AllocTensor \
has exactly one EnQue, DeQue and FreeTensor.
- Temporaries live in AscendC::TBuf<AscendC::TPosition::VECCALC> scratch (pipe.InitBuffer(buf, \
bytes); buf.Get<float>()); slice it with tensor[offset] at 32-byte-aligned offsets.
- Plain DataCopy moves whole 32-byte blocks only. Sizes are rarely multiples of 32 bytes: \
move tiles with AscendC::DataCopyPad(dst, src, AscendC::DataCopyExtParams{1, bytes, 0, 0, \
0}, AscendC::DataCopyPadExtParams<T>{false, 0, 0, 0}) (UB->GM takes no pad params).
- Vector APIs take (dst, src..., count) on LocalTensors: Add, Sub, Mul, Div, Max, Min; \
Adds, Muls, Maxs, Mins, LeakyRelu with a scalar of the tensor's type (write 0.5f, not 0.5); \
Exp, Ln, Abs, Sqrt, Relu; Duplicate(dst, value, count); Cast(dst, src, \
AscendC::RoundMode::CAST_NONE, count) between half and float. An operand may be the \
destination only if they overlap completely; never partially.
- Compute float16 in float32: Cast the input tile to a float scratch tile, compute, Cast back.
- Compose what has no basic instruction: sigmoid(x) = 1 / (1 + exp(-x)); \
tanh(x) = 2 / (1 + exp(-2x)) - 1; prefer Div into a tile of ones over Reciprocal/Rsqrt.
- Core counts and UB size are never constants in code: the host reads GetCoreNumAiv() and \
GetCoreMemSize(UB) from PlatformAscendCManager at run time and passes you the split.
- Include only "kernel_operator.h". Internal headers (inner_*, impl/) vanish between CANN \
releases.
- The kernel and the tiling header are device code checked before any build: no host \
library (no <cmath>, std::exp, printf, files), no macros (use constexpr; the tiling header's \
include guard is the one #define), no line continuations, no token pasting, no tests of \
compiler macros, no attributes or asm. Every element must come out of the Ascend C API.
- Give every dtype its own plain `extern "C"` entry around a templated kernel class: \
templated entry names are mangled differently across CANN releases.

Kernel patterns (the contract below names the one this operator uses)
- elementwise: every input and output has one shape; the host splits the flat elements \
over the cores and into UB tiles.
- rows: reduce over the last dimension, then a pass over the row (softmax, log_softmax, \
RMSNorm, LayerNorm). Each core takes consecutive whole rows; a row must fit in UB. Reduce \
with a tree in UB: copy the row into a power-of-two buffer padded with the neutral value \
(Duplicate 0 or -FLT_MAX first), Add/Max its upper half onto its lower half down to one \
32-byte block, then fold those 8 lanes with GetValue after a V_S flag. Scalar square roots \
and reciprocals are vector ops on a one-block buffer (Duplicate, Sqrt, Div), never libc. \
Module parameters (a norm's weight, bias) come after the inputs as float32 rows.
- matmul: the cube unit through the high-level Matmul API runs only on an Ascend runner; \
opbot's offline checks cannot run it."""

# How a reply carries the files, for every pattern's contract.
_REPLY_FORM = """- Write only these three files. {rendered} are rendered by opbot; a reply \
that writes any of them is rejected.

Reply with the complete files, each in a fenced block whose info string names it:
```cpp file={kernel_file}
...
```
(then ```cpp file={op}_tiling.h and ```cpp file=op.cpp; a file you leave out keeps its \
current text)."""

_CONTRACT = """The contract (opbot's build, CPU twin and tests rely on it)
- The kernel, {kernel_file}, has these entries (one per dtype):
{entries}
- The host passes totalLength (elements of every input and output, all the same shape, \
contiguous), blockLength (elements per block, a multiple of 32 bytes; the last block takes \
what is left: length = min(blockLength, totalLength - GetBlockIdx() * blockLength)) and \
tileLength (elements per UB tile, a multiple of 32 bytes; a block's last tile may be \
shorter), launching blockDim = ceil(totalLength / blockLength) blocks.
- Declare `constexpr uint32_t COMPUTE_SLOTS = <n>;`: the float32 scratch tiles your Compute \
uses. The host picks tileLength so that BUFFER_NUM x {queues} queues x tileLength x \
sizeof(T) plus (COMPUTE_SLOTS + {widen} more for float16) x tileLength x 4 bytes fit the \
usable UB: use no more than that (one TQue per input and per output, BUFFER_NUM = 2, one \
TBuf of the scratch).
- Outputs: {outputs}. Inputs, in order: {inputs}.
- The tiling header, {op}_tiling.h, defines namespace {op}_tiling with struct TilingData \
{{blockDim, totalLength, blockLength, tileLength}} (uint32_t each; blockDim 0 launches \
nothing), ComputeTiling(totalLength, dtypeBytes, cores, ubBytes) returning it, and the \
constants BUFFER_NUM, UB_RESERVED_BYTES, NUM_INPUTS, NUM_OUTPUTS and COMPUTE_SLOTS, equal \
to the kernel's. opbot's CPU twin calls ComputeTiling, and its tiling simulator replays \
these constants against the kernel's before anything is built.
- The binding, op.cpp, registers torch.ops.{namespace}.{op} with \
TORCH_LIBRARY({namespace}, m) and TORCH_LIBRARY_IMPL({namespace}, PrivateUse1, m), reads \
the vector core count and the UB size from PlatformAscendCManager at run time, and \
launches every entry with ComputeTiling's plan on the current NPU stream.
""" + _REPLY_FORM


def system_prompt(generation: Generation) -> str:
    """The programming model, then what differs in this toolchain generation."""
    return f"{_MODEL}\n\n{_GENERATION_NOTES[generation]}"


_ROW_CONTRACT = """The contract (opbot's build, CPU twin and tests rely on it): the rows pattern
- The kernel, {kernel_file}, has these entries (one per dtype):
{entries}
- Inputs ({inputs}) share one shape (..., rowLength): rows = numel / rowLength rows. \
Parameters ({params}) follow them: one row of rowLength float32 values each, the same for \
every row. Outputs ({outputs}) have the inputs' shape and dtype.
- Block b takes rows [b * rowsPerCore, min((b + 1) * rowsPerCore, rows)); row buffers in \
UB are rowStride elements (rowLength rounded up to 16), the reduction tree has \
reduceLength lanes (a power of two >= max(rowLength, 8)).
- Declare `constexpr uint32_t` BUFFER_NUM, NUM_INPUTS, NUM_PARAMS, NUM_OUTPUTS, \
COMPUTE_SLOTS (float32 scratch rows) and STAT_SLOTS (one-block per-row scalars). The host \
refuses a row whose BUFFER_NUM x queues x rowStride x sizeof(T) + (NUM_PARAMS + \
COMPUTE_SLOTS + {widen} more for float16) x rowStride x 4 + reduceLength x 4 + STAT_SLOTS \
x 32 bytes exceed the usable UB.
- The tiling header, {op}_tiling.h, defines namespace {op}_tiling with struct TilingData \
{{blockDim, rows, rowLength, rowsPerCore, rowStride, reduceLength}} (uint32_t each), \
ComputeTiling(rows, rowLength, dtypeBytes, cores, ubBytes) returning it (blockDim 0: no \
fit) and the kernel's constants. The binding, op.cpp, registers \
torch.ops.{namespace}.{op}({arguments}) as for every pattern.
""" + _REPLY_FORM


def _row_contract(op: str, *, inputs: Sequence[str], outputs: int, params: Sequence[str],
                  dtypes: Sequence[str], generation: Generation) -> str:
    pointer = "GM_ADDR" if generation == "legacy" else "__gm__ uint8_t*"
    qualifier = "__aicore__" if generation == "legacy" else "__vector__"
    derived = make_names(op, inputs, outputs, params)
    arguments = ", ".join(f"{pointer} {name}" for name in derived.tensors)
    entries = "\n".join(
        f'  extern "C" __global__ {qualifier} void {op}_{dtype}({arguments}, uint32_t rows, '
        "uint32_t rowLength, uint32_t rowsPerCore, uint32_t rowStride, uint32_t "
        f"reduceLength)  // T = {KERNEL_DTYPES[dtype].ctype}" for dtype in dtypes)
    return _ROW_CONTRACT.format(
        kernel_file=kernel_file_name(op, generation), entries=entries,
        inputs=", ".join(derived.inputs), params=", ".join(derived.params) or "none",
        outputs=", ".join(derived.outputs), widen=len(inputs) + outputs, op=op,
        namespace=derived.namespace, rendered=RENDERED_BY_OPBOT,
        arguments=", ".join([*derived.inputs, *derived.params]))


def kernel_contract(op: str, *, inputs: Sequence[str], outputs: int, dtypes: Sequence[str],
                    generation: Generation, pattern: str = "elementwise",
                    params: Sequence[str] = ()) -> str:
    """The per-operator part: file name, entry signatures, the tiling the host passes."""
    if pattern == "rows":
        return _row_contract(op, inputs=inputs, outputs=outputs, params=params,
                             dtypes=dtypes, generation=generation)
    pointer = "GM_ADDR" if generation == "legacy" else "__gm__ uint8_t*"
    qualifier = "__aicore__" if generation == "legacy" else "__vector__"
    derived = make_names(op, inputs, outputs)  # the names the host code uses
    names = [*derived.inputs, *derived.outputs]
    params = ", ".join(f"{pointer} {name}" for name in names)
    entries = "\n".join(
        f'  extern "C" __global__ {qualifier} void {op}_{dtype}({params}, uint32_t '
        f"totalLength, uint32_t blockLength, uint32_t tileLength)  // T = "
        f"{KERNEL_DTYPES[dtype].ctype}" for dtype in dtypes)
    return _CONTRACT.format(kernel_file=kernel_file_name(op, generation), entries=entries,
                            queues=len(inputs) + outputs, widen=len(inputs) + outputs,
                            outputs=", ".join(derived.outputs),
                            inputs=", ".join(derived.inputs), op=op,
                            namespace=derived.namespace, rendered=RENDERED_BY_OPBOT)


@cache
def row_example(generation: Generation) -> str:
    """The kernel opbot's offline generator writes for the repo's own softmax example
    (examples/ops/softmax), float32: the rows category, with its tree reductions."""
    import sympy
    import torch

    from bot.agent.backends.ascendc.offline import Generated, PackageOptions, generate
    from bot.agent.offline.graph import Graph, Node

    rows, length = (sympy.Symbol(name, positive=True, integer=True) for name in ("r", "d"))
    f32 = torch.float32
    x = Node("x", "input", "input", [], (rows, length), f32, source="user:0")
    peak = Node("amax", "reduce", "amax", [x], (rows, 1), f32, params={"dims": [1]})
    shifted = Node("sub", "pointwise", "sub", [x, peak], (rows, length), f32)
    exp = Node("exp", "pointwise", "exp", [shifted], (rows, length), f32)
    total = Node("sum", "reduce", "sum", [exp], (rows, 1), f32, params={"dims": [1]})
    out = Node("div", "pointwise", "div", [exp, total], (rows, length), f32)
    nodes = [x, peak, shifted, exp, total, out]
    for node in nodes:
        for arg in node.args:
            arg.users.append(node)
    graph = Graph(nodes=nodes, inputs=[x], attributes=[], outputs=[out],
                  output_is_tuple=False, output_container="tensor", user_input_names=["x"],
                  user_input_constants={})
    result = generate([graph], "softmax", PackageOptions(generation=generation))
    if not isinstance(result, Generated):  # the generator covers softmax
        raise RuntimeError(f"the row example did not generate: {result.reason}")
    return result.files[f"ascendc/{kernel_file_name('softmax', generation)}"]


@cache
def worked_example(generation: Generation) -> str:
    """The kernel opbot's offline generator writes for exact GELU, float32 and float16:
    the elementwise category, with scratch slots, a composed activation and widening."""
    import sympy
    import torch

    from bot.agent.backends.ascendc.offline import Generated, PackageOptions, generate
    from bot.agent.offline.graph import Graph, Node

    size = sympy.Symbol("s0", positive=True, integer=True)
    graphs = []
    for dtype in (torch.float32, torch.float16):
        x = Node("x", "input", "input", [], (size,), dtype, source="user:0")
        gelu = Node("gelu", "pointwise", "gelu", [x], (size,), dtype,
                    params={"approximate": "none"})
        x.users.append(gelu)
        graphs.append(Graph(nodes=[x, gelu], inputs=[x], attributes=[], outputs=[gelu],
                            output_is_tuple=False, output_container="tensor",
                            user_input_names=["x"], user_input_constants={}))
    result = generate(graphs, "gelu", PackageOptions(generation=generation))
    if not isinstance(result, Generated):  # the generator always covers gelu
        raise RuntimeError(f"the worked example did not generate: {result.reason}")
    return result.files[f"ascendc/{kernel_file_name('gelu', generation)}"]


def _fenced(files: Mapping[str, str]) -> str:
    return "\n\n".join(f"```cpp file={name}\n{text.strip()}\n```" for name, text in files.items())


def first_request(op: str, reference_source: str, *, inputs: Sequence[str], outputs: int,
                  dtypes: Sequence[str], generation: Generation, files: Mapping[str, str],
                  has_draft: bool, hint: str | None = None, pattern: str = "elementwise",
                  params: Sequence[str] = ()) -> str:
    """The opening user message: the reference, the contract, then the starting point:
    the offline generator's files for this operator when it has them (`has_draft`), else
    the worked example's kernel with the tiling header and binding rendered for this op."""
    parts = [
        f"Operator: {op}",
        f"The reference (PyTorch):\n```python\n{reference_source.strip()}\n```",
        kernel_contract(op, inputs=inputs, outputs=outputs, dtypes=dtypes,
                        generation=generation, pattern=pattern, params=params),
    ]
    kernel = kernel_file_name(op, generation)
    if has_draft:
        parts.append("A correct but unoptimised draft from opbot's offline generator for this "
                     f"same operator, as the starting point:\n\n{_fenced(files)}")
    else:
        rows = pattern == "rows"
        example = row_example(generation) if rows else worked_example(generation)
        category = "rows: softmax" if rows else "elementwise: exact GELU"
        host = {name: text for name, text in files.items() if name != kernel}
        parts.append(f"A worked example of the same category ({category}), verified by "
                     f"opbot, written for the same contract:\n```cpp\n{example.strip()}\n```")
        parts.append("The tiling header and binding opbot renders for this operator's inputs "
                     f"(keep them unless your kernel needs otherwise):\n\n{_fenced(host)}")
    if hint:
        parts.append(fence_data("Notes from the requester", hint))
    parts.append(f"Write the candidate now: {kernel} first, each file in its own ```cpp "
                 "file=NAME block.")
    return "\n\n".join(parts)


def retry_request(feedback: str, writable: Sequence[str]) -> str:
    return (f"Your previous candidate was rejected.\n\n{feedback}\n\nFix it and reply with "
            f"the complete corrected files ({', '.join(writable)}; a file you leave out keeps "
            "its current text), each in a ```cpp file=NAME block.")


def tuning_request(feedback: str, writable: Sequence[str]) -> str:
    return (f"{feedback}\n\nMake it faster without breaking it: reply with the complete "
            f"files you change ({', '.join(writable)}; a file you leave out keeps its current "
            "text), each in a ```cpp file=NAME block. It is verified again before it is "
            "timed.")
