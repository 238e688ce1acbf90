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
from typing import Any

from bot.agent.backends import get_backend, parse_backends
from bot.agent.outcome import GenerateOutcome
from bot.agent.report import case_table, timing_table
from bot.agent.transcript import Redactor
from bot.commands import COMMANDS, REGEN_HELP, CommandHelp, RegenCommand
from bot.errors import BadInputError, OpbotError
from bot.events import Plan, job_key
from bot.forge.base import (
    Comment,
    Forge,
    ForgeError,
    ProgressState,
    PullRequest,
    ReviewThread,
    Target,
    at_least,
)
from bot.forge.inbound import has_trigger, op_of_branch
from bot.generation_step import GenerationCancelled, generate_without_credentials
from bot.identity import BOT_LOGIN_VARIABLE, Identities
from bot.issue_form import FormError, op_name_from_body, spec_from_issue
from bot.job_settings import JobControl, JobOutcome, JobSettings, NoJobControl, SpendLedger
from bot.perf.untrusted import md_cell
from bot.policy import REPOSITORY_POLICY_PATH, Policy, PolicyError, repository_policy
from bot.publish import (
    BOT_EMAIL,
    ChangeLimits,
    GitWorkspace,
    Published,
    PublishError,
    answer_refusal,
    branch_for,
    check_change,
    marker,
    publish_pull_request,
    read_marker,
    trim,
    upsert_status,
    with_marker,
)
from bot.spec import OpSpec, load_spec
from bot.text import fence_free, quoted

HUMAN_TRIGGERS = {"generate", "regen", "iterate-review", "cancel"}


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
    if plan.action not in HUMAN_TRIGGERS | {"help"}:
        return None  # CI events and the schedule: the forge started them, not a person
    if not plan.actor:
        return "the event names no actor"
    permission = forge.permission(plan.actor)
    if not at_least(permission, policy.min_permission):
        return (f"@{plan.actor} has {permission} permission here; opbot acts for people with "
                f"{policy.min_permission} permission or above")
    return None


def command_comment(plan: Plan) -> int | None:
    """The comment that carried a command (`/regen`, `/cancel`, `/help`), to react to."""
    return plan.comment_id if plan.action in {"regen", "cancel", "help"} else None


def refusal_text(refusal: str) -> str:
    """The answer to a refused request, as the job says it (and a dispatching server, which
    checks first, says it in the same words)."""
    return f"Thanks for the request, but opbot will not act on it: {refusal}."


@dataclass(frozen=True)
class PolicyInForce:
    policy: Policy
    # What to tell the repository: its .opbot.yaml is invalid (with the line), or it tried
    # to loosen the operator's ceiling. Empty: nothing to say.
    notes: tuple[str, ...] = ()


def policy_in_force(forge: Forge, ceiling: Policy) -> PolicyInForce:
    """The operator's policy (the ceiling), tightened by the repository's .opbot.yaml on its
    default branch (never a PR's, which could otherwise loosen its own rules). An invalid
    file leaves the ceiling in force and says why."""
    text = forge.file_content(REPOSITORY_POLICY_PATH, forge.default_branch())
    try:
        found = repository_policy(ceiling, text)
    except PolicyError as exc:
        return PolicyInForce(ceiling, (f"The repository's `{REPOSITORY_POLICY_PATH}` is not "
                                       f"valid, so the operator's policy applies: {exc}",))
    refused = tuple(f"`{REPOSITORY_POLICY_PATH}` may only tighten the operator's policy: "
                    f"{note}" for note in found.refused)
    return PolicyInForce(found.policy, refused)


@dataclass(frozen=True)
class Authorization:
    """What every place that decides whether a plan may run asks first (the job, the gate
    before a runner is taken, the server before it dispatches): one answer for all."""

    policy: Policy  # in force: the ceiling tightened by the repository's .opbot.yaml
    notes: tuple[str, ...]  # what to tell the repository about its .opbot.yaml
    refusal: str | None  # why the plan may not run (None: it may)


