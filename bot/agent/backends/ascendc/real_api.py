"""The precheck's real-header stage: a draft's kernel type-checked with g++ against the real
Ascend C devkit headers (runners/ascendc/realapi), its errors told to the model as a
runner's compiler would tell them: file:line, the message, the real API's "did you mean".

Skipped, with a note, where the real sources are absent or the checks are switched off
(runners/ascendc/cpu_verify.py SWITCH); the draft then goes on as before.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bot.agent.package import write_files
from runners.ascendc.cpu_verify import SWITCH, checked_copy, compiler_failure, switched_off
from runners.ascendc.package import PackageError, read_manifest
from runners.ascendc.source_rules import source_problems
from runners.sandbox import private_workdir

_MAX_ERRORS = 5


@dataclass(frozen=True)
class RealApiPrecheck:
    ok: bool
    errors: tuple[str, ...] = ()
    feedback: str = ""
    note: str | None = None  # why it did not run, when it did not


_cache: dict[str, RealApiPrecheck] = {}


def _key(files: Mapping[str, str]) -> str:
    digest = hashlib.sha256()
    for name in sorted(files):
        if name.endswith((".cpp", ".asc", ".h", ".json")):
            # Lengths first: a file's text may hold NULs, names and texts must not blur.
            for part in (name, files[name]):
                data = part.encode("utf-8", "surrogateescape")
                digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def real_api_precheck(files: Mapping[str, str]) -> RealApiPrecheck:
    """Type-check the package's kernel; the same files are checked once per process."""
    if switched_off():
        return RealApiPrecheck(ok=True, note=f"switched off ({SWITCH}=0)")
    problems = source_problems({name.removeprefix("ascendc/"): text
                                for name, text in files.items()
                                if name.startswith("ascendc/") and "/" not in name[8:]
                                and name.endswith((".cpp", ".asc", ".h"))
                                and not name.endswith(("op.cpp", "cpu_twin.cpp", "cpu_twin.asc"))})
    if problems:
        shown = tuple(item.render() for item in problems[:_MAX_ERRORS])
        return RealApiPrecheck(ok=False, errors=shown, feedback="\n".join(
            ["The kernel is not Ascend C an NPU can run:", *(f"- {text}" for text in shown)]))
    key = _key(files)
    if key not in _cache:
        _cache[key] = _check(files)
    return _cache[key]


def _as_verified(work: Path) -> Path:
    """The package in `work` staged as the verification stages it; as it is where its
    manifest is unreadable (the check then says so)."""
    package = work / "ascendc"
    try:
        manifest = read_manifest(package)
    except (PackageError, OSError, ValueError, KeyError, TypeError):
        return package
    return checked_copy(package, manifest, work / "checked")


def _check(files: Mapping[str, str]) -> RealApiPrecheck:
    from runners.ascendc.realapi.typecheck import typecheck_package

    with private_workdir("opbot-realapi-") as work:
        write_files(work, {name: text for name, text in files.items()
                           if name.startswith("ascendc/")})
        try:
            # What the verification compiles, as it stages it (its kernel and headers):
            # a pass here is kept, and the verification of the same files reuses it.
            result = typecheck_package(_as_verified(work), reuse_passed=True)
        except Exception as exc:  # noqa: BLE001 - a broken check must not stop the loop
            return RealApiPrecheck(ok=True, note=f"the real-header check failed to run: "
                                   f"{type(exc).__name__}: {exc}")
    if result.skipped:
        return RealApiPrecheck(ok=True, note=result.skipped)
    if result.ok:
        return RealApiPrecheck(ok=True)
    failure = compiler_failure("the real Ascend C headers reject the kernel",
                               list(result.diagnostics), result.log)
    shown = list(failure.details.get("diagnostics") or [failure.message])[:_MAX_ERRORS]
    lines = ["The kernel does not compile against the real Ascend C headers "
             "(g++ -fsyntax-only, CPU-debug mode, the real devkit's API):"]
    lines += [f"- {text}" for text in shown]
    if failure.location is not None and failure.location.source_line:
        lines.append(f"  first error's line: `{failure.location.source_line.strip()}`")
    lines.append("Fix the first error first: the others often follow from it.")
    return RealApiPrecheck(ok=False, errors=tuple(shown), feedback="\n".join(lines))

