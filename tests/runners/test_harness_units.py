"""Unit tests of the harness's pieces: comparison, input cases, run-time guard, loading."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from runners.base import CaseSpec, InputCase, Tolerance
from runners.harness.compare import Comparison, compare_output, would_pass_as_zeros
from runners.harness.guard import ForwardGuard, mutated_inputs, snapshot
from runners.harness.inputs import derive_shapes, integers_in, make_tensor, spec_cases
from runners.harness.loading import UserCodeError, as_user_error, load_module
from runners.harness.tensors import to_wire

FP32 = Tolerance(atol=1e-5, rtol=1.3e-6)


def compare_tensor(expected: torch.Tensor, actual: torch.Tensor, *, tolerance: Tolerance,
                   truth: torch.Tensor | None, case: str, index: int) -> Comparison:
    """The judge's comparison, fed as the workers feed it: tensors in the wire format."""
    return compare_output(to_wire(expected), to_wire(actual),
                          truth=None if truth is None else to_wire(truth),
                          tolerance=tolerance, case=case, index=index)


def _compare(expected: torch.Tensor, actual: torch.Tensor,
             truth: torch.Tensor | None = None, tolerance: Tolerance = FP32) -> list[str]:
    result = compare_tensor(expected, actual, tolerance=tolerance, truth=truth,
                            case="c", index=0)
    return [failure.check for failure in result.failures]


def test_identical_outputs_pass() -> None:
    values = torch.randn(10, 7)
    assert _compare(values, values.clone()) == []


@pytest.mark.parametrize(("actual", "check"), [
    (torch.zeros(3, 4), "values"),
    (torch.ones(4, 3), "shape"),
    (torch.ones(3, 4, dtype=torch.float64), "dtype"),
    (torch.full((3, 4), float("nan")), "nan_inf"),
])
def test_wrong_outputs_name_their_check(actual: torch.Tensor, check: str) -> None:
    assert _compare(torch.ones(3, 4), actual) == [check]


def test_nan_in_the_same_places_passes() -> None:
    expected = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    assert _compare(expected, expected.clone()) == []
    assert _compare(expected, torch.tensor([1.0, 2.0, float("inf"), -float("inf")])) == [
        "nan_inf"]


def test_value_failures_carry_numbers_and_positions() -> None:
    expected = torch.zeros(4, 130)
    actual = expected.clone()
    actual[:, 128:] = 1.0  # a missing tail
    result = compare_tensor(expected, actual, tolerance=FP32, truth=None, case="tail",
                            index=0)
    details = result.failures[0].details
    assert details["mismatches"] == 8
    assert details["max_abs_err"] == 1.0
    assert details["mismatch_index_ranges"] == [[0, 3, 4], [128, 129, 130]]
    assert details["first_mismatches"][0] == {"index": [0, 128], "expected": 0.0, "actual": 1.0}


def test_accumulation_order_is_forgiven_but_half_precision_is_not() -> None:
    """Judged against float64 truth: as accurate as the reference passes, fp16 fails."""
    generator = torch.Generator().manual_seed(0)
    left = torch.randn(64, 4096, generator=generator)
    right = torch.randn(4096, 64, generator=generator)
    expected = left @ right
    truth = left.double() @ right.double()
    reordered = (left.double() @ right.double()).float()  # more accurate than the reference
    assert _compare(expected, reordered, truth) == []
    shortcut = (left.half() @ right.half()).float()
    assert _compare(expected, shortcut, truth) == ["values"]
    assert _compare(expected, torch.zeros_like(expected), truth) == ["values"]


def test_integer_outputs_must_match_exactly() -> None:
    expected = torch.tensor([1, 2, 3])
    assert _compare(expected, expected.clone()) == []
    assert _compare(expected, torch.tensor([1, 2, 4])) == ["values"]


def test_low_signal_detection() -> None:
    assert would_pass_as_zeros(torch.full((10,), 1e-7).numpy(), FP32)
    assert not would_pass_as_zeros(torch.randn(10).numpy(), FP32)
    assert not would_pass_as_zeros(torch.tensor([1, 2]).numpy(), FP32)


def test_derived_shapes_keep_equal_sizes_equal_and_fixed_sizes_fixed() -> None:
    shapes = [[128, 512], [512, 64], [64]]
    derived = derive_shapes(shapes, 4)
    assert derived[0][1] == derived[1][0]  # matmul K stays K
    assert derived[1][1] == derived[2][0]  # bias stays the width
    assert all(size % 2 == 1 for shape in derived for size in shape)
    assert derive_shapes(shapes, 4, fixed={512})[0][1] == 512
    assert derive_shapes(shapes, 4, only_first_dim=True) == [[33, 512], [129, 64], [17]]


