"""The `opbot` command line. JSON on stdout with --json; a readable report otherwise.

Exit codes: 0 passed; 1 failed (or unsupported); 2 bad input (a clear message, never a
traceback). Every OpbotError is turned into its message and exit code here, at one place.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from bot import __version__, queue_cli
from bot.agent.backends import DEFAULT_BACKEND, backend_names, parse_backends
from bot.errors import BadInputError, OpbotError
from bot.forge.registry import names as forge_names
from runners import collector

if TYPE_CHECKING:
    from rich.console import Console

BACKEND_CHOICE = click.Choice(list(backend_names()), case_sensitive=False)
FORGE_CHOICE = click.Choice(list(forge_names()))  # the forge registry's names
EXIT_PASSED, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


@cache
def _console(stderr: bool) -> Console:
    # rich loads on first output (~0.1 s): a --json run or a gate decision never needs it.
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


def _out() -> Console:
    return _console(stderr=False)


def _err() -> Console:
    return _console(stderr=True)


def escape(text: str) -> str:
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def _fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    _err().print(f"[bold red]error:[/] {escape(_printable(message, _err().file))}",
                 markup=True, emoji=False, soft_wrap=True)
    sys.exit(code)


def _printable(text: str, stream: Any) -> str:
    """`text` as `stream` can show it: what its encoding cannot (a lone surrogate, an emoji
    on an ASCII terminal) becomes a backslash escape instead of a UnicodeEncodeError."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    return text.encode(encoding, "backslashreplace").decode(encoding, "replace")


def _print_plain(text: str) -> None:
    """Text from outside (a payload, a forge, a model) on stdout as it is: no markup, no
    :emoji: codes, and never an error for a character stdout cannot encode."""
    _out().print(_printable(text, _out().file), soft_wrap=True, markup=False, emoji=False,
                 highlight=False)


@contextmanager
def _progress(enabled: bool) -> Iterator[Callable[[str], None]]:
    """A spinner with the current step on a terminal; silent with --json or when piped,
    except for a caller that asks for plain progress lines on stderr (the bot's job, which
    shows each attempt on the pull request)."""
    from bot.generation_step import PROGRESS_LINES_VARIABLE, PROGRESS_PREFIX

    if os.environ.get(PROGRESS_LINES_VARIABLE) == "1":
        yield lambda message: print(f"{PROGRESS_PREFIX}{message}", file=sys.stderr, flush=True)
        return
    if not enabled or not _err().is_terminal:
        yield lambda _message: None
        return
    with _err().status("starting") as status:
        yield status.update


def _emit_json(data: dict[str, Any]) -> None:
    # ASCII only (ensure_ascii): any text, even a lone surrogate, goes out as a \u escape.
    click.echo(json.dumps(data, indent=2, default=str, ensure_ascii=True))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="opbot")
def main() -> None:
    """opbot: operator requests in, verified accelerator kernels out."""
    collector.tune()  # before a command's imports (torch): they make most of the objects


# -- verify ---------------------------------------------------------------------------------


@main.command()
@click.argument("ref", type=click.Path(path_type=Path))
@click.argument("impl", type=click.Path(path_type=Path))
@click.option("--backend", type=BACKEND_CHOICE, default=DEFAULT_BACKEND, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=1), default=300.0,
              show_default=True, help="Seconds before a hanging candidate is killed.")
@click.option("--policy", "policy_file", type=click.Path(path_type=Path), default=None,
              help="A policy file (.opbot.yaml format) over the defaults: sandbox, budgets.")
@click.option("--seed", type=click.IntRange(0, 2**31 - 1), default=None,
              help="Replay a run's inputs: the `seed` of an earlier verdict (default: a fresh "
              "secret seed).")
def verify(ref: Path, impl: Path, *, backend: str, as_json: bool, timeout_s: float,
           policy_file: Path | None, seed: int | None) -> None:
    """Check IMPL (a .py defining ModelNew, or an operator package) against REF."""
    from bot.verification import verify_candidate

    try:
        _apply_policy(policy_file)
        result = verify_candidate(ref, impl, backend=backend, timeout_s=timeout_s, seed=seed)
    except OpbotError as exc:
        _fail(str(exc))
    if as_json:
        data = result.to_json()
        _emit_json({"status": data["status"], "reasons": data["reasons"],
                    "cases": data["cases"], "device": data["device"],
                    "warnings": data["warnings"], "stages": data["stages"],
                    "seed": data["seed"], "notes": _scaled_notes(data.get("inferred"))})
    else:
        _print_verdict(result)
        for note in _scaled_notes(result.inferred):
            _out().print(f"note: {note}", soft_wrap=True, markup=False)
    sys.exit(EXIT_PASSED if result.passed else EXIT_FAILED)


