"""One operator's backends re-verified, each verdict a row with its breakage class.

Every backend a package holds (`ops/<op>/<backend>/...`, found through the backend's own
`kernel_paths`) and every one its op.yaml targets is checked with this machine's toolchain.
A verdict that does not stand for the backend's hardware (Ascend C on the CPU model) is
`unverified` unless it failed: a package broken anywhere is broken. Failures are classed
from the platform's own words: `build` (compiler, CMake, link, import: with file:line),
`runtime` (the device's error, ACL codes parsed by runners/ascendc/runtime_errors.py),
`mismatch` (the failing case), `rejected` (an anti-cheat check refused it), `performance`
(on a device, slower than the recorded figure beyond the policy's factor).

An operator is its folder: `ops/<op>/op.yaml` must name `<op>` (else two folders could
answer for one operator, and a regeneration would write into another folder), and nothing
the scan reads may be a link out of the checkout (its text would reach the dashboard).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bot.agent.backends import backend_names, get_backend
from bot.errors import BackendUnavailableError, OpbotError
from bot.spec import OpSpec, load_spec
from bot.verification import verify_candidate
from runners.base import Backend as Runner
from runners.base import Failure, VerifyResult

_BUILD_CHECKS = ("build", "load")
_RUNTIME_CHECKS = ("run", "crash", "timeout", "init", "device", "sandbox")
_MISMATCH_CHECKS = ("values", "shape", "dtype", "nan_inf", "layout", "output_structure")


@dataclass(frozen=True)
class ScanRow:
    """One operator x backend: its verdict, the breakage class, what the scan does."""

    op: str
    backend: str
    status: str  # passed | failed | unverified | invalid | missing
    reason: str
    detail: str = ""  # the failed checks' names (the earlier contract's field)
    breakage: str | None = None  # build | runtime | mismatch | rejected | performance
    action: str = "none"  # none | regenerate | update-pr | skip
    note: str = ""  # why that action (a skip's reason): tonight's, not the verdict's
    kernel_ms: float | None = None  # on a device: the kernel's median at the perf shapes
    spec: OpSpec | None = None

    @property
    def key(self) -> str:
        return f"{self.op}/{self.backend}"

    def to_json(self) -> dict[str, Any]:
        reason = f"{self.reason}; {self.note}" if self.note else self.reason
        data: dict[str, Any] = {"op": self.op, "backend": self.backend, "status": self.status,
                                "action": self.action, "reason": reason,
                                "detail": self.detail, "breakage": self.breakage}
        if self.kernel_ms is not None:
            data["kernel_ms"] = self.kernel_ms
        return data


Verify = Callable[[Path, Path, str], VerifyResult]


def verifier(runners: Mapping[str, Runner] | None = None) -> Verify:
    """verify_candidate with each backend's runner (or the one `runners` names), timing
    the kernel where the runner's device is real hardware."""
    made: dict[str, Runner] = dict(runners or {})
    lock = threading.Lock()

    def verify(op_yaml: Path, candidate: Path, backend: str) -> VerifyResult:
        # One runner per backend for the whole scan: it detects its toolchain once, not
        # once an operator.
        with lock:
            runner = made.get(backend)
            if runner is None:
                runner = made[backend] = get_backend(backend).runner()
        device = runner.availability().device
        return verify_candidate(op_yaml, candidate, backend=backend, runner=runner,
                                time_it=_on_hardware(device))
    return verify


def _on_hardware(device: str) -> bool:
    return device.startswith(("npu", "cuda"))


def backends_of(folder: Path, spec: OpSpec) -> list[str]:
    """The backends a package holds, then those its op.yaml targets but lacks."""
    held = [name for name in backend_names() if _kernel_of(folder, spec.name, name)]
    return held + [name for name in spec.targets if name not in held]


def _kernel_of(folder: Path, op: str, backend: str) -> Path | None:
    for relative in get_backend(backend).kernel_paths(op):
        if (folder / relative).is_file():
            return folder / relative
    return None


def check_operator(op_yaml: Path, verify: Verify, root: Path | None = None) -> list[ScanRow]:
    """Every backend of the operator whose op.yaml is `op_yaml` (in the checkout `root`),
    verified."""
    folder = op_yaml.parent
    inside = (root or folder.parent.parent).resolve()
    if _leaves(op_yaml, inside):
        return [ScanRow(folder.name, "-", "invalid", f"ops/{folder.name}/op.yaml is a link "
                        "out of the checkout: not read", "op.yaml")]
    try:
        spec = load_spec(op_yaml)
    except OpbotError as exc:
        return [ScanRow(folder.name, "-", "invalid", str(exc), "op.yaml")]
    if spec.name != folder.name:
        return [ScanRow(folder.name, "-", "invalid", f"ops/{folder.name}/op.yaml names the "
                        f"operator {spec.name!r}: an operator lives in ops/<its name>/ "
                        "(rename the folder or the operator)", "op.yaml")]
    return [_check_backend(folder, spec, backend, verify, inside)
            for backend in backends_of(folder, spec)]


