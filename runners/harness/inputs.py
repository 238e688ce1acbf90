"""Input cases: made from a spec, or inferred from a KernelBench reference's get_inputs().

Inferred references get the reference's own inputs (its real shapes and distribution) once,
then cases with odd sizes (not a multiple of any block size, so missing tail handling
shows) and signed values (randn: non-negative inputs hide relu/abs/min bugs), and a repeat
of a case with fresh values (so cached results show).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from runners.base import CaseSpec, InputCase

DTYPES: dict[str, torch.dtype] = {
    "float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32,
    "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}
DTYPE_NAMES = {value: key for key, value in DTYPES.items()}


def dtype_name(dtype: torch.dtype) -> str:
    return DTYPE_NAMES.get(dtype, str(dtype).removeprefix("torch."))


@dataclass
class PreparedCase:
    """A case ready to run: concrete input values on the CPU, and how they were made."""

    name: str
    seed: int
    inputs: list[Any]
    note: str = ""
    repeat_of: str | None = None  # this case re-runs another case's shapes with fresh values
    descriptors: list[InputCase] = field(default_factory=list)
    # How each input is laid out when the forward sees it (runners.harness.tensors).
    layouts: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.layouts:
            self.layouts = ["contiguous"] * len(self.inputs)

    def shapes(self) -> list[list[int]]:
        return [list(value.shape) for value in self.inputs if isinstance(value, torch.Tensor)]

    def dtypes(self) -> list[str]:
        return [dtype_name(value.dtype) for value in self.inputs if isinstance(value, torch.Tensor)]


def make_tensor(item: InputCase, generator: torch.Generator) -> torch.Tensor:
    """One tensor as an InputCase describes it, from a seeded generator (CPU)."""
    dtype = DTYPES[item.dtype]
    shape = tuple(item.shape)
    if item.init == "zeros":
        return torch.zeros(shape, dtype=dtype)
    if item.init == "ones":
        return torch.ones(shape, dtype=dtype)
    if item.init == "arange":
        count = 1
        for size in shape:
            count *= size
        return torch.arange(count, dtype=torch.float64).reshape(shape).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=generator).bool()
    if not dtype.is_floating_point or item.init == "randint":
        low = int(item.low if item.low is not None else 0)
        high = int(item.high if item.high is not None else 10)
        return torch.randint(low, max(high, low + 1), shape, generator=generator).to(dtype)
    if item.init == "rand":
        start = float(item.low) if item.low is not None else 0.0
        stop = float(item.high) if item.high is not None else 1.0
        values = torch.rand(shape, generator=generator, dtype=torch.float32)
        return (values * (stop - start) + start).to(dtype)
    return torch.randn(shape, generator=generator, dtype=torch.float32).to(dtype)


def prepare_spec_case(case: CaseSpec) -> PreparedCase:
    generator = torch.Generator().manual_seed(case.seed)
    values: list[Any] = [make_tensor(item, generator) if item.kind == "tensor" else item.value
                         for item in case.inputs]
    return PreparedCase(name=case.name, seed=case.seed, inputs=values,
                        descriptors=list(case.inputs))


def spec_cases(cases: Sequence[CaseSpec], *, fresh_seed: int) -> list[PreparedCase]:
    """The spec's own cases, plus a fresh-valued repeat of the smallest (for the cache check)."""
    prepared = [prepare_spec_case(case) for case in cases]
    if prepared:
        smallest = min(cases, key=lambda case: sum(_numel(item.shape) for item in case.inputs
                                                    if item.kind == "tensor"))
        repeat = prepare_spec_case(replace(smallest, name=f"{smallest.name}-fresh",
                                           seed=fresh_seed))
        repeat.repeat_of = smallest.name
        prepared.append(repeat)
    return prepared


def _numel(shape: Sequence[int]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


def describe(value: torch.Tensor, shape: Sequence[int] | None = None,
             init: str | None = None) -> InputCase:
    """An InputCase that makes tensors like `value` (signed randn for floats)."""
    dtype = dtype_name(value.dtype)
    target = list(value.shape) if shape is None else list(shape)
    if value.dtype.is_floating_point:
        return InputCase(kind="tensor", shape=target, dtype=dtype, init=init or "randn")
    if value.dtype == torch.bool:
        return InputCase(kind="tensor", shape=target, dtype=dtype, init="randint", low=0, high=2)
    low = int(value.min().item()) if value.numel() else 0
    high = int(value.max().item()) + 1 if value.numel() else 1
    return InputCase(kind="tensor", shape=target, dtype=dtype, init="randint", low=low, high=high)


def _odd_size(size: int, divisor: int) -> int:
    """A smaller size that is odd, hence not a multiple of any power-of-two block."""
    if size <= 2:
        return size
    if size < 8:
        return size if size % 2 else size - 1
    return (size // divisor) | 1


def derive_shapes(shapes: Sequence[Sequence[int]], divisor: int,
                  only_first_dim: bool = False,
                  fixed: Collection[int] = ()) -> list[list[int]]:
    """Map every distinct size consistently, so equal dims (matmul K, broadcasts) stay equal.

    Sizes in `fixed` stay: they are the module's own (in_features, num_features...), tied
    to its parameters or checks, so the reference would reject or mis-read other values.
    """
    mapping = _distinct_odd_sizes(shapes, divisor, only_first_dim, fixed)
    return [[mapping[size] if not (only_first_dim and index > 0) else size
             for index, size in enumerate(shape)] for shape in shapes]


def _distinct_odd_sizes(shapes: Sequence[Sequence[int]], divisor: int, only_first_dim: bool,
                        fixed: Collection[int]) -> dict[int, int]:
    """Each size that changes, mapped to a smaller odd one; sizes that differ stay different
    and in order (112 and 64 both becoming 17 would let a kernel that swaps them pass),
    and none lands on a size that stays."""
    changing = {size for shape in shapes
                for index, size in enumerate(shape) if not (only_first_dim and index > 0)}
    too_small = {size for size in changing if _odd_size(size, divisor) == size}
    staying = ({size for shape in shapes for size in shape} - changing) | set(fixed) | too_small
    mapping = {size: size for size in changing & staying}
    previous = 0
    for size in sorted(changing - staying):
        target = _odd_size(size, divisor)
        while target <= previous or target in staying:
            target += 2  # odd stays odd
        mapping[size] = previous = target
    return mapping


def integers_in(values: Any) -> set[int]:
    """Every int in a (nested) list of init arguments."""
    if isinstance(values, bool):
        return set()
    if isinstance(values, int):
        return {values}
    if isinstance(values, (list, tuple)):
        found: set[int] = set()
        for item in values:
            found |= integers_in(item)
        return found
    return set()


def resample_like(source: torch.Tensor, shape: Sequence[int],
                  generator: torch.Generator) -> torch.Tensor:
    """Values drawn from `source` itself: keeps a reference's domain (positive, normalised...)."""
    flat = source.reshape(-1)
    if flat.numel() == 0:
        return torch.zeros(tuple(shape), dtype=source.dtype)
    picks = torch.randint(0, flat.numel(), (_numel(shape),), generator=generator)
    return flat[picks].reshape(tuple(shape)).clone()


def forward_parameter_names(forward: Callable[..., Any], count: int) -> list[str]:
    try:
        parameters = list(inspect.signature(forward).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    names = [param.name for param in parameters
             if param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD)]
    names = [name for name in names if name != "self"]
    names += [f"input{index}" for index in range(len(names), count)]
    return names[:count]
