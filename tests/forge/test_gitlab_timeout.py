"""python-gitlab waits for ever by default: a GitLab that accepts a connection and never
answers must not hang a job, the gate or a server's worker."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from bot.forge.base import ForgeError
from bot.forge.gitlab import client


@pytest.fixture
def silent_server() -> Iterator[str]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])  # read nothing, answer nothing
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join(timeout=2)
    for connection in held:
        connection.close()
    listener.close()


def test_a_silent_gitlab_is_an_error_not_a_hang(silent_server: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client, "HTTP_TIMEOUT_S", 1.0)
    forge = client.GitLabForge.connect(silent_server, "glpat-test", "group/project")
    started = time.monotonic()
    with pytest.raises(ForgeError):
        forge.whoami()
    assert time.monotonic() - started < 20
