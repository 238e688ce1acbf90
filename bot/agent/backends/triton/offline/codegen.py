"""Assemble a readable kernel file: reference, kernels, launcher, ModelNew.

The file reads like a Triton tutorial and imports without a device: nothing runs at import
but the choice of Triton's interpreter when there is no GPU or NPU (it must be made before
any kernel is defined). ModelNew subclasses the reference's Model for its constructor
only, so its parameters are the reference's, created the same way; its forward runs the
kernels and never calls the reference's forward.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

import sympy
import torch

from bot.agent.backends.triton.offline.emit import Emitter
from bot.agent.backends.triton.offline.kernels import (
    KernelSource,
    matmul_kernel,
    pointwise_kernel,
    reduction_kernel,
)
from bot.agent.backends.triton.offline.ops import HELPERS
from bot.agent.backends.triton.offline.plan import Kernel, Plan, make_plan
from bot.agent.offline.graph import Graph, Node, UnsupportedGraphError
from bot.agent.offline.sizes import python_size, symbol_name

_RULE = "# " + "-" * 86


@dataclass(frozen=True)
class GeneratedModule:
    source: str
    kernel_names: list[str]


_LAUNCH_HELPERS = '''def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


# Fast memory a block may fill on an Ascend NPU: half of dav-2201's 192 KB unified buffer,
# the rest left for the compiler's double buffering.
_NPU_BLOCK_BYTES = 96 * 1024


def _fitting(elements: int, streams: int) -> int:
    """The largest power of two of elements that, for every stream, fits the NPU budget."""
    budget = max(32, _NPU_BLOCK_BYTES // (4 * max(streams, 1)))
    return 1 << (min(elements, budget).bit_length() - 1)


@functools.cache
def _npu_cores(index: int, cube: bool) -> int:
    # Read at run time, never hard-coded: SOCs differ in their core counts.
    properties = triton.runtime.driver.active.utils.get_device_properties(index)
    return int(properties["num_aicore" if cube else "num_vectorcore"])


def _programs(blocks: int, device: torch.device, cube: bool = False) -> int:
    """One program a block, but on an NPU one a physical core (kernels loop over blocks)."""
    if device.type == "npu":
        return max(1, min(blocks, _npu_cores(device.index or 0, cube)))
    return max(1, blocks)


def _pointwise_block(numel: int, streams: int, device: torch.device) -> int:
    # The interpreter runs one program at a time: few, large blocks are fastest there.
    if _interpreting():
        return max(16, min(triton.next_power_of_2(max(numel, 1)), 1 << 16))
    if device.type == "npu":
        return _fitting(8192, streams)
    return 1024


def _reduction_blocks(rows: int, cols: int, streams: int,
                      device: torch.device) -> tuple[int, int]:
    if _interpreting():
        tile, widest = 1 << 16, 1 << 16
    elif device.type == "npu":
        tile = _fitting(16384, streams)
        widest = tile
    else:
        tile, widest = 4096, 2048
    block_n = min(triton.next_power_of_2(max(cols, 1)), widest)
    block_m = max(1, min(triton.next_power_of_2(max(rows, 1)), tile // block_n))
    return block_m, block_n


def _matmul_blocks(m: int, n: int, k: int, device: torch.device) -> tuple[int, int, int]:
    if _interpreting():
        return (min(128, max(16, triton.next_power_of_2(m))),
                min(128, max(16, triton.next_power_of_2(n))),
                min(256, max(16, triton.next_power_of_2(k))))
    return 64, 64, 32


def _fp32_dot(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.float32 in (a.dtype, b.dtype) or a.dtype != b.dtype


def _attribute(module: torch.nn.Module, path: str) -> torch.Tensor:
    return functools.reduce(getattr, path.split("."), module)
'''

_HELPER_MULTIPLY = '''@triton.jit
def _multiply(a, b):
    return a * b
'''


def _dtype_code(dtype: torch.dtype) -> str:
    return f"torch.{str(dtype).removeprefix('torch.')}"


class _VariantWriter:
    """Kernels and a launcher for one traced signature (input ranks and dtypes)."""

    def __init__(self, graph: Graph, plan: Plan, suffix: str) -> None:
        self.graph = graph
        self.plan = plan
        self.suffix = suffix
        self.buffers: dict[Node, str] = {node: f"buf_{node.name}" for node in plan.stored}
        self.input_names = {node: node.name for node in graph.inputs + graph.attributes}
        self.primary = next((node for node in graph.inputs if node.dtype.is_floating_point),
                            None)

    # -- launcher ------------------------------------------------------------------------

    def bind_sizes(self) -> list[str]:
        lines: list[str] = []
        bound: set[sympy.Symbol] = set()
        for node in self.graph.inputs:
            lines.append(f"if {node.name}.dim() != {node.rank}:")
            lines.append(f"    raise ValueError(f\"{node.name}: expected {node.rank} dims, got "
                         f"{{{node.name}.dim()}}\")")
            for dim, size in enumerate(node.shape):
                if isinstance(size, sympy.Symbol) and size not in bound:
                    bound.add(size)
                    lines.append(f"{symbol_name(size)} = {node.name}.shape[{dim}]")
        needed = set().union(*(size.free_symbols for node in self.graph.nodes
                               for size in node.shape))
        if not needed <= bound:
            missing = ", ".join(sorted(str(symbol) for symbol in needed - bound))
            raise UnsupportedGraphError([], f"sizes {missing} are not an input's dimension")
        for node in self.graph.inputs:
            for dim, size in enumerate(node.shape):
                if not isinstance(size, sympy.Symbol):
                    expected = python_size(size)
                    lines.append(f"if {node.name}.shape[{dim}] != {expected}:")
                    lines.append(f"    raise ValueError(f\"{node.name}: dim {dim} must be "
                                 f"{{{expected}}}, got {{{node.name}.shape[{dim}]}}\")")
        return lines

    def buffer_dtype(self, node: Node) -> str:
        if node in self.graph.outputs:
            if self.primary is not None and node.dtype == self.primary.dtype:
                return f"{self.primary.name}.dtype"
            return _dtype_code(node.dtype)
        return "torch.float32" if node.dtype.is_floating_point else _dtype_code(node.dtype)

    def view_expr(self, node: Node, available: dict[Node, str]) -> str:
        """Python for `node` as a view of a stored tensor or an input (launcher side)."""
        if node in available:
            return available[node]
        if node.kind == "input":
            return node.name
        if node.kind != "view":
            raise UnsupportedGraphError([], f"{node.name} is not a view of a stored tensor")
        source = self.view_expr(node.args[0], available)
        params = node.params
        sizes = ", ".join(python_size(size) for size in node.shape)
        if node.op == "permute":
            return f"{source}.permute({', '.join(str(d) for d in params['dims'])})"
        if node.op == "reshape":
            return f"{source}.reshape({sizes}{',' if node.rank == 1 else ''})"
        if node.op == "expand":
            return f"{source}.expand({sizes}{',' if node.rank == 1 else ''})"
        if node.op == "broadcast_in_dim":
            bdims = params["broadcast_dims"]
            with_ones = ["1"] * node.rank
            for position, dim in enumerate(bdims):
                with_ones[dim] = python_size(node.args[0].shape[position])
            return f"{source}.reshape({', '.join(with_ones)}).expand({sizes})"
        if node.op == "slice":
            dim, start, step = params["dim"], python_size(params["start"]), params["step"]
            length = python_size(node.shape[dim])
            if step == 1:
                return f"{source}.narrow({dim}, {start}, {length})"
            strided = ", ".join([":"] * dim + [f"::{step}"])
            return f"{source}.narrow({dim}, {start}, ({length} - 1) * {step} + 1)[{strided}]"
        if node.op == "select":
            return f"{source}.select({params['dim']}, {python_size(params['index'])})"
        raise UnsupportedGraphError([f"view {node.op}"])

    def kernels_and_launch(self) -> tuple[list[KernelSource], list[str]]:
        sources: list[KernelSource] = []
        launch: list[str] = []
        available: dict[Node, str] = {}
        device_source = (self.graph.inputs or self.graph.attributes)[0].name
        launch.append(f"device = {device_source}.device")
        for number, kernel in enumerate(self.plan.kernels):
            node = kernel.stores
            buffer = self.buffers[node]
            shape = ", ".join(python_size(size) for size in node.shape)
            launch.append(f"{buffer} = torch.empty(({shape}{',' if node.rank == 1 else ''}), "
                          f"device=device, dtype={self.buffer_dtype(node)})")
            name = f"_kernel{self.suffix}{number}_{kernel.kind}_{node.op}"
            emitter = Emitter(materialized=dict(available))
            source = self._kernel(kernel, name, emitter, buffer=buffer, available=available,
                                  launch=launch)
            sources.append(source)
            launch.extend(source.launch)
            available[node] = buffer
        return sources, launch

    def _kernel(self, kernel: Kernel, name: str, emitter: Emitter, *, buffer: str,
                available: dict[Node, str], launch: list[str]) -> KernelSource:
        if kernel.kind == "pointwise":
            return pointwise_kernel(name, kernel.stores, emitter, buffer)
        if kernel.kind == "reduce":
            if kernel.stores.op == "prod":
                emitter.helpers.add("_multiply")
            return reduction_kernel(name, kernel.stores, emitter, buffer)
        product = kernel.matmul
        assert product is not None
        operands = []
        for side, operand in zip(("a", "b"), product.args, strict=True):
            variable = f"{buffer}_{side}"
            launch.append(f"{variable} = {self.view_expr(operand, available)}")
            operands.append(variable)
        return matmul_kernel(name, product, kernel.stores, emitter, buffer=buffer,
                             operand_exprs=(operands[0], operands[1]))

    def outputs(self, available: dict[Node, str]) -> str:
        items = []
        for output in self.graph.outputs:
            if output in self.plan.output_views:
                items.append(self.view_expr(output, available))
            else:
                items.append(self.buffers[output])
        if self.graph.output_container == "tensor":
            return items[0]
        if self.graph.output_container == "list":
            return f"[{', '.join(items)}]"
        return f"({', '.join(items)}{',' if len(items) == 1 else ''})"

    # -- the variant --------------------------------------------------------------------

    def launcher_name(self) -> str:
        return f"_launch{self.suffix}"

    def render(self) -> tuple[list[KernelSource], str]:
        kernels, launch = self.kernels_and_launch()
        arguments = ["module", *[node.name for node in self.graph.inputs]]
        launcher = [f"def {self.launcher_name()}({', '.join(arguments)}):",
                    '    """Run the kernels in order on the same device as the inputs."""']
        launcher += [f"    {node.name} = _attribute(module, "
                     f"\"{node.source.removeprefix('attr:')}\")"
                     for node in self.graph.attributes]
        launcher += [f"    {line}" for line in self.bind_sizes() + launch]
        available = {node: self.buffers[node] for node in self.plan.stored}
        launcher.append(f"    return {self.outputs(available)}")
        return kernels, "\n".join(launcher)

    def signature(self) -> tuple[tuple[int, str], ...]:
        return tuple((node.rank, str(node.dtype).removeprefix("torch."))
                     for node in self.graph.inputs)


def _model_new(graph: Graph, writers: list[_VariantWriter]) -> str:
    names = graph.user_input_names
    arguments = ", ".join(["self", *names])
    tensors = ", ".join(node.name for node in graph.inputs)
    checks = []
    for index, value in graph.user_input_constants.items():
        name = names[index]
        checks.append(f"        if {name} != {value!r}:")
        checks.append(f"            raise ValueError(\"{name} must be {value!r}: the "
                      f"kernels were generated for that value\")")
    if len(writers) == 1:
        call = f"        return {writers[0].launcher_name()}({', '.join(['self', tensors])})"
    else:
        call = f"        return _variant({tensors})({', '.join(['self', tensors])})"
    return "\n".join([
        "class ModelNew(Model):",
        '    """Model\'s constructor and parameters; forward runs the Triton kernels above."""',
        "",
        f"    def forward({arguments}):",
        *checks,
        call,
    ]) + "\n"


