"""The nightly job on a forge: scan the default branch, regenerate what broke, keep the
dashboard.

Etiquette, as a maintainer would expect of a bot: one pull request per operator on
`opbot/<op>`; an operator whose pull request is open for tonight's toolchain is left alone
(an older toolchain's is updated in place, never a second one); a pull request a maintainer
closed is not reopened for the same toolchain (the dashboard shows it declined, with a box
to tick for a retry); a branch a person pushed to is theirs; at most the policy's number of
pull requests a night. One operator's failure (its generation, its publication, the forge
answering 5xx) is written on the dashboard and the scan goes on. The dashboard is created
once where there is none and edited in place, and not at all when nothing changed.
"""

from __future__ import annotations

import datetime
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from bot.errors import OpbotError
from bot.forge.base import Comment, Forge, ForgeError, NotFoundError, PullRequest, Target
from bot.generation_step import GenerationCancelled
from bot.job_settings import JobOutcome, JobSettings
from bot.publish import (
    GitWorkspace,
    Published,
    branch_for,
    read_marker,
    status_comment,
    upsert_status,
)
from bot.scan import local_actions, scan_checkout
from bot.scan.checks import ScanRow, Verify, slower_than_recorded
from bot.scan.dashboard import TITLE, Outcome, render, ticked
from bot.scan.state import PullRecord, ScanState, Verdict, plain_url
from bot.scan.toolchain import ToolchainRecord, record_toolchain

if TYPE_CHECKING:
    from bot.agent.outcome import GenerateOutcome
    from bot.agent.transcript import Redactor
    from bot.spec import OpSpec

SCAN_TOOLCHAIN = "scan_toolchain"  # the marker field naming the toolchain a PR is for
_DASHBOARD_BODY = ("opbot's nightly scan keeps its dashboard in the comment below: each "
                   "operator's verdict under each toolchain, and a box to tick for a "
                   "regeneration.")


class ScanContext(Protocol):
    forge: Forge
    workdir: Path
    settings: JobSettings

    def human_commits(self, op: str) -> list[str]: ...
    def generate(self, spec: OpSpec, backends: list[str], *, hint: str | None = None,
                 draft: str | None = None) -> GenerateOutcome: ...
    def publish(self, spec: OpSpec, outcome: GenerateOutcome, *, preface: str | None = None,
                marked: Mapping[str, Any] | None = None) -> Published: ...


def _today() -> str:
    return datetime.datetime.now(datetime.timezone.utc).date().isoformat()


@dataclass(frozen=True)
class NightlyOptions:
    dashboard_issue: int | None = None  # OPBOT_DASHBOARD_ISSUE; else found or created
    verify: Verify | None = None  # the backends' own runners by default
    record: Callable[[], ToolchainRecord] = record_toolchain
    today: Callable[[], str] = _today


@dataclass(frozen=True)
class OperatorPlan:
    op: str
    action: str  # none | regenerate | update-pr | skip
    reason: str = ""
    backends: tuple[str, ...] = ()
    spec: OpSpec | None = None


@dataclass
class _Dashboard:
    """The dashboard issue's bot comment: read once at the start, written once at the end."""

    forge: Forge
    bot_login: str | None
    number: int | None
    comment: Comment | None = None
    state: ScanState = field(default_factory=ScanState)
    ticked: set[str] = field(default_factory=set)

    @classmethod
    def open(cls, forge: Forge, bot_login: str | None, number: int | None) -> _Dashboard:
        if number is None and bot_login:
            found = forge.find_issue(TITLE, bot_login)
            number = found.number if found is not None else None
        board = cls(forge, bot_login, number)
        if number is not None:
            board.comment = status_comment(forge, Target("issue", number), bot_login)
        if board.comment is not None:
            board.state = ScanState.from_comment(board.comment.body)
            board.ticked = ticked(board.comment.body)
        return board

    def write(self, text: str) -> str:
        """Where the dashboard is now ("#12"), or why it could not be written."""
        if self.number is None:
            if not self.bot_login:  # it could never find its own again: one a night
                return "not written: the bot's login is unknown (set OPBOT_BOT_LOGIN)"
            self.number = self.forge.create_issue(TITLE, _DASHBOARD_BODY).number
        upsert_status(self.forge, Target("issue", self.number), text, self.bot_login,
                      found=self.comment)
        return f"#{self.number}"


