"""Timing strategies, chosen by name, and the re-measuring policy around them.

- `do_bench` (CUDA): Triton's own `triton.testing.do_bench`: warm-up and repetitions given
  as time budgets in ms, the L2 cache flushed before each run, CUDA events per run.
- `npu_events` (Ascend): triton-ascend's build of `triton.testing.do_bench` (NPU events, its
  own cache flush) where its driver is the NPU's; else torch.npu events with a flush here.
- `device_events`: the device's events with a flush here (CUDA without Triton).
- `wall_clock`: the host's clock, the only choice for the CPU interpreter, whose timings say
  nothing about device speed.

Every method returns every sample's figure through `TimingStats` (median, p20/p80, N and
warm-up); `measure` runs a method again when its spread, (p80 - p20) / median, is wider than
the policy allows. Nothing here touches a device at import time.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, get_args

import torch

TimingMethod = Literal["do_bench", "npu_events", "device_events", "wall_clock"]
TIMING_METHODS: tuple[str, ...] = get_args(TimingMethod)
# Median first, then the quartile-ish pair the spread is taken from (do_bench's convention).
QUANTILES = (0.5, 0.2, 0.8)
MAX_REMEASURES = 2
DEFAULT_MAX_SPREAD = 0.10
_L2_FLUSH_BYTES = 256 * 1024 * 1024
_SMI_TIMEOUT_S = 5.0

Runner = Callable[..., "subprocess.CompletedProcess[str]"]


@dataclass(frozen=True)
class TimingStats:
    """One run of a timing method: the summary of its samples (all in ms)."""

    median_ms: float
    min_ms: float
    max_ms: float
    p20_ms: float
    p80_ms: float
    trials: int  # N: timed samples
    warmup: int = 0  # untimed calls before them
    method: str = "wall_clock"
    timer: str = ""  # what took the samples, for the report's note

    @property
    def spread(self) -> float:
        """(p80 - p20) / median; infinite when the median is not positive."""
        if not self.median_ms > 0:
            return math.inf
        return (self.p80_ms - self.p20_ms) / self.median_ms

    @classmethod
    def from_samples(cls, samples: Sequence[float], *, warmup: int, method: str,
                     timer: str) -> TimingStats:
        if not samples:
            raise ValueError("a timing run produced no samples")
        median, p20, p80 = quantiles(samples, QUANTILES)
        return cls(median_ms=median, min_ms=min(samples), max_ms=max(samples), p20_ms=p20,
                   p80_ms=p80, trials=len(samples), warmup=warmup, method=method, timer=timer)


def quantiles(samples: Sequence[float], points: Sequence[float]) -> list[float]:
    """Linear interpolation between the sorted samples, as triton.testing's do_bench does."""
    ordered = sorted(float(item) for item in samples)
    last = len(ordered) - 1

    def at(point: float) -> float:
        position = point * last
        low, high = math.floor(position), math.ceil(position)
        weight = position - low
        return (1 - weight) * ordered[low] + weight * ordered[high]

    return [at(point) for point in points]


@dataclass(frozen=True)
class BenchPlan:
    """How to time on one device. `trials` and `warmup` count calls for the event and
    wall-clock methods; do_bench takes time budgets instead (`warmup_ms`, `rep_ms`)."""

    method: TimingMethod
    trials: int = 0
    warmup: int = 0
    warmup_ms: int = 25
    rep_ms: int = 100

    @property
    def remeasures(self) -> int:
        """How often a too-wide run is measured again; never on the CPU (CI speed, and
        the interpreter's numbers are not worth it)."""
        return 0 if self.method == "wall_clock" else MAX_REMEASURES


def plan_for(device: str) -> BenchPlan:
    if device.startswith("cuda"):
        if _triton_do_bench() is not None:
            return BenchPlan("do_bench")
        return BenchPlan("device_events", trials=50, warmup=5)
    if device.startswith("npu"):
        return BenchPlan("npu_events", trials=50, warmup=5)
    # Today's single cheap timing on the CPU interpreter: two trials, no warm-up.
    return BenchPlan("wall_clock", trials=2, warmup=0)


def bench(call: Callable[[], Any], device: str, plan: BenchPlan) -> TimingStats:
    """One run of `plan`'s method over `call`."""
    match plan.method:
        case "do_bench":
            return time_with_do_bench(call, device, plan)
        case "npu_events":
            return time_with_npu_events(call, device, plan)
        case "device_events":
            return time_with_device_events(call, device, plan)
        case "wall_clock":
            return time_with_wall_clock(call, device, plan)
        case _:
            raise ValueError(f"unsupported timing method: {plan.method}")


