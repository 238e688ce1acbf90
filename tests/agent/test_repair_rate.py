"""Issue 14: our feedback must keep naming the mistakes real models make.

A reduced set of benchmarks/repair_rate.py (`--set ci`): every mistake class injected into
one Triton kernel (relu) and into Ascend C gelu (its lint- and tiling-caught variants; the
real-header type-checked ones where the CPU model can run), judged through the workbench as
the agent loop judges a reply; each class's repair rate must not fall below
benchmarks/repair/floors.json ("ci"). A drop means the feedback stopped naming a mistake
(or a check stopped catching it): read the trial lines in the failure message.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from benchmarks.repair.mistakes import (
    ASCENDC_MUTATIONS,
    MISSING_MASK_STORE,
    TRITON_MUTATIONS,
    Mutation,
    MutationNotFound,
)
from benchmarks.repair.oracle import cues_found
from benchmarks.repair.runner import (
    Plan,
    Trial,
    ci_ascendc_plan,
    ci_triton_plan,
    run_plan,
)
from benchmarks.repair.table import below_floor, load_floors, rates, render_trials
from runners.ascendc.cpu_verify import SWITCH
from runners.warm import warm_for_this_process
from tests.support import require_cpu_model

pytestmark = pytest.mark.slow


def _assert_floors(trials: Sequence[Trial]) -> None:
    shown = render_trials(trials)
    # The oracle's repair is the verified kernel itself: failing it is a harness bug.
    assert all(trial.repaired for trial in trials if trial.named), shown
    problems = below_floor(rates(trials), load_floors("ci"))
    assert not problems, "\n".join([*problems, shown])


@pytest.fixture(autouse=True)
def _warm() -> Iterator[None]:
    """Drafts and verifications fork from this test process's warm servers, as in `opbot
    serve`, instead of a cold process each."""
    with warm_for_this_process():
        yield


def _run(plan: Plan) -> list[Trial]:
    # The undone kernel is byte for byte the verified one: reuse that verdict (CI time).
    return run_plan(plan, reverify="cached")


def test_triton_mistakes_keep_their_repair_rates() -> None:
    trials = _run(ci_triton_plan())
    assert {trial.mistake for trial in trials} == {item.mistake.key for item in
                                                   TRITON_MUTATIONS}
    _assert_floors(trials)


def test_ascendc_static_mistakes_keep_their_repair_rates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SWITCH, "0")  # lint and tiling simulator only, as without CANN
    trials = _run(ci_ascendc_plan(real_checks=False))
    assert {trial.mistake for trial in trials} == {
        "ascendc.missing_free_tensor", "ascendc.tiling_out_of_step"}
    assert all(trial.caught_by == "precheck" for trial in trials), render_trials(trials)
    _assert_floors(trials)


def test_ascendc_type_checked_mistakes_keep_their_repair_rates(
        monkeypatch: pytest.MonkeyPatch) -> None:
    require_cpu_model()
    monkeypatch.setenv(SWITCH, "1")
    # The real-header type-check is a precheck: the plan stops there (runner.py says why).
    trials = _run(ci_ascendc_plan(real_checks=True))
    assert "ascendc.half_float_mix" in {trial.mistake for trial in trials}
    _assert_floors(trials)


@pytest.mark.parametrize("mutation", [*TRITON_MUTATIONS, *ASCENDC_MUTATIONS],
                         ids=lambda item: f"{item.mistake.key}/{item.variant}")
def test_a_mutation_whose_pattern_is_missing_fails_loudly(mutation: Mutation) -> None:
    files = {"k.py": "x = 1  # nothing to mutate here\n", "t.h": "// nor here\n"}
    with pytest.raises(MutationNotFound):
        mutation.apply(files, {"kernel": "k.py", "tiling": "t.h"})


def test_values_that_differ_do_not_name_a_missing_mask() -> None:
    mutation = next(item for item in TRITON_MUTATIONS if item.mistake is MISSING_MASK_STORE)
    generic = ("Verification failed on cpu: 1 distinct problem(s).\n\n[values] case shape1 "
               "(input shapes 1000x37)\n  max abs error 3.1, max rel error 1; 12 of 37000 "
               "values outside atol=1e-05, rtol=1e-05.")
    assert cues_found(mutation, generic, ["tl.store(out_ptr + offsets, v5)"]) == ()
    tail = generic + ("\n  All mismatches of the last dim lie in indices 30..36 of 37: the "
                      "tail (a missing or wrong mask, or a grid that skips the last block).")
    assert "mask" in cues_found(mutation, tail, [])