def authorization(plan: Plan, forge: Forge, settings: JobSettings) -> Authorization:
    """The policy in force for the plan's repository, and whether the plan may run under it
    (`settings.policy` is the operator's ceiling). Reads the forge, never writes to it."""
    in_force = policy_in_force(forge, settings.policy)
    refusal = authorize(plan, forge, replace(settings, policy=in_force.policy))
    return Authorization(in_force.policy, in_force.notes, refusal)


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

    def progress(self, sha: str | None, state: ProgressState, summary: str) -> None:
        """The run's state on the PR's head commit (a check run / commit status): a
        courtesy, never a reason to fail the job."""
        if sha:
            with contextlib.suppress(ForgeError):
                self.forge.report_progress(sha, state, summary, run_url())

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
                 draft: str | None = None, head_sha: str | None = None) -> GenerateOutcome:
        """Generation in its own process, which holds no forge credential (only the LLM's):
        the agent and what it runs can never reach the token that publishes. Each step
        shows on the pull request's head (`head_sha`), where there is one."""
        outcome = generate_without_credentials(
            spec, backend=",".join(backends), out=self.workdir / "package" / spec.name,
            workdir=self.workdir, policy=self.settings.policy,
            llm=self.settings.llm_enabled, hint=hint, draft=draft,
            stopped=self.settings.stopped,
            progress=lambda line: self.progress(head_sha, "running", line))
        if self.plan.repo:
            self.settings.ledger.record(self.plan.repo,
                                        self.settings.policy.cost_usd(outcome.tokens.total))
        return outcome

    def publish(self, spec: OpSpec, outcome: GenerateOutcome, *, from_base: bool = False,
                ci_fixes: int = 0, preface: str | None = None,
                marked: Mapping[str, Any] | None = None) -> Published:
        """The package on `opbot/<op>` and its pull request; `preface` opens the body
        (the nightly scan's account of what broke), `marked` joins its marker."""
        assert outcome.out is not None
        redactor = Redactor.from_environment()
        # A folder of its own: the nightly scan publishes several operators in one job.
        clone = Path(tempfile.mkdtemp(prefix="repo-", dir=self.workdir))
        workspace = GitWorkspace.clone(self.forge.push_url(), clone / "repo", redactor,
                                       self.forge.git_credentials())
        base = self.forge.default_branch()
        branch = branch_for(spec.name)
        workspace.start_branch(branch, base, from_base=from_base)
        started = workspace.git("rev-parse", "HEAD")
        policy = self.settings.policy
        folder = policy.folder_for(spec.name)
        workspace.replace_folder(folder, outcome.out)
        for transcript in (workspace.path / folder).glob("transcript*.jsonl"):
            transcript.unlink()
        check_change(workspace.path, folder, limits=ChangeLimits(
            forbidden=policy.forbidden_paths, max_file_bytes=policy.max_file_bytes,
            max_change_bytes=policy.max_change_bytes))
        sha = workspace.commit(f"opbot: {spec.name} kernel ({outcome.attempts} attempt(s))",
                               folder)
        head = workspace.git("rev-parse", "HEAD")
        if sha is not None or (from_base and head != workspace.based_on):
            workspace.push(branch)
        body = pull_request_body(spec, outcome, head_sha=head, issue=self.issue_number(),
                                 ci_fixes=ci_fixes, policy=policy, preface=preface,
                                 marked=marked)
        pull, created = publish_pull_request(
            self.forge, branch=branch, base=base,
            title=f"opbot: {backend_titles(outcome)} kernel for {spec.name}", body=body)
        changed = tuple(workspace.changed_since(started)) if sha is not None else ()
        if created:
            self.attach_transcripts(pull.number, outcome)
        return Published(pull.number, pull.url, created, head, changed)

    def attach_transcripts(self, number: int, outcome: GenerateOutcome) -> None:
        """The generation's transcript, as a collapsed comment on a new pull request (the
        package itself stays free of it)."""
        text = transcript_text(outcome)
        if text:
            with contextlib.suppress(ForgeError):
                self.forge.create_comment(Target("pull", number), text)

    def issue_number(self) -> int | None:
        return self.plan.number if self.plan.target == "issue" else None


