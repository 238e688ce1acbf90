"""Running a package's CPU program: the blocks as forked processes, over raw input files.

Sandboxed by default (the kernel is untrusted); `sandboxed=False` runs it as a plain
subprocess, for a caller that is itself already inside opbot's sandbox (the judge's worker),
where a nested bwrap cannot start. GmAlloc keeps its shared buffers in /tmp, which is the
sandbox's private one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy

from runners.ascendc.cpumodel.blocks import block_errors, launched_blocks, succeeded_blocks
from runners.ascendc.cpumodel.errors import CpuModelError
from runners.ascendc.package import PackageError, read_manifest
from runners.sandbox import SandboxUnavailableError, child_environment, run_isolated

DTYPES: dict[str, type[numpy.generic]] = {
    "float32": numpy.float32, "float16": numpy.float16, "int32": numpy.int32,
    "int16": numpy.int16, "int8": numpy.int8, "uint8": numpy.uint8,
}
DEFAULT_UB_BYTES = 196608  # dav-2201: 192 KiB of unified buffer per vector core
_LOG_CHARS = 20000


@dataclass
class BlockRun:
    """How a run's blocks ended."""

    ok: bool
    blocks: int  # launched (0 when the program did not say)
    succeeded: int
    errors: list[str] = field(default_factory=list)
    log: str = ""
    seconds: float = 0.0
    returncode: int | None = None

    def failure(self) -> str:
        """One line on what went wrong (empty when nothing did)."""
        if self.ok:
            return ""
        said = "; ".join(self.errors[:3]) or f"exit status {self.returncode}"
        if self.returncode not in (0, None):  # the launch itself failed (bad arguments, ...)
            return f"the CPU-model run exited with status {self.returncode}: {said}"
        return f"{self.blocks - self.succeeded} of {self.blocks} blocks failed: {said}" \
            if self.blocks else f"the CPU-model run failed: {said}"


def run_program(program: Path, *, dtype: str, inputs: list[Path], outputs: list[Path],
                elements: int, cores: int = 8, ub_bytes: int = DEFAULT_UB_BYTES,
                timeout_s: float = 120, sandboxed: bool = True,
                row_length: int | None = None) -> BlockRun:
    """Run the program on raw little-endian `inputs`, writing `outputs` (which must share one
    folder: the only one the sandboxed run may write). `row_length`: the rows pattern's
    last dimension, which its twin takes after the element count."""
    folders = {path.resolve().parent for path in outputs}
    if len(folders) != 1:
        raise CpuModelError("the outputs of a CPU-model run must be in one folder")
    workdir = folders.pop()
    rows = [] if row_length is None else [str(row_length)]  # the rows pattern's twin
    argv = [str(program.resolve()), dtype, str(elements), str(cores), str(ub_bytes), *rows,
            *(str(path.resolve()) for path in (*inputs, *outputs))]
    started = time.monotonic()
    if sandboxed:
        readable = [program.resolve().parent, *(path.resolve().parent for path in inputs)]
        returncode, log = run_sandboxed(argv, workdir, readable, timeout_s)
    else:
        returncode, log = _plain(argv, workdir, timeout_s)
    return _outcome(returncode, log, time.monotonic() - started)


def _outcome(returncode: int | None, log: str, seconds: float) -> BlockRun:
    blocks = launched_blocks(log)
    succeeded = succeeded_blocks(log)
    errors = block_errors(log)
    if returncode is None:
        errors.append("the run timed out")
    elif returncode != 0 and not errors:
        errors.append(_last_lines(log) or f"exit status {returncode}")
    if blocks is None:
        # A twin from before the launch line: a failed block still leaves an [ERROR] line
        # (the checks and the signal handler print one), so count what succeeded.
        blocks = succeeded
    if returncode == 0 and blocks == 0 and not errors:
        errors.append("no block ran")
    ok = returncode == 0 and succeeded == blocks and not errors
    return BlockRun(ok=ok, blocks=blocks, succeeded=succeeded, errors=errors,
                    log=log[-_LOG_CHARS:], seconds=round(seconds, 3), returncode=returncode)


def _last_lines(log: str, count: int = 3) -> str:
    lines = [line for line in log.strip().splitlines()
             if line.strip() and not line.startswith("[opbot-twin]")]
    return " / ".join(lines[-count:])


