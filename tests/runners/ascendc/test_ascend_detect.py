"""Toolchain detection on fake install trees (built in tmp_path from install files) and on
npu-smi outputs fed through an injected runner.

Each install file comes from one of three places (tests/data/ascend/SOURCES.md): the project's
own fixtures (tests/data/ascend/own/install, always there), licensed samples
(tests/data/ascend/install), or real unlicensed samples from the shared folder beside the
checkout (skipped, with the missing path as the reason, where that folder is absent)."""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from runners.ascendc.detect import (
    CannInfo,
    ascendc_cmake_places,
    core_counts_from_npu,
    detect_cann,
    detect_soc,
    detect_torch_npu,
    find_ascendc_cmake,
    generation_for,
    generation_support,
    machine_arch,
    npu_arch_for,
    parse_cann_version,
    run_command,
    triton_ascend_pairing,
)
from tests.support_ascend import ASCEND, fixture, read, real_sample

INSTALL = ASCEND / "install"  # licensed samples
ARCH = machine_arch()

# Real, unlicensed samples (shared folder, `real_install`)
INFO_8_3_RC1 = "vllm-ascend-3002-ascend_toolkit_install-8.3.RC1-B085.txt"
INFO_8_3_RC2 = "vllm-ascend-5606-ascend_toolkit_install-8.3.RC2-aarch64.txt"
INFO_8_0_RC3 = "vllm-ascend-378-ascend_toolkit_install-8.0.RC3-aarch64.txt"
INFO_8_1_RC1 = "vllm-ascend-629-ascend_toolkit_install-8.1.RC1-x86_64.txt"
INFO_8_5_2 = "neo-pan-cann852-toolkit_install.info"
RUNNING_VERSIONS = "vllm-ascend-629-component-running-versions.txt"
VERSION_CFG = "unresolved-4566936146-toolkit-version.cfg.txt"
DRIVER_INFO = "unresolved-4566936146-driver-version.info.txt"
ETC_INSTALL = "llm-action-etc-ascend_install.info.txt"

# The project's own fixtures (tests/data/ascend/own/install, `own_install`)
OWN_8_0_RC3 = "ascend_toolkit_install-8.0.RC3-aarch64.info"
OWN_8_2_RC1 = "ascend_toolkit_install-8.2.RC1-x86_64.info"
OWN_8_3_RC1 = "ascend_toolkit_install-8.3.RC1-x86_64.info"
OWN_8_3_RC2 = "ascend_toolkit_install-8.3.RC2-aarch64.info"
OWN_8_5_1 = "ascend_toolkit_install-8.5.1-cann-aarch64.info"
OWN_9_0_0 = "ascend_toolkit_install-9.0.0-cann-x86_64.info"
OWN_CFG_TEST_BUILD = "version.cfg-8.2.T15-test-build"
OWN_CFG_UPGRADED = "version.cfg-8.2.RC1-after-upgrade"
OWN_ETC_TOOLKIT = "etc-Ascend-ascend_cann_install-ascend-toolkit.info"
OWN_ETC_CANN = "etc-Ascend-ascend_cann_install-cann-8.5.1.info"
OWN_ETC_NO_PATH = "etc-Ascend-ascend_cann_install-no-toolkit-path.info"
OWN_ETC_DRIVER = "etc-ascend_install-driver.info"
OWN_DRIVER_INFO = "driver-version-25.0.rc1.1.info"


def own_install(name: str) -> str:
    return read(fixture(f"install/{name}"))


def licensed_install(name: str) -> str:
    return read(INSTALL / name)


def real_install(name: str) -> str:
    return read(real_sample(f"install/{name}"))


Loader = Callable[[str], str]
LOADERS: dict[str, Loader] = {"own": own_install, "licensed": licensed_install,
                              "real": real_install}


def source(kind: str, *values: Any) -> Any:
    """A pytest param (loader, *values) named after where the file comes from."""
    return pytest.param(LOADERS[kind], *values, id=f"{kind}:{values[0]}")


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def toolkit(home: Path, info: str, name: str = "ascend_toolkit_install.info",
            arch: str = ARCH) -> Path:
    """A toolkit home holding `<arch>-linux/<name>` with the given content."""
    write(home / f"{arch}-linux" / name, info)
    write(home / "set_env.sh", "export ASCEND_HOME_PATH=...\n")
    return home


