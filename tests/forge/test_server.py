"""`opbot serve`: signatures, tokens, redeliveries, junk; and the durable queue. (Each
forge's own check of a delivery is tested with the forge: test_github.py, test_gitlab.py.)"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bot.queue import JobQueue
from tests.support import DATA, REPO
from tests.support_serve import start_serve

SECRET = "s3cr3t-webhook-VALUE-8d1f"
ISSUE_EVENT = json.loads((DATA / "webhooks" / "github" / "issues" / "labeled.1.json")
                         .read_text(encoding="utf-8"))
NOTE_EVENT = json.loads((DATA / "webhooks" / "gitlab" / "note_hook_issue.json")
                        .read_text(encoding="utf-8"))


def _sign(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, subprocess.Popen[str],
                                                                        Path]]:
    state = tmp_path_factory.mktemp("state")
    log_path = state / "server.log"
    started = start_serve("--dry-run", "--state-dir", str(state), env=dict(os.environ),
                          log=log_path, secret=SECRET)
    yield started.url, started.process, log_path
    started.stop()


def _github(url: str, body: bytes, *, signature: str | None, delivery: str,
            event: str = "issues") -> httpx.Response:
    headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery,
               "Content-Type": "application/json"}
    if signature is not None:
        headers["X-Hub-Signature-256"] = signature
    return httpx.post(f"{url}/webhook/github", content=body, headers=headers, timeout=10)


def test_github_deliveries(server: tuple[str, subprocess.Popen[str], Path]) -> None:
    url, process, log_path = server
    body = json.dumps(ISSUE_EVENT).encode()
    assert _github(url, body, signature=None, delivery="d1").status_code == 401
    assert _github(url, body, signature=_sign(body, "wrong"), delivery="d1").status_code == 401
    tampered = body.replace(b"Codertocat", b"Attacker", 1)
    assert _github(url, tampered, signature=_sign(body), delivery="d1").status_code == 401
    started = time.monotonic()
    accepted = _github(url, body, signature=_sign(body), delivery="d1")
    assert time.monotonic() - started < 10
    assert accepted.status_code == 202
    assert accepted.json()["status"] == "accepted"
    again = _github(url, body, signature=_sign(body), delivery="d1")
    assert again.status_code == 200
    assert again.json()["status"] == "duplicate"
    junk = b"\x00\x01 not json {"
    assert _github(url, junk, signature=_sign(junk), delivery="d2").status_code == 400
    array = b"[1, 2, 3]"
    assert _github(url, array, signature=_sign(array), delivery="d3").status_code == 400
    assert process.poll() is None  # still serving
    assert httpx.get(f"{url}/healthz", timeout=5).status_code == 200
    assert SECRET not in log_path.read_text(encoding="utf-8")


def test_gitlab_deliveries(server: tuple[str, subprocess.Popen[str], Path]) -> None:
    url, process, log_path = server
    body = json.dumps(NOTE_EVENT).encode()

    def post(token: str | None, key: str) -> httpx.Response:
        headers = {"X-Gitlab-Event": "Note Hook", "Idempotency-Key": key,
                   "Content-Type": "application/json"}
        if token is not None:
            headers["X-Gitlab-Token"] = token
        return httpx.post(f"{url}/webhook/gitlab", content=body, headers=headers, timeout=10)

    assert post(None, "k1").status_code == 401
    assert post("wrong", "k1").status_code == 401
    assert post(SECRET, "k1").status_code == 202
    assert post(SECRET, "k1").json()["status"] == "duplicate"
    assert process.poll() is None
    assert SECRET not in log_path.read_text(encoding="utf-8")


def test_dry_run_worker_logs_plans(server: tuple[str, subprocess.Popen[str], Path]) -> None:
    url, _, log_path = server
    payload = json.loads(json.dumps(ISSUE_EVENT))
    payload["label"]["name"] = "op-request"
    payload["issue"]["labels"] = [payload["label"]]
    body = json.dumps(payload).encode()
    response = _github(url, body, signature=_sign(body), delivery="d-generate")
    assert response.json()["action"] == "generate"
    for _ in range(50):
        if "would generate" in log_path.read_text(encoding="utf-8"):
            break
        time.sleep(0.1)
    assert "would generate" in log_path.read_text(encoding="utf-8")


def test_serve_refuses_to_start_without_a_secret() -> None:
    env = {key: value for key, value in os.environ.items() if "WEBHOOK" not in key}
    completed = subprocess.run([sys.executable, "-m", "bot", "serve", "--port", "0"], cwd=REPO,
                               env=env, capture_output=True, text=True, timeout=60, check=False)
    assert completed.returncode == 2
    assert "OPBOT_WEBHOOK_SECRET" in completed.stderr


def test_queue_survives_a_restart(tmp_path: Path) -> None:
    queue = JobQueue(tmp_path / "q.sqlite3")
    assert queue.first_delivery("github:x")
    assert not queue.first_delivery("github:x")
    first = queue.enqueue("github:a/b:gelu", {"action": "generate", "op": "gelu"})
    queue.enqueue("github:a/b:gelu", {"action": "regen", "op": "gelu"})
    queue.enqueue("github:a/b:softmax", {"action": "generate", "op": "softmax"})
    claimed = queue.claim()
    assert claimed is not None
    assert claimed.id == first
    # One job per op at a time: the second gelu job waits, softmax may run.
    second = queue.claim()
    assert second is not None
    assert second.plan["op"] == "softmax"
    assert queue.claim() is None
    queue.close()  # the server dies with two jobs running
    reopened = JobQueue(tmp_path / "q.sqlite3")
    assert reopened.recover() == 2
    assert not reopened.first_delivery("github:x")
    claimed_again = reopened.claim()
    assert claimed_again is not None
    assert claimed_again.id == first
    assert claimed_again.runs == 2
