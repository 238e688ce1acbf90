#!/usr/bin/env python3
"""Hands runner hosts just-in-time runner configurations; only it holds the GitHub App's key.

Without a broker every runner host holds a token that may register runners anywhere in the
organisation: one compromised host could register runners into other groups and take other
repositories' jobs. With it, a host holds only its own host token, and the broker lets that
token register exactly what its configuration names: one organisation (or repository), one
runner group, a set of labels, a name prefix. Anything else is refused (403).

The broker mints GitHub App installation tokens itself (an RS256 JWT signed with the App's
private key, exchanged at POST /app/installations/{id}/access_tokens, cached until five
minutes before it expires) and answers ``POST /v1/jitconfig`` with only
``{"encoded_jit_config": ..., "runner": {"id", "name"}}``. Run with opbot's Python::

    /opt/opbot/venv/bin/python jit_broker.py --config /etc/opbot/broker.yaml
    /opt/opbot/venv/bin/python jit_broker.py --hash-token < host-token   # for the config

broker.md beside this file sets it up from zero; hosts use ``github_jit.py --broker URL``.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import http.server
import json
import logging
import math
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import jwt
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

if __package__:
    from runners.provision import github_jit
else:  # run as a script; `python3 -I` leaves this folder off sys.path, so put it back
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import github_jit  # type: ignore[no-redef,import-not-found]

LOG = logging.getLogger("opbot.jit_broker")
DEFAULT_LISTEN = "127.0.0.1:8787"
DEFAULT_MAX_BODY = 16 * 1024
# GitHub refuses an App JWT that expires more than 10 minutes ahead; iat a minute in the
# past allows for clock drift between this host and GitHub.
JWT_BACKDATE_S = 60
JWT_LIFETIME_S = 540
TOKEN_REFRESH_MARGIN_S = 300
# The broker waits out short rate limits itself; longer ones go back to the host as 429
# with Retry-After, and the host waits (it holds no connection open meanwhile).
DEFAULT_BROKER_WAIT_MAX_S = 20.0
# github_jit.py's HTTP timeout is 30 s: the broker answers well before the host gives up.
MAX_BROKER_WAIT_S = 20.0
# While one request mints the installation token (one HTTP exchange, no sleeping), the
# others wait this long at most, then their hosts get 503 with Retry-After: well inside the
# hosts' 30 s HTTP timeout, so no host hangs on the broker.
TOKEN_LOCK_WAIT_S = 10.0
_CONFIG_KEYS = {"app_id", "installation_id", "private_key_file", "hosts", "api_url", "listen",
                "allow_non_loopback", "max_body_bytes", "rate_limit_wait_max", "timeout"}
_HOST_KEYS = {"name", "token_sha256", "org", "repo", "runner_group_id", "labels",
              "name_prefix"}
_RUNNER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_WORK_FOLDER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")
_REQUEST_KEYS = {"name", "runner_group_id", "labels", "work_folder", "org", "repo"}
# GitHub signs App JWTs with either the App's id (a number) or its client ID (Iv1..., Iv23...).
_CLIENT_ID = re.compile(r"Iv[A-Za-z0-9.]{4,62}")


class TokenBusy(Exception):
    """Another request is minting the installation token and has not finished in time."""


class BrokerConfigError(ValueError):
    """The broker's configuration cannot work; the message says what to fix."""