class FakeRunner:
    """Stands in for subprocess: argv -> (returncode, stdout); unknown commands are missing."""

    def __init__(self, outputs: dict[str, tuple[int, str]] | None = None) -> None:
        self.outputs = outputs or {}
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> tuple[int, str]:
        self.calls.append(list(argv))
        for key, result in self.outputs.items():
            if key in " ".join(argv):
                return result
        return 127, ""


def probe_line(**fields: object) -> str:
    """What the torch_npu probe prints as its last line."""
    return "some warning\nOPBOT_PROBE " + json.dumps(fields) + "\n"


NO_TORCH_NPU = FakeRunner()


def detect(env: dict[str, str], root: Path, run: FakeRunner = NO_TORCH_NPU) -> CannInfo:
    return detect_cann(environ=env, root=root, run=run)


# -- versions ----------------------------------------------------------------------------------


def test_versions_compare_in_release_order() -> None:
    ordered = ["8.0.T63", "8.0.RC3", "8.1.RC1", "8.2.RC1.alpha003", "8.2.RC1", "8.3.RC1",
               "8.3.RC2", "8.5.0", "8.5.2", "9.0.0-beta.1", "9.0.0", "9.1.0"]
    assert sorted(ordered, key=lambda v: parse_cann_version(v) or ()) == ordered
    assert parse_cann_version("8.2.RC1.alpha003") == (8, 2, 1, 1, 0, 3)
    assert parse_cann_version("CANN-8.1.RC1-V100R001C21") == (8, 1, 1, 1, 2, 0)
    for bad in ("", "banana", "24.1.rc2.2", "25.5.1", None):
        assert parse_cann_version(bad) is None  # driver / npu-smi versions are not CANN's


@pytest.mark.parametrize(("version", "generation"), [
    ("8.0.RC3", "legacy"), ("8.3.RC1", "legacy"), ("8.3.RC2", "legacy"),
    ("8.5.0", "legacy"),  # the new `cann` layout, still built with ascendc.cmake
    ("8.2.RC1.alpha003", "legacy"), ("9.0.0-beta.1", "asc"), ("9.0.0", "asc"), ("9.1.0", "asc"),
    ("garbage", None),
])
def test_generation(version: str, generation: str | None) -> None:
    assert generation_for(version) == generation


# -- CANN: install trees -------------------------------------------------------------------


@pytest.mark.parametrize(("load", "name", "version"), [
    source("real", INFO_8_3_RC1, "8.3.RC1"), source("own", OWN_8_3_RC1, "8.3.RC1"),
    source("own", OWN_8_2_RC1, "8.2.RC1"),
])
def test_legacy_toolkit_from_ascend_home_path(tmp_path: Path, load: Loader, name: str,
                                              version: str) -> None:
    home = toolkit(tmp_path / "Ascend" / "ascend-toolkit" / "latest", load(name))
    info = detect({"ASCEND_HOME_PATH": str(home)}, tmp_path / "empty-root")
    assert (info.found, info.version, info.generation, info.layout) == (
        True, version, "legacy", "ascend-toolkit")
    assert info.home == str(home)
    assert info.source == (f"env ASCEND_HOME_PATH -> {home}/{ARCH}-linux/"
                           "ascend_toolkit_install.info")
    assert info.arch == ARCH
    assert info.problems == []


@pytest.mark.parametrize("info_text", [
    pytest.param("package_name=Ascend-cann-toolkit\nversion=9.0.0\ninnerversion=V100R001C26B001\n",
                 id="inline"),
    pytest.param(None, id=f"own:{OWN_9_0_0}"),
])
def test_new_cann_layout_9_0_is_asc(tmp_path: Path, info_text: str | None) -> None:
    home = toolkit(tmp_path / "Ascend" / "cann", info_text or own_install(OWN_9_0_0))
    info = detect({"ASCEND_HOME_PATH": str(home)}, tmp_path / "empty-root")
    assert (info.found, info.version, info.generation, info.layout) == (
        True, "9.0.0", "asc", "cann")


