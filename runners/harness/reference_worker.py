"""The reference worker: runs the reference, never the candidate.

It loads the reference, builds `Model(*init_args)`, makes every input case from the
judge's seeds (the spec's cases, or the reference's own `get_inputs()` plus odd-sized tails,
a fresh-valued repeat and a non-contiguous case), computes the expected outputs and sends
all of it to the judge in one message. It then answers the judge's requests for a case's
float64 truth (only when a strict comparison fails) and for the reference's timing.
"""

from __future__ import annotations

import copy
import importlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from runners.base import (
    DEFAULT_TOLERANCES,
    CaseSpec,
    Failure,
    InputCase,
    StageResult,
    Tolerance,
)
from runners.harness import inputs as case_inputs
from runners.harness import scaling
from runners.harness.compare import would_pass_as_zeros
from runners.harness.inputs import PreparedCase
from runners.harness.loading import UserCodeError, as_user_error, load_module
from runners.harness.seeds import derive_seed
from runners.harness.tensors import encode_tree, layout_for, place
from runners.harness.timing import (
    BenchPlan,
    Measurement,
    bench,
    clock_note,
    device_name,
    max_spread_from,
    measure,
    plan_for,
)
from runners.harness.wire import Message, WireTensor
from runners.harness.worker import Channel, internal_failure, select_device, synchronize

_LOW_SIGNAL_SCALES = (16.0, 256.0, 4096.0)
_TAIL_PLANS = (("tail-1", 4), ("tail-2", 8))
# Timed shapes beyond the perf case, on a device: at most this many, none this small.
_MORE_TIMED_CASES = 3
_MIN_TIMED_ELEMENTS = 64 * 1024
# What a torch.compile of one shape is assumed to need before one has been seen.
_COMPILE_ALLOWANCE_S = 30.0