class Refused(Exception):
    """An answer other than the configuration: status, message, maybe a Retry-After."""

    def __init__(self, status: int, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


@dataclass(frozen=True)
class HostGrant:
    """What one host token may register."""

    name: str
    token_sha256: str = field(repr=False)
    scope: github_jit.Scope = "org"
    target: str = ""
    runner_group_id: int = 0
    labels: frozenset[str] = frozenset()
    name_prefix: str = ""


@dataclass(frozen=True)
class BrokerConfig:
    app_id: str
    installation_id: int
    private_key: str = field(repr=False)
    hosts: tuple[HostGrant, ...] = ()
    api_url: str = github_jit.DEFAULT_API_URL
    listen: str = DEFAULT_LISTEN
    max_body_bytes: int = DEFAULT_MAX_BODY
    rate_limit_wait_max: float = DEFAULT_BROKER_WAIT_MAX_S
    timeout: float = 30.0

    @property
    def address(self) -> tuple[str, int]:
        host, _, port = self.listen.rpartition(":")
        return host.strip("[]") or "127.0.0.1", int(port)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# -- configuration -------------------------------------------------------------------------


def load_config(path: Path) -> BrokerConfig:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BrokerConfigError(f"cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise BrokerConfigError(f"{path} is not YAML (or JSON): {exc}") from None
    if not isinstance(raw, dict):
        raise BrokerConfigError(f"{path} must hold a mapping")
    return config_from(raw, base=path.parent)


def config_from(raw: Mapping[str, Any], base: Path) -> BrokerConfig:
    """The configuration from its mapping; `private_key_file` is relative to `base`.

    Checked whole, at start: a mistake is exit 3 naming the key, never a traceback the
    unit restarts for ever or a failure at the first host's request.
    """
    unknown = sorted(str(key) for key in raw if key not in _CONFIG_KEYS)
    if unknown:
        raise BrokerConfigError(f"unknown keys: {', '.join(unknown)} (known: "
                                f"{', '.join(sorted(_CONFIG_KEYS))})")
    private_key = _private_key(base / str(_required(raw, "private_key_file")))
    hosts = raw.get("hosts")
    if not isinstance(hosts, list) or not hosts:
        raise BrokerConfigError("hosts: must list at least one host")
    grants = tuple(_grant(entry, index) for index, entry in enumerate(hosts))
    if len({grant.token_sha256 for grant in grants}) != len(grants):
        raise BrokerConfigError("two hosts share a token: give each host its own")
    api_url = str(raw.get("api_url", github_jit.DEFAULT_API_URL))
    if not github_jit.secure_url(api_url):  # the same rule as the hosts
        raise BrokerConfigError(f"api_url must be an https URL (plain http only to "
                                f"127.0.0.1, ::1 or localhost), not {api_url!r}")
    config = BrokerConfig(
        app_id=_app_id(raw), installation_id=_integer(raw, "installation_id", least=1),
        private_key=private_key,
        hosts=grants, api_url=api_url, listen=str(raw.get("listen", DEFAULT_LISTEN)),
        max_body_bytes=_integer(raw, "max_body_bytes", DEFAULT_MAX_BODY),
        rate_limit_wait_max=_seconds(raw, "rate_limit_wait_max", DEFAULT_BROKER_WAIT_MAX_S,
                                     most=MAX_BROKER_WAIT_S),
        timeout=_seconds(raw, "timeout", 30.0, most=120.0, least=1.0))
    _check_listen(config.listen, raw.get("allow_non_loopback", False))
    return config


def _private_key(key_file: Path) -> str:
    """The App's key, loaded once to prove it signs: a bad one is found now, not later."""
    try:
        text = key_file.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not ASCII (PEM)"
        raise BrokerConfigError(f"private_key_file: cannot read {key_file}: {reason}") from None
    try:
        key = serialization.load_pem_private_key(text.encode(), password=None)
    except (ValueError, TypeError) as exc:
        # The exception's class only: its text could quote part of the key.
        raise BrokerConfigError(f"private_key_file: {key_file} holds no unencrypted PEM "
                                f"private key ({type(exc).__name__})") from None
    if not isinstance(key, rsa.RSAPrivateKey):
        raise BrokerConfigError(f"private_key_file: {key_file} is not an RSA key (GitHub "
                                "Apps sign with RS256)")
    return text


def _app_id(raw: Mapping[str, Any]) -> str:
    """The JWT's issuer: the App's id, a positive whole number, or its client ID."""
    value = _required(raw, "app_id")
    if isinstance(value, str) and _CLIENT_ID.fullmatch(value):
        return value
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,20}", value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BrokerConfigError(f"app_id must be the App's id (a whole number above 0) or its "
                                f"client ID (Iv...), not {value!r}")
    return str(value)


