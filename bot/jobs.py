"""Carrying out a plan on a forge: authorize, acknowledge, generate, publish, report.

Each action has one handler, and each handler gets the forge, the plan and the job's
settings, nothing more. Authorization comes first on every human trigger: the repository
must be allowed and the actor must hold write permission or above, read from the forge's
API (never the payload's author_association). A refusal is a polite comment, not a job.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from bot.agent.backends import get_backend, parse_backends
from bot.agent.outcome import GenerateOutcome
from bot.agent.report import case_table, timing_table
from bot.agent.transcript import Redactor
from bot.commands import REGEN_HELP, RegenCommand
from bot.errors import BadInputError, OpbotError
from bot.events import Plan
from bot.forge.base import Forge, ForgeError, Target, at_least
from bot.generation_step import generate_without_credentials
from bot.issue_form import FormError, spec_from_issue
from bot.job_settings import JobOutcome, JobSettings, SpendLedger
from bot.policy import (
    REPOSITORY_POLICY_PATH,
    Policy,
    PolicyError,
    default_policy,
    load_policy,
)
from bot.publish import (
    BOT_EMAIL,
    ChangeLimits,
    GitWorkspace,
    PublishError,
    branch_for,
    check_change,
    marker,
    publish_pull_request,
    trim,
    upsert_status,
)
from bot.spec import OpSpec, load_spec
from bot.text import fence_free

HUMAN_TRIGGERS = {"generate", "regen", "iterate-review"}


# -- authorization -------------------------------------------------------------------------


def authorize(plan: Plan, forge: Forge, settings: JobSettings) -> str | None:
    """Why the plan may not run (None: it may)."""
    policy = settings.policy
    if settings.allowed_repos is not None and plan.repo not in settings.allowed_repos:
        return f"the repository {plan.repo} is not on opbot's allowlist"
    if not policy.allows_repository(plan.repo):
        return f"the repository {plan.repo} is not on the policy's list of repositories"
    if plan.repo and policy.usd_per_day > 0 and (
            settings.ledger.spent_today(plan.repo) >= policy.usd_per_day):
        return f"today's budget for {plan.repo} (${policy.usd_per_day:g}) is spent"
    if plan.action not in HUMAN_TRIGGERS:
        return None
    if not plan.actor:
        return "the event names no actor"
    permission = forge.permission(plan.actor)
    if not at_least(permission, policy.min_permission):
        return (f"@{plan.actor} has {permission} permission here; opbot acts for people with "
                f"{policy.min_permission} permission or above")
    return None


def repository_policy(forge: Forge, log: Callable[[str], None]) -> Policy:
    """The policy of the repository's default branch (never a PR's), over the defaults."""
    try:
        text = forge.file_content(REPOSITORY_POLICY_PATH, forge.default_branch())
        return load_policy(text)
    except PolicyError as exc:
        log(f"ignoring the repository's policy, the defaults stand: {exc}")
        return default_policy()


# -- the work ------------------------------------------------------------------------------


@dataclass
class _Job:
    plan: Plan
    forge: Forge
    settings: JobSettings
    workdir: Path

    @property
    def target(self) -> Target:
        return Target(self.plan.target or "issue", self.plan.number or 0)

    def status(self, text: str, target: Target | None = None) -> None:
        upsert_status(self.forge, target or self.target, text, self.settings.bot_login)

    def acknowledge(self) -> None:
        """A reaction says the bot heard: on the command's comment, or on the issue."""
        comment = self.plan.comment_id if self.plan.target and self.plan.command else None
        # An acknowledgement is a courtesy; the status comment follows anyway.
        with contextlib.suppress(ForgeError):
            self.forge.add_reaction(self.target, comment, "eyes")

    def human_commits(self, op: str) -> list[str]:
        branch = branch_for(op)
        if self.forge.branch_head(branch) is None:
            return []
        commits = self.forge.commits_since(branch, self.forge.default_branch())
        return [commit.sha[:12] for commit in commits if commit.author_email != BOT_EMAIL]

    def spec_from_pull(self, op: str, ref: str) -> OpSpec:
        folder = self.workdir / "spec" / op
        folder.mkdir(parents=True)
        for name in ("op.yaml", "reference.py"):
            content = self.forge.file_content(f"ops/{op}/{name}", ref)
            if content is None:
                raise BadInputError(f"ops/{op}/{name} is missing on {ref}")
            (folder / name).write_text(content, encoding="utf-8")
        return load_spec(folder / "op.yaml")

    def generate(self, spec: OpSpec, backends: list[str], *, hint: str | None = None,
                 draft: str | None = None) -> GenerateOutcome:
        """Generation in its own process, which holds no forge credential (only the LLM's):
        the agent and what it runs can never reach the token that publishes."""
        outcome = generate_without_credentials(
            spec, backend=",".join(backends), out=self.workdir / "package" / spec.name,
            workdir=self.workdir, policy=self.settings.policy,
            llm=self.settings.llm_enabled, hint=hint, draft=draft)
        if self.plan.repo:
            self.settings.ledger.record(self.plan.repo,
                                        self.settings.policy.cost_usd(outcome.tokens.total))
        return outcome

    def publish(self, spec: OpSpec, outcome: GenerateOutcome) -> tuple[int, str, bool]:
        assert outcome.out is not None
        redactor = Redactor.from_environment()
        workspace = GitWorkspace.clone(self.forge.push_url(), self.workdir / "repo", redactor)
        base = self.forge.default_branch()
        branch = branch_for(spec.name)
        workspace.start_branch(branch, base)
        policy = self.settings.policy
        folder = policy.folder_for(spec.name)
        workspace.replace_folder(folder, outcome.out)
        for transcript in (workspace.path / folder).glob("transcript*.jsonl"):
            transcript.unlink()
        files = check_change(workspace.path, folder, limits=ChangeLimits(
            forbidden=policy.forbidden_paths, max_file_bytes=policy.max_file_bytes,
            max_change_bytes=policy.max_change_bytes))
        sha = workspace.commit(f"opbot: {spec.name} kernel ({outcome.attempts} attempt(s))",
                               files)
        head = sha or workspace.git("rev-parse", "HEAD")
        if sha is not None:
            workspace.push(branch)
        body = pull_request_body(spec, outcome, head_sha=head, issue=self.issue_number())
        pull, created = publish_pull_request(
            self.forge, branch=branch, base=base,
            title=f"opbot: {backend_titles(outcome)} kernel for {spec.name}", body=body)
        return pull.number, pull.url, created

    def issue_number(self) -> int | None:
        return self.plan.number if self.plan.target == "issue" else None


