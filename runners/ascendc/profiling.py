"""The package's benchmark under the profiler -> the device Timing of an Ascend C verdict.

With `time_it`, the judge times opbot's shim against the reference with the NPU's events:
the Timing every backend gives. After a passing verdict the package's profile step then
runs its benchmark (bench_<op>.py, which prints one JSON object of NPU-event timings)
under `msprof op` / `msopprof`, which leaves, under prof/OPPROF_*/, OpBasicInfo.csv (each
kernel launch's task duration on the device) and PipeUtilization.csv (which pipe bounds
it); whole-application msprof leaves op_summary_*.csv under prof/PROF_*/ instead. The
kernel's own device time and its bottleneck join the Timing (`kernel_us`, `bottleneck`);
the benchmark's JSON stands in for the judge's numbers where the judge gave none.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from runners.ascendc.parsers.feedback import feedback_text
from runners.ascendc.parsers.msprof import (
    OpTiming,
    PipeReport,
    parse_msprof_console,
    parse_op_basic_info,
    parse_op_summary,
    parse_pipe_utilization,
)
from runners.base import Timing
from runners.sandbox import read_head

PROFILE_FOLDER = "prof"  # the profile step's --output, relative to the package folder
_RUN_FOLDERS = ("OPPROF_*", "PROF_*")  # msprof op / msopprof, and whole-application msprof
_MAX_CSV_BYTES = 8 * 1024 * 1024  # a profiler CSV is kilobytes; never slurp a huge file
_MAX_FILES = 256  # CSVs read from one run (one folder per launch with --launch-count)
_BENCH_KEYS = ("candidate_ms", "candidate_min_ms", "candidate_max_ms", "reference_ms")


@dataclass(frozen=True)
class KernelProfile:
    """The candidate's kernel as the profiler saw it: every launch's device time."""

    kernel: str
    launches_us: tuple[float, ...]
    block_dim: int | None = None
    bottleneck: str | None = None
    bottleneck_ratio: float | None = None

    @property
    def median_us(self) -> float:
        return statistics.median(self.launches_us)

    def note(self) -> str:
        text = (f"msprof: {self.kernel} {self.median_us:.2f} us per launch on the device "
                f"(median of {len(self.launches_us)}, {min(self.launches_us):.2f}-"
                f"{max(self.launches_us):.2f} us")
        text += f", block dim {self.block_dim})" if self.block_dim is not None else ")"
        if self.bottleneck and self.bottleneck_ratio is not None:
            text += f"; bound by {self.bottleneck} ({self.bottleneck_ratio:.0%} of core time)"
        return text


def profiler_runs(package: Path) -> set[Path]:
    """The profiler's run folders in the package now (taken before a run, to tell new ones)."""
    root = package / PROFILE_FOLDER
    if not root.is_dir():
        return set()
    return {path for pattern in _RUN_FOLDERS for path in root.glob(pattern) if path.is_dir()}


def read_kernel_profile(runs: Sequence[Path], kernels: Sequence[str]) -> KernelProfile | None:
    """The kernel launches the runs recorded: OpBasicInfo.csv rows (msprof op), else
    op_summary rows (whole-application msprof); None when they hold none of `kernels`."""
    rows = [row for path in _files(runs, "OpBasicInfo.csv")
            for row in parse_op_basic_info(_read(path))]
    profile = _from_basic_info(_ours(rows, kernels))
    if profile is not None:
        pipes = [parse_pipe_utilization(_read(path))
                 for path in _files(runs, "PipeUtilization.csv")]
        return _with_bottleneck(profile, pipes)
    return _from_op_summary(runs, kernels)


def missing_profile_note(console: str) -> str:
    """Why a profile run left no launch of the kernel, as far as the profiler's console says."""
    said = feedback_text(parse_msprof_console(console))
    return f"no kernel launch of the package in msprof's output ({said})"


def _ours(rows: Sequence[OpTiming], kernels: Sequence[str]) -> list[OpTiming]:
    """Rows of the candidate's kernels: msprof op names each launch `<kernel>_<n>`."""
    return [row for row in rows if row.task_duration_us is not None and _is_ours(
        row.op_name, kernels)]


def _is_ours(name: str, kernels: Sequence[str]) -> bool:
    return any(name == kernel or name.startswith(f"{kernel}_") for kernel in kernels)


def _from_basic_info(rows: Sequence[OpTiming]) -> KernelProfile | None:
    durations = tuple(row.task_duration_us for row in rows if row.task_duration_us is not None)
    if not durations:
        return None
    return KernelProfile(kernel=rows[0].op_name, launches_us=durations,
                         block_dim=rows[0].block_dim)


def _with_bottleneck(profile: KernelProfile, reports: Sequence[PipeReport]) -> KernelProfile:
    report = next((item for item in reports if item.bottleneck is not None), None)
    if report is None:
        return profile
    return replace(profile, bottleneck=report.bottleneck,
                   bottleneck_ratio=report.bottleneck_ratio)


def _from_op_summary(runs: Sequence[Path], kernels: Sequence[str]) -> KernelProfile | None:
    rows = [row for path in _files(runs, "op_summary_*.csv")
            for row in parse_op_summary(_read(path))
            if row.task_duration_us is not None and _is_ours(row.op_name, kernels)]
    durations = tuple(row.task_duration_us for row in rows if row.task_duration_us is not None)
    if not durations:
        return None
    top = rows[0].pipes[0] if rows[0].pipes else None
    return KernelProfile(kernel=rows[0].op_name, launches_us=durations,
                         block_dim=rows[0].block_dim, bottleneck=top.name if top else None,
                         bottleneck_ratio=top.ratio_mean if top else None)


def _files(runs: Sequence[Path], pattern: str) -> Iterator[Path]:
    found = sorted(path for run in runs for path in run.rglob(pattern) if path.is_file())
    yield from found[:_MAX_FILES]


def _read(path: Path) -> str:
    return read_head(path, _MAX_CSV_BYTES)


def bench_timing(output: str, device: str) -> Timing | None:
    """The Timing the package's benchmark printed (its last JSON line), or None."""
    for line in reversed(output.splitlines()):
        data = _json_object(line.strip())
        if data is not None and all(key in data for key in _BENCH_KEYS):
            return _timing_of(data, device)
    return None


def _json_object(line: str) -> dict[str, Any] | None:
    if not line.startswith("{"):
        return None
    try:
        data = json.loads(line)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _timing_of(data: dict[str, Any], device: str) -> Timing | None:
    try:
        candidate, reference = float(data["candidate_ms"]), float(data["reference_ms"])
        shapes = [[int(size) for size in shape] for shape in data.get("shapes") or []]
        return Timing(device=device, shapes=shapes, trials=int(data.get("trials") or 0),
                      candidate_ms=candidate,
                      candidate_min_ms=float(data["candidate_min_ms"]),
                      candidate_max_ms=float(data["candidate_max_ms"]),
                      reference_ms=reference,
                      speedup=reference / candidate if candidate > 0 else 0.0,
                      note="the package's benchmark (NPU events, median)")
    except (KeyError, TypeError, ValueError):
        return None


def profiled_timing(judged: Timing | None, bench: Timing | None,
                    profile: KernelProfile | None) -> Timing | None:
    """The verdict's Timing: the judge's (else the benchmark's), with the kernel's own
    device time and bottleneck from the profiler."""
    timing = judged or bench
    if timing is None or profile is None:
        return timing
    note = "; ".join(part for part in (timing.note, profile.note()) if part)
    return replace(timing, kernel_us=profile.median_us, bottleneck=profile.bottleneck,
                   note=note)
