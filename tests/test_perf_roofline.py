"""The work a reference does (runners.harness.work), the peak table, the roofline and the
mermaid chart (bot.perf), each on hand-computed cases."""

from __future__ import annotations

import math
import re

import pytest
import torch

from bot.perf.chart import ChartBar, mermaid_chart, safe_label
from bot.perf.peaks import DevicePeaks, lookup_peaks
from bot.perf.roofline import case_dtype, roofline, roofline_row
from runners.base import TimedCase, Timing
from runners.harness.work import count_work, shape_bytes

# -- counting the work -----------------------------------------------------------------------


class MatmulModel(torch.nn.Module):
    """KernelBench level 1 style: C = A @ B."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


class SoftmaxModel(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


class ChainModel(torch.nn.Module):
    """Three elementwise ops: mul, add, relu."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * 2.0 + 1.0)


def test_matmul_counts_2mnk_and_each_tensor_once() -> None:
    m, k, n = 33, 17, 9
    work = count_work(MatmulModel(), [torch.randn(m, k), torch.randn(k, n)])
    assert work.flops == 2 * m * n * k
    assert work.by_op == {"mm": 2 * m * n * k}
    assert work.bytes_moved == (m * k + k * n + m * n) * 4
    assert work.uncounted == ()


def test_batched_matmul_counts_every_batch() -> None:
    work = count_work(MatmulModel(), [torch.randn(3, 5, 7), torch.randn(3, 7, 2)])
    assert work.flops == 2 * 3 * 5 * 2 * 7


def test_linear_adds_the_bias_and_reads_the_parameters() -> None:
    layer = torch.nn.Linear(8, 16)
    work = count_work(layer, [torch.randn(4, 8)])
    assert work.flops == 2 * 4 * 16 * 8 + 4 * 16  # matmul, then one add per output
    # input 4x8, weight 16x8, bias 16, output 4x16; float32
    assert work.bytes_moved == (4 * 8 + 16 * 8 + 16 + 4 * 16) * 4


def test_softmax_counts_five_per_element() -> None:
    work = count_work(SoftmaxModel(), [torch.randn(6, 10)])
    assert work.flops == 5 * 60
    assert work.by_op == {"_softmax": 300}
    assert work.bytes_moved == 2 * 60 * 4


def test_layer_norm_counts_five_plus_weight_and_bias() -> None:
    with_affine = count_work(torch.nn.LayerNorm(10), [torch.randn(6, 10)])
    plain = count_work(torch.nn.LayerNorm(10, elementwise_affine=False), [torch.randn(6, 10)])
    assert with_affine.flops == 7 * 60
    assert plain.flops == 5 * 60
    assert with_affine.bytes_moved == (60 + 10 + 10 + 60) * 4


def test_elementwise_chain_counts_one_per_output_element_per_op() -> None:
    work = count_work(ChainModel(), [torch.randn(5, 7).half()])
    assert work.by_op == {"mul": 35, "add": 35, "relu": 35}
    assert work.flops == 105
    assert work.bytes_moved == 2 * 35 * 2  # float16 in and out


def test_reduction_counts_one_per_input_element() -> None:
    work = count_work(lambda x: x.sum(dim=1), [torch.randn(4, 9)])
    assert work.flops == 36
    assert work.bytes_moved == (36 + 4) * 4


def test_a_tensor_passed_twice_is_read_once() -> None:
    x = torch.randn(8, 8)
    work = count_work(lambda a, b: a + b, [x, x])
    assert work.bytes_moved == 2 * 64 * 4


def test_an_op_without_a_rule_is_named_not_guessed() -> None:
    work = count_work(lambda x: torch.sort(x).values, [torch.randn(4, 4)])
    assert work.flops == 0
    assert "sort" in work.uncounted


def test_shape_bytes_and_a_bad_dtype() -> None:
    assert shape_bytes([[2, 3], [4]], ["float16", "torch.float32"]) == 12 + 16
    with pytest.raises(ValueError, match="not a torch dtype"):
        shape_bytes([[1]], ["float17"])


