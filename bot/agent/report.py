"""PERF.md: what was verified and how fast, for one backend or several side by side.

Each backend's section says where its timings come from (its workbench's notes) or why
there are none; with several backends a comparison on the same cases comes first and the
faster verified one is marked recommended."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from bot.agent.outcome import TuningRow
from bot.perf.chart import ChartBar, mermaid_chart, safe_label
from bot.perf.peaks import DevicePeaks
from bot.perf.roofline import (
    SPEEDUP_FLAG,
    Roofline,
    RooflineRow,
    is_interpreter,
    roofline,
)
from bot.perf.untrusted import md_cell
from runners.base import CaseResult, TimedCase, Timing, VerifyResult

PeakOverrides = Mapping[str, DevicePeaks]
INTERPRETER_NOTE = ("No chart or roofline is shown: the CPU interpreter's wall-clock "
                    "timings say nothing about how fast the kernel runs on a device.")
ABOVE_PEAK = "implausible: above the device's peak; check the timing"
FLAGGED = "flagged for human review"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _shapes(case: CaseResult) -> str:
    return ", ".join("x".join(str(size) for size in shape) or "scalar" for shape in case.shapes)


def case_table(cases: list[CaseResult]) -> list[str]:
    lines = ["| case | shapes | dtypes | seed | max abs err | max rel err | result |",
             "|---|---|---|---|---|---|---|"]
    for case in cases:
        verdict = "passed" if case.passed else "FAILED"
        lines.append(f"| {md_cell(case.name)} | {_shapes(case)} | "
                     f"{md_cell(', '.join(case.dtypes))} | "
                     f"{case.seed} | {_number(case.max_abs_err)} | {_number(case.max_rel_err)} "
                     f"| {verdict} |")
    return lines


def _summary_table(timing: Timing) -> list[str]:
    """Median, min and max of candidate and reference at the perf shapes (every run has it)."""
    shapes = ", ".join("x".join(str(size) for size in shape) for shape in timing.shapes)
    return [
        "| | median ms | min ms | max ms |",
        "|---|---|---|---|",
        f"| candidate | {timing.candidate_ms:.3f} | {timing.candidate_min_ms:.3f} | "
        f"{timing.candidate_max_ms:.3f} |",
        f"| reference (PyTorch eager) | {timing.reference_ms:.3f} | | |",
        "",
        f"Shapes: {shapes}. Trials: {timing.trials}. Device: {md_cell(timing.device)}. "
        f"Reference / candidate: {timing.speedup:.3g}x{_speedup_flag(timing.speedup)}.",
    ]


def _speedup_flag(speedup: float | None) -> str:
    """A speedup this large is more likely a broken timing than a kernel: say so in place."""
    return f" (**{FLAGGED}**)" if speedup is not None and speedup > SPEEDUP_FLAG else ""


def timing_table(timing: Timing, peaks: PeakOverrides | None = None) -> list[str]:
    """The Performance section's lines. On the CPU interpreter: the summary and why there is
    no more. On a device: how it was measured, a row per shape with the roofline, the chart
    and the peaks' source. `peaks`: the policy's perf.peaks, over the built-in table."""
    if is_interpreter(timing):
        return [*_summary_table(timing), "", INTERPRETER_NOTE]
    return device_performance(timing, roofline(timing, peaks))


def _method_line(timing: Timing) -> str:
    spread = "not measured" if timing.spread is None else f"{timing.spread:.1%}"
    device = md_cell(timing.device_name or "unnamed")
    clocks = md_cell(timing.clock_note or "clocks and temperature not read", 300)
    method = md_cell(timing.method or "an unnamed method")
    return (f"Measured with {method}: N={timing.trials} trials "
            f"after {timing.warmup} warm-up run(s); spread {spread} ((p80 - p20) / median of "
            f"the candidate's samples); re-measured {timing.remeasured} time(s) for a wider "
            f"spread than the policy allows. Device: {device} ({md_cell(timing.device)}). "
            f"{clocks}.")


def _shapes_text(shapes: list[list[int]]) -> str:
    return ", ".join("x".join(str(size) for size in shape) or "scalar" for shape in shapes)


def _speedup(value: float | None) -> str:
    if value is None:
        return "-"
    # .3g past 10000x: a 24-digit speedup from a 1e-324 ms "timing" stays one short word.
    shown = f"{value:.2f}x" if value < 1e4 else f"{value:.3g}x"
    return shown + _speedup_flag(value)


def _percent(row: RooflineRow) -> str:
    if row.percent_of_peak is None:
        return "-"
    shown = f"{row.percent_of_peak:.1f}%"
    return f"{shown} (**{ABOVE_PEAK}**)" if row.implausible else shown


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _shape_row(case: TimedCase, row: RooflineRow) -> str:
    compile_ms = "-" if case.compile_ms is None else f"{case.compile_ms:.4g}"
    return (f"| {md_cell(case.name)} | {_shapes_text(case.input_shapes)} | "
            f"{md_cell(row.dtype)} | "
            f"{case.candidate_ms:.4g} | {case.eager_ms:.4g} | {compile_ms} | "
            f"{_speedup(row.speedup_eager)} | {_speedup(row.speedup_compile)} | "
            f"{_rate(row.gbps)} | {_rate(row.tflops)} | {_percent(row)} | "
            f"{row.bound or '-'} |")


def shape_table(timing: Timing, rooflines: list[RooflineRow]) -> list[str]:
    lines = ["| case | shapes | dtype | candidate ms | eager ms | compile ms | vs eager | "
             "vs compile | GB/s | TFLOP/s | % of peak | bound |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [_shape_row(case, row) for case, row in zip(timing.rows, rooflines, strict=True)]
    flagged = [md_cell(row.case) for row in rooflines if row.flagged]
    if flagged:
        lines += ["", f"**Flagged for human review**: {', '.join(flagged)} ran above the "
                  f"device's peak or more than {SPEEDUP_FLAG:g}x faster than eager, which "
                  "is more likely a broken timing than a kernel; check the timing."]
    return lines


def _chart_bars(timing: Timing) -> list[ChartBar]:
    """One bar group per timed shape (the summary's, when no per-shape rows came back)."""
    if not timing.rows:
        return [ChartBar(_shapes_text(timing.shapes[:1]) or "perf", timing.candidate_ms,
                         timing.reference_ms, timing.compile_ms)]
    labels = [_shapes_text(case.input_shapes[:1]) or case.name for case in timing.rows]
    unique = len(set(labels)) == len(labels)
    return [ChartBar(label if unique else f"{index + 1} {label}", case.candidate_ms,
                     case.eager_ms, case.compile_ms)
            for index, (label, case) in enumerate(zip(labels, timing.rows, strict=True))]


def _peaks_line(found: Roofline) -> str:
    used = sorted({md_cell(row.peak_used) for row in found.rows if row.peak_used})
    against = f" Percentages are of: {'; '.join(used)}." if used else ""
    return (f"Peaks: {md_cell(found.peak_source, 300)}.{against} Bytes are the minimum "
            "traffic (each input read once, each output written once); FLOPs are counted "
            "from the reference's operations (matmul 2MNK); memory-bound below the ridge "
            "point, compute-bound above it.")


def device_performance(timing: Timing, found: Roofline | None) -> list[str]:
    lines = [_method_line(timing), ""]
    if found is not None and timing.rows:
        lines += [*shape_table(timing, found.rows), "",
                  "vs eager, vs compile: their median over the candidate's (above 1x, the "
                  "candidate is faster)."]
    else:
        lines += _summary_table(timing)
    if timing.compile_ms is None and timing.compile_note:
        lines += ["", f"torch.compile: not measured ({md_cell(timing.compile_note, 300)})."]
    chart = mermaid_chart(f"{safe_label(timing.device_name or timing.device)} ms per shape",
                          _chart_bars(timing))
    if chart:
        lines += ["", *chart, "",
                  "Bars per shape: kernel (the candidate), eager (PyTorch eager), compile "
                  "(torch.compile, 0 where not measured); lower is faster."]
    if found is not None:
        lines += ["", _peaks_line(found)]
    return lines


@dataclass(frozen=True)
class PerfSection:
    """One backend's part of PERF.md."""

    backend: str
    title: str
    generator: str
    attempts: int
    result: VerifyResult | None
    notes: list[str] = field(default_factory=list)  # the workbench's perf notes
    tuning: list[TuningRow] = field(default_factory=list)


def _timed(sections: list[PerfSection]) -> list[PerfSection]:
    """Verified and timed sections; interpreter timings only when nothing ran on a device
    (a CPU interpreter's wall clock says nothing next to a device's)."""
    timed = [section for section in sections
             if section.result and section.result.passed and section.result.timing]
    on_device = [section for section in timed
                 if section.result and not section.result.device.startswith("cpu")]
    return on_device or timed


def recommended(sections: list[PerfSection]) -> str | None:
    """The fastest verified backend, by median time; None when none was timed."""
    timed = _timed(sections)

    def median(section: PerfSection) -> float:
        timing = section.result.timing if section.result else None
        return timing.candidate_ms if timing else float("inf")

    return min(timed, key=median).backend if timed else None


def tuning_table(rows: list[TuningRow]) -> list[str]:
    lines = ["| variant | simulator estimate | verdict | median ms | kept |",
             "|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {md_cell(row.label)} | {_number(row.estimate)} | "
                     f"{md_cell(row.status)} | "
                     f"{_number(row.candidate_ms)} | {'yes' if row.kept else ''} |")
    return lines


def _verdict_line(section: PerfSection) -> str:
    result = section.result
    verdict = result.status if result else "not verified"
    device = md_cell(result.device) if result else "none"
    return (f"Backend: {section.title}. Generated by: {section.generator}, in "
            f"{section.attempts} attempt(s). Verdict: **{verdict}**. Device: {device}.")


def _note_line(note: str) -> str:
    """A workbench note on one inert line; its own leading `> ` quote survives (the notes
    carry the worker's device and the harness's words, so the rest is escaped)."""
    quote = "> " if note.startswith("> ") else ""
    return quote + md_cell(note.removeprefix(quote), 1000)


def _section_body(section: PerfSection, level: str,
                  peaks: PeakOverrides | None = None) -> list[str]:
    result = section.result
    lines = [_verdict_line(section), "", f"{level} Correctness", ""]
    if result is None:
        lines.append("Not verified.")
    else:
        lines += ["Each case compares the kernel with the PyTorch reference on fresh inputs; "
                  "sizes that are not multiples of any block size check tail handling.", ""]
        lines += case_table(result.cases)
        if result.warnings:
            lines += ["", "Warnings:", ""] + [f"- {md_cell(warning, 300)}"
                                              for warning in result.warnings]
        if result.reasons:
            lines += ["", "Failed checks:", ""]
            lines += [f"- `{md_cell(reason.check)}`: {md_cell(reason.message, 300)}"
                      for reason in result.reasons]
    lines += ["", f"{level} Performance", ""]
    if result is not None and result.timing is not None:
        lines += timing_table(result.timing, peaks)
    else:
        lines.append("Not measured.")
    if section.tuning:
        lines += ["", f"{level} Tuning", "", *tuning_table(section.tuning)]
    if section.notes:
        lines += ["", *[_note_line(note) for note in section.notes]]
    return lines


def _recommendation(sections: list[PerfSection], best: str | None) -> str:
    if best is None:
        return "No backend was both verified and timed here, so none is recommended."
    timed = _timed(sections)
    devices = sorted({md_cell(section.result.device) for section in timed if section.result})
    if len(timed) > 1:
        why = "the faster verified one"
    elif devices[0].startswith("cpu"):
        why = "the only one verified here (interpreter timings, not device speed)"
    else:
        why = "the only one verified and timed on a device here"
    caveat = (f" The timings come from different devices ({', '.join(devices)}): compare "
              "them on one runner before relying on the ranking." if len(devices) > 1 else "")
    return f"Recommended: **{best}**, {why}.{caveat}"


def comparison_table(sections: list[PerfSection], best: str | None) -> list[str]:
    lines = ["| backend | verdict | device | median ms | reference ms | speedup | |",
             "|---|---|---|---|---|---|---|"]
    for section in sections:
        result = section.result
        timing = result.timing if result else None
        mark = "**recommended**" if section.backend == best else ""
        lines.append(
            f"| {section.title} | {result.status if result else 'not verified'} | "
            f"{md_cell(result.device) if result else '-'} | "
            f"{_number(timing.candidate_ms if timing else None)} | "
            f"{_number(timing.reference_ms if timing else None)} | "
            f"{_number(timing.speedup if timing else None)} | {mark} |")
    return lines


def perf_markdown(op: str, sections: list[PerfSection],
                  peaks: PeakOverrides | None = None) -> str:
    """PERF.md for one backend or several; `peaks`: the policy's perf.peaks overrides."""
    lines = [f"# {op}: verification and performance", ""]
    if len(sections) == 1:
        lines += _section_body(sections[0], "##", peaks)
        return "\n".join(lines) + "\n"
    best = recommended(sections)
    lines += ["## Comparison", "",
              "Each backend is verified on the same cases (shapes, dtypes, tolerances) against "
              "the same reference, each verification with its own secret seed for the inputs; "
              "a backend marked not verified ran none of them. "
              + _recommendation(sections, best), ""]
    lines += comparison_table(sections, best)
    for section in sections:
        lines += ["", f"## {section.title}", "", *_section_body(section, "###", peaks)]
    return "\n".join(lines) + "\n"
