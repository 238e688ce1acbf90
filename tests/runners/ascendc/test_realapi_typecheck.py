"""The real-header type-check (runners/ascendc/realapi): finding and preparing the real
Ascend C sources, our stand-in headers, and g++ -fsyntax-only on kernels in the sandbox.

The compile tests need the real sources (../shared/data/ascend-real beside the checkout, or
OPBOT_ASCEND_REAL_API) and g++; without them they skip with the reason real_api_status()
gives. Each compile takes ~4-10 s, so the broken-kernel checks share one compile.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runners.ascendc.parsers.compiler import Diagnostic
from runners.ascendc.realapi.names import CHECKER_HOOKS, ENUMS, INTRINSICS, all_names
from runners.ascendc.realapi.sources import (
    ENV_VARIABLE,
    RealApi,
    RealApiUnavailable,
    declarations_header,
    prepare_real_api,
    real_api_status,
)
from runners.ascendc.realapi.typecheck import (
    REUSED_NOTE,
    TypecheckResult,
    split_standin_gaps,
    typecheck_package,
    typecheck_source,
)
from runners.sandbox import sandbox_status
from tests.runners.ascendc.cache_siblings import planted_siblings
from tests.support import DATA

GOLDEN = DATA / "ascendc_golden"
REPO = Path(__file__).resolve().parents[3]
GOLDEN_RELU = GOLDEN / "legacy" / "relu" / "ascendc" / "relu_kernel.cpp"


def _require_compiler() -> None:
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed: the type-check compiles with it")
    status = sandbox_status()
    if not status.works:
        pytest.skip(f"the sandbox cannot start here: {status.reason}")


@pytest.fixture(scope="module")
def real_api() -> RealApi:
    """The real sources, prepared in opbot's cache as every check finds them (with the PCH
    the rest of the suite builds once; test_realapi_pch.py damages PCHs in a cache of its
    own, and the preparation itself is tested below in fresh caches)."""
    status = real_api_status()
    if not status.available:
        pytest.skip(f"the real Ascend C sources are not here: {status.reason}")
    _require_compiler()
    return prepare_real_api()


def _errors(result: TypecheckResult) -> list[str]:
    return [f"{item.location}: {item.message}" for item in result.diagnostics
            if item.severity == "error"]


def _variant(source: str, replacements: dict[str, str]) -> str:
    for old, new in replacements.items():
        assert old in source, old  # the golden changed: update the mutation
        source = source.replace(old, new)
    return source


# -- the golden kernels -----------------------------------------------------------------------


@pytest.mark.parametrize("generation", ["legacy", "asc"])
def test_every_golden_kernel_typechecks(real_api: RealApi, generation: str) -> None:
    packages = sorted((GOLDEN / generation).glob("*/ascendc"))
    assert {package.parent.name for package in packages} >= {"relu", "gelu", "add"}
    for package in packages:
        result = typecheck_package(package)
        assert result.skipped is None, result.skipped
        assert _errors(result) == [], (package, result.log[:2000])
        assert result.ok
        assert result.command[:3] == [result.command[0], "-std=c++17", "-fsyntax-only"]
        assert 0 < result.seconds < 120
        if generation == "asc":
            assert any("host side" in note for note in result.notes)


# -- what the real headers reject ---------------------------------------------------------------


def test_api_misuse_is_rejected_with_located_errors(real_api: RealApi, tmp_path: Path) -> None:
    """An API that does not exist, a TQue on GM (it has no AllocTensor) and a Cast without a
    round mode, all in one kernel: each gives an error at the kernel's own line."""
    broken = _variant(GOLDEN_RELU.read_text(encoding="utf-8"), {
        "AscendC::Relu(y0, x0, count);": "AscendC::Addd(y0, x0, x0, count);",
        "AscendC::TQue<AscendC::QuePosition::VECIN, BUFFER_NUM> inQueue0_;":
            "AscendC::TQue<AscendC::QuePosition::GM, BUFFER_NUM> inQueue0_;",
        "AscendC::Cast(wide, tile, AscendC::RoundMode::CAST_NONE, count);":
            "AscendC::Cast(wide, tile, count);",
    })
    lines = broken.splitlines()
    kernel = tmp_path / "broken_kernel.cpp"
    kernel.write_text(broken, encoding="utf-8")

    result = typecheck_source(kernel, generation="legacy", api=real_api)

    assert not result.ok
    assert result.skipped is None
    by_message = {item.message: item for item in result.diagnostics}

    addd = next(item for message, item in by_message.items() if "'Addd'" in message)
    assert addd.file == "broken_kernel.cpp"
    assert addd.line is not None
    assert "Addd" in lines[addd.line - 1]
    assert addd.suggestion is not None
    assert addd.suggestion.startswith("Add")

    alloc = next(item for message, item in by_message.items() if "AllocTensor" in message)
    assert "TPosition::GM" in alloc.message
    assert alloc.file == "broken_kernel.cpp"
    # The real API's own assertion, reported in a header, lands on the kernel's TQue line.
    asserted = next(item for message, item in by_message.items()
                    if "the real API's check fails" in message)
    assert asserted.file == "broken_kernel.cpp"
    assert asserted.line is not None
    assert "QuePosition::GM" in lines[asserted.line - 1]
    assert asserted.notes
    assert asserted.notes[0].file is not None
    assert asserted.notes[0].file.startswith(str(real_api.root))
    assert ".." not in asserted.notes[0].file

    cast = next(item for message, item in by_message.items()
                if "no matching function" in message and "Cast" in message)
    assert cast.file == "broken_kernel.cpp"
    assert cast.line is not None
    assert "Cast(wide, tile, count)" in lines[cast.line - 1]
    assert cast.source_line is not None
    assert "Cast" in cast.source_line


