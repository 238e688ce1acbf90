"""The candidate worker: imports the candidate and runs its forward on what the judge sends.

It never sees the reference, the seeds, the expected outputs, the comparison or any case
before the judge sends it: each `run` request carries one case's inputs, and the answer is
the outputs as data plus what the run-time guard recorded (best effort: this process is the
candidate's, so whatever it reports is checked by the judge, never trusted for the verdict's
values). It imports the candidate as soon as it starts, while the reference worker prepares
the cases.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from runners.base import Failure
from runners.harness.bounds import BoundsChecker
from runners.harness.guard import ForwardGuard, mutated_inputs, snapshot
from runners.harness.loading import UserCodeError, as_user_error, load_module
from runners.harness.tensors import decode_tree, encode_tree, place
from runners.harness.timing import bench, max_spread_from, measure, plan_for
from runners.harness.wire import Message, WireTensor
from runners.harness.worker import Channel, internal_failure, select_device, synchronize


class CandidateSession:
    def __init__(self, candidate: Path, device: str, *, package_ops: bool = False) -> None:
        self.candidate = candidate
        self.device = device
        self.guard = ForwardGuard(package_ops=package_ops)
        self.bounds = BoundsChecker()
        self.module: Any = None
        self.model: Any = None

    def load(self) -> Failure | None:
        self.guard.install()
        self.bounds.install()
        try:
            self.module = load_module(self.candidate, "opbot_candidate")
        except UserCodeError as exc:
            return Failure(check="load", message=exc.message, location=exc.location,
                           log_tail=exc.log or None)
        if not hasattr(self.module, "ModelNew"):
            return Failure(check="load", message="the candidate defines no class ModelNew "
                           "(KernelBench convention: same constructor and forward as the "
                           "reference's Model)")
        return None

    def build(self, request: Message) -> tuple[Failure | None, bool]:
        """ModelNew(*init_args) with the reference's parameters; whether they were shared."""
        args = list(decode_tree(request.header["init_args"], request.tensors))
        try:
            torch.manual_seed(int(request.header["init_seed"]))
            model = self.module.ModelNew(*args)
        except Exception as exc:  # noqa: BLE001 - user code
            error = as_user_error(exc, self.candidate)
            return Failure(check="init", message=f"ModelNew(*init_args) raised: {error.message}",
                           location=error.location, log_tail=error.log or None), False
        params = {item["name"]: decode_tree(item["value"], request.tensors)
                  for item in request.header.get("params") or []}
        shared = _share_parameters(params, model)
        mover = getattr(model, "to", None)
        self.model = mover(self.device) if callable(mover) else model
        return None, shared

    def run(self, request: Message) -> tuple[dict[str, Any], list[WireTensor]]:
        values = place(list(decode_tree(request.header["inputs"], request.tensors)),
                       list(request.header["layouts"]), self.device)
        before = snapshot(values)
        launches = self.guard.launches
        case = str(request.header.get("case"))
        self.bounds.reset()
        try:
            with torch.no_grad(), self.guard.watch() as computed:
                output = self.model(*values)
            synchronize(self.device)
        except Exception as exc:  # noqa: BLE001 - the candidate's own error
            error = as_user_error(exc, self.candidate)
            failure = self._out_of_bounds(case) or Failure(
                check="run", case=case, message=error.message, location=error.location,
                log_tail=error.log or None)
            return {"kind": "failed", "failure": failure.to_json()}, []
        out_of_bounds = self._out_of_bounds(case)  # even where the forward caught it
        if out_of_bounds is not None:
            return {"kind": "failed", "failure": out_of_bounds.to_json()}, []
        unsendable = _unsendable(output, self.device, case)
        if unsendable is not None:
            return {"kind": "failed", "failure": unsendable.to_json()}, []
        tensors: list[WireTensor] = []
        try:
            # Subclass hooks must not run while the outputs are read out.
            with torch._C.DisableTorchFunctionSubclass():
                tree = encode_tree(output, tensors)
        except Exception as exc:  # noqa: BLE001 - whatever the forward returned
            failure = Failure(check="output_structure", case=case, message=f"the outputs "
                              f"cannot be read back: {type(exc).__name__}: {exc}"[:500])
            return {"kind": "failed", "failure": failure.to_json()}, []
        return {"kind": "outputs", "output": tree, "computed": dict(computed),
                "launches": self.guard.launches - launches,
                "mutated": mutated_inputs(before, values)}, tensors

    def _out_of_bounds(self, case: str) -> Failure | None:
        violation = self.bounds.violation
        if violation is None:
            return None
        return Failure(check="out_of_bounds", case=case, message=violation.message())

    def time(self, request: Message) -> dict[str, Any]:
        """The forward timed on one case's inputs by the device's method, measured again
        while its spread is wider than the judge's `max_spread` (never on the CPU)."""
        values = place(list(decode_tree(request.header["inputs"], request.tensors)),
                       list(request.header["layouts"]), self.device)
        plan = plan_for(self.device)
        limit = max_spread_from(request.header.get("max_spread"))
        try:
            with torch.no_grad():
                measurement = measure(lambda: bench(lambda: self.model(*values), self.device,
                                                    plan), limit, plan.remeasures)
        except Exception as exc:  # noqa: BLE001 - the candidate's own error: no timing, no crash
            return {"kind": "untimed", "reason": f"{type(exc).__name__}: {exc}"[:300]}
        return {"kind": "timed", **measurement.to_json()}


