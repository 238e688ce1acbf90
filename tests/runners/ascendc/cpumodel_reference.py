"""A NumPy model of the vector instructions the CPU model implements, for its tests.

The layout rules (repeats of 256 bytes, 32-byte blocks, block and repeat strides counted in
blocks, the mask in normal and counter mode) are written here independently of the C++ side;
the arithmetic is NumPy's (or exact float64 then one rounding, which is IEEE's rule).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

BLOCK = 32
REPEAT = 256
ALL = (1 << 64) - 1
# NumPy scalar types; Any because numpy's stubs type its scalar classes too narrowly here.
TYPES: dict[str, Any] = {"f32": np.float32, "f16": np.float16, "s32": np.int32, "s16": np.int16,
         "u32": np.uint32, "u16": np.uint16}


@dataclass
class Case:
    """One instruction on a byte image; operands are byte offsets into it."""

    name: str
    dtype: str
    offsets: list[int]
    fields: list[int]
    scalar: float | int = 0
    counter: bool = False
    high: int = ALL
    low: int = ALL
    pad: int = 0
    image: np.ndarray = field(default_factory=lambda: np.zeros(4096, np.uint8))

    def line(self) -> str:
        bits = scalar_bits(self.scalar, self.dtype)
        parts = [self.name, self.dtype, int(self.counter), self.high, self.low, self.pad, bits,
                 len(self.offsets), *self.offsets, len(self.fields), *self.fields,
                 self.image.tobytes().hex()]
        return " ".join(str(part) for part in parts)


def scalar_bits(value: float | int, dtype: str) -> int:
    kind = TYPES.get(dtype, np.float32)
    return int.from_bytes(np.array([value], dtype=kind).tobytes(), "little")


def address(base: int, repeat: int, index: int, size: int, block_stride: int,
            repeat_stride: int) -> int:
    offset = index * size
    return (base + repeat * repeat_stride * BLOCK + (offset // BLOCK) * block_stride * BLOCK
            + offset % BLOCK)


def active(case: Case, per_repeat: int) -> list[tuple[int, int]]:
    """(repeat, index) of every element the instruction touches."""
    if case.counter:
        return [(item // per_repeat, item % per_repeat) for item in range(case.low)]
    repeats = case.fields[0]
    chosen = [index for index in range(per_repeat)
              if ((case.low >> index) & 1 if index < 64 else (case.high >> (index - 64)) & 1)]
    return [(repeat, index) for repeat in range(repeats) for index in chosen]


def load(image: np.ndarray, at: int, kind: Any) -> Any:
    size = np.dtype(kind).itemsize
    return np.frombuffer(image[at:at + size].tobytes(), dtype=kind)[0]


def store(image: np.ndarray, at: int, value: Any) -> None:
    raw = np.frombuffer(np.array([value]).tobytes(), np.uint8)
    image[at:at + raw.size] = raw


def _in_type(value: float, kind: Any) -> Any:
    """One IEEE rounding of an exact float64 result (integers wrap)."""
    if np.issubdtype(kind, np.integer):
        bits = np.iinfo(kind).bits
        wrapped = int(value) & ((1 << bits) - 1)
        return np.array([wrapped], np.uint64).astype(np.dtype(f"u{bits // 8}")).view(kind)[0]
    with np.errstate(over="ignore"):
        return kind(value)


def _f32(fn: Callable[..., Any]) -> Callable[..., float]:
    """An op computed in float32 (the hardware's precision for the transcendentals)."""
    def wrapped(*values: float) -> float:
        with np.errstate(all="ignore"):
            return float(fn(*(np.float32(value) for value in values)))
    return wrapped


UNARY: dict[str, Callable[[float], float]] = {
    "vabs": abs,
    "vexp": lambda x: float(np.exp(np.float64(x))),
    "vln": lambda x: float(np.log(np.float64(x))),
    "vsqrt": _f32(np.sqrt),
    "vrsqrt": _f32(lambda x: np.float32(1) / np.sqrt(x)),
    "vrec": _f32(lambda x: np.float32(1) / x),
    "vrelu": lambda x: x if x > 0 else 0.0,
    "vcopy": lambda x: x,
}


def _exact_or_f32(op: Callable[[float, float], float]) -> Callable[[str, float, float], float]:
    def compute(dtype: str, a: float, b: float) -> float:
        if dtype == "f32":
            return _f32(op)(a, b)
        return op(a, b)
    return compute


BINARY: dict[str, Callable[[str, float, float], float]] = {
    "vadd": _exact_or_f32(lambda a, b: a + b),
    "vsub": _exact_or_f32(lambda a, b: a - b),
    "vmul": _exact_or_f32(lambda a, b: a * b),
    "vdiv": lambda dtype, a, b: _f32(lambda x, y: x / y)(a, b),
    "vmax": lambda dtype, a, b: max(a, b),
    "vmin": lambda dtype, a, b: min(a, b),
    "vand": lambda dtype, a, b: int(a) & int(b),
    "vor": lambda dtype, a, b: int(a) | int(b),
}
SCALAR = {"vadds": "vadd", "vmuls": "vmul", "vmaxs": "vmax", "vmins": "vmin"}


def expected(case: Case) -> np.ndarray:
    image = case.image.copy()
    kind = TYPES[case.dtype]
    size = np.dtype(kind).itemsize
    per = REPEAT // size
    f = case.fields
    results: list[tuple[int, Any]] = []
    for repeat, index in active(case, per):
        def at(operand: int, block: int, rep: int) -> int:
            return address(case.offsets[operand], repeat, index, size, block, rep)
        if case.name in UNARY or case.name == "vnot":
            x = float(load(case.image, at(1, f[2], f[4]), kind))
            value = ~int(x) if case.name == "vnot" else UNARY[case.name](x)
            results.append((at(0, f[1], f[3]), _in_type(value, kind)))
        elif case.name in BINARY:
            a = float(load(case.image, at(1, f[2], f[5]), kind))
            b = float(load(case.image, at(2, f[3], f[6]), kind))
            results.append((at(0, f[1], f[4]), _in_type(BINARY[case.name](case.dtype, a, b), kind)))
        elif case.name in SCALAR or case.name == "vlrelu":
            a = float(load(case.image, at(1, f[2], f[4]), kind))
            s = float(kind(case.scalar))
            if case.name == "vlrelu":
                value = a if a >= 0 else BINARY["vmul"](case.dtype, a, s)
            else:
                value = BINARY[SCALAR[case.name]](case.dtype, a, s)
            results.append((at(0, f[1], f[3]), _in_type(value, kind)))
        elif case.name == "vector_dup":
            results.append((at(0, f[1], f[3]), kind(case.scalar)))
        else:
            raise AssertionError(f"no reference for {case.name}")
    for where, value in results:
        store(image, where, value)
    return image
