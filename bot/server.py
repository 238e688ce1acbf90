"""`opbot serve`: the webhook receiver (Starlette on uvicorn) and its job worker.

Deliveries arrive at /webhook/<forge> for each forge in bot/forge/registry.py. Each is
verified by its forge before it is parsed (GitHub: an HMAC-SHA256 signature over the raw
body; GitLab: a token), in constant time against the secret (and, during a rotation, the
previous one). Accepted deliveries are planned at once and queued in a durable queue; the
answer goes back within milliseconds, the work happens in the worker.
The worker runs each job here, or with `--dispatch` hands it to the CI system (bot/dispatch.py).
Bad input gets a 4xx, never a 5xx; the secret is never logged.
For operators: /healthz (bot/health.py: 503 with the reasons when a worker is dead or the
queue is stuck) and /metrics (bot/metrics.py, Prometheus text). A worker outlives a locked
queue (it backs off and tries again); a worker thread that dies anyway ends `opbot serve`
(EXIT_WORKER_DIED), so that systemd restarts it. The mode (run or dispatch) is logged at start.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
import traceback
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.agent.transcript import Redactor
from bot.dispatch import RetryPolicy, given_up_text, public_reason, strip_url_credentials
from bot.errors import BadInputError, OpbotError
from bot.event_input import settle_from_forge
from bot.events import TRIGGER_LABEL, Plan, job_key, plan_event
from bot.forge import registry
from bot.forge.base import Dispatch, ForgeError
from bot.forge.plugin import ForgePlugin
from bot.health import WORKER_NAMES, Heartbeat, Limits, stuck_after_from_environment, verdict
from bot.identity import Identities
from bot.metrics import (
    CONTENT_TYPE,
    DISPATCH_GIVEN_UP,
    DISPATCH_RETRIES,
    Deliveries,
    TokenMeter,
    render,
)
from bot.payload_json import PayloadError, load_payload
from bot.policy import Policy, default_policy
from bot.queue import CONTROL_PREFIX, JobQueue, QueuedJob, RequestKey, Submitted, queue_path
from bot.trigger_labels import TriggerLabels, policy_text_from_environment

SECRET_VARIABLE = "OPBOT_WEBHOOK_SECRET"  # noqa: S105 - a variable name, not a secret
MAX_BODY_BYTES = 25 * 1024 * 1024
MAX_BODIES_BYTES = 64 * 1024 * 1024  # all bodies being received at once
# The whole body must arrive within this (a half-sent request holds a connection open).
BODY_TIMEOUT_S = 30.0
BODY_TIMEOUT_VARIABLE = "OPBOT_BODY_TIMEOUT_S"
_POLL_S = 0.5
# A worker that cannot reach the queue (locked, slow storage) waits this long, doubling up
# to the ceiling, and tries again: a lock held for minutes must not end the worker for good.
# The ceiling plus the queue's busy timeout (30 s) stays under health.SILENT_AFTER_S (60 s),
# so /healthz says "cannot use the queue", not "has not looped" (a hang), while it waits.
BACKOFF_FIRST_S, BACKOFF_MAX_S = 1.0, 20.0
PRUNE_EVERY_S = 3600.0  # the main worker forgets old deliveries and jobs at most this often
# The exit status when a worker thread died: non-zero, so systemd's Restart=on-failure
# starts a fresh process (EX_SOFTWARE); the queue is durable and requeues its job.
EXIT_WORKER_DIED = 70
# Plans the server carries out itself even in dispatch mode: they only post an answer or
# steer this server's own queue, so an NPU runner's CI job for them is waste (/help), or
# cannot reach what it should stop (/cancel: the queue is here, not in CI).
RUN_HERE = frozenset({"help", "cancel"})

log = logging.getLogger("opbot.serve")


def _secret_pair(env: Mapping[str, str], variable: str) -> list[str]:
    return [secret for secret in (env.get(variable, ""), env.get(f"{variable}_PREVIOUS", ""))
            if secret]


def forge_secrets_from_environment(environ: Mapping[str, str] | None = None
                                   ) -> dict[str, list[str]]:
    """Each forge's own secret (OPBOT_GITHUB_WEBHOOK_SECRET, ...), where one is set: GitLab
    sends its secret in clear (X-Gitlab-Token), so whoever reads one GitLab delivery must
    not be able to sign GitHub's with it."""
    env = os.environ if environ is None else environ
    found = {name: _secret_pair(env, f"OPBOT_{name.upper()}_WEBHOOK_SECRET")
             for name in registry.names()}
    return {name: secrets for name, secrets in found.items() if secrets}


