"""What a Triton expression evaluates to: its code and its kind (float, int or bool).

Shared by `emit` (which asks for values) and `ops` (which writes each pointwise op over
them); kept apart so neither imports the other back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from bot.agent.offline.graph import UnsupportedGraphError

# What a value is, so operands are converted where PyTorch would promote them.
FLOAT, INT, BOOL = "float", "int", "bool"

_TL_DTYPES = {
    torch.float32: "tl.float32", torch.float16: "tl.float16", torch.bfloat16: "tl.bfloat16",
    torch.float64: "tl.float64", torch.int64: "tl.int64", torch.int32: "tl.int32",
    torch.int16: "tl.int16", torch.int8: "tl.int8", torch.uint8: "tl.uint8",
    torch.bool: "tl.int1",
}


def kind_of(dtype: torch.dtype) -> str:
    if dtype == torch.bool:
        return BOOL
    if dtype.is_floating_point:
        return FLOAT
    return INT


def tl_dtype(dtype: torch.dtype) -> str:
    if dtype not in _TL_DTYPES:
        raise UnsupportedGraphError([f"dtype {dtype}"])
    return _TL_DTYPES[dtype]


@dataclass
class Value:
    code: str
    kind: str
    literal: bool = False


def literal(value: Any) -> Value:
    if isinstance(value, bool):
        return Value("True" if value else "False", BOOL, literal=True)
    if isinstance(value, int):
        return Value(str(value), INT, literal=True)
    if isinstance(value, float):
        if value != value:
            return Value('float("nan")', FLOAT, literal=True)
        if value in (float("inf"), float("-inf")):
            return Value(f'float("{"-" if value < 0 else ""}inf")', FLOAT, literal=True)
        return Value(repr(value), FLOAT, literal=True)
    raise UnsupportedGraphError([f"scalar argument {value!r}"])
