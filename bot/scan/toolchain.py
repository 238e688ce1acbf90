"""What the nightly scan records about the machine it ran on: the toolchain that built and
judged each operator (CANN and its generation, the NPU driver, the SoC, torch, torch_npu,
triton or triton-ascend), as `opbot doctor` finds them, without importing torch_npu.

Two runs compare by `key()`: the same key is the same toolchain (a re-run changes
nothing); a new key names what changed ("CANN 8.3.RC1 (legacy) -> 9.0.0 (asc)").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from importlib import metadata
from pathlib import Path
from typing import Any

from runners.ascendc.detect import CannInfo, detect_cann, detect_soc

_DRIVER_FILES = ("/usr/local/Ascend/driver/version.info",)
_DRIVER_VERSION = re.compile(r"^\s*Version\s*=\s*(?P<v>\S+)\s*$", re.MULTILINE)
_PACKAGES = {"torch": "torch", "torch_npu": "torch_npu", "triton": "triton",
             "triton_ascend": "triton-ascend"}
# Which parts a change of makes another toolchain, in the order a reader cares about.
_LABELS = {"cann": "CANN", "driver": "driver", "soc": "SoC", "torch": "torch",
           "torch_npu": "torch_npu", "triton": "triton", "triton_ascend": "triton-ascend"}


@dataclass(frozen=True)
class ToolchainRecord:
    cann: str | None = None
    cann_generation: str | None = None
    driver: str | None = None
    soc: str | None = None
    torch: str | None = None
    torch_npu: str | None = None
    triton: str | None = None
    triton_ascend: str | None = None

    def to_json(self) -> dict[str, str | None]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> ToolchainRecord:
        """A recorded toolchain; unknown keys and non-text values are dropped (the record
        comes back from a comment people can edit)."""
        if not isinstance(data, Mapping):
            return cls()
        known = {item.name for item in fields(cls)}
        return cls(**{key: value[:80] for key, value in data.items()
                      if key in known and isinstance(value, str)})

    def parts(self) -> dict[str, str]:
        """Each recorded part as people write it: {"cann": "9.0.0 (asc)", ...}."""
        shown = {key: getattr(self, key) for key in _LABELS}
        if self.cann and self.cann_generation:
            shown["cann"] = f"{self.cann} ({self.cann_generation})"
        return {key: value for key, value in shown.items() if value}

    def key(self) -> str:
        """One line naming the toolchain; equal lines, equal toolchains."""
        return ", ".join(f"{_LABELS[key]} {value}" for key, value in self.parts().items()) \
            or "unknown"

    def changes_from(self, before: ToolchainRecord) -> list[str]:
        """What changed since `before`: ["CANN 8.3.RC1 (legacy) -> 9.0.0 (asc)", ...]."""
        old, new = before.parts(), self.parts()
        return [f"{_LABELS[key]} {old.get(key) or 'none'} -> {new.get(key) or 'none'}"
                for key in _LABELS if old.get(key) != new.get(key)]


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except Exception:  # noqa: BLE001 - not installed, or unreadable metadata: not recorded
        return None


def driver_version(paths: tuple[str, ...] = _DRIVER_FILES) -> str | None:
    """The NPU driver's version from its version.info (`Version=24.1.rc2.2`)."""
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")[:65536]
        except OSError:
            continue
        match = _DRIVER_VERSION.search(text)
        if match:
            return match["v"]
    return None


def _soc() -> str | None:
    try:
        info = detect_soc()
    except Exception:  # noqa: BLE001 - a broken npu-smi is no reason to stop a scan
        return None
    return info.soc or info.chip if info.found else None


def record_toolchain(cann: Callable[[], CannInfo] = detect_cann,
                     driver: Callable[[], str | None] = driver_version,
                     soc: Callable[[], str | None] = _soc) -> ToolchainRecord:
    """This machine's toolchain. Never raises: a part that cannot be read is None."""
    try:
        info = cann()
    except Exception:  # noqa: BLE001 - detection must not stop the scan
        info = CannInfo()
    return ToolchainRecord(
        cann=info.version if info.found else None,
        cann_generation=info.generation if info.found else None,
        driver=driver(), soc=soc(),
        **{name: _version(package) for name, package in _PACKAGES.items()})
