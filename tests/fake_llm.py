"""A scripted OpenAI-compatible Chat Completions server on loopback, for driving the real
`openai` client: each POST /v1/chat/completions gets the next scripted step (a reply, an
HTTP error with headers, or a delay), and every request is recorded with its headers.

Like a real server it answers `stream: true` with Server-Sent Events (`data:` lines of
`chat.completion.chunk`, a usage chunk only when `stream_options.include_usage` asks for
one, then `data: [DONE]`), and a step can cut the reply off (`finish_reason`), leave usage
out, report hostile usage, or carry reasoning in a `reasoning_content` field. A server made
`strict` refuses parameters it does not know with HTTP 400 naming them, before any step."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Step:
    content: str | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    finish_reason: str = "stop"
    usage: bool = True  # False: the reply reports no usage at all
    # (prompt, completion) reported instead of the honest figures (a hostile server)
    reported: tuple[int, int] | None = None
    reasoning: str | None = None  # sent in the message's / deltas' reasoning field
    reasoning_field: str = "reasoning_content"
    # Streaming: the reply's content goes in this many chunks, this far apart.
    chunks: int = 3
    chunk_delay_s: float = 0.0
    ignore_stream: bool = False  # answer one JSON body even when a stream was asked for
    # A server that never finishes: one byte (an SSE comment's colon, or a space of the
    # JSON body) every this many seconds, until the client goes away.
    trickle_s: float = 0.0
    raw_body: bytes | None = None  # a 200 with this body, whatever was asked (a proxy's)


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
    def __init__(self, steps: list[Step], *, refuse: Iterable[str] = ()) -> None:
        """`refuse`: request parameters answered with HTTP 400 naming them, as strict
        servers do (the step is not used up)."""
        self.steps = list(steps)
        self.refuse = frozenset(refuse)
        self.requests: list[RecordedRequest] = []
        self.refused: list[str] = []  # the parameter each 400 named
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
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

    def _next(self, request: RecordedRequest) -> Step | str:
        """The step to answer with, or the name of a parameter to refuse."""
        with self._lock:
            self.requests.append(request)
            refused = sorted(name for name in self.refuse if name in request.body)
            if refused:
                self.refused.append(refused[0])
                return refused[0]
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
                if isinstance(step, str):
                    self._send(400, {"error": {
                        "message": f"Unsupported parameter: '{step}' is not supported.",
                        "type": "invalid_request_error", "param": step}}, {})
                    return
                if step.delay_s:
                    time.sleep(step.delay_s)
                if step.trickle_s:
                    self._trickle(step.trickle_s, bool(body.get("stream")))
                elif step.raw_body is not None:
                    self._raw(step.raw_body)
                elif self.path != "/v1/chat/completions":
                    self._send(404, {"error": {"message": "not found"}}, {})
                elif step.status != 200:
                    self._send(step.status, {"error": {"message": step.content or "error",
                                                       "type": "server_error"}}, step.headers)
                elif body.get("stream") and not step.ignore_stream:
                    self._stream(body, step)
                else:
                    self._send(200, _completion(body, step), step.headers)

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

            def _trickle(self, every_s: float, stream: bool) -> None:
                try:
                    self.send_response(200)
                    self.send_header("Content-Type",
                                     "text/event-stream" if stream else "application/json")
                    self.end_headers()
                    while True:
                        self.wfile.write(b":" if stream else b" ")
                        self.wfile.flush()
                        time.sleep(every_s)
                except (BrokenPipeError, ConnectionResetError, OSError):
                    pass

            def _raw(self, data: bytes) -> None:
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _stream(self, request: dict[str, Any], step: Step) -> None:
                # HTTP/1.0: no length, the body ends when the connection closes.
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Cache-Control", "no-cache")
                    for name, value in step.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    for number, chunk in enumerate(_chunks(request, step)):
                        if number and step.chunk_delay_s:
                            time.sleep(step.chunk_delay_s)
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                        self.wfile.flush()
                    self.wfile.write(b"data: [DONE]\n\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass

        return Handler


def _usage(request: dict[str, Any], step: Step) -> dict[str, int]:
    if step.reported is not None:
        prompt, completion = step.reported
    else:
        prompt = sum(len(str(message.get("content", ""))) for message in request["messages"]) // 4
        completion = (len(step.content or "") + len(step.reasoning or "")) // 4
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


def _completion(request: dict[str, Any], step: Step) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": step.content or ""}
    if step.reasoning is not None:
        message[step.reasoning_field] = step.reasoning
    answer: dict[str, Any] = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "scripted"),
        "choices": [{"index": 0, "finish_reason": step.finish_reason, "message": message}],
    }
    if step.usage:
        answer["usage"] = _usage(request, step)
    return answer


def _split(text: str, parts: int) -> list[str]:
    size = max(1, -(-len(text) // max(1, parts)))
    return [text[start:start + size] for start in range(0, len(text), size)] or [""]


def _chunks(request: dict[str, Any], step: Step) -> list[dict[str, Any]]:
    """The chunks of a streamed reply: reasoning deltas, content deltas, the finish reason,
    and a usage chunk (no choices) only when the request asked for one."""
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": "chatcmpl-scripted", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": request.get("model", "scripted"),
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    if step.reasoning:
        chunks += [chunk({step.reasoning_field: piece})
                   for piece in _split(step.reasoning, step.chunks)]
    chunks += [chunk({"content": piece}) for piece in _split(step.content or "", step.chunks)]
    chunks.append(chunk({}, step.finish_reason))
    include = (request.get("stream_options") or {}).get("include_usage")
    if include and step.usage:
        chunks.append({"id": "chatcmpl-scripted", "object": "chat.completion.chunk",
                       "created": int(time.time()), "model": request.get("model", "scripted"),
                       "choices": [], "usage": _usage(request, step)})
    return chunks
