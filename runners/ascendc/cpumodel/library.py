"""The CPU model's static library: the open cpudebug sources (GmAlloc, block processes, the
real API checkers, the half type) compiled unchanged, plus our stand-ins for CANN's
binary-only pieces (csrc/: the block runtime and the intrinsics' CPU semantics).

Built once into the cache, keyed by the real sources' commits and a hash of our sources and
flags; built in a temporary folder and renamed into place, so concurrent builders never see
half a library. The cpudebug sources are compiled from the cache, never copied here.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from runners.ascendc.cpumodel.errors import CpuModelError
from runners.ascendc.realapi.sources import (
    RealApi,
    RealApiUnavailable,
    cache_dir,
    declarations_header,
    mark_used,
    prepare_real_api,
    prune_unused,
    publish_folder,
)

CSRC = Path(__file__).resolve().with_name("csrc")
# Ours, compiled into the library; opbot_cpumodel.h is what kernels include.
OWN_SOURCES = ("runtime.cpp", "model_state.cpp", "vector.cpp", "copy.cpp", "convert.cpp")
OWN_HEADERS = ("opbot_cpumodel.h", "model_state.h", "convert.h")
# cpudebug's src/regfwk except stub_reg.cpp: that one resolves CANN's intrinsic table by
# dlsym (and writes stub_reg.log into the working folder); ours are linked directly and
# runtime.cpp's StubInit does nothing.
REGFWK_SOURCES = ("stub_base.cpp", "stub_backtrace.cpp", "kernel_print_lock.cpp")

# Names csrc defines for real: kept out of the realapi declarations (whose generic
# variadic templates would otherwise be ambiguous with plain functions of the same name).
OWN_NAMES = frozenset({
    "set_vector_mask", "set_mask_count", "set_mask_norm", "set_mov_pad_val", "get_block_idx",
    "get_block_num", "get_ctrl", "set_ctrl", "set_flag", "wait_flag", "pipe_barrier", "dsb",
    "dcci", "set_atomic_none", "set_ffts_base_addr", "set_l1_3d_size", "set_padding", "sff0",
    "sff1", "sbitset0", "sbitset1", "bcnt0", "bcnt1", "clz", "sflbits",
    "AscendCBufAbsAddr", "AscendCBufAlloc", "AscendCBufDeque", "AscendCBufEnque",
    "AscendCBufFree", "AscendCBufGet", "AscendCBufInit", "AscendCQueCreate",
    "AscendCRecordPoolHierarchy", "AscendCTBufPoolInit", "AscendCTBufPoolResetCheck",
    "AscendCUpdateTbufPoolStatus",
})

JOBS = 2  # the build machines have two shared cores
OPT_FLAGS = ("-O1", "-fPIC", "-w")
LINK_LIBS = ("-lpthread", "-ldl")
_LAYOUT_VERSION = "1"
_READY = ".opbot-ready"
_ARCHIVE = "libopbot_cpumodel.a"


@dataclass(frozen=True)
class Library:
    """A built library and how to compile a program against it."""

    root: Path
    api: RealApi

    @property
    def archive(self) -> Path:
        return self.root / _ARCHIVE

    @property
    def include(self) -> Path:
        """Our stub_fun.h and opbot_cpumodel.h; searched before the realapi stand-ins."""
        return self.root / "include"

    def compile_flags(self) -> list[str]:
        """g++ flags for a kernel or twin linked with this library."""
        dirs = [self.include, *self.api.include_dirs()]
        return ["-std=c++17", *OPT_FLAGS, *(f"-D{item}" for item in self.api.defines()),
                *(f"-I{folder}" for folder in dirs)]

    def readable(self) -> list[Path]:
        """What a sandboxed compile or run must be able to read."""
        return [self.root, self.api.root]


def stub_header() -> str:
    """Our stub_fun.h: the realapi declarations less what csrc defines, then ours."""
    return (declarations_header(exclude=OWN_NAMES)
            + '\n// The CPU semantics of the intrinsics opbot models (runners/ascendc/cpumodel).\n'
            '#include "opbot_cpumodel.h"\n')


def _library_flags(api: RealApi) -> list[str]:
    tools = api.tools
    # cpudebug's own CMake: its include, api_check and utils folders, then the devkit's.
    own = [tools / "include", tools / "src" / "api_check", tools / "src" / "api_check" / "inc",
           tools / "utils", tools / "utils" / "include", tools / "utils" / "include" / "utils"]
    return ["-DNO_COSIM", *(f"-I{folder}" for folder in own)]


def build_flags(library: Library) -> list[str]:
    """g++ flags for the library's own sources."""
    return [*library.compile_flags(), *_library_flags(library.api), f"-I{CSRC}"]


def _sources(api: RealApi) -> list[Path]:
    tools = api.tools / "src"
    listed = [tools / "regfwk" / name for name in REGFWK_SOURCES]
    listed.append(tools / "acl_stub" / "kernel_fp16.cpp")
    listed += sorted((tools / "api_check").glob("*.cpp"))
    return listed + [CSRC / name for name in OWN_SOURCES]


def _key(api: RealApi) -> str:
    digest = hashlib.sha256(_LAYOUT_VERSION.encode())
    digest.update(api.root.name.encode())  # the commits and the realapi stand-ins' hash
    digest.update(stub_header().encode())
    for name in (*OWN_SOURCES, *OWN_HEADERS):
        digest.update(name.encode() + b"\0" + (CSRC / name).read_bytes())
    digest.update(" ".join((*OPT_FLAGS, *api.defines())).encode())
    return f"devkit-{api.devkit_commit}_tools-{api.tools_commit}_{digest.hexdigest()[:12]}"