# -- the peak table --------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "device", "gbps", "fp16"), [
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM5 80GB", 3350.0, 989.5),
    ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe 80GB", 2000.0, 756.5),
    ("NVIDIA H100 NVL", "NVIDIA H100 NVL 94GB", 3900.0, 835.5),
    ("NVIDIA H200", "NVIDIA H200 SXM 141GB", 4800.0, 989.5),
    ("NVIDIA H200 NVL", "NVIDIA H200 NVL 141GB", 4800.0, 835.5),
    ("NVIDIA A100-SXM4-40GB", "NVIDIA A100 SXM4 40GB", 1555.0, 312.0),
    ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 SXM4 80GB", 2039.0, 312.0),
    ("NVIDIA A100-PCIE-40GB", "NVIDIA A100 PCIe 40GB", 1555.0, 312.0),
    ("NVIDIA A100 80GB PCIe", "NVIDIA A100 PCIe 80GB", 1935.0, 312.0),
    ("NVIDIA L40S", "NVIDIA L40S", 864.0, 362.05),
    ("Ascend910B3", "Huawei Ascend 910B3", None, 256.0),
    ("Ascend910B", "Huawei Ascend 910B", None, 256.0),
])
def test_peaks_by_the_name_torch_reports(name: str, device: str, gbps: float | None,
                                         fp16: float) -> None:
    found = lookup_peaks(name)
    assert found.peaks is not None
    assert found.peaks.device == device
    assert found.peaks.memory_gbps == gbps
    assert found.peaks.flops_peak("float16") == fp16
    assert "http" in found.peaks.source  # every row names where its figures come from
    assert not found.overridden


def test_ascend_rows_say_their_figure_is_the_vendors_overall_one() -> None:
    found = lookup_peaks("Ascend910B1")
    assert found.peaks is not None
    assert "overall" in found.peaks.note


@pytest.mark.parametrize("name", ["NVIDIA GeForce RTX 4090", "Tesla V100-SXM2-16GB",
                                  "Ascend310P3"])
def test_an_unknown_device_has_no_peaks_and_says_why(name: str) -> None:
    found = lookup_peaks(name)
    assert found.peaks is None
    assert name in found.reason
    assert "perf.peaks" in found.reason


def test_an_unnamed_device_has_no_peaks() -> None:
    assert lookup_peaks("  ").reason == "the device did not report its name"


def test_policy_overrides_win_and_the_longest_key_wins() -> None:
    mine = DevicePeaks("lab H100", 3000.0, {"float16": 900.0}, source="our measurement")
    other = DevicePeaks("any NVIDIA", 1.0, {}, source="x")
    found = lookup_peaks("NVIDIA H100 80GB HBM3", {"nvidia": other, "h100 80gb": mine})
    assert found.peaks is mine
    assert found.overridden
    unknown = lookup_peaks("Ascend910B4", {"ascend910b4": mine})
    assert unknown.peaks is mine


# -- the roofline ----------------------------------------------------------------------------


def _case(*, ms: float, nbytes: int | None, flops: int | None, dtype: str = "float32",
          eager: float = 1.0, compiled: float | None = None) -> TimedCase:
    return TimedCase(name="c", input_shapes=[[4096, 4096]], input_dtypes=[dtype],
                     output_shapes=[[4096, 4096]], output_dtypes=[dtype], candidate_ms=ms,
                     eager_ms=eager, compile_ms=compiled, bytes_moved=nbytes, flops=flops)


H100 = lookup_peaks("NVIDIA H100 80GB HBM3").peaks


def test_softmax_on_an_h100_is_memory_bound() -> None:
    elements = 4096 * 4096
    row = roofline_row(_case(ms=0.05, nbytes=2 * elements * 4, flops=5 * elements,
                             eager=0.1, compiled=0.075), H100)
    assert row.gbps == pytest.approx(2 * elements * 4 / 0.05e-3 / 1e9)  # 2684.35 GB/s
    assert row.tflops == pytest.approx(5 * elements / 0.05e-3 / 1e12)
    assert row.intensity == pytest.approx(0.625)
    assert row.ridge == pytest.approx(67.0e12 / 3350e9)  # FP32 peak over HBM
    assert row.bound == "memory"
    assert row.percent_of_peak == pytest.approx(2684.35456 / 3350 * 100)
    assert row.peak_used == "memory 3350 GB/s"
    assert row.speedup_eager == pytest.approx(2.0)
    assert row.speedup_compile == pytest.approx(1.5)


