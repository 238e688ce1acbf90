"""The precompiled kernel_operator.h of the real-header type-check
(runners/ascendc/realapi/pch.py): a check loads it instead of parsing the header (~5x
faster), and it must never change a result, nor be something a kernel can write.

The compile tests need the real sources and g++ (they skip with real_api_status()'s reason
otherwise). Each check takes ~1 s with the PCH and ~5 s without; a build ~7-15 s.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.repair.mistakes import ASCENDC_MUTATIONS
from runners.ascendc.realapi import pch as pch_module
from runners.ascendc.realapi.pch import (
    SWITCH,
    PrecompiledHeader,
    _digest,
    prepare_pch,
    real_header,
)
from runners.ascendc.realapi.sources import (
    UNUSED_AGE_S,
    RealApi,
    prepare_real_api,
    real_api_status,
)
from runners.ascendc.realapi.typecheck import (
    LOG_LIMIT_CHARS,
    TypecheckResult,
    _read_log,
    complete_include_chains,
    gxx_command,
    leading_include_line,
    pch_flags,
    typecheck_source,
)
from runners.sandbox import private_workdir, run_isolated, sandbox_environment, sandbox_status
from tests.runners.ascendc.cache_siblings import planted_siblings
from tests.support import DATA

GOLDEN = DATA / "ascendc_golden"
REPO = Path(__file__).resolve().parents[3]
RELU = (GOLDEN / "legacy" / "relu" / "ascendc" / "relu_kernel.cpp").read_text("utf-8")
GELU = (GOLDEN / "legacy" / "gelu" / "ascendc" / "gelu_kernel.cpp").read_text("utf-8")
ADD_ASC = (GOLDEN / "asc" / "add" / "ascendc" / "add_kernel.asc").read_text("utf-8")


@pytest.fixture(scope="module")
def real_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealApi]:
    """The real sources, prepared once for this module in a cache of its own (the PCH
    goes there too)."""
    status = real_api_status()
    if not status.available:
        pytest.skip(f"the real Ascend C sources are not here: {status.reason}")
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed: the type-check compiles with it")
    sandbox = sandbox_status()
    if not sandbox.works:
        pytest.skip(f"the sandbox cannot start here: {sandbox.reason}")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPBOT_CACHE_DIR", str(tmp_path_factory.mktemp("opbot-cache")))
        patch.delenv(SWITCH, raising=False)
        yield prepare_real_api()


def _gxx() -> str:
    compiler = shutil.which("g++")
    assert compiler is not None
    return compiler


def _pch(api: RealApi) -> PrecompiledHeader:
    pch = prepare_pch(_gxx(), api, pch_flags(api))
    assert pch is not None, "the PCH could not be built"
    return pch


def _gch(pch: PrecompiledHeader) -> Path:
    return pch.folder / "kernel_operator.h.gch"


def _variant(source: str, replacements: dict[str, str]) -> str:
    for old, new in replacements.items():
        assert old in source, old  # the golden changed: update the mutation
        source = source.replace(old, new)
    return source


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def _used_pch(result: TypecheckResult, api: RealApi) -> bool:
    return f"-I{_pch(api).folder}" in result.command


def _check(kernel: Path, api: RealApi, monkeypatch: pytest.MonkeyPatch, *,
           pch: bool, generation: Any = "legacy") -> TypecheckResult:
    if pch:
        monkeypatch.delenv(SWITCH, raising=False)
    else:
        monkeypatch.setenv(SWITCH, "0")
    try:
        return typecheck_source(kernel, generation=generation, api=api)
    finally:
        monkeypatch.delenv(SWITCH, raising=False)


def _outcome(result: TypecheckResult) -> dict[str, Any]:
    """What a check tells: all of it but the time and the command line."""
    shown = result.to_json()
    del shown["seconds"], shown["command"]
    return json.loads(json.dumps(shown))


def _gxx_include_trace(api: RealApi, kernel: Path, pch: PrecompiledHeader) -> str:
    """g++ -H on a trusted kernel (outside the sandbox): '! x.gch' when it loads the PCH,
    'x x.gch' when it finds it but refuses it."""
    command = [*gxx_command(_gxx(), api, kernel.name, (), pch.folder), "-H"]
    done = subprocess.run(command, cwd=kernel.parent, capture_output=True, text=True,
                          timeout=300, check=False)
    return done.stderr


# -- it is used, and changes nothing -----------------------------------------------------------


def test_a_golden_kernel_loads_the_pch(real_api: RealApi, tmp_path: Path) -> None:
    pch = _pch(real_api)
    # Each use counts: a PCH in use is never the old one a new build prunes.
    long_ago = time.time() - 2 * UNUSED_AGE_S
    os.utime(pch.folder.parent, (long_ago, long_ago))
    assert _pch(real_api).folder.parent.stat().st_mtime > time.time() - 600
    assert _gch(pch).stat().st_size > 10_000_000
    assert pch.header == real_header(real_api)
    assert sorted(entry.name for entry in pch.folder.iterdir()) == ["kernel_operator.h.gch"]
    kernel = _write(tmp_path, "relu_kernel.cpp", RELU)

    assert f"! {_gch(pch)}" in _gxx_include_trace(real_api, kernel, pch).splitlines()
    result = typecheck_source(kernel, generation="legacy", api=real_api)
    assert result.ok, result.log[:2000]
    assert _used_pch(result, real_api)
    # Searched before the real headers.
    includes = [item for item in result.command if item.startswith("-I")]
    assert includes[0] == f"-I{pch.folder}"


def _wrong_kernels() -> dict[str, tuple[str, str]]:
    """name -> (file name, text): the mistakes catalogue's type-checked ones and more."""
    kernels = {
        # An API that does not exist ("did you mean"), a TQue on GM (the API's own
        # assertion in a header, relocated to the kernel) and a Cast without a round mode.
        "api_misuse": ("broken_kernel.cpp", _variant(RELU, {
            "AscendC::Relu(y0, x0, count);": "AscendC::Addd(y0, x0, x0, count);",
            "AscendC::TQue<AscendC::QuePosition::VECIN, BUFFER_NUM> inQueue0_;":
                "AscendC::TQue<AscendC::QuePosition::GM, BUFFER_NUM> inQueue0_;",
            "AscendC::Cast(wide, tile, AscendC::RoundMode::CAST_NONE, count);":
                "AscendC::Cast(wide, tile, count);"})),
        # An asc kernel: a syntax error and a name that is not declared.
        "asc_syntax": ("add_kernel.asc", _variant(ADD_ASC, {
            "namespace opbot_add {": "namespace opbot_add {\nint broken = ;\n"
                                     "int other = undeclared_name;"})),
    }
    for mutation in ASCENDC_MUTATIONS:
        if mutation.checker == "typecheck":
            name = f"gelu_{mutation.edit.__name__.strip('_')}"
            kernels[name] = ("gelu_kernel.cpp", mutation.edit(GELU))
    return kernels