def run_url(environ: Mapping[str, str] | None = None) -> str | None:
    """The CI run this job is part of (GitHub Actions, GitLab CI); None for a server job."""
    env = os.environ if environ is None else environ
    if env.get("GITHUB_RUN_ID") and env.get("GITHUB_REPOSITORY"):
        server = env.get("GITHUB_SERVER_URL", "https://github.com")
        return f"{server}/{env['GITHUB_REPOSITORY']}/actions/runs/{env['GITHUB_RUN_ID']}"
    return env.get("CI_JOB_URL") or None


def transcript_text(outcome: GenerateOutcome, limit: int = 50_000) -> str | None:
    paths = [item.transcript for item in outcome.backends] if outcome.backends \
        else [outcome.transcript]
    parts = []
    for path in paths:
        if path is not None and path.is_file():
            parts.append(f"`{path.name}`\n\n```jsonl\n"
                         f"{fence_free(trim(path.read_text(encoding='utf-8'), limit))}\n```")
    if not parts:
        return None
    return ("<details><summary>opbot: the generation's transcript (prompts, replies, "
            "verdicts)</summary>\n\n" + "\n\n".join(parts) + "\n\n</details>")


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


def _model_line(outcome: GenerateOutcome, policy: Policy | None) -> str:
    model = os.environ.get("OPBOT_LLM_MODEL") if outcome.tokens.total else None
    spent = f"{outcome.tokens.total} tokens"
    if policy is not None and outcome.tokens.total:
        spent += f" (about ${policy.cost_usd(outcome.tokens.total):.2f})"
    return (f"Model: {quoted(model)}, {spent}." if model
            else f"Model: none (the offline generator), {spent}.")


def pull_request_body(spec: OpSpec, outcome: GenerateOutcome, *, head_sha: str,
                      issue: int | None, ci_fixes: int = 0, policy: Policy | None = None,
                      preface: str | None = None, marked: Mapping[str, Any] | None = None,
                      ) -> str:
    result = outcome.verification
    assert result is not None
    lines = [marker({**(marked or {}), "op": spec.name, "attempts": outcome.attempts,
                     "tokens": outcome.tokens.total, "head_sha": head_sha,
                     "status": outcome.status, "device": result.device,
                     "backend": outcome.backend, "ci_fixes": ci_fixes})]
    lines += [f"## {spec.name}: {backend_titles(outcome)} kernel generated by opbot", ""]
    warnings = _unverified_warning(outcome)
    if warnings:
        lines += [*warnings, ""]
    if preface:
        lines += [preface, ""]
    if issue is not None:
        lines += [f"Closes #{issue}.", ""]
    if spec.description:
        lines += [spec.description, ""]
    # The device is the worker's word (no length cap): one inert line, never raw markdown.
    device = md_cell(result.device)
    lines += [f"Verified **{result.status}** on {device} in {outcome.attempts} "
              f"attempt(s). Files: `ops/{spec.name}/`.", ""]
    lines += [f"Backend: {', '.join(outcome.backend_names)}. Toolchain: {device}. "
              f"{_model_line(outcome, policy)}"]
    link = run_url()
    if link:
        lines += [f"Run: {link}"]
    lines += ["", "Reproduce the verdict:", "", "```sh",
              *[f"opbot verify ops/{spec.name}/reference.py {_kernel_file(spec.name, name)} "
                f"--backend {name}" for name in outcome.backend_names], "```", ""]
    if outcome.backends:
        lines += [f"Backends side by side (PERF.md compares them); recommended: "
                  f"**{outcome.recommended or 'none timed'}**.", ""]
        lines += [f"- {get_backend(item.backend).title}: **{item.status}** "
                  f"({md_cell(item.stopped_because, 300)})" for item in outcome.backends]
        lines += [""]
    lines += ["### Verification", ""]
    lines += case_table(result.cases)
    if result.timing is not None:
        peaks = policy.perf.peak_overrides() if policy is not None else None
        lines += ["", "### Performance", "", *timing_table(result.timing, peaks)]
    if outcome.notes:
        lines += ["", *[f"> {md_cell(note, 500)}" for note in outcome.notes]]
    lines += ["", f"Comment `{REGEN_HELP.usage}` to regenerate (`/help` lists every command); "
              "review comments and failed CI on this pull request become feedback for the "
              "next iteration."]
    return "\n".join(lines)


