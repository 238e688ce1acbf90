"""Typed requests and results shared by every backend, and the Backend protocol.

Every stage of a verification (load, build, check, time) ends in a typed result; every
failure names the check that failed and carries its numbers. Results cross the process
boundary between the harness worker and the parent as JSON, so each type converts both ways.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, get_args

BackendName = Literal["triton", "ascendc"]
BACKENDS: tuple[str, ...] = get_args(BackendName)

Status = Literal["passed", "failed"]
StageName = Literal["load", "build", "check", "time"]

# The named checks. A failure always carries one of these, so a reader (or the agent's
# feedback shaper) can tell what went wrong without parsing prose.
CheckName = Literal[
    "reference",  # the reference itself failed to load or run: bad input, not the candidate's fault
    "load",  # the candidate could not be imported or lacks ModelNew
    "build",  # compilation failed (Ascend C) or the source does not parse
    "init",  # ModelNew(*init_args) raised
    "run",  # the candidate's forward raised
    "timeout",  # the worker ran past its wall-clock limit
    "crash",  # the worker died (a signal, an abort)
    "out_of_bounds",  # a kernel's load or store left its tensors (the CPU interpreter checks)
    "sandbox",  # no sandbox to run untrusted code in, and the policy forbids running without
    "output_structure",  # a different number or nesting of outputs than the reference
    "shape",
    "dtype",
    "device",  # an output on another device than the inputs
    "layout",  # an output whose memory overlaps (an expanded view) where the reference's does not
    "nan_inf",  # NaN/Inf where the reference has none (or the reverse)
    "values",  # numerical mismatch beyond the tolerance
    "cached_output",  # fresh inputs did not change the output
    "input_mutation",  # an input was modified in place
    "torch_op",  # run time: the forward computed with PyTorch ops
    "no_kernel",  # run time: the forward launched no kernel of the backend
    "static_torch_op",  # static: the forward calls a PyTorch compute op
    "static_reference_call",  # static: the forward calls the reference Model
    "static_fallback",  # static: try/except falling back to PyTorch
    "static_stream",  # static: side streams, threads or deferred work
    "static_tamper",  # static: patching timers, the harness, or reaching into the process
    "static_structure",  # static: ModelNew is not one plain top-level class
]
CHECK_NAMES: tuple[str, ...] = get_args(CheckName)


@dataclass(frozen=True)
class SourceLocation:
    """Where in the candidate's source an error points: file, line and the line's text."""

    file: str
    line: int
    source_line: str = ""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SourceLocation | None:
        file, line, text = data.get("file"), data.get("line"), data.get("source_line", "")
        if not isinstance(file, str) or not isinstance(line, int) or not isinstance(text, str):
            return None
        return cls(file=file, line=line, source_line=text)

    def render(self) -> str:
        text = f"{self.file}:{self.line}"
        return f"{text}: {self.source_line.strip()}" if self.source_line.strip() else text


@dataclass(frozen=True)
class Failure:
    """One failed check, with the numbers that show it."""

    check: str
    message: str
    case: str | None = None
    output: int | None = None
    details: dict[str, Any] = field(default_factory=dict)
    location: SourceLocation | None = None
    log_tail: str | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"check": self.check, "message": self.message}
        if self.case is not None:
            data["case"] = self.case
        if self.output is not None:
            data["output"] = self.output
        if self.details:
            data["details"] = self.details
        if self.location is not None:
            data["location"] = asdict(self.location)
        if self.log_tail:
            data["log_tail"] = self.log_tail
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Failure:
        """A failure as JSON says it; fields of the wrong type (a worker's word) are dropped."""
        location = data.get("location")
        case, output, details, tail = (data.get("case"), data.get("output"),
                                       data.get("details"), data.get("log_tail"))
        return cls(
            check=str(data["check"]),
            message=str(data["message"]),
            case=case if isinstance(case, str) else None,
            output=output if isinstance(output, int) and not isinstance(output, bool) else None,
            details=dict(details) if isinstance(details, dict) else {},
            location=SourceLocation.from_json(location) if isinstance(location, dict) else None,
            log_tail=tail if isinstance(tail, str) else None,
        )


@dataclass(frozen=True)
class CaseResult:
    """The verdict on one input case (shapes, dtype, seed)."""

    name: str
    shapes: list[list[int]]
    dtypes: list[str]
    seed: int
    passed: bool
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CaseResult:
        return cls(**data)


@dataclass(frozen=True)
class StageResult:
    """How one stage went: load, build, check or time."""

    stage: StageName
    ok: bool
    seconds: float
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StageResult:
        return cls(**data)


@dataclass(frozen=True)
class TimedCase:
    """One shape timed on a device: candidate, PyTorch eager and torch.compile side by side,
    with the minimum traffic and the FLOPs the reference's operations need at that shape."""

    name: str
    input_shapes: list[list[int]]
    input_dtypes: list[str]
    output_shapes: list[list[int]]
    output_dtypes: list[str]
    candidate_ms: float
    eager_ms: float
    compile_ms: float | None = None
    spread: float | None = None
    # Each input read once, each output written once; FLOPs counted from the reference's
    # operations at the dispatcher (matmul 2MNK; reductions and norms by their own counts).
    bytes_moved: int | None = None
    flops: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TimedCase:
        return cls(**data)


@dataclass(frozen=True)
class Timing:
    """Median timings of candidate and reference at the perf shapes, same device, same inputs."""

    device: str
    shapes: list[list[int]]
    trials: int
    candidate_ms: float
    candidate_min_ms: float
    candidate_max_ms: float
    reference_ms: float
    speedup: float
    note: str = ""
    # From a device profiler, where the backend ran one (msprof on Ascend): the candidate's
    # kernel alone on the device, per launch (median), and the pipe that bounds it.
    kernel_us: float | None = None
    bottleneck: str | None = None
    # How it was measured (issue 16): "do_bench" (CUDA, triton.testing.do_bench),
    # "npu_events" (Ascend), "device_events", "wall_clock" (CPU interpreter).
    method: str = ""
    warmup: int = 0
    # (p80 - p20) / median of the candidate's samples, and how often a run was rejected as
    # too noisy (policy perf.max_spread) and measured again.
    spread: float | None = None
    remeasured: int = 0
    # torch.compile of the reference on the same inputs; None with the reason in
    # compile_note where it does not work on that device (or on the CPU interpreter).
    compile_ms: float | None = None
    compile_note: str = ""
    # The device by name (torch.cuda.get_device_name / torch.npu.get_device_name) for the
    # peak table, and what the clocks and temperature were where they could be read.
    device_name: str = ""
    clock_note: str = ""
    # One row per timed shape (the perf case first), for the roofline and the chart.
    rows: list[TimedCase] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Timing:
        fields = dict(data)
        fields["rows"] = [TimedCase.from_json(row) for row in fields.get("rows") or []]
        return cls(**fields)


@dataclass(frozen=True)
class VerifyResult:
    """The honest verdict on one candidate."""

    status: Status
    reasons: list[Failure]
    cases: list[CaseResult]
    stages: list[StageResult]
    device: str = "unknown"
    warnings: list[str] = field(default_factory=list)
    timing: Timing | None = None
    # What the harness learnt of a KernelBench reference: its inputs and init args.
    inferred: dict[str, Any] | None = None
    # The run's secret seed (every case's seed derives from it): `--seed` replays it.
    seed: int | None = None

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "reasons": [reason.to_json() for reason in self.reasons],
            "cases": [case.to_json() for case in self.cases],
            "stages": [stage.to_json() for stage in self.stages],
            "device": self.device,
            "warnings": list(self.warnings),
            "timing": self.timing.to_json() if self.timing else None,
            "inferred": self.inferred,
            "seed": self.seed,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> VerifyResult:
        timing = data.get("timing")
        status: Status = "passed" if data.get("status") == "passed" else "failed"
        return cls(
            status=status,
            reasons=[Failure.from_json(item) for item in data.get("reasons", [])],
            cases=[CaseResult.from_json(item) for item in data.get("cases", [])],
            stages=[StageResult.from_json(item) for item in data.get("stages", [])],
            device=str(data.get("device", "unknown")),
            warnings=[str(item) for item in data.get("warnings", [])],
            timing=Timing.from_json(timing) if timing else None,
            inferred=data.get("inferred"),
            seed=data.get("seed") if isinstance(data.get("seed"), int) else None,
        )

    @classmethod
    def failed(cls, failure: Failure, *, stages: list[StageResult] | None = None,
               device: str = "unknown") -> VerifyResult:
        return cls(status="failed", reasons=[failure], cases=[], stages=stages or [],
                   device=device)


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float


# torch.testing.assert_close's defaults per dtype: the loosest default a spec may get.
DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "float64": Tolerance(atol=1e-7, rtol=1e-7),
    "float32": Tolerance(atol=1e-5, rtol=1.3e-6),
    "float16": Tolerance(atol=1e-5, rtol=1e-3),
    "bfloat16": Tolerance(atol=1e-5, rtol=1.6e-2),
}


