"""The judge's comparison: a candidate's outputs against the reference's, in NumPy.

Checks, in order: shape, dtype, device, layout (an output whose elements overlap in memory,
like an expanded view, where the reference's does not), NaN/Inf placement, then values
with per-dtype tolerances (assert_close's defaults unless the spec says otherwise).

Where the strict test fails, the outputs are judged against a float64 run of the reference
instead, allowing each element as much rounding as the reference itself makes *near that
element*: the slack of element i is `ROUNDING_SLACK` times the largest error the reference
makes among the `2 * _NEIGHBOURS + 1` elements closest to it in magnitude. So an honest
float32 matmul whose summation order differs passes, while an output spanning orders of
magnitude cannot be anything in its small elements just because its large ones round
coarsely (one global slack allowed that), and a float16 shortcut, a missing tail or a
no-op still fail: their errors are orders of magnitude above the reference's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from runners.base import Failure, Tolerance
from runners.harness.wire import WireTensor

ROUNDING_SLACK = 4.0
_NEIGHBOURS = 32
_FIRST_MISMATCHES = 5

Array = np.ndarray[Any, Any]


@dataclass
class Comparison:
    failures: list[Failure]
    max_abs_err: float
    max_rel_err: float


def _is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


def _metadata_failure(expected: WireTensor, actual: WireTensor, case: str,
                      index: int) -> Failure | None:
    if actual.shape != expected.shape:
        return Failure(check="shape", case=case, output=index,
                       message=f"output {index}: shape {actual.shape}, expected {expected.shape}",
                       details={"expected": expected.shape, "actual": actual.shape})
    if actual.dtype != expected.dtype:
        return Failure(check="dtype", case=case, output=index,
                       message=f"output {index}: dtype {actual.dtype}, expected {expected.dtype}",
                       details={"expected": expected.dtype, "actual": actual.dtype})
    want_device, got_device = expected.meta.get("device"), actual.meta.get("device")
    if want_device != got_device:
        return Failure(check="device", case=case, output=index,
                       message=f"output {index} is on {got_device}, the inputs on {want_device}",
                       details={"expected": want_device, "actual": got_device})
    if actual.meta.get("subclass"):
        return Failure(check="output_structure", case=case, output=index,
                       message=f"output {index} is a tensor subclass, not a plain tensor")
    if expected.meta.get("dense", True) and not actual.meta.get("dense", False):
        return Failure(check="layout", case=case, output=index,
                       message=f"output {index}: its elements overlap or leave gaps in memory "
                       f"(strides {actual.meta.get('stride')}): an expanded or strided view "
                       "where the reference returns a real tensor",
                       details={"stride": actual.meta.get("stride")})
    return None


def _nan_inf_failure(expected: Array, actual: Array, case: str, index: int) -> Failure | None:
    for label, probe in (("NaN", np.isnan), ("+Inf", np.isposinf), ("-Inf", np.isneginf)):
        differ = probe(expected) != probe(actual)
        if differ.any():
            every = np.argwhere(differ)
            positions = every[:_FIRST_MISMATCHES].tolist()
            in_actual, in_expected = int(probe(actual).sum()), int(probe(expected).sum())
            return Failure(
                check="nan_inf", case=case, output=index,
                message=(f"output {index}: {label} where the reference has none (or the "
                         f"reverse): {in_actual} {label} in the candidate, {in_expected} in "
                         "the reference"),
                details={"kind": label, "candidate_count": in_actual,
                         "reference_count": in_expected, "first_indices": positions,
                         # Where they sit: NaN only in the last columns is a missing mask.
                         "mismatch_index_ranges": _index_ranges(every, actual.shape)})
    return None


def _index_ranges(positions: Array, shape: tuple[int, ...]) -> list[list[int]]:
    """Per dim, [first, last, size] of the positions (argwhere's rows)."""
    if not len(positions) or positions.ndim != 2:
        return []
    return [[int(positions[:, dim].min()), int(positions[:, dim].max()), int(shape[dim])]
            for dim in range(positions.shape[1])]


def _errors(expected: Array, actual: Array) -> tuple[Array, float, float]:
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(actual - expected)
    finite = np.isfinite(diff)
    if not finite.any():
        return diff, 0.0, 0.0
    rel = diff[finite] / np.maximum(np.abs(expected[finite]), 1e-12)
    return diff, float(diff[finite].max()), float(rel.max())


def _value_failure(expected: Array, actual: Array, bad: Array, *, tolerance: Tolerance,
                   case: str, index: int) -> Failure:
    _, abs_err, rel_err = _errors(expected, actual)
    positions = np.argwhere(bad)
    samples = [{"index": pos, "expected": float(expected[tuple(pos)]),
                "actual": float(actual[tuple(pos)])}
               for pos in positions[:_FIRST_MISMATCHES].tolist()]
    ranges = _index_ranges(positions, actual.shape)
    count = int(bad.sum())
    return Failure(
        check="values", case=case, output=index,
        message=(f"output {index}: {count} of {bad.size} values differ beyond "
                 f"atol={tolerance.atol:g}, rtol={tolerance.rtol:g}; max abs error "
                 f"{abs_err:.3g}, max rel error {rel_err:.3g}"),
        details={"max_abs_err": abs_err, "max_rel_err": rel_err, "mismatches": count,
                 "total": int(bad.size), "atol": tolerance.atol, "rtol": tolerance.rtol,
                 "first_mismatches": samples, "mismatch_index_ranges": ranges})


def within(actual: Array, target: Array, tolerance: Tolerance,
           slack: Array | float = 0.0) -> Array:
    """Elementwise: is `actual` within tolerance of `target`? Equal NaN/Inf count as equal."""
    with np.errstate(invalid="ignore", over="ignore"):
        ok = np.abs(actual - target) <= tolerance.atol + tolerance.rtol * np.abs(target) + slack
    same_special = (np.isnan(actual) & np.isnan(target)) | (np.isinf(actual) & (actual == target))
    result: Array = ok | same_special
    return result


def local_slack(expected: Array, truth: Array) -> Array:
    """Per element: ROUNDING_SLACK x the reference's largest error among its magnitude peers."""
    with np.errstate(invalid="ignore", over="ignore"):
        error = np.abs(expected - truth).ravel()
    error = np.where(np.isfinite(error), error, 0.0)
    order = np.argsort(np.abs(truth).ravel(), kind="stable")
    peak = _sliding_max(error[order], _NEIGHBOURS)
    slack = np.empty_like(peak)
    slack[order] = peak
    result: Array = (ROUNDING_SLACK * slack).reshape(expected.shape)
    return result


def _sliding_max(values: Array, radius: int) -> Array:
    """max(values[i - radius : i + radius + 1]) for every i, in O(n log radius)."""
    if radius >= len(values):
        return np.full_like(values, values.max(initial=0.0))
    behind = values.copy()  # grows to max(values[i - reach : i + 1])
    reach, step = 0, 1
    while reach < radius:
        width = min(step, radius - reach)
        behind[width:] = np.maximum(behind[width:], behind[:-width])
        reach += width
        step *= 2
    ahead = np.maximum.accumulate(values[::-1])[::-1]  # the tail's window ends at the end
    ahead[: len(values) - radius] = behind[radius:]
    result: Array = np.maximum(behind, ahead)
    return result


def compare_output(expected: WireTensor, actual: WireTensor, *, truth: WireTensor | None,
                   tolerance: Tolerance, case: str, index: int) -> Comparison:
    """Compare one output tensor of the candidate with the reference's."""
    with np.errstate(all="ignore"):  # NaN payloads and overflow are judged, not warned about
        return _compare(expected, actual, truth, tolerance=tolerance, case=case, index=index)


def _compare(expected: WireTensor, actual: WireTensor, truth: WireTensor | None, *,
             tolerance: Tolerance, case: str, index: int) -> Comparison:
    failure = _metadata_failure(expected, actual, case, index)
    if failure is not None:
        return Comparison([failure], 0.0, 0.0)
    want = expected.array()
    got = actual.array()
    if not _is_float(expected.dtype):
        bad = got != want
        if bad.any():
            return Comparison([_value_failure(want.astype(np.float64), got.astype(np.float64),
                                              bad, tolerance=Tolerance(0.0, 0.0), case=case,
                                              index=index)], float("nan"), float("nan"))
        return Comparison([], 0.0, 0.0)
    want = want.astype(np.float64)
    got = got.astype(np.float64)
    special = _nan_inf_failure(want, got, case, index)
    if special is not None:
        return Comparison([special], float("nan"), float("nan"))
    _, abs_err, rel_err = _errors(want, got)
    ok = within(got, want, tolerance)
    if ok.all():
        return Comparison([], abs_err, rel_err)
    if truth is not None and truth.shape == expected.shape and _is_float(truth.dtype):
        exact = truth.array().astype(np.float64)
        if within(got, exact, tolerance, local_slack(want, exact)).all():
            return Comparison([], abs_err, rel_err)
    return Comparison([_value_failure(want, got, ~ok, tolerance=tolerance, case=case,
                                      index=index)], abs_err, rel_err)


def would_pass_as_zeros(expected: Array, tolerance: Tolerance) -> bool:
    """Low-signal test: would an all-zeros output pass this comparison?"""
    if expected.dtype.kind != "f" or expected.size == 0:
        return False
    values = expected.astype(np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return False
    return bool((np.abs(values) <= tolerance.atol + tolerance.rtol * np.abs(values)).all())


def same_values(first: WireTensor, second: WireTensor) -> bool:
    """Exactly equal tensors (shape, dtype and every value; NaN equal to NaN)."""
    if first.shape != second.shape or first.dtype != second.dtype:
        return False
    return bool(np.array_equal(first.array(), second.array(),
                               equal_nan=_is_float(first.dtype)))
