"""Timing by the book (issue 16): the methods by name, the spread and the re-measuring
policy, the clock note, the reference's choice of shapes and baselines, and the judge's
reading of the workers' timing answers."""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from runners.base import VerifyRequest
from runners.harness import timing
from runners.harness.inputs import PreparedCase
from runners.harness.reference_worker import Baselines, ReferenceJob, ReferenceSession
from runners.harness.timing import (
    BenchPlan,
    TimingStats,
    bench,
    clock_note,
    max_spread_from,
    measure,
    npu_clock_note,
    nvidia_clock_note,
    plan_for,
    quantiles,
)
from runners.verify import Judge, _read_figures
from tests.support import DATA

# -- spread and re-measuring ------------------------------------------------------------


def _stats(samples: list[float]) -> TimingStats:
    return TimingStats.from_samples(samples, warmup=0, method="do_bench", timer="injected")


def _runs(*sequences: list[float]) -> tuple[Callable[[], TimingStats], list[int]]:
    """A timing method that returns the given sample sequences in turn, counting its runs."""
    remaining: Iterator[list[float]] = iter(sequences)
    calls = [0]

    def run() -> TimingStats:
        calls[0] += 1
        return _stats(next(remaining))

    return run, calls


NARROW = [1.00, 1.01, 1.02, 1.01, 1.00, 1.02]  # spread 2%
WIDE = [1.0, 2.0, 1.0, 2.0, 1.0, 2.0]  # spread 100%
WIDER = [1.0, 3.0, 1.0, 3.0, 1.0, 3.0]


def test_quantiles_interpolate_like_do_bench() -> None:
    # do_bench's rule: position q * (n - 1) between the sorted samples.
    assert quantiles([4.0, 1.0, 3.0, 2.0, 5.0], [0.5, 0.2, 0.8]) == pytest.approx(
        [3.0, 1.8, 4.2])


def test_stats_carry_n_the_median_and_the_spread() -> None:
    stats = TimingStats.from_samples([2.0, 1.0, 3.0, 4.0, 5.0], warmup=7, method="wall_clock",
                                     timer="t")
    assert (stats.trials, stats.warmup, stats.median_ms, stats.min_ms, stats.max_ms) == (
        5, 7, 3.0, 1.0, 5.0)
    assert stats.spread == pytest.approx((4.2 - 1.8) / 3.0)


def test_a_zero_median_has_an_infinite_spread() -> None:
    assert _stats([0.0, 0.0, 0.0]).spread == math.inf


def test_no_samples_is_an_error() -> None:
    with pytest.raises(ValueError, match="no samples"):
        _stats([])


def test_a_narrow_run_is_kept_as_it_is() -> None:
    run, calls = _runs(NARROW, WIDE)
    measurement = measure(run, max_spread=0.10)
    assert calls[0] == 1
    assert (measurement.remeasured, measurement.too_wide) == (0, False)


def test_a_wide_run_is_measured_again_until_narrow() -> None:
    run, calls = _runs(WIDE, WIDER, NARROW)
    measurement = measure(run, max_spread=0.10)
    assert calls[0] == 3
    assert measurement.remeasured == 2
    assert measurement.too_wide is False
    assert measurement.stats.spread < 0.10


def test_still_too_wide_after_two_more_keeps_the_narrowest_and_says_so() -> None:
    run, calls = _runs(WIDER, WIDE, WIDER, NARROW)
    measurement = measure(run, max_spread=0.10)
    assert calls[0] == 3  # the first run and at most 2 more
    assert measurement.remeasured == 2
    assert measurement.too_wide is True
    assert measurement.stats.p80_ms == pytest.approx(_stats(WIDE).p80_ms)


def test_the_cpu_plan_never_measures_again() -> None:
    plan = plan_for("cpu")
    assert (plan.method, plan.trials, plan.warmup, plan.remeasures) == ("wall_clock", 2, 0, 0)
    run, calls = _runs(WIDER, NARROW)
    measurement = measure(run, max_spread=0.10, remeasures=plan.remeasures)
    assert calls[0] == 1
    assert (measurement.remeasured, measurement.too_wide) == (0, True)


def test_devices_get_their_own_methods() -> None:
    assert plan_for("npu").method == "npu_events"
    assert plan_for("npu").remeasures == 2
    # Triton is installed here, so CUDA would time with its do_bench.
    assert plan_for("cuda").method == "do_bench"


@pytest.mark.parametrize("value", [None, "0.2", float("nan"), -0.1, 0, True])
def test_an_unusable_threshold_takes_the_default(value: Any) -> None:
    assert max_spread_from(value) == timing.DEFAULT_MAX_SPREAD


