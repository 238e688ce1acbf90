"""Built CPU programs are kept by what went into them (runners/ascendc/cpumodel/
program_cache.py): the same package is compiled once, any change to it builds again, and a
package the key cannot cover (a link, a special file) is never served from the cache.

A legacy twin's object is kept by what its unit read (twin_cache.py): another kernel of the
same package links the kept one; a changed header the twin reads, a new file that could
shadow one, or a kept file changed since, compile it again; what no key covers (a file
outside the folders, an existence probe) is never kept."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from runners.ascendc.cpumodel import build_program, cpu_model_status, program_cache, twin_cache
from runners.ascendc.cpumodel import program as program_module
from runners.ascendc.cpumodel.library import prepare_library
from runners.ascendc.cpumodel.run import run_program
from runners.ascendc.cpumodel.twin_cache import read_dependencies
from runners.ascendc.realapi.sources import UNUSED_AGE_S
from runners.sandbox import SandboxUnavailableError
from tests.support import DATA

STATUS = cpu_model_status()
pytestmark = pytest.mark.skipif(not STATUS.available, reason=f"CPU model: {STATUS.reason}")
GOLDEN_RELU = DATA / "ascendc_golden" / "legacy" / "relu" / "ascendc"


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A cache of this test's own (the library stays where it was built)."""
    kept = tmp_path / "kept"
    monkeypatch.setattr("runners.ascendc.cpumodel.program._kept_programs", lambda _root: kept)
    monkeypatch.setattr("runners.ascendc.cpumodel.program._kept_twins",
                        lambda _root: tmp_path / "twins")
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


# -- the twin's object -------------------------------------------------------------------------


