"""What a new build of a cached folder (the real sources, the CPU model library, a PCH)
leaves of the older ones: those nobody used for two weeks go (a CANN upgrade or a new g++
leaves ~200 MB each behind), the rest stays, and a link in the cache is never followed."""

from __future__ import annotations

from pathlib import Path

from runners.ascendc.realapi.sources import UNUSED_AGE_S, mark_used, prune_unused
from tests.runners.ascendc.cache_siblings import DAY_S, aged_folder, planted_siblings


def test_only_what_nobody_used_for_two_weeks_goes(tmp_path: Path) -> None:
    parent = tmp_path / "cache"
    parent.mkdir()
    planted = planted_siblings(parent, tmp_path / "elsewhere")
    keep = aged_folder(parent, "devkit-new_tools-new_cccc", 90 * DAY_S)  # the one just built

    prune_unused(parent, keep)

    assert not planted["old"].exists()
    assert not planted["left by a killed build"].exists()
    assert planted["used yesterday"].is_dir()
    assert keep.is_dir()
    assert planted["link"].is_symlink()
    assert (tmp_path / "elsewhere" / "precious.txt").read_text() == "not the cache's"
    assert planted["lock"].is_file()


def test_a_use_keeps_a_folder_and_a_missing_cache_is_no_error(tmp_path: Path) -> None:
    parent = tmp_path / "cache"
    parent.mkdir()
    used = aged_folder(parent, "used", 2 * UNUSED_AGE_S)
    mark_used(used)
    prune_unused(parent, parent / "new")
    assert used.is_dir()
    prune_unused(tmp_path / "no-such-cache", tmp_path / "no-such-cache" / "new")
    mark_used(tmp_path / "no-such-folder")  # (a read-only cache: nothing to note)
    # (Preparing the real sources next to old ones: test_realapi_typecheck.py; a new PCH:
    # test_realapi_pch.py.)