def _dispatch(writers: list[_VariantWriter]) -> str:
    """Pick the launcher traced for the inputs' ranks and dtypes (else the same ranks)."""
    entries = "\n".join(f"    {writer.signature()!r}: {writer.launcher_name()},"
                        for writer in writers)
    return f'''_VARIANTS = {{
{entries}
}}


def _variant(*tensors):
    key = tuple((t.dim(), str(t.dtype).removeprefix("torch.")) for t in tensors)
    if key in _VARIANTS:
        return _VARIANTS[key]
    ranks = [rank for rank, _ in key]
    for known, launch in _VARIANTS.items():
        if [rank for rank, _ in known] == ranks:
            return launch
    raise ValueError(f"no kernels for inputs {{key}}; generated for {{list(_VARIANTS)}}")
'''


def _split_future_imports(source: str) -> tuple[list[str], str]:
    future = [line for line in source.splitlines() if line.startswith("from __future__")]
    rest = "\n".join(line for line in source.splitlines()
                     if not line.startswith("from __future__"))
    return future, rest


def _module_docstring(op_name: str) -> str:
    return textwrap.dedent(f'''\
        """{op_name}: Triton kernels generated by opbot's offline generator.

        Sections, as in Triton's tutorials: the PyTorch reference, the kernels, the launcher
        (block sizes, grids, buffers) and ModelNew, a drop-in for the reference's Model.
        Importing this file runs nothing but the choice of the interpreter on a machine
        without a GPU or NPU.
        """
        ''')


