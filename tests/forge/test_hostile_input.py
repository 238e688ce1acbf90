"""Hostile deliveries: bodies too big or too slow for `opbot serve`, and JSON that parses
but breaks later (too deep, a number too long, lone surrogates) for `opbot event` and
`opbot serve` alike. A user's mistake gets a clear message and exit 2, a bad delivery a
4xx: never a traceback, never a 5xx, never a body held in memory past the limit."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from bot.identity import Identities
from bot.payload_json import MAX_DEPTH, PayloadError, load_payload
from bot.queue import JobQueue
from bot.server import (
    BODY_TIMEOUT_S,
    BODY_TIMEOUT_VARIABLE,
    MAX_BODY_BYTES,
    BodyBudget,
    ServerSettings,
    body_timeout_from_environment,
    make_app,
)
from tests.support import DATA, run_opbot
from tests.support_serve import RunningServer, start_serve

SECRET = "hostile-secret"
LABELED = (DATA / "webhooks" / "github" / "issues" / "labeled.1.json").read_text(encoding="utf-8")
ODD_BRANCH = "br\u00e5nch-\U0001f642"  # not ASCII, yet valid Unicode

# Each body: raw JSON text, the words the refusal must use.
HOSTILE: dict[str, tuple[str, str]] = {
    "100k-deep": ("[" * 100_000 + "]" * 100_000, f"nested deeper than {MAX_DEPTH}"),
    "600-deep, parseable": ('{"action": "labeled", "x": ' + "[" * 600 + "]" * 600 + "}",
                            f"nested deeper than {MAX_DEPTH}"),
    "5001-digit number": ('{"action": "labeled", "issue": {"number": ' + "1" * 5001 + "}}",
                          "a number too long to read"),
    "lone surrogate in a value": ('{"action": "\\ud800", "issue": {}, '
                                  '"repository": {"full_name": "\\udc00"}}',
                                  "lone surrogate"),
    "lone surrogate in a key": ('{"action": "labeled", "\\ud83d": 1}', "lone surrogate"),
    "lone surrogate deep down": (
        '{"action": "completed", "workflow_run": {"head_branch": "\\ud800x", '
        '"conclusion": "failure"}, "repository": {"full_name": "acme/ops"}}',
        "lone surrogate"),
}


def _workflow_run(branch: str) -> dict[str, Any]:
    return {"action": "completed", "repository": {"full_name": "acme/ops"},
            "workflow_run": {"head_branch": branch, "conclusion": "failure"}}


# -- the shared check ----------------------------------------------------------------------


def test_depth_limit_is_exact_and_walked_without_recursion() -> None:
    assert load_payload("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    with pytest.raises(PayloadError, match="nested deeper"):
        load_payload("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    # Text, bytes and a surrogate *pair* (one emoji, escaped) are all fine.
    assert load_payload(b'{"a": "\\ud83d\\ude42"}') == {"a": "\U0001f642"}
    with pytest.raises(PayloadError, match="not UTF-8"):
        load_payload(b'{"a": "\xff"}')
    with pytest.raises(PayloadError) as caught:
        load_payload('{\n"a": }')
    assert caught.value.line == 2


# -- opbot event ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(HOSTILE))
def test_event_refuses_hostile_json_with_a_clear_message(name: str, tmp_path: Path) -> None:
    text, words = HOSTILE[name]
    path = tmp_path / "payload.json"
    path.write_text(text, encoding="utf-8")
    for event in ("issues", "workflow_run"):
        for extra in ((), ("--json",)):
            run = run_opbot("event", "--forge", "github", "--event", event, "--payload",
                            str(path), "--dry-run", *extra, timeout=120,
                            env={"OPBOT_BOT_LOGIN": "opbot[bot]"})
            assert run.code == 2, (name, event, extra, run.stderr)
            assert "Traceback" not in run.stderr + run.stdout
            assert f"{path}: the payload is" in run.stderr
            assert words in run.stderr
            assert run.stdout == ""


@pytest.mark.parametrize("encoding", ["ascii", "utf-8"])
def test_event_output_never_fails_on_odd_text(encoding: str, tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(_workflow_run(ODD_BRANCH)), encoding="utf-8")
    env = {"OPBOT_BOT_LOGIN": "opbot[bot]", "PYTHONIOENCODING": encoding}
    args = ("event", "--forge", "github", "--event", "workflow_run", "--payload", str(path),
            "--dry-run")
    human = run_opbot(*args, env=env, timeout=120)
    assert human.code == 0, human.stderr
    assert "Traceback" not in human.stderr
    assert human.stdout.startswith("ignore: CI on br")
    shown = ODD_BRANCH if encoding == "utf-8" else "br\\xe5nch-\\U0001f642"
    assert shown in human.stdout
    as_json = run_opbot(*args, "--json", env=env, timeout=120)
    assert as_json.code == 0, as_json.stderr
    assert as_json.stdout.isascii()
    assert ODD_BRANCH in as_json.json()["reason"]


def test_event_output_takes_no_markup_or_emoji_codes_from_a_payload(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(_workflow_run("[bold]x[/]:smile:")), encoding="utf-8")
    run = run_opbot("event", "--forge", "github", "--event", "workflow_run", "--payload",
                    str(path), "--dry-run", env={"OPBOT_BOT_LOGIN": "opbot[bot]",
                                                 "PYTHONIOENCODING": "ascii"}, timeout=120)
    assert run.code == 0, run.stderr
    assert "[bold]x[/]:smile:" in run.stdout


# -- opbot serve, in process ---------------------------------------------------------------


def _settings(tmp_path: Path, body_timeout_s: float = BODY_TIMEOUT_S) -> ServerSettings:
    identities = Identities({"OPBOT_BOT_LOGIN": ""}, lookup=lambda forge, env: "opbot[bot]")
    return ServerSettings(secrets=[SECRET], queue=JobQueue(tmp_path / "queue.sqlite3"),
                          dry_run=True, identities=identities, body_timeout_s=body_timeout_s)


def _signed(body: bytes, event: str = "issues") -> dict[str, str]:
    return {"X-GitHub-Event": event, "X-GitHub-Delivery": str(uuid.uuid4()),
            "X-Hub-Signature-256": "sha256=" + hmac.new(SECRET.encode(), body,
                                                        hashlib.sha256).hexdigest()}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_serve_answers_hostile_json_with_400(name: str, tmp_path: Path) -> None:
    text, words = HOSTILE[name]
    body = text.encode("utf-8")
    client = TestClient(make_app(_settings(tmp_path), start_worker=False),
                        raise_server_exceptions=False)
    for event in ("issues", "workflow_run"):
        answer = client.post("/webhook/github", content=body, headers=_signed(body, event))
        assert answer.status_code == 400, (name, answer.status_code, answer.text)
        reason = answer.json()["reason"]
        assert reason.startswith("not a GitHub delivery: the body is")
        assert words in reason


def test_serve_still_takes_odd_but_valid_text(tmp_path: Path) -> None:
    client = TestClient(make_app(_settings(tmp_path), start_worker=False),
                        raise_server_exceptions=False)
    for body in (json.dumps(_workflow_run(ODD_BRANCH)).encode(),  # escaped, as GitHub sends
                 json.dumps(_workflow_run(ODD_BRANCH), ensure_ascii=False).encode()):
        answer = client.post("/webhook/github", content=body,
                             headers=_signed(body, "workflow_run"))
        assert answer.status_code == 202, answer.text
        assert ODD_BRANCH in answer.json()["reason"]
    labeled = LABELED.encode()
    assert client.post("/webhook/github", content=labeled,
                       headers=_signed(labeled)).status_code == 202


Receive = Callable[[], Awaitable[dict[str, Any]]]


def _call(settings: ServerSettings, receive: Receive, headers: dict[str, str],
          within_s: float = 20.0, forge: str = "github",
          ) -> tuple[int, dict[str, str], dict[str, Any]]:
    """One POST to the app over raw ASGI, with the body `receive` hands out as it likes."""
    app = make_app(settings, start_worker=False)
    sent: list[dict[str, Any]] = []
    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"},
             "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": f"/webhook/{forge}", "raw_path": f"/webhook/{forge}".encode(),
             "query_string": b"",
             "root_path": "", "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80),
             "headers": [(key.lower().encode(), value.encode())
                         for key, value in headers.items()]}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(asyncio.wait_for(app(scope, receive, send), within_s))
    start = sent[0]
    answer = b"".join(message.get("body", b"") for message in sent[1:])
    return (start["status"], {key.decode(): value.decode() for key, value in start["headers"]},
            json.loads(answer))


def test_a_chunked_body_is_read_no_further_than_the_limit(tmp_path: Path) -> None:
    chunk = b"a" * (1 << 20)
    offered = 4 * MAX_BODY_BYTES // len(chunk)
    pulled = 0

    async def receive() -> dict[str, Any]:
        nonlocal pulled
        pulled += 1
        return {"type": "http.request", "body": chunk, "more_body": pulled < offered}

    # No Content-Length: only counting what arrives can stop it.
    status, headers, answer = _call(_settings(tmp_path), receive, _signed(b""))
    assert status == 413
    assert "too large" in answer["reason"]
    assert headers["connection"] == "close"
    assert pulled * len(chunk) <= MAX_BODY_BYTES + len(chunk)


def test_a_stalled_body_is_answered_408_at_the_deadline(tmp_path: Path) -> None:
    handed = False

    async def receive() -> dict[str, Any]:
        nonlocal handed
        if not handed:
            handed = True
            return {"type": "http.request", "body": b"{", "more_body": True}
        await asyncio.Event().wait()  # the rest never comes
        raise AssertionError("unreachable")

    started = time.monotonic()
    status, headers, answer = _call(_settings(tmp_path, body_timeout_s=0.5), receive,
                                    _signed(b"{"), within_s=10)
    assert status == 408
    assert 0.4 < time.monotonic() - started < 5
    assert "did not arrive within 0.5 s" in answer["reason"]
    assert headers["connection"] == "close"


def test_a_client_that_goes_away_mid_body_gets_no_5xx(tmp_path: Path) -> None:
    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    status, _, _ = _call(_settings(tmp_path), receive, _signed(b""))
    assert status == 400


def test_the_body_deadline_comes_from_the_environment() -> None:
    assert body_timeout_from_environment({}) == BODY_TIMEOUT_S
    assert body_timeout_from_environment({BODY_TIMEOUT_VARIABLE: "2.5"}) == 2.5
    for junk in ("soon", "0", "-1", "inf", "nan"):
        assert body_timeout_from_environment({BODY_TIMEOUT_VARIABLE: junk}) == BODY_TIMEOUT_S


# -- opbot serve, over loopback HTTP -------------------------------------------------------

DEADLINE_S = 2.0


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    state = tmp_path_factory.mktemp("hostile-state")
    started = start_serve("--dry-run", "--state-dir", str(state),
                          env={**os.environ, BODY_TIMEOUT_VARIABLE: str(DEADLINE_S)},
                          log=state / "server.log", secret=SECRET)
    yield started
    started.stop()


def _vm(pid: int, field: str) -> int:
    """A /proc/<pid>/status line, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for process {pid}")


