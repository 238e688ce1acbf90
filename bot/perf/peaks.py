"""Published peaks of the devices opbot times on, each with where the figure comes from.

FLOP/s are dense (NVIDIA's datasheets print the tensor-core figures "with sparsity", twice
the dense rate; the table holds half of those). Memory is the HBM's (or GDDR's) bandwidth
in GB/s. A figure nobody publishes stays None: the report then shows no percentage rather
than a guess, and an operator who knows the figure sets it in the policy (`perf.peaks`),
which takes precedence over this table.

Huawei publishes no per-chip datasheet for the Ascend 910B variants (910B1..910B4): its
public figure is the overall one for the Ascend 910 (256 TFLOP/s FP16 at the 2019 launch),
and third-party figures for the variants disagree with each other. The 910B rows carry that
overall figure, marked as such, and no memory bandwidth.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

# FLOP peaks by the dtype they apply to. "tfloat32" is float32 on tensor cores (what a
# Triton tl.dot of float32 inputs uses by default); "float32" the plain FP32 rate.
PEAK_DTYPES: tuple[str, ...] = ("float32", "tfloat32", "float16", "bfloat16")


@dataclass(frozen=True)
class DevicePeaks:
    """One device's published peaks and their source."""

    device: str  # as the vendor names it, e.g. "NVIDIA H100 SXM5 80GB"
    memory_gbps: float | None
    tflops: Mapping[str, float] = field(default_factory=dict)  # dense TFLOP/s by dtype
    source: str = ""  # datasheet name and URL
    note: str = ""  # e.g. that a figure is the vendor's overall one, not this variant's

    def flops_peak(self, dtype: str) -> float | None:
        return self.tflops.get(dtype)


@dataclass(frozen=True)
class PeakLookup:
    """The peaks found for a device name, or why there are none."""

    peaks: DevicePeaks | None
    reason: str = ""
    overridden: bool = False  # taken from the policy's perf.peaks


_H100_SHEET = ("NVIDIA H100 Tensor Core GPU datasheet, "
               "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet")
_H200_SHEET = ("NVIDIA H200 Tensor Core GPU product page and datasheet, "
               "https://www.nvidia.com/en-us/data-center/h200/")
_A100_SHEET = ("NVIDIA A100 Tensor Core GPU datasheet, "
               "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
               "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf")
_L40S_SHEET = ("NVIDIA L40S GPU datasheet, https://www.nvidia.com/en-us/data-center/l40s/")
_ASCEND_910 = ("Huawei, \"Huawei launches Ascend 910, the world's most powerful AI "
               "processor\" (2019), https://www.huawei.com/en/news/2019/8/"
               "huawei-ascend-910-most-powerful-ai-processor")
_ASCEND_NOTE = ("the vendor's overall Ascend 910 figure (FP16 only), not this variant's; "
                "no public memory bandwidth")


def _nvidia(device: str, fp32: float, tf32: float, half: float, gbps: float, *,
            source: str) -> DevicePeaks:
    """An NVIDIA row: FP32, and the dense TF32 and FP16/BF16 tensor-core rates."""
    return DevicePeaks(device=device, memory_gbps=gbps, source=source,
                       tflops={"float32": fp32, "tfloat32": tf32, "float16": half,
                               "bfloat16": half})


def _ascend(variant: str) -> DevicePeaks:
    return DevicePeaks(device=f"Huawei Ascend {variant}", memory_gbps=None,
                       tflops={"float16": 256.0}, source=_ASCEND_910, note=_ASCEND_NOTE)


# (keys, peaks): a device name matches a row when it holds every key (compared without
# case, spaces, dashes or underscores); the row with the most keys wins, so "H100 PCIe"
# beats plain "H100". Names as torch reports them: "NVIDIA H100 80GB HBM3",
# "NVIDIA A100-SXM4-40GB", "NVIDIA A100 80GB PCIe", "NVIDIA L40S", "Ascend910B3".
_TABLE: tuple[tuple[tuple[str, ...], DevicePeaks], ...] = (
    (("h100",), _nvidia("NVIDIA H100 SXM5 80GB", 67.0, 494.5, 989.5, 3350.0, source=_H100_SHEET)),
    (("h100", "pcie"), _nvidia("NVIDIA H100 PCIe 80GB", 51.0, 378.0, 756.5, 2000.0,
                               source=_H100_SHEET)),
    (("h100", "nvl"), _nvidia("NVIDIA H100 NVL 94GB", 60.0, 417.5, 835.5, 3900.0,
                              source=_H100_SHEET)),
    (("h200",), _nvidia("NVIDIA H200 SXM 141GB", 67.0, 494.5, 989.5, 4800.0, source=_H200_SHEET)),
    (("h200", "nvl"), _nvidia("NVIDIA H200 NVL 141GB", 60.0, 417.5, 835.5, 4800.0,
                              source=_H200_SHEET)),
    (("a100",), _nvidia("NVIDIA A100 SXM4 40GB", 19.5, 156.0, 312.0, 1555.0, source=_A100_SHEET)),
    (("a100", "80gb"), _nvidia("NVIDIA A100 SXM4 80GB", 19.5, 156.0, 312.0, 2039.0,
                               source=_A100_SHEET)),
    (("a100", "pcie"), _nvidia("NVIDIA A100 PCIe 40GB", 19.5, 156.0, 312.0, 1555.0,
                               source=_A100_SHEET)),
    (("a100", "80gb", "pcie"), _nvidia("NVIDIA A100 PCIe 80GB", 19.5, 156.0, 312.0, 1935.0,
                                       source=_A100_SHEET)),
    (("l40s",), _nvidia("NVIDIA L40S", 91.6, 183.0, 362.05, 864.0, source=_L40S_SHEET)),
    (("ascend910b",), _ascend("910B")),
    *((("ascend910b", f"910b{number}"), _ascend(f"910B{number}")) for number in range(1, 5)),
)


def _normalized(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name).lower()


def _best_row(name: str) -> DevicePeaks | None:
    normalized = _normalized(name)
    matches = [(len(keys), peaks) for keys, peaks in _TABLE
               if all(key in normalized for key in keys)]
    return max(matches, key=lambda match: match[0])[1] if matches else None


def lookup_peaks(device_name: str,
                 overrides: Mapping[str, DevicePeaks] | None = None) -> PeakLookup:
    """The peaks of the device torch names `device_name`. A policy override whose key is a
    substring of the name (without case) comes first; the longest such key wins."""
    name = device_name.strip()
    if not name:
        return PeakLookup(None, "the device did not report its name")
    lowered = name.lower()
    chosen = [key for key in (overrides or {}) if key and key.lower() in lowered]
    if chosen and overrides is not None:
        return PeakLookup(overrides[max(chosen, key=len)], overridden=True)
    peaks = _best_row(name)
    if peaks is None:
        return PeakLookup(None, f"no published peaks for {name!r} in opbot's table; "
                                "set them in the policy's perf.peaks")
    return PeakLookup(peaks)

