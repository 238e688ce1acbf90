"""The Ascend C lint: clean on good kernels (ours and a doc-shaped one), one finding per rule
on bad ones, with the line it is on."""

from __future__ import annotations

import pytest

from runners.ascendc.lint import (
    RULES,
    Finding,
    feedback,
    lint_cmake,
    lint_host,
    lint_kernel,
    lint_package,
)
from tests.support import DATA

GOLDEN = DATA / "ascendc_golden"

# The shape of the documented add_custom sample, with DataCopyPad and a tiling argument.
GOOD_KERNEL = """#include "kernel_operator.h"
constexpr int32_t BUFFER_NUM = 2;
constexpr uint32_t TILE_LENGTH = 2048;

class KernelAdd {
public:
    __aicore__ inline KernelAdd() {}
    __aicore__ inline void Init(GM_ADDR x, GM_ADDR z, uint32_t total)
    {
        xGm.SetGlobalBuffer((__gm__ float*)x, total);
        zGm.SetGlobalBuffer((__gm__ float*)z, total);
        pipe.InitBuffer(inQueueX, BUFFER_NUM, TILE_LENGTH * sizeof(float));
        pipe.InitBuffer(outQueueZ, BUFFER_NUM, TILE_LENGTH * sizeof(float));
    }
    __aicore__ inline void CopyIn(int32_t i)
    {
        AscendC::LocalTensor<float> xLocal = inQueueX.AllocTensor<float>();
        AscendC::DataCopy(xLocal, xGm[i * TILE_LENGTH], TILE_LENGTH);
        inQueueX.EnQue(xLocal);
    }
    __aicore__ inline void Compute(int32_t i)
    {
        AscendC::LocalTensor<float> xLocal = inQueueX.DeQue<float>();
        AscendC::LocalTensor<float> zLocal = outQueueZ.AllocTensor<float>();
        AscendC::Relu(zLocal, xLocal, TILE_LENGTH);
        outQueueZ.EnQue<float>(zLocal);
        inQueueX.FreeTensor(xLocal);
    }
    __aicore__ inline void CopyOut(int32_t i)
    {
        AscendC::LocalTensor<float> zLocal = outQueueZ.DeQue<float>();
        AscendC::DataCopyExtParams params{1, 100, 0, 0, 0};
        AscendC::DataCopyPad(zGm[i * TILE_LENGTH], zLocal, params);
        outQueueZ.FreeTensor(zLocal);
    }
private:
    AscendC::TPipe pipe;
    AscendC::TQue<AscendC::QuePosition::VECIN, BUFFER_NUM> inQueueX;
    AscendC::TQue<AscendC::QuePosition::VECOUT, BUFFER_NUM> outQueueZ;
    AscendC::GlobalTensor<float> xGm, zGm;
};

extern "C" __global__ __aicore__ void relu_custom(GM_ADDR x, GM_ADDR z, uint32_t total)
{
    KernelAdd op;  // DataCopy(a, b, n) in a comment is no call
    op.Init(x, z, total);
}
"""

GOOD_HOST = """#include <cstdint>
#include <torch/library.h>
#include "tiling/platform/platform_ascendc.h"
#include "relu_tiling.h"
void Launch(void* stream, uint8_t* x, uint8_t* z, uint32_t total)
{
    uint32_t blockDim = platform_ascendc::PlatformAscendCManager::GetInstance()->GetCoreNumAiv();
    relu_custom<<<blockDim, 0, stream>>>(x, z, total);
}
"""


def _rules(findings: list[Finding]) -> list[str]:
    return [item.rule for item in findings]


def test_the_doc_shaped_kernel_is_clean() -> None:
    assert lint_kernel(GOOD_KERNEL, generation="legacy") == []
    assert lint_host(GOOD_HOST, generation="asc") == []


