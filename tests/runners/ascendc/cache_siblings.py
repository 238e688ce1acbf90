"""Old and recent folders planted in a cache folder, to see what a new build prunes."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

DAY_S = 24 * 3600.0


def aged_folder(parent: Path, name: str, age_s: float) -> Path:
    folder = parent / name
    (folder / "include").mkdir(parents=True)
    (folder / "include" / "big.gch").write_bytes(b"x" * 1024)
    when = time.time() - age_s
    os.utime(folder, (when, when))
    return folder


def planted_siblings(parent: Path, outside: Path) -> dict[str, Path]:
    """Siblings of every kind in the cache folder `parent`, by what should become of them
    when a new one is built beside them."""
    parent.mkdir(parents=True, exist_ok=True)
    (outside / "precious.txt").parent.mkdir(parents=True, exist_ok=True)
    (outside / "precious.txt").write_text("not the cache's")
    old_when = time.time() - 30 * DAY_S
    link = parent / "linked-old"
    link.symlink_to(outside, target_is_directory=True)
    os.utime(link, (old_when, old_when), follow_symlinks=False)
    os.utime(outside, (old_when, old_when))
    lock = parent / ".other.lock"
    lock.write_bytes(b"")
    os.utime(lock, (old_when, old_when))
    return {
        "old": aged_folder(parent, "devkit-old_tools-old_aaaa", 30 * DAY_S),
        "left by a killed build": aged_folder(parent, ".devkit-new.x1y2", 20 * DAY_S),
        "used yesterday": aged_folder(parent, "devkit-other_tools-other_bbbb", DAY_S),
        "link": link, "lock": lock,
    }


def remove_planted(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
