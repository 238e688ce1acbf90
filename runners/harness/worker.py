"""What both workers share: the channel to the judge, the device, failures as messages.

A worker is started by the judge with its stdin and stdout as the channel. Before any user
code runs, the worker moves the channel to descriptors of its own and points 0 at /dev/null
and 1 at its log (stderr), so what user code prints never mixes with messages.
"""

from __future__ import annotations

import math
import os
import traceback
from dataclasses import dataclass
from typing import Any

from runners.base import Failure
from runners.harness.wire import Message, Reader, WireTensor, write_message

# What the judge sends a worker is trusted; the cap only guards against a runaway bug.
_FROM_JUDGE_MAX = 1 << 40


@dataclass
class Channel:
    reader: Reader
    out_fd: int

    @classmethod
    def take_stdio(cls) -> Channel:
        in_fd, out_fd = os.dup(0), os.dup(1)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(2, 1)
        return cls(Reader(in_fd), out_fd)

    def receive(self) -> Message:
        return self.reader.read(math.inf, _FROM_JUDGE_MAX)

    def send(self, header: dict[str, Any], tensors: list[WireTensor] | None = None) -> None:
        write_message(self.out_fd, json_safe(header), tensors or [])

    def fail(self, failure: Failure, **extra: Any) -> None:
        self.send({"kind": "failed", "failure": failure.to_json(), **extra})


def internal_failure(exc: BaseException) -> Failure:
    """A fault of the harness itself (not of user code): still a verdict, with the trace."""
    return Failure(check="crash", message=f"the harness failed: {type(exc).__name__}: {exc}",
                   log_tail=traceback.format_exc()[-4000:])


def json_safe(value: Any) -> Any:
    """Plain JSON: non-finite floats become strings ("nan", "inf")."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value


def select_device() -> tuple[str, str]:
    """The device candidates run on, and a description. The CPU means Triton's interpreter."""
    import torch

    if torch.cuda.is_available():
        return "cuda", f"cuda ({torch.cuda.get_device_name(0)})"
    try:
        import torch_npu  # noqa: F401

        npu = getattr(torch, "npu", None)
        if npu is not None and npu.is_available():
            return "npu", "npu (Ascend)"
    except Exception:  # noqa: BLE001, S110 - torch_npu without CANN fails in many ways; CPU it is
        pass
    os.environ["TRITON_INTERPRET"] = "1"
    return "cpu", "cpu (Triton interpreter)"


def synchronize(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()
    elif device == "npu":
        getattr(torch, "npu").synchronize()  # noqa: B009 - torch.npu exists only with torch_npu
