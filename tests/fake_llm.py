"""A scripted OpenAI-compatible Chat Completions server on loopback, for driving the real
`openai` client: each POST /v1/chat/completions gets the next scripted step (a reply, an
HTTP error with headers, or a delay), and every request is recorded with its headers."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Step:
    content: str | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    def text(self) -> str:
        return "\n".join(str(message.get("content", "")) for message in self.body["messages"])

    def last_user_message(self) -> str:
        users = [message for message in self.body["messages"] if message["role"] == "user"]
        return str(users[-1]["content"]) if users else ""


def reply(code: str, prose: str = "Here is the kernel.") -> Step:
    return Step(content=f"{prose}\n\n```python file=model_new.py\n{code}\n```\n")


class ScriptedLLM:
    def __init__(self, steps: list[Step]) -> None:
        self.steps = list(steps)
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> ScriptedLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next(self, request: RecordedRequest) -> Step:
        with self._lock:
            self.requests.append(request)
            if not self.steps:
                return Step(status=500, content="script exhausted")
            return self.steps.pop(0)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                headers = {name.lower(): value for name, value in self.headers.items()}
                step = scripted._next(RecordedRequest(self.path, headers, body))
                if step.delay_s:
                    time.sleep(step.delay_s)
                if self.path != "/v1/chat/completions":
                    self._send(404, {"error": {"message": "not found"}}, {})
                elif step.status != 200:
                    self._send(step.status, {"error": {"message": step.content or "error",
                                                       "type": "server_error"}}, step.headers)
                else:
                    self._send(200, _completion(body, step.content or ""), step.headers)

            def _send(self, status: int, payload: dict[str, Any],
                      headers: dict[str, str]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test): nothing to answer

        return Handler


def _completion(request: dict[str, Any], content: str) -> dict[str, Any]:
    prompt = sum(len(str(message.get("content", ""))) for message in request["messages"])
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "scripted"),
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt // 4, "completion_tokens": len(content) // 4,
                  "total_tokens": prompt // 4 + len(content) // 4},
    }