def _kernel_file(op: str, backend: str) -> str:
    paths = get_backend(backend).kernel_paths(op)
    return f"ops/{op}/{paths[0]}" if paths else f"ops/{op}/"


# -- handlers ------------------------------------------------------------------------------


def _finish(job: _Job, spec: OpSpec, outcome: GenerateOutcome, where: Target, *,
            from_base: bool = False, ci_fixes: int = 0) -> tuple[JobOutcome, Published | None]:
    if outcome.status == "unsupported":
        job.status(f"Cannot generate `{spec.name}`: {outcome.message}", where)
        return JobOutcome(False, job.plan.action, outcome.message), None
    if outcome.status != "passed":
        last = trim(outcome.message, 20_000)
        job.status(f"Gave up on `{spec.name}` after {outcome.attempts} attempt(s) "
                   f"({outcome.stopped_because}). Last error:\n\n```\n{fence_free(last)}\n```",
                   where)
        return JobOutcome(False, job.plan.action, f"no verified kernel for {spec.name}"), None
    try:
        published = job.publish(spec, outcome, from_base=from_base, ci_fixes=ci_fixes)
    except (PublishError, ForgeError) as exc:
        job.status(f"Generated `{spec.name}`, but publishing failed: {exc}", where)
        return JobOutcome(False, job.plan.action, str(exc)), None
    verb = "Opened" if published.created else "Updated"
    job.status(f"{verb} #{published.number} with a verified kernel for `{spec.name}` "
               f"({outcome.attempts} attempt(s)).", where)
    return JobOutcome(True, job.plan.action, f"{verb.lower()} pull request {published.number}",
                      pull_request=published.number, url=published.url), published


def _stopped_by_a_person(job: _Job, op: str, command: RegenCommand | None,
                         where: Target) -> JobOutcome | None:
    if command is not None and command.force:
        return None
    humans = job.human_commits(op)
    if not humans:
        return None
    job.status(f"A person pushed to `{branch_for(op)}` ({', '.join(humans)}): opbot stops "
               "touching it. Comment `/regen --force` to rebuild the branch from the base "
               "(those commits leave it).", where)
    return JobOutcome(True, job.plan.action, "stopped: a person pushed to the bot's branch")


def _forced(command: RegenCommand | None) -> bool:
    return command is not None and command.force


def handle_generate(job: _Job) -> JobOutcome:
    issue = job.forge.get_issue(job.plan.number or 0)
    label = job.settings.policy.trigger_label
    if job.plan.action == "generate" and not has_trigger(issue.labels, label):
        # The repository chose its own label (or the label is gone again): not a request.
        return JobOutcome(True, job.plan.action, f"ignored: the issue lacks the {label} label")
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
    outcome, _ = _finish(job, spec, job.generate(spec, backends, hint=hint), job.target,
                         from_base=_forced(job.plan.command))
    return outcome


def backends_for(command: RegenCommand | None, spec: OpSpec) -> list[str]:
    """The backends a `/regen --backend` names, else those the request chose."""
    if command is not None and command.backend:
        return parse_backends(command.backend)
    return parse_backends(",".join(spec.targets))