def test_a_usable_threshold_is_kept() -> None:
    assert max_spread_from(0.25) == 0.25


# -- the methods ------------------------------------------------------------------------


def test_wall_clock_counts_warmup_and_trials() -> None:
    calls: list[int] = []
    stats = bench(lambda: calls.append(1), "cpu", BenchPlan("wall_clock", trials=3, warmup=2))
    assert len(calls) == 5
    assert (stats.trials, stats.warmup, stats.method) == (3, 2, "wall_clock")
    assert 0 <= stats.min_ms <= stats.median_ms <= stats.max_ms


def test_an_unknown_method_fails_loudly() -> None:
    with pytest.raises(ValueError, match="unsupported timing method"):
        bench(lambda: None, "cpu", BenchPlan(cast(Any, "stopwatch")))


def test_events_need_a_device() -> None:
    with pytest.raises(ValueError, match="no event timer"):
        bench(lambda: None, "cpu", BenchPlan("device_events", trials=2, warmup=0))


def test_do_bench_warmup_is_the_calls_it_made_beyond_its_samples() -> None:
    """do_bench picks its own counts from time budgets; the wrapper reads N from its samples
    and the warm-up from the calls it saw (an injected do_bench with do_bench's contract)."""
    seen: dict[str, Any] = {}

    def do_bench(fn: Callable[[], None], *, warmup: int, rep: int,
                 return_mode: str) -> list[float]:
        seen.update(warmup=warmup, rep=rep, return_mode=return_mode)
        for _ in range(9):  # first call, estimate and warm-up
            fn()
        samples = [1.0, 1.1, 0.9, 1.0]
        for _ in samples:
            fn()
        return samples

    calls: list[int] = []
    stats = timing._bench_with_triton(do_bench, lambda: calls.append(1), BenchPlan("do_bench"),
                                      "do_bench", "triton.testing.do_bench")
    assert seen == {"warmup": 25, "rep": 100, "return_mode": "all"}
    assert (stats.trials, stats.warmup, len(calls)) == (4, 9, 13)
    assert stats.median_ms == pytest.approx(1.0)


# -- clocks -----------------------------------------------------------------------------


def test_nvidia_smi_csv_becomes_a_sentence() -> None:
    note = nvidia_clock_note("NVIDIA H100 80GB HBM3, 1755 MHz, 1980 MHz, 34\n")
    assert note == "NVIDIA H100 80GB HBM3: SM clock 1755 MHz (max 1980 MHz), 34 C"


def test_unexpected_nvidia_smi_output_is_said_unreadable() -> None:
    assert nvidia_clock_note("garbage").startswith("clocks not readable")


def test_a_missing_or_forbidden_tool_says_clocks_not_readable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda name: None)
    assert clock_note("cuda") == "clocks not readable (nvidia-smi not found)"
    assert clock_note("npu") == "clocks not readable (npu-smi not found)"
    monkeypatch.setattr("shutil.which", lambda name: f"/bin/{name}")

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError("the sandbox says no")

    assert clock_note("cuda", runner=forbidden) == "clocks not readable (nvidia-smi: " \
        "PermissionError)"


def test_npu_smi_info_gives_the_first_chips_temperature() -> None:
    text = (DATA / "ascend/own/install/npu-smi-24.1.rc3-910B2-8npu-idle.txt").read_text(
        encoding="utf-8")
    note = npu_clock_note(text)
    assert note.startswith("910B2: clocks not shown by npu-smi info")
    assert "41 C" in note


def test_the_cpu_has_no_clocks_to_read() -> None:
    assert clock_note("cpu") == "CPU interpreter: no device clocks"


# -- the reference's shapes and baselines -------------------------------------------------


def _session(device: str, cases: dict[str, list[int]]) -> ReferenceSession:
    import torch

    job = ReferenceJob(reference=Path("reference.py"), cases=[], init_args=[], tolerances={},
                       derive_tail_cases=True, perf_case=None, seed=1, init_seed=2)
    session = ReferenceSession(job=job, device=device)
    session.cases = {name: PreparedCase(name=name, seed=1, inputs=[torch.empty(shape)])
                     for name, shape in cases.items()}
    return session


CASES = {"main": [512, 1024], "tail-1": [384, 1023], "tail-1-fresh": [384, 1023],
         "tail-2": [256, 1024], "strided": [64, 1024], "tail-3": [128, 700],
         "tiny": [16, 16], "big-2": [300, 1000]}


