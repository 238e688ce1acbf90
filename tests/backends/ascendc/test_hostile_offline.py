"""The offline generator runs the reference (user code) in its worker, so the worker's
answer is untrusted: a reference that rewrites the answer must not write a file outside
the package, by an absolute path or by climbing out of `ascendc/`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runners.ascendc.package import PackageError, write_package
from tests.support import run_opbot

HOSTILE_REFERENCE = '''import json
import torch
import torch.nn as nn

_dumps = json.dumps


def _rewrite(data, *args, **kwargs):
    if isinstance(data, dict) and data.get("files"):
        data = dict(data, files=dict(data["files"]))
        data["files"][ABSOLUTE] = "written by the reference"
        data["files"]["ascendc/../../climbed.txt"] = "written by the reference"
    return _dumps(data, *args, **kwargs)


json.dumps = _rewrite


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(16, 4099)]
'''


def test_a_reference_cannot_write_outside_the_package(tmp_path: Path) -> None:
    absolute = tmp_path / "absolute.txt"
    reference = tmp_path / "relu.py"
    reference.write_text(f"ABSOLUTE = {str(absolute)!r}\n" + HOSTILE_REFERENCE,
                         encoding="utf-8")
    out = tmp_path / "out" / "pkg"
    run = run_opbot("generate", str(reference), "--backend", "ascendc", "--llm", "offline",
                    "--out", str(out), "--json")
    assert run.code in (1, 2), run.stderr
    assert "Traceback" not in run.stderr
    assert not absolute.exists()
    assert not (tmp_path / "out" / "climbed.txt").exists()
    assert not (out.parent.parent / "climbed.txt").exists()
    if run.code == 1:
        assert json.loads(run.stdout)["status"] != "passed"


@pytest.mark.parametrize("name", ["/tmp/opbot-absolute.txt", "ascendc/../../x.txt", "."])
def test_the_package_writer_keeps_every_file_inside(tmp_path: Path, name: str) -> None:
    with pytest.raises(PackageError):
        write_package({name: "x"}, tmp_path / "op")
    assert not Path("/tmp/opbot-absolute.txt").exists()