def run_scan(job: ScanContext, redactor: Redactor, options: NightlyOptions) -> JobOutcome:
    workspace = GitWorkspace.clone(job.forge.push_url(), job.workdir / "scan", redactor,
                                   job.forge.git_credentials())
    toolchain, date = options.record(), options.today()
    board = _Dashboard.open(job.forge, job.settings.bot_login, options.dashboard_issue)
    state = board.state
    state.arrive(toolchain, date)
    changes = state.changes
    policy = job.settings.policy
    rows = [slower_than_recorded(row, state.recorded_ms(row.key), policy.nightly_slowdown)
            for row in local_actions(scan_checkout(workspace.path, verify=options.verify,
                                                   parallel=policy.nightly_parallel))]
    night = _Night(job, workspace.path, state, toolchain, board.ticked)
    plans = night.plan_operators(rows, policy.nightly_pull_requests)
    rows = [_with_plan(row, plans[row.op]) for row in rows]
    outcomes = {plan.op: night.regenerate(plan, rows) for plan in plans.values()
                if plan.action in ("regenerate", "update-pr")}
    key = toolchain.key()
    for row in rows:
        previous = state.under(row.key, key)
        # The same verdict keeps the words and the day it was first reached (each run draws
        # fresh inputs, so error sizes vary): a rerun on the same toolchain, that night or
        # the next, writes the same dashboard, and the forge sees no edit.
        if previous is not None and (previous.status, previous.breakage) == (row.status,
                                                                           row.breakage):
            # The first figure stays the baseline a regression is measured against.
            state.record(row.key, key, replace(previous, kernel_ms=previous.kernel_ms
                                               or row.kernel_ms))
        else:
            # A regression does not become the new baseline: it stays one until fixed.
            kept = state.recorded_ms(row.key) if row.breakage == "performance" \
                else row.kernel_ms
            state.record(row.key, key, Verdict(row.status, row.reason[:300], row.breakage,
                                               date, kept))
    # Only a broken operator needs its pull request remembered (a decline is kept on the
    # forge too): the state stays small however many pull requests were ever opened.
    state.prune({row.op for row in rows},
                keep_pulls={row.op for row in rows if row.status != "passed"})
    # A box ticked for an operator the scan did not publish tonight stays ticked.
    waiting = {op for op in board.ticked if op in plans and plans[op].action != "none"
               and (op not in outcomes or outcomes[op].pull is None)}
    try:
        where = board.write(render(rows, state, outcomes, ticked=waiting))
    except ForgeError as exc:
        where = f"not written: {exc}"
    return JobOutcome(True, "scan", _summary(rows, outcomes, where), report={
        "toolchain": toolchain.to_json(), "changes": changes,
        "ops": [row.to_json() for row in rows]})


def _scan_toolchain(pull: PullRequest) -> str | None:
    """The toolchain the scan opened `pull` for, from its body's marker."""
    value = (read_marker(pull.body) or {}).get(SCAN_TOOLCHAIN)
    return value if isinstance(value, str) else None


def _with_plan(row: ScanRow, plan: OperatorPlan) -> ScanRow:
    if row.backend not in plan.backends:
        return row
    return replace(row, action=plan.action, note=plan.reason)


