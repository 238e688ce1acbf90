"""What a new build of a cached folder (the real sources, the CPU model library, a PCH)
leaves of the older ones: those nobody used for two weeks go (a CANN upgrade or a new g++
leaves ~200 MB each behind), the rest stays, and a link in the cache is never followed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runners.ascendc.realapi import sources
from runners.ascendc.realapi.sources import UNUSED_AGE_S, mark_used, prune_unused
from tests.runners.ascendc.cache_siblings import DAY_S, aged_folder, planted_siblings
from tests.support import REPO


def test_only_what_nobody_used_for_two_weeks_goes(tmp_path: Path) -> None:
    parent = tmp_path / "cache"
    planted = planted_siblings(parent, tmp_path / "elsewhere")
    keep = aged_folder(parent, "devkit-new_tools-new_cccc", 90 * DAY_S)  # the one just built
    its_programs = aged_folder(parent, "devkit-new_tools-new_cccc-programs", 90 * DAY_S)

    prune_unused(parent, keep)

    planted.check()
    assert keep.is_dir()
    assert its_programs.is_dir()
    # Renamed away before the delete (a reader meanwhile finds nothing, not half), and gone.
    assert [entry.name for entry in parent.iterdir() if "stale" in entry.name] == []


def test_a_folder_rmtree_cannot_delete_stops_nothing(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """(On Python 3.11 rmtree recurses: a folder nested ~1000 deep raises RecursionError.)"""
    parent = tmp_path / "cache"
    first = aged_folder(parent, "devkit-a_tools-a_aaaa", 30 * DAY_S)
    second = aged_folder(parent, "devkit-b_tools-b_bbbb", 30 * DAY_S)
    deleted: list[str] = []

    def rmtree(path: Path, ignore_errors: bool = False) -> None:
        deleted.append(Path(path).name)
        if len(deleted) == 1:
            raise RecursionError("maximum recursion depth exceeded")
        real_rmtree(path, ignore_errors=ignore_errors)

    real_rmtree = shutil.rmtree
    monkeypatch.setattr(shutil, "rmtree", rmtree)
    prune_unused(parent, parent / "devkit-new")
    assert len(deleted) == 2
    assert not first.exists()
    assert not second.exists()


def test_a_cache_folder_that_is_a_link_is_left_alone(tmp_path: Path) -> None:
    planted = planted_siblings(tmp_path / "real", tmp_path / "elsewhere")
    (tmp_path / "cache").symlink_to(tmp_path / "real", target_is_directory=True)
    prune_unused(tmp_path / "cache", tmp_path / "cache" / "devkit-new")
    assert all(path.exists() for path in planted.gone.values())


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


def test_a_use_after_the_listing_keeps_the_folder(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    parent = tmp_path / "cache"
    old = aged_folder(parent, "devkit-old_tools-old_aaaa", 30 * DAY_S)
    listed = sources._mount_points

    def used_meanwhile() -> list[str] | None:  # (called after the listing)
        mark_used(old)
        return listed()

    monkeypatch.setattr(sources, "_mount_points", used_meanwhile)
    prune_unused(parent, parent / "devkit-new")
    assert old.is_dir()


def test_a_leftover_of_an_earlier_prune_goes_without_another_rename(tmp_path: Path) -> None:
    parent = tmp_path / "cache"
    leftover = aged_folder(parent, ".devkit-old_tools-old_aaaa.stale-4242", 30 * DAY_S)
    prune_unused(parent, parent / "devkit-new")
    assert not leftover.exists()
    assert list(parent.iterdir()) == []


def test_a_mount_inside_an_old_folder_keeps_it(tmp_path: Path) -> None:
    """A shared folder mounted into the cache (a bind mount in a mount namespace of the
    test's own) loses nothing, nor does the old folder holding it."""
    parent = tmp_path / "cache"
    old = aged_folder(parent, "devkit-old_tools-old_aaaa", 30 * DAY_S)
    (old / "devkit").mkdir()
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "kernel_operator.h").write_text("shared, not the cache's")
    os.utime(old, (0, 0))
    prune = (f"import sys; sys.path.insert(0, {str(REPO)!r}); "
             "from pathlib import Path; from runners.ascendc.realapi.sources import "
             f"prune_unused; prune_unused(Path({str(parent)!r}), "
             f"Path({str(parent / 'devkit-new')!r}))")
    script = (f'mount --bind "{shared}" "{old / "devkit"}" || exit 77; '
              f'"{sys.executable}" -c "$0"')
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare (util-linux) is not installed: no mount namespace to test in")
    done = subprocess.run([unshare, "--mount", "--propagation", "private", "sh", "-c", script,
                           prune], capture_output=True, text=True, timeout=60, check=False)
    if done.returncode in (1, 77) and not done.stderr.strip().startswith("Traceback"):
        pytest.skip(f"cannot make a mount namespace here: {done.stderr.strip()[-200:]}")
    assert done.returncode == 0, done.stderr
    assert (shared / "kernel_operator.h").read_text() == "shared, not the cache's"
    assert old.is_dir()
