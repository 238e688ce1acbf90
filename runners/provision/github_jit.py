#!/usr/bin/env python3
"""Register one ephemeral just-in-time (JIT) GitHub Actions runner, then start it.

A JIT runner is registered for exactly one job: GitHub hands back a one-time configuration,
the runner takes one job and is removed. Started in a fresh container (``--docker-image``),
nothing a job leaves behind -- files, processes, a poisoned cache -- reaches the next job.
Run this under a supervisor that starts it again when it exits (opbot-github-runner@.service
beside this file) and the host always offers one fresh runner per NPU.

Security: the token that may register runners (``OPBOT_RUNNER_ADMIN_TOKEN`` by default) is
read from the environment only, never from the command line (other users see argv in ps);
it is never printed, and it is removed from the environment of the runner, which only gets
the one-time JIT configuration -- through the environment variable the runner reads its
``--jitconfig`` input from, again to keep it out of ps.

Standard library only, so the file runs on a runner host without opbot installed::

    python3 github_jit.py --org ORG --runner-group-id 7 --soc ascend910b3 \\
        --docker-image opbot-ascend:8.3 --npu 0 --preflight "docker run --rm ..."
    python3 github_jit.py ... --dry-run      # print the request and the launch; send nothing

--org / --repo default to $OPBOT_GITHUB_ORG / $OPBOT_GITHUB_REPO (exactly one), so the same
systemd unit serves an organisation or one repository.

Broker mode (``--broker URL``): the host holds no token that may register runners, only its
own host token (``OPBOT_BROKER_TOKEN``); jit_broker.py, holding the GitHub App's key, asks
GitHub and lets the host register only into its own group with its own labels (broker.md).
"""

from __future__ import annotations

import argparse
import email.utils
import grp
import json
import math
import os
import random
import re
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal, TypeVar

if __package__:
    from runners.provision import job_limits
else:  # run as a script; `python3 -I` leaves this folder off sys.path, so put it back
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import job_limits  # type: ignore[no-redef,import-not-found]

API_VERSION = "2022-11-28"
DEFAULT_API_URL = "https://api.github.com"
DEFAULT_TOKEN_ENV = "OPBOT_RUNNER_ADMIN_TOKEN"  # noqa: S105 - a variable name, not a token
BROKER_URL_ENV = "OPBOT_BROKER_URL"
BROKER_TOKEN_ENV = "OPBOT_BROKER_TOKEN"  # noqa: S105 - a variable name, not a token
BROKER_PATH = "/v1/jitconfig"
POLICY_ENV = "OPBOT_POLICY"
# Where register_gitlab_runner.sh looks too: one policy file per host for both forges.
DEFAULT_POLICY = Path("/etc/opbot/policy.yaml")
SYSTEMPATHS_ENV = "OPBOT_DOCKER_SYSTEMPATHS"
SYSTEMPATHS_CHOICES = ("masked", "unconfined")
ORG_ENV = "OPBOT_GITHUB_ORG"
REPO_ENV = "OPBOT_GITHUB_REPO"
HERE = Path(__file__).resolve().parent
# Docker's default profile lets unshare/namespace clone through only with CAP_SYS_ADMIN,
# which a job container must not have; this one lets bubblewrap build its sandbox
# unprivileged and denies the rest (seccomp-bwrap.md says what and why).
DEFAULT_SECCOMP_PROFILE = HERE / "seccomp-bwrap.json"
APPARMOR_ENABLED = Path("/sys/module/apparmor/parameters/enabled")
APPARMOR_PROFILE = "opbot-bwrap"
# Longer than a job needs to wind down after SIGTERM, shorter than the unit's TimeoutStopSec
# (120 s), so docker's SIGKILL comes before systemd's.
STOP_TIMEOUT_S = 100
# GitHub: without retry-after or a reset time, wait at least a minute, then longer.
BACKOFF_FIRST_S = 60.0
BACKOFF_CAP_S = 900.0
DEFAULT_RATE_LIMIT_WAIT_MAX_S = 3600.0
# Every wait at least this long: a `Retry-After: 0` must not turn into a tight loop.
MIN_WAIT_S = 1.0
# Tries per request, besides the total wait: waits of a second each stay bounded too.
MAX_ATTEMPTS = 8
# Header numbers: ASCII digits only, and few enough that int() and float() cannot fail.
_HEADER_SECONDS = re.compile(r"[0-9]{1,10}")
# actions/runner reads any command-line input NAME from ACTIONS_RUNNER_INPUT_<NAME> as well;
# actions-runner-controller starts its runners the same way.
JITCONFIG_ENV = "ACTIONS_RUNNER_INPUT_JITCONFIG"
BASE_LABELS = ("self-hosted", "ascend")
# Besides one /dev/davinci<N> per chip, every process using an NPU needs these.
CONTROL_NODES = ("davinci_manager", "devmm_svm", "hisi_hdc")
# The driver lives on the host and must match the kernel module, so it is mounted, never
# baked into the image. Read-only: a job must not be able to change the host's driver.
DRIVER_MOUNTS = ("/usr/local/Ascend/driver", "/usr/local/dcmi", "/usr/local/bin/npu-smi")
OPTIONAL_MOUNTS = ("/etc/ascend_install.info",)
# The driver installer gives the device nodes to this group.
ASCEND_GROUP = "HwHiAiUser"
IMAGE_RUN_SH = "/home/opbot/actions-runner/run.sh"
IMAGE_CHECK_RUNNER = "/usr/local/lib/opbot/check_runner.sh"
# Exit statuses, for a supervisor to tell "try again later" from "a human must fix this"
# (opbot-github-runner@.service does not restart on 2 or 3).
EXIT_RETRY = 1  # network trouble, a failed pre-flight, a name clash: may pass next time
EXIT_USAGE = 2  # bad command line (argparse's own status)
EXIT_CONFIG = 3  # configuration or permission problem (GitHub refused it): retrying cannot help
ConfigVia = Literal["env", "argv"]
Scope = Literal["org", "repo"]
# Variables that look like credentials stay out of the runner's environment: a job gets its
# secrets from GitHub, and anything else here would be readable by the job's code.
# Word-based, like runners/sandbox.py's is_secret_name (not imported: this file runs
# standalone with the host's python3): a marker ends or starts a word of the name (GH_PAT,
# AWS_SECRET_ACCESS_KEY, AUTH_HEADER), and PAT only ends one, so PATH stays.
_SECRET_MARKERS = ("TOKEN", "SECRET", "KEY", "PASS", "PAT", "CRED", "AUTH", "COOKIE",
                   "SESSION", "PRIVATE", "CERT")