def _connect(server: RunningServer, head: bytes) -> socket.socket:
    host, port = server.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.sendall(b"POST /webhook/github HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: issues\r\n"
                 b"Content-Type: application/json\r\n" + head + b"\r\n")
    return sock


def _answer(sock: socket.socket) -> tuple[int, dict[str, Any], bool]:
    """The status and JSON body of the answer, and whether the server then closed."""
    data = b""
    while b"\r\n\r\n" not in data:
        more = sock.recv(65536)
        assert more, f"closed without an answer: {data!r}"
        data += more
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next(int(line.split(":")[1]) for line in lines
                  if line.lower().startswith("content-length:"))
    while len(body) < length:
        body += sock.recv(65536)
    try:
        closed = sock.recv(1) == b""
    except ConnectionResetError:
        closed = True
    return int(lines[0].split()[1]), json.loads(body[:length]), closed


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_serve_stops_a_chunked_flood_at_the_limit(served: RunningServer) -> None:
    pid = served.process.pid
    before = _vm(pid, "VmHWM")
    sock = _connect(served, b"Transfer-Encoding: chunked\r\n")
    chunk = b"a" * (1 << 20)
    frame = b"%x\r\n" % len(chunk) + chunk + b"\r\n"

    def flood() -> None:  # 8x the limit, unless the server hangs up first
        try:
            for _ in range(8 * MAX_BODY_BYTES // len(chunk)):
                sock.sendall(frame)
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass

    sender = threading.Thread(target=flood, daemon=True)
    sender.start()
    try:
        status, answer, closed = _answer(sock)
    finally:
        sender.join(timeout=60)
        sock.close()
    grown = _vm(pid, "VmHWM") - before
    assert status == 413, answer
    assert "too large" in answer["reason"]
    assert closed
    assert grown < 2 * MAX_BODY_BYTES, f"the server grew by {grown / 2**20:.0f} MiB"
    assert served.process.poll() is None
    assert httpx.get(f"{served.url}/healthz", timeout=5).status_code == 200


def test_serve_answers_a_stalled_body_408_and_serves_others_meanwhile(
        served: RunningServer) -> None:
    stalled = [_connect(served, b"Content-Length: 1000\r\n") for _ in range(5)]
    started = time.monotonic()
    for sock in stalled:
        sock.sendall(b"{")
    # Meanwhile a whole delivery goes through at once.
    assert served.github("issues", json.loads(LABELED)).status_code == 202
    assert time.monotonic() - started < DEADLINE_S
    try:
        for sock in stalled:
            status, answer, closed = _answer(sock)
            assert status == 408, answer
            assert f"within {DEADLINE_S:g} s" in answer["reason"]
            assert closed
    finally:
        for sock in stalled:
            sock.close()
    elapsed = time.monotonic() - started
    assert DEADLINE_S * 0.9 < elapsed < DEADLINE_S + 8
    assert "Traceback" not in served.log.read_text(encoding="utf-8")


def _chunks(size: int, count: int) -> tuple[Receive, Callable[[], int]]:
    pulled = 0

    async def receive() -> dict[str, Any]:
        nonlocal pulled
        pulled += 1
        return {"type": "http.request", "body": b"a" * size, "more_body": pulled < count}
    return receive, lambda: pulled


def test_unsigned_bodies_share_one_budget(tmp_path: Path) -> None:
    """A GitHub signature covers the body, so bodies are read before they are checked: all
    of those being received at once hold no more than the budget."""
    settings = _settings(tmp_path)
    settings.body_budget = BodyBudget(limit=3 << 20)
    settings.body_budget.take(1 << 20)  # another delivery on its way in
    receive, pulled = _chunks(1 << 20, 4)
    status, headers, answer = _call(settings, receive, _signed(b""))
    assert status == 503
    assert "busy" in answer["reason"]
    assert headers["connection"] == "close"
    assert pulled() == 3
    assert settings.body_budget.held == 1 << 20  # what this one held is given back


def test_a_gitlab_delivery_with_a_wrong_token_is_refused_before_its_body(
        tmp_path: Path) -> None:
    receive, pulled = _chunks(1 << 20, 20)
    headers = {"X-Gitlab-Event": "Note Hook", "X-Gitlab-Token": "not-the-secret"}
    status, _, answer = _call(_settings(tmp_path), receive, headers, forge="gitlab")
    assert status == 401
    assert "token" in answer["reason"]
    assert pulled() == 0
    good, _ = _chunks(10, 1)
    status, _, answer = _call(_settings(tmp_path), good, {**headers, "X-Gitlab-Token": SECRET},
                              forge="gitlab")
    assert status == 400  # read, then found not to be JSON
    assert "not JSON" in answer["reason"]