class StopVerification(Exception):
    """A failure after which nothing more can be prepared (a broken reference)."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


@dataclass
class ReferenceJob:
    reference: Path
    cases: list[CaseSpec]
    init_args: list[Any] | None
    tolerances: dict[str, Tolerance]
    derive_tail_cases: bool
    perf_case: CaseSpec | None
    seed: int
    init_seed: int
    time_it: bool = False

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReferenceJob:
        tolerances = dict(DEFAULT_TOLERANCES)
        for name, tol in (data.get("tolerances") or {}).items():
            tolerances[name] = Tolerance(atol=float(tol["atol"]), rtol=float(tol["rtol"]))
        perf = data.get("perf_case")
        return cls(reference=Path(data["reference"]),
                   cases=[CaseSpec.from_json(item) for item in data.get("cases") or []],
                   init_args=data.get("init_args"), tolerances=tolerances,
                   derive_tail_cases=bool(data.get("derive_tail_cases", True)),
                   perf_case=CaseSpec.from_json(perf) if perf else None, seed=int(data["seed"]),
                   init_seed=int(data["init_seed"]), time_it=bool(data.get("time_it")))


@dataclass
class ReferenceSession:
    job: ReferenceJob
    device: str
    stages: list[StageResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    inferred: dict[str, Any] | None = None
    module: ModuleType | None = None
    model: Any = None
    init_args: list[Any] = field(default_factory=list)
    expected: dict[str, Any] = field(default_factory=dict)
    cases: dict[str, PreparedCase] = field(default_factory=dict)
    echoing: list[str] = field(default_factory=list)  # cases whose output is an input
    scale_plan: scaling.ScalePlan | None = None  # the CPU's scaled-down shapes, if any

    # -- the model --------------------------------------------------------------------

    def load(self) -> None:
        started = time.monotonic()
        try:
            self.module = load_module(self.job.reference, "opbot_reference")
        except UserCodeError as exc:
            raise StopVerification(Failure(
                check="reference", message=f"the reference cannot be imported: {exc.message}",
                location=exc.location, log_tail=exc.log or None)) from None
        if not hasattr(self.module, "Model"):
            raise StopVerification(Failure(check="reference",
                                           message="the reference defines no class Model"))
        self.init_args = self._init_args()
        self._scale_for_cpu()
        try:
            torch.manual_seed(self.job.init_seed)
            model = self.module.Model(*self.init_args)
        except Exception as exc:  # noqa: BLE001 - user code
            error = as_user_error(exc, self.job.reference)
            raise StopVerification(Failure(check="reference",
                                           message=f"Model(*init_args) raised: {error.message}",
                                           location=error.location)) from None
        mover = getattr(model, "to", None)
        self.model = mover(self.device) if callable(mover) else model
        # The real init args: a spec written from these keeps the reference's own sizes.
        plan = self.scale_plan
        self.inferred = {"init_args": _jsonable(plan.init_before if plan else self.init_args)}
        if plan is not None:
            self.inferred["scaled"] = plan.to_json()
        self.stages.append(StageResult("load", True, time.monotonic() - started,
                                       note="the reference"))

    def _scale_for_cpu(self) -> None:
        """On the CPU interpreter, a reference past the work budget runs at scaled-down
        shapes (runners.harness.scaling); on a device, at its own sizes."""
        if self.device != "cpu" or self.module is None:
            return
        try:
            plan = scaling.plan_for_reference(self.module, self.init_args, self.job.cases)
        except scaling.UnscalableError as exc:
            raise StopVerification(Failure(check="reference", message=str(exc))) from None
        if plan is not None:
            scaling.apply_to_constants(self.module, plan)
            self.init_args = list(plan.init_after)
            self.scale_plan = plan

    def _scaled(self, case: CaseSpec) -> CaseSpec:
        return case if self.scale_plan is None else scaling.scale_case(case, self.scale_plan)

    def _init_args(self) -> list[Any]:
        if self.job.init_args is not None:
            return list(self.job.init_args)
        get_init = getattr(self.module, "get_init_inputs", None)
        if get_init is None:
            return []
        try:
            return list(get_init())
        except Exception as exc:  # noqa: BLE001 - user code
            raise StopVerification(Failure(
                check="reference", message="get_init_inputs() raised: "
                f"{as_user_error(exc, self.job.reference).message}")) from None

    def parameters(self) -> dict[str, torch.Tensor]:
        try:
            state = self.model.state_dict()
        except Exception:  # noqa: BLE001 - not an nn.Module: nothing to share
            return {}
        return {name: value.detach() for name, value in state.items()
                if isinstance(value, torch.Tensor)}

    # -- running it -------------------------------------------------------------------

    def run(self, values: list[Any], layouts: list[str]) -> Any:
        with torch.no_grad():
            output = self.model(*place(values, layouts, self.device))
        synchronize(self.device)
        return output

    def _run_or_none(self, values: list[Any], layouts: list[str]) -> Any:
        try:
            return self.run(values, layouts)
        except Exception:  # noqa: BLE001 - a derived case the reference rejects is skipped
            return None

    def _expected_for(self, case: PreparedCase) -> Any:
        try:
            return self.run(case.inputs, case.layouts)
        except Exception as exc:  # noqa: BLE001 - user code
            error = as_user_error(exc, self.job.reference)
            raise StopVerification(Failure(
                check="reference", case=case.name,
                message=f"the reference's forward raised on case {case.name}: {error.message}",
                location=error.location)) from None

    def truth(self, case: PreparedCase) -> Any:
        """The reference in float64 on the CPU: what a candidate's rounding is judged by."""
        try:
            model = copy.deepcopy(self.model).to("cpu").double()
            values = [value.double() if isinstance(value, torch.Tensor)
                      and value.dtype.is_floating_point else value for value in case.inputs]
            with torch.no_grad():
                return model(*place(values, case.layouts, "cpu"))
        except Exception:  # noqa: BLE001 - no float64 path: the strict comparison stands
            return None

    # -- cases ------------------------------------------------------------------------

    def prepare(self) -> list[PreparedCase]:
        started = time.monotonic()
        cases = self._spec_cases() if self.job.cases else self._inferred_cases()
        strided = self._strided_case(cases)
        if strided is not None:
            cases.append(strided)
        for case in cases:
            self._strengthen_low_signal(case)
        if cases and len(self.echoing) == len(cases):
            self.warnings.append("low_signal: on every case the reference returns one of its "
                                 "inputs unchanged: a candidate returning its input passes")
        self._check_independence(cases)
        self.cases = {case.name: case for case in cases}
        self.stages.append(StageResult("build", True, time.monotonic() - started,
                                       note=f"{len(cases)} cases prepared"))
        return cases

    def _spec_cases(self) -> list[PreparedCase]:
        seeded = [CaseSpec(name=case.name, inputs=case.inputs,
                           seed=derive_seed(self.job.seed, f"{case.name}:{case.seed}"))
                  for case in map(self._scaled, self.job.cases)]
        prepared = case_inputs.spec_cases(seeded, fresh_seed=derive_seed(self.job.seed,
                                                                          "fresh"))
        for case in prepared:
            self.expected[case.name] = self._expected_for(case)
        return prepared

    def _inferred_cases(self) -> list[PreparedCase]:
        get_inputs = getattr(self.module, "get_inputs", None)
        if get_inputs is None:
            raise StopVerification(Failure(
                check="reference", message="the reference has no get_inputs() and the spec "
                "declares no inputs: nothing says what to run it on"))
        seed = derive_seed(self.job.seed, "main")
        try:
            torch.manual_seed(seed)
            values = list(get_inputs()) if self.scale_plan is None else scaling.scaled_inputs(
                self.scale_plan, get_inputs, torch.Generator().manual_seed(seed))
        except scaling.UnscalableError as exc:  # integer inputs it cannot redraw faithfully
            raise StopVerification(Failure(check="reference", message=str(exc))) from None
        except Exception as exc:  # noqa: BLE001 - user code
            raise StopVerification(Failure(
                check="reference",
                message=f"get_inputs() raised: {as_user_error(exc, self.job.reference).message}",
            )) from None
        main = PreparedCase(name="main", seed=seed, inputs=values,
                            note="the reference's own get_inputs()")
        self.expected["main"] = self._expected_for(main)
        self._record_inferred_inputs(values)
        cases = [main]
        if self.job.derive_tail_cases:
            cases += self._tail_cases(values)
        if len(cases) == 1:
            fresh = self._variant(values, _shapes(values), "main-fresh")
            if fresh is not None:
                fresh.repeat_of = "main"
                cases.append(fresh)
        return cases

    def _record_inferred_inputs(self, values: list[Any]) -> None:
        names = case_inputs.forward_parameter_names(self.model.forward, len(values))
        described: list[dict[str, Any]] = []
        for name, value in zip(names, values, strict=False):
            if isinstance(value, torch.Tensor):
                item = case_inputs.describe(value)
                described.append({"name": name, "shape": item.shape, "dtype": item.dtype,
                                  "init": _observed_init(value), "low": item.low,
                                  "high": item.high})
            else:
                described.append({"name": name, "value": _jsonable(value)})
        if self.scale_plan is not None:  # the spec keeps the real sizes; a CPU scales again
            real = iter(self.scale_plan.shapes_before)
            for entry in described:
                if "shape" in entry:
                    entry["shape"] = next(real, entry["shape"])
        assert self.inferred is not None
        self.inferred["inputs"] = described

    def _tail_cases(self, values: list[Any]) -> list[PreparedCase]:
        shapes = _shapes(values)
        cases: list[PreparedCase] = []
        fixed = case_inputs.integers_in(self.init_args)
        for name, divisor in _TAIL_PLANS:
            for first_only in (False, True):
                derived = case_inputs.derive_shapes(shapes, divisor, only_first_dim=first_only,
                                                    fixed=fixed)
                if derived == shapes or any(c.shapes() == derived for c in cases):
                    continue
                case = self._variant(values, derived, name)
                if case is not None:
                    cases.append(case)
                    if name == "tail-1":
                        fresh = self._variant(values, derived, "tail-1-fresh")
                        if fresh is not None:
                            fresh.repeat_of = name
                            cases.append(fresh)
                    break
        return cases

    def _variant(self, originals: list[Any], shapes: list[list[int]],
                 name: str) -> PreparedCase | None:
        """Inputs like the originals at new shapes, signed; None if the reference rejects them."""
        seed = derive_seed(self.job.seed, name)
        generator = torch.Generator().manual_seed(seed)
        shape_iter = iter(shapes)
        values: list[Any] = []
        descriptors: list[InputCase] = []
        for original in originals:
            if isinstance(original, torch.Tensor):
                item = case_inputs.describe(original, next(shape_iter))
                descriptors.append(item)
                values.append(case_inputs.make_tensor(item, generator))
            else:
                values.append(original)
        layouts = ["contiguous"] * len(values)
        expected = self._run_or_none(values, layouts)
        note = "signed random inputs"
        if expected is not None and _nonfinite(expected) and not _nonfinite(self.expected["main"]):
            # The reference is undefined on signed values (log, sqrt...): keep its domain.
            values = [case_inputs.resample_like(original, list(value.shape), generator)
                      if isinstance(original, torch.Tensor) else value
                      for original, value in zip(originals, values, strict=True)]
            expected = self._run_or_none(values, layouts)
            note = "values drawn from get_inputs(): the reference is not finite on signed inputs"
        if expected is None:
            return None
        self.expected[name] = expected
        return PreparedCase(name=name, seed=seed, inputs=values, note=note,
                            descriptors=descriptors)

    def _strided_case(self, cases: list[PreparedCase]) -> PreparedCase | None:
        """Fresh values at the smallest case's shapes, as transposed or sliced views."""
        bases = [case for case in cases if case.repeat_of is None]
        if not bases:
            return None
        base = min(bases, key=_numel)
        layouts: list[str] = [layout_for(value) if isinstance(value, torch.Tensor)
                              else "contiguous" for value in base.inputs]
        if all(layout == "contiguous" for layout in layouts):
            return None
        seed = derive_seed(self.job.seed, "strided")
        generator = torch.Generator().manual_seed(seed)
        values = [_fresh_like(value, generator) for value in base.inputs]
        expected = self._run_or_none(values, layouts)
        if expected is not None and _nonfinite(expected) and not _nonfinite(
                self.expected[base.name]):
            # Keep the reference's domain (log, sqrt...), as the tail cases do.
            values = [case_inputs.resample_like(value, list(value.shape), generator)
                      if isinstance(value, torch.Tensor) else value for value in base.inputs]
            expected = self._run_or_none(values, layouts)
        if expected is None:
            self.warnings.append("the reference rejects non-contiguous inputs: no strided case")
            return None
        self.expected["strided"] = expected
        return PreparedCase(name="strided", seed=seed, inputs=values, layouts=layouts,
                            note=f"non-contiguous inputs ({', '.join(layouts)}) at the shapes "
                            f"of {base.name}", descriptors=list(base.descriptors))

    # -- low signal -------------------------------------------------------------------

    def tolerance(self, dtype: torch.dtype) -> Tolerance:
        name = case_inputs.dtype_name(dtype)
        return self.job.tolerances.get(name) or DEFAULT_TOLERANCES.get(
            name, DEFAULT_TOLERANCES["float32"])

    def _low_signal(self, expected: Any) -> bool:
        tensors = [item for item in _leaves(expected) if isinstance(item, torch.Tensor)]
        return any(item.dtype.is_floating_point and would_pass_as_zeros(
            item.detach().cpu().double().numpy(), self.tolerance(item.dtype)) for item in tensors)

    def _echoes_an_input(self, expected: Any, values: list[Any]) -> bool:
        """Whether an output is bit for bit one of the inputs: returning it would pass."""
        inputs = [value for value in values if isinstance(value, torch.Tensor)]
        return any(isinstance(item, torch.Tensor) and any(
            item.shape == value.shape and item.dtype == value.dtype
            and bool(torch.equal(item.detach().cpu(), value)) for value in inputs)
            for item in _leaves(expected))

    def _weak(self, expected: Any, values: list[Any]) -> bool:
        return self._low_signal(expected) or self._echoes_an_input(expected, values)

    def _strengthen_low_signal(self, case: PreparedCase) -> None:
        """If zeros, or the inputs themselves, would pass this case, scale its float inputs
        up until they would not (a clamp or hardtanh whose bounds the inputs never reach)."""
        if not self._weak(self.expected[case.name], case.inputs):
            return
        for scale in _LOW_SIGNAL_SCALES:
            scaled = [value * scale if isinstance(value, torch.Tensor)
                      and value.dtype.is_floating_point else value for value in case.inputs]
            expected = self._run_or_none(scaled, case.layouts)
            if expected is not None and not self._weak(expected, scaled) and (
                    not _nonfinite(expected) or _nonfinite(self.expected[case.name])):
                case.inputs = scaled
                self.expected[case.name] = expected
                case.note = (case.note + "; " if case.note else "") + (
                    f"inputs scaled x{scale:g}: on the drawn inputs, zeros or the inputs "
                    "themselves would have passed for the reference's output")
                return
        if self._low_signal(self.expected[case.name]):
            self.warnings.append(
                f"low_signal: case {case.name}: the reference's output is within the tolerance "
                "of zero even for strengthened inputs; value checks cannot tell a no-op from a "
                "kernel")
        else:
            self.echoing.append(case.name)

    def _check_independence(self, cases: list[PreparedCase]) -> None:
        for case in cases:
            if case.repeat_of is None or case.repeat_of not in self.expected:
                continue
            first = _leaves(self.expected[case.repeat_of])
            second = _leaves(self.expected[case.name])
            if all(isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
                   and a.shape == b.shape and bool(torch.equal(a, b))
                   for a, b in zip(first, second, strict=False)):
                self.warnings.append(
                    f"low_signal: the reference gives the same output for cases "
                    f"{case.repeat_of} and {case.name}: its output does not depend on the inputs")

    # -- timing -----------------------------------------------------------------------

    def perf_case(self) -> PreparedCase:
        if self.job.perf_case is not None:
            return case_inputs.prepare_spec_case(self._scaled(self.job.perf_case))
        return max((case for case in self.cases.values() if case.name != "strided"),
                   key=_numel)


