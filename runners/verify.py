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
import itertools
import math
import secrets
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeGuard

import runners
from runners.anticheat.findings import Finding
from runners.anticheat.scan import check_source
from runners.base import (
    DEFAULT_TOLERANCES,
    CaseResult,
    Failure,
    SourceLocation,
    StageResult,
    TimedCase,
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
    UnrequestedError,
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
from runners.warm import WarmChild, WarmLease, WarmPool, WarmWorkers
from runners.warm_pool import shared_workers, wanted

_MAX_SOURCE_BYTES = 2 * 1024 * 1024
_REFERENCE_MAX_BYTES = 1 << 36  # the reference's cases: large, but not unbounded
_OUTPUT_SLACK_BYTES = 16 * 1024 * 1024
_STOPPING_CHECKS = ("run", "out_of_bounds", "torch_op", "no_kernel")
# What a candidate's "failed" answer may claim at each stage: it cannot shift the blame.
_STAGE_CHECKS = {"load": ("load", "crash"), "init": ("init", "crash"),
                 "run": ("run", "crash", "out_of_bounds", "device", "output_structure")}
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


class TreeGrownError(PeerClosedError):
    """A watched worker's process tree grew past the limit. It carries that worker's child:
    the watchdog runs while the judge waits on either worker, and the one waited on is not
    necessarily the one that forked (a candidate's fork bomb must not be the reference's)."""

    def __init__(self, reason: str, child: IsolatedChild | WarmChild) -> None:
        super().__init__(reason)
        self.child = child


@dataclass
class Worker:
    """One sandboxed worker and its channel; `role` names it in failures."""

    role: str
    child: IsolatedChild | WarmChild
    reader: Reader
    deadline: float
    watch: list[IsolatedChild | WarmChild]

    def send(self, header: dict[str, Any], tensors: list[WireTensor] | None = None) -> None:
        if self.reader.pending():
            raise UnrequestedError("it sent a message before it was asked anything: code in "
                                   "it wrote on the judge's channel")
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
                raise TreeGrownError(reason, child)

    def close(self) -> ProcessOutcome:
        return self.child.finish()


def _start_worker(role: str, *, root: Path, request: VerifyRequest,
                  readable: list[Path], python: str, policy: SandboxPolicy | None, deadline: float,
                  watch: list[IsolatedChild | WarmChild], lease: WarmLease | None = None
                  ) -> Worker:
    """A worker forked by the warm server of `role` when there is a lease (and the server
    can serve), else a cold one: its own sandboxed process."""
    child: IsolatedChild | WarmChild | None = None
    if lease is not None:
        child = lease.spawn(role, log_path=root / f"{role}.log", deadline=deadline)
    if child is None:
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
        """Candidate and reference (eager, torch.compile) timed on the perf case, then on the
        more shapes the reference names (on a device only), candidate first on each."""
        perf = prepared.header.get("perf")
        if not isinstance(perf, dict):
            return None
        started = time.monotonic()
        cases = {str(case["name"]): case for case in prepared.header["cases"]}
        rows = [(self._time_candidate(perf, prepared), self._time_reference(None))]
        more = _case_names(rows[0][1].get("more_cases"))[:_MORE_TIMED_ROWS]
        for name in more if all(answer.get("kind") == "timed" for answer in rows[0]) else []:
            if name in cases:
                rows.append((self._time_candidate(cases[name], prepared),
                             self._time_reference(name)))
                if rows[-1][0].get("kind") != "timed":
                    break  # refused below; a worker that could not time is asked no more
        return self._timing(perf, rows, time.monotonic() - started)

    def _time_candidate(self, case: dict[str, Any], prepared: Message) -> dict[str, Any]:
        tensors: list[WireTensor] = []
        inputs = _copy_tree(case["inputs"], prepared.tensors, tensors)
        self._send(self.candidate, {"kind": "time", "inputs": inputs, "layouts": case["layouts"],
                                    "max_spread": self.request.max_spread}, tensors)
        return self._answer(self.candidate, 1 << 20, "run").header

    def _time_reference(self, case: str | None) -> dict[str, Any]:
        # What is left of the deadline: the reference skips torch.compile rather than hang.
        budget_s = self.reference.deadline - time.monotonic()
        header: dict[str, Any] = {"kind": "time", "max_spread": self.request.max_spread,
                                  "budget_s": budget_s}
        if case is not None:
            header["case"] = case
        self._send(self.reference, header)
        return self._answer(self.reference, 1 << 20, "reference").header

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

    def _timing(self, perf: dict[str, Any], rows: list[tuple[dict[str, Any], dict[str, Any]]],
                seconds: float) -> Timing | None:
        """The timing from the workers' answers, every number checked: the candidate's worker
        is the candidate's process, and one implausible figure refuses its whole timing."""
        limit_ms = self.request.timeout_s * 1000.0
        timed: list[tuple[_Figures, _Figures, dict[str, Any]]] = []
        for index, (candidate, reference) in enumerate(rows):
            theirs = _read_figures(candidate, limit_ms)
            if isinstance(theirs, str):
                self._untimed(seconds, f"the candidate's timing was refused: {theirs}",
                              warn=True)
                return None
            ours = _read_figures(reference, limit_ms)
            if isinstance(ours, str):
                if index == 0:
                    self._untimed(seconds, f"no usable timing: the reference's {ours}")
                    return None
                continue  # a further shape the reference could not time: no row for it
            timed.append((theirs, ours, reference))
        return self._timing_from(perf, timed, seconds)

    def _untimed(self, seconds: float, why: str, *, warn: bool = False) -> None:
        self.stages.append(StageResult("time", False, seconds, note=why))
        if warn:
            self.warnings.append(f"timing: {why}")

    def _timing_from(self, perf: dict[str, Any],
                     timed: list[tuple[_Figures, _Figures, dict[str, Any]]],
                     seconds: float) -> Timing:
        candidate, eager, facts = timed[0]
        method = _text(facts.get("method"), 40) or "unknown"
        compiled = _compile_figures(facts, self.request.timeout_s * 1000.0)
        note = self._timing_note(method, _text(facts.get("timer"), 200), candidate,
                                 [item[0] for item in timed])
        speedup = eager.median_ms / candidate.median_ms
        if speedup > 10 and method != "wall_clock":
            note += "; speedup above 10x: flagged for human review"
        self.stages.append(StageResult("time", True, seconds, note=note))
        return Timing(device=self.device, shapes=perf.get("shapes") or [],
                      trials=candidate.trials, candidate_ms=candidate.median_ms,
                      candidate_min_ms=candidate.min_ms, candidate_max_ms=candidate.max_ms,
                      reference_ms=eager.median_ms, speedup=speedup, note=note, method=method,
                      warmup=candidate.warmup, spread=candidate.spread,
                      remeasured=sum(item[0].remeasured for item in timed),
                      compile_ms=compiled.median_ms if compiled else None,
                      compile_note=_text(facts.get("compile_note"), 300),
                      device_name=_text(facts.get("device_name"), 120),
                      clock_note=_text(facts.get("clock_note"), 300),
                      rows=[_timed_case(*item, self.request.timeout_s * 1000.0)
                            for item in timed])

    def _timing_note(self, method: str, timer: str, candidate: _Figures,
                     every: list[_Figures]) -> str:
        if method == "wall_clock":
            return ("CPU interpreter: these timings say nothing about device speed "
                    f"({candidate.trials} wall-clock samples, {candidate.warmup} warm-up)")
        note = (f"{method} ({timer}): candidate median of {candidate.trials} samples after "
                f"{candidate.warmup} warm-up calls, spread {candidate.spread:.1%} "
                f"((p80 - p20) / median; limit {self.request.max_spread:.0%})")
        remeasured = sum(item.remeasured for item in every)
        if remeasured:
            note += f"; {remeasured} run(s) rejected as too noisy and measured again"
        # From the figures, not from the worker's own word (its too_wide).
        wide = sum(item.spread > self.request.max_spread for item in every)
        if wide:
            note += (f"; {wide} shape(s) still wider than the limit after re-measuring: the "
                     "narrowest run kept")
        if self.device.startswith("npu"):
            note += "; eager is torch_npu's own ops"
        return note

    def sync_candidate(self) -> None:
        """A last round trip with a fresh nonce. An honest worker answers it next; one whose
        code wrote frames of its own is out of step (an answer of its own comes first, or
        none carries the nonce), and a pass it may have forged is no pass."""
        nonce = secrets.token_hex(16)
        self._send(self.candidate, {"kind": "sync", "nonce": nonce})
        answer = self._answer(self.candidate, 1 << 16, "sync")
        if answer.kind != "synced" or answer.header.get("nonce") != nonce:
            raise JudgeStop(Failure(check="crash", message=(
                f"the candidate's worker is out of step with the judge: it answered "
                f"{answer.kind[:40]!r} to the closing check, so code in it wrote messages of "
                "its own on the judge's channel")))

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
        if isinstance(exc, TreeGrownError):
            worker = self._owner(exc.child, worker)  # who forked, not who was waited on
        case = str(self.in_flight[0]["name"]) if self.in_flight and worker is self.candidate \
            else None
        if isinstance(exc, DeadlineError):
            return JudgeStop(replace(_late(worker, self.request.timeout_s), case=case))
        if isinstance(exc, PeerClosedError):
            return JudgeStop(replace(_died(worker, str(exc)), case=case))
        who = "the reference" if worker.role == "reference" else "the candidate"
        check = "reference" if worker.role == "reference" else "crash"
        if isinstance(exc, UnrequestedError):
            return JudgeStop(Failure(check=check, message=f"{who}'s worker broke "
                                     f"the protocol before {stage}: {exc}"))
        return JudgeStop(Failure(check=check, message=f"{who}'s worker sent a malformed "
                                 f"answer during {stage}: {exc}"))

    def _owner(self, child: IsolatedChild | WarmChild, waited: Worker) -> Worker:
        """The worker whose process is `child` (the one waited on when neither is)."""
        for worker in (self.candidate, self.reference):
            if worker.child is child:
                return worker
        return waited

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


# -- timing answers ------------------------------------------------------------------------

_MORE_TIMED_ROWS = 3  # shapes timed after the perf case (the reference names them)
_MAX_REMEASURES = 2  # runners.harness.timing.MAX_REMEASURES (the judge does not import torch)
# Below what any launch costs on any device (a kernel launch is microseconds): a lie.
_MIN_PLAUSIBLE_MS = 1e-4
_MAX_SAMPLES = 10_000_000
_TIME_KEYS = ("min_ms", "p20_ms", "median_ms", "p80_ms", "max_ms")  # in ascending order


@dataclass(frozen=True)
class _Figures:
    """A worker's timing of one shape, checked."""

    min_ms: float
    p20_ms: float
    median_ms: float
    p80_ms: float
    max_ms: float
    trials: int
    warmup: int
    remeasured: int
    too_wide: bool

    @property
    def spread(self) -> float:
        return (self.p80_ms - self.p20_ms) / self.median_ms


def _plain_int(value: Any, low: int, high: int) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _read_figures(header: dict[str, Any], limit_ms: float) -> _Figures | str:
    """A worker's `timed` answer as figures, or why it cannot be believed."""
    if header.get("kind") != "timed":
        reason = _text(header.get("reason"), 200)
        return f"answer was {_text(header.get('kind'), 40)!r}" + (f" ({reason})" if reason
                                                                  else "")
    times: list[float] = []
    for key in _TIME_KEYS:
        value = header.get(key)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return f"{key} is missing or not a number"
        if not math.isfinite(value) or value < _MIN_PLAUSIBLE_MS or value > limit_ms:
            return (f"{key} = {value!r} ms is not a plausible time (between "
                    f"{_MIN_PLAUSIBLE_MS:g} ms and the run's {limit_ms:g} ms limit)")
        times.append(float(value))
    if any(later < earlier * (1 - 1e-9) for earlier, later in itertools.pairwise(times)):
        return "min <= p20 <= median <= p80 <= max does not hold"
    trials, warmup, remeasured = (header.get("trials"), header.get("warmup"),
                                  header.get("remeasured", 0))
    if not _plain_int(trials, 1, _MAX_SAMPLES) or not _plain_int(warmup, 0, _MAX_SAMPLES):
        return "its sample or warm-up count is not a plausible count"
    if not _plain_int(remeasured, 0, _MAX_REMEASURES):
        return f"its re-measure count is not between 0 and {_MAX_REMEASURES}"
    too_wide = header.get("too_wide", False)
    if not isinstance(too_wide, bool):
        return "too_wide is not true or false"
    low, p20, median, p80, high = times
    return _Figures(min_ms=low, p20_ms=p20, median_ms=median, p80_ms=p80, max_ms=high,
                    trials=trials, warmup=warmup, remeasured=remeasured,
                    too_wide=too_wide)


def _compile_figures(reference: dict[str, Any], limit_ms: float) -> _Figures | None:
    compiled = reference.get("compile")
    if not isinstance(compiled, dict):
        return None
    figures = _read_figures({**compiled, "kind": "timed"}, limit_ms)
    return None if isinstance(figures, str) else figures


def _timed_case(candidate: _Figures, eager: _Figures, reference: dict[str, Any],
                limit_ms: float) -> TimedCase:
    compiled = _compile_figures(reference, limit_ms)
    return TimedCase(name=_text(reference.get("case"), 80),
                     input_shapes=_shape_list(reference.get("input_shapes")),
                     input_dtypes=_text_list(reference.get("input_dtypes")),
                     output_shapes=_shape_list(reference.get("output_shapes")),
                     output_dtypes=_text_list(reference.get("output_dtypes")),
                     candidate_ms=candidate.median_ms, eager_ms=eager.median_ms,
                     compile_ms=compiled.median_ms if compiled else None,
                     spread=candidate.spread, bytes_moved=_count(reference.get("bytes_moved")),
                     flops=_count(reference.get("flops")))


def _text(value: Any, limit: int) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _text_list(value: Any) -> list[str]:
    return [item[:40] for item in value if isinstance(item, str)] if isinstance(value, list) \
        else []


def _shape_list(value: Any) -> list[list[int]]:
    if not isinstance(value, list):
        return []
    return [list(shape) for shape in value if isinstance(shape, list)
            and all(_plain_int(size, 0, 1 << 62) for size in shape)]


def _count(value: Any) -> int | None:
    return value if _plain_int(value, 0, 1 << 62) else None


def _case_names(value: Any) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


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
             deadline: float, *, lease: WarmLease | None = None
             ) -> Iterator[tuple[Worker, Worker]]:
    watch: list[IsolatedChild | WarmChild] = []
    with ExitStack() as stack:
        reference = _start_worker("reference", root=root, request=request,
                                  readable=[request.reference], python=python, policy=policy,
                                  deadline=deadline, watch=watch, lease=lease)
        stack.callback(reference.close)
        candidate = _start_worker("candidate", root=root, request=request,
                                  readable=[request.candidate, *request.readable],
                                  python=python, policy=policy,
                                  deadline=deadline, watch=watch, lease=lease)
        stack.callback(candidate.close)
        yield reference, candidate