def test_wrong_kernels_get_the_same_diagnostics_with_the_pch_and_without(
        real_api: RealApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kernels = _wrong_kernels()
    assert len(kernels) >= 4
    for name, (file_name, text) in kernels.items():
        kernel = _write(tmp_path / name, file_name, text)
        generation = "asc" if file_name.endswith(".asc") else "legacy"
        with_pch = _check(kernel, real_api, monkeypatch, pch=True, generation=generation)
        without = _check(kernel, real_api, monkeypatch, pch=False, generation=generation)
        assert _used_pch(with_pch, real_api), name
        assert not _used_pch(without, real_api), name
        assert not with_pch.ok, name
        assert with_pch.diagnostics, name
        assert _outcome(with_pch) == _outcome(without), name
        if name == "api_misuse":
            # The comparison covers what matters: the suggestion and the relocation.
            errors = {item.message: item for item in with_pch.diagnostics}
            addd = next(item for message, item in errors.items() if "'Addd'" in message)
            assert addd.suggestion is not None
            assert addd.suggestion.startswith("Add")
            asserted = next(item for message, item in errors.items()
                            if "the real API's check fails" in message)
            assert asserted.file == file_name
            assert asserted.notes[0].file is not None
            assert asserted.notes[0].file.startswith(str(real_api.root))
            # The header chains reach the kernel's #include line (the PCH's end at
            # kernel_operator.h, and g++ without it sometimes stops there too).
            assert f",\n                 from {file_name}:10:\n" in with_pch.log
            assert not re.search(r"/kernel_operator\.h:\d+:\n", with_pch.log)


def test_kernels_the_pch_cannot_stand_for_keep_their_verdict(
        real_api: RealApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kernels = {
        # Another include first: g++ could not load the PCH after it.
        "include_first": ("#include <cstdint>\n" + RELU, True),
        # A macro the real headers read (kernel_tensor.h: #ifndef SPLIT_CORE_CUBE): the
        # header text with it defined rejects the kernel, a PCH made without it would not.
        "macro_first": ("#define SPLIT_CORE_CUBE\n" + RELU, False),
    }
    for name, (text, ok) in kernels.items():
        kernel = _write(tmp_path / name, "relu_kernel.cpp", text)
        with_pch = _check(kernel, real_api, monkeypatch, pch=True)
        without = _check(kernel, real_api, monkeypatch, pch=False)
        assert with_pch.ok is ok, (name, with_pch.log[:2000])
        assert not _used_pch(with_pch, real_api), name
        assert _outcome(with_pch) == _outcome(without), name
    # Were the PCH offered anyway, g++ itself refuses it for that macro.
    trace = _gxx_include_trace(real_api, tmp_path / "macro_first" / "relu_kernel.cpp",
                               _pch(real_api))
    assert f"x {_gch(_pch(real_api))}" in trace.splitlines()


def test_which_kernels_start_with_kernel_operator_h() -> None:
    assert leading_include_line('#include "kernel_operator.h"\nint x;\n') == 1
    assert leading_include_line(
        '\ufeff// a comment\n/* a block\n   comment */\n\n  #  include <kernel_operator.h>'
        " // why\n") == 5
    assert leading_include_line('/* one */ /* two */ #include "kernel_operator.h"\n') == 1
    assert leading_include_line('#include "kernel_operator.h" /* x */\n') == 1
    for text in ('#include <cstdint>\n#include "kernel_operator.h"\n',
                 '#define X 1\n#include "kernel_operator.h"\n',
                 '#pragma once\n#include "kernel_operator.h"\n',
                 '// spliced \\\n#include "kernel_operator.h"\n',
                 '#include "kernel_operator.h" int x;\n',
                 '#include "my/kernel_operator.h"\n',
                 '/* never closed\n#include "kernel_operator.h"\n', ""):
        assert leading_include_line(text) is None, text


def test_include_chains_are_completed_to_the_kernels_include() -> None:
    header = "/api/devkit/include/kernel_operator.h"
    step = "                 from "
    log = (f"In file included from /api/a.h:3,\n{step}{header}:26:\n"
           "/api/b.h:1:2: error: x\n"
           f"In file included from {header}:29:\n"
           "/api/c.h:1:2: note: y\n"
           f"In file included from /api/a.h:3,\n{step}{header}:26,\n{step}k.cpp:10:\n"
           "/api/b.h:1:2: error: z\n"
           "In file included from own.h:2,\n" + step + "k.cpp:11:\n"
           "own.h:1:1: error: w\n"
           f"k.cpp:40:1: error: '{header}:26:' named in a message\n")
    completed = complete_include_chains(log, header, "k.cpp", 10)
    assert completed == (
        f"In file included from /api/a.h:3,\n{step}{header}:26,\n{step}k.cpp:10:\n"
        "/api/b.h:1:2: error: x\n"
        f"In file included from {header}:29,\n{step}k.cpp:10:\n"
        "/api/c.h:1:2: note: y\n"
        f"In file included from /api/a.h:3,\n{step}{header}:26,\n{step}k.cpp:10:\n"
        "/api/b.h:1:2: error: z\n"
        "In file included from own.h:2,\n" + step + "k.cpp:11:\n"
        "own.h:1:1: error: w\n"
        f"k.cpp:40:1: error: '{header}:26:' named in a message\n")
    assert complete_include_chains(completed, header, "k.cpp", 10) == completed


def test_a_long_log_is_cut_in_the_same_place_with_the_pch_and_without(tmp_path: Path) -> None:
    header = "/api/devkit/include/kernel_operator.h"
    step = "                 from "
    error = "/api/b.h:1:2: error: " + "x" * 200 + "\n"
    with_pch = f"In file included from /api/a.h:3,\n{step}{header}:26:\n{error}" * 400
    without = f"In file included from /api/a.h:3,\n{step}{header}:26,\n{step}k.cpp:10:\n{error}"
    without *= 400
    assert len(with_pch) > 2 * LOG_LIMIT_CHARS
    (tmp_path / "pch.log").write_text(with_pch, encoding="utf-8")
    (tmp_path / "text.log").write_text(without, encoding="utf-8")

    def complete(text: str) -> str:
        return complete_include_chains(text, header, "k.cpp", 10)

    cut = _read_log(tmp_path / "pch.log", complete)
    assert cut == _read_log(tmp_path / "text.log", complete)
    assert cut.endswith("[... log cut ...]\n")
    assert cut != _read_log(tmp_path / "pch.log")


# -- an attacker's view ----------------------------------------------------------------------


def test_the_sandbox_cannot_write_the_pch(real_api: RealApi) -> None:
    """What a check lets g++ read, a process in the sandbox cannot change: not the .gch,
    not its folder (a second .gch or header there would be searched first)."""
    pch = _pch(real_api)
    gch = _gch(pch)
    before = (_digest(gch), gch.stat().st_mtime_ns)
    script = (f'echo poison > "{gch}"; echo "#error" > "{pch.folder}/kernel_tiling.h"; '
              f'rm -f "{gch}"; mv "{gch}" "{pch.folder}/moved"; echo done')
    with private_workdir("opbot-pch-test-") as tmp:
        work = tmp / "work"
        work.mkdir()
        outcome = run_isolated(["sh", "-c", script], cwd=work, timeout_s=60,
                               log_path=tmp / "log", env=sandbox_environment(work, {}),
                               readable=[real_api.root, pch.folder])
        log = (tmp / "log").read_text(encoding="utf-8", errors="replace")
    assert outcome.sandboxed
    assert "done" in log
    assert "Read-only file system" in log, log
    assert (_digest(gch), gch.stat().st_mtime_ns) == before
    assert sorted(entry.name for entry in pch.folder.iterdir()) == ["kernel_operator.h.gch"]


def test_a_truncated_pch_is_rebuilt_and_checks_go_on(real_api: RealApi, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    pch = _pch(real_api)
    gch = _gch(pch)
    size = gch.stat().st_size
    # The PCHs of other flags or an older g++ beside it: the rebuild drops the unused ones.
    siblings = planted_siblings(pch.folder.parent.parent, tmp_path / "elsewhere")
    # g++ does not fall back on a truncated .gch: it stops ("cannot read PCH file").
    # Truncated in place: the inode and size change, the size check sees it.
    os.truncate(gch, size // 2)
    kernel = _write(tmp_path, "relu_kernel.cpp", RELU)

    result = _check(kernel, real_api, monkeypatch, pch=True)

    assert result.ok, result.log[:2000]
    assert _used_pch(result, real_api)  # rebuilt first: the size no longer matched
    # (Not byte for byte the old one: g++'s PCHs vary by a few bytes from build to build.)
    assert _gch(_pch(real_api)).stat().st_size > size * 0.9
    siblings.check()
    siblings.remove()  # (the module's other tests list the folder)


def _zero(path: Path, start: float, length: float) -> None:
    """Overwrite a share of the file with zeros, its size unchanged."""
    size = path.stat().st_size
    with path.open("r+b") as handle:
        handle.seek(int(size * start))
        handle.write(b"\0" * int(size * length))


def test_a_damaged_pch_of_the_right_size_is_rebuilt(
        real_api: RealApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gch = _gch(_pch(real_api))
    # Loaded, this one makes g++ report errors inside the real headers for a valid kernel.
    _zero(gch, 0.1, 0.05)
    damaged = _digest(gch)
    kernel = _write(tmp_path, "relu_kernel.cpp", RELU)

    result = _check(kernel, real_api, monkeypatch, pch=True)

    assert result.ok, result.log[:2000]
    assert _used_pch(result, real_api)  # rebuilt first: the digest no longer matched
    assert _digest(_gch(_pch(real_api))) != damaged


def test_a_pch_damaged_after_its_check_does_not_break_checks(
        real_api: RealApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Damaged once this process has checked its digest: cc1plus crashes on it. The check
    runs again without it, and the PCH is dropped, to be rebuilt."""
    gch = _gch(_pch(real_api))
    _zero(gch, 0.25, 0.75)
    info = gch.stat()
    monkeypatch.setattr(pch_module, "_VERIFIED",
                        {(str(gch), info.st_ino, info.st_size, info.st_mtime_ns)})
    kernel = _write(tmp_path, "relu_kernel.cpp", RELU)
    broken = _write(tmp_path / "broken", "relu_kernel.cpp",
                    _variant(RELU, {"AscendC::Relu(y0, x0, count);":
                                    "AscendC::Addd(y0, x0, x0, count);"}))

    result = _check(kernel, real_api, monkeypatch, pch=True)

    assert result.ok, result.log[:2000]
    assert not (gch.parent.parent / ".opbot-ready").exists()  # dropped
    # The result of the check again without it.
    assert not any("realapi-pch" in item for item in result.command)
    assert "internal compiler error" not in result.log
    # The next check rebuilds it, and gets the verdict it always gets.
    wrong = _check(broken, real_api, monkeypatch, pch=True)
    assert _used_pch(wrong, real_api)
    assert _outcome(wrong) == _outcome(_check(broken, real_api, monkeypatch, pch=False))


# -- switched off, failed builds, concurrent builders -----------------------------------------


def test_switched_off_or_unbuildable_means_a_check_as_before(
        real_api: RealApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = _write(tmp_path, "relu_kernel.cpp", RELU)
    monkeypatch.setenv(SWITCH, "0")
    assert prepare_pch(_gxx(), real_api, pch_flags(real_api)) is None
    monkeypatch.delenv(SWITCH)

    # No cache to build in (a file where the folder should be).
    blocked = _write(tmp_path, "not-a-folder", "")
    monkeypatch.setenv("OPBOT_CACHE_DIR", str(blocked))
    assert prepare_pch(_gxx(), real_api, pch_flags(real_api)) is None
    result = typecheck_source(kernel, generation="legacy", api=real_api)
    assert result.ok, result.log[:2000]
    assert not any("realapi-pch" in item for item in result.command)

    # g++ fails, or takes too long: nothing is published, nothing is left behind.
    cache = tmp_path / "cache"
    monkeypatch.setenv("OPBOT_CACHE_DIR", str(cache))
    assert prepare_pch(_gxx(), real_api, [*pch_flags(real_api), "-DASCENDC_DUMP=("]) is None
    assert prepare_pch(_gxx(), real_api, pch_flags(real_api), timeout_s=0.01) is None
    left = [entry.name for entry in (cache / "realapi-pch").iterdir()]
    assert left
    assert all(name.startswith(".") and name.endswith(".lock") for name in left), left


def test_two_processes_building_at_once_build_one_pch(real_api: RealApi) -> None:
    # Flags of their own: a PCH this module has not built yet.
    code = ("import json, shutil; from runners.ascendc.realapi.pch import prepare_pch; "
            "from runners.ascendc.realapi.sources import prepare_real_api; "
            "from runners.ascendc.realapi.typecheck import pch_flags; "
            "api = prepare_real_api(); "
            "pch = prepare_pch(shutil.which('g++'), api, "
            "[*pch_flags(api), '-DOPBOT_PCH_RACE=1']); "
            "print(json.dumps(str(pch.folder) if pch else None))")
    children = [subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=dict(os.environ),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(2)]
    outputs = [child.communicate(timeout=600) for child in children]
    assert [child.returncode for child in children] == [0, 0], [err for _, err in outputs]
    folders = {json.loads(out) for out, _ in outputs}
    assert len(folders) == 1
    folder = folders.pop()
    assert folder is not None
    built = Path(folder).parent
    assert (Path(folder) / "kernel_operator.h.gch").is_file()
    # No half-built folder left beside it.
    assert [entry.name for entry in built.parent.iterdir()
            if entry.name.startswith(f".{built.name}.")] == [f".{built.name}.lock"]
