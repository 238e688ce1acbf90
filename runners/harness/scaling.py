"""Scaled-down shapes for references too big for the CPU interpreter.

KernelBench references come with GPU-sized inputs (4096x393216 activations, 4096^3
matmuls): on Triton's CPU interpreter one such case runs for hours, and just drawing its
inputs takes gigabytes. Before anything is allocated, the reference runs once on the meta
device (shapes, no data) to estimate its work: elements moved (inputs, parameters,
outputs) and FLOPs (matmuls and convolutions counted as 2MNK by torch's FLOP counter,
anything else as its elements). Past the budget, and only on the CPU, every size is scaled
by one factor, keeping rank and oddness (an odd size stays odd, sizes up to
`SMALLEST_SCALED` stay as they are, so a 1 stays 1), and equal sizes stay equal (matmul K,
broadcast partners, the normalized shape in the init arguments, module-level constants).
A plan holds only if the reference runs on meta tensors of the scaled shapes and its output
dims scale with them; a reference whose forward fixes its sizes fails that test and is
answered at once (`UnscalableError`), not after a timeout.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from runners.base import CaseSpec, InputCase
from runners.harness.inputs import DTYPES, integers_in

# What `opbot generate` verifies in about a minute on the interpreter, which runs the
# candidate block by block in numpy on several cases (tails, repeats, a strided one) plus
# timing trials. Measured on a 2-core CI box: one run of a 128x12288 ReLU (3e6 elements
# moved) took 0.5 s, of a 512^3 matmul (2.7e8 FLOPs) 2 s; each whole generate took 50-70 s.
ELEMENT_BUDGET = 1 << 22
FLOP_BUDGET = 1 << 28
SMALLEST_SCALED = 16  # sizes up to this stay: 1, channel counts, small kernels
_FACTOR_STEPS = 40  # factors 2^(-k/2): down to ~1e-6, more than any real reference needs
NOTE_SUFFIX = "verified on scaled shapes on the CPU interpreter; run on a device for the real sizes"


class UnscalableError(Exception):
    """The reference is past the budget and its sizes cannot be scaled from the outside."""


@dataclass(frozen=True)
class Work:
    """What one run of the reference costs: elements read and written, and FLOPs."""

    elements: int
    flops: int

    def within_budget(self) -> bool:
        return self.elements <= ELEMENT_BUDGET and self.flops <= FLOP_BUDGET

    def describe(self) -> str:
        return f"{self.elements:.3g} elements moved, {self.flops:.3g} FLOPs"

    def to_json(self) -> dict[str, int]:
        return {"elements": self.elements, "flops": self.flops}


def _distinct_sizes(sizes: frozenset[int], factor: float,
                    fixed: frozenset[int]) -> dict[int, int]:
    """Every known size scaled, and sizes that differ before still differ after, in the
    same order and parity: a kernel that reads the batch from the feature dim must not pass
    because both became 16. The sizes that stay (small or fixed) are kept out of the way."""
    return dict(_distinct_sizes_cached(sizes, factor, fixed))


@functools.lru_cache(maxsize=256)
def _distinct_sizes_cached(sizes: frozenset[int], factor: float,
                           fixed: frozenset[int]) -> tuple[tuple[int, int], ...]:
    kept = {size for size in sizes if size in fixed or scaled_size(size, factor) == size}
    mapping = {size: size for size in kept}
    previous = max((size for size in kept if size <= SMALLEST_SCALED), default=0)
    for size in sorted(sizes - kept):
        target = scaled_size(size, factor)
        while target <= previous or target in kept:
            target += 1 if (target + 1) % 2 == size % 2 else 2
        mapping[size] = target
        previous = target
    return tuple(sorted(mapping.items()))


def scaled_size(size: int, factor: float) -> int:
    """`size` times `factor`, never below SMALLEST_SCALED (nor above `size`), same parity."""
    if size <= SMALLEST_SCALED or factor >= 1:
        return size
    target = max(SMALLEST_SCALED, round(size * factor))
    if target % 2 != size % 2:
        target += 1 if target + 1 <= size else -1
    return min(target, size)


@dataclass(frozen=True)
class ScalePlan:
    """One factor for every size, except the `fixed` ones."""

    factor: float
    fixed: frozenset[int] = frozenset()
    # The reference's sizes (input dims, init-argument ints): kept distinct when scaled, and
    # the only module constants rewritten unless `all_constants` (see _constant_variants).
    sizes: frozenset[int] = frozenset()
    all_constants: bool = False
    before: Work | None = None
    after: Work | None = None
    shapes_before: list[list[int]] = field(default_factory=list)
    shapes_after: list[list[int]] = field(default_factory=list)
    init_before: list[Any] = field(default_factory=list)
    init_after: list[Any] = field(default_factory=list)

    def size(self, size: int) -> int:
        if size in self.fixed:
            return size
        if size in self.sizes:
            return _distinct_sizes(self.sizes, self.factor, self.fixed)[size]
        return scaled_size(size, self.factor)

    def rewrites(self, value: Any) -> bool:
        """Whether a module constant is one of the reference's sizes, hence scaled: an int
        that is no size (a head count, a vocabulary id) keeps what the reference computes."""
        return self.all_constants or integers_in(value) <= self.sizes

    def shape(self, shape: Sequence[int]) -> list[int]:
        return [self.size(int(dim)) for dim in shape]

    def value(self, value: Any) -> Any:
        """Ints (sizes) inside init arguments or module constants, scaled; the rest as is."""
        if isinstance(value, bool):
            return value
        if isinstance(value, int):
            return self.size(value)
        if isinstance(value, (list, tuple)):
            return type(value)(self.value(item) for item in value)
        return value

    def note(self) -> str:
        shapes = "; ".join(f"{_render(a)} -> {_render(b)}"
                           for a, b in zip(self.shapes_before, self.shapes_after, strict=False)
                           if a != b)
        init = (f", init args {self.init_before} -> {self.init_after}"
                if self.init_before != self.init_after else "")
        work = (f" (work {self.before.describe()}, past the CPU budget of "
                f"{ELEMENT_BUDGET:.3g} elements / {FLOP_BUDGET:.3g} FLOPs, -> "
                f"{self.after.describe()})" if self.before and self.after else "")
        return f"Shapes scaled: {shapes}{init}{work}: {NOTE_SUFFIX}."

    def to_json(self) -> dict[str, Any]:
        return {"factor": self.factor, "fixed": sorted(self.fixed),
                "from": self.shapes_before, "to": self.shapes_after,
                "init_args_from": _plain(self.init_before), "init_args_to": _plain(self.init_after),
                "work_from": self.before.to_json() if self.before else None,
                "work_to": self.after.to_json() if self.after else None, "note": self.note()}


# -- running on the meta device --------------------------------------------------------------


def meta_init_args(module: ModuleType) -> list[Any]:
    """get_init_inputs() with every tensor it makes on the meta device."""
    get_init = getattr(module, "get_init_inputs", None)
    if get_init is None:
        return []
    with torch.device("meta"):
        return list(get_init())


def meta_inputs(module: ModuleType) -> list[Any]:
    """get_inputs() on the meta device: the shapes and dtypes, no data (no 6 GB tensors)."""
    with torch.device("meta"):
        return list(module.get_inputs())


def meta_like(values: Sequence[Any], shapes: Sequence[Sequence[int]]) -> list[Any]:
    """Meta tensors like `values` (dtypes) at `shapes`, one shape per tensor; the rest as is."""
    shape_iter = iter(shapes)
    return [torch.empty(tuple(next(shape_iter)), dtype=value.dtype, device="meta")
            if isinstance(value, torch.Tensor) else value for value in values]


def estimate(module: ModuleType, init_args: Sequence[Any],
             inputs: Sequence[Any]) -> tuple[Work, list[list[int]]]:
    """The work of one forward on `inputs` (meta tensors), and the output shapes."""
    counter = FlopCounterMode(display=False)
    # Tensors the forward makes itself (torch.ones(4096, 4096)) land on meta too.
    with torch.device("meta"):
        model = module.Model(*init_args)
        with torch.no_grad(), counter:
            output = model(*inputs)
    outputs = [leaf for leaf in _leaves(output) if isinstance(leaf, torch.Tensor)]
    parameters = [value for value in _state(model) if isinstance(value, torch.Tensor)]
    elements = sum(value.numel() for value in [*_tensors(inputs), *parameters, *outputs])
    flops = int(counter.get_total_flops()) or elements
    return Work(elements=elements, flops=flops), [list(value.shape) for value in outputs]


@contextlib.contextmanager
def patched_constants(module: ModuleType, plan: ScalePlan) -> Iterator[None]:
    """The module's int (and int tuple) constants scaled for the duration: a forward or a
    get_inputs() that reads `batch_size` sees the scaled one."""
    saved = apply_to_constants(module, plan)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def apply_to_constants(module: ModuleType, plan: ScalePlan) -> dict[str, Any]:
    """Scale the module's size constants in place; the old values, by name."""
    saved: dict[str, Any] = {}
    for name, value in list(vars(module).items()):
        if name.startswith("__") or not _is_size_constant(value) or not plan.rewrites(value):
            continue
        scaled = plan.value(value)
        if scaled != value:
            saved[name] = value
            setattr(module, name, scaled)
    return saved


