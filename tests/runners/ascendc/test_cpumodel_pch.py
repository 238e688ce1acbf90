"""The CPU-model build's precompiled kernel_operator.h (runners/ascendc/cpumodel/program.py,
runners/ascendc/realapi/pch.py): legacy kernels load a PCH of the header built with the
build's own flags; the verdict, the diagnostics and the log are the same with it and
without, a damaged one is rebuilt, OPBOT_REALAPI_PCH=0 builds as before, and ASC packages
(whose twins start with other includes) build as before. Real g++, real headers: ~10 s a
build."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from runners.ascendc.cpumodel import program as program_module
from runners.ascendc.cpumodel import program_cache
from runners.ascendc.cpumodel.library import prepare_library
from runners.ascendc.cpumodel.program import ProgramBuild, _pch_plan, build_program
from runners.ascendc.realapi.pch import SWITCH, PrecompiledHeader, _digest
from tests.support import DATA, require_cpu_model

pytestmark = pytest.mark.slow
GOLDEN = DATA / "ascendc_golden"
WRONG = {  # a TQue on GM (the API's assertion in a header) and a Cast without a round mode
    "TQue<AscendC::QuePosition::VECIN, BUFFER_NUM> inQueue0_":
        "TQue<AscendC::QuePosition::GM, BUFFER_NUM> inQueue0_",
    "AscendC::Cast(wide, tile, AscendC::RoundMode::CAST_NONE, count)":
        "AscendC::Cast(wide, tile, count)",
}


@pytest.fixture(autouse=True)
def _no_kept_programs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    require_cpu_model()
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    monkeypatch.setattr(program_module, "_kept_programs", lambda _root: tmp_path / "kept")
    monkeypatch.setattr(program_cache, "fetch", lambda *_args: None)
    monkeypatch.delenv(SWITCH, raising=False)


def _package(tmp_path: Path, generation: str, name: str,
             edits: dict[str, str] | None = None) -> Path:
    folder = tmp_path / f"{generation}-{name}" / "ascendc"
    shutil.copytree(GOLDEN / generation / "gelu" / "ascendc", folder)
    kernel = next(folder.glob("gelu_kernel.*"))
    text = kernel.read_text(encoding="utf-8")
    for old, new in (edits or {}).items():
        assert old in text, old
        text = text.replace(old, new)
    kernel.write_text(text, encoding="utf-8")
    return folder


def _pch(folder: Path) -> PrecompiledHeader:
    plan = _pch_plan(folder, None, prepare_library())
    assert plan is not None
    pch = plan.prepare()
    assert pch is not None
    return pch


def _gch(pch: PrecompiledHeader) -> Path:
    return pch.folder / "kernel_operator.h.gch"


def _recorded(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The g++ command lines build_program runs."""
    seen: list[list[str]] = []
    compile_ = program_module._compile

    def recording(argv: list[str], *args: object) -> tuple[int | None, str]:
        seen.append(list(argv))
        return compile_(argv, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(program_module, "_compile", recording)
    return seen


def _build(folder: Path, out: Path, monkeypatch: pytest.MonkeyPatch, *,
           pch: bool) -> ProgramBuild:
    if pch:
        monkeypatch.delenv(SWITCH, raising=False)
    else:
        monkeypatch.setenv(SWITCH, "0")
    try:
        return build_program(folder, out)
    finally:
        monkeypatch.delenv(SWITCH, raising=False)


def _uses(argv: list[str], pch: PrecompiledHeader) -> bool:
    return f"-I{pch.folder}" in argv


def test_g_plus_plus_loads_the_pch_for_the_kernel(tmp_path: Path) -> None:
    """g++ -H (outside the sandbox, trusted golden sources): '!' when it loads the .gch."""
    folder = _package(tmp_path, "legacy", "good")
    library = prepare_library()
    plan = _pch_plan(folder, None, library)
    assert plan is not None
    pch = _pch(folder)
    kernel = next(folder.glob("gelu_kernel.*"))
    done = subprocess.run(["g++", *plan.flags(pch), *library.compile_flags(), f"-I{folder}",
                           "-H", "-fsyntax-only", str(kernel)], capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"! {_gch(pch)}" in done.stderr.splitlines()


def test_the_same_verdict_with_the_pch_and_without(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _recorded(monkeypatch)
    for name, edits in (("good", None), ("wrong", WRONG)):
        folder = _package(tmp_path, "legacy", name, edits)
        pch = _pch(folder)
        with_pch = _build(folder, tmp_path / f"out-{name}-pch", monkeypatch, pch=True)
        assert _uses(seen[-1], pch), name
        without = _build(folder, tmp_path / f"out-{name}", monkeypatch, pch=False)
        assert not _uses(seen[-1], pch), name  # switched off: the command as before
        assert with_pch.ok is without.ok is (edits is None), (name, with_pch.log[-3000:])
        assert with_pch.log == without.log, name
        assert [item.to_json() for item in with_pch.diagnostics] == \
            [item.to_json() for item in without.diagnostics]
        if edits is None:
            assert with_pch.program is not None
            assert without.program is not None
            assert with_pch.program.read_bytes() == without.program.read_bytes()
        else:
            errors = [item for item in with_pch.diagnostics if item.severity == "error"]
            assert any(item.file == str(next(folder.glob("gelu_kernel.*")))
                       for item in errors), [item.to_json() for item in errors]


def test_a_package_file_named_like_a_header_keeps_the_pch_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """-I<package> comes before the system headers: a `cstdint` of its own would be read
    without the PCH, so none is used (nor for a kernel that does not start with the
    header, a twin that includes it, or an ASC package)."""
    folder = _package(tmp_path, "legacy", "shadow")
    (folder / "cstdint").write_text("#error shadowed\n", encoding="utf-8")
    plan = _pch_plan(folder, None, prepare_library())
    assert plan is not None
    assert plan.prepare() is None
    kernel = next(folder.glob("gelu_kernel.*"))
    (folder / "cstdint").unlink()
    kernel.write_text("#define SPLIT_CORE_CUBE\n" + kernel.read_text(encoding="utf-8"))
    assert _pch_plan(folder, None, prepare_library()) is None
    legacy = _package(tmp_path, "legacy", "twin")
    twin = legacy / "cpu_twin.cpp"
    twin.write_text('#include "kernel_operator.h"\n' + twin.read_text(encoding="utf-8"))
    assert _pch_plan(legacy, None, prepare_library()) is None
    assert _pch_plan(_package(tmp_path, "asc", "asc"), None, prepare_library()) is None
    # A file that could tell the PCH's folder is searched (from an outside attack).
    for probe in ('#if __has_include("kernel_operator.h.gch")\n#error seen\n#endif\n',
                  '#if __has_\\\ninclude("x.gch")\n#endif\n', "#define J(a, b) a##b\n",
                  "#include_next <cstdint>\n"):
        probing = _package(tmp_path, "legacy", f"probe{len(probe)}")
        (probing / "probe.h").write_text(probe, encoding="utf-8")
        assert _pch_plan(probing, None, prepare_library()) is None, probe
    seen = _recorded(monkeypatch)
    build_program(folder, tmp_path / "out")
    assert not any("realapi-pch" in item for item in seen[-1])


def test_a_damaged_pch_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _package(tmp_path, "legacy", "damaged")
    gch = _gch(_pch(folder))
    size = gch.stat().st_size
    with gch.open("r+b") as handle:  # zeros inside, its size unchanged
        handle.seek(size // 10)
        handle.write(b"\0" * (size // 20))
    damaged = _digest(gch)
    seen = _recorded(monkeypatch)
    built = _build(folder, tmp_path / "out", monkeypatch, pch=True)
    assert built.ok, built.log[-2000:]
    pch = _pch(folder)
    assert _uses(seen[-1], pch)  # rebuilt first: the digest no longer matched
    assert _digest(_gch(pch)) != damaged


def test_the_library_build_loads_its_shared_pch(tmp_path: Path) -> None:
    """Most cpudebug api_check sources start with kernel_check_params.h: the library build
    precompiles it once, and g++ loads it for them (a wrapper that includes the real header,
    so an unusable PCH means the same text read)."""
    from runners.ascendc.cpumodel.library import (
        _precompile,
        _shared_header,
        _sources,
        _starts_with,
        build_flags,
    )

    library = prepare_library()
    header = _shared_header(library.api)
    starting = [source for source in _sources(library.api) if _starts_with(source, header.name)]
    assert len(starting) >= 20
    assert not _starts_with(next(source for source in _sources(library.api)
                                 if source.name == "kernel_base_check.cpp"), header.name)
    flags = build_flags(library)
    forced = _precompile(header, tmp_path / "pch", flags, deadline=time.monotonic() + 600)
    assert forced == ["-include", str(tmp_path / "pch" / "opbot_library_pch.h")]
    done = subprocess.run(["g++", *flags, *forced, "-H", "-fsyntax-only", str(starting[0])],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"! {tmp_path / 'pch' / 'opbot_library_pch.h.gch'}" in done.stderr.splitlines()
    # No header to precompile: the sources are compiled as before.
    assert _precompile(tmp_path / "missing.h", tmp_path / "none", flags, time.monotonic()) == []