@pytest.mark.parametrize(("load", "name", "version"), [
    source("real", INFO_8_5_2, "8.5.2"), source("own", OWN_8_5_1, "8.5.1"),
])
def test_8_5_layout_from_the_default_root_is_still_legacy(tmp_path: Path, load: Loader,
                                                          name: str, version: str) -> None:
    toolkit(tmp_path / "usr" / "local" / "Ascend" / "cann", load(name))
    info = detect({}, tmp_path)
    assert (info.found, info.version, info.generation, info.layout) == (
        True, version, "legacy", "cann")
    assert info.source.startswith("default root -> ")


# What each release builds: ascendc.cmake where its layout puts it, asc-config.cmake from 9.x.
@pytest.mark.parametrize(("version", "ascendc_dir", "asc_config", "builds"), [
    ("8.0.RC3", "compiler/tikcpp/ascendc_kernel_cmake", False, ["legacy"]),
    ("8.3.RC1", "tools/tikcpp/ascendc_kernel_cmake", False, ["legacy"]),
    ("8.5.0", f"{ARCH}-linux/tikcpp/ascendc_kernel_cmake", False, ["legacy"]),
    ("9.0.0", f"{ARCH}-linux/tikcpp/ascendc_kernel_cmake", True, ["legacy", "asc"]),
    ("9.1.0", None, True, ["asc"]),  # no ascendc.cmake anywhere: legacy cannot build
    ("8.5.0", f"{ARCH}-linux/tikcpp/ascendc_kernel_cmake", True, ["legacy", "asc"]),
])
def test_the_generations_a_toolkit_builds(tmp_path: Path, version: str,
                                          ascendc_dir: str | None, asc_config: bool,
                                          builds: list[str]) -> None:
    home = toolkit(tmp_path / "Ascend" / "cann", f"version={version}\n")
    if ascendc_dir is not None:
        write(home / ascendc_dir / "ascendc.cmake", "# ascendc_library\n")
    if asc_config:
        write(home / f"{ARCH}-linux" / "lib64" / "cmake" / "asc-config.cmake", "# ASC\n")
    info = detect({"ASCEND_HOME_PATH": str(home)}, tmp_path / "empty-root")
    assert info.builds == builds
    assert info.ascendc_cmake == (None if ascendc_dir is None
                                  else str(home / ascendc_dir / "ascendc.cmake"))
    assert info.generation == ("asc" if version.startswith("9") else "legacy")


def test_generation_support_says_why() -> None:
    # A home this machine cannot read: the version decides.
    assert generation_support("legacy", home="/nowhere", version="9.0.0")[0]
    assert generation_support("asc", home="/nowhere", version="9.0.0")[0]
    accepted, why = generation_support("asc", home="/nowhere", version="8.3.RC1")
    assert not accepted
    assert "predates the ASC language" in why
    assert generation_support("asc", home=None, version=None) == (
        True, "CANN (version unknown): cannot tell; the build will")
    assert not generation_support("cann7", home=None, version="8.3.RC1")[0]


def test_ascendc_cmake_places_follow_the_arch(tmp_path: Path) -> None:
    places = ascendc_cmake_places(tmp_path, "aarch64")
    assert places == [tmp_path / "aarch64-linux/tikcpp/ascendc_kernel_cmake",
                      tmp_path / "compiler/tikcpp/ascendc_kernel_cmake",
                      tmp_path / "tools/tikcpp/ascendc_kernel_cmake"]
    write(places[2] / "ascendc.cmake", "")
    write(places[0] / "ascendc.cmake", "")
    assert find_ascendc_cmake(tmp_path, "aarch64") == places[0] / "ascendc.cmake"
    assert find_ascendc_cmake(tmp_path, "x86_64") == places[2] / "ascendc.cmake"