# -- generate -------------------------------------------------------------------------------


@main.command()
@click.argument("ref", type=click.Path(path_type=Path))
@click.option("--backend", default=DEFAULT_BACKEND, show_default=True,
              help=f"One backend or several side by side, comma-separated "
              f"({', '.join(backend_names())}): several share one package and one PERF.md.")
@click.option("--llm", type=click.Choice(["auto", "offline", "openai"]), default="auto",
              show_default=True,
              help="Who drafts kernels: an OpenAI-compatible LLM, or the offline generator "
              "(auto: the LLM when an endpoint or key is configured).")
@click.option("--llm-base-url", default=None, help="OpenAI-compatible endpoint "
              "(default: OPBOT_LLM_BASE_URL, else OpenAI's). Key: OPBOT_LLM_API_KEY or "
              "OPENAI_API_KEY.")
@click.option("--llm-model", default=None, help="Model name (default: OPBOT_LLM_MODEL).")
@click.option("--llm-timeout", "llm_timeout_s", type=click.FloatRange(min=0.1), default=None,
              help="Seconds the LLM endpoint may stay silent: between two streamed chunks, "
              "or for a whole reply without streaming (retried on timeouts; default: the "
              "policy's llm timeout_s, 180).")
@click.option("--hint", default=None, help="Notes for the model (treated as data).")
@click.option("--hint-file", type=click.Path(path_type=Path), default=None,
              help="Notes for the model from a file (review comments, CI logs).")
@click.option("--starting-draft", type=click.Path(path_type=Path), default=None,
              help="A kernel file the model starts from (e.g. the one under review).")
@click.option("--max-attempts", type=click.IntRange(min=1), default=None,
              help="Drafts at most (default: the policy's, 6).")
@click.option("--first-drafts", type=click.IntRange(min=1, max=8), default=None,
              help="First drafts asked of the model at once, in independent chats; the best "
              "one goes on (default: the policy's, 1). Each counts as an attempt.")
@click.option("--max-tokens", type=click.IntRange(min=1), default=None,
              help="LLM tokens at most (default: the policy's budget).")
@click.option("--time-budget", "time_budget_s", type=click.FloatRange(min=1), default=None,
              help="Wall-clock seconds for the whole loop (default: the policy's).")
@click.option("--policy", "policy_file", type=click.Path(path_type=Path), default=None,
              help="A policy file (.opbot.yaml format) over the defaults.")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="The operator package folder (default: the op.yaml's folder, or ops/<name>).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def generate(ref: Path, *, backend: str, llm: str, llm_base_url: str | None,
             llm_model: str | None, llm_timeout_s: float | None, hint: str | None,
             hint_file: Path | None, starting_draft: Path | None,
             max_attempts: int | None, first_drafts: int | None, max_tokens: int | None,
             time_budget_s: float | None, policy_file: Path | None, out: Path | None,
             as_json: bool) -> None:
    """Generate a kernel for REF (an op.yaml or a KernelBench .py), verify it, write it."""
    from bot.agent.llm import llm_configured
    from bot.agent.loop import generate as run_generate
    from bot.agent.outcome import Budget
    from bot.spec import load_spec

    try:
        backends = parse_backends(backend)
        policy = _apply_policy(policy_file)
        spec = load_spec(ref)
        notes = _read_text(hint_file) if hint_file else hint
        draft = _read_text(starting_draft) if starting_draft else None
        use_llm = llm == "openai" or (llm == "auto" and llm_configured(llm_base_url))
        choice = _llm_choice(_llm_policy(policy, policy_file), base_url=llm_base_url,
                             model=llm_model, hint=notes, timeout_s=llm_timeout_s,
                             draft=draft) if use_llm else None
        budget = Budget(attempts=max_attempts or policy.attempts,
                        first_drafts=first_drafts or policy.first_drafts,
                        tokens=max_tokens or policy.token_budget(),
                        seconds=time_budget_s or policy.wall_seconds)
        target = _writable_folder(out or _default_out(ref, spec.name, spec.origin))
        with _progress(not as_json) as progress:
            outcome = run_generate(spec, backend=backends, out=target, progress=progress,
                                   llm=choice, budget=budget,
                                   peaks=policy.perf.peak_overrides())
    except OpbotError as exc:
        _fail(str(exc))
    except OSError as exc:  # the folder turned out unwritable (a read-only or virtual one)
        _fail(f"cannot write the package: {exc.strerror or exc} ({exc.filename or '-'})")
    if as_json:
        _emit_json(outcome.to_json())
    else:
        _print_generate(outcome)
    sys.exit(EXIT_PASSED if outcome.status == "passed" else EXIT_FAILED)