def secrets_from_environment(environ: Mapping[str, str] | None = None) -> list[str]:
    """The shared secret (and the one it replaces), for forges without their own."""
    env = os.environ if environ is None else environ
    found = _secret_pair(env, SECRET_VARIABLE)
    if not found and not forge_secrets_from_environment(env):
        raise BadInputError(f"{SECRET_VARIABLE} is not set: opbot serve refuses to accept "
                            "unsigned webhooks")
    return found


DISPATCH_VARIABLE = "OPBOT_DISPATCH"
_ON, _OFF = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def dispatch_mode_from_environment(environ: Mapping[str, str] | None = None) -> bool:
    """OPBOT_DISPATCH, strictly: 1/true/yes/on or 0/false/no/off (any case); unset, empty
    or blank is off. Anything else is refused: a typo (`enabled`, `ture`) that fell back to
    run mode would run untrusted code on this host while its operator meant CI."""
    text = (os.environ if environ is None else environ).get(DISPATCH_VARIABLE, "")
    value = text.strip().lower()
    if value in _ON:
        return True
    if value in _OFF or not value:
        return False
    raise BadInputError(f"{DISPATCH_VARIABLE}={text!r} is neither on (1, true, yes, on) nor "
                        "off (0, false, no, off): opbot serve will not guess whether to run "
                        "jobs on this host or hand them to CI")


def body_timeout_from_environment(environ: Mapping[str, str] | None = None) -> float:
    """Seconds a delivery's body may take to arrive: OPBOT_BODY_TIMEOUT_S, else 30."""
    text = (os.environ if environ is None else environ).get(BODY_TIMEOUT_VARIABLE, "")
    if not text:
        return BODY_TIMEOUT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        log.warning("%s=%r is not a number of seconds: using %g", BODY_TIMEOUT_VARIABLE,
                    text, BODY_TIMEOUT_S)
        return BODY_TIMEOUT_S
    return seconds


_EVERY_STATUS = ("queued", "running", "done", "failed")
# An issue form's `opened` + `labeled` (or a redelivery under a new id) arrive seconds apart;
# a label put back on purpose later is a new request.
GENERATE_PAIR_S = 120.0


def request_of(plan: Plan, review_settle_s: float = 0.0) -> RequestKey | None:
    """What the plan changes, so that deliveries of one request make one job:
    one generation per op request, one fix per failing head SHA, one review run per burst
    of review comments (each waits `review_settle_s` for the rest of its burst)."""
    where = f"{plan.forge}:{plan.repo}:{plan.target or '-'}#{plan.number}"
    if plan.action == "generate":
        return RequestKey(f"{where}:generate", joins=_EVERY_STATUS, within_s=GENERATE_PAIR_S)
    if plan.action == "iterate-ci" and plan.head_sha:
        # A SHA fails once: its check suites, workflow runs and redeliveries are one failure.
        return RequestKey(f"{plan.forge}:{plan.repo}:{plan.op}:ci:{plan.head_sha}",
                       joins=_EVERY_STATUS)
    if plan.action == "iterate-ci":
        return RequestKey(f"{where}:ci", joins=("queued",))
    if plan.action == "iterate-review":
        # A running review job may already have read the threads: only a queued one absorbs.
        return RequestKey(f"{where}:review", joins=("queued",), settle_s=review_settle_s)
    if plan.action == "scan":
        return RequestKey(f"{plan.forge}:{plan.repo}:scan", joins=("queued", "running"))
    if plan.action == "help":  # three /help comments in a row: one answer
        return RequestKey(f"{where}:help", joins=("queued",))
    return None