def _bot_pull(job: _Job) -> tuple[PullRequest, str] | JobOutcome:
    """The plan's pull request and its op, if opbot may work on it: open, the bot's
    branch, and from this repository — a fork's branch may be called `opbot/...` too, and
    its code never runs here. A refusal names why (and on /regen says so on the thread)."""
    pull = job.forge.get_pull_request(job.plan.number or 0)
    op = op_of_branch(pull.head_branch)
    asked = job.plan.action == "regen"
    if pull.from_fork:
        reason = "a pull request from a fork: opbot never runs a fork's code"
    elif op is None:
        reason = "not a bot pull request (branch `opbot/<op>`)"
    elif pull.state != "open":
        reason = (f"the pull request is {pull.state}: comment `/regen` on the op request "
                  "issue to start again")
    else:
        return pull, op
    if asked and not pull.from_fork:
        job.status(f"`/regen` cannot work here: {reason}.")
    return JobOutcome(True, job.plan.action, f"ignored: {reason}")


def handle_regen(job: _Job) -> JobOutcome:
    command = job.plan.command or RegenCommand()
    if command.problem:
        job.status(f"`/regen` was not understood: {command.problem}")
        return JobOutcome(False, job.plan.action, command.problem)
    if job.plan.target == "issue":
        return handle_generate(job)
    found = _bot_pull(job)
    if isinstance(found, JobOutcome):
        return found
    pull, op = found
    stopped = _stopped_by_a_person(job, op, command, job.target)
    if stopped is not None:
        return stopped
    spec = job.spec_from_pull(op, pull.head_sha)
    job.status(f"Regenerating `{op}`...")
    job.progress(pull.head_sha, "running", f"Regenerating {op}")
    outcome = job.generate(spec, backends_for(command, spec), hint=command.hint,
                           head_sha=pull.head_sha)
    result, _ = _finish(job, spec, outcome, job.target, from_base=command.force)
    job.progress(pull.head_sha, "success" if result.ok else "failure", result.summary)
    return result


def _iterate(job: _Job, pull: PullRequest, op: str, feedback: str, *, what: str,
             ci_fixes: int = 0) -> tuple[JobOutcome, Published | None]:
    stopped = _stopped_by_a_person(job, op, None, job.target)
    if stopped is not None:
        return stopped, None
    if not job.settings.llm_enabled:
        job.status(f"Iterating on {what} needs an LLM: configure OPBOT_LLM_BASE_URL, "
                   "OPBOT_LLM_MODEL and OPBOT_LLM_API_KEY for opbot.")
        return JobOutcome(False, job.plan.action, "no LLM configured"), None
    spec = job.spec_from_pull(op, pull.head_sha)
    backends = backends_for(None, spec)
    # One starting draft fits one backend; side by side each starts from its template.
    kernel = _kernel_under_review(job, op, backends[0], pull.head_sha) \
        if len(backends) == 1 else None
    job.status(f"Working on {what} for `{op}`...")
    job.progress(pull.head_sha, "running", f"Working on {what}")
    result = _finish(job, spec, job.generate(spec, backends, hint=feedback, draft=kernel,
                                             head_sha=pull.head_sha),
                     job.target, ci_fixes=ci_fixes)
    job.progress(pull.head_sha, "success" if result[0].ok else "failure", result[0].summary)
    return result


def _kernel_under_review(job: _Job, op: str, backend: str, ref: str) -> str | None:
    for path in get_backend(backend).kernel_paths(op):
        content = job.forge.file_content(f"ops/{op}/{path}", ref)
        if content is not None:
            return content
    return None


def _waiting_threads(job: _Job, number: int) -> list[ReviewThread]:
    """Unresolved threads a person spoke in last: one the bot answered already waits for
    the person, not for another reply."""
    return [thread for thread in job.forge.review_threads(number)
            if not thread.resolved and thread.comments
            and thread.comments[-1].author != job.settings.bot_login]