def on_accelerator() -> bool:
    """Whether kernels run on a device here (real sizes) rather than the CPU interpreter."""
    if torch.cuda.is_available():
        return True
    try:
        import torch_npu  # noqa: F401 - fails without CANN; the CPU it is
    except Exception:  # noqa: BLE001 - torch_npu without CANN fails in many ways
        return False
    npu = getattr(torch, "npu", None)
    return bool(npu is not None and npu.is_available())


# -- the plan ------------------------------------------------------------------------------


def plan_scaling(module: ModuleType, init_args: Sequence[Any],
                 inputs: Sequence[Any]) -> ScalePlan | None:
    """The plan that brings the reference within budget, None when it is within already
    (or cannot be run on meta tensors at all: then it runs as it is).
    `inputs` are meta tensors (or values) at the reference's own sizes.
    UnscalableError when it is past the budget and no plan runs."""
    try:
        before, outputs = estimate(module, init_args, inputs)
    except Exception as exc:  # noqa: BLE001 - not meta-friendly (.item(), nonzero)
        _refuse_if_inputs_too_big(inputs, exc)
        return None  # small inputs: run it as it is
    if before.within_budget():
        return None
    shapes = [list(value.shape) for value in _tensors(inputs)]
    sizes = frozenset(dim for shape in shapes for dim in shape) | frozenset(
        integers_in(list(init_args)))
    first_error = ""
    for fixed, all_constants in _plan_variants(init_args):
        for step in range(1, _FACTOR_STEPS + 1):
            plan = ScalePlan(factor=0.5 ** (step / 2), fixed=fixed, sizes=sizes,
                             all_constants=all_constants)
            try:
                after = _probe(module, plan, init_args, inputs, outputs=outputs)
            except Exception as exc:  # noqa: BLE001 - user code rejecting the scaled sizes
                first_error = first_error or _first_line(exc)
                continue
            if after.within_budget() or _smallest(plan, shapes):
                return ScalePlan(factor=plan.factor, fixed=fixed, sizes=sizes,
                                 all_constants=all_constants, before=before, after=after,
                                 shapes_before=shapes, shapes_after=[plan.shape(s) for s in shapes],
                                 init_before=list(init_args),
                                 init_after=[plan.value(arg) for arg in init_args])
    raise UnscalableError(
        f"the reference's work ({before.describe()}) is past what the CPU interpreter "
        f"verifies in minutes ({ELEMENT_BUDGET:.3g} elements / {FLOP_BUDGET:.3g} FLOPs), and "
        f"its sizes cannot be scaled down: on smaller inputs it fails ({first_error}) — its "
        "forward fixes sizes. Run it on a device, or make its sizes come from get_inputs() / "
        "get_init_inputs() (or give an op.yaml smaller inputs)")