def _unsendable(output: Any, device: str, case: str) -> Failure | None:
    """What cannot go to the judge as it is: a container or tensor subclass (its own code
    would run while it is read), an output on another device than the inputs (meta, the
    CPU on a GPU run). Only exact types are walked, so no candidate code runs here."""
    stack = [output]
    seen = 0
    while stack and seen < 10_000:  # an output list that holds itself must not hang us
        seen += 1
        item = stack.pop()
        kind = type(item)
        if kind in (list, tuple):
            stack.extend(list.__iter__(item) if kind is list else tuple.__iter__(item))
        elif isinstance(item, (list, tuple, dict)) or kind is dict:
            return Failure(check="output_structure", case=case, message=f"an output is a "
                           f"{kind.__name__}, not a plain tensor, list or tuple")
        elif isinstance(item, torch.Tensor):
            if kind is not torch.Tensor and kind is not torch.nn.Parameter:
                return Failure(check="output_structure", case=case, message=f"an output is "
                               f"a {kind.__name__} (a tensor subclass), not a plain tensor")
            if item.device.type != device:
                return Failure(check="device", case=case, message=f"an output is on "
                               f"{item.device.type}, the inputs on {device}")
        elif kind not in (int, float, bool, str, type(None)):
            return Failure(check="output_structure", case=case,
                           message=f"an output is a {kind.__name__}")
    return None


def _share_parameters(params: dict[str, Any], model: Any) -> bool:
    """The reference's weights in the candidate when their state dicts line up."""
    try:
        target = model.state_dict()
    except Exception:  # noqa: BLE001 - not an nn.Module: nothing to share
        return False
    if not params or params.keys() != target.keys() or any(
            params[key].shape != target[key].shape for key in params):
        return False
    model.load_state_dict(params)
    return True


def main(channel: Channel) -> None:
    request = channel.receive()
    started = time.monotonic()
    device, _ = select_device()
    session = CandidateSession(Path(str(request.header["candidate"])), device,
                               package_ops=request.header.get("package_ops") is True)
    failure = session.load()
    if failure is not None:
        channel.fail(failure)
        return
    channel.send({"kind": "loaded", "seconds": time.monotonic() - started})
    while True:
        request = channel.receive()
        if request.kind == "init":
            started = time.monotonic()
            failure, shared = session.build(request)
            if failure is not None:
                channel.fail(failure)
                return
            channel.send({"kind": "ready", "shared_parameters": shared,
                          "seconds": time.monotonic() - started})
        elif request.kind == "run":
            header, tensors = session.run(request)
            channel.send(header, tensors)
        elif request.kind == "time":
            channel.send(session.time(request))
        elif request.kind == "sync":  # the judge's closing round trip: its nonce, echoed
            channel.send({"kind": "synced", "nonce": str(request.header.get("nonce"))[:64]})
        else:
            return


def run(channel: Channel) -> None:
    try:
        main(channel)
    except Exception as exc:  # noqa: BLE001 - a harness fault still answers the judge
        channel.fail(internal_failure(exc))