def test_integers_in_nested_init_args() -> None:
    assert integers_in([64, (32, 16), 1e-5, True, "x"]) == {64, 32, 16}


def test_spec_cases_add_a_fresh_repeat_of_the_smallest() -> None:
    cases = [CaseSpec("big", [InputCase("tensor", [64, 64])], 0),
             CaseSpec("small", [InputCase("tensor", [3, 5])], 1)]
    prepared = spec_cases(cases, fresh_seed=99)
    assert [case.name for case in prepared] == ["big", "small", "small-fresh"]
    assert prepared[-1].repeat_of == "small"
    assert not torch.equal(prepared[1].inputs[0], prepared[2].inputs[0])


@pytest.mark.parametrize(("init", "check"), [
    ("randn", lambda t: bool((t < 0).any())),
    ("rand", lambda t: bool((t >= 0).all())),
    ("ones", lambda t: bool((t == 1).all())),
    ("arange", lambda t: float(t.flatten()[5]) == 5.0),
])
def test_make_tensor_distributions(init: str, check: object) -> None:
    tensor = make_tensor(InputCase("tensor", [4, 8], init=init), torch.Generator().manual_seed(1))
    assert tensor.shape == (4, 8)
    assert check(tensor)  # type: ignore[operator]


def test_guard_records_torch_compute_but_not_allocation_or_views() -> None:
    guard = ForwardGuard()
    values = torch.randn(4, 4)
    with guard.watch() as computed:
        out = torch.empty_like(values)
        values.view(16).contiguous()
        _ = values.shape[0]
        torch.softmax(values, dim=0)
        values.sum()
        _ = values + 1
    assert out.shape == (4, 4)
    assert {name for name in computed if name.startswith("torch.")} == {
        "torch.softmax", "torch.sum", "torch.add"}
    assert {"aten._softmax", "aten.sum", "aten.add"} <= set(computed)
    assert not {name for name in computed if "empty" in name or "view" in name}


def test_guard_counts_launches_and_ignores_what_triton_does_inside(tmp_path: Path) -> None:
    kernel_file = tmp_path / "copy_kernel.py"
    kernel_file.write_text(
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def copy(src, dst, n, BLOCK: tl.constexpr):\n"
        "    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    tl.store(dst + offsets, tl.load(src + offsets, mask=offsets < n), "
        "mask=offsets < n)\n", encoding="utf-8")
    module = load_module(kernel_file, "copy_kernel_for_guard_test")
    guard = ForwardGuard()
    guard.install()
    source = torch.randn(100)
    target = torch.empty(100)
    with guard.watch() as computed:
        module.copy[(2,)](source, target, 100, BLOCK=64)
    assert guard.launches == 1
    assert not computed
    assert torch.equal(source, target)


def test_mutated_inputs() -> None:
    values = [torch.randn(3), 2.0, torch.tensor([float("nan")])]
    before = snapshot(values)
    assert mutated_inputs(before, values) == []
    values[0].mul_(2)
    assert mutated_inputs(before, values) == [0]


def test_errors_point_at_the_users_line(tmp_path: Path) -> None:
    candidate = tmp_path / "cand.py"
    candidate.write_text("def helper(x):\n    return x.no_such_method()\n", encoding="utf-8")
    module = load_module(candidate, "cand_for_location_test")
    with pytest.raises(AttributeError) as caught:
        module.helper(torch.ones(1))
    error = as_user_error(caught.value, candidate)
    assert error.location is not None
    assert error.location.line == 2
    assert "no_such_method" in error.location.source_line
    assert error.message.startswith("AttributeError")


def test_syntax_errors_carry_file_and_line(tmp_path: Path) -> None:
    candidate = tmp_path / "broken.py"
    candidate.write_text("x = 1\ndef f(:\n", encoding="utf-8")
    with pytest.raises(UserCodeError) as caught:
        load_module(candidate, "broken_for_test")
    assert caught.value.location is not None
    assert caught.value.location.line == 2
    assert caught.value.message.startswith("SyntaxError")


def test_triton_backend_checks_the_triton_ascend_and_cann_pair() -> None:
    from runners.triton import TritonBackend

    def versions(installed: dict[str, str]) -> object:
        return installed.get

    plain = TritonBackend(version_of=versions({}))  # type: ignore[arg-type]
    assert plain.availability().available
    good = TritonBackend(version_of=versions({"triton-ascend": "3.2.0"}),  # type: ignore[arg-type]
                         cann_version=lambda: "8.5.0")
    assert good.availability().available
    assert good.availability().device == "npu"
    bad = TritonBackend(version_of=versions({"triton-ascend": "3.2.0"}),  # type: ignore[arg-type]
                        cann_version=lambda: "9.0.0")
    verdict = bad.availability()
    assert not verdict.available
    assert "3.2.1" in verdict.reason
