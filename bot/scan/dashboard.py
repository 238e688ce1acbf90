"""The dashboard: one comment, created once and edited in place (Renovate's dependency
dashboard), showing operators x backends x toolchains, the pull requests the scan opened,
and a box per operator to tick for a regeneration on the next scan.

The comment opens with the scan's state (bot/scan/state.py), then the tables. A ticked box
(`- [x] <!-- opbot:regen gelu -->`) asks for that operator to be regenerated whatever its
verdict, a declined pull request included; the bot unticks it when it acts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from bot.publish import COMMENT_LIMIT
from bot.scan.checks import ScanRow
from bot.scan.state import ScanState
from bot.scan.toolchain import ToolchainRecord

TITLE = "opbot dashboard"
_TICKED = re.compile(r"^\s*[-*]\s+\[[xX]\]\s+<!--\s*opbot:regen\s+(?P<op>[\w.-]{1,100})\s*-->",
                     re.MULTILINE)
_SHOWN_TOOLCHAINS = 3


def ticked(body: str | None) -> set[str]:
    """The operators whose regeneration box is ticked."""
    return {match["op"] for match in _TICKED.finditer(body or "")}


@dataclass(frozen=True)
class Outcome:
    """What the scan did for an operator tonight, for the dashboard's last column."""

    text: str
    pull: int | None = None


_MARKDOWN = re.compile(r"([\\`*\[\]!#<>|~{}])")
# The comment's room (bot/publish.py trims beyond COMMENT_LIMIT): the state first, whole.
_STATE_ROOM = 48_000
_ROOM = COMMENT_LIMIT - 2_000


def _cell(text: str, limit: int = 160) -> str:
    """Text from elsewhere (compiler output, a model's error, the state) as plain text in a
    table cell: markdown and HTML shown, never obeyed."""
    text = " ".join(text.split())
    text = text if len(text) <= limit else text[:limit - 3] + "..."
    # A zero-width space after @: a name in a compiler's output pings nobody.
    return _MARKDOWN.sub(r"\\\1", text).replace("@", "@\u200b")


def _pull_cell(row: ScanRow, state: ScanState, outcomes: dict[str, Outcome]) -> str:
    """The operator's pull request, worded the same every night it stays the same (a
    rerun must not edit the dashboard): tonight's words only for what went wrong."""
    outcome = outcomes.get(row.op)
    if outcome is not None and outcome.pull is None:
        return _cell(outcome.text)
    pull = state.pulls.get(row.op)
    if pull is not None:  # a link the state checked (state.py), not text to escape
        return pull.link() + (" declined" if row.note.startswith("declined") else "")
    return _cell(row.note) if row.action == "skip" else ""


def render(rows: Sequence[ScanRow], state: ScanState, outcomes: dict[str, Outcome], *,
           ticked: set[str] | None = None) -> str:
    """The dashboard's text after tonight's scan (`state` holds tonight's toolchain and
    verdicts). Nothing in it is tonight's unless something changed tonight: a rerun on the
    same toolchain renders the same text."""
    toolchain = state.toolchain or ToolchainRecord()
    state.fit(_STATE_ROOM)
    # Tonight's toolchain is always T1, whatever the state could keep.
    keys = list(dict.fromkeys([toolchain.key(), *state.toolchains()]))[:_SHOWN_TOOLCHAINS]
    labels = {key: f"T{index + 1}" for index, key in enumerate(keys)}
    lines = [state.marker(), f"## {TITLE}", "",
             f"The nightly scan runs on **{_cell(toolchain.key(), 400)}** (T1) since "
             f"{state.since or 'today'}."]
    if state.changes:
        lines.append(f"Changed from the toolchain before: "
                     f"{_cell('; '.join(state.changes), 400)}.")
    if state.problem:
        lines.append(f"Note: {state.problem}.")
    lines += ["", "| operator | backend | " + " | ".join(labels[key] for key in keys)
              + " | reason | pull request |", "|---|---|" + "---|" * len(keys) + "---|---|"]
    size = sum(len(line) + 1 for line in lines)  # kept as lines come: no re-summing
    for count, row in enumerate(rows):
        if size > _ROOM - 8_000:
            lines.append(f"| ... | | {len(rows) - count} more row(s): `opbot scan --json` lists "
                         "every one |" + " |" * len(keys))
            break
        cells = []
        for key in keys:
            verdict = state.under(row.key, key)
            cells.append(f"{verdict.status} ({verdict.date})" if verdict else "-")
        tonight = state.under(row.key, toolchain.key())
        reason = tonight.reason if tonight is not None else row.reason
        lines.append(f"| {_cell(row.op)} | {row.backend} | {' | '.join(cells)} | "
                     f"{_cell(reason)} | {_pull_cell(row, state, outcomes)} |")
        size += len(lines[-1]) + 1
    lines += ["", *[f"- {labels[key]}: {_cell(key, 400)}" for key in keys]]
    lines += ["", "### Regenerate on the next scan", "",
              "Tick a box and the next nightly scan regenerates that operator for the "
              "current toolchain, whatever its verdict (a declined pull request included).", ""]
    size = sum(len(line) + 1 for line in lines)
    for op in sorted({row.op for row in rows if row.backend != "-"}):
        if size > _ROOM:
            lines.append("- ... (more operators than the comment can hold)")
            break
        pull = state.pulls.get(op)
        note = f" (pull request {pull.link()}, for {_cell(pull.toolchain, 120)})" if pull else ""
        box = "x" if op in (ticked or set()) else " "
        lines.append(f"- [{box}] <!-- opbot:regen {op} --> {_cell(op)}{note}")
        size += len(lines[-1]) + 1
    return "\n".join(lines)
