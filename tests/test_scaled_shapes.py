"""Real-size KernelBench references on the CPU interpreter (runners/harness/scaling.py).

The references in tests/data/kernelbench_level1/ carry KernelBench's published GPU sizes
(4096x393216 activations, 4096^3 matmuls). Their work is estimated on the meta device,
and past the budget they are verified on scaled-down shapes of the same rank and oddness,
with equal sizes kept equal; a reference whose forward fixes its sizes is answered at once.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import ModuleType

import pytest
import torch

from runners.base import CaseSpec, InputCase
from runners.harness import inputs as case_inputs
from runners.harness import scaling
from runners.harness.loading import load_module
from runners.harness.reference_worker import ReferenceJob, ReferenceSession, StopVerification
from tests.support import DATA, run_opbot

LEVEL1 = DATA / "kernelbench_level1"
SQUARE_MATMUL = LEVEL1 / "1_Square_matrix_multiplication_.py"
RELU = LEVEL1 / "19_ReLU.py"
UNSCALABLE = LEVEL1 / "unscalable_fixed_sizes.py"
RMS_NORM = LEVEL1 / "36_RMSNorm_.py"
GATHER = LEVEL1 / "gather_rows_int_indices.py"


def _module(path: Path) -> ModuleType:
    return load_module(path, f"scaled_shapes_{path.stem}")


def _plan(path: Path) -> scaling.ScalePlan | None:
    module = _module(path)
    return scaling.plan_scaling(module, scaling.meta_init_args(module),
                                scaling.meta_inputs(module))


def _written(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "reference.py"
    path.write_text(source, encoding="utf-8")
    return path


# -- sizes ----------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [4095, 393215, 129, 17])
def test_an_odd_size_stays_odd(size: int) -> None:
    for factor in (0.5, 0.1, 0.01, 1e-6):
        scaled = scaling.scaled_size(size, factor)
        assert scaled % 2 == 1
        assert scaling.SMALLEST_SCALED <= scaled <= size


@pytest.mark.parametrize("size", [1, 2, 3, 8, scaling.SMALLEST_SCALED])
def test_small_sizes_stay_as_they_are(size: int) -> None:
    assert scaling.scaled_size(size, 1e-6) == size


def test_an_even_size_stays_even_and_shrinks_by_the_factor() -> None:
    assert scaling.scaled_size(4096, 1 / 8) == 512
    assert scaling.scaled_size(393216, 1 / 32) == 12288


# -- the estimate ---------------------------------------------------------------------------


def test_a_matmul_costs_2mnk_flops_and_its_operands_and_result_in_elements() -> None:
    module = _module(LEVEL1 / "2_Standard_matrix_multiplication_.py")
    work, outputs = scaling.estimate(module, [], scaling.meta_inputs(module))
    m, k, n = 2048, 8192, 4096
    assert work.flops == 2 * m * n * k
    assert work.elements == m * k + k * n + m * n
    assert outputs == [[m, n]]


def test_an_elementwise_op_costs_its_elements_and_allocates_nothing() -> None:
    module = _module(RELU)
    started = time.monotonic()
    inputs = scaling.meta_inputs(module)  # 4096x393216: 6 GB if it were real
    work, _ = scaling.estimate(module, [], inputs)
    assert inputs[0].device.type == "meta"
    assert work.elements == 2 * 4096 * 393216
    assert work.flops == work.elements
    assert time.monotonic() - started < 10


def test_a_reference_within_the_budget_is_not_scaled(tmp_path: Path) -> None:
    path = _written(tmp_path, "import torch\n\nclass Model(torch.nn.Module):\n"
                    "    def forward(self, x):\n        return torch.relu(x)\n\n"
                    "def get_inputs():\n    return [torch.randn(64, 1000)]\n")
    assert _plan(path) is None


# -- the plans ------------------------------------------------------------------------------


def test_the_square_matmul_scales_both_operands_alike_within_budget() -> None:
    plan = _plan(SQUARE_MATMUL)
    assert plan is not None
    assert plan.after is not None
    assert plan.before is not None
    assert plan.shapes_before == [[4096, 4096], [4096, 4096]]
    (a, b) = plan.shapes_after
    assert a == b
    assert a[0] == a[1] < 4096
    assert plan.after.within_budget()
    assert not plan.before.within_budget()


def test_the_matmul_inner_dim_is_tied_and_the_ratios_kept() -> None:
    plan = _plan(LEVEL1 / "2_Standard_matrix_multiplication_.py")
    assert plan is not None
    (m, k), (k2, n) = plan.shapes_after
    assert k == k2
    assert (m * 4, k, n * 2) == (k, k, k)  # M:K:N stays 1:4:2, as 2048:8192:4096


def test_a_reduction_keeps_rank_and_oddness() -> None:
    plan = _plan(LEVEL1 / "47_Sum_reduction_over_a_dimension.py")
    assert plan is not None
    [shape] = plan.shapes_after
    assert len(shape) == 3
    assert shape[2] % 2 == 1
    assert shape[1] % 2 == 0
    assert plan.init_after == [1]  # the reduced dim is an index, not a size


def test_layer_norm_scales_its_normalized_shape_with_the_input() -> None:
    plan = _plan(LEVEL1 / "40_LayerNorm.py")
    assert plan is not None
    [shape] = plan.shapes_after
    assert plan.init_after == [tuple(shape[1:])]
    assert plan.init_before == [(64, 256, 256)]


def test_rms_norm_scales_its_feature_count_with_the_channel_dim() -> None:
    plan = _plan(LEVEL1 / "36_RMSNorm_.py")
    assert plan is not None
    [shape] = plan.shapes_after
    assert len(shape) == 4
    assert plan.init_after == [shape[1]]


@pytest.mark.parametrize("reference", ["36_RMSNorm_.py", "40_LayerNorm.py"])
def test_sizes_that_differ_stay_different_in_order_and_parity(reference: str) -> None:
    """112x64x512x512 once became 16x16x64x64: a kernel reading the batch from the feature
    dim passed."""
    plan = _plan(LEVEL1 / reference)
    assert plan is not None
    pairs = {(a, b) for before, after in zip(plan.shapes_before, plan.shapes_after, strict=True)
             for a, b in zip(before, after, strict=True)}
    assert len({a for a, _ in pairs}) == len({b for _, b in pairs}) == len(pairs)
    for a, b in pairs:
        assert b % 2 == a % 2
        assert all((a < c) == (b < d) for c, d in pairs)


def test_tail_shapes_keep_different_sizes_different() -> None:
    derived = case_inputs.derive_shapes([[18, 16, 64, 64]], 4)
    assert derived[0][0] != derived[0][1]
    assert derived[0][0] > derived[0][1]
    assert derived[0][2] == derived[0][3]  # equal sizes stay equal
    assert all(size % 2 == 1 for size in derived[0])


def test_a_module_constant_that_is_no_size_is_kept(tmp_path: Path) -> None:
    """`heads = 32` is not one of the input's sizes: scaling it would change what the
    reference computes (softmax over 8 head dims, not 128)."""
    path = _written(tmp_path, "import torch\n\nheads = 32\nbatch = 64\nseq = 4096\n"
                    "hidden = 4096\n\nclass Model(torch.nn.Module):\n"
                    "    def forward(self, x):\n        b, s, h = x.shape\n"
                    "        return x.view(b, s, heads, h // heads).transpose(1, 2).softmax(-1)\n\n"
                    "def get_inputs():\n    return [torch.randn(batch, seq, hidden)]\n")
    module = _module(path)
    plan = _plan(path)
    assert plan is not None
    with scaling.patched_constants(module, plan):
        assert module.heads == 32
        assert module.batch == plan.size(64) < 64


@pytest.mark.parametrize("forward", ["m = x.abs().max().item()\n        return x / (m + 1.0)",
                                     "return x[x > 0] * 2.0"], ids=["item", "nonzero"])
def test_a_big_reference_that_needs_real_data_is_refused_at_once(tmp_path: Path,
                                                                 forward: str) -> None:
    path = _written(tmp_path, "import torch\n\nclass Model(torch.nn.Module):\n"
                    f"    def forward(self, x):\n        {forward}\n\n"
                    "def get_inputs():\n    return [torch.randn(4096, 393216)]\n")
    started = time.monotonic()
    with pytest.raises(scaling.UnscalableError, match="cannot scale: forward needs real data"):
        scaling.plan_for_reference(_module(path), [], [])
    assert time.monotonic() - started < 10
    session = _session(path)
    with pytest.raises(StopVerification) as caught:
        session.load()
    assert "run on a device for the real sizes" in caught.value.failure.message


def test_a_small_reference_that_needs_real_data_runs_as_it_is(tmp_path: Path) -> None:
    path = _written(tmp_path, "import torch\n\nclass Model(torch.nn.Module):\n"
                    "    def forward(self, x):\n        return x[x > 0]\n\n"
                    "def get_inputs():\n    return [torch.randn(64, 64)]\n")
    assert scaling.plan_for_reference(_module(path), [], []) is None


def test_literal_integer_indices_keep_spanning_the_scaled_table() -> None:
    """randint(0, 65536) for a 65536-row table was drawn as 0/1 at scaled sizes, so a kernel
    that only blends rows 0 and 1 passed."""
    session = _session(GATHER)
    session.load()
    main = next(case for case in session.prepare() if case.name == "main")
    table, index = main.inputs
    assert index.dtype == torch.int64
    assert table.shape[0] // 2 < int(index.max()) < table.shape[0]
    assert len(torch.unique(index)) > index.numel() // 2


def test_arange_positions_are_replayed_at_the_scaled_size(tmp_path: Path) -> None:
    path = _written(tmp_path, "import torch\n\nclass Model(torch.nn.Module):\n"
                    "    def forward(self, x, table, pos):\n        return x + table[pos]\n\n"
                    "def get_inputs():\n    return [torch.randn(8192, 4096), "
                    "torch.randn(8192, 4096), torch.arange(8192)]\n")
    plan = _plan(path)
    assert plan is not None
    x, _, pos = scaling.scaled_inputs(plan, _module(path).get_inputs, torch.Generator())
    assert torch.equal(pos, torch.arange(x.shape[0]))


def test_integer_inputs_that_cannot_be_replayed_are_refused(tmp_path: Path) -> None:
    path = _written(tmp_path, "import torch\n\nclass Model(torch.nn.Module):\n"
                    "    def forward(self, t, i):\n        return t[i]\n\n"
                    "def get_inputs():\n    return [torch.randn(65536, 1024), "
                    "torch.full((262144,), 7)]\n")
    plan = _plan(path)
    assert plan is not None
    with pytest.raises(scaling.UnscalableError, match="cannot scale: get_inputs"):
        scaling.scaled_inputs(plan, _module(path).get_inputs, torch.Generator())


def test_module_constants_read_by_forward_are_scaled_with_the_inputs(tmp_path: Path) -> None:
    path = _written(tmp_path, "import torch\n\nrows = 4096\ncols = 65536\n\n"
                    "class Model(torch.nn.Module):\n    def forward(self, x):\n"
                    "        return x.reshape(rows, cols).sum(dim=1)\n\n"
                    "def get_inputs():\n    return [torch.rand(rows * cols)]\n")
    module = _module(path)
    plan = scaling.plan_scaling(module, [], scaling.meta_inputs(module))
    assert plan is not None
    assert plan.shapes_after[0][0] < 4096 * 65536
    with scaling.patched_constants(module, plan):
        assert module.rows == plan.size(4096)
    assert module.rows == 4096  # restored


def test_a_reshape_to_literal_sizes_is_unscalable(tmp_path: Path) -> None:
    path = _written(tmp_path, "import torch\n\nclass Model(torch.nn.Module):\n"
                    "    def forward(self, x):\n        return torch.relu(x).view(4096, -1)\n\n"
                    "def get_inputs():\n    return [torch.rand(4096, 65536)]\n")
    with pytest.raises(scaling.UnscalableError, match="cannot be scaled down"):
        _plan(path)


def test_a_forward_that_draws_a_fixed_size_tensor_on_its_own_is_unscalable(
        tmp_path: Path) -> None:
    path = _written(tmp_path, "import torch\n\nclass Model(torch.nn.Module):\n"
                    "    def forward(self, x):\n"
                    "        return x @ torch.randn(4096, 4096)\n\n"
                    "def get_inputs():\n    return [torch.rand(4096, 4096)]\n")
    with pytest.raises(scaling.UnscalableError, match="cannot be scaled down"):
        _plan(path)


def test_a_forward_that_makes_fixed_size_tensors_is_unscalable_at_once() -> None:
    started = time.monotonic()
    with pytest.raises(scaling.UnscalableError) as caught:
        _plan(UNSCALABLE)
    assert time.monotonic() - started < 10
    message = str(caught.value)
    assert "cannot be scaled down" in message
    assert "forward fixes sizes" in message
    assert "Run it on a device" in message


# -- the reference worker ---------------------------------------------------------------------


def _session(path: Path, device: str = "cpu", cases: list[CaseSpec] | None = None,
             ) -> ReferenceSession:
    job = ReferenceJob(reference=path, cases=cases or [], init_args=None, tolerances={},
                       derive_tail_cases=True, perf_case=None, seed=1, init_seed=2)
    return ReferenceSession(job=job, device=device)


def test_the_worker_verifies_relu_on_scaled_shapes_and_records_the_real_ones() -> None:
    session = _session(RELU)
    session.load()
    cases = session.prepare()
    main = next(case for case in cases if case.name == "main")
    assert main.shapes() == [[128, 12288]]
    assert all(case.shapes()[0][0] <= 128 for case in cases)
    assert session.perf_case().shapes() == [[128, 12288]]
    assert session.inferred is not None
    assert session.inferred["inputs"][0]["shape"] == [4096, 393216]  # the spec keeps them
    scaled = session.inferred["scaled"]
    assert scaled["from"] == [[4096, 393216]]
    assert scaled["to"] == [[128, 12288]]
    assert scaling.NOTE_SUFFIX in scaled["note"]
    assert "4096x393216 -> 128x12288" in scaled["note"]


def test_the_worker_scales_a_specs_cases_and_the_models_init_args() -> None:
    case = CaseSpec(name="shape0-float32", seed=0, inputs=[
        InputCase(kind="tensor", shape=[16, 64, 256, 256], dtype="float32")])
    session = _session(LEVEL1 / "40_LayerNorm.py", cases=[case])
    session.load()
    [prepared, *_] = session.prepare()
    [shape] = prepared.shapes()
    assert shape[0] == 16
    assert shape[1:] == [18, 64, 64]  # 64 != 16 before, so not after either
    assert session.model.ln.normalized_shape == (18, 64, 64)
    assert session.inferred is not None
    assert session.inferred["init_args"] == [[64, 256, 256]]


def test_on_a_device_the_worker_keeps_the_real_sizes() -> None:
    session = _session(UNSCALABLE, device="cuda")
    session.module = _module(UNSCALABLE)
    session._scale_for_cpu()
    assert session.scale_plan is None


def test_the_worker_stops_an_unscalable_reference_with_the_reason() -> None:
    session = _session(UNSCALABLE)
    with pytest.raises(StopVerification) as caught:
        session.load()
    assert caught.value.failure.check == "reference"
    assert "forward fixes sizes" in caught.value.failure.message


def test_scaled_inputs_come_from_get_inputs_when_it_reads_the_constants() -> None:
    module = _module(RELU)
    plan = _plan(RELU)
    assert plan is not None
    scaling.apply_to_constants(module, plan)
    torch.manual_seed(0)
    [x] = scaling.scaled_inputs(plan, module.get_inputs, torch.Generator().manual_seed(0))
    assert list(x.shape) == [128, 12288]
    assert float(x.min()) >= 0  # torch.rand, the reference's own distribution


# -- opbot generate, end to end -----------------------------------------------------------------


def _generate(reference: Path, out: Path, timeout: float) -> tuple[int, dict[str, object], str,
                                                                     float]:
    started = time.monotonic()
    run = run_opbot("generate", str(reference), "--llm", "offline", "--json", "--out",
                    str(out), timeout=timeout)
    elapsed = time.monotonic() - started
    return run.code, run.json() if run.code != 2 else {}, run.stderr, elapsed


@pytest.mark.slow
@pytest.mark.parametrize("reference", [RELU, SQUARE_MATMUL], ids=["relu", "square-matmul"])
def test_generate_answers_on_scaled_shapes_and_says_so(reference: Path, tmp_path: Path) -> None:
    code, data, stderr, elapsed = _generate(reference, tmp_path / "op", timeout=300)
    assert code == 0, stderr[-2000:]
    assert data["status"] == "passed"
    notes = [str(note) for note in data["notes"]]  # type: ignore[attr-defined]
    assert any(scaling.NOTE_SUFFIX in note for note in notes)
    perf = (tmp_path / "op" / "PERF.md").read_text(encoding="utf-8")
    assert scaling.NOTE_SUFFIX in perf
    assert elapsed < 300


def test_generate_answers_an_unscalable_reference_within_seconds(tmp_path: Path) -> None:
    code, _, stderr, elapsed = _generate(UNSCALABLE, tmp_path / "op", timeout=120)
    assert code == 2
    assert "forward fixes sizes" in stderr
    assert "Traceback" not in stderr
    assert elapsed < 60


# -- opbot verify ---------------------------------------------------------------------------------

CANDIDATES = DATA / "candidates"


@pytest.mark.slow
def test_verify_passes_a_kernel_on_scaled_shapes_and_notes_it() -> None:
    run = run_opbot("verify", str(RELU), str(CANDIDATES / "relu__good_tutorial.py"), "--json",
                    timeout=300)
    assert run.code == 0, run.stderr[-2000:]
    data = run.json()
    assert data["status"] == "passed"
    assert any(scaling.NOTE_SUFFIX in note and "4096x393216 -> 128x12288" in note
               for note in data["notes"])
    assert all(shape[0] <= 128 for case in data["cases"] for shape in case["shapes"])


@pytest.mark.slow
def test_scaled_shapes_still_catch_a_missing_tail_mask() -> None:
    run = run_opbot("verify", str(RELU), str(CANDIDATES / "relu__bad_values_no_tail_mask.py"),
                    "--json", timeout=300)
    assert run.code == 1, run.stderr[-2000:]
    failed = {reason["case"] for reason in run.json()["reasons"] if reason["check"] == "values"}
    assert "tail-1" in failed


@pytest.mark.slow
@pytest.mark.parametrize(("reference", "candidate", "check"), [
    # Its batch count read from the features: on the scaled shapes (batch 18, features 16)
    # it launches programs for rows that do not exist, stopped at their first load.
    (RMS_NORM, LEVEL1 / "36_RMSNorm__bad_batch_from_features.py", "out_of_bounds"),
    (GATHER, LEVEL1 / "gather_rows__bad_blends_rows_0_and_1.py", "values")],
    ids=["rms-norm", "gather"])
def test_scaled_shapes_still_catch_a_kernel_wrong_at_the_real_sizes(reference: Path,
                                                                      candidate: Path,
                                                                      check: str) -> None:
    run = run_opbot("verify", str(reference), str(candidate), "--json", timeout=290)
    assert run.code == 1, run.stderr[-2000:]
    verdict = run.json()
    assert verdict["status"] == "failed"
    assert check in {reason["check"] for reason in verdict["reasons"]}, verdict["reasons"]
    assert "timeout" not in {reason["check"] for reason in verdict["reasons"]}
