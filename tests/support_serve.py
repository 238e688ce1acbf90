"""`opbot serve` in its own process on a loopback port, and signed deliveries to it."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import httpx

from tests.support import REPO


@cache
def loopback() -> httpx.Client:
    """One client for the tests' calls to servers on loopback (plain HTTP). `httpx.get`
    builds a client per call, and with it a TLS context that loads the CA bundle (~35 ms
    of CPU): a story's settle loop, asking /healthz ten times a second, spent a quarter of
    a core on that. No kept connections: each call opens its own, as before."""
    return httpx.Client(verify=False, limits=httpx.Limits(max_keepalive_connections=0))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RunningServer:
    url: str
    process: subprocess.Popen[str]
    log: Path
    secret: str

    def github(self, event: str, payload: dict[str, Any], delivery: str | None = None
               ) -> httpx.Response:
        body = json.dumps(payload).encode()
        signature = "sha256=" + hmac.new(self.secret.encode(), body, hashlib.sha256).hexdigest()
        return loopback().post(f"{self.url}/webhook/github", content=body, timeout=10, headers={
            "X-GitHub-Event": event, "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
            "X-Hub-Signature-256": signature, "Content-Type": "application/json"})

    def gitlab(self, event: str, payload: dict[str, Any], delivery: str | None = None
               ) -> httpx.Response:
        return loopback().post(f"{self.url}/webhook/gitlab", content=json.dumps(payload).encode(),
                          timeout=10, headers={"X-Gitlab-Event": event,
                                               "X-Gitlab-Token": self.secret,
                                               "Idempotency-Key": delivery or str(uuid.uuid4()),
                                               "Content-Type": "application/json"})

    def deliver(self, forge: str, event: str, payload: dict[str, Any],
                delivery: str | None = None) -> httpx.Response:
        send = self.github if forge == "github" else self.gitlab
        return send(event, payload, delivery)

    def jobs(self) -> dict[str, int]:
        counts: dict[str, int] = loopback().get(f"{self.url}/healthz", timeout=5).json()["jobs"]
        return counts

    def wait_for_jobs(self, finished: int, timeout_s: float = 300) -> dict[str, int]:
        """Until `finished` jobs are done or failed and none is queued or running."""
        deadline = time.monotonic() + timeout_s
        counts: dict[str, int] = {}
        while time.monotonic() < deadline:
            counts = self.jobs()
            if counts.get("done", 0) + counts.get("failed", 0) >= finished and not (
                    counts.get("queued") or counts.get("running")):
                return counts
            time.sleep(0.2)
        raise AssertionError(f"jobs did not finish: {counts}\n{self.log.read_text()[-5000:]}")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def start_serve(*args: str, env: dict[str, str], log: Path, secret: str) -> RunningServer:
    """`opbot serve ARGS` (with OPBOT_WEBHOOK_SECRET=secret in `env`), once /healthz answers;
    its output goes to `log`."""
    port = free_port()
    with log.open("w") as handle:
        process = subprocess.Popen(
            [sys.executable, "-m", "bot", "serve", "--host", "127.0.0.1", "--port", str(port),
             *args], cwd=REPO, env={**env, "OPBOT_WEBHOOK_SECRET": secret}, stdout=handle,
            stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(150):
        try:
            if loopback().get(f"{url}/healthz", timeout=1).status_code == 200:
                return RunningServer(url, process, log, secret)
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise AssertionError(f"opbot serve did not start:\n{log.read_text()}")