def test_versioned_cann_dir_with_all_cann_info(tmp_path: Path) -> None:
    ascend = tmp_path / "usr" / "local" / "Ascend"
    toolkit(ascend / "cann-8.5.0", "version=8.5.0\n", name="ascend_all_cann_install.info")
    toolkit(ascend / "cann-9.0.0", "version=9.0.0\n", name="ascend_all_cann_install.info")
    info = detect({}, tmp_path)
    assert (info.version, info.generation, info.layout) == ("9.0.0", "asc", "cann")
    assert info.home == str(ascend / "cann-9.0.0")  # the newest one


def test_own_versioned_cann_dirs_pick_the_newest(tmp_path: Path) -> None:
    ascend = tmp_path / "usr" / "local" / "Ascend"
    toolkit(ascend / "cann-8.5.1", own_install(OWN_8_5_1))
    toolkit(ascend / "cann-9.0.0", own_install(OWN_9_0_0))
    info = detect({}, tmp_path)
    assert (info.version, info.generation, info.layout) == ("9.0.0", "asc", "cann")
    assert info.home == str(ascend / "cann-9.0.0")


@pytest.mark.parametrize(("load", "name"), [
    source("real", INFO_8_0_RC3), source("own", OWN_8_0_RC3),
])
def test_legacy_default_root(tmp_path: Path, load: Loader, name: str) -> None:
    toolkit(tmp_path / "usr/local/Ascend/ascend-toolkit/latest", load(name))
    info = detect({}, tmp_path)
    assert (info.version, info.generation, info.layout) == ("8.0.RC3", "legacy", "ascend-toolkit")


@pytest.mark.parametrize(("load", "old", "new", "version"), [
    source("real", INFO_8_3_RC2, INFO_8_5_2, "8.5.2"),
    source("own", OWN_8_3_RC2, OWN_8_5_1, "8.5.1"),
])
def test_cann_dir_preferred_over_ascend_toolkit_when_both_exist(
        tmp_path: Path, load: Loader, old: str, new: str, version: str) -> None:
    toolkit(tmp_path / "usr/local/Ascend/ascend-toolkit/latest", load(old))
    toolkit(tmp_path / "usr/local/Ascend/cann", load(new))
    assert detect({}, tmp_path).version == version


def test_etc_ascend_install_info_points_at_the_toolkit(tmp_path: Path) -> None:
    toolkit(tmp_path / "opt" / "Ascend" / "ascend-toolkit" / "latest", real_install(INFO_8_1_RC1))
    write(tmp_path / "etc/Ascend/ascend_cann_install.info",
          "Toolkit_InstallPath=/opt/Ascend\n")
    info = detect({}, tmp_path)
    assert (info.found, info.version, info.layout) == (True, "8.1.RC1", "ascend-toolkit")
    assert info.source.startswith("/etc/Ascend/ascend_cann_install.info -> ")


@pytest.mark.parametrize(("etc", "home", "info_file", "version", "layout"), [
    # Toolkit_InstallPath=/opt/Ascend/ascend-toolkit: the toolkit is its `latest`.
    (OWN_ETC_TOOLKIT, "opt/Ascend/ascend-toolkit/latest", OWN_8_2_RC1, "8.2.RC1",
     "ascend-toolkit"),
    # Toolkit_InstallPath=/usr/local/Ascend/cann-8.5.1: the toolkit itself.
    (OWN_ETC_CANN, "usr/local/Ascend/cann-8.5.1", OWN_8_5_1, "8.5.1", "cann"),
])
def test_own_etc_ascend_install_info_points_at_the_toolkit(
        tmp_path: Path, etc: str, home: str, info_file: str, version: str, layout: str) -> None:
    toolkit(tmp_path / home, own_install(info_file))
    write(tmp_path / "etc/Ascend/ascend_cann_install.info", own_install(etc))
    info = detect({}, tmp_path)
    assert (info.found, info.version, info.layout, info.home) == (
        True, version, layout, str(tmp_path / home))
    assert info.source == (f"/etc/Ascend/ascend_cann_install.info -> {tmp_path / home}/"
                           f"{ARCH}-linux/ascend_toolkit_install.info")


