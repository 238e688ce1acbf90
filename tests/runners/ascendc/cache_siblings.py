"""Old and recent folders planted in a cache folder, to see what a new build prunes."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

DAY_S = 24 * 3600.0


def aged_folder(parent: Path, name: str, age_s: float) -> Path:
    folder = parent / name
    (folder / "include").mkdir(parents=True)
    (folder / "include" / "big.gch").write_bytes(b"x" * 1024)
    _age(folder, age_s)
    return folder


def _age(path: Path, age_s: float) -> None:
    when = time.time() - age_s
    os.utime(path, (when, when), follow_symlinks=False)


@dataclass(frozen=True)
class Planted:
    gone: dict[str, Path]  # what a new build beside them removes
    kept: dict[str, Path]  # what it leaves
    outside: Path  # a file outside the cache a link points at

    def check(self) -> None:
        left = [name for name, path in self.gone.items() if os.path.lexists(path)]
        assert not left, f"not pruned: {left}"
        lost = [name for name, path in self.kept.items() if not os.path.lexists(path)]
        assert not lost, f"pruned: {lost}"
        assert self.outside.read_text() == "not the cache's"

    def remove(self) -> None:
        for path in (*self.gone.values(), *self.kept.values()):
            if path.is_symlink() or path.is_file():
                path.unlink()
            elif path.is_dir():
                shutil.rmtree(path)


def planted_siblings(parent: Path, elsewhere: Path) -> Planted:
    """Siblings of every kind in the cache folder `parent`: other versions unused for a
    month or used yesterday, their companion caches, a killed build's leftover, a lock, a
    link to a folder outside, a folder the cache does not name."""
    parent.mkdir(parents=True, exist_ok=True)
    elsewhere.mkdir(parents=True, exist_ok=True)
    outside = elsewhere / "precious.txt"
    outside.write_text("not the cache's")
    _age(elsewhere, 30 * DAY_S)
    link = parent / "devkit-linked_tools-linked_dddd"
    link.symlink_to(elsewhere, target_is_directory=True)
    _age(link, 30 * DAY_S)
    lock = parent / ".devkit-old_tools-old_aaaa.lock"
    lock.write_bytes(b"")
    _age(lock, 30 * DAY_S)
    gone = {
        "old": aged_folder(parent, "devkit-old_tools-old_aaaa", 30 * DAY_S),
        "old's programs": aged_folder(parent, "devkit-old_tools-old_aaaa-programs", DAY_S),
        "left by a killed build": aged_folder(parent, ".devkit-new.x1y2", 20 * DAY_S),
    }
    kept = {
        "used yesterday": aged_folder(parent, "devkit-other_tools-other_bbbb", DAY_S),
        "its programs": aged_folder(parent, "devkit-other_tools-other_bbbb-programs",
                                    30 * DAY_S),
        "not the cache's name": aged_folder(parent, "my-backup", 30 * DAY_S),
        "link": link, "lock": lock,
    }
    return Planted(gone, kept, outside)
