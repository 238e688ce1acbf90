"""Unmasked Triton loads and stores, named by line in the feedback on a failed run."""

from __future__ import annotations

import pytest

from bot.agent.backends.triton.masks import unmasked_accesses, unmasked_note
from tests.support import CANDIDATES

GOOD = (CANDIDATES / "relu__good_tutorial.py").read_text(encoding="utf-8")


@pytest.mark.parametrize(("line", "kinds"), [
    ("tl.store(out_ptr + offs, y)", ["store"]),
    ("tl.store(out_ptr + offs, y, mask=offs < n)", []),
    ("tl.store(out_ptr + offs, y, offs < n)", []),  # the mask given by position
    ("x = tl.load(x_ptr + offs)", ["load"]),
    ("x = tl.load(x_ptr + offs, offs < n, other=0.0)", []),
    ("x = tl.load(block, boundary_check=(0, 1))", []),  # a block pointer
    ("x = triton.language.load(x_ptr + offs)", ["load"]),
    ("x = other.load(x_ptr + offs)", []),  # not Triton's
])
def test_unmasked_accesses(line: str, kinds: list[str]) -> None:
    assert [item.kind for item in unmasked_accesses(line)] == kinds


def test_the_note_names_lines_and_a_good_kernel_has_none() -> None:
    assert unmasked_note(GOOD) == ""
    assert unmasked_note("def broken(:") == ""  # unparsable: nothing to say
    bad = GOOD.replace(", mask=mask)", ")").replace(", mask=mask, other=0.0)", ")")
    assert bad != GOOD
    note = unmasked_note(bad)
    assert "without a mask" in note
    lines = [number for number, text in enumerate(bad.splitlines(), 1)
             if "tl.store(" in text or "tl.load(" in text]
    assert lines
    for number in lines:
        assert f"line {number}:" in note