@pytest.mark.parametrize(("load", "cann_info", "driver_info"), [
    source("real", "UserName=HwHiAiUser\n", ETC_INSTALL),
    source("own", None, OWN_ETC_DRIVER),
])
def test_etc_without_install_path_is_a_problem_not_an_error(
        tmp_path: Path, load: Loader, cann_info: str | None, driver_info: str) -> None:
    write(tmp_path / "etc/Ascend/ascend_cann_install.info",
          cann_info or own_install(OWN_ETC_NO_PATH))
    # The driver's own /etc/ascend_install.info says nothing about CANN.
    write(tmp_path / "etc/ascend_install.info", load(driver_info))
    info = detect({}, tmp_path)
    assert not info.found
    assert any("Toolkit_InstallPath" in problem for problem in info.problems)
    assert f"{tmp_path}/etc/Ascend/ascend_cann_install.info has no Toolkit_InstallPath=" in (
        info.problems)


@pytest.mark.parametrize("variable", ["ASCEND_TOOLKIT_HOME", "ASCEND_OPP_PATH"])
@pytest.mark.parametrize(("load", "name"), [
    source("real", INFO_8_3_RC2), source("own", OWN_8_3_RC2),
])
def test_other_environment_variables(tmp_path: Path, variable: str, load: Loader,
                                     name: str) -> None:
    home = toolkit(tmp_path / "ascend-toolkit" / "8.3.RC2", load(name))
    (home / "opp").mkdir()
    value = home / "opp" if variable == "ASCEND_OPP_PATH" else home
    info = detect({variable: str(value)}, tmp_path / "empty-root")
    assert (info.version, info.home) == ("8.3.RC2", str(home))
    assert info.source.startswith(f"env {variable}")


@pytest.mark.parametrize(("load", "default", "mine", "version"), [
    source("real", INFO_8_5_2, INFO_8_3_RC1, "8.3.RC1"),
    source("own", OWN_8_5_1, OWN_8_3_RC1, "8.3.RC1"),
])
def test_environment_wins_over_default_roots(tmp_path: Path, load: Loader, default: str,
                                             mine: str, version: str) -> None:
    toolkit(tmp_path / "usr/local/Ascend/cann", load(default))
    home = toolkit(tmp_path / "mine" / "ascend-toolkit" / "latest", load(mine))
    assert detect({"ASCEND_HOME_PATH": str(home)}, tmp_path).version == version


def test_version_cfg_fallback(tmp_path: Path) -> None:
    home = tmp_path / "ascend-toolkit" / "latest"
    write(home / "version.cfg", real_install(VERSION_CFG))
    info = detect({"ASCEND_HOME_PATH": str(home)}, tmp_path / "empty-root")
    assert (info.version, info.generation) == ("8.0.T63", "legacy")
    assert info.source.endswith("version.cfg")
    write(home / "version.cfg", "# version: 1.0\n" + real_install(RUNNING_VERSIONS))
    assert detect({"ASCEND_HOME_PATH": str(home)}, tmp_path / "empty-root").version == "8.1.RC1"


@pytest.mark.parametrize(("name", "version"), [
    (OWN_CFG_TEST_BUILD, "8.2.T15"),  # a test build: the part after the colon
    (OWN_CFG_UPGRADED, "8.2.RC1"),  # the running version, not the older installed one
])
def test_own_version_cfg_fallback(tmp_path: Path, name: str, version: str) -> None:
    home = tmp_path / "ascend-toolkit" / "latest"
    write(home / "version.cfg", own_install(name))
    info = detect({"ASCEND_HOME_PATH": str(home)}, tmp_path / "empty-root")
    assert (info.version, info.generation, info.layout) == (version, "legacy", "ascend-toolkit")
    assert info.source == f"env ASCEND_HOME_PATH -> {home}/version.cfg"


@pytest.mark.parametrize(("load", "name"), [
    source("real", INFO_8_3_RC1), source("own", OWN_8_3_RC1),
])
def test_toolkit_for_another_arch_still_gives_the_version(tmp_path: Path, load: Loader,
                                                          name: str) -> None:
    other = "aarch64" if ARCH != "aarch64" else "x86_64"
    home = toolkit(tmp_path / "ascend-toolkit" / "latest", load(name), arch=other)
    info = detect({"ASCEND_HOME_PATH": str(home)}, tmp_path / "empty-root")
    assert info.version == "8.3.RC1"
    assert any(f"installed for {other}-linux" in problem for problem in info.problems)