class BodyBudget:
    """Bytes of bodies held at once, before any is authenticated (a GitHub signature covers
    the body, so it is read first): unsigned floods cannot grow the server past this."""

    def __init__(self, limit: int = MAX_BODIES_BYTES) -> None:
        self.limit = limit
        self.held = 0

    def take(self, size: int) -> None:
        if self.held + size > self.limit:
            raise _Refused(503, "the server is busy receiving other bodies: try again")
        self.held += size

    def give_back(self, size: int) -> None:
        self.held -= size


@dataclass
class ServerSettings:
    secrets: list[str]  # the shared ones, for forges without their own
    queue: JobQueue
    dry_run: bool
    identities: Identities = field(default_factory=Identities)
    review_settle_s: float = 0.0
    # Runs one plan; the callable it gets says whether /cancel asked the job to stop.
    execute: Callable[[Plan, Callable[[], bool]], dict[str, Any]] | None = None
    # Dispatch mode: jobs go to the CI system instead of `execute`.
    dispatch: Callable[[Plan], Dispatch] | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    trigger_label: str = TRIGGER_LABEL
    # Each repository's own label (its .opbot.yaml); None: `trigger_label` everywhere.
    labels: TriggerLabels | None = None
    redactor: Redactor = field(default_factory=Redactor.from_environment)
    forge_secrets: dict[str, list[str]] = field(default_factory=dict)
    # Decides a plan the payload left open (a command on a GitHub pull request: whose is
    # it, which op?) by reading the forge, before it is queued under its op's job key.
    settle: Callable[[Plan], Plan] = field(default=settle_from_forge)
    # Seconds the whole body may take to arrive before the delivery is answered 408.
    body_timeout_s: float = field(default_factory=body_timeout_from_environment)
    body_budget: BodyBudget = field(default_factory=BodyBudget)
    # Dispatch mode: why a person's plan may not be handed over (None: it may), answered on
    # its thread; None: no check here (the job checks anyway).
    vet: Callable[[Plan], str | None] | None = None
    # Says a text on the plan's issue or pull request (a dispatch given up).
    report: Callable[[Plan, str], None] | None = None
    limits: Limits = field(default_factory=lambda: Limits(
        stuck_after_s=stuck_after_from_environment(),
        running_limit_s=2 * default_policy().wall_seconds))
    # Called with the reason when a worker thread died (a BaseException got out of it):
    # `opbot serve` ends the process so that systemd restarts it; None: /healthz says so.
    on_worker_death: Callable[[str], None] | None = None

    def secrets_for(self, forge: str) -> list[str]:
        return self.forge_secrets.get(forge) or self.secrets


def _answer(code: int, **body: Any) -> JSONResponse:
    return JSONResponse(body, status_code=code)


class _Refused(Exception):
    """A body not read to the end: the status and reason to answer with."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


_TOO_LARGE = f"the body is too large (over {MAX_BODY_BYTES // (1024 * 1024)} MB)"


async def _body(request: Request, timeout_s: float, budget: BodyBudget) -> bytes:
    """The body, read as it arrives: never more than MAX_BODY_BYTES of it held (with or
    without a Content-Length), and all of it within `timeout_s`; else _Refused."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise _Refused(413, _TOO_LARGE)
    try:
        return await asyncio.wait_for(_read_capped(request, budget), timeout_s)
    except asyncio.TimeoutError:
        raise _Refused(408, f"the body did not arrive within {timeout_s:g} s") from None
    except ClientDisconnect:
        raise _Refused(400, "the client went away before the body arrived") from None


