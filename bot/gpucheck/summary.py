"""gpu-check.json and gpu-check.md: one row per operator from its `opbot generate --json`
answer (the Timing object under `perf`, the roofline's first row), tolerant of missing
keys ("-" in the table)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bot.gpucheck.checks import Checks, OpRun
from bot.gpucheck.environment import Machine

COLUMNS = ("op", "status", "verified", "device", "candidate ms", "eager ms", "compile ms",
           "speedup vs eager", "speedup vs compile", "% of peak", "bound")


def op_row(run: OpRun) -> dict[str, Any]:
    """One operator's figures from its answer; None where the answer has none."""
    answer = run.answer or {}
    perf = _mapping(answer.get("perf"))
    roofline = _mapping(answer.get("roofline"))
    rows = roofline.get("rows") if isinstance(roofline.get("rows"), list) else []
    first = _mapping(rows[0]) if rows else {}  # the perf case comes first
    candidate, compiled = _number(perf.get("candidate_ms")), _number(perf.get("compile_ms"))
    speedup_compile = _number(first.get("speedup_compile"))
    if speedup_compile is None and candidate and compiled:
        speedup_compile = compiled / candidate
    return {"op": run.op, "status": run.status, "verified": run.status == "passed",
            "device": answer.get("device") or perf.get("device_name") or None,
            "candidate_ms": candidate, "eager_ms": _number(perf.get("reference_ms")),
            "compile_ms": compiled, "speedup_eager": _number(perf.get("speedup")),
            "speedup_compile": speedup_compile,
            "percent_of_peak": _number(first.get("percent_of_peak")),
            "bound": first.get("bound") or None, "method": perf.get("method") or None,
            "seconds": round(run.seconds, 1),
            "note": run.note}


def table_cells(row: Mapping[str, Any]) -> list[str]:
    return [str(row["op"]), str(row["status"]), "yes" if row["verified"] else "no",
            _text(row["device"]), _fixed(row["candidate_ms"], 3), _fixed(row["eager_ms"], 3),
            _fixed(row["compile_ms"], 3), _times(row["speedup_eager"]),
            _times(row["speedup_compile"]), _percent(row["percent_of_peak"]),
            _text(row["bound"])]


def markdown_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(_cell(cell) for cell in cells) + " |"


def summary(checks: Checks, machine: Machine, *, wall_s: float, budget_s: float,
            setup: Sequence[str]) -> dict[str, Any]:
    return {"gpu": machine.gpu, "python": machine.python, "torch": machine.torch,
            "triton": machine.triton, "wall_s": round(wall_s, 1), "budget_s": budget_s,
            "setup": list(setup), "pytest": asdict(checks.pytest),
            "ops": [op_row(run) for run in checks.ops], "skipped": list(checks.skipped),
            "passed": checks.pytest.status in ("passed", "no tests")
            and all(run.status == "passed" for run in checks.ops)}


def render_markdown(report: Mapping[str, Any]) -> str:
    pytest = report["pytest"]
    lines = ["# GPU check", "",
             f"- GPU: {_text(report['gpu'])}",
             f"- torch {_text(report['torch'])}, triton {_text(report['triton'])}, "
             f"Python {_text(report['python'])}",
             f"- pytest -m gpu: {pytest['status']} ({pytest['summary']})",
             f"- wall time: {report['wall_s']:.0f} s of a {report['budget_s']:.0f} s budget",
             f"- skipped: {'; '.join(report['skipped']) or 'nothing'}", "",
             markdown_row(COLUMNS), markdown_row(["---"] * len(COLUMNS))]
    lines += [markdown_row(table_cells(row)) for row in report["ops"]]
    notes = [f"- {row['op']}: {row['note']}" for row in report["ops"] if row["note"]]
    return "\n".join([*lines, *(["", *notes] if notes else [])]) + "\n"


def write_summary(report: Mapping[str, Any], out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    as_json, as_markdown = out / "gpu-check.json", out / "gpu-check.md"
    as_json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    as_markdown.write_text(render_markdown(report), encoding="utf-8")
    return as_json, as_markdown


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> float | None:
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if is_number else None


def _text(value: Any) -> str:
    return "-" if value is None or value == "" else str(value)


def _fixed(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
