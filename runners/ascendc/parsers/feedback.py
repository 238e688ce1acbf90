"""Any parser result -> the few plain lines an agent needs to fix a kernel: where, what,
the source line, and a hint.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from runners.ascendc.parsers.common import clip
from runners.ascendc.parsers.compiler import BishengInvocation, CompilerReport, Diagnostic
from runners.ascendc.parsers.msprof import (
    PIPE_HINTS,
    MsprofConsole,
    OpStatistic,
    OpSummaryRow,
    OpTiming,
    PipeReport,
)
from runners.ascendc.parsers.npu_smi import NpuSmiInfo
from runners.ascendc.parsers.runtime import RuntimeFailure
from runners.ascendc.parsers.triton_ascend import TritonAscendError


def feedback_text(result: Any, limit: int = 10) -> str:
    """A compact plain-text rendering of any parser result (or list of them)."""
    if isinstance(result, CompilerReport):
        return _compiler_feedback(result.diagnostics, limit, result.errors_generated)
    if isinstance(result, list):
        if not result:
            return "nothing to report"
        if all(isinstance(item, Diagnostic) for item in result):
            return _compiler_feedback(result, limit, None)
        return "\n".join(feedback_text(item, limit) for item in result[:limit])
    renderers: dict[type, Callable[[Any], str]] = {
        Diagnostic: _diagnostic_feedback,
        RuntimeFailure: _runtime_feedback, PipeReport: _pipe_feedback,
        OpTiming: _timing_feedback, OpSummaryRow: _summary_feedback,
        OpStatistic: _statistic_feedback, TritonAscendError: _triton_feedback,
        MsprofConsole: _console_feedback, NpuSmiInfo: _smi_feedback,
        BishengInvocation: _invocation_feedback,
    }
    renderer = renderers.get(type(result))
    return renderer(result) if renderer is not None else str(result)


def _compiler_feedback(diagnostics: Sequence[Diagnostic], limit: int,
                       errors_generated: int | None) -> str:
    if not diagnostics:
        return "no compiler diagnostics found in the log"
    blocks = [_diagnostic_feedback(d) for d in diagnostics[:limit]]
    # Follow-ons are errors the compiler counted too.
    shown = sum(1 + len(d.follow_ons) for d in diagnostics[:limit] if d.severity == "error")
    if len(diagnostics) > limit:
        blocks.append(f"... {len(diagnostics) - limit} more diagnostics")
    if errors_generated is not None and errors_generated > shown:
        blocks.append(f"({errors_generated} errors generated; {shown} of them are in this "
                      "log: it was cut)")
    return "\n".join(blocks)


def _diagnostic_feedback(diagnostic: Diagnostic) -> str:
    where = diagnostic.location or diagnostic.tool or "?"
    lines = [f"{where}: {diagnostic.severity}: {diagnostic.message}"]
    if diagnostic.source_line:
        lines.append(f"    {diagnostic.source_line.strip()}")
    if diagnostic.origin:
        echo = f": {diagnostic.origin_source_line.strip()}" \
            if diagnostic.origin_source_line else ""
        lines.append(f"  reported inside {diagnostic.origin}{echo}")
    if diagnostic.referenced_by:
        lines.append(f"  referenced by {', '.join(diagnostic.referenced_by)}")
    for note in diagnostic.notes[:4]:
        lines.append(f"  note: {note.location or '?'}: {note.message}")
    if len(diagnostic.notes) > 4:
        lines.append(f"  ... {len(diagnostic.notes) - 4} more notes")
    if diagnostic.follow_ons:
        lines.append(f"  {len(diagnostic.follow_ons)} follow-on error(s), likely gone once "
                     "this is fixed: " + "; ".join(
                         f"{item.location or item.tool or '?'}: {clip(item.message, 120)}"
                         for item in diagnostic.follow_ons[:3]))
    if diagnostic.hint:
        lines.append(f"  hint: {diagnostic.hint}")
    return "\n".join(lines)


def _runtime_feedback(failure: RuntimeFailure) -> str:
    code = f"{failure.code}{' (inferred)' if failure.code_inferred else ''}"
    head = f"runtime error {code if failure.code is not None else '(no code)'}"
    if failure.meaning:
        head += f": {failure.meaning}"
    lines = [head]
    details = [f"{label} {value}" for label, value in (
        ("api", failure.api), ("at", failure.call_site), ("kernel", failure.kernel),
        ("operator", failure.operator), ("core", failure.core_type), ("id", failure.error_id))
        if value]
    if details:
        lines.append("  " + ", ".join(details))
    if failure.hint:
        lines.append(f"  hint: {failure.hint}")
    return "\n".join(lines)


def _pipe_feedback(report: PipeReport) -> str:
    if report.bottleneck is None:
        return "PipeUtilization: no pipe data"
    top = report.pipes[0]
    lines = [f"bottleneck: {top.name} {top.ratio_mean:.1%} of core time "
             f"({top.time_us_total:.2f} us over {top.rows} core(s))"]
    others = ", ".join(f"{p.name} {p.ratio_mean:.1%}" for p in report.pipes[1:5])
    if others:
        lines.append(f"  then: {others}")
    if report.core_time_us_max is not None and report.core_time_us_min is not None:
        lines.append(f"  core time {report.core_time_us_min:.2f}-{report.core_time_us_max:.2f}"
                     f" us over {len(report.rows)} core(s)")
    hint = PIPE_HINTS.get(top.pipe)
    if hint:
        lines.append(f"  hint: {hint}")
    return "\n".join(lines)


def _timing_feedback(timing: OpTiming) -> str:
    mix = f", mix block dim {timing.mix_block_dim}" if timing.mix_block_dim is not None else ""
    return (f"{timing.op_name} ({timing.op_type}): {timing.task_duration_us} us, block dim "
            f"{timing.block_dim}{mix}, {timing.current_freq_mhz}/{timing.rated_freq_mhz} MHz")


def _summary_feedback(row: OpSummaryRow) -> str:
    top = f", bottleneck {row.pipes[0].name} {row.pipes[0].ratio_mean:.1%}" if row.pipes else ""
    return (f"{row.op_name} ({row.task_type}): {row.task_duration_us} us, block dim "
            f"{row.block_dim}{top}")


def _statistic_feedback(row: OpStatistic) -> str:
    return (f"{row.op_type} ({row.core_type}) x{row.count}: avg {row.avg_us} us "
            f"(min {row.min_us}, max {row.max_us})")


def _triton_feedback(error: TritonAscendError) -> str:
    where = f"{error.location}: " if error.location else ""
    lines = [f"{where}triton-ascend {error.kind}: {error.message or ''}".rstrip()]
    if error.hint:
        lines.append(f"  hint: {error.hint}")
    return "\n".join(lines)


def _console_feedback(console: MsprofConsole) -> str:
    if console.errors:
        return "msprof failed: " + "; ".join(console.errors[:3])
    if console.ok:
        return f"msprof results in {console.output_dir}"
    return "msprof did not finish (no results directory reported)"


def _smi_feedback(info: NpuSmiInfo) -> str:
    names = sorted({chip.name for chip in info.chips})
    return f"npu-smi {info.smi_version}: {info.device_count} device(s) {', '.join(names)}"


def _invocation_feedback(invocation: BishengInvocation) -> str:
    return (f"bisheng {' '.join(invocation.sources)} -> {invocation.output} "
            f"(arch {invocation.arch}, language {invocation.language})")
