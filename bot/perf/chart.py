"""A mermaid `xychart-beta` bar chart of candidate, PyTorch eager and torch.compile times per
shape, which GitHub and GitLab render in a pull request body and in PERF.md.

xychart-beta draws every `bar [...]` series at the same x positions, one over another
(mermaid-js/mermaid#7392), and has no legend. So each shape gets three slots on the x-axis,
labelled with the shape and the series, and each series is one `bar` line holding its
value in its own slots and 0 elsewhere: the bars stand side by side, each series in its
own colour. Labels are reduced to a safe alphabet and values to plain decimals, so no
shape name or number can end the block, the fence or a quoted string.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

SERIES: tuple[str, ...] = ("kernel", "eager", "compile")
MAX_LABEL = 24
MAX_SHAPES = 8  # more slots than this and the labels no longer fit under the bars
_UNSAFE = re.compile(r"[^A-Za-z0-9 ._-]")


@dataclass(frozen=True)
class ChartBar:
    """One shape's times in ms; None where that series was not measured."""

    label: str
    candidate_ms: float | None
    eager_ms: float | None
    compile_ms: float | None

    def values(self) -> tuple[float | None, ...]:
        return (self.candidate_ms, self.eager_ms, self.compile_ms)


def safe_label(text: str, limit: int = MAX_LABEL) -> str:
    """Only letters, digits, spaces and `._-` (no run of dashes, so no `-->`); collapsed,
    cut to `limit`, never empty."""
    cleaned = re.sub(r"-{2,}", "-", _UNSAFE.sub(" ", text))
    cleaned = re.sub(r"\s+", " ", cleaned).strip()
    return cleaned[:limit].strip() or "case"


# Times outside this range (ms) are not drawn: above it the axis overflows to inf and the
# bars run to 300 digits; below it every bar rounds to 0 at six decimals.
MIN_MS = 1e-6
MAX_MS = 1e9


def _usable(value: float | None) -> float:
    return value if value is not None and MIN_MS <= value <= MAX_MS else 0.0


def _decimals(top: float) -> int:
    """Decimals that keep about four significant digits of the largest value (mermaid's
    numbers are plain decimals: no exponent)."""
    if top <= 0:
        return 0
    return max(0, min(6, 3 - math.floor(math.log10(top))))


def _number(value: float, decimals: int) -> str:
    return f"{value:.{decimals}f}"


def mermaid_chart(title: str, bars: Sequence[ChartBar]) -> list[str]:
    """The fenced mermaid block (lines), or [] when no bar has a usable time."""
    shown = list(bars)[:MAX_SHAPES]
    top = max((_usable(value) for bar in shown for value in bar.values()), default=0.0)
    if top <= 0:
        return []
    decimals = _decimals(top)
    labels = [f'"{safe_label(bar.label, MAX_LABEL - 8)} {series}"'
              for bar in shown for series in SERIES]
    lines = ["```mermaid", "xychart-beta",
             f'    title "{safe_label(title, 60)}"',
             f"    x-axis [{', '.join(labels)}]",
             f'    y-axis "ms" 0 --> {_number(top * 1.1, decimals + 1)}']
    for index in range(len(SERIES)):
        values = [_usable(bar.values()[series]) if series == index else 0.0
                  for bar in shown for series in range(len(SERIES))]
        lines.append(f"    bar [{', '.join(_number(value, decimals) for value in values)}]")
    lines.append("```")
    return lines