def test_a_device_times_up_to_three_more_large_shapes() -> None:
    session = _session("cuda", CASES)
    session.cases["tail-1-fresh"].repeat_of = "tail-1"
    baselines = Baselines(session)
    chosen = baselines.more_cases(session.cases["main"])
    # Largest first; no repeat, no strided view, nothing under 64K elements, at most 3.
    assert chosen == ["tail-1", "big-2", "tail-2"]


def test_the_cpu_interpreter_times_the_perf_case_only() -> None:
    session = _session("cpu", CASES)
    assert Baselines(session).more_cases(session.cases["main"]) == []


def test_torch_compile_is_not_attempted_on_the_cpu() -> None:
    session = _session("cpu", CASES)
    compiled, note = Baselines(session)._compiled([], plan_for("cpu"), 0.1, None)
    assert compiled is None
    assert note.startswith("torch.compile not attempted on the CPU interpreter")


def test_torch_compile_is_skipped_when_the_deadline_is_near() -> None:
    session = _session("cuda", CASES)
    baselines = Baselines(session)
    compiled, note = baselines._compiled([], plan_for("cuda"), 0.1, budget_s=20.0)
    assert compiled is None
    assert note.startswith("torch.compile skipped: 20 s left")
    assert baselines.compiled is None  # nothing was compiled


# -- the judge reads every figure ----------------------------------------------------------


HONEST = {"kind": "timed", "median_ms": 1.0, "min_ms": 0.9, "max_ms": 1.3, "p20_ms": 0.95,
          "p80_ms": 1.1, "trials": 80, "warmup": 30, "remeasured": 0, "too_wide": False}


def test_an_honest_answer_is_read() -> None:
    figures = _read_figures(dict(HONEST), limit_ms=300_000.0)
    assert not isinstance(figures, str)
    assert figures.spread == pytest.approx(0.15)


@pytest.mark.parametrize(("change", "why"), [
    ({"median_ms": 0.0}, "not a plausible time"),
    ({"min_ms": float("nan")}, "not a plausible time"),
    ({"max_ms": float("inf")}, "not a plausible time"),
    ({"p20_ms": -1.0}, "not a plausible time"),
    ({"median_ms": 1e-9}, "not a plausible time"),
    ({"max_ms": 1e12}, "not a plausible time"),
    ({"median_ms": "1.0"}, "not a number"),
    ({"median_ms": True}, "not a number"),
    ({"min_ms": 1.2}, "does not hold"),
    ({"trials": 0}, "plausible count"),
    ({"trials": 2.5}, "plausible count"),
    ({"remeasured": 9}, "re-measure count"),
    ({"too_wide": "no"}, "true or false"),
    ({"kind": "failed"}, "answer was 'failed'"),
])
def test_hostile_figures_are_refused(change: dict[str, Any], why: str) -> None:
    assert why in str(_read_figures({**HONEST, **change}, limit_ms=300_000.0))


def _judge(**request: Any) -> Judge:
    """A judge with no workers: `_timing` only reads answers already received."""
    verify = VerifyRequest(reference=Path("r.py"), candidate=Path("c.py"), time_it=True,
                           **request)
    return Judge(verify, seed=1, reference=cast(Any, None), candidate=cast(Any, None),
                 device="cuda (NVIDIA H100)")


REFERENCE_ROW = {**HONEST, "median_ms": 2.0, "p80_ms": 2.1, "max_ms": 2.2, "case": "main",
                 "method": "do_bench", "timer": "triton.testing.do_bench", "device_name": "H100",
                 "clock_note": "H100: SM clock 1755 MHz", "compile": {**HONEST, "median_ms": 1.5,
                                                                      "p80_ms": 1.6,
                                                                      "max_ms": 1.7},
                 "compile_note": "torch.compile (dynamic=False)", "input_shapes": [[4, 8]],
                 "input_dtypes": ["float32"], "output_shapes": [[4, 8]],
                 "output_dtypes": ["float32"], "bytes_moved": 256, "flops": 32}