def generate_module(graphs: list[Graph], reference_source: str,
                    op_name: str) -> GeneratedModule:
    """One kernel file for one or more traced signatures of the same reference."""
    writers = []
    for number, graph in enumerate(graphs):
        if not graph.inputs and not graph.attributes:
            raise UnsupportedGraphError([], "the reference takes no tensor")
        suffix = "" if len(graphs) == 1 else f"_v{number}_"
        writers.append(_VariantWriter(graph, make_plan(graph), suffix))
    kernels: list[KernelSource] = []
    launchers: list[str] = []
    for writer in writers:
        variant_kernels, launcher = writer.render()
        kernels += variant_kernels
        launchers.append(launcher)
    helpers = set().union(*(kernel.helpers for kernel in kernels)) if kernels else set()
    future, reference = _split_future_imports(reference_source)
    parts = [
        _module_docstring(op_name), *future,
        "import functools", "import os", "", "import torch", "",
        "if not torch.cuda.is_available() and not hasattr(torch, \"npu\"):",
        "    # No GPU or NPU: Triton's interpreter runs the kernels on the CPU. Chosen before",
        "    # any kernel is defined, because @triton.jit reads it then.",
        "    os.environ.setdefault(\"TRITON_INTERPRET\", \"1\")",
        "", "import triton", "import triton.language as tl", "",
        _RULE, "# Reference: the PyTorch module these kernels must match", _RULE,
        reference.strip(), "", "",
        _RULE, "# Kernels", _RULE,
    ]
    for helper in sorted(helpers):
        parts += [HELPERS.get(helper, _HELPER_MULTIPLY if helper == "_multiply" else ""), ""]
    for kernel in kernels:
        parts += [kernel.source, "", ""]
    parts += [_RULE, "# Launcher", _RULE, _LAUNCH_HELPERS, ""]
    for launcher in launchers:
        parts += [launcher, "", ""]
    if len(writers) > 1:
        parts.append(_dispatch(writers))
    parts += [_RULE, "# ModelNew: the reference's constructor, a forward that runs the kernels",
              _RULE, _model_new(graphs[0], writers)]
    return GeneratedModule(source="\n".join(parts).rstrip() + "\n",
                           kernel_names=[kernel.name for kernel in kernels])