@pytest.mark.parametrize("generation", ["legacy", "asc"])
@pytest.mark.parametrize("op", ["add", "gelu", "relu"])
def test_our_generated_packages_are_clean(generation: str, op: str) -> None:
    folder = GOLDEN / generation / op
    files = {path.relative_to(folder).as_posix(): path.read_text(encoding="utf-8")
             for path in folder.rglob("*") if path.is_file()}
    assert lint_package(files) == []


def _one(findings: list[Finding], rule: str) -> Finding:
    matching = [item for item in findings if item.rule == rule]
    assert len(matching) == 1, [item.render() for item in findings]
    return matching[0]


def _line_of(text: str, needle: str) -> int:
    return text[:text.index(needle)].count("\n") + 1


def test_an_unbalanced_queue_is_an_error() -> None:
    bad = GOOD_KERNEL.replace("        inQueueX.FreeTensor(xLocal);\n", "")
    finding = _one(lint_kernel(bad, generation="legacy"), "queue-balance")
    assert finding.severity == "error"
    assert "1 AllocTensor but 0 FreeTensor" in finding.message
    assert finding.line == _line_of(bad, "TQue<AscendC::QuePosition::VECIN")


def test_a_queue_op_in_the_wrong_stage_is_a_warning() -> None:
    bad = GOOD_KERNEL.replace(
        "        inQueueX.FreeTensor(xLocal);\n", "").replace(
        "        outQueueZ.FreeTensor(zLocal);\n    }\nprivate:",
        "        outQueueZ.FreeTensor(zLocal);\n        inQueueX.FreeTensor(xLocal);\n    }\n"
        "private:")
    finding = _one(lint_kernel(bad, generation="legacy"), "queue-stage")
    assert "inQueueX.FreeTensor (VECIN) in CopyOut" in finding.message
    assert finding.line == _line_of(bad, "inQueueX.FreeTensor")


def test_an_unused_queue_is_a_warning() -> None:
    bad = GOOD_KERNEL.replace("    AscendC::TPipe pipe;\n", "    AscendC::TPipe pipe;\n"
                              "    AscendC::TQue<AscendC::QuePosition::VECIN, 1> spare;\n")
    finding = _one(lint_kernel(bad, generation="legacy"), "queue-balance")
    assert finding.severity == "warning"
    assert "spare" in finding.message


@pytest.mark.parametrize(("header", "severity"), [
    ("inner_interface/inner_kernel_operator_intf.h", "error"),
    ("impl/kernel_operator_vec_binary_impl.h", "error"),
    ("kernel_tensor.h", "warning"),
])
def test_undocumented_headers_are_flagged(header: str, severity: str) -> None:
    bad = GOOD_KERNEL.replace('#include "kernel_operator.h"\n',
                              f'#include "kernel_operator.h"\n#include "{header}"\n')
    finding = _one(lint_kernel(bad, generation="legacy"), "header")
    assert finding.severity == severity
    assert finding.line == 2


def test_host_code_may_include_the_platform_headers_but_not_internal_ones() -> None:
    assert lint_host(GOOD_HOST, generation="asc") == []
    bad = GOOD_HOST + '#include "tiling/inner_tiling_impl.h"\n'
    assert _one(lint_host(bad, generation="asc"), "header").severity == "error"


def test_a_templated_entry_is_an_error() -> None:
    bad = GOOD_KERNEL.replace('extern "C" __global__ __aicore__ void relu_custom(',
                              'template <typename T>\n__global__ __aicore__ void relu_custom(')
    finding = _one(lint_kernel(bad, generation="legacy"), "extern-c")
    assert "template" in finding.message
    assert "8.2.RC1" in finding.message
    assert finding.line == _line_of(bad, "__global__ __aicore__ void relu_custom")


def test_an_entry_without_c_linkage_is_an_error() -> None:
    bad = GOOD_KERNEL.replace('extern "C" __global__', "__global__")
    assert "not extern" in _one(lint_kernel(bad, generation="legacy"), "extern-c").message