# Praise asks for no change: a "commented" review or a note saying only this is no request.
_PRAISE = re.compile(r"^\W*(lgtm|looks good( to me)?|ship it|approved?|nice( work)?|"
                     r"thanks?( you)?|great( work)?|\+1|:\+1:|:shipit:|👍|🚀)\W*$",
                     re.IGNORECASE)


def asks_for_change(text: str) -> bool:
    return bool(text.strip()) and not _PRAISE.match(text.strip())


def _reviewers_heard(job: _Job) -> Callable[[str], bool]:
    """Whose review words reach the model: people the policy lets ask for work. On a public
    repository anyone may review; an outsider's comment is not an instruction."""
    known: dict[str, bool] = {}

    def heard(author: str) -> bool:
        if author not in known:
            try:
                permission = job.forge.permission(author)
            except ForgeError:
                permission = "none"
            known[author] = at_least(permission, job.settings.policy.min_permission)
        return known[author]
    return heard


def review_feedback(summaries: list[Comment], threads: list[ReviewThread]) -> str:
    notes = [f"Review by {item.author}:\n{item.body}" for item in summaries if item.body.strip()]
    for thread in threads:
        where = f"{thread.path}:{thread.line}" if thread.path else "the pull request"
        said = "\n".join(f"- {comment.author}: {comment.body}" for comment in thread.comments)
        notes.append(f"On {where}:\n{said}")
    return "Reviewers asked for these changes:\n\n" + "\n\n".join(notes)


def handle_review(job: _Job) -> JobOutcome:
    found = _bot_pull(job)
    if isinstance(found, JobOutcome):
        return found
    pull, op = found
    bot = job.settings.bot_login
    heard = _reviewers_heard(job)
    summaries = [item for item in job.forge.review_summaries(pull.number)
                 if item.author != bot and heard(item.author) and asks_for_change(item.body)]
    threads = [replace(thread, comments=tuple(comment for comment in thread.comments
                                              if comment.author == bot
                                              or heard(comment.author)))
               for thread in _waiting_threads(job, pull.number)]
    threads = [thread for thread in threads
               if any(asks_for_change(comment.body) for comment in thread.comments
                      if comment.author != bot)]
    if not summaries and not threads:
        return JobOutcome(True, job.plan.action, "ignored: nothing in the review asks for a "
                          "change")
    outcome, published = _iterate(job, pull, op, review_feedback(summaries, threads),
                                  what="the review")
    if not outcome.ok or published is None:
        return outcome
    for thread in threads:
        touched = thread.path is not None and thread.path in published.changed
        note = "changed" if touched else "did not change"
        job.forge.reply_to_thread(pull.number, thread.id,
                                  f"opbot pushed {published.head_sha[:12]} for this review "
                                  f"(it {note} `{thread.path or 'this file'}`).")
        if touched:
            with contextlib.suppress(ForgeError):
                job.forge.resolve_thread(pull.number, thread.id)
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


def _ci_pull(job: _Job) -> PullRequest | None:
    if job.plan.number is not None:
        return job.forge.get_pull_request(job.plan.number)
    return job.forge.find_pull_request(job.plan.head_branch or "")