_SECRET_INFIXES = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "COOKIE", "PRIVATE",
                   "ACCESS_KEY", "ACCESSKEY", "APIKEY")
# A docker image reference: [registry[:port]/]name[/name...][:tag][@sha256:digest]. Leading
# '-' impossible (it would be read as a docker flag), no whitespace or control characters.
_IMAGE_REF = re.compile(
    r"[A-Za-z0-9][A-Za-z0-9._-]*(?::[0-9]{1,5})?(?:/[a-z0-9][a-z0-9._-]*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?(?:@sha256:[0-9a-f]{64})?")
_NPU_NUMBER = re.compile(r"[0-9]{1,4}")
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")
# The user the job container runs as: the opbot image's own (uid and gid 10001). Named on the
# docker command line, so an image whose USER is root cannot run the job as root.
JOB_USER_ENV = "OPBOT_JOB_USER"
DEFAULT_JOB_USER = "10001:10001"
# register_gitlab_runner.sh's check_job_user takes the same: decimal ids or plain names.
_JOB_USER_ID = re.compile(r"[0-9]{1,10}")
_JOB_USER_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
_NPU_ROW = re.compile(
    r"^\|\s*(?P<id>\d+)\s+(?P<name>[A-Za-z0-9][\w.-]*)\s*\|\s*(?P<health>[A-Za-z]+)", re.MULTILINE)


class ProvisionError(Exception):
    """A failure explained for the operator; the command line prints it without a traceback."""

    @property
    def exit_status(self) -> int:
        return EXIT_RETRY


class ConfigError(ProvisionError):
    """Something only the operator can fix: a missing token, an unknown chip."""

    @property
    def exit_status(self) -> int:
        return EXIT_CONFIG


class JitApiError(ProvisionError):
    """GitHub refused or could not be asked for a JIT configuration."""

    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(message)
        self.status = status

    @property
    def exit_status(self) -> int:
        # 409 (name taken) and 5xx may pass with the next name or a minute later; a
        # refused token or request (400 is the broker's word for a bad one) will not.
        return EXIT_CONFIG if self.status in (400, 401, 403, 404, 422) else EXIT_RETRY


@dataclass(frozen=True)
class JitRequest:
    """POST .../actions/runners/generate-jitconfig for an organisation or a repository."""

    api_url: str
    scope: Scope
    target: str
    name: str
    runner_group_id: int
    labels: tuple[str, ...]
    work_folder: str = "_work"
    method: str = field(default="POST", init=False)

    @property
    def url(self) -> str:
        base = self.api_url.rstrip("/")
        if self.scope == "org":
            return f"{base}/orgs/{_quote(self.target)}/actions/runners/generate-jitconfig"
        owner, _, repo = self.target.partition("/")
        return f"{base}/repos/{_quote(owner)}/{_quote(repo)}/actions/runners/generate-jitconfig"

    def body(self) -> dict[str, Any]:
        return {"name": self.name, "runner_group_id": self.runner_group_id,
                "labels": list(self.labels), "work_folder": self.work_folder}

    def headers(self, authorization: str) -> dict[str, str]:
        return {"Accept": "application/vnd.github+json", "Authorization": authorization,
                "Content-Type": "application/json", "X-GitHub-Api-Version": API_VERSION,
                "User-Agent": "opbot-runner-provision"}


@dataclass(frozen=True)
class JitConfig:
    """GitHub's answer. The encoded configuration is a credential: kept out of repr."""

    runner_id: int | None
    runner_name: str
    encoded: str = field(repr=False)


@dataclass(frozen=True)
class Launch:
    """How the runner starts once the configuration is there."""

    argv: tuple[str, ...]
    config_via: ConfigVia
    # Host paths the launch needs and what else it lacks; checked before registering, so
    # that a misconfigured host does not burn a registration.
    required_paths: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    # Run before anything else: removes what a killed predecessor may have left running.
    cleanup: tuple[str, ...] = ()

    def resolved_argv(self, encoded: str) -> list[str]:
        if self.config_via == "argv":
            return [*self.argv, "--jitconfig", encoded]
        return list(self.argv)

    def describe(self) -> dict[str, Any]:
        shown = self.resolved_argv("<encoded_jit_config>")
        via = "argv --jitconfig" if self.config_via == "argv" else f"env {JITCONFIG_ENV}"
        return {"argv": shown, "command": shlex.join(shown), "jitconfig_via": via,
                "cleanup": list(self.cleanup) or None}


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    # urllib would resend the Authorization header to wherever a redirect points; the API
    # does not redirect this call, so a redirect is an error rather than a hop.
    def redirect_request(  # noqa: PLR0917 - urllib's signature
            self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
            headers: Any, newurl: str) -> None:
        return None


T = TypeVar("T")


class RateLimited(JitApiError):
    """Still rate limited after waiting as long as allowed: a later start will pass."""

    def __init__(self, status: int | None, message: str, retry_after: float) -> None:
        super().__init__(status, message)
        self.retry_after = retry_after

    @property
    def exit_status(self) -> int:
        return EXIT_RETRY


