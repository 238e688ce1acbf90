"""msprof op / msopprof outputs -> kernel durations and pipe utilisation.

OpBasicInfo.csv and PipeUtilization.csv (msprof op), op_summary_*.csv and
op_statistic_*.csv (whole-application msprof), and the profiler's console.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from runners.ascendc.parsers.common import JsonResult, to_float, to_int


@dataclass
class OpTiming(JsonResult):
    """One row of msprof op's OpBasicInfo.csv."""

    op_name: str
    op_type: str | None
    task_duration_us: float | None
    block_dim: int | None
    mix_block_dim: int | None
    device_id: int | None
    pid: int | None
    current_freq_mhz: int | None
    rated_freq_mhz: int | None


def _csv_rows(csv_text: str) -> list[dict[str, str]]:
    """CSV rows keyed by stripped header; msprof's trailing comma column is dropped."""
    reader = csv.DictReader(io.StringIO(csv_text.strip()))
    rows: list[dict[str, str]] = []
    for row in reader:
        rows.append({(key or "").strip(): (value or "").strip()
                     for key, value in row.items() if key and key.strip()})
    return rows


def parse_op_basic_info(csv_text: str) -> list[OpTiming]:
    return [OpTiming(
        op_name=row.get("Op Name", ""), op_type=row.get("Op Type") or None,
        task_duration_us=to_float(row.get("Task Duration(us)")),
        block_dim=to_int(row.get("Block Dim")), mix_block_dim=to_int(row.get("Mix Block Dim")),
        device_id=to_int(row.get("Device Id", row.get("Device ID"))), pid=to_int(row.get("Pid")),
        current_freq_mhz=to_int(row.get("Current Freq")),
        rated_freq_mhz=to_int(row.get("Rated Freq"))) for row in _csv_rows(csv_text)]


@dataclass
class PipeStat(JsonResult):
    time_us: float | None
    ratio: float | None
    active_bw_gbs: float | None = None


@dataclass
class PipeRow(JsonResult):
    """One core's row: block_id/sub_block_id (cube0, vector0, vector1...) and its pipes."""

    block_id: int | None
    sub_block_id: str
    core: Literal["aic", "aiv"]
    time_us: float | None
    total_cycles: int | None
    icache_miss_rate: float | None
    pipes: dict[str, PipeStat]


@dataclass
class PipeAggregate(JsonResult):
    """One pipe (e.g. aiv_mte2) over every row where it ran."""

    name: str
    core: Literal["aic", "aiv"]
    pipe: str
    rows: int
    time_us_total: float
    time_us_max: float
    ratio_mean: float
    ratio_max: float
    active_bw_gbs_mean: float | None


@dataclass
class PipeReport(JsonResult):
    rows: list[PipeRow]
    pipes: list[PipeAggregate]  # highest mean ratio first
    bottleneck: str | None  # the name of pipes[0]
    bottleneck_ratio: float | None
    core_time_us_max: float | None  # the slowest core: what the kernel waits for
    core_time_us_min: float | None


_PIPE_COLUMN = re.compile(r"^(?P<core>aic|aiv)_(?P<pipe>[a-z0-9]+)_(?P<what>time\(us\)|ratio|"
                          r"active_bw\(GB/s\))$")
PIPE_HINTS = {
    "vec": ("vector compute bound: fewer vector instructions per element (fuse ops, drop "
            "needless casts), each over a whole tile"),
    "scalar": ("scalar bound: index math, loop control and scalar reads dominate; hoist them, "
               "use bigger tiles and fewer iterations"),
    "mte2": ("GM->UB loads dominate (memory bound): larger contiguous tiles, double "
             "buffering (BUFFER_NUM=2) so loads overlap compute"),
    "mte3": "UB->GM stores dominate: larger contiguous writes, overlap with compute",
    "mte1": "L1->L0 moves dominate: reuse L0 tiles across more cube steps",
    "cube": "cube (matrix) bound: good for matmul; check the tiling keeps the cube fed",
    "mac": "cube (matrix) bound: good for matmul; check the tiling keeps the cube fed",
    "fixpipe": "L0C->output path dominates: fuse the epilogue, fewer output conversions",
}