# -- messages ---------------------------------------------------------------------------


def prepared_message(session: ReferenceSession, cases: list[PreparedCase],
                     device_label: str) -> tuple[dict[str, Any], list[WireTensor]]:
    tensors: list[WireTensor] = []
    params = [{"name": name, "value": encode_tree(value, tensors)}
              for name, value in session.parameters().items()]
    described = [{"name": case.name, "seed": case.seed, "note": case.note,
                  "repeat_of": case.repeat_of, "layouts": case.layouts,
                  "inputs": encode_tree(list(case.inputs), tensors),
                  "expected": encode_tree(session.expected[case.name], tensors)}
                 for case in cases]
    init_args = encode_tree(list(session.init_args), tensors)
    perf = None
    if session.job.time_it:
        case = session.perf_case()
        perf = {"inputs": encode_tree(list(case.inputs), tensors), "layouts": case.layouts,
                "shapes": case.shapes()}
    header = {"kind": "prepared", "device": device_label, "init_args": init_args,
              "params": params, "cases": described, "perf": perf, "warnings": session.warnings,
              "inferred": session.inferred,
              "stages": [stage.to_json() for stage in session.stages]}
    return header, tensors


def serve(channel: Channel, session: ReferenceSession) -> None:
    """Answer the judge until it says exit (or closes the channel)."""
    baselines = Baselines(session)
    while True:
        request = channel.receive()
        if request.kind == "truth":
            _send_truth(channel, session, request)
        elif request.kind == "time":
            channel.send(baselines.answer(request))
        else:
            return