def backend_titles(outcome: GenerateOutcome) -> str:
    """"Ascend C" or "Ascend C and Triton": the verified backends of the request's choice
    (a title never names a kernel that did not pass)."""
    verified = [item.backend for item in outcome.backends if item.status == "passed"] \
        if outcome.backends else outcome.backend_names
    return " and ".join(get_backend(name).title for name in verified)


def _unverified_warning(outcome: GenerateOutcome) -> list[str]:
    """A loud line for each side-by-side backend that did not pass: its folder is a draft."""
    return [f"> **Warning: the {get_backend(item.backend).title} kernel is NOT verified** "
            f"({item.status}, {item.stopped_because}): its files in this pull request are a "
            "draft for a person or a runner to finish, not a verified kernel." for item in
            outcome.backends if item.status != "passed"]


def pull_request_body(spec: OpSpec, outcome: GenerateOutcome, *, head_sha: str,
                      issue: int | None) -> str:
    result = outcome.verification
    assert result is not None
    lines = [marker({"op": spec.name, "attempts": outcome.attempts,
                     "tokens": outcome.tokens.total, "head_sha": head_sha,
                     "status": outcome.status, "device": result.device,
                     "backend": outcome.backend})]
    lines += [f"## {spec.name}: {backend_titles(outcome)} kernel generated by opbot", ""]
    warnings = _unverified_warning(outcome)
    if warnings:
        lines += [*warnings, ""]
    if issue is not None:
        lines += [f"Requested in #{issue}.", ""]
    if spec.description:
        lines += [spec.description, ""]
    lines += [f"Verified **{result.status}** on {result.device} in {outcome.attempts} "
              f"attempt(s). Files: `ops/{spec.name}/`.", ""]
    if outcome.backends:
        lines += [f"Backends side by side (PERF.md compares them); recommended: "
                  f"**{outcome.recommended or 'none timed'}**.", ""]
        lines += [f"- {get_backend(item.backend).title}: **{item.status}** "
                  f"({item.stopped_because})" for item in outcome.backends]
        lines += [""]
    lines += ["### Verification", ""]
    lines += case_table(result.cases)
    if result.timing is not None:
        lines += ["", "### Performance", "", *timing_table(result.timing)]
    if outcome.notes:
        lines += ["", *[f"> {note}" for note in outcome.notes]]
    lines += ["", f"Comment `{REGEN_HELP.usage}` to regenerate; review comments and failed CI "
              "on this pull request become feedback for the next iteration."]
    return "\n".join(lines)


# -- handlers ------------------------------------------------------------------------------