def _scaled_notes(inferred: Any) -> list[str]:
    """What the harness says of the shapes it verified on, when it scaled them down."""
    scaled = inferred.get("scaled") if isinstance(inferred, dict) else None
    return [str(scaled["note"])] if isinstance(scaled, dict) and scaled.get("note") else []


def _llm_policy(policy: Any, policy_file: Path | None) -> Any:
    """The `llm` section in force: the --policy file's; without one, the section a parent
    (the bot's job) handed down, else the defaults."""
    from bot.policy import inherited_llm_policy

    if policy_file is not None:
        return policy.llm
    return inherited_llm_policy(os.environ) or policy.llm


def _llm_choice(llm_policy: Any, *, base_url: str | None, model: str | None,
                hint: str | None, timeout_s: float | None, draft: str | None) -> Any:
    """The LLM client as the policy in force sets it up for the chosen model (its `llm`
    section: defaults and per-model overrides); command-line flags win over the policy."""
    from bot.agent.llm import LLMSettings, OpenAIChatClient
    from bot.agent.outcome import LLMChoice

    settings = LLMSettings.resolve(base_url=base_url, model=model)
    request = llm_policy.for_model(settings.model)
    settings = replace(settings, max_output_tokens=request.max_output_tokens,
                       temperature=request.temperature,
                       reasoning_effort=request.reasoning_effort, stream=request.stream,
                       timeout_s=request.timeout_s if timeout_s is None else timeout_s)
    return LLMChoice(client=OpenAIChatClient(settings), model=settings.model,
                     api_key=settings.api_key, hint=hint, starting_draft=draft)


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")[:200_000]
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInputError(f"{path}: cannot read it ({exc})") from None


def _apply_policy(path: Path | None) -> Any:
    """The policy in force: the defaults, with `path` laid over them (its sandbox exported,
    so the processes this one starts follow it; without `path`, an inherited one stands)."""
    from bot.policy import load_policy

    if path is None:
        return load_policy(None)
    policy = load_policy(_read_text(path), source=str(path))
    policy.sandbox.export()
    policy.perf.export()
    return policy


# -- replay ---------------------------------------------------------------------------------