@pytest.fixture
def twin_compiles(cache: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The g++ runs that compile a twin on its own (the programs themselves never kept)."""
    monkeypatch.setattr(program_cache, "fetch", lambda *_args: None)
    seen: list[list[str]] = []
    compile_ = program_module._compile

    def recording(argv: list[str], *args: object) -> tuple[int | None, str]:
        if "-MD" in argv:  # the twin's compile lists what it read
            seen.append(list(argv))
        return compile_(argv, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(program_module, "_compile", recording)
    return seen


def _edit_kernel(folder: Path, old: str, new: str) -> None:
    kernel = next(folder.glob("*_kernel.cpp"))
    text = kernel.read_text(encoding="utf-8")
    assert old in text
    kernel.write_text(text.replace(old, new, 1), encoding="utf-8")


def _relu_of(program: Path, tmp_path: Path) -> list[float]:
    """The program's relu of a few values, run on the CPU model."""
    import numpy as np

    values = np.array([-2.0, -0.5, 0.0, 0.5, 3.0] * 8, dtype=np.float32)
    tmp_path.mkdir()
    (tmp_path / "in0.bin").write_bytes(values.tobytes())
    run = run_program(program, dtype="float32", inputs=[tmp_path / "in0.bin"],
                      outputs=[tmp_path / "out0.bin"], elements=values.size, cores=2)
    assert run.ok, run.log[-2000:]
    return [float(item) for item in
            np.frombuffer((tmp_path / "out0.bin").read_bytes(), dtype=np.float32)]


def test_another_kernel_of_the_package_links_the_kept_twin(twin_compiles: list[list[str]],
                                                           tmp_path: Path) -> None:
    first = build_program(_copy(tmp_path, "a"), tmp_path / "out-a")
    assert first.ok, first.log[-2000:]
    assert len(twin_compiles) == 1
    changed = _copy(tmp_path, "b")
    _edit_kernel(changed, "AscendC::Relu(", "AscendC::Abs(")  # a wrong kernel, same twin
    second = build_program(changed, tmp_path / "out-b")
    assert second.ok, second.log[-2000:]
    assert len(twin_compiles) == 1  # linked the kept object
    assert sorted(path.name for path in (tmp_path / "out-b").iterdir()) == ["cpu_model_program"]
    assert first.program is not None
    assert second.program is not None
    relu = _relu_of(first.program, tmp_path / "run-a")
    absolute = _relu_of(second.program, tmp_path / "run-b")
    assert relu[:5] == [0.0, 0.0, 0.0, 0.5, 3.0]
    assert absolute[:5] == [2.0, 0.5, 0.0, 0.5, 3.0]  # the new kernel, not the kept program


def test_what_the_twin_reads_changing_compiles_it_again(twin_compiles: list[list[str]],
                                                        tmp_path: Path) -> None:
    build_program(_copy(tmp_path, "a"), tmp_path / "out-a")
    assert len(twin_compiles) == 1
    # The tiling header the twin includes.
    tiling = _copy(tmp_path, "b")
    header = next(tiling.glob("*_tiling.h"))
    header.write_text(header.read_text(encoding="utf-8") + "\n// changed\n", encoding="utf-8")
    assert build_program(tiling, tmp_path / "out-b").ok
    assert len(twin_compiles) == 2
    # A new file where the twin's includes are searched: the package's own tikicpulib.h
    # comes before the library's for the twin beside it, so the kept object (built with
    # the library's) cannot stand.
    shadowing = _copy(tmp_path, "c")
    (shadowing / "tikicpulib.h").write_text("#error the package's own tikicpulib.h\n",
                                            encoding="utf-8")
    shadowed = build_program(shadowing, tmp_path / "out-c")
    assert not shadowed.ok
    assert "the package's own tikicpulib.h" in shadowed.log
    assert len(twin_compiles) == 3


def test_a_kept_twin_whose_files_changed_is_not_used(twin_compiles: list[list[str]],
                                                     tmp_path: Path) -> None:
    build_program(_copy(tmp_path, "a"), tmp_path / "out-a")
    entry = next((tmp_path / "twins").iterdir())
    recorded = json.loads((entry / "read.json").read_text(encoding="utf-8"))
    # The library's and the system's headers are listed; the package's are in the key.
    assert any(item["path"].endswith("tikicpulib.h") for item in recorded)
    assert any(item["path"].startswith("/usr/") for item in recorded)
    assert not any(str(tmp_path / "a") in item["path"] for item in recorded)
    # One changed since (here: its digest no longer matching): compiled again.
    recorded[0]["sha256"] = "0" * 64
    (entry / "read.json").write_text(json.dumps(recorded), encoding="utf-8")
    assert build_program(_copy(tmp_path, "b"), tmp_path / "out-b").ok
    assert len(twin_compiles) == 2


def test_odd_header_names_and_planted_outputs_change_nothing(
        twin_compiles: list[list[str]], tmp_path: Path) -> None:
    """From an outside attack: with a header named with backslashes (g++ -MD writes them as
    they are; a reader that unescaped them digested a decoy), nothing is kept; names planted
    in the output folder are neither written through (a link) nor in the way (a folder)."""
    def package(name: str, cap: int) -> Path:  # the name g++ reads, and a decoy
        folder = _copy(tmp_path, name)
        (folder / "relu_a\\\\b.h").write_text(f"#define CORE_CAP {cap}\n", encoding="utf-8")
        (folder / "relu_a\\b.h").write_text("#define CORE_CAP 8\n", encoding="utf-8")  # decoy
        header = next(folder.glob("*_tiling.h"))
        header.write_text('#include "relu_a\\\\b.h"\n' + header.read_text(encoding="utf-8"),
                          encoding="utf-8")
        return folder

    assert build_program(package("a", 8), tmp_path / "out-a").ok
    assert len(twin_compiles) == 1
    assert not (tmp_path / "twins").exists() or not list((tmp_path / "twins").iterdir())

    assert build_program(_copy(tmp_path, "plain"), tmp_path / "out-plain").ok  # kept
    out = tmp_path / "out-c"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched", encoding="utf-8")
    for name in ("cpu_twin.o", "cpu_twin.d"):
        (out / name).symlink_to(victim)
    for name in ("kernel.o", ".units-x"):
        (out / name).mkdir()
    built = build_program(_copy(tmp_path, "c"), out)
    assert built.ok, built.log[-2000:]
    assert len(twin_compiles) == 2  # "c" linked the object kept from "plain"
    assert victim.read_text(encoding="utf-8") == "untouched"


def test_the_key_leaves_out_only_the_kernels_bytes(tmp_path: Path) -> None:
    folder = _copy(tmp_path, "a")
    twin, kernel = folder / "cpu_twin.cpp", next(folder.glob("*_kernel.cpp"))
    identity = "g++\0" + "12"

    def key() -> str | None:
        return twin_cache.twin_key(twin, kernel, [folder], ["-O1"], identity)

    first = key()
    assert first is not None
    kernel.write_text(kernel.read_text(encoding="utf-8") + "// another kernel\n")
    assert key() == first
    (folder / "notes.txt").write_text("a new file could be included")
    assert key() != first
    assert twin_cache.twin_key(twin, kernel, [folder], ["-O1"], "g++\0" + "13") != key()
    (folder / "link.h").symlink_to(kernel)
    assert key() is None


def test_a_twin_that_read_the_kernel_is_not_kept(tmp_path: Path) -> None:
    """Under its own name or another (a hard link): that object holds this kernel."""
    folder = _copy(tmp_path, "a")
    kernel = next(folder.glob("*_kernel.cpp"))
    alias = folder / "alias.h"
    os.link(kernel, alias)
    built = tmp_path / "twin.o"
    built.write_bytes(b"object")
    system = "/usr/include/stdc-predef.h"
    for read in (kernel, alias):
        dependencies = tmp_path / "twin.d"
        dependencies.write_text(f"twin.o: {folder / 'cpu_twin.cpp'} {read} {system}\n")
        twin_cache.store(tmp_path / "kept", "k", [folder], built, dependencies=dependencies,
                         kernel=kernel, trusted=[Path("/usr")])
        assert not (tmp_path / "kept").exists()
    dependencies.write_text(f"twin.o: {folder / 'cpu_twin.cpp'} {system}\n")
    twin_cache.store(tmp_path / "kept", "k", [folder], built, dependencies=dependencies,
                     kernel=kernel, trusted=[Path("/usr")])
    assert twin_cache.fetch(tmp_path / "kept", "k", tmp_path / "fetched.o")
    assert (tmp_path / "fetched.o").read_bytes() == b"object"


def test_what_no_key_covers_is_never_kept(tmp_path: Path) -> None:
    """From an outside attack: a header outside the folders ("../secret.h", whose own
    includes would search a folder the key does not cover), an existence probe
    (__has_include sees files no listing looks at), a folder nested too deep to walk."""
    folder = _copy(tmp_path, "op")
    twin, kernel = folder / "cpu_twin.cpp", next(folder.glob("*_kernel.cpp"))
    secret = tmp_path / "op" / "secret.h"
    secret.write_text("#define SECRET 1\n")
    built = tmp_path / "twin.o"
    built.write_bytes(b"object")
    trusted = [tmp_path / "library"]
    for read in (f"{folder}/../secret.h", str(secret)):
        dependencies = tmp_path / "twin.d"
        dependencies.write_text(f"twin.o: {twin} {read}\n")
        twin_cache.store(tmp_path / "kept", "k", [folder], built, dependencies=dependencies,
                         kernel=kernel, trusted=trusted)
        assert not (tmp_path / "kept").exists(), read
    assert twin_cache.twin_key(twin, kernel, [folder], [], "g++") is not None
    (folder / "probe.h").write_text('#if __has_include("../flag.h")\n#endif\n')
    assert twin_cache.twin_key(twin, kernel, [folder], [], "g++") is None
    (folder / "probe.h").unlink()
    deep = folder
    for _ in range(1100):  # deeper than the interpreter's recursion limit
        deep = deep / "d"
        deep.mkdir()
    try:
        assert twin_cache.twin_key(twin, kernel, [folder], [], "g++") is None
        assert program_cache.cache_key(folder, None, [], kernel) is None
    finally:  # bottom up: pytest's own clean-up (shutil.rmtree) recurses too
        while deep != folder:
            deep.rmdir()
            deep = deep.parent


@pytest.mark.parametrize(("text", "paths"), [
    ("t.o: /a/b.cpp /x/y.h \\\n /z/w.h\n", ["/a/b.cpp", "/x/y.h", "/z/w.h"]),
    ("t.o: /a/with\\ space.h /b/dollar$$.h /c/hash\\#.h\n",
     ["/a/with space.h", "/b/dollar$.h", "/c/hash#.h"]),
    ("o:\\ x/t.o: /a/colon:\\ b.h\n", ["/a/colon: b.h"]),
    ("no rule here\n", []),
])
def test_the_dependency_list_is_read_with_its_escapes(text: str, paths: list[str]) -> None:
    assert read_dependencies(text) == paths


def test_a_build_that_cannot_start_leaves_no_folder_behind(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_sandbox(*_args: object, **_kwargs: object) -> tuple[int, str]:
        raise SandboxUnavailableError("bubblewrap vanished")

    monkeypatch.setattr(program_module, "_compile", no_sandbox)
    out = tmp_path / "out"
    with pytest.raises(SandboxUnavailableError):
        build_program(_copy(tmp_path, "a"), out)
    assert list(out.iterdir()) == []


def test_each_use_of_the_library_counts(cache: Path) -> None:
    """A library in use is never the unused one a new library's build prunes
    (realapi/sources.py prune_unused)."""
    library = prepare_library()
    long_ago = time.time() - 2 * UNUSED_AGE_S
    os.utime(library.root, (long_ago, long_ago))
    assert prepare_library().root == library.root
    assert library.root.stat().st_mtime > time.time() - 600