def _finish(job: _Job, spec: OpSpec, outcome: GenerateOutcome, where: Target) -> JobOutcome:
    if outcome.status == "unsupported":
        job.status(f"Cannot generate `{spec.name}`: {outcome.message}", where)
        return JobOutcome(False, job.plan.action, outcome.message)
    if outcome.status != "passed":
        last = trim(outcome.message, 20_000)
        job.status(f"Gave up on `{spec.name}` after {outcome.attempts} attempt(s) "
                   f"({outcome.stopped_because}). Last error:\n\n```\n{fence_free(last)}\n```",
                   where)
        return JobOutcome(False, job.plan.action, f"no verified kernel for {spec.name}")
    try:
        number, url, created = job.publish(spec, outcome)
    except (PublishError, ForgeError) as exc:
        job.status(f"Generated `{spec.name}`, but publishing failed: {exc}", where)
        return JobOutcome(False, job.plan.action, str(exc))
    verb = "Opened" if created else "Updated"
    job.status(f"{verb} #{number} with a verified kernel for `{spec.name}` "
               f"({outcome.attempts} attempt(s)).", where)
    return JobOutcome(True, job.plan.action, f"{verb.lower()} pull request {number}",
                      pull_request=number, url=url)


def _stopped_by_a_person(job: _Job, op: str, command: RegenCommand | None,
                         where: Target) -> JobOutcome | None:
    if command is not None and command.force:
        return None
    humans = job.human_commits(op)
    if not humans:
        return None
    job.status(f"A person pushed to `{branch_for(op)}` ({', '.join(humans)}): opbot stops "
               "touching it. Comment `/regen --force` to let it overwrite those commits.", where)
    return JobOutcome(True, job.plan.action, "stopped: a person pushed to the bot's branch")


def handle_generate(job: _Job) -> JobOutcome:
    issue = job.forge.get_issue(job.plan.number or 0)
    try:
        spec = spec_from_issue(issue.body, job.workdir / "request")
    except FormError as exc:
        job.status(f"This op request cannot be read:\n\n{exc}")
        return JobOutcome(False, job.plan.action, "the op request is malformed")
    stopped = _stopped_by_a_person(job, spec.name, job.plan.command, job.target)
    if stopped is not None:
        return stopped
    backends = backends_for(job.plan.command, spec)
    job.status(f"Generating `{spec.name}` ({', '.join(backends)})...")
    hint = job.plan.command.hint if job.plan.command else None
    return _finish(job, spec, job.generate(spec, backends, hint=hint), job.target)


def backends_for(command: RegenCommand | None, spec: OpSpec) -> list[str]:
    """The backends a `/regen --backend` names, else those the request chose."""
    if command is not None and command.backend:
        return parse_backends(command.backend)
    return parse_backends(",".join(spec.targets))


def handle_regen(job: _Job) -> JobOutcome:
    command = job.plan.command or RegenCommand()
    if command.problem:
        job.status(f"`/regen` was not understood: {command.problem}")
        return JobOutcome(False, job.plan.action, command.problem)
    if job.plan.target == "issue":
        return handle_generate(job)
    pull = job.forge.get_pull_request(job.plan.number or 0)
    op = job.plan.op or (pull.head_branch.removeprefix("opbot/")
                         if pull.head_branch.startswith("opbot/") else None)
    if op is None:
        job.status("`/regen` works on opbot's own pull requests (branch `opbot/<op>`).")
        return JobOutcome(False, job.plan.action, "not a bot pull request")
    stopped = _stopped_by_a_person(job, op, command, job.target)
    if stopped is not None:
        return stopped
    spec = job.spec_from_pull(op, pull.head_sha)
    job.status(f"Regenerating `{op}`...")
    outcome = job.generate(spec, backends_for(command, spec), hint=command.hint)
    return _finish(job, spec, outcome, job.target)


def _iterate(job: _Job, feedback: str, what: str) -> JobOutcome:
    pull = job.forge.get_pull_request(job.plan.number or 0)
    op = job.plan.op or pull.head_branch.removeprefix("opbot/")
    stopped = _stopped_by_a_person(job, op, None, job.target)
    if stopped is not None:
        return stopped
    spec = job.spec_from_pull(op, pull.head_sha)
    backends = backends_for(None, spec)
    # One starting draft fits one backend; side by side each starts from its template.
    kernel = _kernel_under_review(job, op, backends[0], pull.head_sha) \
        if len(backends) == 1 else None
    if not job.settings.llm_enabled:
        job.status(f"Iterating on {what} needs an LLM: configure OPBOT_LLM_BASE_URL, "
                   "OPBOT_LLM_MODEL and OPBOT_LLM_API_KEY for opbot.")
        return JobOutcome(False, job.plan.action, "no LLM configured")
    job.status(f"Working on {what} for `{op}`...")
    return _finish(job, spec, job.generate(spec, backends, hint=feedback, draft=kernel),
                   job.target)