def test_every_expected_entry_must_exist() -> None:
    findings = lint_kernel(GOOD_KERNEL, generation="legacy",
                           expected_entries=["relu_custom", "relu_float16"])
    assert "relu_float16" in _one(findings, "extern-c").message


def test_plain_datacopy_of_a_variable_length_is_a_warning() -> None:
    copy = "xGm[i * TILE_LENGTH], TILE_LENGTH);"
    bad = GOOD_KERNEL.replace(copy, "xGm[i * TILE_LENGTH], count);")
    finding = _one(lint_kernel(bad, generation="legacy"), "datacopy-align")
    assert finding.severity == "warning"
    assert "DataCopyPad" in finding.message
    literal = GOOD_KERNEL.replace(copy, "xGm[i * TILE_LENGTH], 100);")
    assert _rules(lint_kernel(literal, generation="legacy")) == ["datacopy-align"]
    aligned = GOOD_KERNEL.replace(copy, "xGm[i * TILE_LENGTH], 256);")
    assert lint_kernel(aligned, generation="legacy") == []


@pytest.mark.parametrize("line", [
    "constexpr uint32_t BLOCK_DIM = 40;",
    "constexpr int32_t USE_CORE_NUM = 48;",
    "uint32_t numBlocks = 20;",
    "relu_custom<<<40, nullptr, stream>>>(x, z, total);",
    "ACLRT_LAUNCH_KERNEL(relu_custom)(48, stream, x, z, total);",
    "ICPU_RUN_KF(relu_custom, 8, x, z, total);",
])
def test_hard_coded_core_counts_are_errors(line: str) -> None:
    host = GOOD_HOST.replace("    relu_custom<<<blockDim, 0, stream>>>(x, z, total);",
                             f"    {line}")
    finding = _one(lint_host(host, generation="legacy"), "core-count")
    assert finding.severity == "error"
    assert "GetCoreNumAiv" in finding.message
    assert finding.line == _line_of(host, line)


def test_single_blocks_and_limits_are_no_core_counts() -> None:
    host = GOOD_HOST.replace("<<<blockDim, 0, stream>>>", "<<<1, 0, stream>>>") + \
        "constexpr uint64_t MAX_BLOCK_DIM = 65535;\n"
    assert lint_host(host, generation="asc") == []


def test_asc_qualifiers_on_a_legacy_kernel_are_errors() -> None:
    bad = GOOD_KERNEL.replace("__global__ __aicore__ void relu_custom",
                              "__global__ __vector__ void relu_custom")
    findings = [item for item in lint_kernel(bad, generation="legacy")
                if item.rule == "qualifiers"]
    assert len(findings) == 2  # no __aicore__, and an ASC-only qualifier
    assert any("__vector__ is the ASC" in item.message for item in findings)


def test_asc_kernels_need_a_kernel_type_and_gm_pointers() -> None:
    asc = GOOD_KERNEL.replace("__global__ __aicore__ void relu_custom(GM_ADDR x, GM_ADDR z,",
                              "__global__ __vector__ void relu_custom(__gm__ uint8_t* x, "
                              "__gm__ uint8_t* z,")
    assert lint_kernel(asc, generation="asc") == []
    untyped = asc.replace("__global__ __vector__", "__global__")
    assert "__global__ __vector__" in _one(lint_kernel(untyped, generation="asc"),
                                           "qualifiers").message
    legacy_spelling = GOOD_KERNEL.replace("__global__ __aicore__", "__global__ __vector__")
    finding = _one(lint_kernel(legacy_spelling, generation="asc"), "qualifiers")
    assert finding.severity == "warning"
    assert "GM_ADDR" in finding.message
    raw = asc.replace("__gm__ uint8_t* z", "uint8_t* z")
    assert "without __gm__" in _one(lint_kernel(raw, generation="asc"), "qualifiers").message