async def _read_capped(request: Request, budget: BodyBudget) -> bytes:
    chunks: list[bytes] = []
    size = 0
    try:
        async with aclosing(request.stream()) as stream:
            async for chunk in stream:
                budget.take(len(chunk))  # one event loop: no lock needed
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    raise _Refused(413, _TOO_LARGE)
                chunks.append(chunk)
        return b"".join(chunks)
    finally:
        budget.give_back(size)


def _refuse(refused: _Refused) -> JSONResponse:
    """The answer to a body not read to the end; the connection closes with it (the rest
    of the body, if it ever comes, is not waited for)."""
    return JSONResponse({"status": "rejected", "reason": refused.reason},
                        status_code=refused.status, headers={"Connection": "close"})


def _accept(settings: ServerSettings, forge: ForgePlugin, event: str, payload: Any,
            delivery: str | None) -> JSONResponse:
    seen = f"{forge.name}:{delivery}"
    if delivery and not settings.queue.first_delivery(seen):
        return _answer(200, status="duplicate", delivery=delivery)
    try:
        return _take_in(settings, forge, event, payload, delivery)
    except Exception:
        if delivery:  # not taken in: a redelivery is a new try, not a duplicate
            settings.queue.forget_delivery(seen)
        raise


def _take_in(settings: ServerSettings, forge: ForgePlugin, event: str, payload: Any,
             delivery: str | None) -> JSONResponse:
    plan = settings.settle(_plan(settings, forge, event, payload))
    if plan.action == "ignore":
        log.info("ignored %s %s delivery %s: %s", forge.name, event, delivery or "-",
                 plan.reason)
        return _answer(202, status="accepted", action=plan.action, reason=plan.reason,
                       job=None)
    if plan.action == "cancel":
        return _cancel(settings, plan, delivery)
    queued = settings.queue.submit(job_key(plan), plan.to_json(),
                                   request_of(plan, settings.review_settle_s))
    log.info("accepted %s %s delivery %s: %s (%s)%s", forge.name, event, delivery or "-",
             plan.action, plan.reason, f", joined job {queued.job}" if queued.coalesced else "")
    return _answer(202, status="accepted", action=plan.action, reason=plan.reason,
                   job=queued.job, coalesced=queued.coalesced)


def _cancel(settings: ServerSettings, plan: Plan, delivery: str | None) -> JSONResponse:
    """`/cancel` is carried out at once, beside the job it stops (which holds the worker):
    queued jobs of the op are dropped, a running one is asked to stop. Who may cancel is
    checked like any command, in a job of its own that answers on the thread."""
    queued: Submitted = settings.queue.submit(f"{CONTROL_PREFIX}{job_key(plan)}",
                                              plan.to_json())
    log.info("accepted %s /cancel delivery %s for %s", plan.forge, delivery or "-",
             job_key(plan))
    return _answer(202, status="accepted", action=plan.action, reason=plan.reason,
                   job=queued.job, coalesced=False)


def _plan(settings: ServerSettings, forge: ForgePlugin, event: str, payload: Any) -> Plan:
    label = settings.labels.label_for(forge.name, forge.repo_of(payload)) \
        if settings.labels is not None else settings.trigger_label
    plan = plan_event(forge.name, event, payload,
                      bot_login=settings.identities.login(forge.name), trigger_label=label)
    # Work a server handed to CI: the CI system runs it, a server never does (it would run
    # it twice, or in dispatch mode hand it over again, for ever).
    if event == forge.dispatch_event and plan.action != "ignore":
        return Plan(action="ignore", reason="work handed to CI: it runs there, not here",
                    forge=forge.name, event=event, repo=plan.repo)
    return plan


def _parse(body: bytes) -> dict[str, Any]:
    """The delivery's JSON object, or PayloadError with the reason (bot/payload_json.py)."""
    payload = load_payload(body)
    if not isinstance(payload, dict):
        raise PayloadError("not a JSON object")
    return payload