def parse_pipe_utilization(csv_text: str) -> PipeReport:
    """msprof op's PipeUtilization.csv, any schema (with or without *_active_bw, mix or not)."""
    rows: list[PipeRow] = []
    for row in _csv_rows(csv_text):
        rows.extend(_pipe_rows(row))
    return _pipe_report(rows)


def _pipe_rows(row: dict[str, str]) -> list[PipeRow]:
    """A CSV row holds aic_* and aiv_* columns; a core that did not run has NA in its own."""
    out: list[PipeRow] = []
    for core in ("aic", "aiv"):
        time_us = to_float(row.get(f"{core}_time(us)"))
        if time_us is None:
            continue
        out.append(PipeRow(
            block_id=to_int(row.get("block_id")), sub_block_id=row.get("sub_block_id", ""),
            core=core, time_us=time_us, total_cycles=to_int(row.get(f"{core}_total_cycles")),
            icache_miss_rate=to_float(row.get(f"{core}_icache_miss_rate")),
            pipes=_pipe_stats(row, core)))
    return out


def _pipe_stats(row: dict[str, str], core: str) -> dict[str, PipeStat]:
    found: dict[str, dict[str, float | None]] = {}
    for column, value in row.items():
        match = _PIPE_COLUMN.match(column)
        if match is None or match["core"] != core or match["pipe"] == "total":
            continue
        found.setdefault(match["pipe"], {})[match["what"]] = to_float(value)
    return {pipe: PipeStat(values.get("time(us)"), values.get("ratio"),
                           values.get("active_bw(GB/s)"))
            for pipe, values in found.items()
            if values.get("time(us)") is not None or values.get("ratio") is not None}


def _pipe_report(rows: list[PipeRow]) -> PipeReport:
    aggregates = _aggregate_pipes((row.core, row.pipes) for row in rows)
    times = [row.time_us for row in rows if row.time_us is not None]
    top = aggregates[0] if aggregates else None
    return PipeReport(rows=rows, pipes=aggregates, bottleneck=top.name if top else None,
                      bottleneck_ratio=top.ratio_mean if top else None,
                      core_time_us_max=max(times) if times else None,
                      core_time_us_min=min(times) if times else None)


def _aggregate_pipes(per_row: Iterable[tuple[str, dict[str, PipeStat]]]) -> list[PipeAggregate]:
    collected: dict[tuple[str, str], list[PipeStat]] = {}
    for core, pipes in per_row:
        for pipe, stat in pipes.items():
            collected.setdefault((core, pipe), []).append(stat)
    aggregates = [_aggregate(core, pipe, stats) for (core, pipe), stats in collected.items()]
    # Highest mean ratio first; time breaks ties (the ratio is time over the core's time).
    aggregates.sort(key=lambda a: (a.ratio_mean, a.time_us_total), reverse=True)
    return aggregates


def _aggregate(core: str, pipe: str, stats: list[PipeStat]) -> PipeAggregate:
    ratios = [s.ratio for s in stats if s.ratio is not None]
    times = [s.time_us for s in stats if s.time_us is not None]
    bws = [s.active_bw_gbs for s in stats if s.active_bw_gbs is not None]
    return PipeAggregate(
        name=f"{core}_{pipe}", core="aic" if core == "aic" else "aiv", pipe=pipe,
        rows=len(stats), time_us_total=sum(times), time_us_max=max(times, default=0.0),
        ratio_mean=sum(ratios) / len(ratios) if ratios else 0.0,
        ratio_max=max(ratios, default=0.0),
        active_bw_gbs_mean=sum(bws) / len(bws) if bws else None)


@dataclass
class OpSummaryRow(JsonResult):
    """One task of msprof's op_summary_*.csv (whole-application profiling)."""

    op_name: str
    op_type: str | None
    task_type: str | None
    task_id: int | None
    stream_id: int | None
    device_id: int | None
    task_duration_us: float | None
    task_wait_us: float | None
    block_dim: int | None
    mix_block_dim: int | None
    aicore_time_us: float | None
    aiv_time_us: float | None
    cube_utilization_pct: float | None
    pipes: list[PipeAggregate]
    bottleneck: str | None