class HttpFailure(Exception):
    """An HTTP error answer: status, headers (names lower-cased) and body text."""

    def __init__(self, status: int, headers: Mapping[str, str], body: str) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def message(self) -> str:
        """GitHub's own `message` and `errors`, shortened: they name what was wrong."""
        payload = _json_or_none(self.body)
        if payload is None:
            return self.body.strip()[:300]
        if not isinstance(payload, dict):
            return ""
        parts = [str(payload.get("message", "")).strip()]
        errors = payload.get("errors")
        if isinstance(errors, list):
            parts += [json.dumps(error, sort_keys=True) if isinstance(error, dict)
                      else str(error) for error in errors[:3]]
        return "; ".join(part for part in parts if part)[:500]


@dataclass(frozen=True)
class Waits:
    """How long rate limits may hold a registration up; clock and sleep swappable in tests."""

    wait_max: float = DEFAULT_RATE_LIMIT_WAIT_MAX_S
    sleep: Callable[[float], None] = time.sleep
    now: Callable[[], float] = time.time
    attempts_max: int = MAX_ATTEMPTS


def _json_or_none(text: str) -> Any:
    """`text` decoded, or None when it is no JSON (or nested too deep to decode)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def post_json(url: str, body: Mapping[str, Any], headers: Mapping[str, str], *,
              timeout: float) -> Any:
    """POSTs JSON, returns the decoded answer; HttpFailure for an error status."""
    if urllib.parse.urlsplit(url).scheme not in ("https", "http"):
        raise ConfigError(f"{url!r} is not an http(s) URL")
    http_request = urllib.request.Request(  # noqa: S310 - scheme checked just above
        url, data=json.dumps(body).encode(), method="POST", headers=dict(headers))
    opener = urllib.request.build_opener(*_handlers(url))
    try:
        with opener.open(http_request, timeout=timeout) as response:
            return json.loads(response.read().decode("utf-8", "replace") or "null")
    except urllib.error.HTTPError as exc:
        try:
            text = exc.read().decode("utf-8", "replace")
        except OSError:
            text = ""
        raise HttpFailure(exc.code, {key.lower(): value for key, value in exc.headers.items()},
                          text) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise JitApiError(None, f"could not reach {url}: {reason}") from None
    except (ValueError, RecursionError):
        # RecursionError: a body nested thousands deep is no answer either, not a crash.
        raise JitApiError(None, f"{url} answered with something that is not JSON") from None


def _handlers(url: str) -> list[urllib.request.BaseHandler]:
    """No redirects ever; and no proxy for this host itself (the broker, tests).

    urllib honours $http_proxy: a plain-http request to 127.0.0.1 would go, token and all,
    in clear text to the proxy. An https URL keeps the operator's proxy, which then sees
    only an encrypted tunnel.
    """
    handlers: list[urllib.request.BaseHandler] = [_NoRedirects()]
    if is_loopback(url):
        handlers.append(urllib.request.ProxyHandler({}))
    return handlers


def rate_limit_delay(failure: HttpFailure, attempt: int, now: float) -> float | None:
    """Seconds to wait before asking again, or None when `failure` is no rate limit.

    GitHub's advice: a 429, or a 403 that is a secondary rate limit or an exhausted
    primary one, is a rate limit. Wait `retry-after` seconds when given; else, when
    `x-ratelimit-remaining` is 0, until `x-ratelimit-reset` (epoch seconds); else at least
    a minute, longer each time (exponential, with jitter so that many hosts limited at
    once do not come back at once).
    """
    headers = failure.headers
    exhausted = headers.get("x-ratelimit-remaining", "").strip() == "0"
    limited = failure.status == 429 or (failure.status == 403 and (
        "retry-after" in headers or exhausted
        or "secondary rate limit" in failure.body.lower()))
    if not limited:
        return None
    retry_after = _retry_after(headers.get("retry-after", ""), now)
    if retry_after is not None:
        return _bounded(retry_after)
    reset = headers.get("x-ratelimit-reset", "").strip()
    if exhausted and _HEADER_SECONDS.fullmatch(reset):
        return _bounded(max(int(reset) - now, 0.0) + 1.0)  # + 1: the reset second itself
    backoff = min(BACKOFF_FIRST_S * 2.0 ** min(attempt, 16), BACKOFF_CAP_S)
    return min(backoff * (1 + random.uniform(0, 0.25)), BACKOFF_CAP_S)  # noqa: S311 - jitter


def _bounded(delay: float) -> float:
    # At least a second (no tight loop), at most the backoff cap (a header cannot park the
    # host for days).
    return min(max(delay, MIN_WAIT_S), BACKOFF_CAP_S)


def _retry_after(value: str, now: float) -> float | None:
    """Seconds to wait from a Retry-After header; None when absent, odd or not ahead.

    Seconds as GitHub sends them (ASCII digits only: "nan", "1e999" or "²" are no
    number), or an HTTP date, which HTTP also allows. A value of 0 or a date in the past
    gives None: the caller's backoff, never an immediate retry.
    """
    value = value.strip()
    if not value:
        return None
    if _HEADER_SECONDS.fullmatch(value):
        seconds = float(value)
    else:
        try:
            when = email.utils.parsedate_to_datetime(value)
            seconds = when.timestamp() - now
        except (TypeError, ValueError, OverflowError, IndexError):
            return None
    return seconds if math.isfinite(seconds) and seconds > 0 else None


def with_rate_limits(send: Callable[[], T], waits: Waits, what: str) -> T:
    """`send()`, asked again while it is rate limited, up to `waits.wait_max` seconds in all.

    A rate limit never stops the host for good: past the bound it is RateLimited, which
    exits 1 (the supervisor starts again), never 3.
    """
    waited = 0.0
    started = waits.now()
    attempt = 0
    while True:
        try:
            return send()
        except HttpFailure as failure:
            delay = rate_limit_delay(failure, attempt, waits.now())
            if delay is None:
                raise
            # Time spent asking counts as well as time asleep: the broker's caller has a
            # deadline of its own.
            spent = max(waited, waits.now() - started)
            if spent + delay > waits.wait_max or attempt + 1 >= waits.attempts_max:
                raise RateLimited(failure.status, (
                    f"{what}: still rate limited ({failure.status}) after {attempt + 1} "
                    f"tries and {spent:.0f} s; the next try would wait {delay:.0f} s more "
                    f"(at most {waits.wait_max:.0f} s and {waits.attempts_max} tries in "
                    "all). A later start will try again"), retry_after=delay) from None
            print(f"github_jit: {what}: rate limited ({failure.status}); waiting "
                  f"{delay:.0f} s", file=sys.stderr)
            waits.sleep(delay)
            waited += delay
            attempt += 1


def request_jit_config(request: JitRequest, token: str, *, timeout: float = 30.0,
                       waits: Waits | None = None) -> JitConfig:
    """Asks GitHub for the JIT configuration. Raises JitApiError with a readable message."""
    if urllib.parse.urlsplit(request.url).scheme not in ("https", "http"):
        raise ConfigError(f"--api-url must be an http(s) URL, not {request.api_url!r}")
    try:
        payload = with_rate_limits(
            lambda: post_json(request.url, request.body(),
                              request.headers(f"Bearer {token}"), timeout=timeout),
            waits or Waits(), f"{request.method} {request.url}")
    except HttpFailure as failure:
        raise _redacted(_api_error(failure, request), token) from None
    except JitApiError as error:
        raise _redacted(error, token) from None
    return jit_config_from(payload, request.name, "GitHub")


def jit_config_from(payload: Any, default_name: str, who: str) -> JitConfig:
    encoded = payload.get("encoded_jit_config") if isinstance(payload, dict) else None
    if not isinstance(encoded, str) or not encoded:
        raise JitApiError(None, f"{who}'s answer has no encoded_jit_config")
    runner = payload.get("runner") if isinstance(payload.get("runner"), dict) else {}
    runner_id = runner.get("id")
    return JitConfig(runner_id=runner_id if isinstance(runner_id, int) else None,
                     runner_name=str(runner.get("name") or default_name), encoded=encoded)


def request_via_broker(broker_url: str, host_token: str, request: JitRequest, *,
                       timeout: float = 30.0, waits: Waits | None = None) -> JitConfig:
    """Asks jit_broker.py, which holds the App's key, for this host's JIT configuration."""
    url = broker_url.rstrip("/") + BROKER_PATH
    body = {**request.body(), request.scope: request.target}
    headers = {"Authorization": f"Bearer {host_token}", "Content-Type": "application/json",
               "User-Agent": "opbot-runner-provision"}
    try:
        payload = with_rate_limits(lambda: post_json(url, body, headers, timeout=timeout),
                                   waits or Waits(), f"POST {url}")
    except HttpFailure as failure:
        hint = {401: "the broker does not know this host token ($OPBOT_BROKER_TOKEN)",
                403: "the broker does not let this host register that runner (its group, "
                     "labels and name prefix are fixed in the broker's configuration)",
                400: "the broker refused the request body"}.get(failure.status)
        text = f"the broker answered {failure.status} to POST {url}: " + (
            hint or "unexpected answer")
        if failure.message:
            text += f" (it says: {failure.message})"
        raise _redacted(JitApiError(failure.status, text), host_token) from None
    except JitApiError as error:
        raise _redacted(error, host_token) from None
    return jit_config_from(payload, request.name, "the broker")


def _api_error(failure: HttpFailure, request: JitRequest) -> JitApiError:
    detail = failure.message
    where = "organisation" if request.scope == "org" else "repository"
    hints = {
        401: "the token was refused (expired, revoked or mistyped)",
        403: (f"the token may not manage runners of this {where} (a classic token needs "
              "admin:org for an organisation, repo for a repository; a fine-grained token or "
              "a GitHub App needs 'Self-hosted runners: write' on the organisation or "
              f"'Administration: write' on the repository), or runner group "
              f"{request.runner_group_id} is not open to it"),
        404: f"no such {where} or runner group {request.runner_group_id}, or the token cannot "
             "see it",
        409: f"a runner named {request.name!r} already exists; pick another --name",
        422: "GitHub refused the request body: check --runner-group-id, the labels and --name",
    }
    hint = hints.get(failure.status, "unexpected answer")
    text = f"GitHub answered {failure.status} to {request.method} {request.url}: {hint}"
    if detail:
        text += f" (GitHub says: {detail})"
    return JitApiError(failure.status, text)


def _redacted(error: JitApiError, token: str) -> JitApiError:
    # Belt and braces: no message leaves this module with the token in it, whatever a
    # server or a proxy chose to echo.
    text = str(error)
    if token and token in text:
        error.args = (text.replace(token, "***"),)
    return error


def _quote(part: str) -> str:
    return urllib.parse.quote(part, safe="")


# -- the host ------------------------------------------------------------------------------


def parse_npu_smi(text: str) -> list[tuple[int, str, str]]:
    """(npu id, chip name, health) for each chip row of `npu-smi info`'s table."""
    return [(int(match["id"]), match["name"], match["health"])
            for match in _NPU_ROW.finditer(text)]