async def _receive(settings: ServerSettings, forge: ForgePlugin,
                   request: Request) -> JSONResponse:
    secrets = settings.secrets_for(forge.name)
    if not forge.signs_body and not forge.authenticate(request.headers, b"", secrets):
        # A secret in a header (GitLab): refused before a byte of the body is read.
        return _refuse(_Refused(401, forge.rejection))
    try:
        body = await _body(request, settings.body_timeout_s, settings.body_budget)
    except _Refused as refused:
        return _refuse(refused)
    if not forge.authenticate(request.headers, body, secrets):
        return _answer(401, status="rejected", reason=forge.rejection)
    event = forge.event_name(request.headers)
    if not event:
        return _answer(400, status="rejected", reason=f"not a {forge.title} delivery (no "
                       "event header)")
    try:
        payload = await run_in_threadpool(_parse, body)  # walking 25 MB takes seconds
    except PayloadError as exc:
        where = f" (line {exc.line})" if exc.line is not None else ""
        return _answer(400, status="rejected", reason=f"not a {forge.title} delivery: the "
                       f"body is {exc.reason}{where}")
    # Planning may ask the forge who the bot is and which label a repository uses (both
    # cached): off the event loop, so one slow answer never holds up other deliveries.
    return await run_in_threadpool(_accept, settings, forge, event, payload,
                                   forge.delivery_id(request.headers))


def _delivery_outcome(response: JSONResponse) -> str:
    """accepted, ignored, duplicate or rejected: a bounded label for /metrics."""
    if response.status_code >= 400:
        return "rejected"
    if response.status_code == 200:
        return "duplicate"
    body = json.loads(bytes(response.body))
    return "ignored" if body.get("job") is None else "accepted"


def make_app(settings: ServerSettings, start_worker: bool = True) -> Starlette:
    beats = {name: Heartbeat(name) for name in WORKER_NAMES}
    deliveries = Deliveries()

    async def webhook(request: Request) -> JSONResponse:
        try:
            forge = registry.plugin(request.path_params["forge"])
        except registry.UnknownForgeError as exc:
            deliveries.count("unknown", "rejected")
            return _answer(404, status="rejected", reason=str(exc))
        answer = await _receive(settings, forge, request)
        deliveries.count(forge.name, _delivery_outcome(answer))
        return answer

    async def healthz(request: Request) -> JSONResponse:
        found = await run_in_threadpool(verdict, settings.queue, beats, settings.limits)
        if found.healthy:
            return _answer(200, status="ok", jobs=found.jobs, workers=found.workers)
        return _answer(503, status="unhealthy", reasons=list(found.reasons), jobs=found.jobs,
                       workers=found.workers)

    async def metrics(request: Request) -> Response:
        text = await run_in_threadpool(render, settings.queue,
                                       {name: beat.up for name, beat in beats.items()},
                                       deliveries)
        return Response(text, headers={"Content-Type": CONTENT_TYPE})

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        stop = threading.Event()
        workers = [threading.Thread(target=work, args=(settings, stop, name == "control",
                                                       beats[name]),
                                    daemon=True, name=f"opbot-{name}")
                   for name in WORKER_NAMES]
        if start_worker:
            for forge in registry.names():  # learn who the bot is before the first delivery
                settings.identities.login(forge)
            for worker, name in zip(workers, WORKER_NAMES, strict=True):
                beats[name].started(worker)
                worker.start()
        try:
            yield
        finally:
            stop.set()
            if start_worker:
                for worker in workers:
                    worker.join(timeout=5)

    return Starlette(routes=[Route("/webhook/{forge}", webhook, methods=["POST"]),
                             Route("/healthz", healthz, methods=["GET"]),
                             Route("/metrics", metrics, methods=["GET"])],
                     lifespan=lifespan)


def work(settings: ServerSettings, stop: threading.Event, control: bool = False,
         beat: Heartbeat | None = None) -> None:
    """A worker: one job at a time, in queue order. The control worker runs only the jobs
    that steer others (/cancel), so they never wait behind the job they stop. `beat` shows
    /healthz that it lives, and what ended it if something did."""
    beat = beat or Heartbeat("control" if control else "main")
    try:
        _work(settings, stop, control, beat)
    except BaseException as exc:
        beat.dead(type(exc).__name__)
        log.error("the %s worker stopped: %s", beat.name, type(exc).__name__)
        if settings.on_worker_death is not None and not stop.is_set():
            settings.on_worker_death(f"the {beat.name} worker died ({type(exc).__name__})")
        raise