def run_harness(request: VerifyRequest, *, python: str | None = None,
                policy: SandboxPolicy | None = None,
                warm: bool | WarmWorkers | None = None) -> VerifyResult:
    """Verify `request.candidate` against `request.reference`: the judge and its workers.

    warm: the workers are forked from pre-imported servers (runners/warm.py) instead of
    started cold: True uses this process's shared servers (started on first use, stopped at
    exit), a `WarmWorkers` uses those; None follows the process's switch
    (`runners.warm.enable()`, OPBOT_WARM_WORKERS=1), off by default.
    """
    deadline = time.monotonic() + request.timeout_s
    seed = request.seed if request.seed is not None else draw_seed()
    chosen = python or sys.executable
    pool: WarmPool | None = warm if isinstance(warm, WarmWorkers) else (
        shared_workers(chosen, policy) if wanted(warm) else None)
    readable: dict[str, list[Path]] = {
        "reference": [request.reference], "candidate": [request.candidate, *request.readable]}
    lease_warnings: list[str] = []
    with private_workdir("opbot-verify-") as root:
        try:
            with ExitStack() as stack:
                lease = stack.enter_context(pool.lease(readable)) if pool else None
                reference, candidate = stack.enter_context(
                    _workers(request, root, chosen, policy, deadline, lease=lease))
                judge = Judge(request, seed, reference, candidate)
                result = _judge(judge, request, deadline)
                sandboxed = reference.child.sandboxed
                lease_warnings = lease.warnings if lease else []
        except SandboxUnavailableError as exc:
            return VerifyResult.failed(Failure(check="sandbox", message=str(exc)))
    result.warnings.extend(lease_warnings)
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
        if not failures:
            judge.sync_candidate()
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