def parse_op_summary(csv_text: str) -> list[OpSummaryRow]:
    out: list[OpSummaryRow] = []
    for row in _csv_rows(csv_text):
        pipes = _aggregate_pipes(
            (core, _pipe_stats(row, core)) for core in ("aic", "aiv")
            if to_float(row.get("aicore_time(us)" if core == "aic" else "aiv_time(us)")))
        out.append(OpSummaryRow(
            op_name=row.get("Op Name", ""), op_type=row.get("OP Type") or None,
            task_type=row.get("Task Type") or None, task_id=to_int(row.get("Task ID")),
            stream_id=to_int(row.get("Stream ID")), device_id=to_int(row.get("Device_id")),
            task_duration_us=to_float(row.get("Task Duration(us)")),
            task_wait_us=to_float(row.get("Task Wait Time(us)")),
            block_dim=to_int(row.get("Block Dim")),
            mix_block_dim=to_int(row.get("Mix Block Dim")),
            aicore_time_us=to_float(row.get("aicore_time(us)")),
            aiv_time_us=to_float(row.get("aiv_time(us)")),
            cube_utilization_pct=to_float(row.get("cube_utilization(%)")),
            pipes=pipes, bottleneck=pipes[0].name if pipes else None))
    return out


@dataclass
class OpStatistic(JsonResult):
    """One row of op_statistic_*.csv: per-op-type totals (what do_bench's NPU path reads)."""

    op_type: str
    core_type: str | None
    count: int | None
    total_us: float | None
    min_us: float | None
    avg_us: float | None
    max_us: float | None
    ratio_pct: float | None
    device_id: int | None


def parse_op_statistic(csv_text: str) -> list[OpStatistic]:
    return [OpStatistic(
        op_type=row.get("OP Type", ""), core_type=row.get("Core Type") or None,
        count=to_int(row.get("Count")), total_us=to_float(row.get("Total Time(us)")),
        min_us=to_float(row.get("Min Time(us)")), avg_us=to_float(row.get("Avg Time(us)")),
        max_us=to_float(row.get("Max Time(us)")), ratio_pct=to_float(row.get("Ratio(%)")),
        device_id=to_int(row.get("Device_id"))) for row in _csv_rows(csv_text)]


@dataclass
class MsprofConsole(JsonResult):
    """What msprof op printed: where the results went, and whether it got that far."""

    output_dir: str | None = None
    metrics: list[str] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)
    started: bool = False
    finished: bool = False
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.finished and self.output_dir is not None and not self.errors


_MSPROF_LINE = re.compile(
    r"^(?:[\d-]+ [\d:]+ )?\[(?P<level>INFO|WARNING|WARN|ERROR)\]\s*(?P<m>.*)$")


def parse_msprof_console(text: str) -> MsprofConsole:
    console = MsprofConsole()
    for raw in text.splitlines():
        match = _MSPROF_LINE.match(raw.strip())
        if match is None:
            continue
        level, message = match["level"], match["m"].strip()
        if level == "ERROR":
            console.errors.append(message)
        elif level.startswith("WARN"):
            console.warnings.append(message)
        _msprof_info(console, message)
    return console


def _msprof_info(console: MsprofConsole, message: str) -> None:
    saved = re.match(r"Profiling results saved in (?P<dir>.+)$", message)
    metric = re.match(r"Save profiling data with metric \[(?P<m>[^\]]+)\] success", message)
    task = re.match(r"Running device task: (?P<t>.+)$", message)
    if saved is not None:
        console.output_dir = saved["dir"].strip()
    elif metric is not None:
        console.metrics.append(metric["m"])
    elif task is not None:
        console.tasks.append(task["t"].strip())
    elif message.startswith("Op profiling analysis start"):
        console.started = True
    elif message.startswith("Profiling data parse finished"):
        console.finished = True