def exit_for_restart(reason: str) -> None:
    """End `opbot serve` with EXIT_WORKER_DIED: a process whose worker is gone would answer
    webhooks and queue jobs for ever without running one, and systemd restarts only a
    process that ends. os._exit: the main thread is in uvicorn, which a thread cannot end
    with a status; the queue is durable (SQLite), and the next start requeues the job."""
    log.critical("%s: ending the process (status %d) so that it is restarted", reason,
                 EXIT_WORKER_DIED)
    logging.shutdown()
    os._exit(EXIT_WORKER_DIED)


@dataclass
class _Backoff:
    """Seconds to wait after each failure in a row: first, doubling, at most `ceiling`."""

    first: float = BACKOFF_FIRST_S
    ceiling: float = BACKOFF_MAX_S
    failures: int = 0

    def next(self) -> float:
        self.failures += 1
        return float(min(self.first * 2.0 ** (self.failures - 1), self.ceiling))

    def reset(self) -> None:
        self.failures = 0


def _work(settings: ServerSettings, stop: threading.Event, control: bool,
          beat: Heartbeat) -> None:
    """The worker's loop. Any Exception from the queue (sqlite3's `database is locked`
    after the busy timeout, slow storage) is logged and waited out with a growing pause:
    the loop itself ends only when `stop` is set."""
    backoff = _Backoff()
    recovered = control  # the control worker leaves recovery to the main one
    pruned_at: float | None = None if not control else float("inf")
    while not stop.is_set():
        beat.alive()
        try:
            if not recovered:
                _recover(settings)
                recovered = True
            if pruned_at is None or time.monotonic() - pruned_at >= PRUNE_EVERY_S:
                pruned_at = time.monotonic()
                _prune(settings)
            worked = _one_job(settings, stop, control, beat, backoff)
        except Exception as exc:  # noqa: BLE001 - the worker must outlive a locked queue
            delay = backoff.next()
            beat.queue_failed(settings.redactor.text(f"{type(exc).__name__}: {exc}")[:200])
            log.error("the %s worker could not use the queue (%s: %s): trying again in "
                      "%.0f s", beat.name, type(exc).__name__,
                      settings.redactor.text(str(exc)), delay)
            stop.wait(delay)
            continue
        backoff.reset()
        beat.queue_ok()
        if not worked:
            stop.wait(_POLL_S)


def _recover(settings: ServerSettings) -> None:
    recovered = settings.queue.recover()
    if recovered:
        log.info("requeued %d job(s) a previous run left unfinished", recovered)


def _prune(settings: ServerSettings) -> None:
    deliveries, jobs = settings.queue.prune()
    if deliveries or jobs:
        log.info("pruned %d delivery id(s) and %d finished job(s) past their retention",
                 deliveries, jobs)


def _one_job(settings: ServerSettings, stop: threading.Event, control: bool,
             beat: Heartbeat, backoff: _Backoff) -> bool:
    """Claim and carry out one job; False when there was none."""
    job = settings.queue.claim(control=control)
    if job is None:
        return False
    beat.running(job.id)
    try:
        handle_job(settings, job)
    except Exception as exc:  # noqa: BLE001 - one job's failure must not stop the worker
        detail = settings.redactor.text(traceback.format_exc()[-3000:])
        log.warning("job %d failed: %s\n%s", job.id, type(exc).__name__, detail)
        _end_failed(settings, stop, job, exc, backoff)
    finally:
        beat.running(None)
    return True