def _kernel_under_review(job: _Job, op: str, backend: str, ref: str) -> str | None:
    for path in get_backend(backend).kernel_paths(op):
        content = job.forge.file_content(f"ops/{op}/{path}", ref)
        if content is not None:
            return content
    return None


def handle_review(job: _Job) -> JobOutcome:
    threads = [thread for thread in job.forge.review_threads(job.plan.number or 0)
               if not thread.resolved]
    notes = []
    for thread in threads:
        where = f"{thread.path}:{thread.line}" if thread.path else "the pull request"
        said = "\n".join(f"- {comment.author}: {comment.body}" for comment in thread.comments)
        notes.append(f"On {where}:\n{said}")
    asked = notes or ["(a review without inline comments: see the review's summary)"]
    feedback = "Reviewers asked for these changes:\n\n" + "\n\n".join(asked)
    outcome = _iterate(job, feedback, "the review comments")
    if outcome.ok:
        for thread in threads:
            job.forge.reply_to_thread(job.plan.number or 0, thread.id,
                                      f"opbot pushed a new version addressing this "
                                      f"({outcome.summary}).")
    return outcome


_FAILURE_LINE = re.compile(r"error|fail|traceback|assert|exception|fatal", re.IGNORECASE)


def failing_part(log: str, limit: int = 6000) -> str:
    """The part of a CI log around its first failure (else its end), within `limit`."""
    lines = log.splitlines()
    first = next((index for index, line in enumerate(lines) if _FAILURE_LINE.search(line)), None)
    if first is None:
        return log[-limit:]
    excerpt = "\n".join(lines[max(0, first - 20):first + 120])
    return trim(excerpt, limit)


def handle_ci(job: _Job) -> JobOutcome:
    failures = job.forge.failed_jobs(job.plan.head_sha or "")
    logs = "\n\n".join(f"Job {failure.name} failed:\n{failing_part(failure.log)}"
                       for failure in failures) or "(no failed job log was found)"
    return _iterate(job, f"The pull request's CI failed.\n\n{logs}", "the failed CI")


def handle_scan(job: _Job) -> JobOutcome:
    from bot.scan import run_scan

    return run_scan(job, Redactor.from_environment(), job.settings.dashboard_issue,
                    job.settings.policy.nightly_pull_requests)


HANDLERS: dict[str, Callable[[_Job], JobOutcome]] = {
    "generate": handle_generate,
    "regen": handle_regen,
    "iterate-review": handle_review,
    "iterate-ci": handle_ci,
    "scan": handle_scan,
}


def run_plan(plan: Plan, forge: Forge, settings: JobSettings) -> JobOutcome:
    if plan.action == "ignore":
        return JobOutcome(True, "ignore", plan.reason)
    settings = replace(settings, policy=repository_policy(forge, settings.log))
    refusal = authorize(plan, forge, settings)
    if refusal is not None:
        if plan.number is not None and plan.action in HUMAN_TRIGGERS:
            upsert_status(forge, Target(plan.target or "issue", plan.number),
                          f"Thanks for the request, but opbot will not act on it: {refusal}.",
                          settings.bot_login)
        return JobOutcome(True, plan.action, f"refused: {refusal}")
    with tempfile.TemporaryDirectory(prefix="opbot-job-") as tmp:
        job = _Job(plan=plan, forge=forge, settings=settings, workdir=Path(tmp))
        job.acknowledge()
        try:
            return HANDLERS[plan.action](job)
        except (OpbotError, ForgeError) as exc:
            if plan.number is not None:
                job.status(f"opbot could not finish: {exc}")
            return JobOutcome(False, plan.action, str(exc))


def forge_from_environment(plan: Plan, environ: Mapping[str, str] | None = None) -> Forge:
    """The plan's forge and repository, with the token and URL the environment names;
    without retries, so each caller picks its own policy."""
    from bot.forge.registry import connect_from_environment

    env = os.environ if environ is None else environ
    if plan.repo is None:
        raise BadInputError("the event names no repository")
    return connect_from_environment(plan.forge, plan.repo, env)


def run_plan_from_environment(plan: Plan, environ: Mapping[str, str] | None = None,
                              ledger: SpendLedger | None = None) -> JobOutcome:
    from bot.forge.retrying import RetryingForge

    env = os.environ if environ is None else environ
    forge = RetryingForge(forge_from_environment(plan, env))
    return run_plan(plan, forge, JobSettings.from_environment(env, ledger))
