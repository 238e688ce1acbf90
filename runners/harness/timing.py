"""Timing strategies, chosen by name: warm-up, many trials, a sync after each, median and spread.

`device_events` uses the device's own event timer (CUDA or NPU) and flushes the L2 cache
between trials; `wall_clock` times on the host (the only choice for the CPU interpreter,
whose timings say nothing about device speed).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import torch

TimingMethod = Literal["device_events", "wall_clock"]
_L2_FLUSH_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class TimingStats:
    median_ms: float
    min_ms: float
    max_ms: float
    trials: int


def _device_module(device: str) -> Any:
    if device.startswith("cuda"):
        return torch.cuda
    if device.startswith("npu"):
        return getattr(torch, "npu", None)
    return None


def time_with_device_events(call: Callable[[], Any], device: str, trials: int,
                            warmup: int) -> TimingStats:
    module = _device_module(device)
    if module is None:
        raise ValueError(f"no event timer for device {device}")
    flush = torch.empty(_L2_FLUSH_BYTES // 4, dtype=torch.float32, device=device)
    for _ in range(warmup):
        call()
    module.synchronize()
    samples: list[float] = []
    for _ in range(trials):
        flush.zero_()  # cold cache: what a kernel meets inside a model
        start = module.Event(enable_timing=True)
        end = module.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        module.synchronize()
        samples.append(float(start.elapsed_time(end)))
    return _stats(samples)


def time_with_wall_clock(call: Callable[[], Any], device: str, trials: int,
                         warmup: int) -> TimingStats:
    module = _device_module(device)
    for _ in range(warmup):
        call()
    samples: list[float] = []
    for _ in range(trials):
        started = time.perf_counter()
        call()
        if module is not None:
            module.synchronize()
        samples.append((time.perf_counter() - started) * 1000.0)
    return _stats(samples)


def _stats(samples: list[float]) -> TimingStats:
    return TimingStats(median_ms=statistics.median(samples), min_ms=min(samples),
                       max_ms=max(samples), trials=len(samples))


def timing_function(method: TimingMethod) -> Callable[[Callable[[], Any], str, int, int],
                                                      TimingStats]:
    match method:
        case "device_events":
            return time_with_device_events
        case "wall_clock":
            return time_with_wall_clock
        case _:
            raise ValueError(f"unsupported timing method: {method}")
