"""The nightly scan: re-verify every operator in the repository with today's toolchain.

Operators the toolchain broke are regenerated, one PR each (at most `nightly_limit` a
night); a dashboard (the status comment of the issue OPBOT_DASHBOARD_ISSUE names) shows
each operator's verdict for the toolchain versions of this run, edited in place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from bot.agent.backends import DEFAULT_BACKEND
from bot.agent.outcome import GenerateOutcome
from bot.errors import OpbotError
from bot.forge.base import Forge, Target
from bot.job_settings import JobOutcome, JobSettings
from bot.publish import GitWorkspace, Published, branch_for, upsert_status
from bot.spec import OpSpec, load_spec
from bot.verification import verify_candidate

if TYPE_CHECKING:
    from bot.agent.transcript import Redactor


class ScanContext(Protocol):
    forge: Forge
    workdir: Path
    settings: JobSettings

    def human_commits(self, op: str) -> list[str]: ...
    def generate(self, spec: OpSpec, backends: list[str], *, hint: str | None = None,
                 draft: str | None = None) -> GenerateOutcome: ...
    def publish(self, spec: OpSpec, outcome: GenerateOutcome) -> Published: ...


@dataclass(frozen=True)
class ScanRow:
    op: str
    status: str  # passed | failed | invalid | missing
    detail: str
    spec: OpSpec | None = None

    def to_json(self) -> dict[str, str]:
        return {"op": self.op, "status": self.status, "detail": self.detail}


def toolchain() -> str:
    versions = []
    for package in ("torch", "triton", "triton-ascend", "torch_npu"):
        try:
            versions.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            continue
    return ", ".join(versions)


def _verify_op(op_yaml: Path) -> ScanRow:
    name = op_yaml.parent.name
    try:
        spec = load_spec(op_yaml)
    except OpbotError as exc:
        return ScanRow(name, "invalid", str(exc))
    kernel = op_yaml.parent / "triton" / f"{spec.name}.py"
    if not kernel.is_file():
        return ScanRow(spec.name, "missing", f"no {kernel.relative_to(op_yaml.parent)}", spec)
    try:
        result = verify_candidate(op_yaml, kernel)
    except OpbotError as exc:
        return ScanRow(spec.name, "invalid", str(exc), spec)
    checks = sorted({reason.check for reason in result.reasons})
    return ScanRow(spec.name, result.status, ", ".join(checks) or result.device, spec)


def scan_checkout(root: Path, progress: Callable[[str], None] = lambda _m: None,
                  ) -> list[ScanRow]:
    """Every operator under `root`/ops, re-verified with this machine's toolchain."""
    rows = []
    for op_yaml in sorted(root.glob("ops/*/op.yaml")):
        progress(f"verifying {op_yaml.parent.name}")
        row = _verify_op(op_yaml)
        # Paths inside the checkout, not where this machine happened to clone it.
        rows.append(replace(row, detail=row.detail.replace(f"{root.resolve()}/", "")
                            .replace(f"{root}/", "")))
    return rows


def dashboard(rows: list[ScanRow], regenerated: dict[str, str]) -> str:
    lines = ["## opbot dashboard", "", f"Toolchain: {toolchain() or 'unknown'}.", "",
             "| operator | verdict | detail | action |", "|---|---|---|---|"]
    for row in rows:
        detail = row.detail.replace("|", "\\|").replace("\n", " ")[:200]
        lines.append(f"| {row.op} | {row.status} | {detail} | {regenerated.get(row.op, '')} |")
    return "\n".join(lines)


def run_scan(job: ScanContext, redactor: Redactor, dashboard_issue: int | None,
             nightly_limit: int) -> JobOutcome:
    workspace = GitWorkspace.clone(job.forge.push_url(), job.workdir / "scan", redactor,
                                   job.forge.git_credentials())
    rows = scan_checkout(workspace.path)
    regenerated: dict[str, str] = {}
    for row in [row for row in rows if row.status == "failed" and row.spec is not None]:
        if len(regenerated) >= nightly_limit:
            regenerated[row.op] = "over tonight's limit"
            continue
        if job.human_commits(row.op):
            regenerated[row.op] = f"left alone: a person pushed to {branch_for(row.op)}"
            continue
        assert row.spec is not None
        outcome = job.generate(row.spec, [DEFAULT_BACKEND])  # the kernel verified above
        if outcome.status == "passed":
            regenerated[row.op] = f"regenerated in #{job.publish(row.spec, outcome).number}"
        else:
            regenerated[row.op] = f"regeneration {outcome.status}"
    if dashboard_issue is not None:
        upsert_status(job.forge, Target("issue", dashboard_issue), dashboard(rows, regenerated),
                      job.settings.bot_login)
    failed = [row.op for row in rows if row.status != "passed"]
    summary = (f"{len(rows)} operator(s): {len(rows) - len(failed)} passed, "
               f"{len(failed)} not ({', '.join(failed) or '-'}); "
               f"{sum(1 for text in regenerated.values() if text.startswith('regenerated'))} "
               "regenerated")
    return JobOutcome(True, "scan", summary)