# -- the methods ------------------------------------------------------------------------


def _triton_do_bench() -> Callable[..., Any] | None:
    try:
        from triton.testing import do_bench
    except Exception:  # noqa: BLE001 - no (working) Triton: the events method instead
        return None
    return do_bench  # type: ignore[no-any-return]


def _counted(call: Callable[[], Any]) -> tuple[Callable[[], None], list[int]]:
    """`call`, counting its calls: do_bench does not say how many it warmed up with."""
    count = [0]

    def counted() -> None:
        count[0] += 1
        call()

    return counted, count


def _bench_with_triton(do_bench: Callable[..., Any], call: Callable[[], Any], plan: BenchPlan,
                       method: str, timer: str) -> TimingStats:
    counted, calls = _counted(call)
    # return_mode="all": every sample, so N and the spread are known; the quantiles are
    # then taken as do_bench's `quantiles=[0.5, 0.2, 0.8]` would take them.
    samples = [float(item) for item in do_bench(counted, warmup=plan.warmup_ms,
                                                rep=plan.rep_ms, return_mode="all")]
    return TimingStats.from_samples(samples, warmup=max(0, calls[0] - len(samples)),
                                    method=method, timer=timer)


def time_with_do_bench(call: Callable[[], Any], device: str, plan: BenchPlan) -> TimingStats:
    do_bench = _triton_do_bench()
    if do_bench is None:
        return time_with_device_events(call, device, BenchPlan("device_events", 50, 5))
    try:
        return _bench_with_triton(do_bench, call, plan, "do_bench", "triton.testing.do_bench "
                                  f"({plan.warmup_ms} ms warm-up, {plan.rep_ms} ms of runs, "
                                  "L2 flushed before each)")
    except Exception:  # noqa: BLE001 - e.g. an older Triton without return_mode="all"
        # Our own events instead, honestly named in the stats' method.
        return time_with_device_events(call, device, BenchPlan("device_events", 50, 5))


def _npu_triton_do_bench() -> Callable[..., Any] | None:
    """triton-ascend's do_bench, where Triton's active driver is the NPU's (its profiler-based
    do_bench_npu gives a mean only, no samples: no spread, so it is not used)."""
    do_bench = _triton_do_bench()
    if do_bench is None:
        return None
    try:
        from triton.runtime import driver

        backend = str(driver.active.get_current_target().backend)
    except Exception:  # noqa: BLE001 - no active driver on this machine
        return None
    return do_bench if backend in ("npu", "ascend") else None


def time_with_npu_events(call: Callable[[], Any], device: str, plan: BenchPlan) -> TimingStats:
    do_bench = _npu_triton_do_bench()
    if do_bench is not None:
        try:
            return _bench_with_triton(do_bench, call, plan, "npu_events",
                                      "triton-ascend's triton.testing.do_bench (NPU events, "
                                      "cache flushed before each run)")
        except Exception:  # noqa: BLE001, S110 - its helper failed: torch.npu's events below
            pass
    stats = time_with_device_events(call, device, plan)
    return replace(stats, method="npu_events")


def _device_module(device: str) -> Any:
    if device.startswith("cuda"):
        return torch.cuda
    if device.startswith("npu"):
        return getattr(torch, "npu", None)
    return None


