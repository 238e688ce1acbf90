"""The judge: the verification's parent side, shared by every backend.

It holds the run's secret seed, the expected outputs and the comparison; nothing of that
ever enters a process the candidate runs in. It starts two sandboxed workers at once:

- the reference worker runs the reference (never the candidate) and sends every case's
  inputs and expected outputs, and later a case's float64 truth or its timing on request;
- the candidate worker imports the candidate and, one case at a time, receives only that
  case's inputs (and once the init args and parameters), answering with its outputs as data.

Each answer is read under the deadline and a size cap, and anything malformed, late or
missing is a failed verdict (with the worker's log tail), never a crash or a hang of the
judge. The static scan runs here meanwhile, under the same deadline. See
docs/threat-model.md for what this guarantees and what stays best effort.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import runners
from runners.anticheat.findings import Finding
from runners.anticheat.scan import check_source
from runners.base import (
    DEFAULT_TOLERANCES,
    CaseResult,
    Failure,
    SourceLocation,
    StageResult,
    Timing,
    Tolerance,
    VerifyRequest,
    VerifyResult,
)
from runners.harness.compare import compare_output, same_values
from runners.harness.seeds import derive_seed, draw_seed
from runners.harness.wire import (
    DeadlineError,
    Message,
    PeerClosedError,
    Reader,
    WireError,
    WireTensor,
    encode,
    send_until,
    tree_leaves,
    tree_structure,
)
from runners.sandbox import (
    IsolatedChild,
    ProcessOutcome,
    SandboxPolicy,
    SandboxUnavailableError,
    private_workdir,
    read_untrusted,
    sandbox_environment,
    start_isolated,
)

_MAX_SOURCE_BYTES = 2 * 1024 * 1024
_REFERENCE_MAX_BYTES = 1 << 36  # the reference's cases: large, but not unbounded
_OUTPUT_SLACK_BYTES = 16 * 1024 * 1024
_STOPPING_CHECKS = ("run", "torch_op", "no_kernel")
# What a candidate's "failed" answer may claim at each stage: it cannot shift the blame.
_STAGE_CHECKS = {"load": ("load", "crash"), "init": ("init", "crash"),
                 "run": ("run", "crash", "device", "output_structure")}
_MESSAGE_CHARS = 2000  # what user code's errors may put into a verdict


class JudgeStop(Exception):
    """The verification cannot go on; `failure` says why."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


# -- static scan --------------------------------------------------------------------------


def static_failures(candidate: Path, deadline: float | None = None) -> list[Failure]:
    """The static anti-cheat findings on a candidate's source, as failures."""
    data = read_untrusted(candidate, _MAX_SOURCE_BYTES + 1)
    if data is None:
        return []  # the worker reports unreadable candidates with their reason
    if len(data) > _MAX_SOURCE_BYTES:
        return [Failure(check="load", message=f"the candidate is larger than "
                        f"{_MAX_SOURCE_BYTES // (1024 * 1024)} MB")]
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError:
        return []
    return [_finding_failure(finding, candidate) for finding in check_source(
        source, filename=str(candidate), deadline=deadline)]


def _finding_failure(finding: Finding, candidate: Path) -> Failure:
    return Failure(check=finding.check, message=finding.message,
                   location=SourceLocation(file=str(candidate), line=finding.line,
                                           source_line=finding.source_line))


# -- workers ------------------------------------------------------------------------------


def _package_root() -> Path:
    return Path(runners.__file__).resolve().parent.parent


@dataclass
class Worker:
    """One sandboxed worker and its channel; `role` names it in failures."""

    role: str
    child: IsolatedChild
    reader: Reader
    deadline: float
    watch: list[IsolatedChild]

    def send(self, header: dict[str, Any], tensors: list[WireTensor] | None = None) -> None:
        stdin = self.child.process.stdin
        assert stdin is not None
        send_until(stdin.fileno(), encode(header, tensors or []), self.deadline, self.watchdog)

    def receive(self, max_payload: int) -> Message:
        return self.reader.read(self.deadline, max_payload)

    def watchdog(self) -> None:
        """Between waits: any worker's tree grown past the limit ends the verification."""
        for child in self.watch:
            reason = child.check_tree()
            if reason is not None:
                raise PeerClosedError(reason)

    def close(self) -> ProcessOutcome:
        return self.child.finish()


