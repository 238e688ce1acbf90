"""`opbot doctor`: collect() on this machine, the table, and `main(True)` in fresh processes with
ASCEND_HOME_PATH at fake toolkit trees (and fake npu-smi binaries on PATH).

The fake machines are built from the project's own install fixtures and the licensed npu-smi
table (tests/data/ascend); a second run on the real, unlicensed install files of the shared
folder is skipped, with the missing path as the reason, where that folder is absent."""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

import bot.doctor
from bot.doctor import collect, main, render_table
from tests.support import REPO
from tests.support_ascend import ASCEND, fixture, real_sample

KEYS = {"python", "torch", "triton", "torch_npu", "cann", "soc", "devices", "sandbox",
        "real_api"}
ASCEND_VARIABLES = ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_OPP_PATH")
INSTALL = ASCEND / "install"  # licensed samples


def _machine_has_cann() -> bool:
    return any(os.environ.get(name) for name in ASCEND_VARIABLES) or any(
        Path(path).exists() for path in ("/usr/local/Ascend", "/etc/Ascend"))


@pytest.fixture(scope="module")
def report() -> Iterator[dict[str, Any]]:
    """One collect() for the module: it imports torch and runs triton in subprocesses."""
    with pytest.MonkeyPatch.context() as patch:
        for name in ASCEND_VARIABLES:
            patch.delenv(name, raising=False)
        yield collect()


def test_collect_on_this_machine(report: dict[str, Any]) -> None:
    assert set(report) == KEYS
    assert report["python"]["version"] == platform.python_version()
    assert report["python"]["executable"] == sys.executable
    assert report["torch"]["importable"] is True
    assert report["torch"]["version"] == metadata.version("torch")
    assert set(report["cann"]) >= {"found", "home", "version", "generation"}
    assert set(report["torch_npu"]) == {"importable", "version", "error"}
    assert set(report["devices"]) == {"cuda", "npu"}
    # scripts/setup installs bubblewrap and CI runs where it can start: the probe says so.
    sandbox = report["sandbox"]
    assert sandbox == {"works": True, "reason": None, "bwrap": sandbox["bwrap"],
                       "profile": None, "allow_unsandboxed": False, "userns_blocked": True,
                       "process_cap": sandbox["process_cap"]}
    assert Path(sandbox["bwrap"]).name == "bwrap"
    assert sandbox["process_cap"] in ({"rlimit"} if os.geteuid() else {"cgroup", "watchdog"})
    real_api = report["real_api"]
    assert set(real_api) == {"available", "reason", "source", "devkit_commit", "tools_commit",
                             "cpu_model"}
    if real_api["available"]:  # CI: ../shared/data/ascend-real beside the checkout
        assert real_api["reason"] is None
        assert (real_api["devkit_commit"], real_api["tools_commit"]) == ("82b89a1", "2113e48")
        # the tests switch the CPU model off unless they exercise it (tests/conftest.py)
        assert real_api["cpu_model"]["available"] is False
        assert "OPBOT_ASCENDC_REAL_CHECKS=0" in real_api["cpu_model"]["reason"]
    else:
        assert real_api["reason"]
    json.dumps(report)  # plain JSON types only


@pytest.mark.skipif(importlib.util.find_spec("torch_npu") is not None,
                    reason="torch_npu is installed here")
def test_collect_without_torch_npu(report: dict[str, Any]) -> None:
    assert report["torch_npu"] == {"importable": False, "version": None,
                                   "error": "ModuleNotFoundError: No module named 'torch_npu'"}