def test_fp16_matmul_on_an_h100_is_compute_bound() -> None:
    n = 4096
    row = roofline_row(_case(ms=0.215, nbytes=3 * n * n * 2, flops=2 * n**3,
                             dtype="float16"), H100)
    assert row.intensity == pytest.approx(2 * n**3 / (3 * n * n * 2))  # 1365.3 FLOP/B
    assert row.ridge == pytest.approx(989.5e12 / 3350e9)  # 295.4 FLOP/B
    assert row.bound == "compute"
    assert row.tflops == pytest.approx(639.25, abs=0.01)
    assert row.percent_of_peak == pytest.approx(64.60, abs=0.01)
    assert row.peak_used == "FP16 989.5 TFLOP/s"
    assert row.speedup_compile is None


def test_float32_above_the_fp32_peak_is_held_to_tf32() -> None:
    n = 4096
    row = roofline_row(_case(ms=0.5, nbytes=3 * n * n * 4, flops=2 * n**3), H100)
    assert row.tflops == pytest.approx(274.9, abs=0.1)  # far above FP32's 67
    assert row.peak_used.startswith("TF32 494.5 TFLOP/s")
    assert row.percent_of_peak == pytest.approx(274.88 / 494.5 * 100, abs=0.01)


def test_pure_data_movement_is_memory_bound_and_missing_figures_stay_missing() -> None:
    copy = roofline_row(_case(ms=0.1, nbytes=1_000_000_000, flops=0), H100)
    assert copy.bound == "memory"
    assert copy.percent_of_peak == pytest.approx(10000 / 3350 * 100)
    unknown = roofline_row(_case(ms=0.1, nbytes=None, flops=None), H100)
    assert (unknown.gbps, unknown.tflops, unknown.bound, unknown.percent_of_peak) == (
        None, None, None, None)
    no_time = roofline_row(_case(ms=0.0, nbytes=10, flops=10), H100)
    assert no_time.gbps is None
    assert no_time.speedup_eager is None


def test_without_a_memory_peak_there_is_no_ridge_and_no_percentage() -> None:
    ascend = lookup_peaks("Ascend910B3").peaks
    row = roofline_row(_case(ms=1.0, nbytes=100, flops=10_000, dtype="float16"), ascend)
    assert row.ridge is None
    assert row.bound is None
    assert row.percent_of_peak is None


def test_case_dtype_is_the_first_floating_input() -> None:
    case = TimedCase(name="c", input_shapes=[[2], [2]], input_dtypes=["int64", "torch.bfloat16"],
                     output_shapes=[[2]], output_dtypes=["bfloat16"], candidate_ms=1.0,
                     eager_ms=1.0)
    assert case_dtype(case) == "bfloat16"


def _timing(device: str, method: str, name: str = "NVIDIA H100 80GB HBM3") -> Timing:
    return Timing(device=device, shapes=[[8]], trials=10, candidate_ms=1.0,
                  candidate_min_ms=1.0, candidate_max_ms=1.0, reference_ms=1.0, speedup=1.0,
                  method=method, device_name=name,
                  rows=[_case(ms=1.0, nbytes=8, flops=8)])


def test_no_roofline_on_the_cpu_interpreter() -> None:
    assert roofline(_timing("cpu", "wall_clock")) is None
    assert roofline(_timing("cuda:0", "wall_clock")) is None


def test_a_device_roofline_names_its_source_or_why_it_has_none() -> None:
    found = roofline(_timing("cuda:0", "do_bench"))
    assert found is not None
    assert found.peak_source.startswith("NVIDIA H100 SXM5 80GB: NVIDIA H100 Tensor Core GPU")
    unknown = roofline(_timing("cuda:0", "do_bench", name="NVIDIA GeForce RTX 4090"))
    assert unknown is not None
    assert unknown.peak_source.startswith("none: no published peaks")
    assert unknown.rows[0].percent_of_peak is None


# -- the chart -------------------------------------------------------------------------------


def _block(lines: list[str]) -> str:
    return "\n".join(lines)