def _end_failed(settings: ServerSettings, stop: threading.Event, job: QueuedJob,
                error: Exception, backoff: _Backoff) -> None:
    """Record a failed job, however long the queue stays locked: a job left `running`
    would hold back every later job of its key until the next restart. (If the job's
    own end was recorded before the error, `abandon` leaves it as it is.)"""
    while not stop.is_set():
        try:
            settings.queue.abandon(job.id, {"error": type(error).__name__})
            return
        except Exception as exc:  # noqa: BLE001 - the queue may still be locked: wait
            delay = backoff.next()
            log.error("job %d: could not record its failure (%s): trying again in %.0f s",
                      job.id, type(exc).__name__, delay)
            stop.wait(delay)


def handle_job(settings: ServerSettings, job: QueuedJob) -> None:
    """Dry runs only log their plans; otherwise the job is dispatched or run here (in
    dispatch mode too for RUN_HERE plans: /help, /cancel)."""
    dispatch, execute = settings.dispatch, settings.execute
    here = job.plan.get("action") in RUN_HERE
    if settings.dry_run or (dispatch is None and execute is None):
        log.info("dry run: job %d would %s: %s", job.id, job.plan.get("action"),
                 json.dumps(job.plan, sort_keys=True))
        settings.queue.finish(job.id, True, {"dry_run": True})
    elif dispatch is not None and not here:
        dispatch_job(settings, dispatch, job)
    elif execute is not None:
        result = execute(Plan.from_json(job.plan),
                         lambda: settings.queue.cancel_requested(job.id))
        settings.queue.finish(job.id, bool(result.get("ok")), result)
    else:  # dispatch mode without a way to run anything here (some tests): not handed on
        log.info("job %d: %s is never handed to CI, and nothing runs it here", job.id,
                 job.plan.get("action"))
        settings.queue.finish(job.id, True, {"ok": True, "action": job.plan.get("action"),
                                             "dispatched": False})


def dispatch_job(settings: ServerSettings, dispatch: Callable[[Plan], Dispatch],
                 job: QueuedJob) -> None:
    """Hand one job to CI; a failure goes back to the queue or, for good, fails the job."""
    plan = Plan.from_json(job.plan)
    if plan.action == "ignore":  # never queued by this server; an old queue may hold one
        settings.queue.finish(job.id, True, {"action": "ignore", "dispatched": False})
        return
    # Each try is a claim of its own: a job /cancel or `opbot queue drop` asked to stop
    # while it waited for its next try (its cancel flag survives `retry`) stops here.
    if settings.queue.cancel_requested(job.id):
        log.info("job %d: %s for %s cancelled before it was handed to CI", job.id,
                 plan.action, plan.repo)
        settings.queue.finish_cancelled(job.id, {"cancelled": True, "action": plan.action,
                                                 "dispatched": False, "tries": job.runs - 1})
        return
    try:
        refusal = settings.vet(plan) if settings.vet is not None else None
        sent = dispatch(plan) if refusal is None else None
    except (ForgeError, OpbotError) as exc:
        _dispatch_failed(settings, job, plan, exc)
        return
    if sent is None:
        log.info("job %d: %s for %s refused, not handed to CI: %s", job.id, plan.action,
                 plan.repo, refusal)
        settings.queue.finish(job.id, True, {"ok": True, "action": plan.action,
                                             "outcome": "refused", "dispatched": False,
                                             "summary": f"refused: {refusal}"})
        return
    log.info("job %d: handed %s for %s to %s CI%s", job.id, plan.action, plan.repo,
             plan.forge, f" ({sent.url})" if sent.url else "")
    settings.queue.finish(job.id, True, {"ok": True, "action": plan.action,
                                         "dispatched": plan.forge, "pipeline": sent.id,
                                         "url": sent.url})