@pytest.mark.skipif(_machine_has_cann(), reason="this machine has a CANN install")
def test_collect_without_cann(report: dict[str, Any]) -> None:
    cann = report["cann"]
    assert (cann["found"], cann["home"], cann["version"], cann["generation"]) == (
        False, None, None, None)
    if shutil.which("npu-smi") is None:
        assert report["soc"] is None
        assert report["devices"]["npu"] == 0


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton not installed")
def test_collect_runs_the_triton_interpreter(report: dict[str, Any]) -> None:
    triton = report["triton"]
    assert triton["version"] is not None
    assert triton["interpreter"]["ok"] is True, triton["interpreter"]["error"]
    assert triton["interpreter"]["seconds"] > 0
    assert triton["ascend_pairing"] is None  # community triton: nothing to pair


def test_table_of_this_machine(report: dict[str, Any]) -> None:
    table = render_table(report)
    for row in ("python", "torch", "triton interpreter", "torch_npu", "CANN", "NPU", "devices",
                "sandbox"):
        assert row in table


def test_table_of_a_partial_or_odd_report() -> None:
    assert "CANN" in render_table({})
    table = render_table({
        "cann": {"found": True, "version": "8.3.RC1", "generation": "legacy",
                 "layout": "ascend-toolkit", "home": "/usr/local/Ascend/ascend-toolkit/latest"},
        "soc": {"soc": "Ascend910B3", "arch": "dav-2201", "devices": 8, "hbm_total_mb": 65536},
        "triton": {"version": "3.2.0", "interpreter": {"ok": False, "error": "boom\nmore"},
                   "ascend_pairing": {"ok": False, "message": "3.2.0 pairs with CANN 8.5.0"}},
        "torch_npu": {"importable": False, "error": "OSError: libhccl.so: cannot open"},
    })
    assert "8.3.RC1 (legacy, ascend-toolkit layout)" in table
    assert "Ascend910B3 dav-2201, 8 device(s)" in table
    assert "mismatch" in table
    assert "OSError: libhccl.so" in table


