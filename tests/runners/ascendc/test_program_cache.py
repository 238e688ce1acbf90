"""Built CPU programs are kept by what went into them (runners/ascendc/cpumodel/
program_cache.py): the same package is compiled once, any change to it builds again, and a
package the key cannot cover (a link, a special file) is never served from the cache."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from runners.ascendc.cpumodel import build_program, cpu_model_status, program_cache
from tests.support import DATA

STATUS = cpu_model_status()
pytestmark = pytest.mark.skipif(not STATUS.available, reason=f"CPU model: {STATUS.reason}")
GOLDEN_RELU = DATA / "ascendc_golden" / "legacy" / "relu" / "ascendc"


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A cache of this test's own (the library stays where it was built)."""
    kept = tmp_path / "kept"
    monkeypatch.setattr("runners.ascendc.cpumodel.program._kept_programs", lambda _root: kept)
    return kept


def _copy(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name / "ascendc"
    shutil.copytree(GOLDEN_RELU, folder)
    return folder


def test_the_same_package_is_compiled_once(cache: Path, tmp_path: Path) -> None:
    first = build_program(_copy(tmp_path, "a"), tmp_path / "out-a")
    assert first.ok, first.log[-2000:]
    assert len(list(cache.iterdir())) == 1
    again = build_program(_copy(tmp_path, "b"), tmp_path / "out-b")  # elsewhere, same bytes
    assert again.ok
    assert again.program is not None
    assert first.program is not None
    assert again.program.read_bytes() == first.program.read_bytes()
    assert again.seconds < first.seconds / 4
    assert str(tmp_path / "a") not in again.log  # the log names its own folder


def test_any_change_builds_again(cache: Path, tmp_path: Path) -> None:
    build_program(_copy(tmp_path, "a"), tmp_path / "out-a")
    changed = _copy(tmp_path, "b")
    kernel = next(changed.glob("*_kernel.cpp"))
    kernel.write_text(kernel.read_text() + "\n// a comment changes the key\n")
    (changed / "notes.txt").write_text("and so does any other file")
    built = build_program(changed, tmp_path / "out-b")
    assert built.ok
    assert len(list(cache.iterdir())) == 2


def test_a_package_with_a_link_is_never_served_from_the_cache(cache: Path,
                                                               tmp_path: Path) -> None:
    build_program(_copy(tmp_path, "a"), tmp_path / "out-a")
    linked = _copy(tmp_path, "b")
    outside = tmp_path / "outside.h"
    outside.write_text("// another header\n")
    os.symlink(outside, linked / "extra.h")
    assert program_cache.cache_key(linked, None, [], GOLDEN_RELU / "opbot.json") is None
    built = build_program(linked, tmp_path / "out-b")
    assert built.ok
    assert len(list(cache.iterdir())) == 1  # built, not kept


def test_a_failed_build_is_not_kept(cache: Path, tmp_path: Path) -> None:
    broken = _copy(tmp_path, "a")
    kernel = next(broken.glob("*_kernel.cpp"))
    kernel.write_text(kernel.read_text().replace("AscendC::Relu(", "AscendC::NoSuchRelu(", 1))
    built = build_program(broken, tmp_path / "out-a")
    assert not built.ok
    assert not cache.exists() or not list(cache.iterdir())