def _leaves(path: Path, root: Path) -> bool:
    """Whether `path` is, or goes through, a link that ends outside `root`."""
    try:
        return not path.resolve().is_relative_to(root)
    except (OSError, RuntimeError):  # a link loop
        return True


def _check_backend(folder: Path, spec: OpSpec, backend: str, verify: Verify,
                   root: Path) -> ScanRow:
    kernel = _kernel_of(folder, spec.name, backend)
    if kernel is None:
        wanted = " or ".join(get_backend(backend).kernel_paths(spec.name))
        return ScanRow(spec.name, backend, "missing", f"no {wanted}", spec=spec)
    package = [kernel, folder / backend, *(folder / backend).rglob("*")] \
        if (folder / backend).is_dir() and not _leaves(folder / backend, root) else [kernel]
    if any(_leaves(path, root) for path in package[:1000]):
        return ScanRow(spec.name, backend, "invalid", f"ops/{spec.name}/{backend}/ holds a "
                       "link out of the checkout: not run", spec=spec)
    try:
        result = verify(folder / "op.yaml", kernel, backend)
    except BackendUnavailableError as exc:
        return ScanRow(spec.name, backend, "unverified", str(exc), spec=spec)
    except OpbotError as exc:
        return ScanRow(spec.name, backend, "invalid", str(exc), spec=spec)
    return row_from_verdict(spec, backend, result)


def row_from_verdict(spec: OpSpec, backend: str, result: VerifyResult) -> ScanRow:
    checks = ", ".join(sorted({reason.check for reason in result.reasons}))
    if result.passed:
        partial = get_backend(backend).partial_verification(result.device)
        if partial is not None:
            return ScanRow(spec.name, backend, "unverified", f"passed, but {partial}",
                           spec=spec)
        return ScanRow(spec.name, backend, "passed", f"passed on {result.device}",
                       spec=spec, kernel_ms=_kernel_ms(result))
    first = result.reasons[0] if result.reasons else Failure("unknown", "failed")
    breakage = breakage_of(first)
    return ScanRow(spec.name, backend, "failed", f"{breakage}: {describe_failure(first)}",
                   checks or "failed", breakage, spec=spec)


def _kernel_ms(result: VerifyResult) -> float | None:
    """The kernel's time on a device: the profiler's figure for the kernel alone (msprof,
    runners/ascendc/profiling.py) where there is one, else the judge's median."""
    timing = result.timing
    if timing is None or not _on_hardware(timing.device):
        return None
    return timing.kernel_us / 1000 if timing.kernel_us else timing.candidate_ms


def breakage_of(failure: Failure) -> str:
    if failure.check in _BUILD_CHECKS:
        return "build"
    if failure.check in _RUNTIME_CHECKS or "runtime" in failure.details:
        return "runtime"
    if failure.check in _MISMATCH_CHECKS:
        return "mismatch"
    return "rejected"  # the anti-cheat checks: no wrong output, a refused kernel


def describe_failure(failure: Failure, limit: int = 300) -> str:
    """One line: the failure's message, where it points, the failing case."""
    text = failure.message.strip().splitlines()[0] if failure.message.strip() else "failed"
    if failure.location is not None:
        text += f" ({failure.location.file}:{failure.location.line})"
    if failure.case:
        text += f" [case {failure.case}]"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def slower_than_recorded(row: ScanRow, recorded_ms: float | None, factor: float) -> ScanRow:
    """A passing kernel timed on a device more than `factor` slower than its recorded
    figure is a performance regression."""
    if row.status != "passed" or row.kernel_ms is None or not recorded_ms:
        return row
    if row.kernel_ms <= recorded_ms * factor:
        return row
    ratio = row.kernel_ms / recorded_ms
    return replace(row, status="failed", breakage="performance", detail="performance",
                   reason=f"performance: {row.kernel_ms:.4g} ms, {ratio:.2f}x the recorded "
                          f"{recorded_ms:.4g} ms (the policy allows {factor:g}x)")


def relative_to(row: ScanRow, root: Path) -> ScanRow:
    """Paths inside the checkout, not where this machine happened to clone it."""
    reason = row.reason.replace(f"{root.resolve()}/", "").replace(f"{root}/", "")
    return replace(row, reason=reason)