def _check_listen(listen: str, allow_non_loopback: Any) -> None:
    host, colon, port = listen.rpartition(":")
    if not colon or not host or not re.fullmatch(r"[0-9]{1,5}", port) or int(port) > 65535:
        raise BrokerConfigError(f"listen: {listen!r} is not HOST:PORT (port 0-65535)")
    if ":" in host and not (host.startswith("[") and host.endswith("]")):
        raise BrokerConfigError(f"listen: {listen!r}: write an IPv6 address in brackets, "
                                "e.g. [::1]:8787")
    host = host.removeprefix("[").removesuffix("]")
    if not host:
        raise BrokerConfigError(f"listen: {listen!r} is not HOST:PORT (port 0-65535)")
    if not isinstance(allow_non_loopback, bool):
        raise BrokerConfigError(f"allow_non_loopback must be true or false, not "
                                f"{allow_non_loopback!r}")
    if host not in github_jit.LOOPBACK_HOSTS and not allow_non_loopback:
        # The broker speaks plain HTTP: host tokens would cross the network in clear text.
        raise BrokerConfigError(f"listen: {host} is not loopback; the broker speaks plain "
                                "HTTP, so put a TLS proxy in front (broker.md), or set "
                                "allow_non_loopback: true if the network is yours alone")


def _seconds(raw: Mapping[str, Any], key: str, default: float, *, most: float,
             least: float = 0.0) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or not least <= value <= most:
        raise BrokerConfigError(f"{key} must be a number of seconds from {least:g} to "
                                f"{most:g}, not {value!r}")
    return float(value)


def _grant(entry: Any, index: int) -> HostGrant:
    where = f"hosts[{index}]"
    if not isinstance(entry, dict):
        raise BrokerConfigError(f"{where} must be a mapping")
    unknown = sorted(str(key) for key in entry if key not in _HOST_KEYS)
    if unknown:
        raise BrokerConfigError(f"{where}: unknown keys: {', '.join(unknown)}")
    digest = str(_required(entry, "token_sha256", where)).lower()
    if not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise BrokerConfigError(f"{where}.token_sha256 must be 64 hex digits "
                                "(jit_broker.py --hash-token)")
    if ("org" in entry) == ("repo" in entry):
        raise BrokerConfigError(f"{where} needs exactly one of org and repo")
    labels = entry.get("labels")
    if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
        raise BrokerConfigError(f"{where}.labels must list the labels this host may use")
    return HostGrant(name=str(entry.get("name", f"host{index}")), token_sha256=digest,
                     scope="org" if "org" in entry else "repo",
                     target=str(entry.get("org") or entry.get("repo")),
                     runner_group_id=_integer(entry, "runner_group_id", where=where),
                     labels=frozenset(labels),
                     name_prefix=str(_required(entry, "name_prefix", where)))


def _required(raw: Mapping[str, Any], key: str, where: str = "") -> Any:
    if raw.get(key) in (None, ""):
        raise BrokerConfigError(f"{where + '.' if where else ''}{key} is missing")
    return raw[key]


def _integer(raw: Mapping[str, Any], key: str, default: int | None = None,
             where: str = "", least: int = 0) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise BrokerConfigError(f"{where + '.' if where else ''}{key} must be a whole "
                                f"number{' above 0' if least == 1 else ''}, not {value!r}")
    return value


# -- GitHub App installation tokens ---------------------------------------------------------