def _dispatch_failed(settings: ServerSettings, job: QueuedJob, plan: Plan,
                     error: Exception) -> None:
    reason = strip_url_credentials(settings.redactor.text(str(error)))[:4000]
    result = {"ok": False, "action": plan.action, "error": type(error).__name__,
              "reason": reason, "tries": job.runs}
    delay = settings.retry.delay(error, job.runs)
    if delay is None:
        log.warning("job %d: could not hand %s to %s CI (try %d), giving up: %s", job.id,
                    plan.action, plan.forge, job.runs, reason)
        settings.queue.finish(job.id, False, {**result, "given_up": True})
        settings.queue.bump(DISPATCH_GIVEN_UP)
        _report_given_up(settings, job, plan, reason)
        return
    settings.queue.bump(DISPATCH_RETRIES)
    log.warning("job %d: could not hand %s to %s CI (try %d of %d), again in %.0f s: %s",
                job.id, plan.action, plan.forge, job.runs, settings.retry.tries, delay, reason)
    settings.queue.retry(job.id, delay, result)


def _report_given_up(settings: ServerSettings, job: QueuedJob, plan: Plan,
                     reason: str) -> None:
    """Tell the issue or pull request, once (the job is finished): a person waits there."""
    if settings.report is None or plan.number is None:
        return
    try:
        settings.report(plan, given_up_text(job.runs, public_reason(reason), job.id))
    except (ForgeError, OpbotError) as exc:  # the forge that failed the dispatch may fail this
        log.warning("job %d: could not say so on %s#%s: %s", job.id, plan.repo, plan.number,
                    settings.redactor.text(str(exc)))


def serve(*, host: str, port: int, dry_run: bool, state_dir: Path,
          policy: Policy | None = None, dispatch: bool = False) -> None:
    import uvicorn

    from bot.dispatch import DispatchGuard, dispatch_from_environment
    from bot.jobs import run_plan_from_environment

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    policy = policy or default_policy()
    trigger_label, review_settle_s = policy.trigger_label, policy.review_settle_seconds
    queue = JobQueue(queue_path(state_dir))
    ledger = TokenMeter(queue, policy.usd_per_million_tokens)
    identities = Identities()
    guard = DispatchGuard(policy=policy, identities=identities, ledger=ledger)
    settings = ServerSettings(
        secrets=secrets_from_environment(), forge_secrets=forge_secrets_from_environment(),
        queue=queue, dry_run=dry_run,
        identities=identities, trigger_label=trigger_label, review_settle_s=review_settle_s,
        labels=TriggerLabels(policy, policy_text_from_environment(os.environ)),
        execute=lambda plan, stopped: run_plan_from_environment(
            plan, ledger=ledger, jobs=queue, identities=identities,
            stopped=stopped, policy=policy).to_json(),
        dispatch=dispatch_from_environment if dispatch else None,
        vet=guard.refusal if dispatch else None, report=guard.report if dispatch else None,
        limits=Limits(stuck_after_s=stuck_after_from_environment(),
                      running_limit_s=2 * policy.wall_seconds),
        on_worker_death=exit_for_restart)
    if not dispatch:
        # Jobs run in this process (a scan verifies operator after operator here): its
        # verifications fork from pre-imported workers (runners/warm.py).
        from runners import warm
        from runners.warm_broker import BROKER_VARIABLE, Broker

        warm.enable()
        if not os.environ.get(BROKER_VARIABLE):
            # The generation steps are processes of their own (no forge credentials): they
            # borrow this process's warm servers rather than start cold workers.
            os.environ.update(Broker(pool_size=len(WORKER_NAMES)).environment())
    log.info("%s", mode_line(dispatch=dispatch, dry_run=dry_run))
    uvicorn.run(make_app(settings), host=host, port=port, log_level="info")


def mode_line(*, dispatch: bool, dry_run: bool) -> str:
    """What `opbot serve` does with a job, said at start: run mode runs untrusted code on
    this host, and an operator must see which mode a unit ended up in."""
    mode = ("dispatch mode: jobs are handed to the CI system, not run here (/help and "
            "/cancel are answered here)" if dispatch else
            "run mode: jobs run on this host under the sandbox (set OPBOT_DISPATCH=1 or "
            "pass --dispatch to hand them to CI instead)")
    return f"{mode}; dry run: jobs only log their plans" if dry_run else mode