@main.command()
@click.argument("transcript", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def replay(transcript: Path, as_json: bool) -> None:
    """Re-verify every candidate of a generation TRANSCRIPT, without calling the model."""
    from bot.agent.replay import replay_transcript

    try:
        report = replay_transcript(transcript)
    except OpbotError as exc:
        _fail(str(exc))
    if as_json:
        _emit_json(report.to_json())
    else:
        for item in report.attempts:
            agree = "same" if item.recorded == item.replayed else "DIFFERENT"
            _out().print(f"attempt {item.attempt}: recorded {escape(item.recorded)}, replayed "
                         f"{escape(item.replayed)} ({agree})")
    sys.exit(EXIT_PASSED if report.consistent else EXIT_FAILED)


def _writable_folder(path: Path) -> Path:
    """The package folder, checked now (not made: an unsupported op leaves nothing): a bad
    --out is bad input before any token is spent."""
    if path.exists() and not path.is_dir():
        raise BadInputError(f"{path}: not a folder, cannot write the package there")
    ancestor = path
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir() or not os.access(ancestor, os.W_OK | os.X_OK):
        raise BadInputError(f"{path}: cannot write the package there ({ancestor} is not a "
                            "writable folder)")
    return path


def _default_out(ref: Path, name: str, origin: str) -> Path:
    if origin == "op.yaml":
        return ref.parent
    return Path("ops") / name


# -- event ----------------------------------------------------------------------------------


@main.command()
@click.option("--forge", "forge_name", type=FORGE_CHOICE, default=None,
              help="Default: the forge whose CI this runs in (github in GitHub Actions, "
              "gitlab in GitLab CI); github elsewhere.")
@click.option("--event", "event_name", default=None,
              help="The event (X-GitHub-Event / X-Gitlab-Event, or `schedule`); default: "
              "GITHUB_EVENT_NAME.")
@click.option("--payload", type=click.Path(path_type=Path), default=None,
              help="The delivery's JSON body; default: GITHUB_EVENT_PATH.")
@click.option("--dry-run", is_flag=True,
              help="Touch nothing: print the plan (a command on a GitHub pull request reads "
              "the pull request, where a token is set, to know whose it is).")
@click.option("--gate", is_flag=True,
              help="Only decide whether the event needs the job: plan it as a real run "
              "would, run the job's checks (the bot's own event, the policy, the actor's "
              "permission) reading the forge only, print the plan with `run` and `reason`, "
              "and append run=, action=, op= to GITHUB_OUTPUT where it is set. Exit 0 "
              "either way; without a token, run=true (the job checks).")
@click.option("--answer-refusals", is_flag=True,
              help="With --gate: answer a person's refused request on its issue or pull "
              "request, with the status comment the job would post.")
@click.option("--policy", "policy_file", type=click.Path(path_type=Path), default=None,
              help="The operator's policy over the defaults (trigger label, sandbox, "
              "budgets): the ceiling a repository's .opbot.yaml may only tighten.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def event(*, forge_name: str | None, event_name: str | None, payload: Path | None,
          dry_run: bool, gate: bool, answer_refusals: bool, policy_file: Path | None,
          as_json: bool) -> None:
    """Plan (and unless --dry-run, carry out) one webhook delivery or Actions event."""
    from bot.event_input import read_event, settle_from_forge
    from bot.forge.base import ForgeError
    from bot.forge.registry import plugin
    from bot.identity import Identities
    from bot.trigger_labels import TriggerLabels, policy_text_from_environment

    if gate and dry_run:
        _fail("--gate and --dry-run exclude each other (the gate plans as a real run does)")
    if answer_refusals and not gate:
        _fail("--answer-refusals goes with --gate")
    try:
        policy = _apply_policy(policy_file)
        delivery = read_event(forge_name, event_name, payload)
    except OpbotError as exc:
        _fail(str(exc))
    # A dry run touches nothing: the bot is who OPBOT_BOT_LOGIN says; a real run asks the
    # forge who its token is.
    identities = None if dry_run else Identities()
    label = policy.trigger_label
    if not dry_run:  # the repository may name its own label in its .opbot.yaml
        labels = TriggerLabels(policy, policy_text_from_environment(os.environ))
        label = labels.label_for(delivery.forge, plugin(delivery.forge).repo_of(delivery.payload))
    if not dry_run and delivery.event == plugin(delivery.forge).dispatch_event:
        try:  # the plan as the bot handed it over, not as the job's environment says
            delivery = replace(delivery, payload=plugin(delivery.forge).trusted_dispatch(
                delivery.payload, os.environ))
        except (OpbotError, ForgeError) as exc:
            _fail(f"not carried out: {exc}")
    plan = settle_from_forge(delivery.plan(identities, trigger_label=label))
    if dry_run:
        if as_json:
            _emit_json(plan.to_json())
        else:
            _print_plain(f"{plan.action}: {plan.reason} ({plan.repo or '-'}#"
                         f"{plan.number if plan.number is not None else '-'}, op "
                         f"{plan.op or '-'})")
        sys.exit(EXIT_PASSED)
    if gate:
        _gate(plan, as_json, policy, identities, answer_refusals)
    _run_plan(plan, as_json, policy, identities)


def _gate(plan: Any, as_json: bool, policy: Any, identities: Any,
          answer_refusals: bool) -> NoReturn:
    """--gate: whether the job should run (bot/gate.py); exit 0 either way."""
    from bot.gate import gate_event, write_outputs

    try:
        verdict = gate_event(plan, policy=policy, bot_login=identities.login(plan.forge),
                             answer_refusals=answer_refusals)
        write_outputs(verdict)
    except OpbotError as exc:
        _fail(str(exc))
    except OSError as exc:  # without the outputs the workflow cannot tell: a failure
        _fail(f"cannot write GITHUB_OUTPUT: {exc.strerror or exc}", EXIT_FAILED)
    if as_json:
        _emit_json(verdict.to_json())
    else:
        _print_plain(verdict.summary())
    sys.exit(EXIT_PASSED)


def _run_plan(plan: Any, as_json: bool, policy: Any = None, identities: Any = None
              ) -> NoReturn:
    """Carry a plan out on its forge (credentials from the environment) and report."""
    from bot.forge.base import ForgeError
    from bot.jobs import run_plan_from_environment

    try:
        outcome = run_plan_from_environment(plan, policy=policy, identities=identities)
    except OpbotError as exc:
        _fail(str(exc))
    except ForgeError as exc:  # the forge unreachable before the job could start
        _fail(f"the forge did not answer: {exc}", code=EXIT_FAILED)
    if as_json:
        _emit_json(outcome.to_json())
    else:
        _print_plain(outcome.summary)
    sys.exit(EXIT_PASSED if outcome.ok else EXIT_FAILED)


# -- serve ----------------------------------------------------------------------------------


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True)
@click.option("--dry-run", is_flag=True, help="Log each job's plan instead of acting.")
@click.option("--state-dir", type=click.Path(path_type=Path),
              default=queue_cli.DEFAULT_STATE_DIR, show_default=True,
              help="Where the durable job queue lives (`opbot queue` reads it there too).")
