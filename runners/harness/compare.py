"""Compare a candidate's outputs with the reference's: structure, shape, dtype, NaN/Inf, values.

Values are compared with per-dtype tolerances (assert_close's defaults unless the spec
says otherwise). Where that strict test fails, the outputs are judged against a float64
run of the reference instead: a candidate passes if it is within the tolerance of that
truth, allowing for as much rounding as the reference itself makes. So an honest float32
matmul whose summation order differs from PyTorch's passes, while a float16 shortcut, a
missing tail or a no-op does not: their errors are orders of magnitude above the reference's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from runners.base import Failure, Tolerance
from runners.harness.inputs import dtype_name

# How many times the reference's own float64-relative error a candidate may make.
ROUNDING_SLACK = 4.0
_FIRST_MISMATCHES = 5


@dataclass
class Comparison:
    failures: list[Failure]
    max_abs_err: float
    max_rel_err: float


def flatten_outputs(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        items: list[Any] = []
        for item in value:
            items.extend(flatten_outputs(item))
        return items
    return [value]


def structure_of(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        inner = ", ".join(structure_of(item) for item in value)
        return f"{type(value).__name__}[{inner}]"
    if isinstance(value, torch.Tensor):
        return "Tensor"
    return type(value).__name__


def _nan_inf_failure(expected: torch.Tensor, actual: torch.Tensor, case: str,
                     index: int) -> Failure | None:
    for label, probe in (("NaN", torch.isnan), ("+Inf", torch.isposinf), ("-Inf", torch.isneginf)):
        differ = probe(expected) != probe(actual)
        if bool(differ.any()):
            positions = differ.nonzero()[:_FIRST_MISMATCHES].tolist()
            in_actual = int(probe(actual).sum())
            in_expected = int(probe(expected).sum())
            return Failure(
                check="nan_inf", case=case, output=index,
                message=(f"output {index}: {label} where the reference has none (or the reverse): "
                         f"{in_actual} {label} in the candidate, {in_expected} in the reference"),
                details={"kind": label, "candidate_count": in_actual,
                         "reference_count": in_expected, "first_indices": positions},
            )
    return None


def _value_failure(expected: torch.Tensor, actual: torch.Tensor, bad: torch.Tensor, *,
                   tolerance: Tolerance, case: str, index: int) -> Failure:
    diff = (actual.double() - expected.double()).abs()
    finite = torch.isfinite(diff)
    abs_err = float(diff[finite].max()) if bool(finite.any()) else float("inf")
    rel = diff / expected.double().abs().clamp_min(1e-12)
    rel_err = float(rel[finite].max()) if bool(finite.any()) else float("inf")
    positions = bad.nonzero()
    first = positions[:_FIRST_MISMATCHES].tolist()
    samples = [{"index": pos, "expected": float(expected[tuple(pos)]),
                "actual": float(actual[tuple(pos)])} for pos in first]
    ranges = []
    if positions.numel() and positions.dim() == 2:
        for dim in range(positions.shape[1]):
            column = positions[:, dim]
            ranges.append([int(column.min()), int(column.max()), int(actual.shape[dim])])
    count = int(bad.sum())
    return Failure(
        check="values", case=case, output=index,
        message=(f"output {index}: {count} of {bad.numel()} values differ beyond "
                 f"atol={tolerance.atol:g}, rtol={tolerance.rtol:g}; max abs error {abs_err:.3g}, "
                 f"max rel error {rel_err:.3g}"),
        details={"max_abs_err": abs_err, "max_rel_err": rel_err, "mismatches": count,
                 "total": bad.numel(), "atol": tolerance.atol, "rtol": tolerance.rtol,
                 "first_mismatches": samples, "mismatch_index_ranges": ranges},
    )


def _within(actual: torch.Tensor, target: torch.Tensor, tolerance: Tolerance,
            slack: float = 0.0) -> torch.Tensor:
    """Elementwise: is `actual` within tolerance of `target`? NaN/Inf positions count as equal."""
    a = actual.double()
    t = target.double()
    ok = (a - t).abs() <= tolerance.atol + tolerance.rtol * t.abs() + slack
    same_special = (torch.isnan(a) & torch.isnan(t)) | (torch.isinf(a) & (a == t))
    return ok | same_special


def compare_tensor(expected: torch.Tensor, actual: torch.Tensor, *, tolerance: Tolerance,
                   truth: Callable[[], torch.Tensor | None], case: str,
                   index: int) -> Comparison:
    """Compare one output tensor; `truth` lazily gives the float64 reference value."""
    if tuple(actual.shape) != tuple(expected.shape):
        return Comparison([Failure(
            check="shape", case=case, output=index,
            message=f"output {index}: shape {list(actual.shape)}, expected {list(expected.shape)}",
            details={"expected": list(expected.shape), "actual": list(actual.shape)})], 0.0, 0.0)
    if actual.dtype != expected.dtype:
        return Comparison([Failure(
            check="dtype", case=case, output=index,
            message=(f"output {index}: dtype {dtype_name(actual.dtype)}, "
                     f"expected {dtype_name(expected.dtype)}"),
            details={"expected": dtype_name(expected.dtype),
                     "actual": dtype_name(actual.dtype)})], 0.0, 0.0)
    expected = expected.detach().cpu()
    actual = actual.detach().cpu()
    if not expected.dtype.is_floating_point and not expected.dtype.is_complex:
        bad = actual != expected
        if bool(bad.any()):
            failure = _value_failure(expected, actual, bad, tolerance=Tolerance(0.0, 0.0),
                                     case=case, index=index)
            return Comparison([failure], float("nan"), float("nan"))
        return Comparison([], 0.0, 0.0)
    special = _nan_inf_failure(expected, actual, case, index)
    if special is not None:
        return Comparison([special], float("nan"), float("nan"))
    diff = (actual.double() - expected.double()).abs()
    finite = torch.isfinite(diff)
    abs_err = float(diff[finite].max()) if bool(finite.any()) else 0.0
    rel = diff / expected.double().abs().clamp_min(1e-12)
    rel_err = float(rel[finite].max()) if bool(finite.any()) else 0.0
    ok = _within(actual, expected, tolerance)
    if bool(ok.all()):
        return Comparison([], abs_err, rel_err)
    exact = truth()
    if exact is not None and tuple(exact.shape) == tuple(expected.shape):
        exact = exact.detach().cpu()
        reference_error = (expected.double() - exact).abs()
        reference_error = reference_error[torch.isfinite(reference_error)]
        slack = ROUNDING_SLACK * float(reference_error.max()) if reference_error.numel() else 0.0
        if bool(_within(actual, exact, tolerance, slack).all()):
            return Comparison([], abs_err, rel_err)
    failure = _value_failure(expected, actual, ~ok, tolerance=tolerance, case=case, index=index)
    return Comparison([failure], abs_err, rel_err)


def would_pass_as_zeros(expected: torch.Tensor, tolerance: Tolerance) -> bool:
    """Low-signal test: would an all-zeros output pass this comparison?"""
    if not expected.dtype.is_floating_point or expected.numel() == 0:
        return False
    values = expected.detach().double()
    values = values[torch.isfinite(values)]
    if values.numel() == 0:
        return False
    return bool((values.abs() <= tolerance.atol + tolerance.rtol * values.abs()).all())