def _send_truth(channel: Channel, session: ReferenceSession, request: Message) -> None:
    case = session.cases.get(str(request.header.get("case")))
    truth = session.truth(case) if case is not None else None
    tensors: list[WireTensor] = []
    tree = encode_tree(truth, tensors) if truth is not None else None
    channel.send({"kind": "truth", "output": tree}, tensors)


@dataclass
class Baselines:
    """The reference timed as the candidate's baselines, one shape per `time` request:
    PyTorch eager (torch_npu's ops on Ascend) and, on a device, torch.compile of the same
    model on the same inputs, compiled once per shape before it is timed."""

    session: ReferenceSession
    compiled: Any = None
    compile_out: str = ""  # why torch.compile is not timed any more, once that is known
    slowest_compile_s: float = 0.0
    answered: int = 0

    def answer(self, request: Message) -> dict[str, Any]:
        session = self.session
        name = request.header.get("case")
        case = session.perf_case() if name is None else session.cases.get(str(name))
        if case is None:
            return {"kind": "untimed", "reason": f"no case named {str(name)[:60]!r}"}
        try:
            return self._timed(case, request)
        except Exception as exc:  # noqa: BLE001 - the verdict stands without a timing
            return {"kind": "untimed", "reason": f"{type(exc).__name__}: {exc}"[:300]}

    def _timed(self, case: PreparedCase, request: Message) -> dict[str, Any]:
        session = self.session
        plan = plan_for(session.device)
        limit = max_spread_from(request.header.get("max_spread"))
        values = place(case.inputs, case.layouts, session.device)
        with torch.no_grad():
            output = session.model(*values)
            synchronize(session.device)
            eager = measure(lambda: bench(lambda: session.model(*values), session.device, plan),
                            limit, plan.remeasures)
        compiled, compile_note = self._compiled(values, plan, limit,
                                                _budget_s(request.header.get("budget_s")))
        # Counting costs seconds on its first call: the CPU interpreter's CI runs skip it.
        bytes_moved, flops = (None, None) if session.device == "cpu" else _count_work(
            session.model, values)
        header: dict[str, Any] = {
            "kind": "timed", "case": case.name, "shapes": case.shapes(),
            "input_shapes": case.shapes(), "input_dtypes": case.dtypes(),
            "output_shapes": [list(item.shape) for item in _leaves(output)
                              if isinstance(item, torch.Tensor)],
            "output_dtypes": [case_inputs.dtype_name(item.dtype) for item in _leaves(output)
                              if isinstance(item, torch.Tensor)],
            **eager.to_json(), "compile": compiled.to_json() if compiled else None,
            "compile_note": compile_note, "bytes_moved": bytes_moved, "flops": flops}
        if self.answered == 0:  # the run's facts, once: the device, its clocks, what else to time
            header.update(device_name=device_name(session.device),
                          clock_note=clock_note(session.device),
                          more_cases=self.more_cases(case))
        self.answered += 1
        return header

    def more_cases(self, perf: PreparedCase) -> list[str]:
        """Up to 3 more shapes to time on a device, the largest first: the correctness cases
        big enough to say something (tiny ones time the launch, not the kernel)."""
        if self.session.device == "cpu":
            return []  # CI speed: the interpreter's single timing is all it gets
        seen = [perf.shapes()]
        chosen: list[str] = []
        for case in sorted(self.session.cases.values(), key=_numel, reverse=True):
            if len(chosen) == _MORE_TIMED_CASES or _numel(case) < _MIN_TIMED_ELEMENTS:
                break
            if case.repeat_of is None and case.name != "strided" and case.shapes() not in seen:
                seen.append(case.shapes())
                chosen.append(case.name)
        return chosen

    def _compiled(self, values: list[Any], plan: BenchPlan, limit: float,
                  budget_s: float | None) -> tuple[Measurement | None, str]:
        """torch.compile's timing, or None and the one-line reason why there is none."""
        if self.session.device == "cpu":
            return None, ("torch.compile not attempted on the CPU interpreter: its timings say "
                          "nothing about device speed, and compiling costs CI seconds")
        if self.compile_out:
            return None, self.compile_out
        needed_s = 3 * max(self.slowest_compile_s, _COMPILE_ALLOWANCE_S)
        if budget_s is not None and budget_s < needed_s:
            return None, (f"torch.compile skipped: {budget_s:.0f} s left of the verification's "
                          f"deadline, a compile may need {needed_s / 3:.0f} s")
        try:
            if self.compiled is None:
                # In this process: a pool of compile workers would count against the
                # sandbox's process limit, whose watchdog ends the whole verification.
                from torch._inductor import config as inductor_config

                inductor_config.compile_threads = 1
                # Static shapes: each timed shape gets its own specialised graph.
                self.compiled = torch.compile(self.session.model, dynamic=False)
            started = time.monotonic()
            with torch.no_grad():
                self.compiled(*values)
                synchronize(self.session.device)
                compile_s = time.monotonic() - started
                measurement = measure(lambda: bench(lambda: self.compiled(*values),
                                                    self.session.device, plan),
                                      limit, plan.remeasures)
        except Exception as exc:  # noqa: BLE001 - any failure of torch.compile is a note
            first_line = (str(exc).strip().splitlines() or [""])[0]
            self.compile_out = f"torch.compile failed: {type(exc).__name__}: {first_line}"[:300]
            return None, self.compile_out
        self.slowest_compile_s = max(self.slowest_compile_s, compile_s)
        return measurement, f"torch.compile (dynamic=False), compiled in {compile_s:.1f} s"