def test_the_judge_builds_rows_and_the_baselines_side_by_side() -> None:
    judge = _judge(max_spread=0.2)
    second = {**REFERENCE_ROW, "case": "tail-1", "input_shapes": [[3, 8]]}
    result = judge._timing({"shapes": [[4, 8]]}, [
        ({**HONEST, "remeasured": 1}, dict(REFERENCE_ROW)), (dict(HONEST), second)], 1.0)
    assert result is not None
    assert (result.method, result.trials, result.warmup, result.remeasured) == (
        "do_bench", 80, 30, 1)
    assert (result.candidate_ms, result.reference_ms, result.compile_ms) == (1.0, 2.0, 1.5)
    assert result.spread == pytest.approx(0.15)
    assert [row.name for row in result.rows] == ["main", "tail-1"]
    assert result.rows[1].input_shapes == [[3, 8]]
    assert (result.rows[0].bytes_moved, result.rows[0].flops) == (256, 32)
    assert "median of 80 samples after 30 warm-up calls, spread 15.0%" in result.note
    assert "limit 20%" in result.note
    assert "1 run(s) rejected as too noisy" in result.note


def test_a_spread_too_wide_is_said_whatever_the_worker_claims() -> None:
    judge = _judge(max_spread=0.10)
    claimed_narrow = {**HONEST, "too_wide": False}  # its figures give a 15% spread
    result = judge._timing({"shapes": [[4, 8]]}, [(claimed_narrow, dict(REFERENCE_ROW))], 1.0)
    assert result is not None
    assert "1 shape(s) still wider than the limit after re-measuring" in result.note


def test_one_hostile_row_refuses_the_whole_timing() -> None:
    judge = _judge()
    result = judge._timing({"shapes": [[4, 8]]}, [
        (dict(HONEST), dict(REFERENCE_ROW)), ({**HONEST, "median_ms": 0.0}, REFERENCE_ROW)], 1.0)
    assert result is None
    [stage] = judge.stages
    assert not stage.ok
    assert stage.note.startswith("the candidate's timing was refused: median_ms = 0.0 ms")
    assert any(warning.startswith("timing: the candidate's timing was refused")
               for warning in judge.warnings)


def test_a_later_shape_the_reference_could_not_time_has_no_row() -> None:
    judge = _judge()
    result = judge._timing({"shapes": [[4, 8]]}, [
        (dict(HONEST), dict(REFERENCE_ROW)),
        (dict(HONEST), {"kind": "untimed", "reason": "out of memory"})], 1.0)
    assert result is not None
    assert [row.name for row in result.rows] == ["main"]


def test_a_compile_answer_that_does_not_add_up_is_dropped() -> None:
    judge = _judge()
    broken = {**REFERENCE_ROW, "compile": {**HONEST, "median_ms": -3.0}}
    result = judge._timing({"shapes": [[4, 8]]}, [(dict(HONEST), broken)], 1.0)
    assert result is not None
    assert result.compile_ms is None
    assert result.rows[0].compile_ms is None


# -- on a device --------------------------------------------------------------------------


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def _npu() -> bool:
    try:
        import torch
        import torch_npu  # noqa: F401

        return bool(getattr(torch, "npu").is_available())  # torch_npu adds torch.npu
    except Exception:  # noqa: BLE001 - torch_npu without CANN fails in many ways
        return False


needs_cuda = pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU (torch.cuda "
                                ".is_available() is False here)")
needs_npu = pytest.mark.skipif(not _npu(), reason="needs an Ascend NPU with torch_npu")


@pytest.mark.gpu
@needs_cuda
def test_do_bench_times_a_cuda_op_with_its_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    # tests/conftest.py sets TRITON_INTERPRET=1 for the CPU suite; do_bench needs the GPU's.
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    x = torch.randn(4096, 4096, device="cuda")
    stats = bench(lambda: torch.relu(x), "cuda", plan_for("cuda"))
    # do_bench ran for ~100 ms: many samples, a warm-up beyond its first call, and times
    # a few tens of microseconds at this size (64 MiB read and written on any datacenter GPU).
    assert stats.method == "do_bench"
    assert stats.trials > 10
    assert stats.warmup > 1
    assert 0.001 < stats.median_ms < 10.0
    assert stats.min_ms <= stats.p20_ms <= stats.median_ms <= stats.p80_ms <= stats.max_ms


@pytest.mark.gpu
@needs_cuda
def test_nvidia_smi_is_read_or_said_unreadable() -> None:
    note = clock_note("cuda")
    if shutil.which("nvidia-smi") is None:
        assert note.startswith("clocks not readable")
    else:
        assert "SM clock" in note
        assert note.endswith(" C")


@pytest.mark.npu
@needs_npu
def test_npu_events_time_a_torch_npu_op() -> None:
    import torch

    x = torch.randn(4096, 4096).to("npu")
    stats = bench(lambda: torch.relu(x), "npu", plan_for("npu"))
    assert stats.method == "npu_events"
    assert stats.trials >= 30
    assert 0.001 < stats.median_ms < 50.0
