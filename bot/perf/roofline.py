"""The roofline of each timed shape: achieved GB/s and TFLOP/s against the device's peaks.

A kernel whose arithmetic intensity (FLOPs per byte of minimum traffic) lies below the
device's ridge point (peak FLOP/s over peak bytes/s) cannot be faster than its bytes allow:
it is memory-bound, and its percentage is of the memory bandwidth. Above the ridge it is
compute-bound, and its percentage is of the FLOP peak for its dtype. Nothing of this is
computed for the CPU interpreter: its wall-clock times say nothing about a device.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from bot.perf.peaks import DevicePeaks, lookup_peaks
from runners.base import TimedCase, Timing

Bound = Literal["memory", "compute"]

# A speedup over eager above this is more likely a broken timing than a kernel.
SPEEDUP_FLAG = 10.0

_DTYPE_LABELS = {"float32": "FP32", "tfloat32": "TF32", "float16": "FP16",
                 "bfloat16": "BF16"}


@dataclass(frozen=True)
class FlopPeak:
    dtype: str  # a key of DevicePeaks.tflops
    tflops: float
    why: str = ""  # e.g. that TF32 was taken because FP32's peak was exceeded

    @property
    def label(self) -> str:
        return f"{_DTYPE_LABELS.get(self.dtype, self.dtype)} {self.tflops:g} TFLOP/s"


@dataclass(frozen=True)
class RooflineRow:
    """One shape on the roofline; None where a figure is missing (no bytes, no peak)."""

    case: str
    dtype: str
    gbps: float | None
    tflops: float | None
    intensity: float | None  # FLOP per byte of minimum traffic
    ridge: float | None  # FLOP per byte where the memory and compute roofs meet
    bound: Bound | None
    percent_of_peak: float | None
    peak_used: str  # which peak the percentage is of, e.g. "HBM 3350 GB/s"
    speedup_eager: float | None
    speedup_compile: float | None

    @property
    def implausible(self) -> bool:
        """Above 100% of the device's peak: no kernel does that, a broken timing does."""
        return self.percent_of_peak is not None and self.percent_of_peak > 100.0

    @property
    def flagged(self) -> bool:
        """For a person to look at: implausible, or over SPEEDUP_FLAG times eager."""
        return self.implausible or any(
            speedup is not None and speedup > SPEEDUP_FLAG
            for speedup in (self.speedup_eager, self.speedup_compile))

    def to_json(self) -> dict[str, Any]:
        return {"case": self.case, "gbps": self.gbps, "tflops": self.tflops,
                "intensity": self.intensity, "bound": self.bound,
                "percent_of_peak": self.percent_of_peak,
                "speedup_eager": self.speedup_eager, "speedup_compile": self.speedup_compile,
                "implausible": self.implausible, "flagged": self.flagged}


@dataclass(frozen=True)
class Roofline:
    """Every timed shape of one run against one device's peaks."""

    device: str
    peaks: DevicePeaks | None
    peak_reason: str  # why there are no peaks (unknown device), else ""
    rows: list[RooflineRow] = field(default_factory=list)
    overridden: bool = False

    @property
    def peak_source(self) -> str:
        if self.peaks is None:
            return f"none: {self.peak_reason}"
        source = self.peaks.source or "unstated"
        where = "the policy's perf.peaks" if self.overridden else self.peaks.device
        note = f" ({self.peaks.note})" if self.peaks.note else ""
        return f"{where}: {source}{note}"

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "peak_source": self.peak_source,
                "rows": [row.to_json() for row in self.rows]}


def is_interpreter(timing: Timing) -> bool:
    """Timings from the CPU interpreter's wall clock: no device speed to speak of."""
    return timing.device.startswith("cpu") or timing.method == "wall_clock"


def case_dtype(case: TimedCase) -> str:
    """The dtype the case computes in: its first floating-point input's; else its first
    dtype (int8 ...: held to that dtype's peak only where the table has one, never to
    FP32's or TF32's); float32 when no dtype came back."""
    names = [dtype.removeprefix("torch.") for dtype in [*case.input_dtypes, *case.output_dtypes]]
    for name in names:
        if name.startswith(("float", "bfloat")):
            return name
    return names[0] if names else "float32"


def flop_peak(peaks: DevicePeaks, dtype: str, achieved_tflops: float | None) -> FlopPeak | None:
    """The FLOP peak a kernel in `dtype` is held to. float32 is held to the FP32 rate
    unless it ran faster than that, which only tensor cores (TF32) can do."""
    rate = peaks.flops_peak(dtype)
    tf32 = peaks.flops_peak("tfloat32")
    if dtype == "float32" and tf32 is not None and (
            rate is None or (achieved_tflops is not None and achieved_tflops > rate)):
        return FlopPeak("tfloat32", tf32, "above the FP32 peak, so TF32 tensor cores")
    return FlopPeak(dtype, rate) if rate is not None else None


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


def _finite_positive(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > 0


def _bound(intensity: float | None, ridge: float | None, flops: int | None) -> Bound | None:
    if flops == 0 and intensity is not None:
        return "memory"  # pure data movement: no FLOP roof to reach
    if intensity is None or ridge is None:
        return None
    return "memory" if intensity < ridge else "compute"


def roofline_row(case: TimedCase, peaks: DevicePeaks | None) -> RooflineRow:
    """One shape's achieved rates, intensity, bound and percentage of its peak."""
    dtype = case_dtype(case)
    seconds = case.candidate_ms / 1000.0 if _finite_positive(case.candidate_ms) else None
    gbps = _ratio(case.bytes_moved, seconds)
    tflops = _ratio(case.flops, seconds)
    gbps = gbps / 1e9 if gbps is not None else None
    tflops = tflops / 1e12 if tflops is not None else None
    intensity = _ratio(case.flops, case.bytes_moved)
    memory = peaks.memory_gbps if peaks else None
    compute = flop_peak(peaks, dtype, tflops) if peaks else None
    ridge = _ratio(compute.tflops * 1e12, memory * 1e9) if compute and memory else None
    bound = _bound(intensity, ridge, case.flops)
    percent, used = None, ""
    if bound == "memory" and memory is not None and gbps is not None:
        percent, used = 100.0 * gbps / memory, f"memory {memory:g} GB/s"
    elif bound == "compute" and compute is not None and tflops is not None:
        percent = 100.0 * tflops / compute.tflops
        used = compute.label + (f" ({compute.why})" if compute.why else "")
    candidate = case.candidate_ms if _finite_positive(case.candidate_ms) else None
    return RooflineRow(
        case=case.name, dtype=dtype, gbps=gbps, tflops=tflops, intensity=intensity,
        ridge=ridge, bound=bound, percent_of_peak=percent, peak_used=used,
        speedup_eager=_ratio(case.eager_ms, candidate),
        speedup_compile=_ratio(case.compile_ms, candidate))


def roofline(timing: Timing,
             overrides: Mapping[str, DevicePeaks] | None = None) -> Roofline | None:
    """The run's roofline; None on the CPU interpreter (its times say nothing of a device)."""
    if is_interpreter(timing):
        return None
    device = timing.device_name or timing.device
    found = lookup_peaks(timing.device_name, overrides)
    rows = [roofline_row(case, found.peaks) for case in timing.rows]
    return Roofline(device=device, peaks=found.peaks, peak_reason=found.reason, rows=rows,
                    overridden=found.overridden)