@click.option("--policy", "policy_file", type=click.Path(path_type=Path), default=None,
              help="The operator's policy over the defaults (trigger label, sandbox, "
              "budgets): the ceiling a repository's .opbot.yaml may only tighten.")
# Not click's envvar: it also takes t/y/f/n, and a typo must not fall back to run mode
# (which runs untrusted code on this host); bot.server reads OPBOT_DISPATCH strictly.
@click.option("--dispatch", is_flag=True,
              help="Hand each job to the CI system (GitHub repository_dispatch, a GitLab "
              "pipeline) instead of running it here (OPBOT_DISPATCH=1 in a unit's "
              "environment file does the same; it takes 1/0, true/false, yes/no, on/off).")
def serve(*, host: str, port: int, dry_run: bool, state_dir: Path,
          policy_file: Path | None, dispatch: bool) -> None:
    """Receive GitHub and GitLab webhooks (secret: OPBOT_WEBHOOK_SECRET, or one per forge:
    OPBOT_GITHUB_WEBHOOK_SECRET, OPBOT_GITLAB_WEBHOOK_SECRET)."""
    from bot.server import dispatch_mode_from_environment, secrets_from_environment
    from bot.server import serve as run_server

    try:
        dispatch = dispatch or dispatch_mode_from_environment()
        secrets_from_environment()
        policy = _apply_policy(policy_file)
    except OpbotError as exc:
        _fail(str(exc))
    run_server(host=host, port=port, dry_run=dry_run, state_dir=state_dir, policy=policy,
               dispatch=dispatch)


main.add_command(queue_cli.queue)


# -- scan -----------------------------------------------------------------------------------


@main.command()
@click.argument("checkout", type=click.Path(path_type=Path), default=Path())
@click.option("--forge", "forge_name", type=FORGE_CHOICE, default=None,
              help="Run the nightly job on a forge repository (with --repo) instead: "
              "re-verify, regenerate what the toolchain broke (one PR each), update the "
              "dashboard. Token and URL as for `opbot event`.")