def plan_for_reference(module: ModuleType, init_args: Sequence[Any],
                       cases: Sequence[CaseSpec]) -> ScalePlan | None:
    """The plan for a reference run on `cases` (the largest decides), or on its own
    get_inputs() when there are none."""
    if cases:
        largest = max(cases, key=lambda case: sum(_count(item.shape) for item in case.inputs
                                                   if item.kind == "tensor"))
        inputs = case_meta_inputs(largest)
    else:
        try:
            inputs = meta_inputs(module)
        except Exception:  # noqa: BLE001 - get_inputs() not meta-friendly: run it as it is
            return None
    return plan_scaling(module, init_args, inputs)


def case_meta_inputs(case: CaseSpec) -> list[Any]:
    return [torch.empty(tuple(item.shape), dtype=DTYPES[item.dtype], device="meta")
            if item.kind == "tensor" else item.value for item in case.inputs]


def scale_case(case: CaseSpec, plan: ScalePlan) -> CaseSpec:
    """The case with every tensor input at the plan's shape."""
    return CaseSpec(name=case.name, seed=case.seed, inputs=[
        InputCase(**{**item.to_json(), "shape": plan.shape(item.shape)})
        if item.kind == "tensor" else item for item in case.inputs])


def scaled_inputs(plan: ScalePlan, get_inputs: Callable[[], Any],
                  generator: torch.Generator) -> list[Any]:
    """The reference's own get_inputs() at the plan's shapes (its size constants are scaled);
    when it spells sizes out, inputs drawn at those shapes instead: floats signed normal,
    integers by replaying the call that made them (randint's bounds, arange's ends) with
    its sizes scaled, so indices still span the scaled table rather than collapsing to 0/1.
    UnscalableError for an integer input made some other way."""
    with torch.device("meta"), _recorded_factories() as calls:
        meta = list(get_inputs())
    if [list(value.shape) for value in _tensors(meta)] == plan.shapes_after:
        return list(get_inputs())
    return [_draw(plan, value, shape, calls, generator, index=index)
            if isinstance(value, torch.Tensor) else value
            for index, (value, shape) in enumerate(
                zip(meta, _shapes_per_value(meta, plan.shapes_after), strict=True))]


