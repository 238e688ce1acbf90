"""`opbot replay` reads a transcript from anywhere: a tampered one is refused or its bad
drafts rejected, and nothing is ever written outside replay's own scratch folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.agent.replay import replay_transcript
from bot.errors import BadInputError
from tests.support import EXAMPLES


def _start(backend: str) -> dict[str, Any]:
    return {"kind": "start", "op": "gelu", "backend": backend, "drafter": "llm",
            "generation": "legacy",
            "spec_yaml": (EXAMPLES / "gelu" / "op.yaml").read_text(encoding="utf-8"),
            "reference_source": (EXAMPLES / "gelu" / "reference.py").read_text(
                encoding="utf-8")}


def _write(tmp_path: Path, entries: list[dict[str, Any]]) -> Path:
    path = tmp_path / "transcript.jsonl"
    path.write_text("\n".join(json.dumps(entry) for entry in entries) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("name", ["../../evil.h", "CMakeLists.txt", "tests/test_gelu.py"])
def test_an_ascendc_draft_naming_a_file_it_may_not_write_is_rejected(
        tmp_path: Path, name: str) -> None:
    path = _write(tmp_path, [_start("ascendc"),
                             {"kind": "candidate", "attempt": 1, "files": {name: "x"}}])
    report = replay_transcript(path)
    assert [item.replayed for item in report.attempts] == ["rejected"]
    assert name in report.attempts[0].reasons[0]["message"]
    assert not (tmp_path.parent / "evil.h").exists()


@pytest.mark.parametrize("entry", [
    {"kind": "candidate", "attempt": "1", "files": {}},
    {"kind": "candidate", "files": {}},
    {"kind": "candidate", "attempt": 1, "files": ["gelu_kernel.cpp"]},
    {"kind": "candidate", "attempt": 10**300, "files": {}},  # names a folder: too long
    {"kind": "candidate", "attempt": -1, "files": {}},
])
def test_malformed_entries_are_bad_input_not_a_traceback(tmp_path: Path,
                                                         entry: dict[str, Any]) -> None:
    with pytest.raises(BadInputError):
        replay_transcript(_write(tmp_path, [_start("triton"), entry]))


@pytest.mark.parametrize("start", [
    {"kind": "start", "backend": "cuda-ptx", "spec_yaml": "", "reference_source": ""},
    {"kind": "start", "backend": "triton"},
])
def test_an_unknown_backend_or_a_bare_start_is_refused(tmp_path: Path,
                                                       start: dict[str, Any]) -> None:
    with pytest.raises(BadInputError):
        replay_transcript(_write(tmp_path, [start]))