@dataclass(frozen=True)
class InputCase:
    """How to make one input of one case: a tensor (shape, dtype, distribution) or a value."""

    kind: Literal["tensor", "value"]
    shape: list[int] = field(default_factory=list)
    dtype: str = "float32"
    init: str = "randn"  # randn | rand | randint | ones | zeros | arange
    low: float | None = None
    high: float | None = None
    value: Any = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> InputCase:
        return cls(**data)


@dataclass(frozen=True)
class CaseSpec:
    """One named case: every input of the reference's forward, and a seed."""

    name: str
    inputs: list[InputCase]
    seed: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "seed": self.seed,
                "inputs": [item.to_json() for item in self.inputs]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CaseSpec:
        return cls(name=str(data["name"]), seed=int(data["seed"]),
                   inputs=[InputCase.from_json(item) for item in data["inputs"]])


MAX_SPREAD_VARIABLE = "OPBOT_PERF_MAX_SPREAD"
DEFAULT_MAX_SPREAD = 0.10


def default_max_spread() -> float:
    """The policy's perf.max_spread as `opbot --policy` exported it to this process and the
    ones it starts; the default where none was, or where the value is not one it allows."""
    try:
        value = float(os.environ.get(MAX_SPREAD_VARIABLE, DEFAULT_MAX_SPREAD))
    except ValueError:
        return DEFAULT_MAX_SPREAD
    return value if 0.01 <= value <= 1.0 else DEFAULT_MAX_SPREAD