def _start_worker(role: str, *, root: Path, request: VerifyRequest,
                  readable: list[Path], python: str, policy: SandboxPolicy | None, deadline: float,
                  watch: list[IsolatedChild]) -> Worker:
    workdir = root / role
    workdir.mkdir()
    env = sandbox_environment(workdir, {"PYTHONPATH": str(_package_root())})
    child = start_isolated([python, "-m", "runners.harness", role], cwd=workdir, env=env,
                           log_path=root / f"{role}.log", policy=policy,
                           readable=[*readable, _package_root()], pipes=True)
    watch.append(child)
    stdout = child.process.stdout
    assert stdout is not None
    worker = Worker(role, child, Reader(stdout.fileno()), deadline, watch)
    worker.reader = Reader(stdout.fileno(), on_wait=worker.watchdog)  # needs the worker
    return worker


# -- the judge ----------------------------------------------------------------------------


@dataclass
class Judge:
    request: VerifyRequest
    seed: int
    reference: Worker
    candidate: Worker
    stages: list[StageResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    device: str = "unknown"
    inferred: dict[str, Any] | None = None
    correct_outputs: list[WireTensor] = field(default_factory=list)
    # The case the candidate is running: a crash or a hang names it (its shapes and dtypes).
    in_flight: tuple[dict[str, Any], Message] | None = None

    # -- stages ---------------------------------------------------------------------------

    def start(self) -> None:
        job = {**self.request.to_json(), "seed": self.seed,
               "init_seed": derive_seed(self.seed, "init")}
        job.pop("candidate")
        self._send(self.reference, {"kind": "job", "job": job})
        self._send(self.candidate, {"kind": "load", "package_ops": self.request.package_ops,
                                    "candidate": str(self.request.candidate.resolve())})

    def prepare(self) -> Message:
        answer = self._answer(self.reference, _REFERENCE_MAX_BYTES, "reference")
        self.device = str(answer.header.get("device", self.device))
        if answer.kind == "failed":
            self.inferred = _dict_or_none(answer.header.get("inferred"))
            raise JudgeStop(_reference_failure(answer))
        if answer.kind != "prepared":
            raise JudgeStop(Failure(check="reference", message="the reference worker answered "
                                    f"{answer.kind!r} instead of the cases"))
        self.inferred = _dict_or_none(answer.header.get("inferred"))
        self.warnings += [str(item) for item in answer.header.get("warnings") or []]
        self.stages += [StageResult.from_json(item) for item in answer.header.get("stages", [])]
        return answer

    def load_candidate(self) -> None:
        started = time.monotonic()
        answer = self._answer(self.candidate, 1 << 20, "load")
        self.stages.append(StageResult("load", answer.kind == "loaded",
                                       time.monotonic() - started, note="the candidate"))
        if answer.kind != "loaded":
            raise JudgeStop(self._candidate_failure(answer, "load"))

    def build_candidate(self, prepared: Message) -> None:
        started = time.monotonic()
        header = prepared.header
        tensors: list[WireTensor] = []
        init_args = _copy_tree(header["init_args"], prepared.tensors, tensors)
        params = [{"name": item["name"], "value": _copy_tree(item["value"], prepared.tensors,
                                                             tensors)}
                  for item in header.get("params") or []]
        self._send(self.candidate, {"kind": "init", "init_args": init_args, "params": params,
                             "init_seed": derive_seed(self.seed, "init")}, tensors)
        answer = self._answer(self.candidate, 1 << 20, "init")
        self.stages.append(StageResult("build", answer.kind == "ready",
                                       time.monotonic() - started,
                                       note="the kernels compile on their first launch"
                                       if self.request.compiles_on_first_launch else ""))
        if answer.kind != "ready":
            raise JudgeStop(self._candidate_failure(answer, "init"))
        names = [str(item["name"]) for item in header.get("params") or []]
        if self.request.package_ops and names and answer.header.get("shared_parameters") \
                is not True:
            # An operator package takes the module's state as arguments: one that takes none
            # (or others) has the reference's values baked in, right only for these weights.
            raise JudgeStop(Failure(
                check="init", message=f"the reference has parameters ({', '.join(names[:8])}"
                f"{', ...' if len(names) > 8 else ''}) and the package does not take them: "
                "its manifest's `params` must list each by its state_dict name and shape, "
                "and the kernel must read them (the values may be any)"))

    def check(self, prepared: Message) -> tuple[list[CaseResult], list[Failure]]:
        started = time.monotonic()
        cases = sorted(prepared.header["cases"], key=lambda case: _numel(case, prepared))
        results: list[CaseResult] = []
        failures: list[Failure] = []
        for case in cases:
            result, case_failures = self._check_case(case, prepared)
            results.append(result)
            failures += case_failures
            if any(item.check in _STOPPING_CHECKS for item in case_failures):
                break  # the same error would repeat on every case
        self.stages.append(StageResult("check", not failures, time.monotonic() - started))
        return results, failures

    def time_it(self, prepared: Message) -> Timing | None:
        perf = prepared.header.get("perf")
        if not isinstance(perf, dict):
            return None
        started = time.monotonic()
        tensors: list[WireTensor] = []
        inputs = _copy_tree(perf["inputs"], prepared.tensors, tensors)
        self._send(self.candidate, {"kind": "time", "inputs": inputs, "layouts": perf["layouts"]},
                            tensors)
        candidate = self._answer(self.candidate, 1 << 20, "run").header
        self._send(self.reference, {"kind": "time"})
        reference = self._answer(self.reference, 1 << 20, "reference").header
        return self._timing(perf, candidate, reference, time.monotonic() - started)

    # -- one case ---------------------------------------------------------------------------

    def _check_case(self, case: dict[str, Any],
                    prepared: Message) -> tuple[CaseResult, list[Failure]]:
        name = str(case["name"])
        tensors: list[WireTensor] = []
        inputs = _copy_tree(case["inputs"], prepared.tensors, tensors)
        expected_leaves = tree_leaves(case["expected"], prepared.tensors)
        self.in_flight = (case, prepared)
        self._send(self.candidate, {"kind": "run", "case": name, "inputs": inputs,
                             "layouts": case["layouts"]}, tensors)
        answer = self._answer(self.candidate, _output_cap(expected_leaves), "run")
        self.in_flight = None
        if answer.kind != "outputs":
            return self._case_result(case, prepared, False), [
                self._candidate_failure(answer, "run", case=name)]
        failures = _guard_failures(name, answer.header, self.request.expects_kernel_launches)
        errors: list[tuple[float, float]] = []
        failures += self._compare(case, prepared, answer, errors)
        worst_abs = max((item[0] for item in errors), default=None)
        worst_rel = max((item[1] for item in errors), default=None)
        return self._case_result(case, prepared, not failures, worst_abs, worst_rel), failures

    def _compare(self, case: dict[str, Any], prepared: Message, answer: Message,
                 errors: list[tuple[float, float]]) -> list[Failure]:
        name = str(case["name"])
        expected_tree = case["expected"]
        try:
            actual_tree = answer.header["output"]
            actual = tree_leaves(actual_tree, answer.tensors)
        except (KeyError, WireError) as exc:
            return [Failure(check="output_structure", case=name,
                            message=f"the candidate's outputs are unreadable: {exc}")]
        expected = tree_leaves(expected_tree, prepared.tensors)
        if len(expected) != len(actual) or _top_kind(expected_tree) != _top_kind(actual_tree):
            return [Failure(check="output_structure", case=name,
                            message=f"the forward returned {tree_structure(actual_tree)}, the "
                            f"reference returns {tree_structure(expected_tree)}")]
        failures: list[Failure] = []
        truth: list[Any] = []
        for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
            failures += self._compare_item(name, index, want, got, truth=truth, errors=errors)
        return failures

    def _compare_item(self, case: str, index: int, want: Any, got: Any, *, truth: list[Any],
                      errors: list[tuple[float, float]]) -> list[Failure]:
        if not isinstance(want, WireTensor):
            if want != got:
                return [Failure(check="values", case=case, output=index,
                                message=f"output {index}: {str(got)[:80]!r}, expected {want!r}")]
            return []
        if not isinstance(got, WireTensor):
            return [Failure(check="output_structure", case=case, output=index,
                            message=f"output {index} is not a tensor")]
        result = compare_output(want, got, truth=None, tolerance=self._tolerance(want.dtype),
                                case=case, index=index)
        if result.failures and result.failures[0].check == "values":
            if not truth:
                truth.append(self._truth(case))
            exact = truth[0][index] if truth[0] is not None and index < len(truth[0]) else None
            result = compare_output(want, got, truth=exact if isinstance(exact, WireTensor)
                                    else None, tolerance=self._tolerance(want.dtype),
                                    case=case, index=index)
        errors.append((result.max_abs_err, result.max_rel_err))
        if not result.failures:
            self.correct_outputs.append(got)
            return []
        return [self._maybe_cached(item, got) for item in result.failures]

    def _truth(self, case: str) -> list[Any] | None:
        self._send(self.reference, {"kind": "truth", "case": case})
        answer = self._answer(self.reference, _REFERENCE_MAX_BYTES, "reference")
        tree = answer.header.get("output")
        if tree is None:
            return None
        try:
            return tree_leaves(tree, answer.tensors)
        except WireError:
            return None

    def _maybe_cached(self, failure: Failure, actual: WireTensor) -> Failure:
        """A failure whose output is exactly an earlier call's correct output is a cache."""
        if failure.check not in ("values", "shape"):
            return failure
        if any(same_values(earlier, actual) for earlier in self.correct_outputs):
            return Failure(check="cached_output", case=failure.case, output=failure.output,
                           message="fresh inputs gave exactly the output of an earlier call: "
                           "the forward returns cached results", details=failure.details)
        return failure

    def _tolerance(self, dtype: str) -> Tolerance:
        return self.request.tolerances.get(dtype) or DEFAULT_TOLERANCES.get(
            dtype, DEFAULT_TOLERANCES["float32"])

    def _case_result(self, case: dict[str, Any], prepared: Message, passed: bool,
                     max_abs: float | None = None, max_rel: float | None = None) -> CaseResult:
        tensors = [leaf for leaf in tree_leaves(case["inputs"], prepared.tensors)
                   if isinstance(leaf, WireTensor)]
        return CaseResult(name=str(case["name"]), shapes=[item.shape for item in tensors],
                          dtypes=[item.dtype for item in tensors], seed=int(case["seed"]),
                          passed=passed, max_abs_err=_finite_or_none(max_abs),
                          max_rel_err=_finite_or_none(max_rel), note=str(case.get("note") or ""))

    def _timing(self, perf: dict[str, Any], candidate: dict[str, Any],
                reference: dict[str, Any], seconds: float) -> Timing | None:
        try:
            cand_ms, ref_ms = float(candidate["median_ms"]), float(reference["median_ms"])
            method, trials = str(reference["method"]), int(reference["trials"])
            warmup = int(reference["warmup"])
            cand_min, cand_max = float(candidate["min_ms"]), float(candidate["max_ms"])
        except (KeyError, TypeError, ValueError):
            self.stages.append(StageResult("time", False, seconds, note="no usable timing"))
            return None
        cpu = method == "wall_clock"
        note = ("CPU interpreter: these timings say nothing about device speed" if cpu
                else f"{method}, median of {trials} after {warmup} warm-up")
        speedup = ref_ms / cand_ms if cand_ms > 0 else 0.0
        if speedup > 10 and not cpu:
            note += "; speedup above 10x: flagged for human review"
        self.stages.append(StageResult("time", True, seconds, note=note))
        return Timing(device=self.device, shapes=perf.get("shapes") or [], trials=trials,
                      candidate_ms=cand_ms, candidate_min_ms=cand_min,
                      candidate_max_ms=cand_max, reference_ms=ref_ms, speedup=speedup,
                      note=note)

    # -- answers ----------------------------------------------------------------------------

    def _answer(self, worker: Worker, max_payload: int, stage: str) -> Message:
        """The worker's next message; JudgeStop when it is late, malformed or missing."""
        try:
            return worker.receive(max_payload)
        except WireError as exc:
            raise self._stop(worker, exc, stage) from None

    def _send(self, worker: Worker, header: dict[str, Any],
              tensors: list[WireTensor] | None = None) -> None:
        """A request to a worker; JudgeStop when it stopped reading or is gone."""
        try:
            worker.send(header, tensors)
        except WireError as exc:
            raise self._stop(worker, exc, str(header.get("kind"))) from None

    def _stop(self, worker: Worker, exc: WireError, stage: str) -> JudgeStop:
        case = str(self.in_flight[0]["name"]) if self.in_flight and worker is self.candidate \
            else None
        if isinstance(exc, DeadlineError):
            return JudgeStop(replace(_late(worker, self.request.timeout_s), case=case))
        if isinstance(exc, PeerClosedError):
            return JudgeStop(replace(_died(worker, str(exc)), case=case))
        who = "the reference" if worker.role == "reference" else "the candidate"
        check = "reference" if worker.role == "reference" else "crash"
        return JudgeStop(Failure(check=check, message=f"{who}'s worker sent a malformed "
                                 f"answer during {stage}: {exc}"))

    def _candidate_failure(self, answer: Message, stage: str, case: str | None = None
                           ) -> Failure:
        if answer.kind != "failed" or not isinstance(answer.header.get("failure"), dict):
            return Failure(check="crash", case=case, message=f"the candidate's worker answered "
                           f"{answer.kind[:40]!r} during {stage}")
        try:
            claimed = Failure.from_json(answer.header["failure"])
        except (KeyError, TypeError, ValueError):
            return Failure(check="crash", case=case, message=f"the candidate's worker sent a "
                           f"malformed failure during {stage}")
        allowed = _STAGE_CHECKS[stage]
        check = claimed.check if claimed.check in allowed else allowed[0]
        return Failure(check=check, case=case or claimed.case,
                       message=str(claimed.message)[:_MESSAGE_CHARS],
                       location=claimed.location, log_tail=claimed.log_tail,
                       details=dict(claimed.details) if isinstance(claimed.details, dict)
                       else {})

    def verdict(self, results: list[CaseResult], failures: list[Failure],
                timing: Timing | None) -> VerifyResult:
        return VerifyResult(status="failed" if failures else "passed", reasons=failures,
                            cases=results, stages=self.stages, device=self.device,
                            warnings=self.warnings, timing=timing, inferred=self.inferred,
                            seed=self.seed)


# -- failures ------------------------------------------------------------------------------


def _guard_failures(case: str, header: dict[str, Any],
                    expects_kernel_launches: bool) -> list[Failure]:
    """What the candidate's own guard recorded (best effort: its process may lie)."""
    computed, launches, mutated = (header.get("computed"), header.get("launches"),
                                   header.get("mutated"))
    if not (isinstance(computed, dict) and all(
            isinstance(count, int) and not isinstance(count, bool)
            for count in computed.values()) and isinstance(launches, int)
            and isinstance(mutated, list) and all(isinstance(item, int) for item in mutated)):
        return [Failure(check="crash", case=case, message="the candidate's worker sent a "
                        "malformed record of its run")]
    failures: list[Failure] = []
    if computed:
        ops = {str(name)[:60]: count for name, count in list(computed.items())[:20]}
        listed = ", ".join(f"{name} x{count}" for name, count in sorted(ops.items()))
        failures.append(Failure(check="torch_op", case=case, message=f"the forward computed "
                                f"with PyTorch ({listed}): the kernel must do the work",
                                details={"ops": ops}))
    if launches == 0 and expects_kernel_launches:
        failures.append(Failure(check="no_kernel", case=case,
                                message="the forward launched no Triton kernel"))
    if mutated:
        changed = mutated[:20]
        failures.append(Failure(check="input_mutation", case=case,
                                message=f"the forward modified its input(s) {changed} in place",
                                details={"inputs": changed}))
    return failures


def _reference_failure(answer: Message) -> Failure:
    try:
        failure = Failure.from_json(answer.header["failure"])
    except (KeyError, TypeError, ValueError):
        return Failure(check="reference", message="the reference worker failed unreadably")
    if failure.check == "crash":
        return failure  # the harness's own fault, not the user's reference
    return Failure(check="reference", case=failure.case, message=failure.message,
                   location=failure.location, log_tail=failure.log_tail)


def _late(worker: Worker, timeout_s: float) -> Failure:
    outcome = worker.child.finish(timed_out=True)
    if worker.role == "reference":
        return Failure(check="timeout", message=f"no verdict within {timeout_s:g} s: the "
                       "reference is too slow or hangs; the workers were killed",
                       log_tail=outcome.log_tail or None)
    return Failure(check="timeout", message=f"no verdict within {timeout_s:g} s: the candidate "
                   "hangs or is far too slow; the worker was killed",
                   log_tail=outcome.log_tail or None)


def _died(worker: Worker, why: str) -> Failure:
    outcome = worker.child.finish()
    tail = outcome.log_tail or None
    reason = outcome.killed_because or (why if "processes" in why else None)
    if reason:
        message = f"the {worker.role}'s worker was stopped: it started {reason}"
    elif outcome.signal_name:
        message = (f"the {worker.role}'s worker died of {outcome.signal_name} (a kernel that "
                   "reads or writes out of bounds, an abort...)")
    else:
        message = (f"the {worker.role}'s worker exited with status {outcome.returncode} "
                   "before answering (the code exited the process)")
    return Failure(check="reference" if worker.role == "reference" else "crash",
                   message=message, log_tail=tail)


# -- trees ----------------------------------------------------------------------------------


def _copy_tree(tree: Any, source: list[WireTensor], target: list[WireTensor]) -> Any:
    """The same value tree over `target`, holding copies of the tensors it names."""
    kind = tree.get("t") if isinstance(tree, dict) else None
    if kind == "tensor":
        target.append(source[int(tree["i"])])
        return {"t": "tensor", "i": len(target) - 1}
    if kind in ("list", "tuple"):
        return {"t": kind, "items": [_copy_tree(item, source, target) for item in tree["items"]]}
    return tree


def _top_kind(tree: Any) -> str:
    kind = tree.get("t") if isinstance(tree, dict) else None
    return "tensor" if kind == "tensor" else ("sequence" if kind in ("list", "tuple") else "other")


def _numel(case: dict[str, Any], prepared: Message) -> int:
    total = 0
    for leaf in tree_leaves(case["inputs"], prepared.tensors):
        if isinstance(leaf, WireTensor):
            count = 1
            for size in leaf.shape:
                count *= size
            total += count
    return total


def _output_cap(expected: list[Any]) -> int:
    size = sum(len(item.data) for item in expected if isinstance(item, WireTensor))
    return 2 * size + _OUTPUT_SLACK_BYTES


def _finite_or_none(value: float | None) -> float | None:
    if value is None or value != value or value in (float("inf"), float("-inf")):
        return None
    return value


def _dict_or_none(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


# -- entry point ------------------------------------------------------------------------------


@contextmanager
def _workers(request: VerifyRequest, root: Path, python: str, policy: SandboxPolicy | None,
             deadline: float) -> Iterator[tuple[Worker, Worker]]:
    watch: list[IsolatedChild] = []
    with ExitStack() as stack:
        reference = _start_worker("reference", root=root, request=request,
                                  readable=[request.reference], python=python, policy=policy,
                                  deadline=deadline, watch=watch)
        stack.callback(reference.close)
        candidate = _start_worker("candidate", root=root, request=request,
                                  readable=[request.candidate, *request.readable],
                                  python=python, policy=policy,
                                  deadline=deadline, watch=watch)
        stack.callback(candidate.close)
        yield reference, candidate


def run_harness(request: VerifyRequest, *, python: str | None = None,
                policy: SandboxPolicy | None = None) -> VerifyResult:
    """Verify `request.candidate` against `request.reference`: the judge and its workers."""
    deadline = time.monotonic() + request.timeout_s
    seed = request.seed if request.seed is not None else draw_seed()
    with private_workdir("opbot-verify-") as root:
        try:
            with _workers(request, root, python or sys.executable, policy,
                          deadline) as (reference, candidate):
                judge = Judge(request, seed, reference, candidate)
                result = _judge(judge, request, deadline)
                sandboxed = reference.child.sandboxed
        except SandboxUnavailableError as exc:
            return VerifyResult.failed(Failure(check="sandbox", message=str(exc)))
    if not sandboxed:
        result.warnings.append("unsandboxed: bubblewrap is missing and the policy allowed "
                               "running the candidate without a sandbox")
    return result


def _judge(judge: Judge, request: VerifyRequest, deadline: float) -> VerifyResult:
    findings: list[Failure] = []
    try:
        judge.start()
        findings = (static_failures(request.candidate, deadline) if request.static_scan
                    else [])
        prepared = judge.prepare()
        judge.load_candidate()
        judge.build_candidate(prepared)
        results, failures = judge.check(prepared)
        timing = None
        if not failures and not findings and request.time_it:
            timing = judge.time_it(prepared)
        verdict = judge.verdict(results, failures, timing)
    except JudgeStop as stop:
        # The case that was running when it stopped, so the feedback gives its shapes.
        running = [judge._case_result(*judge.in_flight, False)] if judge.in_flight and \
            stop.failure.case else []
        verdict = VerifyResult(status="failed", reasons=[stop.failure], cases=running,
                               stages=judge.stages, device=judge.device,
                               warnings=judge.warnings, inferred=judge.inferred, seed=judge.seed)
    _say_exit(judge)
    if not findings:
        return verdict
    return VerifyResult(status="failed", reasons=findings + verdict.reasons, cases=verdict.cases,
                        stages=verdict.stages, device=verdict.device, warnings=verdict.warnings,
                        timing=verdict.timing, inferred=verdict.inferred, seed=verdict.seed)


def _say_exit(judge: Judge) -> None:
    for worker in (judge.reference, judge.candidate):
        with contextlib.suppress(WireError, OSError, ValueError):  # gone: finish() reaps it
            worker.send({"kind": "exit"})
