"""Symbolic sizes (sympy, from torch.export) printed as Python for the generated launcher."""

from __future__ import annotations

import sympy
from torch.utils._sympy.functions import (
    FloatTrueDiv,
    FloorDiv,
    IntTrueDiv,
    ModularIndexing,
    PythonMod,
    ToFloat,
)

from bot.agent.offline.graph import UnsupportedGraphError


def symbol_name(symbol: sympy.Symbol) -> str:
    # Prefixed so a size never shadows a forward argument of the same name.
    return f"size_{symbol.name}"


def python_size(expr: sympy.Expr) -> str:
    """Python source computing `expr` from the launcher's bound size variables."""
    if expr.is_Integer:
        return str(int(expr))
    if isinstance(expr, sympy.Symbol):
        return symbol_name(expr)
    if isinstance(expr, sympy.Add):
        return "(" + " + ".join(python_size(arg) for arg in expr.args) + ")"
    if isinstance(expr, sympy.Mul):
        return "(" + " * ".join(python_size(arg) for arg in expr.args) + ")"
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and int(expr.exp) > 0:
        return f"({python_size(expr.base)} ** {int(expr.exp)})"
    if isinstance(expr, ToFloat):
        return f"float({python_size(expr.args[0])})"
    if isinstance(expr, (FloatTrueDiv, IntTrueDiv)):
        return f"({python_size(expr.args[0])} / {python_size(expr.args[1])})"
    if isinstance(expr, FloorDiv):
        return f"({python_size(expr.args[0])} // {python_size(expr.args[1])})"
    if isinstance(expr, ModularIndexing):
        base, divisor, modulus = (python_size(arg) for arg in expr.args)
        return f"(({base} // {divisor}) % {modulus})"
    if isinstance(expr, (PythonMod, sympy.Mod)):
        return f"({python_size(expr.args[0])} % {python_size(expr.args[1])})"
    if isinstance(expr, (sympy.Max, sympy.Min)):
        name = "max" if isinstance(expr, sympy.Max) else "min"
        return f"{name}({', '.join(python_size(arg) for arg in expr.args)})"
    raise UnsupportedGraphError([f"size expression {type(expr).__name__}"])