# -- CANN: broken machines -----------------------------------------------------------------


def test_nothing_at_all(tmp_path: Path) -> None:
    info = detect({}, tmp_path)
    assert (info.found, info.home, info.version, info.generation, info.layout) == (
        False, None, None, None, None)


def test_missing_env_directory_is_reported(tmp_path: Path) -> None:
    info = detect({"ASCEND_HOME_PATH": str(tmp_path / "gone")}, tmp_path)
    assert not info.found
    assert info.problems[0] == f"ASCEND_HOME_PATH={tmp_path / 'gone'} is not a directory"


@pytest.mark.parametrize("content", [
    b"\x00\xff\xfe garbage \x89PNG\r\n",
    b"version=banana\n",
    b"package_name=Ascend-cann-toolkit\n",  # no version line
    b"version=\n",
])
def test_garbage_info_file(tmp_path: Path, content: bytes) -> None:
    home = tmp_path / "ascend-toolkit" / "latest"
    write(home / f"{ARCH}-linux" / "ascend_toolkit_install.info", content)
    info = detect({"ASCEND_HOME_PATH": str(home)}, tmp_path / "empty-root")
    assert info.found  # the tree is there...
    assert (info.version, info.generation) == (None, None)  # ...but says nothing usable
    assert any("version" in problem for problem in info.problems)


@pytest.mark.parametrize(("load", "name", "driver"), [
    source("real", DRIVER_INFO, "24.1.rc2.2"), source("own", OWN_DRIVER_INFO, "25.0.rc1.1"),
])
def test_driver_version_info_is_not_taken_for_cann(tmp_path: Path, load: Loader, name: str,
                                                   driver: str) -> None:
    home = tmp_path / "ascend-toolkit" / "latest"
    write(home / "version.info", load(name))  # Version=<the driver's year-based version>
    info = detect({"ASCEND_HOME_PATH": str(home)}, tmp_path / "empty-root")
    assert info.version is None
    assert any(f"unrecognised version '{driver}'" in p for p in info.problems)


def test_info_path_that_is_a_directory(tmp_path: Path) -> None:
    home = tmp_path / "cann"
    (home / f"{ARCH}-linux" / "ascend_toolkit_install.info").mkdir(parents=True)
    write(home / "version.cfg", "toolkit_running_version=[7.7.T20.0.B210:8.1.RC1]\n")
    assert detect({"ASCEND_HOME_PATH": str(home)}, tmp_path / "x").version == "8.1.RC1"


def test_a_plain_directory_is_not_a_toolkit(tmp_path: Path) -> None:
    (tmp_path / "not-cann").mkdir()
    info = detect({"ASCEND_HOME_PATH": str(tmp_path / "not-cann")}, tmp_path / "x")
    assert not info.found
    assert any("does not look like a CANN install" in p for p in info.problems)


# -- CANN: torch_npu fallback ----------------------------------------------------------------


def test_torch_npu_gives_the_version_when_no_file_does(tmp_path: Path) -> None:
    run = FakeRunner({"OPBOT_PROBE": (0, probe_line(importable=True, version="2.7.1",
                                                    cann_version="8.3.RC1"))})
    info = detect({}, tmp_path, run)
    assert (info.found, info.version, info.generation) == (True, "8.3.RC1", "legacy")
    assert info.source == "torch_npu.get_cann_version"
    assert info.layout == "ascend-toolkit"


def test_torch_npu_without_cann_is_recorded(tmp_path: Path) -> None:
    error = "ImportError: libhccl.so: cannot open shared object file: No such file or directory"
    run = FakeRunner({"OPBOT_PROBE": (1, probe_line(importable=False, error=error))})
    info = detect({}, tmp_path, run)
    assert not info.found
    assert info.problems[-1] == f"torch_npu: {error}"


def test_real_runner_on_this_machine_never_raises(tmp_path: Path) -> None:
    info = detect_cann(environ={}, root=tmp_path, run=run_command)
    assert isinstance(info.problems, list)


