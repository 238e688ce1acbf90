"""The repair oracle: does a feedback text NAME the injected mistake?

A competent reader repairs a mistake when the feedback tells them what it is or where it
is: the class's cue words (a mask, FreeTensor, a power of two...), the variant's own words
(the constant it changed), the mutated line quoted back, or failures confined to one
dtype's cases. A bare "values differ" names nothing. The oracle sees only the feedback text
and what was injected; it then "repairs" by undoing the injection exactly.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence

from benchmarks.repair.mistakes import MistakeClass, Mutation

_MIN_QUOTED = 12  # shorter lines ("mask=mask)") are too common to count as quoted
_CASE = re.compile(r"^\[\w+\] case (?P<name>\S+)", re.MULTILINE)
_AGAIN = re.compile(r"The same problem on cases: (?P<names>[^\n]*)")
_PASSED = re.compile(r"Cases that passed: (?P<names>[^\n]*)")


def added_lines(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """The lines a mutation wrote (stripped), over every file it changed."""
    lines: list[str] = []
    for name, text in after.items():
        old = before.get(name, "").splitlines()
        lines += [line[2:].strip() for line in difflib.ndiff(old, text.splitlines())
                  if line.startswith("+ ") and len(line[2:].strip()) >= _MIN_QUOTED]
    return lines


def _failing_and_passed(feedback: str) -> tuple[set[str], set[str]]:
    failing = {match["name"] for match in _CASE.finditer(feedback)}
    for match in _AGAIN.finditer(feedback):
        failing |= {part.split(" (")[0].strip(" .") for part in match["names"].split(",")}
    passed: set[str] = set()
    for match in _PASSED.finditer(feedback):
        passed |= {part.strip(" .") for part in match["names"].split(",")}
    return failing, passed


def _confined_to(dtype: str, feedback: str) -> bool:
    """Every failing case is of `dtype` and a case of another dtype passed."""
    failing, passed = _failing_and_passed(feedback)
    return bool(failing) and all(dtype in name for name in failing) and any(
        dtype not in name for name in passed)


def _class_cues(mistake: MistakeClass, feedback: str) -> list[str]:
    return [label for label, pattern in mistake.cues
            if re.search(pattern, feedback, re.IGNORECASE)]


def cues_found(mutation: Mutation, feedback: str, written: Sequence[str]) -> tuple[str, ...]:
    """The cues in `feedback` that name the mutation's mistake; () when none does.
    `written` are the lines the mutation wrote (added_lines)."""
    mistake = mutation.mistake
    found = _class_cues(mistake, feedback)
    # `tileLength=7840` in a tiling plan is a figure, not the word naming the constant.
    found += [word for word in mutation.cue_words
              if re.search(rf"\b{word}\b(?!=\d)", feedback)]
    if mistake.line_names_it and any(line in feedback for line in written):
        found.append("quotes the mutated line")
    dtype = mistake.failing_dtype_names_it
    if dtype is not None and _confined_to(dtype, feedback):
        found.append(f"failures confined to {dtype} cases")
    return tuple(dict.fromkeys(found))
