"""The data-only format between the judge and its workers: framed JSON headers plus raw bytes.

One message is ``MAGIC``, the header's length (4 bytes, big-endian), the header (UTF-8
JSON), then the payload: every tensor's bytes back to back, in the order the header lists
them. Nothing in it can run code when read (no pickle), every size is checked against a cap
before anything is allocated, and any malformed message is a `WireError`, never a crash.

Values travel as a tree: ``{"t": "tensor", "i": 0}`` names the payload's tensor 0,
``{"t": "list"|"tuple", "items": [...]}`` nests, ``{"t": "value", "v": ...}`` is plain JSON.
This side needs NumPy only (the judge never imports torch); the workers convert torch
tensors to and from `WireTensor` in `runners.harness.tensors`.
"""

from __future__ import annotations

import json
import os
import select
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MAGIC = b"OPB1"
MAX_HEADER_BYTES = 8 * 1024 * 1024
MAX_DEPTH = 32
_CHUNK = 1024 * 1024

# Wire dtype -> the NumPy dtype its bytes are read as. bfloat16 has no NumPy dtype: its
# bits travel as uint16 and are widened to float32 (exactly) for comparison.
NUMPY_DTYPES: dict[str, str] = {
    "float64": "<f8", "float32": "<f4", "float16": "<f2", "bfloat16": "<u2",
    "int64": "<i8", "int32": "<i4", "int16": "<i2", "int8": "i1", "uint8": "u1", "bool": "?",
}


class WireError(Exception):
    """A message that is malformed, too large, late, or missing (the peer died)."""


class PeerClosedError(WireError):
    """The other side closed the channel (it exited, crashed or was killed)."""


class DeadlineError(WireError):
    """No complete message arrived before the deadline."""


class UnrequestedError(WireError):
    """The peer sent bytes before it was asked anything: the protocol is one answer per
    request, so its code wrote on the channel (a forged answer, out of step with the judge)."""


@dataclass
class WireTensor:
    """A tensor as it travels: its values (C order), and what the sender said about it."""

    dtype: str
    shape: list[int]
    data: bytes
    meta: dict[str, Any] = field(default_factory=dict)

    def array(self) -> np.ndarray[Any, Any]:
        """The values as a NumPy array (bfloat16 widened exactly to float32)."""
        raw = np.frombuffer(self.data, dtype=NUMPY_DTYPES[self.dtype]).reshape(self.shape)
        if self.dtype == "bfloat16":
            return (raw.astype(np.uint32) << 16).view(np.float32)
        return raw


@dataclass
class Message:
    header: dict[str, Any]
    tensors: list[WireTensor]

    @property
    def kind(self) -> str:
        return str(self.header.get("kind", ""))


def encode(header: dict[str, Any], tensors: list[WireTensor]) -> bytes:
    described = [{"dtype": item.dtype, "shape": item.shape, "nbytes": len(item.data),
                  "meta": item.meta} for item in tensors]
    text = json.dumps({**header, "tensors": described}, allow_nan=False, default=str)
    head = text.encode("utf-8")
    return b"".join([MAGIC, len(head).to_bytes(4, "big"), head, *(t.data for t in tensors)])


def write_message(fd: int, header: dict[str, Any], tensors: Sequence[WireTensor] = ()) -> None:
    """Write one whole message to a blocking descriptor (a pipe)."""
    data = memoryview(encode(header, list(tensors)))
    while data:
        written = os.write(fd, data[:_CHUNK])
        data = data[written:]


def send_until(fd: int, data: bytes, deadline: float,
               on_wait: Callable[[], None] | None = None) -> None:
    """Write all of `data` to a non-blocking pipe before `deadline` (a stuck peer cannot
    block the judge); DeadlineError or PeerClosedError otherwise."""
    os.set_blocking(fd, False)
    view = memoryview(data)
    while view:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise DeadlineError("the worker stopped reading before the deadline")
        _, ready, _ = select.select([], [fd], [], min(remaining, 0.2))
        if on_wait is not None:
            on_wait()
        if not ready:
            continue
        try:
            written = os.write(fd, view[:_CHUNK])
        except BlockingIOError:
            continue
        except (BrokenPipeError, ConnectionResetError):
            raise PeerClosedError("the worker closed its channel") from None
        view = view[written:]


# -- reading ----------------------------------------------------------------------------


