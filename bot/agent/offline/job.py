"""What the offline generator is asked (a job) and what it answers (a result).

Both cross a process boundary as JSON: the job goes to the worker on stdin, the result
comes back in a file the worker writes. Backend-specific knobs travel in `options` as
strings (e.g. the Ascend C toolchain `generation`), so this module knows no backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runners.base import CaseSpec, InputCase


@dataclass(frozen=True)
class OfflineJob:
    reference: Path  # a KernelBench-format reference (user code: run it in the worker)
    op_name: str
    init_args: list[Any] | None = None  # None: the reference's get_init_inputs()
    cases: list[CaseSpec] = field(default_factory=list)  # empty: the reference's get_inputs()
    options: dict[str, str] = field(default_factory=dict)

    def option(self, key: str, default: str) -> str:
        return self.options.get(key, default)

    def to_json(self) -> dict[str, Any]:
        return {"reference": str(self.reference), "op": self.op_name,
                "init_args": self.init_args, "cases": [case.to_json() for case in self.cases],
                "options": dict(self.options)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OfflineJob:
        init_args = data.get("init_args")
        return cls(reference=Path(str(data["reference"])), op_name=str(data["op"]),
                   init_args=None if init_args is None else list(init_args),
                   cases=[_case_from_json(item) for item in data.get("cases") or []],
                   options={str(key): str(value)
                            for key, value in (data.get("options") or {}).items()})


def _case_from_json(item: Mapping[str, Any]) -> CaseSpec:
    return CaseSpec(name=str(item["name"]), seed=int(item["seed"]),
                    inputs=[InputCase(**entry) for entry in item["inputs"]])


@dataclass(frozen=True)
class OfflineResult:
    status: str  # "generated" | "unsupported" | "error"
    source: str = ""
    kernels: list[str] = field(default_factory=list)
    unsupported_ops: list[str] = field(default_factory=list)
    reason: str = ""
    files: dict[str, str] = field(default_factory=dict)  # Ascend C: the package's files
    aten_ops: list[str] = field(default_factory=list)  # what the traced reference calls

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "source": self.source, "kernels": self.kernels,
                "unsupported_ops": self.unsupported_ops, "reason": self.reason,
                "files": self.files, "aten_ops": self.aten_ops}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OfflineResult:
        return cls(status=str(data.get("status", "error")), source=str(data.get("source", "")),
                   kernels=list(data.get("kernels", [])),
                   unsupported_ops=list(data.get("unsupported_ops", [])),
                   reason=str(data.get("reason", "")),
                   files={str(key): str(value)
                          for key, value in (data.get("files") or {}).items()},
                   aten_ops=[str(item) for item in data.get("aten_ops") or []][:200])


def reference_error(exc: BaseException) -> OfflineResult:
    """The reference (user code) failed to load or run: the user's error, not ours."""
    return OfflineResult(status="error", reason=f"the reference failed to run: "
                         f"{type(exc).__name__}: {exc}")
