"""Triton code for each pointwise op of the IR, with PyTorch's NaN and promotion semantics."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bot.agent.backends.triton.offline.values import BOOL, FLOAT, INT, Value, kind_of, tl_dtype
from bot.agent.offline.graph import Node, UnsupportedGraphError

# Helper @triton.jit functions a kernel file may need, by name. tanh and pow are written
# from exp/log because libdevice is not available in Triton's CPU interpreter.
HELPERS: dict[str, str] = {
    "_tanh": '''@triton.jit
def _tanh(x):
    # tanh from exp (libdevice is not available in the interpreter); exp(-2|x|) never overflows
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x < 0, -t, t)
''',
    "_pow": '''@triton.jit
def _pow(x, y):
    # x ** y from exp/log, with PyTorch's results for negative bases and zero
    magnitude = tl.exp(y * tl.log(tl.abs(x)))
    is_integer = y == tl.floor(y)
    is_odd = is_integer & (tl.abs(y - 2.0 * tl.floor(y * 0.5)) == 1.0)
    signed = tl.where(is_odd, -magnitude, magnitude)
    result = tl.where(x < 0, tl.where(is_integer, signed, float("nan")), magnitude)
    zero_base = tl.where(y > 0, 0.0, tl.where(y == 0, 1.0, float("inf")))
    return tl.where(x == 0, zero_base, tl.where(y == 0, 1.0, result))
''',
}


def _float(value: Value) -> str:
    if value.kind == FLOAT or value.literal:
        return value.code
    return f"{value.code}.to(tl.float32)"


def _as(value: Value, kind: str) -> str:
    if value.literal or value.kind == kind:
        return value.code
    if kind == FLOAT:
        return f"{value.code}.to(tl.float32)"
    if kind == INT:
        return f"{value.code}.to(tl.int64)"
    return f"({value.code} != 0)"


def _unary(template: str) -> Callable[[Sequence[Value], Node, set[str]], str]:
    def render(operands: Sequence[Value], node: Node, helpers: set[str]) -> str:
        return template.format(a=_float(operands[0]))
    return render


def _binary(symbol: str) -> Callable[[Sequence[Value], Node, set[str]], str]:
    def render(operands: Sequence[Value], node: Node, helpers: set[str]) -> str:
        kind = kind_of(node.dtype)
        return f"({_as(operands[0], kind)} {symbol} {_as(operands[1], kind)})"
    return render


def _compare(symbol: str) -> Callable[[Sequence[Value], Node, set[str]], str]:
    def render(operands: Sequence[Value], node: Node, helpers: set[str]) -> str:
        left, right = operands[0], operands[1]
        if FLOAT in (left.kind, right.kind):
            return f"({_float(left)} {symbol} {_float(right)})"
        return f"({left.code} {symbol} {right.code})"
    return render


def _add(operands: Sequence[Value], node: Node, helpers: set[str]) -> str:
    kind = kind_of(node.dtype)
    alpha = node.params.get("alpha")
    right = _as(operands[1], kind) if alpha is None else f"({alpha!r} * {_as(operands[1], kind)})"
    sign = "-" if node.op == "sub" else "+"
    if node.op == "rsub":
        left = _as(operands[0], kind)
        scaled = left if alpha is None else f"({alpha!r} * {left})"
        return f"({_as(operands[1], kind)} - {scaled})"
    return f"({_as(operands[0], kind)} {sign} {right})"


def _div(operands: Sequence[Value], node: Node, helpers: set[str]) -> str:
    quotient = f"({_float(operands[0])} / {_float(operands[1])})"
    mode = node.params.get("rounding_mode")
    if mode == "floor":
        return f"tl.floor{quotient}"
    if mode == "trunc":
        return f"tl.where({quotient} < 0, tl.ceil{quotient}, tl.floor{quotient})"
    return quotient


def _pow(operands: Sequence[Value], node: Node, helpers: set[str]) -> str:
    base, exponent = operands[0], operands[1]
    if exponent.literal and exponent.kind in (INT, FLOAT):
        try:
            power = float(exponent.code)
        except ValueError:
            power = None
        if power is not None:
            special = _small_power(_float(base), power)
            if special is not None:
                return special
    helpers.add("_pow")
    return f"_pow({_float(base)}, {_float(exponent)})"


def _small_power(base: str, power: float) -> str | None:
    if power == 0.5:
        return f"tl.sqrt({base})"
    if power == -0.5:
        return f"tl.rsqrt({base})"
    if power == 0:
        return f"({base} * 0.0 + 1.0)"
    if power.is_integer() and 1 <= abs(power) <= 8:
        product = " * ".join([base] * int(abs(power)))
        return f"({product})" if power > 0 else f"(1.0 / ({product}))"
    return None


def _clamp(operands: Sequence[Value], node: Node, helpers: set[str]) -> str:
    if node.op == "clamp_min":
        return _clamp_optional(operands[0], operands[1], None, node)
    return _clamp_optional(operands[0], None, operands[1], node)


def _extreme(operands: Sequence[Value], node: Node, helpers: set[str]) -> str:
    kind = kind_of(node.dtype)
    left, right = _as(operands[0], kind), _as(operands[1], kind)
    function = "tl.maximum" if node.op == "maximum" else "tl.minimum"
    if kind != FLOAT:
        return f"{function}({left}, {right})"
    return (f"tl.where({left} != {left}, {left}, "
            f"tl.where({right} != {right}, {right}, {function}({left}, {right})))")


def _where(operands: Sequence[Value], node: Node, helpers: set[str]) -> str:
    kind = kind_of(node.dtype)
    return (f"tl.where({_as(operands[0], BOOL)}, {_as(operands[1], kind)}, "
            f"{_as(operands[2], kind)})")


def _logical(symbol: str) -> Callable[[Sequence[Value], Node, set[str]], str]:
    def render(operands: Sequence[Value], node: Node, helpers: set[str]) -> str:
        return f"({_as(operands[0], BOOL)} {symbol} {_as(operands[1], BOOL)})"
    return render


def _cast(operands: Sequence[Value], node: Node, helpers: set[str]) -> str:
    kind = kind_of(node.dtype)
    if kind == FLOAT:
        # Round through the target precision, as PyTorch's cast does, then compute in fp32.
        if tl_dtype(node.dtype) in ("tl.float16", "tl.bfloat16"):
            return f"{_float(operands[0])}.to({tl_dtype(node.dtype)}).to(tl.float32)"
        return _float(operands[0])
    if kind == BOOL:
        return f"({operands[0].code} != 0)"
    return f"{operands[0].code}.to({tl_dtype(node.dtype)})"


def _tanh(operands: Sequence[Value], node: Node, helpers: set[str]) -> str:
    helpers.add("_tanh")
    return f"_tanh({_float(operands[0])})"


def _gelu(operands: Sequence[Value], node: Node, helpers: set[str]) -> str:
    value = _float(operands[0])
    if node.params.get("approximate") == "tanh":
        helpers.add("_tanh")
        inner = f"0.7978845608028654 * ({value} + 0.044715 * {value} * {value} * {value})"
        return f"(0.5 * {value} * (1.0 + _tanh({inner})))"
    return f"(0.5 * {value} * (1.0 + tl.math.erf({value} * 0.7071067811865476)))"


def _sign(operands: Sequence[Value], node: Node, helpers: set[str]) -> str:
    value = operands[0]
    if kind_of(node.dtype) == FLOAT:
        code = _float(value)
        return f"tl.where({code} > 0, 1.0, tl.where({code} < 0, -1.0, {code}))"
    return f"tl.where({value.code} > 0, 1, tl.where({value.code} < 0, -1, 0))"


def _abs(operands: Sequence[Value], node: Node, helpers: set[str]) -> str:
    return f"tl.abs({_as(operands[0], kind_of(node.dtype))})"


def _neg(operands: Sequence[Value], node: Node, helpers: set[str]) -> str:
    return f"(-{_as(operands[0], kind_of(node.dtype))})"


def _relu(operands: Sequence[Value], node: Node, helpers: set[str]) -> str:
    value = _as(operands[0], kind_of(node.dtype))
    return f"tl.where({value} < 0, 0, {value})"  # NaN < 0 is false: NaN passes, as in PyTorch


def _remainder(operands: Sequence[Value], node: Node, helpers: set[str]) -> str:
    left, right = _float(operands[0]), _float(operands[1])
    if node.op == "fmod":
        quotient = f"({left} / {right})"
        truncated = f"tl.where({quotient} < 0, tl.ceil({quotient}), tl.floor({quotient}))"
        return f"({left} - {right} * {truncated})"
    return f"({left} - {right} * tl.floor({left} / {right}))"


_RENDERERS: dict[str, Callable[[Sequence[Value], Node, set[str]], str]] = {
    "add": _add, "sub": _add, "rsub": _add, "mul": _binary("*"), "div": _div,
    "div_mode": _div, "neg": _neg, "abs": _abs,
    "exp": _unary("tl.exp({a})"), "exp2": _unary("tl.exp2({a})"),
    "expm1": _unary("(tl.exp({a}) - 1.0)"), "log": _unary("tl.log({a})"),
    "log2": _unary("tl.log2({a})"), "log10": _unary("(tl.log({a}) * 0.4342944819032518)"),
    "log1p": _unary("tl.log(1.0 + {a})"), "sqrt": _unary("tl.sqrt({a})"),
    "rsqrt": _unary("tl.rsqrt({a})"), "reciprocal": _unary("(1.0 / {a})"),
    "sin": _unary("tl.sin({a})"), "cos": _unary("tl.cos({a})"), "tanh": _tanh,
    "sigmoid": _unary("tl.sigmoid({a})"), "erf": _unary("tl.math.erf({a})"), "relu": _relu,
    "gelu": _gelu, "silu": _unary("({a} * tl.sigmoid({a}))"), "sign": _sign,
    "floor": _unary("tl.floor({a})"), "ceil": _unary("tl.ceil({a})"),
    "trunc": _unary("tl.where({a} < 0, tl.ceil({a}), tl.floor({a}))"), "pow": _pow,
    "clamp": _clamp, "clamp_min": _clamp, "clamp_max": _clamp, "maximum": _extreme,
    "minimum": _extreme, "where": _where, "gt": _compare(">"), "ge": _compare(">="),
    "lt": _compare("<"), "le": _compare("<="), "eq": _compare("=="), "ne": _compare("!="),
    "logical_and": _logical("&"), "logical_or": _logical("|"), "logical_xor": _logical("^"),
    "logical_not": lambda ops, node, helpers: f"({_as(ops[0], BOOL)} == 0)",
    "isnan": lambda ops, node, helpers: f"({_float(ops[0])} != {_float(ops[0])})",
    "isinf": lambda ops, node, helpers: f"(tl.abs({_float(ops[0])}) == float(\"inf\"))",
    "fmod": _remainder, "remainder": _remainder, "cast": _cast,
}


def pointwise_code(node: Node, operands: Sequence[Value | None], helpers: set[str]) -> str:
    renderer = _RENDERERS.get(node.op)
    if renderer is None:
        raise UnsupportedGraphError([node.op])
    if node.op == "clamp":  # min or max may be absent
        low, high = [*operands, None, None][1:3]
        return _clamp_optional(operands[0], low, high, node)
    return renderer([item for item in operands if item is not None], node, helpers)


def _clamp_optional(value: Value | None, low: Value | None, high: Value | None,
                    node: Node) -> str:
    """clamp with either bound optional; NaN stays NaN, as in PyTorch."""
    assert value is not None
    kind = kind_of(node.dtype)
    code = _as(value, kind)
    result = code
    if low is not None:
        result = f"tl.maximum({result}, {_as(low, kind)})"
    if high is not None:
        result = f"tl.minimum({result}, {_as(high, kind)})"
    if kind == FLOAT:
        return f"tl.where({code} != {code}, {code}, {result})"
    return result