@dataclass
class _Night:
    """Tonight's scan on the forge: what it knows, and the decisions it takes with it."""

    job: ScanContext
    checkout: Path
    state: ScanState
    toolchain: ToolchainRecord
    forced: set[str]  # operators whose box on the dashboard is ticked

    def plan_operators(self, rows: Sequence[ScanRow], cap: int) -> dict[str, OperatorPlan]:
        """What to do for each operator, in order; the cap counts pull requests planned."""
        plans: dict[str, OperatorPlan] = {}
        planned = 0
        for op in dict.fromkeys(row.op for row in rows):
            mine = [row for row in rows if row.op == op and row.spec is not None]
            broken = [row for row in mine if row.status == "failed"]
            if not broken and not (op in self.forced and mine):
                plans[op] = OperatorPlan(op, "none")
                continue
            backends = tuple(row.backend for row in (broken or mine))
            try:
                plan = self._plan_one(op, backends)
            except ForgeError as exc:
                plan = OperatorPlan(op, "skip", f"the forge did not answer: {exc}", backends)
            if plan.action in ("regenerate", "update-pr"):
                if planned >= cap:
                    plan = replace(plan, action="skip",
                                   reason=f"over tonight's limit of {cap} pull request(s)")
                else:
                    planned += 1
            plans[op] = replace(plan, spec=mine[0].spec)
        return plans

    def _plan_one(self, op: str, backends: tuple[str, ...]) -> OperatorPlan:
        forge, forced, key = self.job.forge, op in self.forced, self.toolchain.key()
        pull = self._recorded_pull(op)  # first: it also refreshes the record's link
        people = self.job.human_commits(op)
        if people:
            return OperatorPlan(op, "skip", f"left alone: a person pushed to "
                                f"{branch_for(op)} ({', '.join(people[:3])})", backends)
        open_pull = pull if pull is not None and pull.state == "open" else \
            forge.find_pull_request(branch_for(op))
        if not forced:
            if open_pull is not None and self._proposed_for(op, open_pull) == key:
                return OperatorPlan(op, "skip", f"#{open_pull.number} already proposes the "
                                    "fix for this toolchain", backends)
            declined = self._declined(op, pull)
            if declined is not None:
                return OperatorPlan(op, "skip", f"declined: #{declined.number} was closed "
                                    "without merging for this toolchain; tick its box on the "
                                    "dashboard to try again", backends)
        if open_pull is not None:
            return OperatorPlan(op, "update-pr", f"updating #{open_pull.number}", backends)
        return OperatorPlan(op, "regenerate", "ticked on the dashboard" if forced else "",
                            backends)

    def _recorded_pull(self, op: str) -> PullRequest | None:
        """The pull request the state names for `op`, when it is the bot's own from
        `opbot/<op>` (the state lives in a comment people can edit); else the record goes."""
        record = self.state.pulls.get(op)
        if record is None:
            return None
        try:
            pull = self.job.forge.get_pull_request(record.number)
        except NotFoundError:
            pull = None
        if pull is None or pull.head_branch != branch_for(op) or pull.from_fork:
            del self.state.pulls[op]
            return None
        # The link the dashboard shows is the forge's, never what the comment said.
        self.state.pulls[op] = replace(record, url=pull.url if plain_url(pull.url) else "")
        return pull

    def _proposed_for(self, op: str, pull: PullRequest) -> str | None:
        """The toolchain an open pull request was opened or last updated for."""
        record = self.state.pulls.get(op)
        if record is not None and record.number == pull.number:
            return record.toolchain
        return _scan_toolchain(pull)

    def _declined(self, op: str, recorded: PullRequest | None) -> PullRequest | None:
        """A pull request for tonight's toolchain that a maintainer closed unmerged: the
        state's record, else (a state lost or reset) the forge's closed pull requests."""
        key = self.toolchain.key()
        record = self.state.pulls.get(op)
        if recorded is not None and record is not None and recorded.state == "closed" \
                and record.toolchain == key:
            return recorded
        bot = self.job.settings.bot_login
        if not bot:  # anyone's closed pull request would do: none is trusted
            return None
        # The state remembers one pull request an operator; a decline for this toolchain
        # may be an older one (the toolchain came back), or the state may be lost.
        for pull in self.job.forge.closed_pull_requests(branch_for(op))[:20]:
            if pull.state == "closed" and not pull.from_fork and pull.author == bot \
                    and _scan_toolchain(pull) == key:
                return pull
        return None

    def regenerate(self, plan: OperatorPlan, rows: Sequence[ScanRow]) -> Outcome:
        """One operator regenerated and published; any failure is its outcome, never the
        scan's end."""
        assert plan.spec is not None
        broken = [row for row in rows if row.op == plan.op and row.backend in plan.backends]
        try:
            outcome = self.job.generate(plan.spec, list(plan.backends),
                                        hint=migration_hint(broken, self.state, self.toolchain))
            if outcome.status != "passed" or outcome.out is None:
                first = (outcome.message or "").strip().splitlines()[:1]
                return Outcome(f"regeneration {outcome.status}"
                               + (f": {first[0]}" if first else ""))
            _keep_other_backends(self.checkout / "ops" / plan.op, outcome.out, plan.backends)
            published = self.job.publish(plan.spec, outcome, preface=migration_section(
                broken, self.state, self.toolchain, outcome),
                marked={SCAN_TOOLCHAIN: self.toolchain.key()})
        except GenerationCancelled:
            raise
        except (OpbotError, ForgeError, OSError) as exc:
            return Outcome(self._public(f"failed: {exc}"))
        except Exception as exc:  # noqa: BLE001 - one operator's crash must not end the scan
            return Outcome(self._public(f"failed: {type(exc).__name__}: {exc}"))
        self.state.pulls[plan.op] = PullRecord(published.number, self.toolchain.key(),
                                               published.url)
        verb = "opened" if published.created else "updated"
        return Outcome(f"{verb} #{published.number}", published.number)


    def _public(self, text: str) -> str:
        """An error for the dashboard: without this machine's folders."""
        return text.replace(str(self.job.workdir), "<job folder>")[:300]