def handle_ci(job: _Job) -> JobOutcome:
    pull = _ci_pull(job)
    if pull is None:
        return JobOutcome(True, job.plan.action, "ignored: no open pull request for the branch")
    job = replace(job, plan=replace(job.plan, number=pull.number, target="pull"))
    found = _bot_pull(job)
    if isinstance(found, JobOutcome):
        return found
    pull, op = found
    if job.plan.head_sha and pull.head_sha != job.plan.head_sha:
        return JobOutcome(True, job.plan.action, f"ignored: CI failed on "
                          f"{job.plan.head_sha[:12]}, but the head is now {pull.head_sha[:12]}")
    done = _ci_fixes(pull)
    cap = job.settings.policy.ci_fixes_per_pull
    if done >= cap:
        job.status(f"CI still fails on {pull.head_sha[:12]}, and opbot has used its "
                   f"{cap} automatic fix(es) for this pull request. Comment `/regen` to try "
                   "again.")
        return JobOutcome(True, job.plan.action, f"capped: {done} CI fix(es) already")
    failures = job.forge.failed_jobs(pull.head_sha)
    if not failures:
        # Nothing failed but opbot's own progress report (or the logs are gone): nothing a
        # model could fix, and acting on it would answer the bot's own failure.
        return JobOutcome(True, job.plan.action, "ignored: no failed CI job to fix")
    logs = "\n\n".join(f"Job {failure.name} failed:\n{failing_part(failure.log)}"
                       for failure in failures)
    stopped = _stopped_by_a_person(job, op, None, job.target)
    if stopped is not None:
        return stopped
    # The attempt counts whether or not it lands: a fix that keeps failing must still stop.
    marked = read_marker(pull.body) or {}
    job.forge.update_pull_request(pull.number, body=with_marker(
        pull.body, {**marked, "ci_fixes": done + 1}))
    outcome, _ = _iterate(job, pull, op, f"The pull request's CI failed.\n\n{logs}",
                          what="the failed CI", ci_fixes=done + 1)
    return outcome


def _ci_fixes(pull: PullRequest) -> int:
    """Automatic CI fixes so far, from the PR's marker (state lives on the forge)."""
    count = (read_marker(pull.body) or {}).get("ci_fixes", 0)
    return count if isinstance(count, int) and count >= 0 else 0


def handle_scan(job: _Job) -> JobOutcome:
    from bot.scan.nightly import NightlyOptions, run_scan

    return run_scan(job, Redactor.from_environment(),
                    NightlyOptions(dashboard_issue=job.settings.dashboard_issue))


def handle_help(job: _Job) -> JobOutcome:
    lines = ["opbot understands these commands (each on a line of its own):", ""]
    lines += [entry.help.render() for entry in COMMAND_HANDLERS.values()]
    job.forge.create_comment(job.target, "\n\n".join(lines))
    return JobOutcome(True, job.plan.action, "listed the commands")


def _op_of_target(job: _Job) -> str | None:
    if job.plan.op:
        return job.plan.op
    if job.plan.target == "pull":
        return op_of_branch(job.forge.get_pull_request(job.plan.number or 0).head_branch)
    return op_name_from_body(job.forge.get_issue(job.plan.number or 0).body)


def handle_cancel(job: _Job) -> JobOutcome:
    if isinstance(job.settings.jobs, NoJobControl):
        job.status("`/cancel` stops the work of an `opbot serve` server; here each request is "
                   "a CI run of its own: cancel that run in the CI system.")
        return JobOutcome(True, job.plan.action, "nothing to cancel in CI mode")
    keys = {job_key(job.plan), job_key(replace(job.plan, op=_op_of_target(job))),
            job_key(replace(job.plan, op=None))}
    stopped = sum(job.settings.jobs.cancel(key) for key in keys)
    # A dispatching server hands work to CI: a run that already started there is the CI
    # system's to cancel, whatever this server's queue holds.
    elsewhere = (" Work a dispatching server (`opbot serve --dispatch`) already handed to CI "
                 "runs there: cancel a started run in the CI system.")
    job.status((f"Cancelled: {stopped} job(s) stopped or dropped." if stopped
                else "Nothing to cancel: no opbot job is queued or running here.") + elsewhere)
    return JobOutcome(True, job.plan.action, f"cancelled {stopped} job(s)")


@dataclass(frozen=True)
class CommandHandler:
    """A comment command and what carries it out, registered together (as Prow does)."""

    help: CommandHelp
    handle: Callable[[_Job], JobOutcome]