# Integer factories whose calls get_inputs() makes on meta are recorded, to replay scaled.
_FACTORIES = ("randint", "arange")
_Call = tuple[str, tuple[Any, ...], dict[str, Any]]


@contextlib.contextmanager
def _recorded_factories() -> Iterator[dict[int, _Call]]:
    """torch.randint / torch.arange calls by the id of the tensor each made (kept alive so
    an id is not reused)."""
    calls: dict[int, _Call] = {}
    made: list[torch.Tensor] = []
    originals = {name: getattr(torch, name) for name in _FACTORIES}

    def recording(name: str) -> Callable[..., Any]:
        def factory(*args: Any, **kwargs: Any) -> Any:
            result = originals[name](*args, **kwargs)
            made.append(result)
            calls[id(result)] = (name, args, kwargs)
            return result
        return factory

    for name in _FACTORIES:
        setattr(torch, name, recording(name))
    try:
        yield calls
    finally:
        for name, original in originals.items():
            setattr(torch, name, original)


def _draw(plan: ScalePlan, value: torch.Tensor, shape: Sequence[int],
          calls: dict[int, _Call], generator: torch.Generator, *, index: int) -> torch.Tensor:
    if value.dtype.is_floating_point:
        return torch.randn(tuple(shape), generator=generator).to(value.dtype)
    if value.dtype == torch.bool:
        return torch.randint(0, 2, tuple(shape), generator=generator).to(value.dtype)
    call = calls.get(id(value))
    replayed = _replay(plan, call, shape, value.dtype, generator) if call else None
    if replayed is None or list(replayed.shape) != list(shape):
        raise UnscalableError(
            f"cannot scale: get_inputs() spells its sizes out and makes integer input "
            f"{index} in a way that cannot be replayed at the scaled sizes (only "
            f"torch.randint and torch.arange can), so its values (indices, counts) would not "
            "mean what they do at the real sizes; run on a device for the real sizes, or "
            "make its sizes module constants that get_inputs() reads")
    return replayed


def _replay(plan: ScalePlan, call: _Call, shape: Sequence[int], dtype: torch.dtype,
            generator: torch.Generator) -> torch.Tensor | None:
    """The recorded factory call again with its bounds that are sizes scaled like them."""
    name, args, kwargs = call
    if name == "arange":
        bounds = [plan.size(arg) if _is_size(plan, arg) else arg for arg in args]
        return torch.arange(*bounds, dtype=dtype)
    ints = [arg for arg in args if isinstance(arg, int) and not isinstance(arg, bool)]
    ints += [kwargs[key] for key in ("low", "high") if isinstance(kwargs.get(key), int)]
    if not 1 <= len(ints) <= 2:
        return None
    low, high = (0, ints[0]) if len(ints) == 1 else (ints[0], ints[1])
    low, high = (plan.size(bound) if _is_size(plan, bound) else bound for bound in (low, high))
    return torch.randint(low, high, tuple(shape), generator=generator).to(dtype)