def time_with_device_events(call: Callable[[], Any], device: str,
                            plan: BenchPlan) -> TimingStats:
    module = _device_module(device)
    if module is None:
        raise ValueError(f"no event timer for device {device}")
    flush = torch.empty(_L2_FLUSH_BYTES // 4, dtype=torch.float32, device=device)
    for _ in range(plan.warmup):
        call()
    module.synchronize()
    samples: list[float] = []
    for _ in range(plan.trials):
        flush.zero_()  # cold cache: what a kernel meets inside a model
        start = module.Event(enable_timing=True)
        end = module.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        module.synchronize()
        samples.append(float(start.elapsed_time(end)))
    name = "torch.npu" if device.startswith("npu") else "torch.cuda"
    return TimingStats.from_samples(samples, warmup=plan.warmup, method="device_events",
                                    timer=f"{name} events, cache flushed before each run")


def time_with_wall_clock(call: Callable[[], Any], device: str, plan: BenchPlan) -> TimingStats:
    module = _device_module(device)
    for _ in range(plan.warmup):
        call()
    samples: list[float] = []
    for _ in range(plan.trials):
        started = time.perf_counter()
        call()
        if module is not None:
            module.synchronize()
        samples.append((time.perf_counter() - started) * 1000.0)
    return TimingStats.from_samples(samples, warmup=plan.warmup, method="wall_clock",
                                    timer="time.perf_counter on the host")


# -- re-measuring -------------------------------------------------------------------------


@dataclass(frozen=True)
class Measurement:
    """The run kept, how many runs were rejected as too noisy, and whether even the kept
    one is wider than the policy allows."""

    stats: TimingStats
    remeasured: int
    too_wide: bool

    def to_json(self) -> dict[str, Any]:
        stats = self.stats
        return {"median_ms": stats.median_ms, "min_ms": stats.min_ms, "max_ms": stats.max_ms,
                "p20_ms": stats.p20_ms, "p80_ms": stats.p80_ms, "trials": stats.trials,
                "warmup": stats.warmup, "method": stats.method, "timer": stats.timer,
                "remeasured": self.remeasured, "too_wide": self.too_wide}


def measure(run: Callable[[], TimingStats], max_spread: float,
            remeasures: int = MAX_REMEASURES) -> Measurement:
    """`run` once, and again (at most `remeasures` more times) while its spread is wider
    than `max_spread`; the narrowest run is kept."""
    runs = [run()]
    while runs[-1].spread > max_spread and len(runs) <= remeasures:
        runs.append(run())
    best = min(runs, key=lambda stats: stats.spread)
    return Measurement(stats=best, remeasured=len(runs) - 1,
                       too_wide=best.spread > max_spread)


def max_spread_from(value: Any) -> float:
    """The policy's threshold as a request carries it; the default when absent or unusable."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and \
            math.isfinite(value) and value > 0:
        return float(value)
    return DEFAULT_MAX_SPREAD


# -- the device and its clocks ----------------------------------------------------------


def device_name(device: str) -> str:
    try:
        if device.startswith("cuda"):
            return str(torch.cuda.get_device_name(0))
        if device.startswith("npu"):
            return str(getattr(torch, "npu").get_device_name(0))  # noqa: B009 - torch_npu only
    except Exception:  # noqa: BLE001 - a name is for the report; never fail timing over it
        return device
    return "CPU (Triton interpreter)"


def clock_note(device: str, runner: Runner = subprocess.run) -> str:
    """What the clocks and the temperature were, where the device's tool can say."""
    if device.startswith("cuda"):
        return _nvidia_clocks(runner)
    if device.startswith("npu"):
        return _npu_state(runner)
    return "CPU interpreter: no device clocks"


def _smi(command: list[str], runner: Runner) -> tuple[str | None, str]:
    """(stdout, "") or (None, why not): the sandbox may hide the tool or forbid running it."""
    if shutil.which(command[0]) is None:
        return None, f"{command[0]} not found"
    try:
        done = runner(command, capture_output=True, text=True, timeout=_SMI_TIMEOUT_S,
                      check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"{command[0]}: {type(exc).__name__}"
    if done.returncode != 0:
        return None, f"{command[0]} exited {done.returncode}"
    return str(done.stdout), ""


def _nvidia_clocks(runner: Runner) -> str:
    command = ["nvidia-smi", "--query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu",
               "--format=csv,noheader"]
    # The GPU the run sees first is CUDA device 0; nvidia-smi numbers all of them.
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    if visible:
        command.append(f"--id={visible}")
    out, why = _smi(command, runner)
    if out is None:
        return f"clocks not readable ({why})"
    return nvidia_clock_note(out)


def nvidia_clock_note(out: str) -> str:
    """nvidia-smi's CSV line (the first GPU) as a sentence."""
    first = next((line for line in out.splitlines() if line.strip()), "")
    fields = [item.strip() for item in first.split(",")]
    if len(fields) != 4:
        return "clocks not readable (unexpected nvidia-smi output)"
    name, sm, max_sm, temperature = fields
    return f"{name}: SM clock {sm} (max {max_sm}), {temperature} C"


def _npu_state(runner: Runner) -> str:
    out, why = _smi(["npu-smi", "info"], runner)
    if out is None:
        return f"clocks not readable ({why})"
    return npu_clock_note(out)


def npu_clock_note(out: str) -> str:
    """`npu-smi info`'s table (the first chip) as a sentence; it shows no clocks."""
    from runners.ascendc.parsers.npu_smi import parse_npu_smi

    chips = parse_npu_smi(out).chips
    if not chips:
        return "clocks not readable (npu-smi listed no chip)"
    chip = chips[0]
    parts = [f"{chip.name}: clocks not shown by npu-smi info"]
    if chip.temp_c is not None:
        parts.append(f"{chip.temp_c:g} C")
    if chip.power_w is not None:
        parts.append(f"{chip.power_w:g} W")
    if chip.aicore_pct is not None:
        parts.append(f"AI Core {chip.aicore_pct:g}% busy")
    return ", ".join(parts)
