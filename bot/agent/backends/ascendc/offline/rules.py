"""Ascend C vector instructions for each rule of the elementwise generator.

A rule writes `dst = f(operands)` over float32 UB tiles as standard Ascend C vector
instructions (Add, Sub, Mul, Div, Max, Min, Adds, Muls, Maxs, Mins, Exp, Ln, Abs, Sqrt,
Relu, LeakyRelu, Duplicate). Activations without a basic instruction are composed from
them so no advanced API (whose signature moved between releases) is needed:

    sigmoid(x)   = 1 / (1 + exp(-x))
    tanh(x)      = 2 / (1 + exp(-2x)) - 1
    gelu(x)      = (x + |x| * erf(|x| / sqrt 2)) / 2, erf by Abramowitz-Stegun 7.1.26
                   (|error| <= 1.5e-7, well inside float32 tolerances)
    gelu_tanh(x) = x / (1 + exp(-2k (x + 0.044715 x^3))),  k = sqrt(2 / pi)

1/x and 1/sqrt(x) divide into a tile of ones rather than use Reciprocal/Rsqrt, whose
accuracy we cannot check here; x / c multiplies by 1/c (at most one rounding apart).
Vector instructions may write over an operand only when the two overlap completely, so
each rule says whether it reads its operands before it first writes (`Rule.in_place`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias

Operand: TypeAlias = "str | float"  # a float32 LocalTensor's name, or a scalar

SQRT_HALF = 1.0 / math.sqrt(2.0)
GELU_TANH_K = math.sqrt(2.0 / math.pi)
# Abramowitz & Stegun 7.1.26: erf(y) = 1 - (a1 t + ... + a5 t^5) exp(-y^2), t = 1/(1 + p y).
ERF_P = 0.3275911
ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


class Context:
    """Hands a rule its scratch temporaries."""

    def __init__(self, take: Callable[[], int]) -> None:
        self._take = take
        self.temps: list[int] = []

    def temp(self) -> str:
        slot = self._take()
        self.temps.append(slot)
        return f"s{slot}"


def literal(value: float) -> str:
    text = repr(float(value))
    if "e" not in text and "." not in text:
        text += ".0"
    return text + "f"


def call(api: str, *args: Operand) -> str:
    rendered = [arg if isinstance(arg, str) else literal(arg) for arg in args]
    return f"AscendC::{api}({', '.join(rendered)}, count);"


Emit = Callable[[Context, str, list[Operand]], list[str]]


@dataclass(frozen=True)
class Rule:
    emit: Emit
    # True when the rule reads its tensor operands only up to its first write of dst, so
    # dst may be (completely) the slot of an operand that dies here.
    in_place: bool


def _api(name: str) -> Rule:
    return Rule(lambda ctx, d, a: [call(name, d, *a)], in_place=True)


def _axpy(ctx: Context, d: str, a: list[Operand]) -> list[str]:
    first, second, alpha = a  # first + alpha * second
    return [call("Muls", d, second, alpha), call("Add", d, first, d)]


def _scalar_minus(ctx: Context, d: str, a: list[Operand]) -> list[str]:
    tensor, scalar, alpha = a  # scalar - alpha * tensor
    return [call("Muls", d, tensor, -float(alpha)), call("Adds", d, d, scalar)]


def _scalar_div(ctx: Context, d: str, a: list[Operand]) -> list[str]:
    tensor, scalar = a  # scalar / tensor
    return [call("Duplicate", d, scalar), call("Div", d, d, tensor)]


def _clamp(ctx: Context, d: str, a: list[Operand]) -> list[str]:
    tensor, low, high = a
    return [call("Maxs", d, tensor, low), call("Mins", d, d, high)]


def _rsqrt(ctx: Context, d: str, a: list[Operand]) -> list[str]:
    ones = ctx.temp()
    return [call("Sqrt", d, a[0]), call("Duplicate", ones, 1.0), call("Div", d, ones, d)]


def _cube(ctx: Context, d: str, a: list[Operand]) -> list[str]:
    return [call("Mul", d, a[0], a[0]), call("Mul", d, d, a[0])]


def _exp_scaled(ctx: Context, d: str, a: list[Operand]) -> list[str]:
    tensor, scale = a  # exp(scale * tensor): base ** tensor with scale = ln(base)
    return [call("Muls", d, tensor, scale), call("Exp", d, d)]


def _sigmoid(ctx: Context, d: str, a: list[Operand]) -> list[str]:
    ones = ctx.temp()
    return [call("Muls", d, a[0], -1.0), call("Exp", d, d), call("Adds", d, d, 1.0),
            call("Duplicate", ones, 1.0), call("Div", d, ones, d)]


def _tanh(ctx: Context, d: str, a: list[Operand]) -> list[str]:
    twos = ctx.temp()
    return [call("Muls", d, a[0], -2.0), call("Exp", d, d), call("Adds", d, d, 1.0),
            call("Duplicate", twos, 2.0), call("Div", d, twos, d), call("Adds", d, d, -1.0)]


def _gelu_erf(ctx: Context, d: str, a: list[Operand]) -> list[str]:
    x = a[0]
    absolute, scaled, poly = ctx.temp(), ctx.temp(), ctx.temp()
    lines = [
        "// erf(|x| / sqrt 2) by Abramowitz-Stegun 7.1.26, then (x + |x| * erf) / 2",
        call("Abs", absolute, x),
        call("Muls", scaled, absolute, SQRT_HALF),
        call("Muls", d, scaled, ERF_P),
        call("Adds", d, d, 1.0),
        call("Duplicate", poly, 1.0),
        call("Div", d, poly, d),  # t = 1 / (1 + p y)
        call("Muls", poly, d, ERF_A[4]),
    ]
    for coefficient in reversed(ERF_A[:4]):  # Horner: ((a5 t + a4) t + a3) t ...
        lines += [call("Adds", poly, poly, coefficient), call("Mul", poly, poly, d)]
    lines += [
        call("Mul", d, scaled, scaled),
        call("Muls", d, d, -1.0),
        call("Exp", d, d),  # exp(-y^2)
        call("Mul", d, poly, d),
        call("Muls", d, d, -1.0),
        call("Adds", d, d, 1.0),  # erf(y)
        call("Mul", d, absolute, d),
        call("Add", d, x, d),
        call("Muls", d, d, 0.5),
    ]
    return lines


def _gelu_tanh(ctx: Context, d: str, a: list[Operand]) -> list[str]:
    x = a[0]
    return [
        "// x * sigmoid(2k u) = 0.5 x (1 + tanh(k u)), u = x + 0.044715 x^3",
        call("Mul", d, x, x), call("Muls", d, d, 0.044715), call("Adds", d, d, 1.0),
        call("Mul", d, d, x), call("Muls", d, d, -2.0 * GELU_TANH_K), call("Exp", d, d),
        call("Adds", d, d, 1.0), call("Div", d, x, d),
    ]


def _reciprocal(ctx: Context, d: str, a: list[Operand]) -> list[str]:
    return [call("Duplicate", d, 1.0), call("Div", d, d, a[0])]


RULES: dict[str, Rule] = {
    "add": _api("Add"), "sub": _api("Sub"), "mul": _api("Mul"), "div": _api("Div"),
    "max": _api("Max"), "min": _api("Min"), "adds": _api("Adds"), "muls": _api("Muls"),
    "maxs": _api("Maxs"), "mins": _api("Mins"), "exp": _api("Exp"), "ln": _api("Ln"),
    "abs": _api("Abs"), "sqrt": _api("Sqrt"), "relu": _api("Relu"),
    "leaky_relu": _api("LeakyRelu"),
    "neg": Rule(lambda ctx, d, a: [call("Muls", d, a[0], -1.0)], in_place=True),
    "copy": Rule(lambda ctx, d, a: [call("Muls", d, a[0], 1.0)], in_place=True),
    "fill": Rule(lambda ctx, d, a: [call("Duplicate", d, a[0])], in_place=True),
    "square": Rule(lambda ctx, d, a: [call("Mul", d, a[0], a[0])], in_place=True),
    "axpy": Rule(_axpy, in_place=False),
    "scalar_minus": Rule(_scalar_minus, in_place=True),
    "scalar_div": Rule(_scalar_div, in_place=False),
    "clamp": Rule(_clamp, in_place=True),
    "rsqrt": Rule(_rsqrt, in_place=True),
    "cube": Rule(_cube, in_place=False),
    "exp_scaled": Rule(_exp_scaled, in_place=True),
    "reciprocal": Rule(_reciprocal, in_place=False),
    "sigmoid": Rule(_sigmoid, in_place=True),
    "tanh": Rule(_tanh, in_place=True),
    "gelu": Rule(_gelu_erf, in_place=False),
    "gelu_tanh": Rule(_gelu_tanh, in_place=False),
}