def _is_size(plan: ScalePlan, value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value in plan.sizes


def _shapes_per_value(values: Sequence[Any], shapes: Sequence[Sequence[int]]) -> list[Any]:
    shape_iter = iter(shapes)
    return [next(shape_iter) if isinstance(value, torch.Tensor) else None for value in values]


def _probe(module: ModuleType, plan: ScalePlan, init_args: Sequence[Any],
           inputs: Sequence[Any], *, outputs: list[list[int]]) -> Work:
    """The work at the plan's sizes; raises when the reference rejects them or its output
    dims do not scale with its inputs (a reshape to constants)."""
    shapes = [list(value.shape) for value in _tensors(inputs)]
    sizes = {dim for shape in shapes for dim in shape}
    scaled_inputs = meta_like(inputs, [plan.shape(shape) for shape in shapes])
    with patched_constants(module, plan):
        after, scaled_outputs = estimate(module, [plan.value(arg) for arg in init_args],
                                         scaled_inputs)
    expected = [[plan.size(dim) if dim in sizes else None for dim in shape] for shape in outputs]
    if len(scaled_outputs) != len(expected) or any(
            len(got) != len(want) or any(w is not None and g != w for g, w in zip(got, want,
                                                                                 strict=True))
            for got, want in zip(scaled_outputs, expected, strict=True)):
        raise ValueError(f"its output shapes {scaled_outputs} do not follow the scaled inputs "
                         f"{[plan.shape(shape) for shape in shapes]}")
    return after


def _plan_variants(init_args: Sequence[Any]) -> list[tuple[frozenset[int], bool]]:
    """Scale everything; failing that, keep the init arguments' sizes (a module built for
    one size whose forward checks it). Module constants: first only those equal to a size;
    every int one only when the reference does not run otherwise (rows * cols flattened)."""
    fixed = frozenset(size for size in integers_in(list(init_args)) if size > SMALLEST_SCALED)
    fixed_variants = [frozenset(), fixed] if fixed else [frozenset()]
    return [(variant, all_constants) for all_constants in (False, True)
            for variant in fixed_variants]


def _refuse_if_inputs_too_big(inputs: Sequence[Any], exc: BaseException) -> None:
    """A forward that cannot run on meta tensors (.item(), nonzero, shapes from data) runs
    on real ones: past the budget that is hours or an out-of-memory death blamed on the
    candidate, so refuse now."""
    elements = sum(value.numel() for value in _tensors(inputs))
    if elements > ELEMENT_BUDGET:
        raise UnscalableError(
            f"cannot scale: forward needs real data ({_first_line(exc)}), and its inputs "
            f"alone ({elements:.3g} elements) are past what the CPU interpreter verifies in "
            f"minutes ({ELEMENT_BUDGET:.3g} elements); run on a device for the real sizes") \
            from None


def _smallest(plan: ScalePlan, shapes: list[list[int]]) -> bool:
    """Whether a smaller factor would change nothing more (every size at its floor)."""
    finer = ScalePlan(factor=plan.factor / 2, fixed=plan.fixed, sizes=plan.sizes)
    return all(finer.shape(shape) == plan.shape(shape) for shape in shapes)


# -- helpers ---------------------------------------------------------------------------------


def _is_size_constant(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, tuple) and bool(value) and all(
        isinstance(item, int) and not isinstance(item, bool) for item in value)


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def _tensors(values: Sequence[Any]) -> list[torch.Tensor]:
    return [value for value in values if isinstance(value, torch.Tensor)]


def _state(model: Any) -> list[Any]:
    state: Callable[[], dict[str, Any]] | None = getattr(model, "state_dict", None)
    try:
        return list(state().values()) if state is not None else []
    except Exception:  # noqa: BLE001 - not an nn.Module
        return []


def _count(shape: Sequence[int]) -> int:
    count = 1
    for size in shape:
        count *= int(size)
    return count


def _render(shape: Sequence[int]) -> str:
    return "x".join(str(dim) for dim in shape) or "scalar"


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return repr(value)


def _first_line(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {text[:200]}"