def soc_label(chip_name: str) -> str:
    """The runner label for a chip: 910B3 and Ascend910B3 both give ascend910b3."""
    name = chip_name.strip().lower().removeprefix("ascend")
    return f"ascend{name}"


def detect_soc() -> str | None:
    """The label of this host's first NPU, from `npu-smi info`; None when it cannot tell."""
    npu_smi = shutil.which("npu-smi") or (
        "/usr/local/bin/npu-smi" if Path("/usr/local/bin/npu-smi").exists() else None)
    if npu_smi is None:
        return None
    try:
        done = subprocess.run([npu_smi, "info"], capture_output=True, text=True, timeout=60,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    rows = parse_npu_smi(done.stdout)
    return soc_label(rows[0][1]) if done.returncode == 0 and rows else None


def npu_device_nodes(chips: Sequence[int] | None, dev_dir: Path = Path("/dev")) -> list[str]:
    """The device nodes a job on `chips` needs (all chips of the host when None)."""
    if chips is None:
        found = (re.fullmatch(r"davinci(\d+)", path.name) for path in dev_dir.glob("davinci*"))
        chips = sorted(int(match[1]) for match in found if match)
    return ([str(dev_dir / f"davinci{chip}") for chip in chips]
            + [str(dev_dir / node) for node in CONTROL_NODES])


def ascend_group_id() -> int | None:
    try:
        return grp.getgrnam(ASCEND_GROUP).gr_gid
    except KeyError:
        return None


@dataclass(frozen=True)
class Confinement:
    """What fences a job container in besides its devices: syscalls, LSM profile, limits."""

    seccomp_profile: Path
    apparmor: bool
    limits: job_limits.JobLimits = field(default_factory=job_limits.JobLimits)
    # Docker masks parts of /proc (kcore, keys, timer_list, ...) with mounts over them; the
    # kernel then refuses bwrap a fresh /proc in its user namespace ("Can't mount proc").
    # Unmasking is the operator's choice (check_runner.sh says when it is needed): the job
    # runs as a non-root user without capabilities, who can read or write little of it.
    unmask_proc: bool = False
    # docker run --user: never the image's own USER, which a custom image may set to root.
    user: str = DEFAULT_JOB_USER


def apparmor_enabled(flag: Path = APPARMOR_ENABLED) -> bool:
    """Whether the host's kernel runs AppArmor (docker refuses an apparmor= option if not)."""
    try:
        return flag.read_text(encoding="ascii").strip() == "Y"
    except (OSError, UnicodeDecodeError):
        return False


def container_name(chips: Sequence[int] | None) -> str:
    # Fixed per chip, not per registration: a container left over from a killed runner
    # then has a name this host knows and removes before the next start. One chip gives
    # opbot-runner-npu<N>, the name opbot-github-runner@<N>.service stops and removes; that
    # unit runs one chip per instance (several chips: a unit of your own, README.md).
    return "opbot-runner-npu" + ("-".join(map(str, chips)) if chips else "all")


def preflight_container_name(chips: Sequence[int] | None) -> str:
    # Named too: `systemctl stop` during the pre-flight (KillMode=mixed) kills only the
    # docker client; the unit then removes the container by this name.
    return container_name(chips) + "-preflight"


def docker_run_prefix(chips: Sequence[int] | None, group_id: int | None,
                      confinement: Confinement) -> list[str]:
    """`docker run --rm` with the NPUs, the driver and nothing else of the host."""
    argv = ["docker", "run", "--rm",
            # tini as PID 1: forwards docker's SIGTERM to the runner and reaps the orphans
            # a job leaves (compilers, bwrap's children), whatever the entrypoint does.
            "--init",
            # The image's HEALTHCHECK probes `opbot serve`; a job container has none.
            "--no-healthcheck",
            "--stop-timeout", str(STOP_TIMEOUT_S),
            "--user", confinement.user,
            "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges",
            "--security-opt", f"seccomp={confinement.seccomp_profile}"]
    if confinement.apparmor:
        argv += ["--security-opt", f"apparmor={APPARMOR_PROFILE}"]
    if confinement.unmask_proc:
        argv += ["--security-opt", "systempaths=unconfined"]
    argv += confinement.limits.docker_flags()
    for device in npu_device_nodes(chips):
        argv += ["--device", device]
    for mount in [*DRIVER_MOUNTS, *(path for path in OPTIONAL_MOUNTS if Path(path).exists())]:
        argv += ["--volume", f"{mount}:{mount}:ro"]
    if group_id is not None:
        argv += ["--group-add", str(group_id)]
    if chips:
        # CANN numbers the chips a process may use by logical id from 0, in ascending
        # order; the container has only its own device nodes, so they are 0..k-1 there.
        visible = ",".join(str(index) for index in range(len(chips)))
        argv += ["--env", f"ASCEND_RT_VISIBLE_DEVICES={visible}"]
    return argv


def docker_launch(image: str, *, chips: Sequence[int] | None, group_id: int | None,
                  config_via: ConfigVia, confinement: Confinement,
                  run_sh: str = IMAGE_RUN_SH) -> Launch:
    """The runner in a fresh container that sees only its NPUs, removed after its job."""
    name = container_name(chips)
    argv = [*docker_run_prefix(chips, group_id, confinement), "--name", name]
    if config_via == "env":
        # `--env NAME` without a value: docker copies it from its own environment, so the
        # configuration is not on docker's command line either.
        argv += ["--env", JITCONFIG_ENV]
    argv += [image, run_sh]
    # The image runs as a non-root user, which opens the NPU nodes only through their group.
    problems = () if group_id is not None else (
        f"group of the NPU device nodes: no {ASCEND_GROUP} group here; pass --ascend-gid",)
    return Launch(argv=tuple(argv), config_via=config_via,
                  required_paths=(*npu_device_nodes(chips), *DRIVER_MOUNTS),
                  problems=problems,
                  cleanup=("docker", "rm", "-f", name, preflight_container_name(chips)))


def local_launch(runner_dir: Path, config_via: ConfigVia) -> Launch:
    """run.sh of an unconfigured runner unpacked in `runner_dir` (a VM thrown away after)."""
    run_sh = str(runner_dir / "run.sh")
    return Launch(argv=(run_sh,), config_via=config_via, required_paths=(run_sh,))


def runner_environment(environ: Mapping[str, str], token_env: str) -> dict[str, str]:
    """The runner's environment: this one without the admin token or anything like a secret."""
    return {name: value for name, value in environ.items()
            if name not in (token_env, JITCONFIG_ENV) and not is_secret_name(name)}


def is_secret_name(name: str) -> bool:
    """Whether a variable's name marks a credential (GH_PAT, AWS_ACCESS_KEY_ID, DB_PASS)."""
    upper = name.upper()
    if any(infix in upper for infix in _SECRET_INFIXES):
        return True
    for word in re.split(r"[^A-Z0-9]+", upper):
        for marker in _SECRET_MARKERS:
            if word.endswith(marker) or (marker != "PAT" and word.startswith(marker)):
                return True
    return False


def default_runner_name(soc: str, chips: Sequence[int] | None) -> str:
    # Unique per registration: GitHub refuses (409) a second runner with the same name.
    where = "-npu" + "_".join(map(str, chips)) if chips else ""
    return f"{socket.gethostname().split('.')[0]}-{soc}{where}-{secrets.token_hex(3)}"


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(item for item in items if item))


