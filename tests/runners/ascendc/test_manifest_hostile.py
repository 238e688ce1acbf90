"""A package's opbot.json is the pull request's to write: whatever it holds, reading it
ends in a PackageError (a clear `load` failure), never a traceback or a huge read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runners.ascendc.package import PackageError, read_manifest

_GOOD = {"op": "rms_norm", "generation": "legacy", "namespace": "opbot_rms_norm",
         "entries": {"float32": "rms_norm_float32"}, "inputs": ["x"], "outputs": 1,
         "compute_slots": 2, "kernel": "rms_norm_kernel.cpp", "soc": "Ascend910B3",
         "npu_arch": "dav-2201", "pattern": "rows",
         "params": [{"name": "weight", "shape": [1000]}], "output_layouts": ["input"]}


def _package(tmp_path: Path, text: str) -> Path:
    (tmp_path / "ascendc").mkdir()
    (tmp_path / "ascendc" / "opbot.json").write_text(text, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("text", [
    "[" * 100_000 + "]" * 100_000,  # nesting deeper than the decoder's recursion
    json.dumps({**_GOOD, "outputs": 1e400}).replace("Infinity", "1e400"),
    json.dumps({**_GOOD, "pattern": "rows", "params": [{"name": "weight", "shape": [1e400]}]})
    .replace("Infinity", "1e400"),
], ids=["deep", "huge-outputs", "huge-shape"])
def test_hostile_manifests_are_package_errors(tmp_path: Path, text: str) -> None:
    with pytest.raises(PackageError, match=r"not valid JSON|wrong type"):
        read_manifest(_package(tmp_path, text))


def test_a_sparse_giant_manifest_is_refused_before_it_is_read(tmp_path: Path) -> None:
    package = _package(tmp_path, json.dumps(_GOOD))
    with (package / "ascendc" / "opbot.json").open("r+b") as handle:
        handle.truncate(3 << 30)  # 3 GiB apparent, nothing on disk
    with pytest.raises(PackageError, match="a manifest is at most"):
        read_manifest(package)


def test_a_linked_manifest_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere.json").write_text(json.dumps(_GOOD), encoding="utf-8")
    (tmp_path / "ascendc").mkdir()
    (tmp_path / "ascendc" / "opbot.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(PackageError, match="a link"):
        read_manifest(tmp_path)


def test_a_good_manifest_still_reads(tmp_path: Path) -> None:
    assert read_manifest(_package(tmp_path, json.dumps(_GOOD))).op == "rms_norm"