class InstallationTokens:
    """Mints and caches the installation access token; thread-safe."""

    def __init__(self, config: BrokerConfig, now: Callable[[], float] = time.time) -> None:
        self._config = config
        self._now = now
        self._lock = threading.Lock()
        self._token: str | None = None
        self._refresh_at = 0.0

    def app_jwt(self) -> str:
        now = int(self._now())
        claims = {"iat": now - JWT_BACKDATE_S, "exp": now + JWT_LIFETIME_S,
                  "iss": self._config.app_id}
        return jwt.encode(claims, self._config.private_key, algorithm="RS256")

    def get(self) -> str:
        # Bounded: while one request mints, the others wait at most one HTTP exchange,
        # then their hosts hear 503 and come back later instead of hanging.
        if not self._lock.acquire(timeout=TOKEN_LOCK_WAIT_S):
            raise TokenBusy
        try:
            if self._token is None or self._now() >= self._refresh_at:
                self._token, self._refresh_at = self._mint()
            return self._token
        finally:
            self._lock.release()

    def forget(self) -> None:
        with self._lock:
            self._token = None

    def _mint(self) -> tuple[str, float]:
        config = self._config
        url = (f"{config.api_url.rstrip('/')}/app/installations/"
               f"{config.installation_id}/access_tokens")
        headers = {"Accept": "application/vnd.github+json",
                   "Authorization": f"Bearer {self.app_jwt()}",
                   "X-GitHub-Api-Version": github_jit.API_VERSION,
                   "User-Agent": "opbot-jit-broker", "Content-Type": "application/json"}
        # No waiting under the lock: a rate limit here goes back to the host as 429 with
        # Retry-After (RateLimited), and the other hosts are not held up meanwhile.
        waits = github_jit.Waits(wait_max=0.0, attempts_max=1)
        try:
            payload = github_jit.with_rate_limits(
                lambda: github_jit.post_json(url, {}, headers, timeout=config.timeout),
                waits, "minting an installation token")
        except github_jit.HttpFailure as failure:
            raise github_jit.JitApiError(failure.status, (
                f"GitHub answered {failure.status} to the installation token request: check "
                f"app_id, installation_id and the private key ({failure.message})")) from None
        token = payload.get("token") if isinstance(payload, dict) else None
        if not isinstance(token, str) or not token:
            raise github_jit.JitApiError(None, "GitHub's answer holds no installation token")
        expires = _timestamp(payload.get("expires_at"), self._now() + 3600)
        return token, expires - TOKEN_REFRESH_MARGIN_S


def _timestamp(value: Any, fallback: float) -> float:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return fallback


# -- the broker -----------------------------------------------------------------------------


class Broker:
    def __init__(self, config: BrokerConfig, tokens: InstallationTokens | None = None) -> None:
        self.config = config
        self.tokens = tokens or InstallationTokens(config)

    def authenticate(self, authorization: str) -> HostGrant | None:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        digest = hash_token(token.strip())
        found = None
        for host in self.config.hosts:  # every entry compared: no early exit to time
            if hmac.compare_digest(digest, host.token_sha256):
                found = host
        return found

    def jitconfig(self, host: HostGrant, body: Any) -> dict[str, Any]:
        request = self.checked_request(host, body)
        waits = github_jit.Waits(wait_max=self.config.rate_limit_wait_max)
        try:
            config = github_jit.request_jit_config(request, self.tokens.get(),
                                                   timeout=self.config.timeout, waits=waits)
        except github_jit.RateLimited as exc:
            raise Refused(429, "GitHub is rate limiting the broker; try again later",
                          retry_after=exc.retry_after) from None
        except TokenBusy:
            raise Refused(503, "the broker is busy minting its GitHub token; try again "
                          "later", retry_after=5.0) from None
        except github_jit.JitApiError as exc:
            if exc.status == 401:
                self.tokens.forget()
            LOG.warning("host %s: GitHub refused runner %s: %s", host.name, request.name, exc)
            # 409 (name taken) passes with the next name; anything else is the broker's
            # problem, not the host's: 502, which the host retries later.
            raise Refused(409 if exc.status == 409 else 502, str(exc)) from None
        LOG.info("host %s: registered runner %s (id %s) in group %d with labels %s",
                 host.name, config.runner_name, config.runner_id, request.runner_group_id,
                 ",".join(request.labels))
        return {"encoded_jit_config": config.encoded,
                "runner": {"id": config.runner_id, "name": config.runner_name}}

    def checked_request(self, host: HostGrant, body: Any) -> github_jit.JitRequest:
        """The request `host` may make, or Refused: 400 for nonsense, 403 for overreach."""
        if not isinstance(body, dict):
            raise Refused(400, "the body must be a JSON object")
        unknown = set(body) - _REQUEST_KEYS
        if unknown:
            raise Refused(400, f"unknown fields: {', '.join(sorted(unknown))}")
        for key in ("org", "repo"):
            if key in body and (key != host.scope or body[key] != host.target):
                raise Refused(403, f"this host registers at {host.scope} {host.target} only")
        if body.get("runner_group_id", host.runner_group_id) != host.runner_group_id:
            raise Refused(403, f"this host may use runner group {host.runner_group_id} only")
        labels = body.get("labels")
        if not isinstance(labels, list) or not labels or not all(
                isinstance(label, str) for label in labels):
            raise Refused(400, "labels must be a non-empty list of strings")
        refused = sorted(set(labels) - host.labels)
        if refused:
            raise Refused(403, f"labels not allowed for this host: {', '.join(refused)}")
        name = body.get("name")
        if not isinstance(name, str) or not _RUNNER_NAME.fullmatch(name):
            raise Refused(400, "name must be 1-64 letters, digits, '.', '_' or '-'")
        if not name.startswith(host.name_prefix):
            raise Refused(403, f"runner names of this host start with {host.name_prefix!r}")
        work_folder = body.get("work_folder", "_work")
        if not isinstance(work_folder, str) or not _WORK_FOLDER.fullmatch(work_folder):
            raise Refused(400, "work_folder must be a plain folder name")
        return github_jit.JitRequest(
            api_url=self.config.api_url, scope=host.scope, target=host.target, name=name,
            runner_group_id=host.runner_group_id, labels=tuple(dict.fromkeys(labels)),
            work_folder=work_folder)