# -- the command line ----------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="github_jit.py",
        description="Register one ephemeral just-in-time GitHub Actions runner and start it.")
    # Not required here: $OPBOT_GITHUB_ORG / $OPBOT_GITHUB_REPO are the defaults, so one
    # unit file serves both levels (_where below).
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--org", help=f"register at the organisation (runner groups; "
                                     f"default: ${ORG_ENV})")
    where.add_argument("--repo", metavar="OWNER/REPO",
                       help=f"register at one repository (default: ${REPO_ENV})")
    parser.add_argument("--runner-group-id", type=int, required=True,
                        help="runner group to join (GitHub requires one; the repository "
                             "level's default group is 1)")
    parser.add_argument("--soc", default=os.environ.get("OPBOT_RUNNER_SOC"),
                        help="chip label such as ascend910b3 (default: $OPBOT_RUNNER_SOC, "
                             "else read from npu-smi)")
    parser.add_argument("--label", action="append", default=[],
                        help="extra label (repeatable)")
    parser.add_argument("--name", help="runner name (default: host-soc-random)")
    parser.add_argument("--work-folder", default="_work")
    parser.add_argument("--api-url", default=os.environ.get("GITHUB_API_URL", DEFAULT_API_URL),
                        help="REST API root (GitHub Enterprise Server: https://HOST/api/v3)")
    parser.add_argument("--token-env", default=None,
                        help=f"environment variable holding the token (default: "
                             f"{DEFAULT_TOKEN_ENV}; with --broker, {BROKER_TOKEN_ENV})")
    parser.add_argument("--broker", default=os.environ.get(BROKER_URL_ENV) or None,
                        metavar="URL",
                        help=f"ask jit_broker.py at URL instead of GitHub: the host then "
                             f"holds only its host token (default: ${BROKER_URL_ENV})")
    parser.add_argument("--rate-limit-wait-max", type=float,
                        default=DEFAULT_RATE_LIMIT_WAIT_MAX_S, metavar="SECONDS",
                        help="wait at most this long in all for rate limits to lift, then "
                             "exit 1 (default: %(default)s)")
    launch = parser.add_mutually_exclusive_group()
    launch.add_argument("--docker-image",
                        help="run the runner in a fresh container of this image (recommended)")
    launch.add_argument("--runner-dir", type=Path,
                        default=Path(os.environ.get("RUNNER_DIR", "~/actions-runner")),
                        help="unconfigured actions/runner directory (default: %(default)s)")
    parser.add_argument("--npu", help="with --docker-image: chips to pass, e.g. 0 or 0,1 "
                                      "(default: all)")
    parser.add_argument("--ascend-gid", type=int,
                        help=f"with --docker-image: group id owning the NPU nodes (default: "
                             f"the host's {ASCEND_GROUP} group)")
    parser.add_argument("--seccomp-profile", type=Path, default=DEFAULT_SECCOMP_PROFILE,
                        help="with --docker-image: the container's seccomp profile (default: "
                             "seccomp-bwrap.json beside this script)")
    parser.add_argument("--apparmor-enabled-file", type=Path, default=APPARMOR_ENABLED,
                        help=f"where the kernel says whether AppArmor is on; when it is, "
                             f"the container gets --security-opt apparmor={APPARMOR_PROFILE} "
                             "(default: %(default)s)")
    parser.add_argument("--systempaths", choices=SYSTEMPATHS_CHOICES,
                        default=os.environ.get(SYSTEMPATHS_ENV) or "unconfined",
                        help="with --docker-image: 'unconfined' unmasks /proc so opbot's "
                             "sandbox (bubblewrap) can mount a fresh one; 'masked' keeps "
                             "Docker's masks, and then no sandbox starts in the job (only "
                             "for a policy with allow_unsandboxed; default: "
                             f"${SYSTEMPATHS_ENV}, else unconfined)")
    parser.add_argument("--job-user", default=os.environ.get(JOB_USER_ENV) or DEFAULT_JOB_USER,
                        metavar="UID:GID",
                        help="with --docker-image: the user the job runs as, never root; "
                             f"the NPU nodes' group is added to it (default: ${JOB_USER_ENV}, "
                             f"else {DEFAULT_JOB_USER}, the opbot image's user)")
    parser.add_argument("--policy", type=Path,
                        default=Path(os.environ[POLICY_ENV]) if os.environ.get(POLICY_ENV)
                        else None,
                        help=f"opbot policy file whose runner: section limits the container "
                             f"(default: ${POLICY_ENV}, else {DEFAULT_POLICY} when it "
                             "exists, else built-in limits)")
    parser.add_argument("--config-via", choices=("env", "argv"), default="env",
                        help="hand the JIT config to run.sh through its environment (default; "
                             "not visible in ps) or as --jitconfig")
    check = parser.add_mutually_exclusive_group()
    check.add_argument("--preflight", help="command that must succeed before registering, "
                                           "e.g. check_runner.sh")
    check.add_argument("--preflight-in-image", action="store_true",
                       help="with --docker-image: run the image's check_runner.sh, in a "
                            "container set up as the runner's, before registering")
    parser.add_argument("--timeout", type=float, default=30.0, help="HTTP timeout, seconds")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the request and the launch as JSON; send nothing")
    args = parser.parse_args(argv)
    _where(parser, args)
    if args.repo is not None and not re.fullmatch(r"[^/\s]+/[^/\s]+", args.repo):
        parser.error("--repo must read OWNER/REPO")
    args.chips = _chips(parser, args.npu)
    if args.docker_image is not None and not _IMAGE_REF.fullmatch(args.docker_image):
        parser.error(f"--docker-image {args.docker_image!r} is not an image reference such "
                     "as opbot-ascend:8.3 or registry.example.com/opbot@sha256:...")
    if args.systempaths not in SYSTEMPATHS_CHOICES:
        # argparse checks choices only on the command line, not on a default from the
        # environment; a typo there must not silently keep the masks (and the sandbox off).
        parser.error(f"${SYSTEMPATHS_ENV} must be masked or unconfined, not "
                     f"{args.systempaths!r}")
    _job_user(parser, args.job_user)
    if args.broker is not None and not secure_url(args.broker):
        parser.error(f"--broker / ${BROKER_URL_ENV} must be an https URL (plain http only "
                     f"to 127.0.0.1, ::1 or localhost), not {args.broker!r}")
    if args.chips is not None and args.docker_image is None:
        parser.error("--npu needs --docker-image (a bare run.sh sees every chip)")
    if args.preflight_in_image and args.docker_image is None:
        parser.error("--preflight-in-image needs --docker-image")
    if not math.isfinite(args.rate_limit_wait_max) or args.rate_limit_wait_max < 0:
        parser.error("--rate-limit-wait-max must be a number of seconds, 0 or more")
    if args.token_env is None:
        args.token_env = BROKER_TOKEN_ENV if args.broker else DEFAULT_TOKEN_ENV
    return args


