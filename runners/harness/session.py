"""One verification, stage by stage: load, build, check, time. Runs inside the worker process."""

from __future__ import annotations

import copy
import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from runners.base import (
    DEFAULT_TOLERANCES,
    CaseResult,
    CaseSpec,
    Failure,
    InputCase,
    StageResult,
    Timing,
    Tolerance,
    VerifyResult,
)
from runners.harness import inputs as case_inputs
from runners.harness.compare import (
    compare_tensor,
    flatten_outputs,
    structure_of,
    would_pass_as_zeros,
)
from runners.harness.guard import ForwardGuard, mutated_inputs, snapshot
from runners.harness.inputs import PreparedCase
from runners.harness.loading import UserCodeError, as_user_error, load_module
from runners.harness.timing import TimingMethod, timing_function

_LOW_SIGNAL_SCALES = (16.0, 256.0, 4096.0)
_TAIL_PLANS = (("tail-1", 4, 1), ("tail-2", 8, 3))


class StopVerification(Exception):
    """A failure after which no further stage can run (load errors, a broken reference)."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


@dataclass
class Job:
    reference: Path
    candidate: Path
    backend: str
    cases: list[CaseSpec]
    init_args: list[Any] | None
    tolerances: dict[str, Tolerance]
    derive_tail_cases: bool
    perf_case: CaseSpec | None
    time_it: bool

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Job:
        def case(item: dict[str, Any]) -> CaseSpec:
            return CaseSpec(name=item["name"], seed=int(item["seed"]),
                            inputs=[InputCase(**entry) for entry in item["inputs"]])

        tolerances = dict(DEFAULT_TOLERANCES)
        for name, tol in (data.get("tolerances") or {}).items():
            tolerances[name] = Tolerance(atol=float(tol["atol"]), rtol=float(tol["rtol"]))
        perf = data.get("perf_case")
        return cls(
            reference=Path(data["reference"]), candidate=Path(data["candidate"]),
            backend=str(data.get("backend", "triton")),
            cases=[case(item) for item in data.get("cases") or []],
            init_args=data.get("init_args"), tolerances=tolerances,
            derive_tail_cases=bool(data.get("derive_tail_cases", True)),
            perf_case=case(perf) if perf else None, time_it=bool(data.get("time_it", False)),
        )


def select_device() -> tuple[str, str]:
    """The device candidates run on, and a description. The CPU means Triton's interpreter."""
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


def _to_device(values: list[Any], device: str) -> list[Any]:
    return [value.to(device) if isinstance(value, torch.Tensor) else value for value in values]


def _synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()
    elif device == "npu":
        getattr(torch, "npu").synchronize()  # noqa: B009 - torch.npu exists only with torch_npu


