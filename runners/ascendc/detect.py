"""Which Ascend toolchain this machine has: CANN, the SOC, torch_npu, and their pairings.

Nothing here requires anything and nothing raises: a missing file, binary or package gives
`found=False` (or None) with the reason in `problems`. Commands run through an injected
`run(argv) -> (returncode, stdout)` so tests can feed the real outputs; a missing binary is
returncode 127, never an exception. torch_npu is probed in a subprocess by default, because
importing it without CANN fails (libhccl.so...) and a broken install can abort the process.

Two toolchain generations (docs/ascend-toolchain.md §0): ascendc.cmake + ascendc_library
("legacy") and the ASC language (find_package(ASC), .asc sources: "asc"), which starts at
9.0. CANN 8.5 moved the install to /usr/local/Ascend/cann (the "cann" layout) but its
kernels still build the legacy way, so layout and generation are separate fields.
`generation` is the one a new package should use; `builds` lists every generation the
toolkit can still build: 9.x ships ascendc.cmake too (asc-devkit installs
ascendc_kernel_cmake/ next to its ASC modules), so a legacy package builds there.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from runners.ascendc.parsers.npu_smi import parse_npu_smi, parse_npu_smi_fields

Runner = Callable[[Sequence[str]], tuple[int, str]]
Generation = Literal["legacy", "asc"]
Layout = Literal["ascend-toolkit", "cann"]
CannVersion = tuple[int, int, int, int, int, int]

_READ_LIMIT = 64 * 1024  # version files are a few hundred bytes; never slurp a huge one
_PROBE_MARK = "OPBOT_PROBE "


def run_command(argv: Sequence[str], timeout: float = 60.0) -> tuple[int, str]:
    """The default runner: (returncode, stdout); 127 when the binary is missing, 124 on timeout."""
    try:
        completed = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                                   check=False, errors="replace")
    except FileNotFoundError:
        return 127, ""
    except subprocess.TimeoutExpired:
        return 124, ""
    except (OSError, ValueError):
        return 126, ""
    return completed.returncode, completed.stdout


def machine_arch() -> str:
    """`uname -m`, with the aliases CANN does not use folded into the names it does."""
    machine = platform.machine() or "unknown"
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine.lower(), machine)


# -- versions ----------------------------------------------------------------------------------

_CANN_VERSION = re.compile(
    r"^\s*(?:CANN[-_ ]?)?(?P<major>\d{1,2})\.(?P<minor>\d{1,2})"
    r"(?:\.(?P<kind>RC|T)?(?P<num>\d+))?"
    r"(?:[.\-_]?(?P<pre>alpha|beta)\.?(?P<pre_num>\d+))?", re.IGNORECASE)
_KIND_RANK = {"t": 0, "rc": 1, "": 2}  # test builds < release candidates < releases
_PRE_RANK = {"alpha": 0, "beta": 1, "": 2}


def parse_cann_version(text: str | None) -> CannVersion | None:
    """"8.0.RC3", "8.5.0", "9.0.0-beta.1", "8.2.RC1.alpha003", "8.0.T63" -> a sortable tuple:
    (major, minor, kind, number, pre-release, pre-release number)."""
    if not text:
        return None
    match = _CANN_VERSION.match(text)
    # Driver and npu-smi versions are year-based (23.0.3, 24.1.rc2.2): never a CANN version.
    if match is None or not 1 <= int(match["major"]) < 20:
        return None
    kind = (match["kind"] or "").lower()
    pre = (match["pre"] or "").lower()
    return (int(match["major"]), int(match["minor"]), _KIND_RANK[kind], int(match["num"] or 0),
            _PRE_RANK[pre], int(match["pre_num"] or 0))


def generation_for(version: str | None) -> Generation | None:
    """9.0 and later build with the ASC language; everything before, 8.5 included, with
    ascendc.cmake (8.5 changed only the install layout, docs/ascend-toolchain.md §0/§5)."""
    parsed = parse_cann_version(version)
    if parsed is None:
        return None
    return "asc" if parsed[:2] >= (9, 0) else "legacy"


# Where ascendc.cmake lives, relative to the toolkit root, newest layout first: 8.5's `cann`
# layout and 9.x under <arch>-linux/ (asc-devkit installs tikcpp/ascendc_kernel_cmake next
# to <arch>-linux/lib64), 8.x under compiler/ (also what 9.x's asc-config.cmake reads) or
# tools/. The legacy CMakeLists.txt searches the same list.
ASCENDC_CMAKE_DIRS: tuple[str, ...] = (
    "{arch}-linux/tikcpp/ascendc_kernel_cmake",
    "compiler/tikcpp/ascendc_kernel_cmake",
    "tools/tikcpp/ascendc_kernel_cmake",
)
# Where asc-devkit installs asc-config.cmake (find_package(ASC)).
ASC_CONFIG_DIRS: tuple[str, ...] = ("{arch}-linux/lib64/cmake", "lib64/cmake")


def ascendc_cmake_places(home: str | Path, arch: str | None = None) -> list[Path]:
    """The folders a toolkit at `home` may keep ascendc.cmake in, in search order."""
    machine = arch or machine_arch()
    return [Path(home) / place.format(arch=machine) for place in ASCENDC_CMAKE_DIRS]


def find_ascendc_cmake(home: str | Path, arch: str | None = None) -> Path | None:
    """ascendc.cmake of the toolkit at `home`, or None when no known layout has it."""
    for folder in ascendc_cmake_places(home, arch):
        if _is_file(folder / "ascendc.cmake"):
            return folder / "ascendc.cmake"
    return None


def find_asc_config(home: str | Path, arch: str | None = None) -> Path | None:
    """asc-config.cmake (what find_package(ASC) loads) of the toolkit at `home`, or None."""
    machine = arch or machine_arch()
    for place in ASC_CONFIG_DIRS:
        path = Path(home) / place.format(arch=machine) / "asc-config.cmake"
        if _is_file(path):
            return path
    return None


def generation_support(generation: str, *, home: str | None, version: str | None,
                       arch: str | None = None) -> tuple[bool, str]:
    """Whether the toolkit at `home` (CANN `version`) builds a package of `generation`, and
    why. What is on disk decides where the toolkit can be read; the version where not.

    - legacy: refused only when the toolkit is there and no known layout holds ascendc.cmake
      (every release so far ships it, 9.x included).
    - asc: accepted from 9.0 on (the ASC language) or where asc-config.cmake is installed;
      refused on an older toolkit without it, which cannot compile .asc sources.
    """
    root = Path(home) if home and _is_dir(Path(home)) else None
    label = f"CANN {version or '(version unknown)'}" + (f" at {home}" if home else "")
    if generation == "legacy":
        if root is None:
            return True, f"{label}: not readable here; every CANN release ships ascendc.cmake"
        found = find_ascendc_cmake(root, arch)
        if found is not None:
            return True, f"{label}: ascendc.cmake at {found}"
        tried = ", ".join(str(place) for place in ascendc_cmake_places(root, arch))
        return False, f"{label} has no ascendc.cmake (looked in {tried})"
    if generation != "asc":
        return False, f"unknown toolchain generation {generation!r}"
    parsed = parse_cann_version(version)
    if parsed is not None and parsed[:2] >= (9, 0):
        return True, f"{label}: the ASC language is there from CANN 9.0 on"
    config = find_asc_config(root, arch) if root is not None else None
    if config is not None:
        return True, f"{label}: asc-config.cmake at {config}"
    if parsed is None:
        return True, f"{label}: cannot tell; the build will"
    return False, (f"{label} predates the ASC language (CANN 9.0) and has no "
                   "asc-config.cmake: it cannot compile .asc sources")


def _layout_for(home: Path, version: str | None) -> Layout | None:
    """The directory says it when it can (…/ascend-toolkit/… or …/cann[-<ver>]/…); else the
    version does (the `cann` directory arrived with 8.5)."""
    names = [part.lower() for part in home.parts]
    if "ascend-toolkit" in names:
        return "ascend-toolkit"
    if any(name == "cann" or name.startswith("cann-") for name in names):
        return "cann"
    parsed = parse_cann_version(version)
    if parsed is None:
        return None
    return "cann" if parsed[:2] >= (8, 5) else "ascend-toolkit"


# -- CANN --------------------------------------------------------------------------------------


@dataclass
class CannInfo:
    found: bool = False
    home: str | None = None
    version: str | None = None
    generation: Generation | None = None
    layout: Layout | None = None
    arch: str = ""
    source: str = ""
    problems: list[str] = field(default_factory=list)
    builds: list[Generation] = field(default_factory=list)  # generations it can build
    ascendc_cmake: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def refresh_builds(self) -> None:
        """`builds` and `ascendc_cmake` from the home and version found so far."""
        self.builds = [generation for generation in ("legacy", "asc")
                       if generation_support(generation, home=self.home, version=self.version,
                                             arch=self.arch or None)[0]]
        found = find_ascendc_cmake(self.home, self.arch or None) if self.home else None
        self.ascendc_cmake = str(found) if found is not None else None


_ENV_HOMES = ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_OPP_PATH")
_INFO_FILES = ("ascend_toolkit_install.info", "ascend_all_cann_install.info")
_VERSION_KEY = re.compile(r"^\s*version\s*=\s*\"?(?P<v>[^\"\s]+)\"?\s*$",
                          re.IGNORECASE | re.MULTILINE)
_RUNNING_VERSION = re.compile(r"^\s*(?P<component>\w+)_running_version\s*=\s*(?P<v>\S+)",
                              re.MULTILINE)
_INSTALL_PATH = re.compile(r"^\s*Toolkit_InstallPath\s*=\s*\"?(?P<p>[^\"\n]+?)\"?\s*$",
                           re.IGNORECASE | re.MULTILINE)
_CANN_MARKERS = ("set_env.sh", "bin", "compiler", "opp", "tools", "include", "lib64")


def detect_cann(environ: Mapping[str, str] | None = None, root: str | Path = "/",
                run: Runner = run_command, arch: str | None = None) -> CannInfo:
    """Find CANN: environment, install files, /etc/Ascend, default roots, then torch_npu."""
    env = os.environ if environ is None else environ
    info = CannInfo(arch=arch or machine_arch())
    for source, home in _candidate_homes(env, Path(root), info.problems):
        if _inspect_home(info, source, home):
            break
    if info.version is None:
        _version_from_torch_npu(info, run)
    if info.found:
        info.refresh_builds()
    return info


def _candidate_homes(env: Mapping[str, str], root: Path,
                     problems: list[str]) -> Iterator[tuple[str, Path]]:
    """Places a toolkit may be, in the order real tools look (docs §5)."""
    for name in _ENV_HOMES:
        value = (env.get(name) or "").strip()
        if not value:
            continue
        path = Path(value)
        home = path.parent if name == "ASCEND_OPP_PATH" else path
        if not home.is_dir():
            problems.append(f"{name}={value} is not a directory")
            continue
        yield f"env {name}", home
    yield from _homes_from_etc(root, problems)
    ascend = _under_root(root, "/usr/local/Ascend")
    yield "default root", ascend / "cann"
    yield from (("default root", path) for path in _versioned_cann_dirs(ascend))
    yield "default root", ascend / "ascend-toolkit" / "latest"


def _homes_from_etc(root: Path, problems: list[str]) -> Iterator[tuple[str, Path]]:
    etc = _under_root(root, "/etc/Ascend/ascend_cann_install.info")
    text = _read_small(etc)
    if text is None:
        return
    match = _INSTALL_PATH.search(text)
    if match is None:
        problems.append(f"{etc} has no Toolkit_InstallPath=")
        return
    base = _under_root(root, match["p"].strip())
    # The recorded path may be the toolkit itself or the directory above it.
    for home in (base, base / "latest", base / "cann", base / "ascend-toolkit" / "latest"):
        yield "/etc/Ascend/ascend_cann_install.info", home


def _versioned_cann_dirs(ascend: Path) -> list[Path]:
    """/usr/local/Ascend/cann-<version> directories, newest first."""
    try:
        dirs = [path for path in ascend.glob("cann-*") if path.is_dir()]
    except OSError:
        return []
    order = {path: parse_cann_version(path.name.removeprefix("cann-")) for path in dirs}
    return sorted(dirs, key=lambda p: order[p] or (0, 0, 0, 0, 0, 0), reverse=True)


def _under_root(root: Path, path: str) -> Path:
    """An absolute path of the machine, moved under `root` (tests pass a temporary root)."""
    return Path(path) if root == Path("/") else root / path.lstrip("/")


def _inspect_home(info: CannInfo, source: str, home: Path) -> bool:
    """Fill `info` from `home` if it is a CANN install; False to keep looking."""
    if not _is_dir(home):
        return False
    version, version_file = _version_in_home(home, info.arch, info.problems)
    if version is None and not _looks_like_cann(home, info.arch):
        info.problems.append(f"{home} ({source}) does not look like a CANN install")
        return False
    info.found, info.home = True, str(home)
    info.version = version
    info.generation = generation_for(version)
    info.layout = _layout_for(home, version)
    info.source = f"{source} -> {version_file}" if version_file else source
    if version is None:
        info.problems.append(f"{home}: no readable CANN version file")
    return True


def _version_in_home(home: Path, arch: str,
                     problems: list[str]) -> tuple[str | None, str | None]:
    """The version and the file that gave it, trying the files real tools read, in order."""
    for path, reader in _version_files(home, arch):
        text = _read_small(path)
        if text is None:
            continue
        version = reader(text)
        if version is None:
            problems.append(f"{path}: no version in it")
            continue
        if parse_cann_version(version) is None:
            problems.append(f"{path}: unrecognised version {version!r}")
            continue
        if path.parent.name.endswith("-linux") and path.parent.name != f"{arch}-linux":
            problems.append(f"{path}: installed for {path.parent.name}, this machine is {arch}")
        return version, str(path)
    return None, None


def _version_files(home: Path, arch: str) -> Iterator[tuple[Path, Callable[[str], str | None]]]:
    for name in _INFO_FILES:
        yield home / f"{arch}-linux" / name, _info_version
    for name in _INFO_FILES:
        yield home / name, _info_version
    yield home / "version.cfg", _cfg_version
    for relative in ("version.info", "compiler/version.info", "opp/version.info"):
        yield home / relative, _info_version
    try:
        others = sorted(home.glob("*-linux/ascend_*_install.info"))
    except OSError:
        others = []
    for path in others:  # a toolkit for another arch: still says which version is installed
        if path.parent.name != f"{arch}-linux":
            yield path, _info_version


def _info_version(text: str) -> str | None:
    """`version=8.3.RC1` (ascend_*_install.info) or `Version=...` (version.info)."""
    match = _VERSION_KEY.search(text)
    return match["v"] if match else None


def _cfg_version(text: str) -> str | None:
    """version.cfg: `toolkit_running_version=[7.6.T13.0.B094:8.0.T63]`; the part after the
    colon is the CANN version (the part before is the internal build)."""
    running = {m["component"]: m["v"] for m in _RUNNING_VERSION.finditer(text)}
    value = running.get("toolkit") or next(iter(running.values()), None)
    if value is None:
        return None
    last = value.strip("[]").split("][")[-1]
    return last.rpartition(":")[2] or None


def _looks_like_cann(home: Path, arch: str) -> bool:
    return _is_dir(home / f"{arch}-linux") or any(
        (home / marker).exists() for marker in _CANN_MARKERS)


def _read_small(path: Path) -> str | None:
    try:
        with path.open("r", encoding="utf-8", errors="replace") as handle:
            return handle.read(_READ_LIMIT)
    except (OSError, ValueError):
        return None


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # an unreadable folder on the way: not found, never an exception
        return False


def _version_from_torch_npu(info: CannInfo, run: Runner) -> None:
    """Last resort (docs §5): torch_npu.utils.get_cann_version(module="CANN"), CANN >= 8.1."""
    probe = _torch_npu_probe(run)
    version = probe.get("cann_version")
    if isinstance(version, str) and parse_cann_version(version) is not None:
        info.version = version
        info.generation = generation_for(version)
        info.found = True
        info.layout = info.layout or _layout_for(Path(info.home or ""), version)
        info.source = (info.source + " + " if info.source else "") + "torch_npu.get_cann_version"
        return
    error = probe.get("cann_error") or probe.get("error")
    if error and not info.found:
        info.problems.append(f"torch_npu: {error}")


# -- torch_npu ---------------------------------------------------------------------------------

# Runs in a fresh interpreter; catches everything and prints one marked JSON line.
_TORCH_NPU_PROBE = f"""
import json
out = {{"importable": False, "version": None, "error": None, "cann_version": None,
       "cann_error": None, "device_count": None}}