def _where(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--org or --repo, else exactly one of $OPBOT_GITHUB_ORG and $OPBOT_GITHUB_REPO."""
    if args.org is not None or args.repo is not None:
        return
    org, repo = os.environ.get(ORG_ENV) or None, os.environ.get(REPO_ENV) or None
    if (org is None) == (repo is None):
        parser.error(f"pass --org or --repo, or set exactly one of ${ORG_ENV} and "
                     f"${REPO_ENV}")
    args.org, args.repo = org, repo


def _job_user(parser: argparse.ArgumentParser, spec: str) -> None:
    """Exit 2 for a --job-user / $OPBOT_JOB_USER that is root or no user at all."""
    problem = check_job_user(spec)
    if problem is not None:
        parser.error(f"--job-user / ${JOB_USER_ENV}: {problem} (the job must run as a "
                     "non-root user, e.g. 10001:10001)")


def _chips(parser: argparse.ArgumentParser, npu: str | None) -> list[int] | None:
    """The chips of --npu: ASCII numbers, comma-separated, none empty, none twice."""
    if npu is None:
        return None
    parts = [part.strip() for part in npu.split(",")]
    if not all(_NPU_NUMBER.fullmatch(part) for part in parts):
        parser.error(f"--npu takes chip numbers separated by commas, e.g. 0 or 0,1, not "
                     f"{npu!r} (leave it out for every chip)")
    chips = [int(part) for part in parts]
    if len(set(chips)) != len(chips):
        parser.error(f"--npu names a chip twice: {npu!r}")
    return chips


def secure_url(url: str) -> bool:
    # A token goes with every request: in clear text only to this host itself (tests).
    scheme = urllib.parse.urlsplit(url).scheme
    return scheme == "https" or (scheme == "http" and is_loopback(url))


def is_loopback(url: str) -> bool:
    """Whether `url` names this host itself (127.0.0.1, ::1, localhost)."""
    try:
        return urllib.parse.urlsplit(url).hostname in LOOPBACK_HOSTS
    except ValueError:  # an odd IPv6 literal: not loopback, so no exemption from anything
        return False


def check_job_user(spec: str) -> str | None:
    """Why `spec` cannot be the job's --user (root, or neither ids nor names); None if fine.

    The rules of register_gitlab_runner.sh's check_job_user: USER[:GROUP], each part a
    decimal id (all zeros is 0: 00, 000 ...) or a plain name other than root. Anything else
    (+0, 0x0, -1, spaces) is refused rather than guessed at.
    """
    user, colon, group = spec.partition(":")
    if colon and not group:
        return f"{spec!r} names no group after ':'"
    for part in (user, group) if colon else (user,):
        if _JOB_USER_ID.fullmatch(part):
            if part.strip("0") == "":
                return f"{spec!r} is root (uid or gid 0)"
        elif _JOB_USER_NAME.fullmatch(part):
            if part == "root":
                return f"{spec!r} is root"
        else:
            return f"{part!r} is neither a decimal id nor a user or group name"
    return None


def check_token(token: str, name: str) -> None:
    """ConfigError for a token no HTTP header can carry: only printable ASCII passes.

    urllib would refuse the header with a ValueError on every try; a human must fix the
    env file, so exit 3, never a retry loop.
    """
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in token) or token != token.strip():
        raise ConfigError(f"${name} holds control characters or surrounding whitespace (a "
                          "stray CR from a Windows editor?): fix the env file")
    if not token.isascii():
        # A header carries Latin-1 at most, and tokens are ASCII: a pasted typographic
        # character (\u20ac, U+2028) would fail in urllib as a ValueError on every try.
        raise ConfigError(f"${name} holds characters other than printable ASCII (pasted "
                          "from a document?): fix the env file")


def plan(args: argparse.Namespace) -> tuple[JitRequest, Launch, list[str] | None]:
    if not secure_url(args.api_url):
        # The admin token goes with the request: in clear text to this host only.
        raise ConfigError(f"--api-url must be an https URL (plain http only to 127.0.0.1, ::1 "
                          f"or localhost), not {args.api_url!r}")
    soc = args.soc or detect_soc()
    if not soc:
        raise ConfigError("cannot tell the chip: pass --soc (e.g. ascend910b3) or set "
                             "OPBOT_RUNNER_SOC")
    soc = soc_label(soc)
    name = args.name or default_runner_name(soc, args.chips)
    scope: Scope = "org" if args.org else "repo"
    request = JitRequest(api_url=args.api_url, scope=scope, target=args.org or args.repo,
                         name=name, runner_group_id=args.runner_group_id,
                         labels=_unique([*BASE_LABELS, soc, *args.label]),
                         work_folder=args.work_folder)
    preflight = shlex.split(args.preflight) if args.preflight else None
    if args.docker_image:
        group_id = args.ascend_gid if args.ascend_gid is not None else ascend_group_id()
        confinement = _confinement(args)
        launch = docker_launch(args.docker_image, chips=args.chips, group_id=group_id,
                               config_via=args.config_via, confinement=confinement)
        if args.preflight_in_image:
            # The same fences as the job: the pre-flight's bubblewrap smoke test then
            # proves the sandbox works under the very profile the job will get.
            preflight = [*docker_run_prefix(args.chips, group_id, confinement),
                         "--name", preflight_container_name(args.chips),
                         args.docker_image, IMAGE_CHECK_RUNNER]
    else:
        launch = local_launch(args.runner_dir.expanduser(), args.config_via)
    return request, launch, preflight


def _confinement(args: argparse.Namespace) -> Confinement:
    profile = args.seccomp_profile.expanduser().resolve()
    if not profile.is_file():
        # Without it docker would fall back to its default profile, under which the job's
        # sandbox (bubblewrap) cannot start; better no runner than a runner that fails.
        raise ConfigError(f"seccomp profile {profile} is not there: install "
                          "seccomp-bwrap.json beside github_jit.py or pass --seccomp-profile")
    policy = args.policy
    if policy is None and DEFAULT_POLICY.is_file():
        policy = DEFAULT_POLICY
    try:
        limits = job_limits.policy_limits(policy, args.chips)
    except job_limits.LimitsError as exc:
        raise ConfigError(f"job limits: {exc}") from None
    return Confinement(seccomp_profile=profile,
                       apparmor=apparmor_enabled(args.apparmor_enabled_file), limits=limits,
                       unmask_proc=args.systempaths == "unconfined", user=args.job_user)


def _ask(args: argparse.Namespace, request: JitRequest, token: str) -> JitConfig:
    waits = Waits(wait_max=args.rate_limit_wait_max)
    if args.broker:
        return request_via_broker(args.broker, token, request, timeout=args.timeout,
                                  waits=waits)
    return request_jit_config(request, token, timeout=args.timeout, waits=waits)


def _shown_request(args: argparse.Namespace, request: JitRequest) -> dict[str, Any]:
    authorization = f"Bearer <${args.token_env}>"
    if args.broker:
        return {"method": "POST", "url": args.broker.rstrip("/") + BROKER_PATH,
                "headers": {"Authorization": authorization},
                "body": {**request.body(), request.scope: request.target}}
    return {"method": request.method, "url": request.url,
            "headers": request.headers(authorization), "body": request.body()}


def run(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    request, launch, preflight = plan(args)
    missing = [path for path in launch.required_paths if not Path(path).exists()]
    missing += launch.problems
    if "/" not in launch.argv[0] and shutil.which(launch.argv[0]) is None:
        missing.append(launch.argv[0])
    if args.dry_run:
        shown = _shown_request(args, request)
        print(json.dumps({"dry_run": True, "request": shown, "token_env": args.token_env,
                          "token_set": bool(environ.get(args.token_env)),
                          "preflight": preflight, "launch": launch.describe(),
                          "missing_on_this_host": missing}, indent=2))
        return 0
    token = environ.get(args.token_env, "")
    if not token:
        what = ("this host's token for the broker (broker.md)" if args.broker else
                "a token that may register runners (see README.md, 'Secrets')")
        raise ConfigError(f"${args.token_env} is empty: it must hold {what}")
    check_token(token, args.token_env)
    if missing:
        raise ProvisionError("not on this host, so a runner started here could not work: "
                             + ", ".join(missing))
    if launch.cleanup:
        # "No such container" is the usual answer and fine; anything else shows at start.
        subprocess.run(launch.cleanup, check=False, capture_output=True,
                       env=runner_environment(environ, args.token_env))
    if preflight:
        status = subprocess.run(preflight, check=False,
                                env=runner_environment(environ, args.token_env)).returncode
        if status != 0:
            raise ProvisionError(f"pre-flight {shlex.join(preflight)!r} failed (exit "
                                 f"{status}); not registering a runner")
    config = _ask(args, request, token)
    print(f"github_jit: registered runner {config.runner_name!r} (id {config.runner_id}) "
          f"labels {', '.join(request.labels)}; starting {shlex.join(launch.argv)}",
          file=sys.stderr)
    child_env = runner_environment(environ, args.token_env)
    if launch.config_via == "env":
        child_env[JITCONFIG_ENV] = config.encoded
    argv = launch.resolved_argv(config.encoded)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        # exec, not a child: the supervisor then sees the runner's own exit status and its
        # signals reach the runner.
        os.execvpe(argv[0], argv, child_env)  # noqa: S606 - argv list, no shell
    except OSError as exc:
        raise ProvisionError(f"could not start {argv[0]}: {exc.strerror}") from None
    return 0  # not reached: exec replaced the process


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return run(args, os.environ)
    except ProvisionError as exc:
        print(f"github_jit: {exc}", file=sys.stderr)
        return exc.exit_status


if __name__ == "__main__":
    sys.exit(main())