def retry_after_header(seconds: float) -> str:
    """Whole seconds from 1 to 15 minutes: finite whatever GitHub said (inf, nan)."""
    if not math.isfinite(seconds):
        seconds = github_jit.BACKOFF_CAP_S
    return str(int(min(max(math.ceil(seconds), 1), github_jit.BACKOFF_CAP_S)))


class BrokerServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, broker: Broker, address: tuple[str, int] | None = None) -> None:
        self.broker = broker
        address = address or broker.config.address
        # The standard server is IPv4 only: listen: "[::1]:8787" needs an IPv6 socket.
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, _Handler)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: BrokerServer
    timeout = 15  # a client that sends its body slowly does not hold a thread for long
    server_version = "opbot-jit-broker"
    sys_version = ""

    def do_GET(self) -> None:
        if self.path == "/healthz":
            self._answer(200, {"ok": True})
        else:
            self._answer(404, {"message": "not found"})

    def do_POST(self) -> None:
        broker = self.server.broker
        try:
            if self.path != github_jit.BROKER_PATH:
                raise Refused(404, "not found")
            host = broker.authenticate(self.headers.get("Authorization", ""))
            if host is None:
                raise Refused(401, "unknown host token")
            body = self._body(broker.config.max_body_bytes)
            self._answer(200, broker.jitconfig(host, body))
        except Refused as refusal:
            LOG.info("%s %s: %d %s", self.client_address[0], self.path, refusal.status,
                     refusal)
            headers = {} if refusal.retry_after is None else {
                "Retry-After": retry_after_header(refusal.retry_after)}
            self._answer(refusal.status, {"message": str(refusal)}, headers)
        except Exception:  # one bad request must not stop the broker
            LOG.exception("answering %s failed", self.path)
            self._answer(500, {"message": "internal error"})

    def _body(self, limit: int) -> Any:
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            raise Refused(411, "Content-Length required") from None
        if length < 0 or length > limit:
            raise Refused(413, f"body over {limit} bytes")
        try:
            return json.loads(self.rfile.read(length) or b"null")
        except (ValueError, RecursionError):  # nested too deep is no request either
            raise Refused(400, "the body is not JSON") from None

    def _answer(self, status: int, payload: Any,
                headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        # Requests are logged through LOG above, without headers: nothing token-like.
        pass


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="jit_broker.py",
        description="Hand runner hosts JIT runner configurations from a GitHub App.")
    parser.add_argument("--config", type=Path, help="broker configuration (YAML or JSON)")
    parser.add_argument("--hash-token", action="store_true",
                        help="read a host token on stdin, print its token_sha256, exit")
    args = parser.parse_args(argv)
    if args.hash_token:
        print(hash_token(sys.stdin.readline().strip()))
        return 0
    if args.config is None:
        parser.error("--config is required")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(args.config)
    except BrokerConfigError as exc:
        print(f"jit_broker: {exc}", file=sys.stderr)
        return github_jit.EXIT_CONFIG
    try:
        server = BrokerServer(Broker(config))
    except OSError as exc:  # the port is taken, the address is not this host's
        print(f"jit_broker: cannot listen on {config.listen}: {exc.strerror or exc}",
              file=sys.stderr)
        return github_jit.EXIT_RETRY
    LOG.info("listening on %s:%s for %d hosts", server.server_address[0],
             server.server_address[1], len(config.hosts))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
