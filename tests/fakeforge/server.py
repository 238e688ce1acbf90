"""The HTTP server: a real loopback socket, a background thread, two front ends.

Layout (one port):
  /                  GitHub REST (PyGithub's base_url is the server root)
  /gitlab/api/v4/    GitLab REST (python-gitlab's url is <root>/gitlab)
  /gitlab/<path>     GitLab web pages (web_url values), a stub page
  /_web/<path>       GitHub web pages (html_url values), a stub page
  /_blobs/<path>     pre-signed log downloads (what GitHub's logs endpoint redirects to)
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Protocol
from urllib.parse import parse_qsl, urlsplit

from .model import State
from .spec import GitHubSpec
from .wire import Call, Reply

GITLAB_PREFIX = "/gitlab"
GITLAB_API = f"{GITLAB_PREFIX}/api/v4"
WEB_PREFIX = "/_web"
BLOB_PREFIX = "/_blobs"
GRAPHQL_PATH = "/graphql"  # where PyGithub looks for it beside a base URL with no /api/v3


class FrontEnd(Protocol):
    def handle(self, call: Call) -> Reply: ...


class FakeServer:
    def __init__(self, github_spec: GitHubSpec | None) -> None:
        self.state = State()
        self._blob_key = secrets.token_bytes(16)
        self.blobs: dict[str, str] = {}  # blob name -> text, served by signed URL
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.fake = self  # type: ignore[attr-defined]
        self.port = self.httpd.server_address[1]
        self.root = f"http://127.0.0.1:{self.port}"
        self.github: FrontEnd | None = None
        if github_spec is not None:
            # Imported on demand: it needs openapi-core, which GitLab-only tests do not.
            from .github_api import GitHubApi
            self.github = GitHubApi(self, github_spec)
        from .github_graphql import GitHubGraphQL
        from .gitlab_api import GitLabApi
        self.gitlab: FrontEnd = GitLabApi(self)
        self.github_graphql: FrontEnd = GitHubGraphQL(self)
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="fakeforge",
                                        daemon=True)
        self._thread.start()

    @property
    def gitlab_url(self) -> str:
        return f"{self.root}{GITLAB_PREFIX}"

    def reset(self) -> State:
        self.state = State()
        self.blobs.clear()
        return self.state

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)

    # -- signed blob URLs (no token: the real ones are pre-signed storage URLs) --------
    def blob_url(self, name: str, text: str) -> str:
        self.blobs[name] = text
        return f"{self.root}{BLOB_PREFIX}/{name}?sig={self._sign(name)}"

    def _sign(self, name: str) -> str:
        return hmac.new(self._blob_key, name.encode(), hashlib.sha256).hexdigest()

    def _serve_blob(self, call: Call) -> Reply:
        name = call.path.lstrip("/")
        if not hmac.compare_digest(call.arg("sig") or "", self._sign(name)) \
                or name not in self.blobs:
            return Reply.text(403, "signature does not match")
        return Reply.text(200, self.blobs[name])

    # -- dispatch ------------------------------------------------------------------------
    def dispatch(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Reply:
        split = urlsplit(target)
        path, query = split.path, parse_qsl(split.query, keep_blank_values=True)
        for prefix, front in self._mounts():
            if path.startswith(prefix) and front is not None:
                call = Call(method, path[len(prefix):], query, headers, body,
                            f"{self.root}{prefix}")
                with self.state.lock:
                    self.state.requests.append(f"{method} {path}")
                    return front(call)
        return Reply.text(404, "no front end serves this path")

    def _mounts(self) -> list[tuple[str, Callable[[Call], Reply] | None]]:
        return [
            (GITLAB_API, self.gitlab.handle),
            (GITLAB_PREFIX, _web_page),
            (WEB_PREFIX, _web_page),
            (BLOB_PREFIX, self._serve_blob),
            (GRAPHQL_PATH, self.github_graphql.handle),
            ("", self.github.handle if self.github else _no_spec),
        ]


def _web_page(call: Call) -> Reply:
    return Reply(200, f"<html><body>fake forge page: {call.path}</body></html>".encode(),
                 "text/html; charset=utf-8")


def _no_spec(call: Call) -> Reply:
    return Reply.text(503, "the GitHub front end needs GitHub's OpenAPI description")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as both clients use it

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        fake: FakeServer = self.server.fake  # type: ignore[attr-defined]
        try:
            reply = fake.dispatch(self.command, self.path, headers, body)
        except Exception as exc:  # noqa: BLE001 - a bug in the fake: loud, and no hung client
            fake.state.validation_errors.append(f"fake forge crashed on {self.command} "
                                                f"{urlsplit(self.path).path}: {exc!r}")
            reply = Reply.text(500, "fake forge crashed")
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(reply.body)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply.body)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = do_HEAD = _serve

    def log_message(self, format: str, *args: object) -> None:
        """Silent: request logs are noise in test output (and must never hold tokens)."""