def run_sandboxed(argv: list[str], workdir: Path, readable: list[Path], timeout_s: float,
              what: str = "run the kernel") -> tuple[int | None, str]:
    """Run `argv` in the sandbox (the kernel is untrusted, in its build as in its run):
    (its exit status, None on timeout; its whole log, kept outside its reach)."""
    logs = Path(tempfile.mkdtemp(prefix="opbot-cpumodel-"))
    log_path = logs / "child.log"
    try:
        outcome = run_isolated(argv, cwd=workdir, timeout_s=timeout_s, log_path=log_path,
                               env=child_environment(), readable=readable)
        log = log_path.read_text(encoding="utf-8", errors="replace")
    except SandboxUnavailableError as exc:
        raise CpuModelError(f"cannot {what} in the sandbox: {exc}") from exc
    finally:
        shutil.rmtree(logs, ignore_errors=True)
    return (None if outcome.timed_out else outcome.returncode), log


def _plain(argv: list[str], workdir: Path, timeout_s: float) -> tuple[int | None, str]:
    """A plain child in its own process group, so a timeout also ends its forked blocks."""
    with tempfile.TemporaryFile() as log_file:
        process = subprocess.Popen(argv, cwd=workdir, stdin=subprocess.DEVNULL,
                                   stdout=log_file, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        try:
            returncode: int | None = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            returncode = None
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log_file.seek(0)
        return returncode, log_file.read().decode("utf-8", errors="replace")


def run_numpy(package: Path, program: Path, dtype: str, arrays: Sequence[numpy.ndarray],
              cores: int = 8, *, sandboxed: bool = True, timeout_s: float = 120,
              ub_bytes: int = DEFAULT_UB_BYTES,
              params: Sequence[numpy.ndarray] = ()) -> list[numpy.ndarray]:
    """Run the program on `arrays` (one per kernel input, same element count) and return
    its outputs, shaped like the first input (or, for a per-row output of the rows pattern,
    like it without its last dimension). `params`: the rows pattern's parameter rows, sent
    as float32. Raises CpuModelError with the failed block's message when a block fails."""
    if dtype not in DTYPES:
        raise CpuModelError(f"the CPU model has no {dtype!r} arrays (known: {sorted(DTYPES)})")
    try:
        manifest = read_manifest(package)
    except (PackageError, OSError, ValueError, KeyError) as exc:
        raise CpuModelError(f"{package}: not an opbot Ascend C package: {exc}") from exc
    if not arrays or len(arrays) != len(manifest.inputs):
        raise CpuModelError(f"{manifest.op} takes {len(manifest.inputs)} inputs, "
                            f"got {len(arrays)} arrays")
    element = numpy.dtype(DTYPES[dtype]).newbyteorder("<")
    shape = numpy.shape(arrays[0])
    flat = [numpy.ascontiguousarray(numpy.asarray(array), dtype=element).reshape(-1)
            for array in arrays]
    if any(array.size != flat[0].size for array in flat):
        raise CpuModelError("every input of the kernel must have as many elements")
    rows = manifest.pattern == "rows"
    row_length = int(shape[-1]) if rows and shape else (1 if rows else None)
    rows_shape = tuple(shape[:-1]) if shape else ()
    shapes = [rows_shape if layout == "rows" else shape for layout in manifest.layouts()]
    param_arrays = _param_arrays(manifest.params, params, row_length)
    if flat[0].size == 0:  # no tiling launches nothing; the result is as empty
        return [numpy.empty(item, dtype=element) for item in shapes]
    work = Path(tempfile.mkdtemp(prefix="opbot-cpumodel-"))
    try:
        inputs = [work / f"in{index}.bin" for index in range(len(flat) + len(param_arrays))]
        for path, array in zip(inputs, [*flat, *param_arrays], strict=True):
            array.tofile(path)
        outputs = [work / f"out{index}.bin" for index in range(manifest.outputs)]
        run = run_program(program, dtype=dtype, inputs=inputs, outputs=outputs,
                          elements=flat[0].size, cores=cores, ub_bytes=ub_bytes,
                          sandboxed=sandboxed, timeout_s=timeout_s, row_length=row_length)
        if not run.ok:
            raise CpuModelError(run.failure())
        return [numpy.fromfile(path, dtype=element).reshape(item)
                for path, item in zip(outputs, shapes, strict=True)]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _param_arrays(specs: Sequence[object], params: Sequence[numpy.ndarray],
                  row_length: int | None) -> list[numpy.ndarray]:
    """The parameters as little-endian float32 rows, checked against the manifest."""
    if len(params) != len(specs):
        raise CpuModelError(f"the kernel takes {len(specs)} parameters, got {len(params)}")
    rows = [numpy.ascontiguousarray(numpy.asarray(item), dtype="<f4").reshape(-1)
            for item in params]
    if any(item.size != row_length for item in rows):
        raise CpuModelError(f"every parameter must be one row of {row_length} elements, "
                            f"got sizes {[item.size for item in rows]}")
    return rows