@dataclass(frozen=True)
class VerifyRequest:
    """Everything the harness needs, independent of where the spec came from.

    `cases` empty means: infer them from the reference's `get_inputs()` (KernelBench format).
    `init_args` None means: take them from the reference's `get_init_inputs()` (or none).
    """

    reference: Path
    candidate: Path
    backend: BackendName = "triton"
    cases: list[CaseSpec] = field(default_factory=list)
    init_args: list[Any] | None = None
    tolerances: dict[str, Tolerance] = field(default_factory=dict)
    derive_tail_cases: bool = True
    perf_case: CaseSpec | None = None
    time_it: bool = False
    # A timing run whose spread, (p80 - p20) / median, is wider is measured again (policy).
    max_spread: float = field(default_factory=default_max_spread)
    timeout_s: float = 300.0
    seed: int | None = None  # None: a fresh secret seed for this run
    # False only for candidates opbot itself writes (an Ascend C package's shim).
    static_scan: bool = True
    # More paths the candidate's worker must read (an Ascend C package's built library).
    readable: tuple[Path, ...] = ()
    # What the backend's kernels look like to the judge. The runner backend that sends the
    # request sets them; the defaults judge a plain request as strictly as a Triton one.
    # A forward must launch a kernel the run-time guard counts (a Triton launch):
    expects_kernel_launches: bool = True
    # An opbot package's operators (torch.ops.opbot_*) are the candidate's kernel, not PyTorch:
    package_ops: bool = False
    # The kernels compile on their first launch, inside the build stage's time:
    compiles_on_first_launch: bool = True

    def to_json(self) -> dict[str, Any]:
        # Absolute: the worker runs in a folder of its own.
        return {
            "reference": str(self.reference.resolve()),
            "candidate": str(self.candidate.resolve()),
            "backend": self.backend,
            "cases": [case.to_json() for case in self.cases],
            "init_args": self.init_args,
            "tolerances": {name: asdict(tol) for name, tol in self.tolerances.items()},
            "derive_tail_cases": self.derive_tail_cases,
            "perf_case": self.perf_case.to_json() if self.perf_case else None,
            "time_it": self.time_it,
            "expects_kernel_launches": self.expects_kernel_launches,
            "package_ops": self.package_ops,
            "compiles_on_first_launch": self.compiles_on_first_launch,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> VerifyRequest:
        """The request to_json wrote (what stays in the parent, such as the seed, does not
        travel); a missing field takes its default."""
        perf = data.get("perf_case")
        init_args = data.get("init_args")
        return cls(
            reference=Path(data["reference"]), candidate=Path(data["candidate"]),
            backend=data["backend"] if data.get("backend") in BACKENDS else "triton",
            cases=[CaseSpec.from_json(item) for item in data.get("cases") or []],
            init_args=list(init_args) if isinstance(init_args, list) else None,
            tolerances={name: Tolerance(atol=float(tol["atol"]), rtol=float(tol["rtol"]))
                        for name, tol in (data.get("tolerances") or {}).items()},
            derive_tail_cases=bool(data.get("derive_tail_cases", True)),
            perf_case=CaseSpec.from_json(perf) if isinstance(perf, dict) else None,
            time_it=bool(data.get("time_it", False)),
            expects_kernel_launches=bool(data.get("expects_kernel_launches", True)),
            package_ops=bool(data.get("package_ops", False)),
            compiles_on_first_launch=bool(data.get("compiles_on_first_launch", True)),
        )


@dataclass(frozen=True)
class Availability:
    """Whether a backend can run here, and if not, why."""

    available: bool
    device: str
    reason: str = ""


class Backend(Protocol):
    """A place where candidates are built, checked and timed (Triton, Ascend C)."""

    @property
    def name(self) -> BackendName:
        """Which backend this is (read-only, so a class may narrow it to its own name)."""
        ...

    def availability(self) -> Availability:
        """Say whether this backend can run candidates on this machine; never raise."""
        ...

    def verify(self, request: VerifyRequest) -> VerifyResult:
        """Load, build, check (and time, when asked) the candidate against the reference."""
        ...
