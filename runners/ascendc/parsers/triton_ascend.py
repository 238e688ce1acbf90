"""triton-ascend's compile and launch errors -> the kind of failure and a hint."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from runners.ascendc.parsers.common import JsonResult, clip

TritonErrorKind = Literal[
    "ub_overflow", "grid_too_large", "unknown_target", "bishengir_failed", "no_driver", "unknown"]


@dataclass
class TritonAscendError(JsonResult):
    kind: TritonErrorKind
    message: str | None = None
    required_bits: int | None = None
    available_bits: int | None = None
    grid_limit: int | None = None
    target: str | None = None
    location: str | None = None  # file:line of the kernel, when the MLIR loc() names it
    hint: str | None = None


_TRITON_PREFIX = re.compile(r"^(?:\[?rank\d+\]:\s?|E\s(?=\S)|E$)")
_UB_OVERFLOW = re.compile(r"ub overflow, requires (?P<req>\d+) bits while (?P<avail>\d+) bits "
                          r"ava\w*ble")
_UB_NOTE = re.compile(r"Due to Ub overflow", re.IGNORECASE)
_GRID = re.compile(r"grid should be less than (?P<n>\d+)|coreDim=\S* can't be greater than "
                   r"UINT16_MAX")
_UNKNOWN_TARGET = re.compile(r"for the --target option: Cannot find option named '(?P<t>[^']+)'")
_BISHENGIR = re.compile(r"Failed to run Bisheng\w* \w*\s*pipeline|bishengir-\w*compile|"
                        r"CalledProcessError|linalg_to_bin", re.IGNORECASE)
_NO_DRIVER = re.compile(r"0 active drivers")
_MLIR_LOC = re.compile(r'loc\("(?P<file>[^"]+)":(?P<line>\d+):\d+\)')


def parse_triton_ascend_error(text: str) -> TritonAscendError:
    lines = [_TRITON_PREFIX.sub("", raw.strip()).strip() for raw in text.splitlines()]
    body = "\n".join(lines)
    ub = _UB_OVERFLOW.search(body)
    if ub is not None or _UB_NOTE.search(body):
        return _ub_overflow(body, ub)
    target = _UNKNOWN_TARGET.search(body)
    if target is not None:
        return TritonAscendError(
            kind="unknown_target", target=target["t"], message=target.group(0),
            hint=(f"bishengir-compile in this CANN does not know the target '{target['t']}' "
                  "(the SOC name the runtime reported): this triton-ascend/CANN pair does not "
                  "support this chip. Check the pairing and upgrade CANN or triton-ascend."))
    grid = _GRID.search(body)
    if grid is not None:
        limit = int(grid["n"]) - 1 if grid["n"] else 65535
        return TritonAscendError(
            kind="grid_too_large", grid_limit=limit,
            message=_last_line_with(lines, grid.group(0)),
            hint=(f"The launch grid is above {limit}: on Ascend the grid is the number of "
                  "physical cores. Launch a 1-D grid of num_vectorcore (num_aicore with "
                  "tl.dot) programs and loop over the blocks inside the kernel, or set "
                  "TRITON_ALL_BLOCKS_PARALLEL=1."))
    if _BISHENGIR.search(body):
        message = ("bishengir-compile exited with an error (subprocess.CalledProcessError)"
                   if "CalledProcessError" in body else _first_error_line(lines))
        return TritonAscendError(
            kind="bishengir_failed", message=message, location=_kernel_loc(body),
            hint=("bishengir-compile failed to build the kernel; its stderr holds the reason "
                  "(UB overflow, an unsupported op or dtype). Rerun with TRITON_DEBUG=1."))
    if _NO_DRIVER.search(body):
        return TritonAscendError(
            kind="no_driver", message=_last_line_with(lines, "0 active drivers"),
            hint="No NPU/CANN here: run with TRITON_INTERPRET=1 on CPU tensors instead.")
    return TritonAscendError(kind="unknown", message=_first_error_line(lines))


def _ub_overflow(body: str, ub: re.Match[str] | None) -> TritonAscendError:
    required = int(ub["req"]) if ub else None
    available = int(ub["avail"]) if ub else None
    if required and available:
        factor = math.ceil(10 * required / available) / 10  # the smallest shrink that fits
        size = (f"needs {required // 8 // 1024} KB of UB but {available // 8 // 1024} KB "
                f"exist; shrink the per-iteration block at least {factor:g}x")
    else:
        size = "does not fit in UB; shrink the per-iteration block"
    return TritonAscendError(
        kind="ub_overflow", required_bits=required, available_bits=available,
        message=ub.group(0) if ub else "ub overflow", location=_kernel_loc(body),
        hint=(f"UB overflow: the kernel's working set {size} (lower XBLOCK_SUB, or XBLOCK, "
              "and loop over sub-blocks inside the kernel). Multi-buffering doubles it."))


def _kernel_loc(body: str) -> str | None:
    """The first loc() naming the Python kernel source; temporary .mlir files mean nothing
    to the agent, so they are not reported."""
    for match in _MLIR_LOC.finditer(body):
        if match["file"].endswith(".py"):
            return f"{match['file']}:{match['line']}"
    return None


def _last_line_with(lines: Sequence[str], needle: str) -> str | None:
    """The last line holding the message: the raised error, not the `raise` source echo."""
    return next((line for line in reversed(lines) if needle in line), None)


def _first_error_line(lines: Sequence[str]) -> str | None:
    for line in lines:
        if re.search(r"\berror\b|Error:|Exception|failed", line, re.IGNORECASE):
            return clip(line)
    return None