def _keep_other_backends(op_folder: Path, out: Path, regenerated: Sequence[str]) -> None:
    """The published folder replaces the operator's: backends not regenerated keep their
    files from the default branch."""
    from bot.agent.backends import backend_names

    for name in backend_names():
        source = op_folder / name
        if name not in regenerated and source.is_dir() and not (out / name).exists():
            shutil.copytree(source, out / name, symlinks=True)


def _before(row: ScanRow, state: ScanState, toolchain: str) -> str:
    found = state.last_passed(row.key, except_toolchain=toolchain)
    if found is None:
        return "no earlier passing verdict recorded"
    return f"passed on {found[0]} ({found[1].date})"


def migration_hint(broken: Sequence[ScanRow], state: ScanState,
                   toolchain: ToolchainRecord) -> str:
    """Feedback for the agent: what the kernel was built with, what it fails on now."""
    key = toolchain.key()
    lines = ["The nightly scan re-verified this operator with the runner's toolchain and "
             "it no longer passes."]
    for row in broken:
        lines.append(f"- {row.backend}: {_before(row, state, key)}; fails on {key}: "
                     f"{row.reason}")
    lines.append("Write it for the current toolchain (its own generation's templates and "
                 "API), keeping the operator's contract.")
    return "\n".join(lines)


def migration_section(broken: Sequence[ScanRow], state: ScanState, toolchain: ToolchainRecord,
                      outcome: GenerateOutcome) -> str:
    """The pull request's account of why it exists: the change, before and after."""
    key = toolchain.key()
    result = outcome.verification
    now = f"{outcome.status} on {result.device}" if result is not None else outcome.status
    lines = ["### Why: the nightly scan found this operator broken", "",
             f"Toolchain change: {'; '.join(state.changes) or 'none recorded'} "
             f"(first scanned {state.since}).",
             "", "| backend | before | after, on the default branch | this pull request |",
             "|---|---|---|---|"]
    for row in broken:
        reason = row.reason.replace("|", "\\|").replace("\n", " ")[:300]
        lines.append(f"| {row.backend} | {_before(row, state, key)} | {row.status} on "
                     f"{key}: {reason} | {now} |")
    return "\n".join(lines)


def _summary(rows: Sequence[ScanRow], outcomes: dict[str, Outcome], where: str) -> str:
    ops = list(dict.fromkeys(row.op for row in rows))
    bad = [f"{row.op}/{row.backend}" for row in rows if row.status != "passed"]
    published = sum(1 for item in outcomes.values() if item.pull is not None)
    return (f"{len(ops)} operator(s), {len(rows)} verdict(s): {len(rows) - len(bad)} passed, "
            f"{len(bad)} not ({', '.join(bad) or '-'}); {published} pull request(s) opened "
            f"or updated; dashboard {where}")