def test_chart_has_one_bar_line_per_series_with_side_by_side_slots() -> None:
    lines = mermaid_chart("matmul", [ChartBar("4096x4096", 0.2, 0.19, 0.192),
                                     ChartBar("1024x1024", 0.01, 0.0098, None)])
    assert lines[0] == "```mermaid"
    assert lines[1] == "xychart-beta"
    assert lines[-1] == "```"
    bars = [line.strip() for line in lines if line.strip().startswith("bar [")]
    assert bars == ["bar [0.2000, 0.0000, 0.0000, 0.0100, 0.0000, 0.0000]",
                    "bar [0.0000, 0.1900, 0.0000, 0.0000, 0.0098, 0.0000]",
                    "bar [0.0000, 0.0000, 0.1920, 0.0000, 0.0000, 0.0000]"]
    assert '"4096x4096 kernel", "4096x4096 eager", "4096x4096 compile"' in _block(lines)
    assert 'y-axis "ms" 0 --> 0.22000' in _block(lines)


HOSTILE = ['a"] \n```\nbar [1e9]', "x --> y %% comment", "`rm -rf`", "[[ ]]", "\u202eevil",
           "", "}\n%%{init: {}}%%"]


@pytest.mark.parametrize("label", HOSTILE)
def test_hostile_labels_cannot_break_the_block(label: str) -> None:
    lines = mermaid_chart(label, [ChartBar(label, 1.0, 2.0, float("nan"))])
    text = _block(lines)
    assert len(lines) == 9  # fence, header, title, x-axis, y-axis, 3 bars, fence
    assert text.count("```") == 2
    assert "%%" not in text
    assert "-->" not in text.replace('y-axis "ms" 0 -->', "")
    for line in lines[2:4]:  # title and x-axis: quoted labels of safe characters only
        for quoted in re.findall(r'"([^"]*)"', line):
            assert re.fullmatch(r"[A-Za-z0-9 ._-]+", quoted)
    assert safe_label(label)  # never empty


def test_unusable_values_become_zero_and_numbers_stay_plain() -> None:
    lines = mermaid_chart("t", [ChartBar("s", 0.00001234, float("inf"), -1.0)])
    text = _block(lines)
    assert not re.search(r"\de[-+]?\d", text)  # no exponent
    assert "inf" not in text
    assert "nan" not in text
    assert "bar [0.000012, 0.000000, 0.000000]" in text


def test_no_chart_without_any_time() -> None:
    assert mermaid_chart("t", [ChartBar("s", None, float("nan"), 0.0)]) == []
    assert mermaid_chart("t", []) == []


def test_every_chart_number_parses_as_a_plain_decimal() -> None:
    lines = mermaid_chart("t", [ChartBar(f"s{i}", 10.0**-i, 3.0 * 10.0**-i, None)
                                for i in range(6)])
    for line in lines:
        if line.strip().startswith("bar ["):
            values = line.strip()[5:-1].split(", ")
            assert all(re.fullmatch(r"\d+(\.\d+)?", value) for value in values)
            assert all(math.isfinite(float(value)) for value in values)


def test_the_chart_stays_valid_for_times_near_the_float_limit() -> None:
    """1e308 ms once made the axis `--> inf` and 300-digit bars; such times are not drawn."""
    lines = mermaid_chart("t", [ChartBar("a", 1e308, 1e308, 1.7e308), ChartBar("b", 1.0, 2.0,
                                                                               None)])
    axis = next(line for line in lines if "y-axis" in line)
    assert "inf" not in axis
    assert float(axis.rsplit(" ", 1)[1]) == pytest.approx(2.2)
    assert max(len(line) for line in lines) < 200
    assert mermaid_chart("t", [ChartBar("a", 1e308, float("nan"), 5e-324)]) == []


def test_a_400_digit_peak_is_a_policy_error_naming_the_field() -> None:
    from bot.policy import PolicyError, load_policy

    with pytest.raises(PolicyError, match=r"perf\.peaks\.H100\.memory_gbps: expected a number"):
        load_policy("perf:\n  peaks:\n    H100: {memory_gbps: 1" + "0" * 400 + "}\n")