@dataclass
class Session:
    job: Job
    device: str
    device_label: str
    guard: ForwardGuard = field(default_factory=ForwardGuard)
    stages: list[StageResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    inferred: dict[str, Any] | None = None
    reference_module: ModuleType | None = None
    reference_model: Any = None
    candidate_model: Any = None
    expected: dict[str, Any] = field(default_factory=dict)
    previous_outputs: list[torch.Tensor] = field(default_factory=list)

    # -- stages -----------------------------------------------------------------------

    def load(self) -> None:
        started = time.monotonic()
        try:
            self.reference_module = load_module(self.job.reference, "opbot_reference")
        except UserCodeError as exc:
            raise StopVerification(Failure(
                check="reference", message=f"the reference cannot be imported: {exc.message}",
                location=exc.location, log_tail=exc.log or None)) from None
        if not hasattr(self.reference_module, "Model"):
            raise StopVerification(Failure(check="reference",
                                           message="the reference defines no class Model"))
        self.guard.install()
        try:
            candidate = load_module(self.job.candidate, "opbot_candidate")
        except UserCodeError as exc:
            self.stages.append(StageResult("load", False, time.monotonic() - started))
            raise StopVerification(Failure(check="load", message=exc.message,
                                           location=exc.location,
                                           log_tail=exc.log or None)) from None
        if not hasattr(candidate, "ModelNew"):
            self.stages.append(StageResult("load", False, time.monotonic() - started))
            raise StopVerification(Failure(
                check="load", message="the candidate defines no class ModelNew (KernelBench "
                "convention: same constructor and forward as the reference's Model)"))
        self.stages.append(StageResult("load", True, time.monotonic() - started))
        self._build(candidate)

    def _init_args(self) -> list[Any]:
        if self.job.init_args is not None:
            return list(self.job.init_args)
        get_init = getattr(self.reference_module, "get_init_inputs", None)
        if get_init is None:
            return []
        try:
            return list(get_init())
        except Exception as exc:  # noqa: BLE001 - user code
            raise StopVerification(Failure(
                check="reference",
                message="get_init_inputs() raised: "
                f"{as_user_error(exc, self.job.reference).message}",
            )) from None

    def _build(self, candidate: ModuleType) -> None:
        started = time.monotonic()
        args = self._init_args()
        try:
            torch.manual_seed(0)
            reference = self.reference_module.Model(*args)  # type: ignore[union-attr]
        except Exception as exc:  # noqa: BLE001 - user code
            error = as_user_error(exc, self.job.reference)
            raise StopVerification(Failure(check="reference",
                                           message=f"Model(*init_args) raised: {error.message}",
                                           location=error.location)) from None
        try:
            torch.manual_seed(0)
            model = candidate.ModelNew(*args)
        except Exception as exc:  # noqa: BLE001 - user code
            error = as_user_error(exc, self.job.candidate)
            self.stages.append(StageResult("build", False, time.monotonic() - started))
            raise StopVerification(Failure(check="init",
                                           message=f"ModelNew(*init_args) raised: {error.message}",
                                           location=error.location,
                                           log_tail=error.log or None)) from None
        _share_parameters(reference, model)
        self.reference_model = _move(reference, self.device)
        self.candidate_model = _move(model, self.device)
        self.inferred = {"init_args": _jsonable(args)}
        self.stages.append(StageResult("build", True, time.monotonic() - started,
                                       note="Triton compiles on the first launch"))

    # -- cases ------------------------------------------------------------------------

    def run_reference(self, values: list[Any]) -> Any:
        with torch.no_grad():
            output = self.reference_model(*_to_device(values, self.device))
        _synchronize(self.device)
        return output

    def _reference_or_none(self, values: list[Any]) -> Any:
        try:
            return self.run_reference(values)
        except Exception:  # noqa: BLE001 - a derived shape the reference rejects is skipped
            return None

    def prepare_cases(self) -> list[PreparedCase]:
        if self.job.cases:
            prepared = case_inputs.spec_cases(self.job.cases)
            for case in prepared:
                self.expected[case.name] = self._expected_for(case)
            return prepared
        return self._inferred_cases()

    def _expected_for(self, case: PreparedCase) -> Any:
        try:
            return self.run_reference(case.inputs)
        except Exception as exc:  # noqa: BLE001 - user code
            error = as_user_error(exc, self.job.reference)
            raise StopVerification(Failure(
                check="reference", case=case.name,
                message=f"the reference's forward raised on case {case.name}: {error.message}",
                location=error.location)) from None

    def _inferred_cases(self) -> list[PreparedCase]:
        module = self.reference_module
        get_inputs = getattr(module, "get_inputs", None)
        if get_inputs is None:
            raise StopVerification(Failure(
                check="reference", message="the reference has no get_inputs() and the spec "
                "declares no inputs: nothing says what to run it on"))
        try:
            torch.manual_seed(0)
            values = list(get_inputs())
        except Exception as exc:  # noqa: BLE001 - user code
            raise StopVerification(Failure(
                check="reference",
                message=f"get_inputs() raised: {as_user_error(exc, self.job.reference).message}",
            )) from None
        main = PreparedCase(name="main", seed=0, inputs=values,
                            note="the reference's own get_inputs()")
        self.expected["main"] = self._expected_for(main)
        self._record_inferred_inputs(values)
        cases = [main]
        if self.job.derive_tail_cases:
            cases += self._tail_cases(values)
        if len(cases) == 1:
            fresh = self._variant(values, [list(v.shape) for v in values
                                           if isinstance(v, torch.Tensor)], "main-fresh", 1)
            if fresh is not None:
                fresh.repeat_of = "main"
                cases.append(fresh)
        return cases

    def _record_inferred_inputs(self, values: list[Any]) -> None:
        names = case_inputs.forward_parameter_names(self.reference_model.forward, len(values))
        described: list[dict[str, Any]] = []
        for name, value in zip(names, values, strict=False):
            if isinstance(value, torch.Tensor):
                item = case_inputs.describe(value)
                described.append({"name": name, "shape": item.shape, "dtype": item.dtype,
                                  "init": _observed_init(value), "low": item.low,
                                  "high": item.high})
            else:
                described.append({"name": name, "value": _jsonable(value)})
        assert self.inferred is not None
        self.inferred["inputs"] = described

    def _tail_cases(self, values: list[Any]) -> list[PreparedCase]:
        shapes = [list(value.shape) for value in values if isinstance(value, torch.Tensor)]
        cases: list[PreparedCase] = []
        fixed = case_inputs.integers_in(self.inferred.get("init_args") if self.inferred else [])
        for name, divisor, seed in _TAIL_PLANS:
            for first_only in (False, True):
                derived = case_inputs.derive_shapes(shapes, divisor, only_first_dim=first_only,
                                                    fixed=fixed)
                if derived == shapes or any(c.shapes() == derived for c in cases):
                    continue
                case = self._variant(values, derived, name, seed)
                if case is not None:
                    cases.append(case)
                    if name == "tail-1":
                        fresh = self._variant(values, derived, "tail-1-fresh", seed + 1)
                        if fresh is not None:
                            fresh.repeat_of = name
                            cases.append(fresh)
                    break
        return cases

    def _variant(self, originals: list[Any], shapes: list[list[int]], name: str,
                 seed: int) -> PreparedCase | None:
        """Inputs like the originals at new shapes, signed; None if the reference rejects them."""
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
        expected = self._reference_or_none(values)
        note = "signed random inputs"
        if expected is not None and _nonfinite(expected) and not _nonfinite(self.expected["main"]):
            # The reference is undefined on signed values (log, sqrt...): keep its domain.
            values = [case_inputs.resample_like(original, list(value.shape), generator)
                      if isinstance(original, torch.Tensor) else value
                      for original, value in zip(originals, values, strict=True)]
            expected = self._reference_or_none(values)
            note = "values drawn from get_inputs(): the reference is not finite on signed inputs"
        if expected is None:
            return None
        self.expected[name] = expected
        return PreparedCase(name=name, seed=seed, inputs=values, note=note,
                            descriptors=descriptors)

    # -- checks -----------------------------------------------------------------------

    def tolerance(self, dtype: torch.dtype) -> Tolerance:
        name = case_inputs.dtype_name(dtype)
        return self.job.tolerances.get(name) or DEFAULT_TOLERANCES.get(
            name, DEFAULT_TOLERANCES["float32"])

    def strengthen_low_signal(self, case: PreparedCase) -> None:
        """If zeros would pass this case, scale its float inputs up until they would not."""
        if not self._low_signal(self.expected[case.name]):
            return
        for scale in _LOW_SIGNAL_SCALES:
            scaled = [value * scale if isinstance(value, torch.Tensor)
                      and value.dtype.is_floating_point else value for value in case.inputs]
            expected = self._reference_or_none(scaled)
            if expected is not None and not self._low_signal(expected):
                case.inputs = scaled
                self.expected[case.name] = expected
                case.note = (case.note + "; " if case.note else "") + (
                    f"inputs scaled x{scale:g}: the reference's output was too small for the "
                    "tolerance to tell a no-op kernel from a real one")
                return
        self.warnings.append(
            f"low_signal: case {case.name}: the reference's output is within the tolerance of "
            "zero even for strengthened inputs; value checks cannot tell a no-op from a kernel")

    def _low_signal(self, expected: Any) -> bool:
        tensors = [item for item in flatten_outputs(expected) if isinstance(item, torch.Tensor)]
        return any(would_pass_as_zeros(item, self.tolerance(item.dtype)) for item in tensors)

    def check_case(self, case: PreparedCase) -> tuple[CaseResult, list[Failure]]:
        values = _to_device(case.inputs, self.device)
        before = snapshot(values)
        launches_before = self.guard.launches
        try:
            with torch.no_grad(), self.guard.watch() as recorder:
                output = self.candidate_model(*values)
            _synchronize(self.device)
        except Exception as exc:  # noqa: BLE001 - the candidate's own error
            error = as_user_error(exc, self.job.candidate)
            failure = Failure(check="run", case=case.name, message=error.message,
                              location=error.location, log_tail=error.log or None)
            return self._case_result(case, False), [failure]
        failures = self._guard_failures(case, recorder.computed,
                                        self.guard.launches - launches_before)
        changed = mutated_inputs(before, values)
        if changed:
            failures.append(Failure(
                check="input_mutation", case=case.name,
                message=f"the forward modified its input(s) {changed} in place",
                details={"inputs": changed}))
            values = before
        comparison = self._compare(case, output)
        failures += comparison[0]
        return self._case_result(case, not failures, *comparison[1:]), failures

    def _guard_failures(self, case: PreparedCase, computed: dict[str, int],
                        launches: int) -> list[Failure]:
        failures: list[Failure] = []
        if computed:
            listed = ", ".join(f"{name} x{count}" for name, count in sorted(computed.items()))
            failures.append(Failure(
                check="torch_op", case=case.name,
                message=f"the forward computed with PyTorch ({listed}): the kernel must do the "
                "work", details={"ops": dict(computed)}))
        if launches == 0 and self.job.backend == "triton":
            failures.append(Failure(check="no_kernel", case=case.name,
                                    message="the forward launched no Triton kernel"))
        return failures

    def _compare(self, case: PreparedCase, output: Any) -> tuple[list[Failure], float, float]:
        expected = self.expected[case.name]
        expected_items = flatten_outputs(expected)
        actual_items = flatten_outputs(output)
        if len(expected_items) != len(actual_items) or (type(expected) is not type(output) and (
                isinstance(expected, torch.Tensor) or isinstance(output, torch.Tensor))):
            return [Failure(check="output_structure", case=case.name,
                            message=f"the forward returned {structure_of(output)}, the reference "
                            f"returns {structure_of(expected)}")], 0.0, 0.0
        truth = _lazy(lambda: self._float64_truth(case))
        failures: list[Failure] = []
        worst_abs = worst_rel = 0.0
        for index, (want, got) in enumerate(zip(expected_items, actual_items, strict=True)):
            if not isinstance(want, torch.Tensor):
                if want != got:
                    failures.append(Failure(check="values", case=case.name, output=index,
                                            message=f"output {index}: {got!r}, expected {want!r}"))
                continue
            if not isinstance(got, torch.Tensor):
                failures.append(Failure(check="output_structure", case=case.name, output=index,
                                        message=f"output {index} is {type(got).__name__}, "
                                        "expected a tensor"))
                continue
            result = compare_tensor(want, got, tolerance=self.tolerance(want.dtype),
                                    truth=functools.partial(_truth_item, truth, index),
                                    case=case.name, index=index)
            worst_abs = max(worst_abs, result.max_abs_err)
            worst_rel = max(worst_rel, result.max_rel_err)
            failures += [self._maybe_cached(item, got) for item in result.failures]
            if not result.failures:
                # A correct output, kept: a later call returning it again is a cache.
                self.previous_outputs.append(got.detach().clone())
        return failures, worst_abs, worst_rel

    def _maybe_cached(self, failure: Failure, actual: torch.Tensor) -> Failure:
        """A failure whose output is exactly an earlier call's correct output is a cache."""
        if failure.check not in ("values", "shape"):
            return failure
        for earlier in self.previous_outputs:
            if earlier.shape == actual.shape and earlier.dtype == actual.dtype and bool(
                    torch.equal(earlier, actual.detach())):
                return Failure(check="cached_output", case=failure.case, output=failure.output,
                               message="fresh inputs gave exactly the output of an earlier call: "
                               "the forward returns cached results", details=failure.details)
        return failure

    def _float64_truth(self, case: PreparedCase) -> Any:
        try:
            model = copy.deepcopy(self.reference_model).to("cpu").double()
            values = [value.double() if isinstance(value, torch.Tensor)
                      and value.dtype.is_floating_point else value for value in case.inputs]
            with torch.no_grad():
                return model(*values)
        except Exception:  # noqa: BLE001 - no float64 path: the strict comparison stands
            return None

    def _case_result(self, case: PreparedCase, passed: bool, max_abs: float | None = None,
                     max_rel: float | None = None) -> CaseResult:
        return CaseResult(name=case.name, shapes=case.shapes(), dtypes=case.dtypes(),
                          seed=case.seed, passed=passed, max_abs_err=_finite_or_none(max_abs),
                          max_rel_err=_finite_or_none(max_rel), note=case.note)

    def check_independence(self, cases: list[PreparedCase]) -> None:
        by_name = {case.name: case for case in cases}
        for case in cases:
            if case.repeat_of is None or case.repeat_of not in by_name:
                continue
            first = flatten_outputs(self.expected[case.repeat_of])
            second = flatten_outputs(self.expected[case.name])
            if all(isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
                   and a.shape == b.shape and bool(torch.equal(a, b))
                   for a, b in zip(first, second, strict=False)):
                self.warnings.append(
                    f"low_signal: the reference gives the same output for cases "
                    f"{case.repeat_of} and {case.name}: its output does not depend on the inputs")

    # -- timing -----------------------------------------------------------------------

    def time_candidate(self, case: PreparedCase) -> Timing:
        started = time.monotonic()
        method: TimingMethod = "wall_clock" if self.device == "cpu" else "device_events"
        # The interpreter's timings mean little and cost much: two runs are plenty there.
        trials, warmup = (2, 0) if self.device == "cpu" else (50, 5)
        timer = timing_function(method)
        values = _to_device(case.inputs, self.device)
        with torch.no_grad():
            candidate = timer(lambda: self.candidate_model(*values), self.device, trials, warmup)
            reference = timer(lambda: self.reference_model(*values), self.device, trials, warmup)
        note = ("CPU interpreter: these timings say nothing about device speed"
                if self.device == "cpu" else f"{method}, median of {trials} after {warmup} warm-up")
        speedup = reference.median_ms / candidate.median_ms if candidate.median_ms > 0 else 0.0
        if speedup > 10 and self.device != "cpu":
            note += "; speedup above 10x: flagged for human review"
        self.stages.append(StageResult("time", True, time.monotonic() - started, note=note))
        return Timing(device=self.device_label, shapes=case.shapes(), trials=trials,
                      candidate_ms=candidate.median_ms, candidate_min_ms=candidate.min_ms,
                      candidate_max_ms=candidate.max_ms, reference_ms=reference.median_ms,
                      speedup=speedup, note=note)


def _share_parameters(reference: Any, model: Any) -> None:
    """Same weights for both models when their state dicts line up (KernelBench seeds both)."""
    try:
        source = reference.state_dict()
        target = model.state_dict()
    except Exception:  # noqa: BLE001 - not nn.Modules: nothing to share
        return
    if source.keys() == target.keys() and all(
            source[key].shape == target[key].shape for key in source):
        model.load_state_dict(source)


def _move(model: Any, device: str) -> Any:
    mover = getattr(model, "to", None)
    return mover(device) if callable(mover) else model


def _nonfinite(output: Any) -> bool:
    return any(isinstance(item, torch.Tensor) and item.dtype.is_floating_point
               and not bool(torch.isfinite(item).all()) for item in flatten_outputs(output))


def _observed_init(value: torch.Tensor) -> str:
    if not value.dtype.is_floating_point:
        return "randint"
    if value.numel() and float(value.min()) >= 0:
        return "rand"
    return "randn"


def _truth_item(truth: Callable[[], Any], index: int) -> torch.Tensor | None:
    return _item(truth(), index)


def _item(output: Any, index: int) -> torch.Tensor | None:
    if output is None:
        return None
    items = flatten_outputs(output)
    item = items[index] if index < len(items) else None
    return item if isinstance(item, torch.Tensor) else None


def _lazy(compute: Callable[[], Any]) -> Callable[[], Any]:
    cache: list[Any] = []

    def get() -> Any:
        if not cache:
            cache.append(compute())
        return cache[0]

    return get


def _finite_or_none(value: float | None) -> float | None:
    if value is None or value != value or value in (float("inf"), float("-inf")):
        return None
    return value


def _jsonable(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    return repr(value)


def run_session(job: Job) -> VerifyResult:
    """Every stage in order; the first stopping failure ends it with a failed verdict."""
    device, label = select_device()
    session = Session(job=job, device=device, device_label=label)
    try:
        session.load()
        return _check_and_time(session)
    except StopVerification as stop:
        return VerifyResult(status="failed", reasons=[stop.failure], cases=[],
                            stages=session.stages, device=label, warnings=session.warnings,
                            inferred=session.inferred)


def _check_and_time(session: Session) -> VerifyResult:
    started = time.monotonic()
    cases = session.prepare_cases()
    for case in cases:
        session.strengthen_low_signal(case)
    session.check_independence(cases)
    # Small cases first: a broken candidate fails fast, before the expensive real shapes.
    ordered = sorted(cases, key=lambda case: sum(
        value.numel() for value in case.inputs if isinstance(value, torch.Tensor)))
    results: list[CaseResult] = []
    failures: list[Failure] = []
    for case in ordered:
        result, case_failures = session.check_case(case)
        results.append(result)
        failures += case_failures
        if any(item.check in ("run", "torch_op", "no_kernel") for item in case_failures):
            break  # the same error would repeat on every case
    session.stages.append(StageResult("check", not failures, time.monotonic() - started))
    timing = None
    if not failures and session.job.time_it:
        perf = session.job.perf_case
        perf_case = case_inputs.prepare_spec_case(perf) if perf else max(
            cases, key=lambda case: sum(value.numel() for value in case.inputs
                                        if isinstance(value, torch.Tensor)))
        timing = session.time_candidate(perf_case)
    return VerifyResult(status="failed" if failures else "passed", reasons=failures,
                        cases=results, stages=session.stages, device=session.device_label,
                        warnings=session.warnings, timing=timing, inferred=session.inferred)
