"""The offline drafts' cache: the same job is answered from it, any change traces again,
only answers are kept, and a cache that is damaged or cannot be written changes nothing
but the time taken."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.agent.offline import cache
from bot.agent.offline.job import OfflineJob
from bot.agent.offline.run import run_in_worker
from runners.base import CaseSpec, InputCase
from runners.warm import warm_for_this_process
from tests.support import REFS

MARK = "# kept in the cache"


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache holding the answer for relu, traced once for the module."""
    folder = tmp_path_factory.mktemp("seeded")
    reference = folder / "op" / "reference.py"
    reference.parent.mkdir()
    shutil.copy(REFS / "kb_01_relu.py", reference)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPBOT_CACHE_DIR", str(folder / "cache"))
        patch.delenv("OPBOT_OFFLINE_CACHE", raising=False)
        result = run_in_worker("triton", _job(reference))
    assert result.status == "generated", result.reason
    assert MARK not in result.source
    return folder


@pytest.fixture
def reference(seeded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """relu's reference, and this test's own copy of the seeded cache."""
    monkeypatch.setenv("OPBOT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("OPBOT_OFFLINE_CACHE", raising=False)
    shutil.copytree(seeded / "cache", tmp_path / "cache")
    path = tmp_path / "op" / "reference.py"
    path.parent.mkdir()
    shutil.copy(REFS / "kb_01_relu.py", path)
    return path


@pytest.fixture(autouse=True)
def _warm() -> Iterator[None]:
    """Drafts (and verifications) fork from this test process's warm servers, as in
    `opbot serve`, instead of a cold process each."""
    with warm_for_this_process():
        yield


def _job(reference: Path, **changes: object) -> OfflineJob:
    fields: dict[str, object] = {"reference": reference, "op_name": "relu",
                                 "init_args": None, "cases": [], "options": {}}
    fields.update(changes)
    return OfflineJob(**fields)  # type: ignore[arg-type]


def _entries() -> list[Path]:
    return sorted(cache.folder().glob("*.json"))


def _mark_entry() -> None:
    """Rewrite the one entry so an answer from the cache is told apart from a trace."""
    (entry,) = _entries()
    data = json.loads(entry.read_text(encoding="utf-8"))
    data["source"] += f"\n{MARK}\n"
    entry.write_text(json.dumps(data), encoding="utf-8")


def test_the_same_job_is_answered_from_the_cache(reference: Path) -> None:
    _mark_entry()
    again = run_in_worker("triton", _job(reference))
    assert MARK in again.source
    assert again.status == "generated"
    assert again.kernels
    assert again.aten_ops == ["relu"]
    # Where the reference lies does not matter, its bytes do.
    moved = reference.parent.parent / "elsewhere" / "reference.py"
    moved.parent.mkdir()
    shutil.copy(reference, moved)
    assert MARK in run_in_worker("triton", _job(moved)).source


CASE = CaseSpec(name="small", seed=3, inputs=[InputCase(kind="tensor", shape=[8, 16])])


def test_a_changed_reference_traces_again(reference: Path) -> None:
    _mark_entry()
    reference.write_text(reference.read_text(encoding="utf-8") + "\n# changed\n",
                         encoding="utf-8")
    result = run_in_worker("triton", _job(reference))
    assert result.status == "generated", result.reason
    assert MARK not in result.source
    assert len(_entries()) == 2


@pytest.mark.parametrize("change", ["cases", "op name", "options", "backend",
                                    "generator code", "reference name"])
def test_every_input_of_the_generator_is_in_the_key(change: str, reference: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    before = cache.job_key("triton", _job(reference))
    job, backend = _job(reference), "triton"
    if change == "cases":
        job = _job(reference, cases=[CASE])
    elif change == "op name":
        job = _job(reference, op_name="relu_two")
    elif change == "options":
        job = _job(reference, options={"generation": "asc"})
    elif change == "backend":
        backend = "ascendc"
    elif change == "generator code":
        monkeypatch.setattr(cache, "code_fingerprint", lambda: "another generator")
    else:
        renamed = reference.with_name("model.py")
        reference.rename(renamed)
        job = _job(renamed)
    after = cache.job_key(backend, job)
    assert before is not None
    assert after is not None
    assert after != before


def test_a_reference_that_cannot_be_hashed_is_not_cached(reference: Path,
                                                         tmp_path: Path) -> None:
    link = tmp_path / "link.py"
    link.symlink_to(reference)
    assert cache.job_key("triton", _job(link)) is None
    assert cache.job_key("triton", _job(tmp_path / "missing.py")) is None


def test_a_reference_changed_during_the_trace_cannot_leave_its_draft(
        reference: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The generator traces a private copy of the bytes the key was made of: a file
    rewritten in place meanwhile (from an outside attack) changes neither the draft nor
    what is kept under the key."""
    from bot.agent.offline import run as offline_run

    for entry in _entries():
        entry.unlink()
    traced = offline_run._generate

    def rewritten_meanwhile(backend: str, job: OfflineJob, timeout_s: float) -> object:
        reference.write_text((REFS / "kb_04_swish.py").read_text(encoding="utf-8"),
                             encoding="utf-8")
        return traced(backend, job, timeout_s)

    monkeypatch.setattr(offline_run, "_generate", rewritten_meanwhile)
    first = run_in_worker("triton", _job(reference))
    assert first.aten_ops == ["relu"], first.aten_ops  # the bytes that were hashed
    shutil.copy(REFS / "kb_01_relu.py", reference)
    monkeypatch.setattr(offline_run, "_generate", traced)
    assert run_in_worker("triton", _job(reference)).aten_ops == ["relu"]


def test_errors_are_not_kept(reference: Path) -> None:
    reference.write_text("raise RuntimeError('broken on purpose')\n", encoding="utf-8")
    result = run_in_worker("triton", _job(reference))
    assert result.status == "error"
    assert "broken on purpose" in result.reason
    assert len(_entries()) == 1  # the seeded answer only
    assert run_in_worker("triton", _job(reference), timeout_s=60).status == "error"


def test_unsupported_answers_are_kept(reference: Path) -> None:
    seeded = _entries()
    shutil.copy(REFS / "kb_34_cumsum.py", reference)
    first = run_in_worker("triton", _job(reference))
    assert first.status == "unsupported"
    assert first.unsupported_ops
    (entry,) = set(_entries()) - set(seeded)
    entry.write_text(json.dumps({**json.loads(entry.read_text(encoding="utf-8")),
                                 "reason": MARK}), encoding="utf-8")
    again = run_in_worker("triton", _job(reference))
    assert (again.status, again.reason) == ("unsupported", MARK)
    assert again.unsupported_ops == first.unsupported_ops


@pytest.mark.parametrize("damage", ["not json", "an error kept", "wrong types", "huge",
                                    "deep nesting", "a fifo"])
def test_a_damaged_entry_is_not_an_answer(damage: str, reference: Path) -> None:
    (entry,) = _entries()
    if damage == "not json":
        entry.write_text("{", encoding="utf-8")
    elif damage == "an error kept":
        entry.write_text(json.dumps({"status": "error", "reason": "kept"}), encoding="utf-8")
    elif damage == "wrong types":
        entry.write_text(json.dumps(["status", "generated"]), encoding="utf-8")
    elif damage == "deep nesting":  # json.loads: RecursionError, not a ValueError
        entry.write_text("[" * 200_000, encoding="utf-8")
    elif damage == "a fifo":  # would block a plain read for ever
        entry.unlink()
        os.mkfifo(entry)
    else:
        with entry.open("a", encoding="utf-8") as out:
            out.write(" " * (17 * 1024 * 1024))
    key = cache.job_key("triton", _job(reference))
    assert key is not None
    assert entry.name == f"{key}.json"
    assert cache.fetch(key) is None


def test_a_planted_link_is_traced_again(reference: Path, tmp_path: Path) -> None:
    (entry,) = _entries()
    planted = tmp_path / "planted.json"
    planted.write_text(json.dumps({**json.loads(entry.read_text(encoding="utf-8")),
                                   "source": MARK}), encoding="utf-8")
    entry.unlink()
    entry.symlink_to(planted)
    again = run_in_worker("triton", _job(reference))
    assert again.status == "generated"
    assert MARK not in again.source
    assert not entry.is_symlink()  # the trace's answer took its place


def test_a_cache_that_cannot_be_written_only_costs_time(reference: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    monkeypatch.setenv("OPBOT_CACHE_DIR", str(blocker))
    assert run_in_worker("triton", _job(reference)).status == "generated"
    assert blocker.read_text(encoding="utf-8") == "not a folder"


def test_switched_off_the_cache_is_neither_read_nor_written(
        reference: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPBOT_OFFLINE_CACHE", "0")
    _mark_entry()
    (entry,) = _entries()
    kept = entry.read_text(encoding="utf-8")
    result = run_in_worker("triton", _job(reference))
    assert result.status == "generated"
    assert MARK not in result.source
    assert _entries() == [entry]
    assert entry.read_text(encoding="utf-8") == kept