@click.option("--repo", default=None, help="owner/name (GitLab: group/project), with --forge.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def scan(checkout: Path, *, forge_name: str | None, repo: str | None, as_json: bool) -> None:
    """The nightly scan: re-verify every operator (ops/*/op.yaml) of CHECKOUT (default: the
    current directory) with this machine's toolchain. Exit 0 when all pass, 1 otherwise."""
    if forge_name is not None or repo is not None:
        _scan_forge(forge_name, repo, as_json)
    from bot.scan import local_actions, record_toolchain, scan_checkout

    if not checkout.is_dir():
        _fail(f"{checkout}: no such folder")
    with _progress(not as_json) as progress:
        rows = local_actions(scan_checkout(checkout, progress))
        toolchain = record_toolchain()
    if not rows:
        _fail(f"{checkout}: no operators (ops/<name>/op.yaml) to scan")
    failed = [row for row in rows if row.status != "passed"]
    if as_json:
        _emit_json({"toolchain": toolchain.to_json(), "passed": len(rows) - len(failed),
                    "failed": len(failed), "ops": [row.to_json() for row in rows]})
    else:
        _print_scan(rows, toolchain.key())
    sys.exit(EXIT_FAILED if failed else EXIT_PASSED)


def _scan_forge(forge_name: str | None, repo: str | None, as_json: bool) -> NoReturn:
    from bot.events import Plan

    if forge_name is None or repo is None:
        _fail("--forge and --repo go together")
    _run_plan(Plan(action="scan", reason="opbot scan", forge=forge_name, event="scan",
                   repo=repo), as_json)


# -- doctor ---------------------------------------------------------------------------------


@main.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def doctor(as_json: bool) -> None:
    """Report what this machine offers: Python, torch, triton, torch_npu, CANN, SOC, devices."""
    from bot.doctor import main as run_doctor

    sys.exit(run_doctor(as_json))


# -- human output ---------------------------------------------------------------------------


def _print_cases(result: Any) -> None:
    from rich.table import Table

    table = Table(title=None, show_edge=False)
    for column in ("case", "shapes", "dtypes", "max abs err", "max rel err", "result"):
        table.add_column(column)
    for case in result.cases:
        shapes = ", ".join("x".join(map(str, shape)) for shape in case.shapes)
        table.add_row(case.name, shapes, ", ".join(case.dtypes),
                      "-" if case.max_abs_err is None else f"{case.max_abs_err:.3g}",
                      "-" if case.max_rel_err is None else f"{case.max_rel_err:.3g}",
                      "[green]passed[/]" if case.passed else "[red]FAILED[/]")
    if result.cases:
        _out().print(table)


def _print_verdict(result: Any) -> None:
    colour = "green" if result.passed else "red"
    seed = f" (seed {result.seed}: --seed {result.seed} replays these inputs)" if (
        result.seed is not None) else ""
    _out().print(f"[bold {colour}]{result.status}[/] on {escape(result.device)}{seed}")
    _print_cases(result)
    for reason in result.reasons:
        # Messages quote user code and its errors: never rich markup.
        where = f" ({reason.location.render()})" if reason.location else ""
        case = f" \\[case {escape(str(reason.case))}]" if reason.case else ""
        _out().print(f"[red]- {escape(reason.check)}[/]{case}: {escape(reason.message + where)}",
                     soft_wrap=True, markup=True, highlight=False)
        if reason.log_tail and reason.check in ("crash", "timeout", "run", "load", "init"):
            _out().print(reason.log_tail[-1500:], markup=False, highlight=False)
    for warning in result.warnings:
        _out().print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True)


def _print_scan(rows: Any, toolchain: str) -> None:
    from rich.table import Table

    table = Table(title=None, show_edge=False)
    for column in ("operator", "backend", "verdict", "action", "reason"):
        table.add_column(column)
    for row in rows:
        colour = "green" if row.status == "passed" else "red"
        table.add_row(escape(row.op), row.backend, f"[{colour}]{row.status}[/]", row.action,
                      escape(row.reason[:160]))
    _out().print(f"toolchain: {toolchain or 'unknown'}")
    _out().print(table)


def _print_generate(outcome: Any) -> None:
    if outcome.backends:
        for item in outcome.backends:
            _out().print(f"[bold]{escape(item.backend)}[/]: {escape(item.status)}",
                         soft_wrap=True)
            _print_generate(item)
        _out().print(f"recommended: {outcome.recommended or 'none (nothing verified and timed)'}",
                     markup=False)
        return
    if outcome.status == "unsupported":
        _out().print(f"[bold yellow]unsupported[/]: {escape(outcome.message)}", soft_wrap=True)
        return
    _out().print(f"{outcome.attempts} attempt(s), stopped because: {outcome.stopped_because}"
                 f"; tokens: {outcome.tokens.total}", markup=False)
    for note in outcome.notes:
        _out().print(f"note: {note}", soft_wrap=True, markup=False)
    if outcome.verification is not None:
        _print_verdict(outcome.verification)
        timing = outcome.verification.timing
        if timing is not None:
            _out().print(f"timing: kernel {timing.candidate_ms:.3f} ms, PyTorch "
                         f"{timing.reference_ms:.3f} ms on {timing.device} ({timing.note})",
                         soft_wrap=True, markup=False)
    _out().print(f"operator package: {outcome.out}", markup=False)