# -- torch_npu -------------------------------------------------------------------------------


def test_detect_torch_npu_in_process() -> None:
    if importlib.util.find_spec("torch_npu") is not None:
        pytest.skip("torch_npu is installed here")
    assert detect_torch_npu() == {
        "importable": False, "version": None,
        "error": "ModuleNotFoundError: No module named 'torch_npu'"}


def test_detect_torch_npu_through_a_runner() -> None:
    error = "OSError: libhccl.so: cannot open shared object file"
    result = detect_torch_npu(FakeRunner({"OPBOT_PROBE": (0, probe_line(
        importable=False, version=None, error=error))}))
    assert result["importable"] is False
    assert result["error"] == error
    crashed = detect_torch_npu(FakeRunner({"OPBOT_PROBE": (-6, "Fatal Python error: Aborted\n")}))
    assert crashed["importable"] is False
    assert crashed["error"] == "the torch_npu probe printed no result (exit status -6)"


# -- SOC -------------------------------------------------------------------------------------


def smi(text: str) -> tuple[int, str]:
    return 0, text


@pytest.mark.parametrize(("load", "name", "chip", "soc", "devices", "hbm", "version"), [
    source("licensed", "nvitop-npu-smi-25.5.1-info-910B3-8npu-with-processes.txt", "910B3",
           "Ascend910B3", 8, 65536, "25.5.1"),
    source("licensed", "triton-ascend-docs-npu-smi-26.0.rc1-wide-format-910B4.txt", "910B4",
           "Ascend910B4", 1, 32768, "26.0.rc1"),
    source("real", "vllm-ascend-5606-npu-smi-25.2.2-910B4-1-with-processes.txt", "910B4-1",
           "Ascend910B4-1", 2, 65536, "25.2.2"),
    source("real", "vllm-ascend-378-npu-smi-23.0.3-910B2-8npu.txt", "910B2", "Ascend910B2", 8,
           65536, "23.0.3"),
    source("real", "neo-pan-cann852-npu_smi_info.stdout.txt", "910B2", "Ascend910B2", 4, 65536,
           "25.5.6"),
    source("own", "npu-smi-24.1.rc3-910B2-8npu-idle.txt", "910B2", "Ascend910B2", 8, 65536,
           "24.1.rc3"),
    source("own", "npu-smi-25.0.rc1.1-910B4-1-4npu-with-processes.txt", "910B4-1",
           "Ascend910B4-1", 4, 65536, "25.0.rc1.1"),
    source("own", "npu-smi-25.5.0-910B1-container-npus-2-3.txt", "910B1", "Ascend910B1", 2,
           65536, "25.5.0"),
])
def test_soc_from_npu_smi(load: Loader, name: str, chip: str, soc: str, devices: int, hbm: int,
                          version: str) -> None:
    run = FakeRunner({"npu-smi info": smi(load(name))})
    info = detect_soc(run)
    assert (info.found, info.chip, info.soc, info.arch, info.devices, info.hbm_total_mb,
            info.smi_version) == (True, chip, soc, "dav-2201", devices, hbm, version)
    assert info.source == "npu-smi info"
    assert info.problems == []
    assert not any("acl" in " ".join(call) for call in run.calls)  # npu-smi named the SOC


@pytest.mark.parametrize(("load", "name", "acl_name"), [
    source("real", "vllm-ascend-3002-npu-smi-25.2.0-A3-Ascend910-16chip-with-processes.txt",
           "Ascend910_9391"),
    source("own", "npu-smi-25.3.rc1-A3-Ascend910-16chip-with-processes.txt", "Ascend910_9382"),
])
def test_a3_board_asks_acl_for_the_exact_soc(load: Loader, name: str, acl_name: str) -> None:
    table = load(name)
    info = detect_soc(FakeRunner({"npu-smi info": smi(table),
                                  "acl.get_soc_name": (0, f"{acl_name}\n")}))
    assert (info.chip, info.soc, info.arch, info.devices, info.npus) == (
        "910_93", acl_name, "dav-2201", 16, 8)
    assert info.source == "npu-smi info + acl"
    without_acl = detect_soc(FakeRunner({"npu-smi info": smi(table)}))
    assert (without_acl.found, without_acl.chip, without_acl.soc, without_acl.arch) == (
        True, "910_93", None, "dav-2201")
    assert "npu-smi does not show the A3 SOC suffix; asking acl" in without_acl.problems