try:
    import torch_npu
    out["importable"] = True
    out["version"] = getattr(torch_npu, "__version__", None)
    try:
        from torch_npu.utils import get_cann_version
        out["cann_version"] = get_cann_version(module="CANN")
    except BaseException as exc:
        out["cann_error"] = f"{{type(exc).__name__}}: {{exc}}"
    try:
        out["device_count"] = int(torch_npu.npu.device_count())
    except BaseException:
        pass
except BaseException as exc:
    out["error"] = f"{{type(exc).__name__}}: {{exc}}"
print({_PROBE_MARK!r} + json.dumps(out, default=str), flush=True)
"""


def _torch_npu_probe(run: Runner) -> dict[str, Any]:
    code, stdout = run([sys.executable, "-c", _TORCH_NPU_PROBE])
    for line in reversed(stdout.splitlines()):
        if line.startswith(_PROBE_MARK):
            try:
                parsed = json.loads(line[len(_PROBE_MARK):])
            except ValueError:
                break
            return parsed if isinstance(parsed, dict) else {}
    return {"error": f"the torch_npu probe printed no result (exit status {code})"}


def detect_torch_npu(run: Runner | None = None) -> dict[str, Any]:
    """{importable, version, error}; in a subprocess when `run` is given (safer: a broken
    torch_npu can abort the interpreter that imports it), else in this process."""
    if run is not None:
        probe = _torch_npu_probe(run)
        return {"importable": bool(probe.get("importable")), "version": probe.get("version"),
                "error": probe.get("error"), "device_count": probe.get("device_count"),
                "cann_version": probe.get("cann_version")}
    if importlib.util.find_spec("torch_npu") is None:
        return {"importable": False, "version": None,
                "error": "ModuleNotFoundError: No module named 'torch_npu'"}
    try:
        import torch_npu
    except BaseException as exc:  # noqa: BLE001 - without CANN the import fails in many ways
        return {"importable": False, "version": None, "error": f"{type(exc).__name__}: {exc}"}
    return {"importable": True, "version": getattr(torch_npu, "__version__", None),
            "error": None}


# -- SOC ---------------------------------------------------------------------------------------


@dataclass
class SocInfo:
    found: bool = False
    chip: str | None = None  # "910B3", "910B4-1", "910_93" (A3), "310P3"
    soc: str | None = None  # SOC_VERSION / --soc-version: "Ascend910B3"
    arch: str | None = None  # __NPU_ARCH__ / --npu-arch: "dav-2201"
    devices: int = 0  # logical devices (A3 boards: two per NPU)
    npus: int = 0
    hbm_total_mb: int | None = None
    smi_version: str | None = None
    source: str = ""
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_SOC_NAME = re.compile(r"^Ascend[\w-]+$")
_ACL_SOC_PROBE = "import acl; print(acl.get_soc_name())"


def npu_arch_for(name: str | None) -> str | None:
    """--npu-arch for a chip or SOC name (docs §1.2); None when the docs do not say."""
    base = _chip_base(name or "")
    for prefix, arch in (("910B", "dav-2201"), ("910_93", "dav-2201"), ("310P", "dav-2002"),
                         ("310B", "dav-3002"), ("950", "dav-3510")):
        if base.upper().startswith(prefix.upper()):
            return arch
    return None


def _chip_base(name: str) -> str:
    """"Ascend 910B3" / "Ascend910B3" / "910B3" -> "910B3"."""
    compact = name.replace(" ", "")
    return compact[len("Ascend"):] if compact.lower().startswith("ascend") else compact


def detect_soc(run: Runner = run_command) -> SocInfo:
    """The chip from `npu-smi info`, the exact SOC from acl.get_soc_name() when npu-smi
    cannot name it (A3 boards print only "Ascend910")."""
    info = SocInfo()
    _soc_from_npu_smi(info, run)
    if info.soc is None:
        _soc_from_acl(info, run)
    info.found = info.chip is not None or info.soc is not None
    info.arch = info.arch or npu_arch_for(info.soc or info.chip)
    return info


def _soc_from_npu_smi(info: SocInfo, run: Runner) -> None:
    code, stdout = run(["npu-smi", "info"])
    if code != 0:
        info.problems.append("npu-smi not found" if code == 127 else f"npu-smi exited {code}")
        return
    table = parse_npu_smi(stdout)
    if not table.chips:
        info.problems.append("npu-smi info printed no device table")
        return
    first = table.chips[0]
    info.smi_version = table.smi_version
    info.devices, info.npus = table.device_count, table.npu_count
    info.hbm_total_mb = first.hbm_total_mb
    info.source = "npu-smi info"
    if table.phy_id_layout and _chip_base(first.name) == "910":
        # The "Chip Phy-ID" table is what npu-smi prints for Atlas A3 (910_93) boards; the
        # SOC suffix (Ascend910_93xx) is not in it.
        info.chip, info.arch = "910_93", "dav-2201"
        info.problems.append("npu-smi does not show the A3 SOC suffix; asking acl")
        return
    info.chip = _chip_base(first.name)
    info.soc = f"Ascend{info.chip}"


def _soc_from_acl(info: SocInfo, run: Runner) -> None:
    code, stdout = run([sys.executable, "-c", _ACL_SOC_PROBE])
    names = [line.strip() for line in stdout.splitlines() if _SOC_NAME.match(line.strip())]
    if code != 0 or not names:
        info.problems.append("acl.get_soc_name() unavailable (CANN's python acl module)")
        return
    info.soc = names[-1]
    info.chip = info.chip or _chip_base(info.soc)
    info.source = f"{info.source} + acl" if info.source else "acl.get_soc_name()"


# -- core counts (read at run time, never hard-coded) --------------------------------------


@dataclass
class CoreCounts:
    aicore: int | None
    vectorcore: int | None
    source: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def core_counts_from_npu(device: int = 0, run: Runner | None = None) -> CoreCounts | None:
    """AI Core (cube) and vector core counts of a device, from triton-ascend's or torch_npu's
    device properties; with `run`, the AI Core count from `npu-smi info -t common` as a last
    resort. None when nothing can tell (no NPU, no torch_npu)."""
    if importlib.util.find_spec("torch_npu") is not None:
        for reader in (_cores_from_triton, _cores_from_torch_npu):
            counts = reader(device)
            if counts is not None:
                return counts
    return _cores_from_npu_smi(device, run) if run is not None else None


def _positive(value: Any) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def _cores_from_triton(device: int) -> CoreCounts | None:
    try:
        import torch_npu  # noqa: F401 - registers the NPU device triton-ascend's driver needs
        import triton

        props = triton.runtime.driver.active.utils.get_device_properties(device)
        aicore, vector = _positive(props.get("num_aicore")), _positive(props.get("num_vectorcore"))
    except Exception:  # noqa: BLE001 - community triton, no driver, no device: all mean "no"
        return None
    if aicore is None and vector is None:
        return None
    return CoreCounts(aicore, vector, "triton driver get_device_properties")


def _cores_from_torch_npu(device: int) -> CoreCounts | None:
    try:
        import torch_npu

        props = torch_npu.npu.get_device_properties(device)
        aicore = _positive(getattr(props, "cube_core_num", None))
        vector = _positive(getattr(props, "vector_core_num", None))
    except Exception:  # noqa: BLE001 - older torch_npu lacks the fields, or no device
        return None
    if aicore is None and vector is None:
        return None
    return CoreCounts(aicore, vector, "torch_npu.npu.get_device_properties")


def _cores_from_npu_smi(device: int, run: Runner) -> CoreCounts | None:
    code, stdout = run(["npu-smi", "info", "-t", "common", "-i", str(device)])
    if code != 0:
        return None
    for block in parse_npu_smi_fields(stdout):
        aicore = _positive(block.get("Aicore Count"))
        if aicore is not None:
            return CoreCounts(aicore, None, "npu-smi info -t common (AI Core count only)")
    return None


# -- triton-ascend / CANN pairing -----------------------------------------------------------

_PEP440 = re.compile(r"^\s*v?(?P<rel>\d+(?:\.\d+)*)(?:[.-]?(?P<pre>a|b|rc)\.?(?P<n>\d+))?",
                     re.IGNORECASE)


def _triton_version(text: str | None) -> tuple[int, int, int, int, int] | None:
    """"3.2.0rc4" < "3.2.0" < "3.2.1": (major, minor, patch, pre-rank, pre-number)."""
    match = _PEP440.match(text or "")
    if match is None:
        return None
    release = [int(part) for part in match["rel"].split(".")][:3]
    release += [0] * (3 - len(release))
    pre_rank = {"a": 0, "b": 1, "rc": 2}.get((match["pre"] or "").lower(), 3)
    return release[0], release[1], release[2], pre_rank, int(match["n"] or 0)


def triton_ascend_pairing(triton_version: str | None,
                          cann_version: str | None) -> tuple[bool, str]:
    """Whether triton-ascend and CANN are a known pair (docs §5). ok=False only for a known
    mismatch; combinations outside the table come back ok with 'unverified'."""
    triton_v, cann_v = _triton_version(triton_version), parse_cann_version(cann_version)
    if triton_v is None or cann_v is None:
        return False, (f"cannot check the pairing: triton-ascend {triton_version or 'missing'}"
                       f", CANN {cann_version or 'missing'}")
    pair = f"triton-ascend {triton_version} with CANN {cann_version}"
    rc4, final_320, fixed_321 = (3, 2, 0, 2, 4), (3, 2, 0, 3, 0), (3, 2, 1, 3, 0)
    if cann_v[0] >= 9:
        if triton_v < fixed_321:
            return False, (f"{pair}: CANN 9.x needs triton-ascend >= 3.2.1 (3.2.0 fails to "
                           "compile npu_utils.cpp on 9.x)")
        return True, f"{pair}: ok (CANN 9.x needs >= 3.2.1)"
    if triton_v == final_320:
        if cann_v[:2] == (8, 5):
            return True, f"{pair}: ok (3.2.0 pairs with CANN 8.5.0)"
        return False, f"{pair}: 3.2.0 pairs with CANN 8.5.0 (CANN 8.3 needs 3.2.0rc4)"
    if triton_v == rc4:
        if cann_v[:3] == (8, 3, 1) and cann_v[3] in (1, 2):  # 8.3.RC1 / 8.3.RC2
            return True, f"{pair}: ok (3.2.0rc4 pairs with CANN 8.3.RC1/RC2)"
        return False, f"{pair}: 3.2.0rc4 pairs with CANN 8.3.RC1/RC2 (CANN 8.5 needs 3.2.0)"
    return True, f"{pair}: not in the pairing table (unverified)"