def _real_api() -> RealApi:
    try:
        return prepare_real_api()
    except RealApiUnavailable as exc:
        raise CpuModelError(f"the CPU model needs the real Ascend C sources: {exc}") from exc


def library_root() -> Path:
    """Where the library for the current sources lives (built or not)."""
    api = _real_api()
    return cache_dir() / "cpumodel" / _key(api)


def prepare_library(timeout_s: float = 900) -> Library:
    """The cached library, built first when missing. Raises CpuModelError(reason)."""
    api = _real_api()
    final = cache_dir() / "cpumodel" / _key(api)
    if (final / _READY).is_file():
        mark_used(final)
        return Library(final, api)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        lock = os.open(final.parent / f".{final.name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise CpuModelError(f"cannot write the cache folder {final.parent}: {exc} "
                            "(set OPBOT_CACHE_DIR to a writable folder)") from exc
    try:
        # One build at a time: a second process (a test worker, a parallel job) waits for
        # the first one's library instead of compiling the same sources beside it.
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (final / _READY).is_file():
            _build_and_publish(final, api, timeout_s)
    finally:
        os.close(lock)  # releases the lock
    if not (final / _READY).is_file():
        raise CpuModelError(f"the CPU model library at {final} is incomplete: remove it")
    return Library(final, api)


def _build_and_publish(final: Path, api: RealApi, timeout_s: float) -> None:
    try:
        building = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    except OSError as exc:
        raise CpuModelError(f"cannot write the cache folder {final.parent}: {exc} "
                            "(set OPBOT_CACHE_DIR to a writable folder)") from exc
    try:
        _build(building, api, timeout_s)
        publish_folder(building, final, lambda folder: (folder / _READY).is_file())
        prune_unused(final.parent, final)
    finally:
        shutil.rmtree(building, ignore_errors=True)


def build_library(timeout_s: float = 900) -> Path:
    """The cached static library's path (built first when missing)."""
    return prepare_library(timeout_s).archive


def _build(building: Path, api: RealApi, timeout_s: float) -> None:
    include = building / "include"
    include.mkdir()
    (include / "stub_fun.h").write_text(stub_header(), encoding="utf-8")
    shutil.copy2(CSRC / "opbot_cpumodel.h", include / "opbot_cpumodel.h")
    flags = build_flags(Library(building, api))
    deadline = time.monotonic() + timeout_s
    objects = building / "obj"
    objects.mkdir()
    started = time.monotonic()
    sources = list(enumerate(_sources(api)))
    shared = _shared_header(api)
    leading = {index for index, source in sources if _starts_with(source, shared.name)}

    def compile_one(index_source: tuple[int, Path], extra: Sequence[str] = ()) -> Path:
        index, source = index_source
        target = objects / f"{index:03d}_{source.stem}.o"
        _run(["g++", *flags, *extra, "-c", str(source), "-o", str(target)], deadline,
             source.name)
        return target

    with ThreadPoolExecutor(max_workers=JOBS) as pool:
        others = [pool.submit(compile_one, item) for item in sources if item[0] not in leading]
        # Meanwhile, the header most api_check sources start with, precompiled once.
        forced = _precompile(shared, building / "pch", flags, deadline) if leading else []
        starting = [pool.submit(compile_one, item, forced) for item in sources
                    if item[0] in leading]
        built = sorted([job.result() for job in (*others, *starting)])
    _run(["ar", "rcs", str(building / _ARCHIVE), *map(str, built)], deadline, "ar")
    shutil.rmtree(objects, ignore_errors=True)
    shutil.rmtree(building / "pch", ignore_errors=True)
    (building / "build.json").write_text(json.dumps({
        "seconds": round(time.monotonic() - started, 1), "devkit": api.devkit_commit,
        "tools": api.tools_commit}), encoding="utf-8")
    (building / _READY).write_text("ok\n", encoding="utf-8")


def _shared_header(api: RealApi) -> Path:
    """What 27 of cpudebug's 33 api_check sources start with (~1.8 s of each's ~2.4 s)."""
    return api.tools / "src" / "api_check" / "kernel_check_params.h"


def _starts_with(source: Path, header: str) -> bool:
    from runners.ascendc.realapi.typecheck import leading_include_line

    try:
        text = source.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return leading_include_line(text, header) is not None


def _precompile(header: Path, folder: Path, flags: Sequence[str], deadline: float) -> list[str]:
    """g++ flags that load `header` precompiled before a source that starts with it (its
    own #include then finds the guard defined: the same unit); [] when the PCH cannot be
    built, and those sources parse the header as before. A wrapper includes the real
    header, so g++ falling back from an unusable PCH reads exactly the same text."""
    if not header.is_file():
        return []
    folder.mkdir(exist_ok=True)
    wrapper = folder / "opbot_library_pch.h"
    wrapper.write_text(f'#include "{header}"\n', encoding="utf-8")
    try:
        _run(["g++", *flags, "-x", "c++-header", str(wrapper), "-o", f"{wrapper}.gch"],
             deadline, "the shared precompiled header")
    except CpuModelError:
        return []
    return ["-include", str(wrapper)]


def _run(argv: list[str], deadline: float, what: str) -> None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise CpuModelError(f"building the CPU model library timed out (at {what})")
    try:
        done = subprocess.run(argv, capture_output=True, text=True, errors="replace",
                              timeout=left, check=False)
    except subprocess.TimeoutExpired as exc:
        raise CpuModelError(f"building the CPU model library timed out (at {what})") from exc
    except OSError as exc:
        raise CpuModelError(f"cannot run {argv[0]} to build the CPU model library: {exc}") from exc
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        raise CpuModelError(f"building the CPU model library failed at {what}:\n{tail}")
