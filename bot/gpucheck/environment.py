"""The machine's Python (CUDA torch and triton, or a clear no), and opbot installed over it:
a venv that sees its packages, only the missing requirements, from an index or wheels."""

from __future__ import annotations

import importlib
import json
import re
import shlex
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.gpucheck.steps import (
    ROOT,
    Budget,
    CommandRunner,
    GpuCheckError,
    child_environment,
    run_command,
    tail,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: pip's vendored copy of the same parser
    from pip._vendor import tomli as tomllib

# The machine's own CUDA builds: never installed or replaced here (an index would serve a
# multi-GB build for another CUDA, or none at all).
PRESET_PACKAGES = frozenset({"torch", "triton"})
# From the dev extra: only what running `pytest -m gpu` needs.
TEST_TOOLS = frozenset({"pytest"})
DEFAULT_INDEX_URL = "https://pypi.org/simple/"
PROBE_TIMEOUT_S = 120.0  # importing CUDA torch the first time can take a while
INSTALL_TIMEOUT_S = 300.0

# Run under the interpreter being checked; prints one JSON object.
_MACHINE_PROBE = """
import json, platform
info = {"python": platform.python_version(), "torch": None, "cuda": False, "gpu": None,
        "triton": None, "problem": ""}
try:
    import torch
    info["torch"] = torch.__version__
    info["cuda"] = bool(torch.cuda.is_available())
    info["gpu"] = torch.cuda.get_device_name(0) if info["cuda"] else None
except Exception as exc:
    info["problem"] = f"torch does not import: {type(exc).__name__}: {exc}"
try:
    import triton
    info["triton"] = triton.__version__
except Exception as exc:
    info["problem"] = info["problem"] or f"triton does not import: {type(exc).__name__}: {exc}"
print(json.dumps(info))
"""
_VERSIONS_PROBE = """
import json, sys
from importlib import metadata
found = {}
for name in json.loads(sys.argv[1]):
    try:
        found[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        found[name] = None
print(json.dumps(found))
"""


@dataclass(frozen=True)
class Machine:
    python: str
    torch: str | None
    cuda: bool
    gpu: str | None
    triton: str | None
    problem: str = ""


def probe_machine(python: str, run: CommandRunner = run_command) -> Machine:
    result = run([python, "-c", _MACHINE_PROBE], PROBE_TIMEOUT_S, child_environment())
    try:
        info = json.loads(result.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise GpuCheckError(f"{python} could not be probed for torch and triton: "
                            f"{tail(result.stderr) or 'no answer'}") from None
    return Machine(python=str(info.get("python")), torch=info.get("torch"),
                   cuda=bool(info.get("cuda")), gpu=info.get("gpu"),
                   triton=info.get("triton"), problem=str(info.get("problem") or ""))


def machine_problem(machine: Machine, python: str) -> str | None:
    """Why this machine cannot run the check (None: it can)."""
    if machine.torch is None:
        return (f"{machine.problem or 'torch is not installed'} (Python {python}). The GPU "
                "check needs a Python with CUDA torch and triton already installed; choose "
                "it with PYTHON=/path/to/python scripts/gpu-check")
    if not machine.cuda:
        return (f"no CUDA GPU: torch {machine.torch} in {python} reports "
                "torch.cuda.is_available() == False (a CPU build, or no visible GPU). Run "
                "the GPU check on a machine with an NVIDIA GPU; on this one, scripts/test "
                "runs the suite on the CPU interpreter")
    if machine.triton is None:
        return (f"{machine.problem or 'triton is not installed'} (Python {python}); install "
                f"the triton that matches torch {machine.torch} first")
    return None


@dataclass(frozen=True)
class Requirement:
    text: str  # as pyproject.toml writes it
    name: str  # normalised (PEP 503)


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_requirement(text: str) -> Requirement:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", text)
    if match is None:
        raise GpuCheckError(f"pyproject.toml: cannot read the requirement {text!r}")
    return Requirement(text=text.strip(), name=normalise(match.group(1)))


def project_requirements(pyproject: Path) -> list[Requirement]:
    """What opbot needs to run its GPU tests: its dependencies, the build backend (the
    editable install builds without isolation) and pytest from the dev extra."""
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise GpuCheckError(f"{pyproject}: cannot read it: {exc}") from None
    project = data.get("project", {})
    build = data.get("build-system", {}).get("requires", [])
    dev = project.get("optional-dependencies", {}).get("dev", [])
    wanted = [*project.get("dependencies", []), *build,
              *(text for text in dev if parse_requirement(text).name in TEST_TOOLS)]
    return [parse_requirement(text) for text in wanted]


def installable(requirements: Iterable[Requirement]) -> list[Requirement]:
    """Everything but the machine's own torch and triton."""
    return [item for item in requirements if item.name not in PRESET_PACKAGES]


def missing_requirements(requirements: Iterable[Requirement],
                         installed: Mapping[str, str | None]) -> list[Requirement]:
    """The requirements not met by INSTALLED (name -> version, None when absent): absent,
    or at a version outside the specifier; a requirement whose marker does not apply to
    this interpreter is never missing."""
    return [item for item in requirements
            if _applies(item.text) and not _satisfied(item.text, installed.get(item.name))]


def _applies(text: str) -> bool:
    parsed = _parsed(text)
    return parsed is None or parsed.marker is None or bool(parsed.marker.evaluate())


def _satisfied(text: str, version: str | None) -> bool:
    if version is None:
        return False
    parsed = _parsed(text)
    # Without packaging to compare versions, any installed version counts.
    return parsed is None or parsed.specifier.contains(version, prereleases=True)


def _parsed(text: str) -> Any:
    """TEXT as packaging's Requirement (pip vendors packaging where it is not installed);
    None where neither is importable."""
    for module in ("packaging.requirements", "pip._vendor.packaging.requirements"):
        try:
            return importlib.import_module(module).Requirement(text)
        except ImportError:
            continue
    return None


def installed_versions(python: str, names: Iterable[str],
                       run: CommandRunner = run_command) -> dict[str, str | None]:
    """What PYTHON's importlib.metadata finds for NAMES."""
    result = run([python, "-c", _VERSIONS_PROBE, json.dumps(sorted(set(names)))],
                 PROBE_TIMEOUT_S, child_environment())
    try:
        found = json.loads(result.stdout)
    except ValueError:
        raise GpuCheckError(f"{python} could not list its packages: "
                            f"{tail(result.stderr)}") from None
    return {normalise(name): version for name, version in found.items()}


def index_reachable(url: str, timeout_s: float = 5.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s):  # noqa: S310 - pip's index URL
            return True
    except urllib.error.HTTPError:
        return True  # it answered
    except (urllib.error.URLError, OSError, ValueError):
        return False


def package_source(wheels: Path | None, missing: Sequence[Requirement], *,
                   reachable: Callable[[], bool]) -> list[str]:
    """pip's options for where packages come from: the wheel folder, else the index (asked
    only when something is missing: opbot's own --no-deps install needs none)."""
    if wheels is not None:
        if not wheels.is_dir():
            raise GpuCheckError(f"--wheels {wheels}: not a folder")
        return ["--no-index", "--find-links", str(wheels.resolve())]
    if missing and not reachable():
        names = ", ".join(item.text for item in missing)
        raise GpuCheckError(
            f"no package index is reachable and requirements are missing ({names}): "
            "prepare a wheel folder on a connected machine (scripts/gpu-check "
            "--prepare-wheels DIR, same Python version and platform) and pass --wheels DIR")
    return []


def make_venv(base_python: str, folder: Path, run: CommandRunner, timeout_s: float) -> str:
    """A venv over the machine's site-packages (its CUDA torch and triton); reused."""
    python = folder / "bin" / "python"
    if not python.exists():
        result = run([base_python, "-m", "venv", "--system-site-packages", str(folder)],
                     timeout_s, child_environment())
        if result.code != 0 or not python.exists():
            raise GpuCheckError(f"could not create the venv {folder}: "
                                f"{tail(result.stderr) or 'timed out'} (or run with "
                                "--no-venv to install into this Python)")
    return str(python)


def install(python: str, missing: Sequence[Requirement], source: Sequence[str],
            run: CommandRunner, budget: Budget) -> list[str]:
    """The missing requirements, then opbot itself with --no-deps; the commands run."""
    commands = []
    if missing:
        commands.append([python, "-m", "pip", "install", "--quiet", *source,
                         *(item.text for item in missing)])
    commands.append([python, "-m", "pip", "install", "--quiet", "--no-deps",
                     "--no-build-isolation", *source, "-e", str(ROOT)])
    for command in commands:
        allowance = budget.allowance(INSTALL_TIMEOUT_S)
        if allowance is None:
            raise GpuCheckError("the budget ran out while installing")
        result = run(command, allowance, child_environment())
        if result.code != 0:
            raise GpuCheckError(f"`{' '.join(command[1:])}` failed: "
                                f"{tail(result.stderr + result.stdout) or 'timed out'}")
    return [" ".join(command[1:]) for command in commands]


def prepare_wheels(folder: Path, run: CommandRunner = run_command) -> None:
    """On a connected machine: download opbot's pure-Python requirements (not torch or
    triton) and theirs into FOLDER, for `--wheels FOLDER` on the GPU machine."""
    wanted = installable(project_requirements(ROOT / "pyproject.toml"))
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--dest", str(folder),
               *(item.text for item in wanted)]
    result = run(command, 1800.0, child_environment())
    if result.code != 0:
        raise GpuCheckError(f"pip download failed: {tail(result.stderr) or 'timed out'}")
    print(f"wheels for {len(wanted)} requirements (and theirs) in {folder}; on the GPU "
          f"machine: scripts/gpu-check --wheels {shlex.quote(str(folder))}")