def _budget_s(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _count_work(model: Any, values: list[Any]) -> tuple[int | None, int | None]:
    """Minimum bytes and FLOPs of the reference at these inputs (runners.harness.work);
    None where that cannot be counted."""
    try:
        work = importlib.import_module("runners.harness.work").count_work(model, values)
        bytes_moved, flops = work.bytes_moved, work.flops
    except Exception:  # noqa: BLE001 - a count is for the report; never fail timing over it
        return None, None
    return (bytes_moved if isinstance(bytes_moved, int) else None,
            flops if isinstance(flops, int) else None)


def main(channel: Channel) -> None:
    request = channel.receive()
    job = ReferenceJob.from_json(request.header["job"])
    device, label = select_device()
    session = ReferenceSession(job=job, device=device)
    try:
        session.load()
        cases = session.prepare()
    except StopVerification as stop:
        channel.fail(stop.failure, stages=[stage.to_json() for stage in session.stages],
                     device=label, inferred=session.inferred)
        return
    except Exception as exc:  # noqa: BLE001 - a harness fault still answers the judge
        channel.fail(internal_failure(exc), device=label)
        return
    header, tensors = prepared_message(session, cases, label)
    channel.send(header, tensors)
    serve(channel, session)


# -- small helpers ----------------------------------------------------------------------


def _shapes(values: list[Any]) -> list[list[int]]:
    return [list(value.shape) for value in values if isinstance(value, torch.Tensor)]


def _numel(case: PreparedCase) -> int:
    return sum(value.numel() for value in case.inputs if isinstance(value, torch.Tensor))


def _fresh_like(value: Any, generator: torch.Generator) -> Any:
    if not isinstance(value, torch.Tensor):
        return value
    if not value.dtype.is_floating_point:
        return case_inputs.resample_like(value, list(value.shape), generator)
    return case_inputs.make_tensor(case_inputs.describe(value), generator)


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def _nonfinite(output: Any) -> bool:
    return any(isinstance(item, torch.Tensor) and item.dtype.is_floating_point
               and not bool(torch.isfinite(item).all()) for item in _leaves(output))


def _observed_init(value: torch.Tensor) -> str:
    if not value.dtype.is_floating_point:
        return "randint"
    if value.numel() and float(value.min()) >= 0:
        return "rand"
    return "randn"


def _jsonable(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    return repr(value)