def test_soc_from_acl_alone() -> None:
    info = detect_soc(FakeRunner({"acl.get_soc_name": (0, "Ascend310P3\n")}))
    assert (info.found, info.chip, info.soc, info.arch, info.devices) == (
        True, "310P3", "Ascend310P3", "dav-2002", 0)
    assert info.problems == ["npu-smi not found"]


def test_no_npu_at_all() -> None:
    info = detect_soc(FakeRunner({"npu-smi info": (1, "dcmi module initialize failed\n")}))
    assert (info.found, info.chip, info.soc, info.devices) == (False, None, None, 0)
    assert info.problems[0] == "npu-smi exited 1"
    assert detect_soc(FakeRunner({"npu-smi info": (0, "garbage\n")})).found is False


@pytest.mark.parametrize(("name", "arch"), [
    ("910B3", "dav-2201"), ("Ascend910B1", "dav-2201"), ("Ascend 910B4", "dav-2201"),
    ("Ascend910_9391", "dav-2201"), ("Ascend310P3", "dav-2002"), ("Ascend310B1", "dav-3002"),
    ("Ascend950PR", "dav-3510"), ("Ascend910A", None), ("", None), (None, None),
])
def test_npu_arch(name: str | None, arch: str | None) -> None:
    assert npu_arch_for(name) == arch


def test_core_counts_are_read_never_assumed() -> None:
    if shutil.which("npu-smi") is not None:
        pytest.skip("a real NPU answers here: see test_real_npu")
    assert core_counts_from_npu(0) is None
    common = licensed_install("nvitop-npu-smi-25.5.1-info--t-common--i-0.txt")
    counts = core_counts_from_npu(0, run=FakeRunner({"npu-smi info -t common -i 0": (0, common)}))
    assert counts is not None
    assert (counts.aicore, counts.vectorcore) == (20, None)
    assert core_counts_from_npu(0, run=FakeRunner()) is None


# -- triton-ascend / CANN pairing ---------------------------------------------------------


@pytest.mark.parametrize(("triton", "cann", "ok", "says"), [
    ("3.2.0", "8.5.0", True, "pairs with CANN 8.5.0"),
    ("3.2.0rc4", "8.3.RC1", True, "8.3.RC1/RC2"),
    ("3.2.0rc4", "8.3.RC2", True, "8.3.RC1/RC2"),
    ("3.2.0", "8.3.RC1", False, "3.2.0 pairs with CANN 8.5.0"),
    ("3.2.0rc4", "8.5.0", False, "CANN 8.5 needs 3.2.0"),
    ("3.2.0", "9.0.0", False, ">= 3.2.1"),
    ("3.2.0", "9.1.0", False, ">= 3.2.1"),
    ("3.2.1", "9.1.0", True, "ok"),
    ("3.3.0", "8.5.0", True, "unverified"),
    (None, "8.5.0", False, "missing"),
    ("3.2.0", None, False, "missing"),
])
def test_triton_ascend_pairing(triton: str | None, cann: str | None, ok: bool, says: str) -> None:
    result, message = triton_ascend_pairing(triton, cann)
    assert result is ok
    assert says in message


# -- a real NPU ------------------------------------------------------------------------------


def _has_npu() -> bool:
    return shutil.which("npu-smi") is not None and detect_torch_npu(run_command)["importable"]


@pytest.mark.npu
@pytest.mark.skipif(not _has_npu(), reason="needs an Ascend NPU with npu-smi and torch_npu")
def test_real_npu() -> None:
    soc = detect_soc()
    assert soc.found
    assert soc.arch is not None
    assert soc.devices >= 1
    cann = detect_cann()
    assert cann.found
    assert cann.generation in ("legacy", "asc")
    counts = core_counts_from_npu(0, run=run_command)
    assert counts is not None
    assert (counts.aicore or 0) > 0