def test_a_hostile_include_reads_nothing_outside_the_sandbox(real_api: RealApi,
                                                             tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("opbot-secret-4f1d9c: do not print me\n", encoding="utf-8")
    folder = tmp_path / "kernel"
    folder.mkdir()
    (folder / "evil_kernel.cpp").write_text(
        f'#include "{secret}"\n#include "../secret.txt"\n' + GOLDEN_RELU.read_text("utf-8"),
        encoding="utf-8")

    result = typecheck_source(folder / "evil_kernel.cpp", generation="legacy", api=real_api)

    assert not result.ok
    shown = result.log + json.dumps(result.to_json())
    assert "opbot-secret-4f1d9c" not in shown
    assert "do not print me" not in shown
    assert any("No such file" in item.message for item in result.diagnostics)


def test_a_timeout_is_a_result(real_api: RealApi) -> None:
    result = typecheck_source(GOLDEN_RELU, generation="legacy", api=real_api, timeout_s=0.01)
    assert not result.ok
    assert result.skipped is None
    assert "did not finish" in result.diagnostics[0].message


# -- a pass reused within a process (the precheck, then the verification) ---------------------


def test_a_pass_is_reused_only_for_the_same_files_and_only_when_asked(
        real_api: RealApi, tmp_path: Path) -> None:
    first = tmp_path / "first"
    shutil.copytree(GOLDEN / "legacy" / "relu", first)
    kernel = first / "ascendc" / "relu_kernel.cpp"
    # Bytes of its own (nothing earlier in this process checked it), and a header of its own.
    kernel.write_text(kernel.read_text("utf-8").replace(
        '#include "kernel_operator.h"\n',
        f'#include "kernel_operator.h"\n#include "extra.h"  // {tmp_path.name}\n', 1),
        encoding="utf-8")
    (first / "ascendc" / "extra.h").write_text("constexpr int OPBOT_EXTRA = 1;\n", "utf-8")
    second = tmp_path / "second"
    shutil.copytree(first, second)

    checked = typecheck_package(first, reuse_passed=True)
    assert checked.ok, checked.log[:2000]
    assert REUSED_NOTE not in checked.notes
    assert checked.seconds > 0
    again = typecheck_package(second, reuse_passed=True)  # another folder, the same files
    assert again.ok
    assert REUSED_NOTE in again.notes
    assert again.seconds == 0.0
    assert (again.command, again.log) == (checked.command, checked.log)
    fresh = typecheck_package(second)  # not asked: a check of its own
    assert fresh.ok
    assert REUSED_NOTE not in fresh.notes
    assert fresh.seconds > 0

    # A header the kernel includes changed: checked again, and it fails.
    (second / "ascendc" / "extra.h").write_text("constexpr int OPBOT_EXTRA = ;\n", "utf-8")
    broken = typecheck_package(second, reuse_passed=True)
    assert not broken.ok
    assert any(item.file == "extra.h" for item in broken.diagnostics), broken.log[:2000]
    # A failure is never kept: asked again, g++ runs again.
    assert REUSED_NOTE not in typecheck_package(second, reuse_passed=True).notes
    # A file the kernel does not include, added beside it: every file counts.
    (first / "ascendc" / "unused.h").write_text("// nothing\n", "utf-8")
    assert REUSED_NOTE not in typecheck_package(first, reuse_passed=True).notes


def test_the_precheck_sees_what_the_verification_compiles(
        real_api: RealApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The draft's precheck stages the package as the verification does (its kernel and
    top-level headers): a kernel that includes a file the verification never compiles
    (the NPU binding, a header in a subfolder) fails here too, not only later."""
    from bot.agent.backends.ascendc.real_api import real_api_precheck
    from runners.ascendc.cpu_verify import SWITCH

    monkeypatch.setenv(SWITCH, "1")
    package = GOLDEN / "legacy" / "relu"
    files = {f"ascendc/{path.relative_to(package / 'ascendc').as_posix()}":
             path.read_text(encoding="utf-8")
             for path in (package / "ascendc").rglob("*") if path.is_file()}
    assert real_api_precheck(files).ok
    kernel = "ascendc/relu_kernel.cpp"
    for extra_name, include in (("ascendc/inc/relu_extra.h", "inc/relu_extra.h"),
                                ("ascendc/relu_extra.cpp", "relu_extra.cpp")):
        changed = {**files, extra_name: f"constexpr int OPBOT_{tmp_path.name[-6:]} = 1;\n",
                   kernel: files[kernel].replace('#include "kernel_operator.h"\n',
                                                 f'#include "kernel_operator.h"\n'
                                                 f'#include "{include}"\n', 1)}
        verdict = real_api_precheck(changed)
        assert not verdict.ok, include
        assert include in verdict.feedback, verdict.feedback


def test_not_a_package_and_a_kernel_outside_it_are_results(tmp_path: Path) -> None:
    result = typecheck_package(tmp_path)
    assert not result.ok
    assert "not a readable opbot Ascend C package" in \
        result.diagnostics[0].message

    manifest = json.loads((GOLDEN / "legacy" / "relu" / "ascendc" / "opbot.json").read_text())
    manifest["kernel"] = "../outside.cpp"
    package = tmp_path / "op" / "ascendc"
    package.mkdir(parents=True)
    (package / "opbot.json").write_text(json.dumps(manifest), encoding="utf-8")
    (tmp_path / "op" / "outside.cpp").write_text("int x;\n", encoding="utf-8")
    result = typecheck_package(tmp_path / "op")
    assert not result.ok
    assert "outside the package" in result.diagnostics[0].message

    missing = typecheck_source(tmp_path / "nope.cpp", generation="legacy",
                               api=RealApi(tmp_path, tmp_path, tmp_path, tmp_path, "a", "b"))
    assert not missing.ok
    assert "does not exist" in missing.diagnostics[0].message


# -- where the sources come from ------------------------------------------------------------


def test_status_without_sources_and_a_skipped_check(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv(ENV_VARIABLE, str(empty))
    status = real_api_status()
    assert not status.available
    assert status.reason is not None
    assert "asc-devkit-<commit>.tar.xz" in status.reason
    assert str(empty) in status.reason
    assert status.source == f"{empty} (env {ENV_VARIABLE})"
    assert set(status.to_json()) == {"available", "reason", "source", "devkit_commit",
                                     "tools_commit"}
    with pytest.raises(RealApiUnavailable, match="asc-tools"):
        prepare_real_api()
    skipped = typecheck_source(GOLDEN_RELU, generation="legacy")
    assert skipped.ok
    assert skipped.skipped == status.reason
    assert skipped.command == []
    assert typecheck_package(GOLDEN / "asc" / "relu").skipped == status.reason

    monkeypatch.setenv(ENV_VARIABLE, str(tmp_path / "absent"))
    assert "is not a folder" in (real_api_status().reason or "")


def test_status_names_the_commits_and_where_they_come_from(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VARIABLE, raising=False)
    status = real_api_status()
    if not status.available:
        pytest.skip(f"the real Ascend C sources are not here: {status.reason}")
    assert status.reason is None
    assert status.source is not None
    folder = Path(status.source.rsplit(" (", 1)[0])
    assert status.devkit_commit is not None
    assert status.tools_commit is not None
    assert (folder / f"asc-devkit-{status.devkit_commit}.tar.xz").is_file() or \
        any(folder.glob("asc-devkit*"))
    if folder.resolve() == (REPO.parent / "shared" / "data" / "ascend-real").resolve():
        assert status.source.endswith("(beside the checkout)")


def test_two_processes_preparing_at_once_leave_one_valid_cache(tmp_path: Path) -> None:
    """...and drop the sources nobody used for two weeks (another version's)."""
    if not real_api_status().available:
        pytest.skip(f"the real Ascend C sources are not here: {real_api_status().reason}")
    cache = tmp_path / "cache"
    siblings = planted_siblings(cache / "ascend-real", tmp_path / "elsewhere")
    env = {**os.environ, "OPBOT_CACHE_DIR": str(cache)}
    code = ("import json; from runners.ascendc.realapi.sources import prepare_real_api; "
            "api = prepare_real_api(); print(json.dumps([str(api.root), "
            "[str(p) for p in api.include_dirs()]]))")
    children = [subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(2)]
    outputs = [child.communicate(timeout=300) for child in children]
    assert [child.returncode for child in children] == [0, 0], [err for _, err in outputs]
    roots = {json.loads(out)[0] for out, _ in outputs}
    assert len(roots) == 1
    root = Path(roots.pop())
    siblings.check()
    assert sorted(entry.name for entry in root.parent.iterdir()) == sorted(
        [root.name, *(path.name for path in siblings.kept.values())])
    for folder in json.loads(outputs[0][0])[1]:
        assert Path(folder).is_dir(), folder
    generated = root / "generated"
    assert (generated / "kernel_tiling" / "kernel_tiling.h").stat().st_size > 10_000
    assert (generated / "stub_fun.h").read_text() == declarations_header()
    assert (root / "devkit" / "include" / "kernel_operator.h").is_file()
    assert (root / "tools" / "include" / "stub_def.h").is_file()


# -- our stub_fun.h ---------------------------------------------------------------------------


def test_the_declarations_header_names_and_exclusions(tmp_path: Path) -> None:
    names = all_names()
    assert len(names) == len(set(names)) >= 360
    assert len(INTRINSICS) + len(CHECKER_HOOKS) > 250
    for name in ("copy_gm_to_ubuf_align_b32", "vadd", "vconv_f322f16", "set_flag",
                 "wait_flag", "pipe_barrier", "set_vector_mask", "AscendCBufAlloc"):
        assert name in names
    assert {"pipe_t", "event_t", "QuantMode_t", "Order_t"} <= set(ENUMS)

    text = declarations_header()
    assert "int64_t vadd(Args...);" in text
    assert "enum pipe_t" in text
    trimmed = declarations_header(frozenset({"vadd", "pipe_t"}))
    assert "vadd(" not in trimmed
    assert "enum pipe_t" not in trimmed
    assert "vsub(" in trimmed

    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    # A CPU model defines some names itself, before the header or with them excluded.
    (tmp_path / "stub_fun.h").write_text(text, encoding="utf-8")
    (tmp_path / "model.cpp").write_text(
        "#define OPBOT_REALAPI_HAVE_vmul\n"
        "#include \"stub_fun.h\"\n"
        "void vmul(float* d, const float* a, const float* b) { *d = *a * *b; }\n"
        "int main() { float x = 1; vmul(&x, &x, &x); set_flag(PIPE_V, PIPE_S, EVENT_ID0);\n"
        "  return static_cast<int>(pipe_t::PIPE_MTE2) + get_block_idx(); }\n",
        encoding="utf-8")
    done = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "model.cpp"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_gap_in_our_declarations_is_not_blamed_on_the_kernel(tmp_path: Path) -> None:
    api = RealApi(tmp_path, tmp_path / "devkit", tmp_path / "tools", tmp_path / "generated",
                  "a", "b")
    header = str(tmp_path / "devkit" / "impl" / "basic_api" / "x_impl.h")
    diagnostics = [
        Diagnostic(severity="error", message="'vnewop' was not declared in this scope",
                   file=header, line=3, column=5),
        Diagnostic(severity="error", message="there are no arguments to 'vnewop' that depend "
                   "on a template parameter, so a declaration of 'vnewop' must be available",
                   file=header, line=9, column=5),
        Diagnostic(severity="error", message="'vmyop' was not declared in this scope",
                   file="my_kernel.cpp", line=12, column=3),
    ]
    kept, missing = split_standin_gaps(diagnostics, api)
    assert missing == ["vnewop"]
    assert [item.file for item in kept] == ["my_kernel.cpp"]


# -- the kept passes, attacked (an outside review) ---------------------------------------------


def _relu_package(folder: Path, kernel_text: str, headers: dict[str, str]) -> Path:
    shutil.copytree(GOLDEN / "legacy" / "relu", folder)
    (folder / "ascendc" / "relu_kernel.cpp").write_text(kernel_text, encoding="utf-8")
    for name, text in headers.items():
        (folder / "ascendc" / name).write_text(text, encoding="utf-8")
    return folder


def test_files_that_would_read_alike_joined_get_keys_of_their_own(real_api: RealApi,
                                                                 tmp_path: Path) -> None:
    """A file's bytes may hold NULs: {kernel, relu_kz.h: ""} and {kernel + NUL "relu_kz.h"
    NUL} read alike when names and texts are only NUL-separated. The second must be
    checked, and it fails (the header it includes is not there)."""
    kernel = GOLDEN_RELU.read_text("utf-8").replace(
        '#include "kernel_operator.h"\n',
        f'#include "kernel_operator.h"\n#include "relu_kz.h"  // {tmp_path.name}\n', 1)
    with_header = _relu_package(tmp_path / "a", kernel, {"relu_kz.h": ""})
    without = _relu_package(tmp_path / "b", kernel + "\0relu_kz.h\0", {})
    assert typecheck_package(with_header, reuse_passed=True).ok
    verdict = typecheck_package(without, reuse_passed=True)
    assert REUSED_NOTE not in verdict.notes
    assert not verdict.ok
    assert any("relu_kz.h" in item.message for item in verdict.diagnostics), verdict.log[:2000]


def test_a_kept_pass_is_not_the_callers_object(real_api: RealApi, tmp_path: Path) -> None:
    package = tmp_path / "add"
    shutil.copytree(GOLDEN / "asc" / "add", package)
    kernel = package / "ascendc" / "add_kernel.asc"
    kernel.write_text(kernel.read_text("utf-8") + f"\n// {tmp_path.name}\n", encoding="utf-8")
    first = typecheck_package(package, reuse_passed=True)
    assert first.ok, first.log[:2000]
    first.ok = False  # what a caller does with its result is its own affair
    first.notes.append("the caller's own")
    second = typecheck_package(package, reuse_passed=True)
    assert second.ok
    assert sum("host side" in note for note in second.notes) == 1
    assert second.notes.count(REUSED_NOTE) == 1
    assert "the caller's own" not in second.notes


@pytest.mark.parametrize("name", ["--version", "\ud800.cpp"])
def test_a_kernel_name_g_plus_plus_would_misread_is_a_result(name: str, tmp_path: Path) -> None:
    package = tmp_path / "relu"
    shutil.copytree(GOLDEN / "legacy" / "relu", package)
    manifest = package / "ascendc" / "opbot.json"
    data = json.loads(manifest.read_text(encoding="utf-8"))
    data["kernel"] = name
    manifest.write_text(json.dumps(data), encoding="utf-8")
    if not name.startswith("\ud800"):
        (package / "ascendc" / name).write_text("int x = ;\n", encoding="utf-8")
    result = typecheck_package(package)
    assert not result.ok
    assert result.diagnostics


def test_the_precheck_keeps_drafts_apart_whatever_their_bytes() -> None:
    """The precheck's own per-process answers (bot/agent/backends/ascendc/real_api.py):
    names and texts with NULs in them never make two drafts one."""
    from bot.agent.backends.ascendc.real_api import _key

    kernel = "ascendc/relu_kernel.cpp"
    joined = {kernel: "K\0ascendc/relu_kz.h\0"}
    apart = {kernel: "K", "ascendc/relu_kz.h": ""}
    assert _key(joined) != _key(apart)
    assert _key(apart) == _key(dict(reversed(apart.items())))
