"""A failed step's log as the model gets it: start, first error, end (excerpt_log).

A long build prints its first (root) error near the top and hundreds of kilobytes after
it; keeping only the end lost the cause.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from bot.agent.backends.ascendc.feedback import ascendc_feedback
from runners.ascendc.package import Step
from runners.ascendc.parsers.common import excerpt_log, first_error_offset
from runners.ascendc.steps import StepOutcome, _read_step_log, step_failure
from runners.base import VerifyResult
from tests.support_ascend import fixture, read

FIRST = "op_kernel/add_custom.cpp:13:21: error: 'Addd' is not a member of 'AscendC'; " \
    "did you mean 'Add'?"
CUT = re.compile(r"\[\.\.\. (\d+) characters cut \.\.\.\]")


def _noise(chars: int) -> str:
    line = ("[ 42%] Building CXX object CMakeFiles/ascendc_kernels_cpu.dir/op_kernel/"
            "gen_{n}.cpp.o\nwarning: unused parameter 'tiling' [-Wunused-parameter]\n")
    out: list[str] = []
    size = n = 0
    while size < chars:
        out.append(line.format(n=n))
        size += len(out[-1])
        n += 1
    return "".join(out)


def _first_error_block() -> str:
    return ("In file included from op_kernel/add_custom.cpp:1:\n"
            "op_kernel/add_custom.cpp: In function 'void add_custom(uint8_t*)':\n"
            f"{FIRST}\n"
            "   13 |         AscendC::Addd(zLocal, xLocal, yLocal, TILE_LENGTH);\n"
            "      |                  ^~~~\n"
            "      |                  Add\n")


def test_short_log_is_kept_whole() -> None:
    text = "a\nb: error: c\n"
    assert excerpt_log(text) == text


def test_200kb_build_log_keeps_the_first_error_at_the_top() -> None:
    log = "-- Configuring done\n" + _first_error_block() + _noise(200_000) + \
        "gmake: *** [Makefile:91: all] Error 2\n"
    assert len(log) > 200_000
    failure = step_failure(Step("build", ("cmake", "--build", "build")),
                           StepOutcome("build", 2, 30.0, log))
    kept = failure.log_tail or ""
    assert FIRST in kept
    assert "gmake: *** [Makefile:91: all] Error 2" in kept  # the end too
    [cut] = CUT.findall(kept)
    assert int(cut) > 190_000
    assert len(kept) < 7_000
    assert failure.location is not None
    assert (failure.location.file, failure.location.line) == ("op_kernel/add_custom.cpp", 13)
    # What the model reads: the root error, located, with the compiler's suggestion.
    text = ascendc_feedback(VerifyResult(status="failed", reasons=[failure], cases=[],
                                         stages=[], device="npu"), {})
    assert "add_custom.cpp:13: error: 'Addd' is not a member of 'AscendC'" in text
    assert "suggests 'Add'" in text


def test_first_error_in_the_middle_is_kept_with_its_context() -> None:
    log = _noise(60_000) + _first_error_block() + _noise(60_000)
    kept = excerpt_log(log)
    assert len(CUT.findall(kept)) == 2
    assert "In file included from op_kernel/add_custom.cpp:1:" in kept  # context before
    assert FIRST in kept
    assert "|                  ^~~~" in kept  # the caret after
    assert kept.startswith("[ 42%] Building CXX object")
    assert len(kept) < 7_000


def test_first_error_offset_knows_gnu_cmake_and_runtime_lines() -> None:
    for name in ("gnu/cmake-include-could-not-find-ascendc-cmake.txt",
                 "gnu/ld-multiple-definition-cannot-find-lascendcl.txt",
                 "runtime/aclrtSynchronizeStream-aivec-ub-out-of-bounds-507035.txt"):
        text = read(fixture(name))
        offset = first_error_offset(text)
        assert offset is not None, name
    assert first_error_offset("all good\n-- Build files written\n") is None


def test_cut_counts_add_up() -> None:
    """Each marker says exactly how much it stands for: shown + cut == the whole log."""
    log = _noise(30_000) + _first_error_block() + _noise(30_000)
    kept = excerpt_log(log)
    cut = sum(int(n) for n in CUT.findall(kept))
    shown = re.sub(r"\[\.\.\. \d+ characters cut \.\.\.\]\n", "", kept)
    assert len(shown) + cut == len(log)


def test_sandboxed_step_log_is_read_from_its_start(tmp_path: Path) -> None:
    """The sandbox keeps only a log's end; the step reads the whole file back (bounded)."""
    log = tmp_path / "step.log"
    log.write_text(_first_error_block() + _noise(50_000), encoding="utf-8")
    text = _read_step_log(log, "the sandbox's tail")
    assert text.startswith("In file included from op_kernel/add_custom.cpp:1:")
    assert FIRST in excerpt_log(text)
    # Anything but a regular file of ours: the tail alone.
    link = tmp_path / "link.log"
    link.symlink_to(log)
    assert _read_step_log(link, "tail") == "tail"
    assert _read_step_log(tmp_path / "missing.log", "tail") == "tail"
    os.mkfifo(tmp_path / "fifo.log")
    assert _read_step_log(tmp_path / "fifo.log", "tail") == "tail"