class Reader:
    """Reads messages from one descriptor under a deadline and a size cap."""

    def __init__(self, fd: int, *, on_wait: Callable[[], None] | None = None) -> None:
        self.fd = fd
        self._buffer = bytearray()
        self._on_wait = on_wait  # called between waits: the parent's watchdog

    def read(self, deadline: float, max_payload: int) -> Message:
        prefix = self._take(8, deadline)
        if prefix[:4] != MAGIC:
            raise WireError("the channel carried something that is not a message")
        length = int.from_bytes(prefix[4:8], "big")
        if length > MAX_HEADER_BYTES:
            raise WireError(f"a message header of {length} bytes (at most {MAX_HEADER_BYTES})")
        header = parse_header(self._take(length, deadline))
        described = header.pop("tensors")
        total = sum(item["nbytes"] for item in described)
        if total > max_payload:
            raise WireError(f"a message of {total} bytes, more than the {max_payload} expected")
        payload = self._take(total, deadline)
        tensors: list[WireTensor] = []
        offset = 0
        for item in described:
            tensors.append(WireTensor(dtype=item["dtype"], shape=item["shape"],
                                      data=payload[offset:offset + item["nbytes"]],
                                      meta=item["meta"]))
            offset += item["nbytes"]
        return Message(header, tensors)

    def pending(self) -> bool:
        """Whether bytes are waiting that no request has asked for yet (buffered, or on the
        channel now); a closed channel is not pending (the next read says it is closed)."""
        if self._buffer:
            return True
        ready, _, _ = select.select([self.fd], [], [], 0)
        if not ready:
            return False
        chunk = os.read(self.fd, _CHUNK)
        self._buffer += chunk
        return bool(chunk)

    def _take(self, count: int, deadline: float) -> bytes:
        while len(self._buffer) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DeadlineError("no answer before the deadline")
            ready, _, _ = select.select([self.fd], [], [], min(remaining, 0.2))
            if self._on_wait is not None:
                self._on_wait()
            if not ready:
                continue
            chunk = os.read(self.fd, max(_CHUNK, count - len(self._buffer)))
            if not chunk:
                raise PeerClosedError("the worker closed its channel")
            self._buffer += chunk
        taken = bytes(self._buffer[:count])
        del self._buffer[:count]
        return taken


def parse_header(raw: bytes) -> dict[str, Any]:
    """A header, checked for shape: a dict, bounded nesting, well-formed tensor entries."""
    try:
        header = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise WireError(f"an unreadable message header ({type(exc).__name__})") from None
    if not isinstance(header, dict) or not isinstance(header.get("tensors"), list):
        raise WireError("a message header without its tensor list")
    if depth(header) > MAX_DEPTH:
        raise WireError(f"a message header nested deeper than {MAX_DEPTH}")
    for item in header["tensors"]:
        _check_tensor_entry(item)
    return header


def _check_tensor_entry(item: Any) -> None:
    if not isinstance(item, dict) or item.get("dtype") not in NUMPY_DTYPES:
        raise WireError(f"a tensor of an unsupported kind: {str(item)[:80]}")
    shape, nbytes = item.get("shape"), item.get("nbytes")
    if not isinstance(shape, list) or not all(
            isinstance(size, int) and not isinstance(size, bool) and size >= 0 for size in shape):
        raise WireError("a tensor with a malformed shape")
    if not isinstance(nbytes, int) or nbytes < 0:
        raise WireError("a tensor with a malformed size")
    count = 1
    for size in shape:
        count *= size
    if count * np.dtype(NUMPY_DTYPES[item["dtype"]]).itemsize != nbytes:
        raise WireError(f"a tensor whose size does not match its shape {shape}")
    if not isinstance(item.get("meta", {}), dict):
        raise WireError("a tensor with malformed metadata")


def depth(value: Any, level: int = 0) -> int:
    """How deeply `value` nests (iteratively bounded: stops counting past MAX_DEPTH)."""
    if level > MAX_DEPTH:
        return level
    if isinstance(value, dict):
        return max((depth(item, level + 1) for item in value.values()), default=level)
    if isinstance(value, list):
        return max((depth(item, level + 1) for item in value), default=level)
    return level


# -- value trees ------------------------------------------------------------------------


def tree_leaves(tree: Any, tensors: list[WireTensor]) -> list[WireTensor | Any]:
    """The leaves of a value tree in order: tensors resolved, plain values as they are."""
    if not isinstance(tree, dict):
        raise WireError("a malformed value tree")
    kind = tree.get("t")
    if kind == "tensor":
        index = tree.get("i")
        if not isinstance(index, int) or not 0 <= index < len(tensors):
            raise WireError("a value tree naming a tensor that is not there")
        return [tensors[index]]
    if kind in ("list", "tuple"):
        items = tree.get("items")
        if not isinstance(items, list):
            raise WireError("a malformed value tree")
        return [leaf for item in items for leaf in tree_leaves(item, tensors)]
    if kind == "value":
        return [tree.get("v")]
    raise WireError(f"a value tree of unknown kind {str(kind)[:40]}")


def tree_structure(tree: Any) -> str:
    """The shape of a value tree, as the comparison reports it: Tensor, tuple[Tensor, int]..."""
    if not isinstance(tree, dict):
        return "?"
    kind = tree.get("t")
    if kind == "tensor":
        return "Tensor"
    if kind in ("list", "tuple"):
        inner = ", ".join(tree_structure(item) for item in tree.get("items") or [])
        return f"{kind}[{inner}]"
    value = tree.get("v")
    return type(value).__name__ if kind == "value" else "?"