def test_main_reports_instead_of_raising(monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    def broken() -> dict[str, Any]:
        raise RuntimeError("boom")

    monkeypatch.setattr(bot.doctor, "collect", broken)
    assert main(True) == 0
    assert json.loads(capsys.readouterr().out) == {"error": "RuntimeError: boom"}
    assert main(False) == 0
    assert "Traceback" not in capsys.readouterr().out


# -- `main(True)` in fresh processes, one per fake machine -----------------------------------


def _toolkit(home: Path, info: Path) -> Path:
    target = home / f"{platform.machine()}-linux" / "ascend_toolkit_install.info"
    target.parent.mkdir(parents=True)
    target.write_text(info.read_text(encoding="utf-8"), encoding="utf-8")
    (home / "set_env.sh").write_text("# fake\n", encoding="utf-8")
    return home


def _fake_npu_smi(folder: Path, body: str) -> Path:
    folder.mkdir(parents=True)
    script = folder / "npu-smi"
    script.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    script.chmod(0o755)
    return folder


def _cat(folder: Path, table: Path) -> Path:
    return _fake_npu_smi(folder, f"cat '{table}'")


# A machine: (ASCEND_HOME_PATH, folder with a fake npu-smi or None, expected CANN
# (version, generation, layout), expected SOC (chip, soc, arch, devices) or None to skip it).
Machine = tuple[Path, Path | None, tuple[str, str, str], tuple[Any, ...] | None]
B3_TABLE = INSTALL / "nvitop-npu-smi-25.5.1-info-910B3-8npu-with-processes.txt"


def _own_machines(tmp_path: Path) -> dict[str, Machine]:
    """Built from the project's own fixtures (and the licensed 910B3 table)."""
    info = "install/ascend_toolkit_install-{}.info".format
    return {
        "legacy": (
            _toolkit(tmp_path / "legacy" / "Ascend" / "ascend-toolkit" / "latest",
                     fixture(info("8.3.RC1-x86_64"))),
            _cat(tmp_path / "bin-910B3", B3_TABLE),
            ("8.3.RC1", "legacy", "ascend-toolkit"), ("910B3", "Ascend910B3", "dav-2201", 8)),
        "asc": (
            _toolkit(tmp_path / "asc" / "Ascend" / "cann", fixture(info("9.0.0-cann-x86_64"))),
            _fake_npu_smi(tmp_path / "bin-broken",
                          "echo 'dcmi module initialize failed' >&2; exit 1"),
            ("9.0.0", "asc", "cann"), None),
        # An A3 board: npu-smi cannot name the SOC and (without CANN's acl) nothing else can.
        "8.5": (
            _toolkit(tmp_path / "new" / "Ascend" / "cann",
                     fixture(info("8.5.1-cann-aarch64"))),
            _cat(tmp_path / "bin-a3",
                 fixture("install/npu-smi-25.3.rc1-A3-Ascend910-16chip-with-processes.txt")),
            ("8.5.1", "legacy", "cann"), ("910_93", None, "dav-2201", 16)),
    }


def _real_machines(tmp_path: Path) -> dict[str, Machine]:
    """Built from the real install files of the shared folder (skips where it is absent)."""
    legacy = real_sample("install/vllm-ascend-3002-ascend_toolkit_install-8.3.RC1-B085.txt")
    new_layout = real_sample("install/neo-pan-cann852-toolkit_install.info")
    return {
        "legacy": (_toolkit(tmp_path / "legacy" / "Ascend" / "ascend-toolkit" / "latest", legacy),
                   _cat(tmp_path / "bin-910B3", B3_TABLE),
                   ("8.3.RC1", "legacy", "ascend-toolkit"),
                   ("910B3", "Ascend910B3", "dav-2201", 8)),
        "8.5": (_toolkit(tmp_path / "new" / "Ascend" / "cann", new_layout), None,
                ("8.5.2", "legacy", "cann"), None),
    }


def _environment(home: Path, fake_bin: Path | None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in ASCEND_VARIABLES}
    env["ASCEND_HOME_PATH"] = str(home)
    if fake_bin is not None:
        env["PATH"] = f"{fake_bin}{os.pathsep}{env.get('PATH', '')}"
    return env


def _run_doctors(machines: dict[str, Machine]) -> None:
    code = "import bot.doctor, sys; sys.exit(bot.doctor.main(True))"
    # All machines at once: each doctor spends its time importing torch and triton.
    running = {name: subprocess.Popen(
        [sys.executable, "-c", code], cwd=REPO, env=_environment(home, fake_bin),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, (home, fake_bin, _, _) in machines.items()}
    for name, process in running.items():
        stdout, stderr = process.communicate(timeout=600)
        assert process.returncode == 0, (name, stderr)
        assert "Traceback" not in stdout + stderr, name
        document = json.loads(stdout)
        assert set(document) == KEYS, name
        home, _, expected_cann, expected_soc = machines[name]
        cann = document["cann"]
        assert cann["found"] is True, name
        assert (cann["version"], cann["generation"], cann["layout"]) == expected_cann, name
        assert cann["home"] == str(home)
        assert document["torch_npu"]["importable"] in (True, False)
        assert {"importable", "error"} <= set(document["torch_npu"])
        _check_soc(name, document, expected_soc)


def _check_soc(name: str, document: dict[str, Any], expected: tuple[Any, ...] | None) -> None:
    soc = document["soc"]
    if expected is not None:
        if expected[1] is None and importlib.util.find_spec("acl") is not None:
            return  # CANN's acl would name the A3 SOC here
        assert (soc["chip"], soc["soc"], soc["arch"], soc["devices"]) == expected, name
        assert document["devices"]["npu"] == expected[3], name
    elif name == "asc" and importlib.util.find_spec("acl") is None:
        assert soc is None  # the broken npu-smi is a finding, not a crash


def test_doctor_json_in_fresh_processes_for_each_fake_machine(tmp_path: Path) -> None:
    _run_doctors(_own_machines(tmp_path))


def test_doctor_json_on_the_real_install_files(tmp_path: Path) -> None:
    _run_doctors(_real_machines(tmp_path))