COMMAND_HANDLERS: dict[str, CommandHandler] = {
    "regen": CommandHandler(COMMANDS["regen"], handle_regen),
    "cancel": CommandHandler(COMMANDS["cancel"], handle_cancel),
    "help": CommandHandler(COMMANDS["help"], handle_help),
}

HANDLERS: dict[str, Callable[[_Job], JobOutcome]] = {
    "generate": handle_generate,
    "iterate-review": handle_review,
    "iterate-ci": handle_ci,
    "scan": handle_scan,
    **{name: entry.handle for name, entry in COMMAND_HANDLERS.items()},
}


def run_plan(plan: Plan, forge: Forge, settings: JobSettings) -> JobOutcome:
    if plan.action == "ignore":
        return JobOutcome(True, "ignore", plan.reason)
    if settings.bot_login is None:
        with contextlib.suppress(ForgeError):
            settings = replace(settings, bot_login=forge.whoami())
    if settings.bot_login is None and plan.action in HUMAN_TRIGGERS | {"help"}:
        # Not knowing itself, the bot could answer its own replies for ever: it waits
        # (silently: a reply would be one more event) until its token's user can be read.
        return JobOutcome(False, plan.action, "not done: the bot cannot tell its own "
                          "comments from people's (its token's user could not be read; "
                          f"set {BOT_LOGIN_VARIABLE} or check the token)")
    # A person's request that the bot itself made is an echo of its own action. (CI runs
    # are another matter: the bot's own push starts them, so their sender is the bot.)
    if plan.action in HUMAN_TRIGGERS and plan.actor and plan.actor == settings.bot_login:
        return JobOutcome(True, plan.action, "ignored: the bot's own event")
    checked = authorization(plan, forge, settings)
    settings = replace(settings, policy=checked.policy)
    target = Target(plan.target or "issue", plan.number) if plan.number is not None else None
    # Only for a request the bot carries out: a stranger's refused command must not make
    # the bot post (one note a command would be a way to spam a thread).
    if (checked.notes and target is not None and plan.action in HUMAN_TRIGGERS
            and checked.refusal is None):
        with contextlib.suppress(ForgeError):
            forge.create_comment(target, "\n\n".join(checked.notes))
    refusal = checked.refusal
    if refusal is not None:
        if target is not None and plan.action in HUMAN_TRIGGERS:
            answer_refusal(forge, target, refusal_text(refusal), settings.bot_login,
                           command_comment(plan))
        return JobOutcome(True, plan.action, f"refused: {refusal}")
    with tempfile.TemporaryDirectory(prefix="opbot-job-") as tmp:
        job = _Job(plan=plan, forge=forge, settings=settings, workdir=Path(tmp))
        job.acknowledge()
        try:
            return HANDLERS[plan.action](job)
        except GenerationCancelled:
            if plan.number is not None:
                job.status("Stopped: `/cancel` asked opbot to stop; nothing was published.")
            return JobOutcome(True, plan.action, "cancelled")
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
                              ledger: SpendLedger | None = None, *,
                              jobs: JobControl | None = None,
                              identities: Identities | None = None,
                              stopped: Callable[[], bool] | None = None,
                              policy: Policy | None = None) -> JobOutcome:
    """Carry out `plan` with the credentials the environment holds. `policy` is the
    operator's (the ceiling); `identities` knows who the bot is (else the forge is asked)."""
    from bot.forge.retrying import RetryingForge

    env = os.environ if environ is None else environ
    forge = RetryingForge(forge_from_environment(plan, env))
    settings = JobSettings.from_environment(env, ledger)
    login = identities.login(plan.forge) if identities is not None else None
    settings = replace(settings, bot_login=login or settings.bot_login,
                       policy=policy or settings.policy, jobs=jobs or settings.jobs,
                       stopped=stopped or settings.stopped)
    return run_plan(plan, forge, settings)
