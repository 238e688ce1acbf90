"""`opbot replay` for an Ascend C generation: each recorded package rebuilt and judged again.

The transcript holds the files each reply wrote; the rest of the package comes from the
same starting package the loop began with (the offline generator's, or the templates), so
composing the replies in order rebuilds every draft exactly. Each is put through the lint
and the tiling simulator again, and where CANN and an NPU are present, built and tested on
the runner again. Elsewhere a runner's recorded verdict cannot be replayed: only the static
stage is compared, and a note says so.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.agent.backends.ascendc.checks import problem_sizes, static_check
from bot.agent.ascendc_flow import BACKEND, write_files
from bot.agent.ascendc_loop import NoPackageError, starting_package
from bot.errors import BadInputError
from bot.spec import OpSpec, load_spec
from runners.ascendc.backend import AscendCBackend
from runners.ascendc.package import Generation

if TYPE_CHECKING:
    from bot.agent.backends.ascendc.skeleton import Skeleton
    from bot.replay import ReplayReport

STATIC_CLEAN, STATIC_FINDINGS = "static-clean", "static-findings"


def _recorded(entries: list[dict[str, Any]], kind: str) -> dict[int, dict[str, Any]]:
    return {int(entry["attempt"]): entry for entry in entries if entry["kind"] == kind}


def _verify(backend: AscendCBackend, spec: OpSpec, package: Skeleton, folder: Path) -> Any:
    write_files(folder, spec, package.files)
    return backend.verify(spec.to_request(folder.resolve(), backend=BACKEND,
                                          reference_file=(folder / "reference.py").resolve()))


def replay_ascendc(path: Path, start: Mapping[str, Any], entries: list[dict[str, Any]],
                   backend: AscendCBackend | None = None) -> ReplayReport:
    from bot.replay import ReplayedAttempt, ReplayReport

    backend = backend or AscendCBackend()
    availability = backend.availability()
    statics, verdicts = _recorded(entries, "static"), _recorded(entries, "verdict")
    packages = [entry for entry in entries if entry["kind"] == "package"]
    report = ReplayReport(op=str(start.get("op", "?")))
    if verdicts and not availability.available:
        report.notes.append(f"runner verdicts are not replayed here ({availability.reason}); "
                            "the lint and the tiling simulator are")
    generation: Generation = "asc" if start.get("generation") == "asc" else "legacy"
    with tempfile.TemporaryDirectory(prefix="opbot-replay-") as tmp:
        folder = Path(tmp)
        (folder / "op.yaml").write_text(str(start["spec_yaml"]), encoding="utf-8")
        (folder / "reference.py").write_text(str(start["reference_source"]), encoding="utf-8")
        spec = load_spec(folder / "op.yaml")
        try:
            package = starting_package(spec, folder / "start", generation, None)
        except NoPackageError as exc:
            raise BadInputError(f"{path}: the starting package cannot be rebuilt: {exc}") from None
        sizes = problem_sizes(spec)
        for entry in packages:
            number = int(entry["attempt"])
            package = package.compose({str(name): str(text)
                                       for name, text in dict(entry["files"]).items()})
            verdict = static_check(package, sizes)
            replayed = STATIC_CLEAN if verdict.ok else STATIC_FINDINGS
            recorded_static = statics.get(number)
            recorded = "none" if recorded_static is None else (
                STATIC_CLEAN if recorded_static.get("ok") else STATIC_FINDINGS)
            reasons: list[dict[str, Any]] = [{"check": "static", "message": error}
                                             for error in verdict.errors]
            if verdict.ok and number in verdicts and availability.available:
                result = _verify(backend, spec, package, folder / f"attempt-{number}" / spec.name)
                recorded, replayed = str(verdicts[number]["status"]), result.status
                reasons = [reason.to_json() for reason in result.reasons]
            report.attempts.append(ReplayedAttempt(attempt=number, recorded=recorded,
                                                   replayed=replayed, reasons=reasons))
    return report