def test_the_second_launch_argument_follows_the_generation() -> None:
    legacy_style = GOOD_HOST.replace("<<<blockDim, 0, stream>>>", "<<<blockDim, nullptr, stream>>>")
    assert lint_host(legacy_style, generation="legacy") == []
    finding = _one(lint_host(legacy_style, generation="asc"), "launch-arg")
    assert finding.severity == "error"
    assert "dynUBufSize" in finding.message
    assert _one(lint_host(GOOD_HOST, generation="legacy"), "launch-arg").severity == "warning"
    aclrt = GOOD_HOST.replace("relu_custom<<<blockDim, 0, stream>>>(x, z, total);",
                              "ACLRT_LAUNCH_KERNEL(relu_custom)(blockDim, stream, x, z, total);")
    assert lint_host(aclrt, generation="legacy") == []
    assert "aclrtlaunch" in _one(lint_host(aclrt, generation="asc"), "launch-arg").message


LEGACY_CMAKE = """cmake_minimum_required(VERSION 3.16)
project(k LANGUAGES CXX)
set(RUN_MODE "npu" CACHE STRING "")
set(SOC_VERSION "Ascend910B3" CACHE STRING "")
set(ASCEND_CANN_PACKAGE_PATH "$ENV{ASCEND_HOME_PATH}")
include(${ASCEND_CANN_PACKAGE_PATH}/compiler/tikcpp/ascendc_kernel_cmake/ascendc.cmake)
ascendc_library(k SHARED k.cpp)
"""
ASC_CMAKE = """cmake_minimum_required(VERSION 3.16)
set(CMAKE_ASC_ARCHITECTURES "dav-2201" CACHE STRING "")
find_package(ASC REQUIRED)
project(k LANGUAGES ASC CXX)
add_executable(k k.asc)
target_compile_options(k PRIVATE $<$<COMPILE_LANGUAGE:ASC>:--npu-arch=${CMAKE_ASC_ARCHITECTURES}>)
if(CMAKE_ASC_RUN_MODE STREQUAL "cpu")
endif()
"""


def test_cmake_required_lines() -> None:
    assert lint_cmake(LEGACY_CMAKE, generation="legacy") == []
    assert lint_cmake(ASC_CMAKE, generation="asc") == []
    missing = lint_cmake(LEGACY_CMAKE.replace("ascendc_library(k SHARED k.cpp)\n", ""),
                         generation="legacy")
    assert [item.message for item in missing] == [
        "missing ascendc_library(...) (legacy toolchain)"]
    commented = LEGACY_CMAKE.replace("ascendc_library(k", "# ascendc_library(k")
    assert _rules(lint_cmake(commented, generation="legacy")) == ["cmake"]


def test_cmake_order_and_generation_mixups() -> None:
    late = ASC_CMAKE.replace('set(CMAKE_ASC_ARCHITECTURES "dav-2201" CACHE STRING "")\n', "") \
        .replace("project(k LANGUAGES ASC CXX)\n",
                 'project(k LANGUAGES ASC CXX)\nset(CMAKE_ASC_ARCHITECTURES "dav-2201")\n')
    messages = [item.message for item in lint_cmake(late, generation="asc")]
    assert any("before find_package(ASC)" in message for message in messages)
    mixed = lint_cmake(LEGACY_CMAKE, generation="asc")
    assert any("other toolchain generation" in item.message for item in mixed)


def test_feedback_lists_errors_first_with_places() -> None:
    findings = [Finding("datacopy-align", "warning", 3, "w", "k.cpp"),
                Finding("header", "error", 9, "e", "k.cpp")]
    assert feedback(findings).splitlines() == [
        "k.cpp:9: error [header] e", "k.cpp:3: warning [datacopy-align] w"]
    assert feedback([]) == "lint: no findings"


def test_every_rule_is_exercised_here() -> None:
    assert set(RULES) == {"queue-balance", "queue-stage", "header", "extern-c",
                          "datacopy-align", "core-count", "qualifiers", "launch-arg", "cmake"}
