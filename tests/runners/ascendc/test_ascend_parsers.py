"""The Ascend toolchain parsers on toolchain outputs (provenance in tests/data/ascend/SOURCES.md).

Three kinds of input, one set of assertions (the exact location, message, code, durations and
bottleneck: the values that could come out wrong):

* `own(...)`: fixtures this project wrote in the toolchain's formats (tests/data/ascend/own);
  they cover every parser path, so CI needs nothing else.
* `licensed(...)`: verbatim samples whose licence allows the copy (tests/data/ascend).
* `real(...)`: real, unlicensed outputs read from the shared folder beside the checkout; each
  such test is skipped, with the missing path as the reason, where that folder is absent.

The last tests check that no committed fixture and no real sample is left unused.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runners.ascendc.parsers.common import to_json
from runners.ascendc.parsers.compiler import (
    CompilerReport,
    Diagnostic,
    first_errors,
    parse_bisheng_command,
    parse_compiler_output,
    parse_compiler_report,
    parse_gnu_output,
)
from runners.ascendc.parsers.feedback import feedback_text
from runners.ascendc.parsers.msprof import (
    parse_msprof_console,
    parse_op_basic_info,
    parse_op_statistic,
    parse_op_summary,
    parse_pipe_utilization,
)
from runners.ascendc.parsers.npu_smi import (
    parse_npu_smi,
    parse_npu_smi_chip_names,
    parse_npu_smi_fields,
)
from runners.ascendc.parsers.runtime import parse_runtime_error
from runners.ascendc.parsers.triton_ascend import parse_triton_ascend_error
from tests.support import DATA, REPO
from tests.support_ascend import ASCEND, OWN, fixture, read, real_sample, shared_samples


def own(relative: str) -> str:
    return read(fixture(relative))


def licensed(relative: str) -> str:
    return read(ASCEND / relative)


def real(relative: str) -> str:
    return read(real_sample(relative))


Loader = Callable[[str], str]


def cases(table: dict[tuple[str, str], Any], folder: str) -> list[Any]:
    """pytest params for a {(kind, file): expected} table; kind picks the loader."""
    loaders: dict[str, Loader] = {"own": own, "licensed": licensed, "real": real}
    return [pytest.param(loaders[kind], f"{folder}/{name}", expected, id=f"{kind}:{name}")
            for (kind, name), expected in sorted(table.items())]


def compiled(text: str) -> CompilerReport:
    return parse_compiler_report(text)


PTO = "/home/zhongxuan/ptoas-board-monitor/runtime/runs"  # paths inside the real samples
TK = "/home/ci/src/tilekit"  # paths inside the own fixtures
TIK = "/usr/local/Ascend/ascend-toolkit/latest/compiler/tikcpp/tikcfw"
RUNS = "/home/ci/opbot-board/runs"


# -- compiler: missing headers ---------------------------------------------------------------


def test_missing_internal_header_is_located_and_explained() -> None:
    report = compiled(real("compiler/vllm-ascend-inner-interface-not-found.txt"))
    [diag] = report.diagnostics
    assert (diag.file, diag.line, diag.column) == (
        "/home/lr/vllm-ascend/csrc/kernels/pos_encoding_kernels.cpp", 22, 10)
    assert diag.severity == "error"
    assert diag.fatal
    assert diag.message == "'inner_interface/inner_kernel_operator_intf.h' file not found"
    # pip -v indented the whole log by two spaces: the echo comes back without that indent.
    assert diag.source_line == '#include "inner_interface/inner_kernel_operator_intf.h"'
    assert diag.hint is not None
    assert "internal CANN header" in diag.hint
    assert report.errors_generated == 1
    assert report.failed_targets == [
        "CMakeFiles/precompile_obj.dir/home/lr/vllm-ascend/csrc/kernels/pos_encoding_kernels.cpp.o"]


def test_own_missing_internal_header_in_an_indented_pip_log() -> None:
    report = compiled(own("compiler/missing-internal-header-pip-verbose.txt"))
    [diag] = report.diagnostics
    assert (diag.file, diag.line, diag.column) == (
        "/home/ci/opbot-ops/csrc/kernels/swiglu_kernel.cpp", 31, 10)
    assert (diag.severity, diag.fatal, diag.kind) == ("error", True, "compile")
    assert diag.message == "'impl/kernel_operator_vec_binary_impl.h' file not found"
    assert diag.source_line == '#include "impl/kernel_operator_vec_binary_impl.h"'
    assert diag.hint is not None
    assert "internal CANN header" in diag.hint
    assert report.errors_generated == 1
    assert report.failed_targets == [
        "CMakeFiles/precompile_obj.dir/home/ci/opbot-ops/csrc/kernels/swiglu_kernel.cpp.o"]


def test_own_missing_public_header_points_at_the_include_path() -> None:
    report = compiled(own("compiler/missing-public-header-make.txt"))
    [diag] = report.diagnostics
    assert (diag.file, diag.line, diag.column) == (
        "/home/ci/opbot-ops/examples/add_custom/add_custom.cpp", 10, 10)
    assert diag.message == "'kernel_operator.h' file not found"
    assert diag.hint is not None
    assert "not on the include path" in diag.hint
    assert "internal" not in diag.hint
    assert report.failed_targets == ["CMakeFiles/add_custom_npu.dir/add_custom.cpp.o"]


@pytest.mark.parametrize(("load", "name", "expected"), cases({
    ("real", "vllm-ascend-ascendc-compiler-wrapper-include-chain.txt"): (
        "/csrc/kernels/pos_encoding_kernels.cpp", 17, 6,
        "/usr/local/Ascend/ascend-toolkit/latest/tools/tikcpp/tikcfw/impl/kernel_tensor_impl.h:23"),
    ("own", "ascendc-compiler-wrapper-cut-in-headers.txt"): (
        "/csrc/kernels/rope_kernel.cpp", 12, 4, f"{TIK}/impl/kernel_operator_vec_binary_impl.h:27"),
}, "compiler"))
def test_wrapper_failure_cut_inside_headers_points_at_the_include(
        load: Loader, name: str, expected: tuple[str, int, int, str]) -> None:
    suffix, line, depth, innermost = expected
    [diag] = parse_compiler_output(load(name))
    assert diag.tool == "ascendc_compiler"
    assert diag.kind == "tool"
    assert diag.message == ("ascendc_compiler failed: Command execution failed, the returnCode "
                            "is non-zero")
    assert diag.file is not None
    assert diag.file.endswith(suffix)
    assert diag.line == line
    assert len(diag.include_chain) == depth
    assert diag.include_chain[-1] == innermost
    assert diag.hint is not None
    assert "cut off" in diag.hint


# -- compiler: no matching function, candidates ----------------------------------------------


def test_cast_intrinsics_notes_keep_their_group_and_get_the_soc_hint() -> None:
    # The excerpt starts after the error line: the first note heads the group.
    [head] = parse_compiler_output(
        real("compiler/llama-cpp-cann-no-matching-CastIntrinsicsImpl.txt"))
    assert head.severity == "note"
    assert (head.file, head.line, head.column) == (
        "/data/llama.cpp/ggml/src/ggml-cann/kernels/get_row_q4_0.cpp", 122, 9)
    assert head.source_line == "        Cast(cast_local, input_local, RoundMode::CAST_NONE, QK4_0);"
    assert [(n.line, n.column) for n in head.notes] == [(26, 24), (33, 24)]
    assert head.notes[0].message.startswith("candidate function not viable: no known conversion")
    assert head.notes[0].source_line is not None
    assert "CastIntrinsicsImpl" in head.notes[0].source_line
    assert head.hint is not None
    assert "__NPU_ARCH__" in head.hint
    assert "dav_m200" in head.hint


CAST = "compiler/no-matching-CastIntrinsicsImpl-bf16-int8.txt"


def test_own_no_matching_cast_intrinsics_groups_instantiations_and_candidates() -> None:
    report = compiled(own(CAST))
    [diag] = report.diagnostics
    assert diag.severity == "error"
    # Reported inside the CANN header; located at the user's line that instantiated it.
    assert (diag.file, diag.line, diag.column) == (
        "/home/ci/opbot-ops/csrc/kernels/quant_bf16_int8_kernel.cpp", 67, 9)
    assert diag.origin == f"{TIK}/impl/dav_c220/kernel_operator_vec_vconv_impl.h:412:5"
    assert diag.message == "no matching function for call to 'CastIntrinsicsImpl'"
    assert diag.source_line is None
    assert diag.origin_source_line == ("    CastIntrinsicsImpl((__ubuf__ T1*)dst, (__ubuf__ "
                                       "T2*)src, roundMode, calCount);")
    assert [(n.line, n.column) for n in diag.notes] == [(88, 5), (67, 9), (141, 24), (176, 24)]
    assert diag.notes[1].file == "/home/ci/opbot-ops/csrc/kernels/quant_bf16_int8_kernel.cpp"
    assert diag.notes[1].message == ("in instantiation of function template specialization "
                                     "'AscendC::Cast<signed char, __bf16>' requested here")
    assert diag.notes[3].message == (
        "candidate function not viable: no known conversion from '__ubuf__ bfloat16_t *' (aka "
        "'__ubuf__ __bf16 *') to '__ubuf__ float *' for 2nd argument")
    assert diag.hint is not None
    assert "__NPU_ARCH__" in diag.hint
    assert "(implementation for dav_c220)" in diag.hint
    assert report.errors_generated == 1


def test_own_cast_intrinsics_log_cut_before_the_error_keeps_the_hint() -> None:
    # The same log pasted from its first note on (as issue reports often are).
    text = own(CAST).split("\n", 3)[3]
    [head] = parse_compiler_output(text)
    assert (head.severity, head.line, head.column) == ("note", 88, 5)
    assert [(n.line, n.column) for n in head.notes] == [(67, 9), (141, 24), (176, 24)]
    assert head.notes[1].source_line is not None
    assert "CastIntrinsicsImpl" in head.notes[1].source_line
    assert head.hint is not None
    assert "dav_c220" in head.hint


@pytest.mark.parametrize(("load", "name", "expected"), cases({
    ("real", "pto-isa-candidate-not-viable-errors-generated.txt"): (
        f"{PTO}/20260605_155958_manual_pr761/payload/pto-isa/include/pto/npu/a2a3/"
        "TRowExpandBinOp.hpp", 188, 26, 5, 6, 4, "CMakeFiles/quant_kernel.dir/quant_kernel.cpp.o"),
    ("own", "candidate-not-viable-tail-errors-generated.txt"): (
        f"{TK}/include/tilekit/npu/a2a3/TColReduceOp.hpp", 141, 23, 4, 5, 3,
        "CMakeFiles/colsum_kernel.dir/colsum_kernel.cpp.o"),
}, "compiler"))
def test_candidate_not_viable_tail_counts_the_errors_it_lost(
        load: Loader, name: str, expected: tuple[Any, ...]) -> None:
    file, line, column, wanted, given, errors, target = expected
    report = compiled(load(name))
    [note] = report.diagnostics
    assert (note.severity, note.file, note.line, note.column) == ("note", file, line, column)
    assert note.message == (f"candidate function template not viable: requires {wanted} "
                            f"arguments, but {given} were provided")
    assert report.errors_generated == errors
    assert report.failed_targets == [target]
    assert f"{errors} errors generated" in feedback_text(report)


@pytest.mark.parametrize(("load", "name", "expected"), cases({
    ("real", "pto-isa-no-matching-function-SYNCALL-full.txt"): (
        "syncall_binding/syncall_binding_kernel.cpp", 103, 3, "SYNCALL",
        "  SYNCALL<SyncAllMode::Soft, SyncCoreType::AIVOnly>(v6, v8, v2);", (67, 53),
        "CMakeFiles/syncall_binding_kernel.dir/syncall_binding_kernel.cpp.o"),
    ("own", "no-matching-function-two-candidates.txt"): (
        "barrier/cross_core_barrier_kernel.cpp", 58, 3, "BARRIER_ALL",
        "  BARRIER_ALL<BarrierScope::Cube, BarrierKind::Hard>(ws, nCores, flagId);", (92, 77),
        "CMakeFiles/cross_core_barrier_kernel.dir/cross_core_barrier_kernel.cpp.o"),
}, "compiler"))
def test_no_matching_function_groups_its_candidates(
        load: Loader, name: str, expected: tuple[Any, ...]) -> None:
    suffix, line, column, function, source, (first, second), target = expected
    report = compiled(load(name))
    [diag] = report.diagnostics
    assert diag.file is not None
    assert diag.file.endswith(suffix)
    assert (diag.line, diag.column) == (line, column)
    assert diag.message == f"no matching function for call to '{function}'"
    assert diag.source_line == source
    assert [(n.line, n.message) for n in diag.notes] == [
        (first, "candidate function template not viable: requires at most 2 arguments, but 3 "
                "were provided"),
        (second, "candidate function template not viable: requires 0 arguments, but 3 were "
                 "provided"),
    ]
    assert report.errors_generated == 1
    assert report.failed_targets == [target]


@pytest.mark.parametrize(("load", "name", "expected"), cases({
    ("real", "pto-isa-no-matching-function-template.txt"): (
        "pto/npu/a2a3/TRowExpandMul.hpp", 102, "TRowExpandBin", "TRowExpandBin<RowExpandMulOp<T>"),
    ("own", "no-matching-function-long-underline.txt"): (
        "tilekit/npu/a2a3/TRowBroadcastAdd.hpp", 77, "TRowBroadcastBin",
        "TRowBroadcastBin<RowBroadcastAddOp<T>"),
}, "compiler"))
def test_no_matching_function_template_with_long_underline(
        load: Loader, name: str, expected: tuple[str, int, str, str]) -> None:
    suffix, line, function, source = expected
    [diag] = parse_compiler_output(load(name))
    assert diag.file is not None
    assert diag.file.endswith(suffix)
    assert (diag.line, diag.column) == (line, 9)
    assert diag.message == f"no matching function for call to '{function}'"
    assert diag.source_line is not None
    assert diag.source_line.strip().startswith(source)


# -- compiler: undeclared identifiers --------------------------------------------------------


def test_pipe_fix_undeclared_five_times_with_arch_hint() -> None:
    diags = parse_compiler_output(real("compiler/pto-isa-undeclared-identifier-PIPE_FIX.txt"))
    assert [(d.line, d.column) for d in diags] == [
        (232, 34), (233, 38), (237, 34), (238, 34), (239, 34)]
    assert all(d.message == "use of undeclared identifier 'PIPE_FIX'" for d in diags)
    assert diags[1].source_line == "PTO_DEFINE_OP_PIPE(Op::TEXTRACT_V2M, PIPE_FIX);"
    assert diags[0].hint is not None
    assert "PIPE_FIX" in diags[0].hint
    assert "__NPU_ARCH__" in diags[0].hint


def test_own_pipe_fix_undeclared_four_times_then_the_count() -> None:
    report = compiled(own("compiler/undeclared-pipe-identifier-four-times.txt"))
    diags = report.diagnostics
    assert [(d.line, d.column) for d in diags] == [(118, 37), (119, 40), (124, 38), (125, 38)]
    assert {d.file for d in diags} == {f"{TK}/include/tilekit/common/pipe_map.hpp"}
    assert all(d.message == "use of undeclared identifier 'PIPE_FIX'" for d in diags)
    assert diags[1].source_line == "TK_BIND_OP_PIPE(OpId::TCOPY_L0C2GM_NZ, PIPE_FIX);"
    assert all(d.hint is not None and "PIPE_FIX" in d.hint and "__NPU_ARCH__" in d.hint
               for d in diags)
    assert report.errors_generated == 4


@pytest.mark.parametrize(("load", "name", "expected"), cases({
    ("real", "pto-isa-undeclared-identifier-macro-expansion.txt"): (
        1563, 5, "MGATHER_IMPL", "MAP_INSTR_IMPL", 34, 160),
    ("own", "undeclared-identifier-from-macro-scratch-space.txt"): (
        904, 5, "VSCATTER_IMPL", "TK_DISPATCH_IMPL", 35, 212),
}, "compiler"))
def test_undeclared_identifier_from_macro_expansion(
        load: Loader, name: str, expected: tuple[Any, ...]) -> None:
    line, column, identifier, macro, macro_column, scratch_line = expected
    [diag] = parse_compiler_output(load(name))
    assert (diag.line, diag.column) == (line, column)
    assert diag.message == f"use of undeclared identifier '{identifier}'"
    assert [(n.file, n.line, n.message) for n in diag.notes][1] == (
        "<scratch space>", scratch_line, "expanded from here")
    assert diag.notes[0].message == f"expanded from macro '{macro}'"
    assert diag.notes[0].column == macro_column
    assert diag.hint is not None
    assert macro in diag.hint


@pytest.mark.parametrize(("load", "name", "expected"), cases({
    ("real", "tilelang-ascend-undeclared-identifier.txt"): ("/tmp/tmp8_7f4g4h.cpp", 42, 97, "cid_"),
    ("own", "undeclared-identifier-jit-compiled-twice.txt"): (
        "/tmp/tmpq4z7n2mx.cpp", 57, 61, "blk_idx_"),
}, "compiler"))
def test_repeated_undeclared_identifier_is_reported_once_at_the_caret(
        load: Loader, name: str, expected: tuple[str, int, int, str]) -> None:
    file, line, column, identifier = expected
    report = compiled(load(name))
    [diag] = report.diagnostics
    assert (diag.file, diag.line, diag.column) == (file, line, column)
    assert diag.message == f"use of undeclared identifier '{identifier}'"
    assert diag.source_line is not None
    start = column - 1  # the caret's column
    assert diag.source_line[start:start + len(identifier)] == identifier
    assert report.errors_generated == 2  # the tool compiled the file twice


def test_own_templated_launcher_mangling_from_a_full_clang_diagnostic() -> None:
    report = compiled(own("compiler/undeclared-launcher-did-you-mean-cce-mangling.txt"))
    [diag] = report.diagnostics
    assert (diag.file, diag.line, diag.column) == (
        "/home/ci/opbot-ops/examples/softmax_custom/main.cpp", 64, 5)
    assert diag.message == ("use of undeclared identifier 'softmax_custom_float'; did you mean "
                            "'softmax_custom___cce_float'?")
    assert diag.source_line == ("    softmax_custom_float<<<blockDim, nullptr, stream>>>(xDevice, "
                                "yDevice, tilingDevice);")
    assert diag.suggestion == "softmax_custom___cce_float"
    [note] = diag.notes
    assert (note.line, note.column, note.message) == (
        23, 6, "'softmax_custom___cce_float' declared here")
    assert diag.hint is not None
    assert "8.2.RC1" in diag.hint
    assert "'softmax_custom_float' is now 'softmax_custom___cce_float'" in diag.hint
    assert 'extern "C"' in diag.hint
    assert report.errors_generated == 1


# Written here in the documented formats (docs/ascend-toolchain.md §5).
def test_templated_launcher_mangling_gets_the_upgrade_hint() -> None:
    text = ("rope.cpp:88:5: error: use of undeclared identifier 'rope_custom_true_half'; did you "
            "mean 'rope_custom_true___cce_half'?\n    rope_custom_true_half<<<8, nullptr, s>>>(q);"
            "\n    ^~~~~~~~~~~~~~~~~~~~~\n1 error generated.\n")
    [diag] = parse_compiler_output(text)
    assert diag.suggestion == "rope_custom_true___cce_half"
    assert diag.hint is not None
    assert "8.2.RC1" in diag.hint
    assert 'extern "C"' in diag.hint


# -- compiler: linker, backend, command lines ------------------------------------------------


@pytest.mark.parametrize(("load", "name", "expected"), cases({
    ("real", "ptoas-ld-lld-undefined-reference.txt"): (
        "loop_in_if(half*, half*)", "libplan_memory_loop_in_if_kernel.so",
        "plan_memory_loop_in_if"),
    ("real", "ptoas-ld-lld-undefined-reference-bf16.txt"): (
        "bf16_tile(__bf16*)", "libbf16_tile_kernel.so", "bf16_tile"),
    ("own", "ld-lld-undefined-reference-cpp-linkage.txt"): (
        "gelu_tail(float*, float*, int)", "libact_gelu_tail_kernel.so", "act_gelu_tail"),
    ("own", "ld-lld-undefined-reference-bf16.txt"): (
        "rmsnorm_bf16(__bf16*, __bf16*, __bf16*)", "librmsnorm_bf16_kernel.so", "rmsnorm_bf16"),
}, "compiler"))
def test_linker_undefined_reference(load: Loader, name: str,
                                    expected: tuple[str, str, str]) -> None:
    symbol, library, target = expected
    report = compiled(load(name))
    [diag] = report.diagnostics  # bisheng's "linker command failed" only repeats it
    assert (diag.kind, diag.tool, diag.symbol) == ("link", "ld.lld", symbol)
    assert diag.message == f"undefined reference: {symbol}"
    assert diag.referenced_by == [library]
    assert report.failed_targets == [target]
    assert report.errors_generated is None
    assert diag.hint is not None
    assert 'extern "C"' in diag.hint


@pytest.mark.parametrize(("load", "name", "expected"), cases({
    ("real", "bisheng-backend-cannot-select-intrinsic.txt"): (
        "%llvm.hivm.MOV.UB.TO.OUT.ALIGN.V2.DV", "TINSERT_acc2vec_nd_f16_16x16_mix_aic",
        "dav-c310-cube"),
    ("own", "bisheng-backend-cannot-select-vconv.txt"): (
        "%llvm.hivm.VCONV.F322BF16.RINT.V2", "cast_f32_to_bf16_tail_mix_aiv", "dav-c310-vec"),
}, "compiler"))
def test_backend_crash_names_intrinsic_function_and_arch(
        load: Loader, name: str, expected: tuple[str, str, str]) -> None:
    intrinsic, function, arch = expected
    [diag] = parse_compiler_output(load(name))
    assert diag.kind == "backend"
    assert diag.fatal
    assert diag.message == f"Cannot select: intrinsic {intrinsic}"
    assert diag.symbol == function
    assert diag.arch == arch
    assert diag.hint is not None
    assert arch in diag.hint
    assert f"in '{function}'" in diag.hint


def test_bisheng_command_line_is_read_not_reported() -> None:
    text = real("compiler/pto-kernels-bisheng-command-line.txt")
    assert parse_compiler_output(text) == []
    invocation = parse_bisheng_command(text)
    assert invocation is not None
    assert (invocation.compiler, invocation.arch, invocation.language) == (
        "bisheng", "dav-c310", "cce")
    assert invocation.output == "build/lib/libkernel_gdn_chunk_h.so"
    assert invocation.shared
    assert invocation.sources == ["csrc/kernel/kernel_gdn_chunk_h.cpp"]
    assert invocation.defines == ["REGISTER_BASE"]
    assert invocation.include_dirs[0] == "csrc/kernel"
    assert len(invocation.include_dirs) == 5
    assert invocation.flags.count("-mllvm") == 2


def test_own_bisheng_make_echo_is_read_not_reported() -> None:
    text = own("compiler/make-echo-bisheng-command.txt")
    assert parse_compiler_output(text) == []
    invocation = parse_bisheng_command(text)
    assert invocation is not None
    assert (invocation.compiler, invocation.arch, invocation.language) == (
        "bisheng", "dav-c220-vec", "cce")
    assert (invocation.output, invocation.shared) == ("out/lib/librmsnorm_a2.so", True)
    assert invocation.sources == ["src/kernels/rmsnorm_a2.cpp"]
    assert invocation.defines == ["TK_ARCH_A2", "TK_ENABLE_DBUF"]
    assert invocation.include_dirs == [
        "src/kernels", "src/common", "/opt/cann/cann-8.5.0/include",
        "/opt/cann/cann-8.5.0/include/experiment/runtime"]
    assert invocation.flags == ["-fPIC", "-O3", "-std=c++17", "-mllvm",
                                "-cce-aicore-stack-size=0x8000", "-Wno-macro-redefined"]
    assert feedback_text(invocation) == (
        "bisheng src/kernels/rmsnorm_a2.cpp -> out/lib/librmsnorm_a2.so (arch dav-c220-vec, "
        "language cce)")


def test_lld_undefined_symbol_and_plain_warning() -> None:
    text = ("k.cpp:3:1: warning: unused variable 'x' [-Wunused-variable]\n"
            "ld.lld: error: undefined symbol: add_custom_do\n"
            ">>> referenced by main.cpp.o:(main)\n")
    warning, link = parse_compiler_output(text)
    assert (warning.severity, warning.line, warning.source_line) == ("warning", 3, None)
    assert (link.symbol, link.referenced_by) == ("add_custom_do", ["main.cpp.o:(main)"])


def test_compiler_parser_survives_garbage() -> None:
    assert parse_compiler_output("") == []
    assert parse_compiler_output("\x00\x01 ^~~\n::::\nerror\n1:2:3: error: \n") != [None]


# -- g++, GNU ld, collect2, CMake (real outputs, own/gnu) -------------------------------------

GNU_OP = "/home/ci/opbot/ops/add_custom/ascendc"
DEVKIT = "/usr/local/Ascend/cann-8.5.0/x86_64-linux/tikcpp"
VEC_IMPL = f"{DEVKIT}/tikcfw/interface/../impl/kernel_operator_vec_binary_impl.h"

# Each root error as (location, message start, kind, tool, follow-on count, hint word).
GNU: dict[tuple[str, str], list[tuple[str | None, str, str, str | None, int, str | None]]] = {
    ("own", "gxx-add-int8-static-assert-in-devkit-header-utf8-quotes.txt"): [
        ("op_kernel/add_custom.cpp:13:21", "static assertion failed: Failed to check dtype in "
         "Add", "compile", None, 1, "dtypes")],
    ("own", "cmake-build-cpu-two-kernels-devkit-header-did-you-mean.txt"): [
        (f"{GNU_OP}/op_kernel/add_custom.cpp:13:21", "static assertion failed", "compile", None,
         1, "dtypes"),
        (f"{GNU_OP}/op_kernel/sub_custom.cpp:10:14", "'Subb' is not a member of 'AscendC'; did "
         "you mean 'Sub'?", "compile", None, 0, "suggests 'Sub'")],
    ("own", "gxx-halff-typo-follow-on-errors.txt"): [
        ("op_kernel/mul_custom.cpp:12:30", "'halff' was not declared in this scope", "compile",
         None, 1, "suggests 'half'"),
        ("op_kernel/mul_custom.cpp:22:28", "'totalLength' was not declared", "compile", None, 1,
         None),
        ("op_kernel/mul_custom.cpp:13:21", "no matching function for call to 'Add(int&",
         "compile", None, 1, None)],
    ("own", "ld-debug-undefined-reference-collect2.txt"): [
        (f"{GNU_OP}/host/b.cpp:3", "multiple definition of 'ReadFile(char const*, void*, "
         "unsigned long)'", "link", "ld", 0, "inline"),
        (f"{GNU_OP}/host/main.cpp:8", "undefined reference to 'add_custom_do'", "link",
         "ld", 0, "linkage"),
        (f"{GNU_OP}/host/main.cpp:9", "undefined reference to 'aclrtSynchronizeStream(void*)'",
         "link", "ld", 0, "ascendcl")],
    ("own", "ld-multiple-definition-cannot-find-lascendcl.txt"): [
        ("b.cpp", "multiple definition of 'ReadFile", "link", "ld", 0, "inline"),
        (None, "cannot find -lascendcl", "link", "ld", 0, "ASCEND_HOME_PATH")],
    ("own", "cmake-include-could-not-find-ascendc-cmake.txt"): [
        ("CMakeLists.txt:12", "include could not find requested file: /ascendc.cmake", "tool",
         "cmake", 1, "variable before it is empty")],
    ("own", "cmake-find-package-ASC-no-config.txt"): [
        ("CMakeLists.txt:3", "By not providing \"FindASC.cmake\"", "tool", "cmake", 0,
         "CANN 9 ASC")],
    ("own", "cmake-fatal-error-in-devkit-call-stack.txt"): [
        ("CMakeLists.txt:11", "SOC_VERSION Ascend910_9392 is not supported by this CANN "
         "package; supported: Ascend910B1;", "tool", "cmake", 0, None)],
}


@pytest.mark.parametrize(("load", "name", "expected"), cases(GNU, "gnu"))
def test_gnu_toolchain_root_errors(load: Loader, name: str, expected: list[Any]) -> None:
    report = compiled(load(name))
    errors = [item for item in report.diagnostics if item.severity == "error"]
    got = [(item.location, item.kind, item.tool, len(item.follow_ons)) for item in errors]
    assert got == [(where, kind, tool, follow) for where, _, kind, tool, follow, _ in expected]
    for item, (_, message, _, _, _, hint) in zip(errors, expected, strict=True):
        assert item.message.startswith(message)
        if hint is None:
            assert item.hint is None or "suggest" not in item.hint
        else:
            assert item.hint is not None
            assert hint in item.hint


def test_gxx_error_in_devkit_header_reports_the_users_line() -> None:
    """The error is inside a CANN header; the user's call that instantiated it is reported,
    the header's place kept as its origin, and the second error of the same call grouped."""
    [root] = compiled(own("gnu/gxx-add-int8-static-assert-in-devkit-header-utf8-quotes.txt")
                      ).diagnostics
    assert (root.file, root.line, root.column) == ("op_kernel/add_custom.cpp", 13, 21)
    assert root.origin == f"{VEC_IMPL}:7:64"
    assert root.origin_source_line is not None
    assert "static_assert(SupportType<T, half" in root.origin_source_line
    assert root.source_line is None
    assert root.context[0].startswith("In instantiation of 'void AscendC::VecBinaryCheck")
    assert root.context[-1] == "op_kernel/add_custom.cpp:13:21: required from here"
    # The include chain is kept outermost first, as clang prints it.
    assert root.include_chain == []  # it belonged to the first error, now a follow-on
    [follow] = root.follow_ons
    assert follow.message == "'signed char' is not a class, struct, or union type"
    assert (follow.file, follow.line, follow.origin) == ("op_kernel/add_custom.cpp", 13,
                                                         f"{VEC_IMPL}:16:29")
    assert follow.include_chain == ["op_kernel/add_custom.cpp:1",
                                    f"{DEVKIT}/tikcfw/kernel_operator.h:4",
                                    f"{DEVKIT}/tikcfw/interface/kernel_operator_vec_binary_intf.h:3"]
    text = feedback_text(root)
    assert text.startswith("op_kernel/add_custom.cpp:13:21: error: static assertion failed")
    assert f"reported inside {VEC_IMPL}:7:64" in text
    assert "1 follow-on error(s)" in text


def test_gxx_user_files_decide_what_is_the_users() -> None:
    """With the package's file names, only those count as the user's."""
    text = own("gnu/gxx-add-int8-static-assert-in-devkit-header-utf8-quotes.txt")
    [root] = parse_compiler_report(text, user_files=["ascendc/op_kernel/add_custom.cpp"]
                                   ).diagnostics
    assert root.location == "op_kernel/add_custom.cpp:13:21"
    first, second = parse_compiler_report(text, user_files=["other.cpp"]).diagnostics
    # No frame in the package: the compiler's places stand, and the two errors (different
    # instantiations, different lines) stay apart.
    assert (first.origin, first.location) == (None, f"{VEC_IMPL}:16:29")
    assert (second.origin, second.location) == (None, f"{VEC_IMPL}:7:64")


def test_gxx_source_echo_drops_the_line_number_gutter() -> None:
    diagnostics = compiled(own("gnu/gxx-halff-typo-follow-on-errors.txt")).diagnostics
    assert diagnostics[0].source_line == "        AscendC::LocalTensor<halff> zLocal;"
    assert diagnostics[0].suggestion == "half"
    assert diagnostics[0].context == ["In member function 'void KernelMul<T>::Compute()'"]
    # Both calls fail inside one instantiation of Compute: one root, one follow-on.
    add = diagnostics[2]
    assert add.context == ["In instantiation of 'void KernelMul<T>::Compute() [with T = "
                           "_Float16]'", "op_kernel/mul_custom.cpp:21:15: required from here"]
    assert [item.line for item in add.follow_ons] == [14]


def test_ld_repeats_and_collect2_are_not_root_causes() -> None:
    report = compiled(own("gnu/ld-debug-undefined-reference-collect2.txt"))
    assert all(item.tool != "collect2" for item in report.diagnostics)
    undefined = report.diagnostics[1]
    assert undefined.symbol == "add_custom_do"
    assert undefined.referenced_by == [f"{GNU_OP}/host/main.cpp:8 (in main)"]
    assert report.failed_targets == ["ascendc_kernels_bbit"]
    # collect2 alone (the linker's lines lost): it stands in, as a link error.
    [alone] = parse_compiler_output("collect2: error: ld returned 1 exit status\n")
    assert (alone.kind, alone.tool) == ("link", "collect2")


def test_cmake_unknown_command_follows_the_failed_include() -> None:
    [root] = compiled(own("gnu/cmake-include-could-not-find-ascendc-cmake.txt")).diagnostics
    assert root.symbol == "include"
    [follow] = root.follow_ons
    assert follow.message == 'Unknown CMake command "ascendc_library".'
    assert (follow.file, follow.line) == ("CMakeLists.txt", 13)


def test_cmake_error_in_devkit_file_reports_the_users_cmakelists_line() -> None:
    [root] = compiled(own("gnu/cmake-fatal-error-in-devkit-call-stack.txt")).diagnostics
    assert (root.file, root.line) == ("CMakeLists.txt", 11)
    assert root.origin == f"{DEVKIT}/ascendc_kernel_cmake/ascendc.cmake:3"
    assert root.context == ["CMakeLists.txt:11 (include)"]


def test_parse_gnu_output_and_first_errors_are_the_public_entry() -> None:
    report = parse_gnu_output(own("gnu/gxx-halff-typo-follow-on-errors.txt"),
                              user_files=["mul_custom.cpp"])
    assert [item.line for item in first_errors(report)] == [12, 22, 13]


# -- runtime ---------------------------------------------------------------------------------

RUNTIME: dict[tuple[str, str], dict[str, Any]] = {
    ("real", "ptoas-a3-aivec-ub-out-of-bounds-507035.txt"): dict(
        code=507035, meaning="vector core exception; VEC instruction error: the ub address out "
        "of bounds", error_id="EZ9999", api="aclrtSynchronizeStream", core_type="aivec",
        core_id=14, ret_code="0x31", device=2, environmental=False, hint="UB"),
    ("real", "ptoas-a3-aicore-timeout-507014.txt"): dict(
        code=507014, meaning="AI Core timeout; timeout or trap error", error_id="EZ9999",
        core_type="aicore", core_id=3, ret_code="0x25", reason="aicore timeout", hint="hang"),
    ("real", "ptoas-a3-fftsplus-aicore-exception-507015.txt"): dict(
        code=507015, core_type="fftsplus aicore", core_id=18, ret_code="0x26", device=0,
        reason="aicore exception", hint="scalar access"),
    ("real", "ptoas-a3-vector-core-timeout-507034.txt"): dict(
        code=507034, meaning="vector core timeout; timeout or trap error", core_type="aivec",
        core_id=11, ret_code="0x30", reason="vector core timeout"),
    ("real", "ptoas-a5-aicore-mte-ddr-out-of-range-507015.txt"): dict(
        code=507015, meaning="AI Core exception; The DDR address of the MTE instruction is out "
        "of range", core_type="aicore", core_id=0, hint="global memory"),
    ("real", "ptoas-aclInit-500000-EL0005-resource-busy.txt"): dict(
        code=500000, meaning="unknown internal error; resource busy", error_id="EL0005",
        api="aclInit", environmental=True),
    ("real", "ptoas-aclrtSetDevice-507033-EL0004.txt"): dict(
        code=507033, error_id="EL0004", api="aclrtSetDevice", environmental=True,
        meaning="device set failed (the device could not be started); memory allocation "
        "failure"),
    ("real", "torch-npu-AclrtSynchronizeStreamWithTimeout-507011.txt"): dict(
        code=507011, api="AclrtSynchronizeStreamWithTimeout", error_id=None),
    ("real", "torch-npu-ERR00100-vector-core-507035.txt"): dict(
        code=507035, meaning="vector core exception", pta_code="ERR00100", device=1,
        api="AclrtSynchronizeStreamWithTimeout"),
    ("real", "torch-npu-ERR01100-OPS-call-acl-api-failed-E40024.txt"): dict(
        code=500002, error_id="E40024", pta_code="ERR01100", operator="RepeatInterleave"),
    ("real", "triton-ascend-494-torch-npu-E-log-mpu-invalid-507035.txt"): dict(
        code=507035, operator="aclnnMaskedSelect", pta_code="ERR00100", core_id=27, device=0),
    ("real", "vllm-ascend-aicore-timeout-kernel-execute-failed-507014.txt"): dict(
        code=507014, meaning="AI Core timeout", reason="aicore timeout",
        kernel="MoeDistributeDispatchV2_ND_ND_BF16_INT8_high_performance_2000001002"),
    ("real", "vllm-ascend-torch-npu-warning-aivec-507035.txt"): dict(
        code=507035, code_inferred=True, core_id=40, device=6, ret_code="0x31"),
    ("real", "llama-cpp-cann-EE1001-context-null.txt"): dict(
        code=107002, error_id="EE1001", reason="context pointer null", environmental=True),
    ("real", "plog-APP-ERROR-PTA-inner-error.txt"): dict(
        code=None, operator="aclnnFusedInferAttentionScoreV3", hint="earlier"),
    # -- own fixtures: one per code and format the parser knows --
    ("own", "aclrtSynchronizeStream-aivec-ub-out-of-bounds-507035.txt"): dict(
        code=507035, code_inferred=False, meaning="vector core exception; VEC instruction error: "
        "the ub address out of bounds", error_id="EZ9999", api="aclrtSynchronizeStream",
        call_site=f"{RUNS}/20260914_081502_nightly/cases/Rowmax/rowmax_f16/main.cpp:131",
        core_type="aivec", core_id=22, ret_code="0x31", reason="vector core exception", device=5,
        error_str="VEC instruction error: the ub address out of bounds", environmental=False,
        hint="UB"),
    ("own", "aclrtSynchronizeStream-aicore-timeout-507014.txt"): dict(
        code=507014, meaning="AI Core timeout; timeout or trap error", error_id="EZ9999",
        api="aclrtSynchronizeStream", core_type="aicore", core_id=9, ret_code="0x25",
        reason="aicore timeout", device=3, environmental=False, hint="hang"),
    ("own", "aclrtSynchronizeStream-fftsplus-aicore-dcache-507015.txt"): dict(
        code=507015, meaning="AI Core exception; When the D-cache reads and writes data to the "
        "UB, the response value returned by the bus is a non-zero value", core_type="fftsplus "
        "aicore", core_id=7, ret_code="0x26", reason="aicore exception", device=1,
        hint="scalar access"),
    ("own", "aclrtSynchronizeStream-vector-core-timeout-507034.txt"): dict(
        code=507034, meaning="vector core timeout; timeout or trap error", core_type="aivec",
        core_id=31, ret_code="0x30", reason="vector core timeout", device=0, hint="hang"),
    ("own", "aclrtSynchronizeStream-a5-aicore-mte-ddr-out-of-range-507015.txt"): dict(
        code=507015, meaning="AI Core exception; The DDR address of the MTE instruction is out "
        "of range", error_id="EZ9999", core_type="aicore", core_id=4, ret_code=None, reason=None,
        device=0, call_site="/tmp/opbot-board-a5/runs/20260916_140210_nightly/cases/Slice/"
        "slice_tail_gm/main.cpp:87", hint="global memory"),
    ("own", "aclInit-500000-EL0005-resource-busy.txt"): dict(
        code=500000, meaning="unknown internal error; resource busy", error_id="EL0005",
        api="aclInit", call_site=f"{RUNS}/20260916_162204_nightly/cases/Cumsum/cumsum_rows/"
        "main.cpp:41", environmental=True, hint="machine failed, not the kernel"),
    ("own", "aclrtSetDevice-507033-EL0004-no-memory.txt"): dict(
        code=507033, error_id="EL0004", api="aclrtSetDevice", environmental=True,
        meaning="device set failed (the device could not be started); memory allocation "
        "failure", hint="machine failed, not the kernel"),
    ("own", "torch-npu-vllm-worker-synchronize-507011.txt"): dict(
        code=507011, meaning="model/stream execution failed",
        api="AclrtSynchronizeStreamWithTimeout", error_id=None, pta_code=None,
        environmental=False, hint="first device error"),
    ("own", "torch-npu-ERR00100-copy-stream-507035.txt"): dict(
        code=507035, meaning="vector core exception", pta_code="ERR00100", device=3,
        api="AclrtSynchronizeStreamWithTimeout", error_id=None, hint="faulted on the device"),
    ("own", "torch-npu-ERR01100-OPS-500002-E40024.txt"): dict(
        code=500002, error_id="E40024", pta_code="ERR01100", operator="IndexPutV2", device=0,
        meaning="GE (graph engine) error, usually an operator that failed to compile or run; a "
        "Python function called by the operator compiler failed", hint="graph engine"),
    ("own", "torch-npu-aclnn-call-failed-ERR00100-507035.txt"): dict(
        code=507035, operator="aclnnScatterNd", api=None, pta_code="ERR00100", error_id="EZ9999",
        core_type="aivec", core_id=12, device=2),  # Device:2 is printed before chipId:5
    ("own", "vllm-worker-aicore-timeout-fault-kernel-507014.txt"): dict(
        code=507014, meaning="AI Core timeout", reason="aicore timeout", device=1,
        kernel="GroupedMatmulSwigluQuant_ND_ND_INT8_BF16_high_performance_1000000011",
        hint="hang"),
    ("own", "torch-npu-rank-warning-aivec-no-code-507035.txt"): dict(
        code=507035, code_inferred=True, core_type="aivec", core_id=33, device=3,
        ret_code="0x31", hint="scalar access"),
    ("own", "cann-error-EE1001-no-context-107002.txt"): dict(
        code=107002, error_id="EE1001", reason="context pointer null", environmental=True,
        meaning="no current context (the device was not set in this thread); invalid argument; "
        "context pointer null"),
    ("own", "plog-APP-ERROR-PTA-inner-error-repeated.txt"): dict(
        code=None, operator="aclnnGroupedMatmulV4", pta_code=None, hint="earlier"),
}


@pytest.mark.parametrize(("load", "name", "expected"), cases(RUNTIME, "runtime"))
def test_runtime_failure(load: Loader, name: str, expected: dict[str, Any]) -> None:
    failure = parse_runtime_error(load(name))
    fields = dict(expected)
    hint = fields.pop("hint", None)
    for key, value in fields.items():
        assert getattr(failure, key) == value, key
    if hint is not None:
        assert failure.hint is not None
        assert hint in failure.hint
    assert failure.log_lines, "the relevant log lines are kept"


def test_runtime_call_site_and_log_lines() -> None:
    failure = parse_runtime_error(real("runtime/ptoas-a3-aivec-ub-out-of-bounds-507035.txt"))
    assert failure.call_site == (
        f"{PTO}/20260612_104343_merged_pr808/npu_validation/And/and/main.cpp:92")
    assert failure.error_str == "VEC instruction error: the ub address out of bounds"
    assert failure.log_lines[0].startswith("[ERROR] aclrtSynchronizeStream(stream) failed: 507035")


def test_own_runtime_log_lines_drop_wrapper_prefixes() -> None:
    failure = parse_runtime_error(own("runtime/torch-npu-ERR01100-OPS-500002-E40024.txt"))
    assert failure.log_lines[0] == (
        "InnerRun:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:230 OPS function error: "
        "IndexPutV2, error code is 500002")
    assert not any(line.startswith("ERROR 09-16") for line in failure.log_lines)
    worker = parse_runtime_error(own("runtime/torch-npu-vllm-worker-synchronize-507011.txt"))
    assert worker.log_lines == [
        "RuntimeError: synchronize:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:361 NPU "
        "function error: c10_npu::acl::AclrtSynchronizeStreamWithTimeout(stream()), error code "
        "is 507011"]
    ub = parse_runtime_error(
        own("runtime/aclrtSynchronizeStream-aivec-ub-out-of-bounds-507035.txt"))
    assert ub.log_lines[0].startswith("[ERROR] aclrtSynchronizeStream(stream) failed: 507035 (")
    assert len(ub.log_lines) <= 8


@pytest.mark.parametrize(("load", "name", "expected"), cases({
    ("real", "plog-APP-ERROR-PTA-inner-error.txt"): "aclnnFusedInferAttentionScoreV3",
    ("own", "plog-APP-ERROR-PTA-inner-error-repeated.txt"): "aclnnGroupedMatmulV4",
}, "runtime"))
def test_plog_repeats_collapse_to_one_line(load: Loader, name: str, expected: str) -> None:
    failure = parse_runtime_error(load(name))
    assert len(failure.log_lines) == 1
    assert "Inner error happened with CAN_EXIT status" in failure.log_lines[0]
    assert failure.log_lines[0].endswith(f"operator name is {expected}\"\"")


def test_runtime_parser_on_nothing() -> None:
    failure = parse_runtime_error("all good\n")
    assert failure.code is None
    assert failure.meaning is None
    assert failure.log_lines == []


# -- msprof ----------------------------------------------------------------------------------

OP_BASIC = {
    # file: (op, type, duration us, block dim, mix block dim, device, pid, freq, rated freq)
    ("real", "hammingdist-topk-OpBasicInfo.csv"): (
        "topk_custom_0", "vector", 155.740005, 1, None, 4, 1304945, 1800, 1800),
    ("real", "hammingdist-topk-custom-OpBasicInfo.csv"): (
        "hamming_dist_top_k_custom_0", "vector", 152.300003, 1, None, 2, 2366325, 1800, 1800),
    ("real", "neo-pan-cann852-OpBasicInfo-mix.csv"): (
        "main_kernel_mix_aic", "mix", 9.22, 1, 2, 0, None, 1800, 1800),
    ("real", "neo-pan-real_cann_minimal-OpBasicInfo.csv"): (
        "sanitized_operator_kernel", "mix", 5.740459, 1, 2, 0, 1000, 1800, 1800),
    ("real", "neo-pan-real_default_vector-OpBasicInfo.csv"): (
        "sanitized_add_custom_vector", "vector", 9.22, 8, None, 0, 1000, 1800, 1800),
    ("own", "rowmax-custom-vector-OpBasicInfo.csv"): (
        "rowmax_custom_0", "vector", 63.48, 40, None, 1, 3318842, 1800, 1800),
    ("own", "matmul-leakyrelu-mix-OpBasicInfo.csv"): (
        "matmul_leakyrelu_mix_aic", "mix", 212.365005, 20, 40, 0, None, 1800, 1800),
}


@pytest.mark.parametrize(("load", "name", "expected"), cases(OP_BASIC, "msprof"))
def test_op_basic_info(load: Loader, name: str, expected: tuple[Any, ...]) -> None:
    [timing] = parse_op_basic_info(load(name))
    assert (timing.op_name, timing.op_type, timing.task_duration_us, timing.block_dim,
            timing.mix_block_dim, timing.device_id, timing.pid, timing.current_freq_mhz,
            timing.rated_freq_mhz) == expected


PIPES = {
    # file: (bottleneck, its mean ratio, rows, slowest core us, second pipe)
    ("real", "hammingdist-topk-PipeUtilization-no-bw-cols.csv"): (
        "aiv_vec", 0.703062, 1, 155.431107, "aiv_scalar"),
    ("real", "hammingdist-topk-custom-PipeUtilization-no-bw-cols.csv"): (
        "aiv_mte2", 0.549007, 1, 149.146118, "aiv_vec"),
    ("real", "neo-pan-cann852-PipeUtilization-mix-vector1.csv"): (
        "aiv_mte2", (0.235802 + 0.252037) / 2, 3, 6.222222, "aiv_scalar"),
    ("real", "neo-pan-real_cann_minimal-PipeUtilization-mix.csv"): (
        "aic_scalar", 0.334556, 2, 3.200556, "aiv_scalar"),
    ("real", "neo-pan-real_default_vector-PipeUtilization-vector.csv"): (
        "aiv_scalar", (0.970814 + 0.984134 + 0.992752) / 3, 3, 8.661667, "aiv_mte2"),
    ("own", "layernorm-custom-PipeUtilization-no-bw-cols.csv"): (
        "aiv_mte2", (0.598608 + 0.616446) / 2, 2, 49.422222, "aiv_vec"),
    ("own", "matmul-leakyrelu-PipeUtilization-mix.csv"): (
        "aic_cube", (0.792982 + 0.788737) / 2, 6, 212.336667, "aic_mte2"),
    ("own", "gelu-custom-PipeUtilization-vector-4-blocks.csv"): (
        "aiv_vec", (0.769933 + 0.765007 + 0.772767 + 0.745417) / 4, 4, 14.485556, "aiv_mte2"),
}


@pytest.mark.parametrize(("load", "name", "expected"), cases(PIPES, "msprof"))
def test_pipe_utilization(load: Loader, name: str, expected: tuple[Any, ...]) -> None:
    report = parse_pipe_utilization(load(name))
    bottleneck, ratio, rows, slowest, second = expected
    assert report.bottleneck == bottleneck
    assert report.bottleneck_ratio == pytest.approx(ratio)
    assert len(report.rows) == rows
    assert report.core_time_us_max == pytest.approx(slowest)
    assert report.pipes[1].name == second


def test_pipe_utilization_mix_rows_keep_their_core() -> None:
    report = parse_pipe_utilization(
        real("msprof/neo-pan-cann852-PipeUtilization-mix-vector1.csv"))
    assert [(r.sub_block_id, r.core) for r in report.rows] == [
        ("cube0", "aic"), ("vector0", "aiv"), ("vector1", "aiv")]
    cube = report.rows[0]
    assert set(cube.pipes) == {"cube", "scalar", "mte1", "mte2", "mte3", "fixpipe"}
    assert cube.pipes["mte3"].active_bw_gbs is None  # NA in this capture
    mte2 = next(p for p in report.pipes if p.name == "aiv_mte2")
    assert mte2.rows == 2
    assert mte2.time_us_total == pytest.approx(2.122222 + 2.268333)


def test_own_pipe_utilization_mix_rows_keep_their_core_and_block() -> None:
    report = parse_pipe_utilization(own("msprof/matmul-leakyrelu-PipeUtilization-mix.csv"))
    assert [(r.block_id, r.sub_block_id, r.core) for r in report.rows] == [
        (block, sub, core) for block in (0, 1)
        for sub, core in (("cube0", "aic"), ("vector0", "aiv"), ("vector1", "aiv"))]
    cube = report.rows[0]
    assert set(cube.pipes) == {"cube", "scalar", "mte1", "mte2", "mte3", "fixpipe"}
    assert (cube.time_us, cube.total_cycles, cube.icache_miss_rate) == (211.194444, 380150,
                                                                         0.012408)
    assert cube.pipes["mte3"].active_bw_gbs is None  # NA
    assert cube.pipes["fixpipe"].active_bw_gbs == pytest.approx(612.04834)
    assert report.rows[1].pipes["mte2"].active_bw_gbs is None  # NA
    scalar = next(p for p in report.pipes if p.name == "aiv_scalar")
    assert scalar.rows == 4
    assert scalar.time_us_total == pytest.approx(54.894444 + 56.3 + 55.344444 + 56.104444)
    assert report.core_time_us_min == pytest.approx(203.4)


def test_pipe_utilization_bandwidth_columns() -> None:
    report = parse_pipe_utilization(
        real("msprof/neo-pan-real_cann_minimal-PipeUtilization-mix.csv"))
    vector = report.rows[1]
    assert vector.pipes["mte2"].active_bw_gbs == pytest.approx(4.153935)
    assert report.rows[0].pipes["mte3"].active_bw_gbs == pytest.approx(858.306885)


def test_own_pipe_utilization_bandwidth_columns() -> None:
    report = parse_pipe_utilization(own("msprof/gelu-custom-PipeUtilization-vector-4-blocks.csv"))
    assert [r.block_id for r in report.rows] == [0, 1, 2, 3]
    assert report.rows[3].pipes["mte2"].active_bw_gbs == pytest.approx(109.522705)
    mte2 = next(p for p in report.pipes if p.name == "aiv_mte2")
    assert mte2.active_bw_gbs_mean == pytest.approx(
        (118.402466 + 115.807129 + 118.725586 + 109.522705) / 4)
    older = parse_pipe_utilization(own("msprof/layernorm-custom-PipeUtilization-no-bw-cols.csv"))
    assert all(p.active_bw_gbs_mean is None for p in older.pipes)  # no *_active_bw columns


def test_op_summary() -> None:
    first, second = parse_op_summary(real("msprof/neo-pan-real_cann_minimal-op_summary_001.csv"))
    assert (first.op_name, first.task_type, first.task_id, first.stream_id) == (
        "sanitized_kernel", "MIX_AIC", 0, 1716)
    assert (first.task_duration_us, second.task_duration_us) == (42399.12, 42058.48)
    assert (second.task_wait_us, first.block_dim, first.mix_block_dim) == (2.88, 256, 512)
    assert (first.aicore_time_us, first.aiv_time_us) == (12.778, 38332.239)
    assert first.cube_utilization_pct == 0.029
    assert first.bottleneck == "aiv_scalar"
    assert first.pipes[0].ratio_mean == 0.995
    assert {p.name for p in first.pipes} >= {"aic_mac", "aic_fixpipe", "aiv_vec"}


def test_own_op_summary() -> None:
    rows = parse_op_summary(own("msprof/op_summary_mix_aic.csv"))
    assert [(r.op_name, r.op_type, r.task_type, r.task_id, r.stream_id, r.device_id)
            for r in rows] == [("flash_attn_fwd_mix_aic", "flash_attn_fwd_mix_aic", "MIX_AIC",
                                task, 8, 1) for task in (12, 13, 14)]
    assert [r.task_duration_us for r in rows] == [1536.22, 1529.88, 1531.04]
    assert [r.task_wait_us for r in rows] == [0.0, 3.42, 2.16]
    first = rows[0]
    assert (first.block_dim, first.mix_block_dim) == (24, 48)
    assert (first.aicore_time_us, first.aiv_time_us, first.cube_utilization_pct) == (
        1490.117, 1502.846, 42.711)
    assert first.bottleneck == "aic_mac"
    assert [(p.name, p.ratio_mean) for p in first.pipes[:3]] == [
        ("aic_mac", 0.68), ("aiv_mte2", 0.467), ("aiv_vec", 0.258)]
    assert feedback_text(first) == ("flash_attn_fwd_mix_aic (MIX_AIC): 1536.22 us, block dim 24, "
                                    "bottleneck aic_mac 68.0%")


def test_op_statistic() -> None:
    [row] = parse_op_statistic(real("msprof/neo-pan-real_cann_minimal-op_statistic_001.csv"))
    assert (row.op_type, row.core_type, row.count) == ("sanitized_kernel", "MIX_AIC", 2)
    assert (row.total_us, row.min_us, row.avg_us, row.max_us, row.ratio_pct) == (
        84457.60, 42058.48, 42228.80, 42399.12, 100.0)


def test_own_op_statistic() -> None:
    mix, vector = parse_op_statistic(own("msprof/op_statistic_two_types.csv"))
    assert (mix.op_type, mix.core_type, mix.count, mix.device_id) == (
        "flash_attn_fwd_mix_aic", "MIX_AIC", 3, 1)
    assert (mix.total_us, mix.min_us, mix.avg_us, mix.max_us, mix.ratio_pct) == (
        4597.14, 1529.88, 1532.38, 1536.22, 88.402)
    assert (vector.op_type, vector.core_type, vector.count, vector.avg_us, vector.ratio_pct) == (
        "rope_custom", "AI_VECTOR_CORE", 16, 37.69, 11.598)


def test_msprof_console() -> None:
    console = parse_msprof_console(real("msprof/neo-pan-msprof-op-console.txt"))
    assert console.output_dir == "<abs-path>/reports/op/OPPROF_20260602101111_OPHASH12"
    assert console.metrics == ["PipeUtilization"]
    assert console.tasks == []
    assert console.started
    assert console.finished
    assert console.ok
    device = parse_msprof_console(real("msprof/neo-pan-msprof-op-console-deviceprof.txt"))
    assert device.tasks == ["DeviceProf"]
    assert device.output_dir == "<abs-path>/reports/OPPROF_<sanitized>"


def test_own_msprof_console() -> None:
    console = parse_msprof_console(own("msprof/msprof-op-console-rowmax.txt"))
    assert console.output_dir == ("/home/ci/opbot-ops/prof/rowmax/"
                                  "OPPROF_20260918101530_KQZTYWMLVXHRPBNA")
    assert console.metrics == ["PipeUtilization", "Memory"]
    assert (console.tasks, console.errors, console.warnings) == ([], [], [])
    assert (console.started, console.finished, console.ok) == (True, True, True)
    device = parse_msprof_console(own("msprof/msprof-op-console-device-task.txt"))
    assert device.tasks == ["DeviceProf"]
    assert device.metrics == ["PipeUtilization"]
    assert device.output_dir == ("/home/ci/opbot-ops/prof/gelu/"
                                 "OPPROF_20260918110207_WJDNGQSAHZUEXCTF")
    assert feedback_text(device) == f"msprof results in {device.output_dir}"
    # Cut before the last line: no "parse finished", so not ok even with a directory.
    cut = parse_msprof_console(own("msprof/msprof-op-console-device-task.txt").rsplit("\n", 2)[0])
    assert (cut.output_dir is not None, cut.finished, cut.ok) == (True, False, False)


def test_msprof_console_error() -> None:
    console = parse_msprof_console(
        "2026-06-02 10:11:11 [INFO]  Op profiling analysis start.\n"
        "2026-06-02 10:11:12 [ERROR]  The kernel name add_custom is not found.\n")
    assert console.errors == ["The kernel name add_custom is not found."]
    assert not console.ok
    assert feedback_text(console) == "msprof failed: The kernel name add_custom is not found."


# -- npu-smi ---------------------------------------------------------------------------------

SMI = {
    # file: (npu-smi version, devices, NPUs, first chip name, HBM total, processes, phy layout)
    ("licensed", "nvitop-npu-smi-25.5.1-info-910B3-8npu-with-processes.txt"): (
        "25.5.1", 8, 8, "910B3", 65536, 8, False),
    ("licensed", "triton-ascend-docs-npu-smi-26.0.rc1-wide-format-910B4.txt"): (
        "26.0.rc1", 1, 1, "910B4", 32768, 0, False),
    ("real", "vllm-ascend-3002-npu-smi-25.2.0-A3-Ascend910-16chip-with-processes.txt"): (
        "25.2.0", 16, 8, "Ascend910", 65536, 23, True),
    ("real", "vllm-ascend-5606-npu-smi-25.2.2-910B4-1-with-processes.txt"): (
        "25.2.2", 2, 2, "910B4-1", 65536, 2, False),
    ("real", "vllm-ascend-378-npu-smi-23.0.3-910B2-8npu.txt"): (
        "23.0.3", 8, 8, "910B2", 65536, 0, False),
    ("real", "neo-pan-cann852-npu_smi_info.stdout.txt"): ("25.5.6", 4, 4, "910B2", 65536, 0, False),
    ("own", "npu-smi-24.1.rc3-910B2-8npu-idle.txt"): ("24.1.rc3", 8, 8, "910B2", 65536, 0, False),
    ("own", "npu-smi-25.0.rc1.1-910B4-1-4npu-with-processes.txt"): (
        "25.0.rc1.1", 4, 4, "910B4-1", 65536, 3, False),
    ("own", "npu-smi-25.3.rc1-A3-Ascend910-16chip-with-processes.txt"): (
        "25.3.rc1", 16, 8, "Ascend910", 65536, 20, True),
    ("own", "npu-smi-25.5.0-910B1-container-npus-2-3.txt"): (
        "25.5.0", 2, 2, "910B1", 65536, 0, False),
}


@pytest.mark.parametrize(("load", "name", "expected"), cases(SMI, "install"))
def test_npu_smi_tables(load: Loader, name: str, expected: tuple[Any, ...]) -> None:
    info = parse_npu_smi(load(name))
    assert (info.smi_version, info.device_count, info.npu_count, info.chips[0].name,
            info.chips[0].hbm_total_mb, len(info.processes), info.phy_id_layout) == expected
    assert all(chip.health == "OK" for chip in info.chips)


def test_npu_smi_row_values() -> None:
    info = parse_npu_smi(
        licensed("install/nvitop-npu-smi-25.5.1-info-910B3-8npu-with-processes.txt"))
    last = info.chips[-1]
    assert (last.npu_id, last.chip_id, last.bus_id, last.power_w, last.temp_c) == (
        7, 0, "0000:42:00.0", 90.1, 39.0)
    assert (last.hbm_used_mb, last.memory_total_mb) == (19319, 0)
    assert (info.processes[4].pid, info.processes[4].name, info.processes[4].memory_mb) == (
        3232170, "VLLMEngineCor", 56588)


def test_npu_smi_row_values_of_the_real_a3_table() -> None:
    a3 = parse_npu_smi(real(
        "install/vllm-ascend-3002-npu-smi-25.2.0-A3-Ascend910-16chip-with-processes.txt"))
    assert [(c.npu_id, c.chip_id, c.phy_id) for c in a3.chips[:3]] == [(0, 0, 0), (0, 1, 1),
                                                                       (1, 0, 2)]
    assert a3.chips[1].power_w is None  # the second die prints "-"
    assert a3.processes[0].name == ""
    assert a3.processes[8].memory_mb == 58780


def test_own_npu_smi_row_values() -> None:
    a3 = parse_npu_smi(own("install/npu-smi-25.3.rc1-A3-Ascend910-16chip-with-processes.txt"))
    assert [(c.npu_id, c.chip_id, c.phy_id) for c in a3.chips[:3]] == [(0, 0, 0), (0, 1, 1),
                                                                       (1, 0, 2)]
    assert [c.phy_id for c in a3.chips] == list(range(16))
    assert (a3.chips[0].power_w, a3.chips[1].power_w) == (196.0, None)  # second die: "-"
    assert (a3.chips[15].bus_id, a3.chips[15].aicore_pct, a3.chips[15].hbm_used_mb) == (
        "0000:83:00.0", 4.0, 60906)
    assert a3.processes[0].name == ""
    assert [(p.npu_id, p.chip_id, p.pid, p.memory_mb) for p in a3.processes[4:6]] == [
        (0, 0, 510210, 59311), (0, 1, 510861, 59422)]
    b4 = parse_npu_smi(own("install/npu-smi-25.0.rc1.1-910B4-1-4npu-with-processes.txt"))
    last = b4.chips[-1]
    assert (last.npu_id, last.chip_id, last.bus_id, last.power_w, last.temp_c) == (
        3, 0, "0000:0D:00.0", 82.4, 37.0)
    assert (b4.chips[0].hbm_used_mb, last.hbm_used_mb) == (60412, 2816)  # "60412/" and "2816 /"
    assert [(p.npu_id, p.pid, p.name, p.memory_mb) for p in b4.processes] == [
        (0, 48120, "python3", 57126), (1, 48121, "python3", 57124), (2, 48122, "python3", 57129)]
    container = parse_npu_smi(own("install/npu-smi-25.5.0-910B1-container-npus-2-3.txt"))
    assert [(c.npu_id, c.bus_id) for c in container.chips] == [(2, "0000:81:00.0"),
                                                               (3, "0000:82:00.0")]
    assert feedback_text(container) == "npu-smi 25.5.0: 2 device(s) 910B1"


def test_npu_smi_chip_names_and_fields() -> None:
    names = parse_npu_smi_chip_names(licensed("install/nvitop-npu-smi-25.5.1-info--m.txt"))
    assert len(names) == 8
    assert names[3].name == "Ascend 910B3"
    assert names[3].logic_id == 3
    board = parse_npu_smi_fields(licensed("install/nvitop-npu-smi-25.5.1-info--t-board--i-0.txt"))
    assert board[0]["Software Version"] == "25.5.1"
    assert board[0]["PCI Device ID"] == "0xD802"
    common = parse_npu_smi_fields(
        licensed("install/nvitop-npu-smi-25.5.1-info--t-common--i-0.txt"))
    assert common[1]["Aicore Count"] == "20"
    assert common[2]["Chip Name"] == "mcu"
    memory = parse_npu_smi_fields(
        licensed("install/nvitop-npu-smi-25.5.1-info--t-proc-mem--i-0.txt"))
    assert memory[1]["Process name"] == "VLLMWorker_TP"
    assert memory[1]["Process memory(MB)"] == "55844"


def test_npu_smi_on_garbage() -> None:
    assert parse_npu_smi("npu-smi: command not found\n| broken | row\n").device_count == 0


# -- triton-ascend ---------------------------------------------------------------------------

UB = {
    ("licensed", "triton-ascend-docs-ub-overflow-pytest-E-prefixed.txt"): (3072256, 1572864, "2x"),
    ("real", "ascend-pytorch-102-mlircompilationerror-ub-overflow.txt"): (
        1966848, 1572864, "1.3x"),
    ("real", "ascend-pytorch-102-ub-overflow-hivm-executing.txt"): (3277568, 1572864, "2.1x"),
    ("own", "mlircompilationerror-ub-overflow-avaliable.txt"): (2359296, 1572864, "1.5x"),
    ("own", "ub-overflow-then-hivm-compile-command.txt"): (4194304, 1572864, "2.7x"),
}


@pytest.mark.parametrize(("load", "name", "expected"), cases(UB, "triton-ascend"))
def test_ub_overflow_numbers(load: Loader, name: str, expected: tuple[int, int, str]) -> None:
    error = parse_triton_ascend_error(load(name))
    required, available, factor = expected
    assert (error.kind, error.required_bits, error.available_bits) == (
        "ub_overflow", required, available)
    assert error.hint is not None
    assert "XBLOCK_SUB" in error.hint
    assert f"needs {required // 8 // 1024} KB of UB but 192 KB" in error.hint
    assert f"{factor} (" in error.hint
    assert error.location is None  # only temporary .mlir files are named


@pytest.mark.parametrize(("load", "name", "expected"), cases({
    ("real", "mcore-bridge-188-ub-overflow-note-failed-pipeline.txt"):
        "/kernels/qsa_block_sparse_attn.py:49",
    ("own", "ub-overflow-note-rank-prefixed.txt"):
        "/home/ci/opbot-ops/triton_kernels/fused_rope_kernel.py:118",
}, "triton-ascend"))
def test_ub_overflow_note_without_numbers_points_at_the_kernel(
        load: Loader, name: str, expected: str) -> None:
    error = parse_triton_ascend_error(load(name))
    assert (error.kind, error.required_bits) == ("ub_overflow", None)
    assert error.location is not None
    assert error.location.endswith(expected)


@pytest.mark.parametrize(("load", "name", "expected"), cases({
    ("real", "ms-swift-9621-grid-should-be-less-than-65536.txt"): 65535,
    ("own", "grid-should-be-less-than-65536-rank-prefixed.txt"): 65535,
}, "triton-ascend"))
def test_grid_too_large(load: Loader, name: str, expected: int) -> None:
    error = parse_triton_ascend_error(load(name))
    assert (error.kind, error.grid_limit) == ("grid_too_large", expected)
    assert error.message is not None
    assert error.message.startswith("RuntimeError: grid should be")  # not the `raise` echo
    assert error.hint is not None
    assert "num_vectorcore" in error.hint


@pytest.mark.parametrize(("load", "name", "expected"), cases({
    ("real", "sglang-16360-bishengir-unknown-target.txt"): "Ascend910B4-1",
    ("own", "bishengir-compile-unknown-target-A3.txt"): "Ascend910_9382",
}, "triton-ascend"))
def test_unknown_target(load: Loader, name: str, expected: str) -> None:
    error = parse_triton_ascend_error(load(name))
    assert (error.kind, error.target) == ("unknown_target", expected)
    assert error.message == f"for the --target option: Cannot find option named '{expected}'"
    assert error.hint is not None
    assert f"'{expected}'" in error.hint


@pytest.mark.parametrize(("load", "name"), [
    pytest.param(real, "triton-ascend/triton-ascend-302-calledprocesserror-bishengir-compile.txt",
                 id="real:triton-ascend-302-calledprocesserror-bishengir-compile.txt"),
    pytest.param(own, "triton-ascend/calledprocesserror-bishengir-compile-traceback.txt",
                 id="own:calledprocesserror-bishengir-compile-traceback.txt"),
])
def test_bishengir_compile_failure(load: Loader, name: str) -> None:
    error = parse_triton_ascend_error(load(name))
    assert error.kind == "bishengir_failed"
    assert error.message == "bishengir-compile exited with an error (subprocess.CalledProcessError)"


def test_triton_no_driver_and_unknown() -> None:
    assert parse_triton_ascend_error("RuntimeError: 0 active drivers ([]).").kind == "no_driver"
    assert parse_triton_ascend_error("").kind == "unknown"


# -- feedback ----------------------------------------------------------------------------------


def test_feedback_for_a_compile_error_has_location_source_and_hint() -> None:
    text = feedback_text(parse_compiler_output(
        real("compiler/vllm-ascend-inner-interface-not-found.txt")))
    lines = text.splitlines()
    assert lines[0] == ("/home/lr/vllm-ascend/csrc/kernels/pos_encoding_kernels.cpp:22:10: error: "
                        "'inner_interface/inner_kernel_operator_intf.h' file not found")
    assert lines[1].strip() == '#include "inner_interface/inner_kernel_operator_intf.h"'
    assert lines[2].startswith("  hint: ")


def test_own_feedback_for_compile_errors() -> None:
    lines = feedback_text(parse_compiler_output(
        own("compiler/missing-internal-header-pip-verbose.txt"))).splitlines()
    assert lines[0] == ("/home/ci/opbot-ops/csrc/kernels/swiglu_kernel.cpp:31:10: error: "
                        "'impl/kernel_operator_vec_binary_impl.h' file not found")
    assert lines[1] == '    #include "impl/kernel_operator_vec_binary_impl.h"'
    assert lines[2].startswith("  hint: ")
    link = feedback_text(compiled(own("compiler/ld-lld-undefined-reference-bf16.txt")))
    assert link.splitlines()[:2] == [
        "ld.lld: error: undefined reference: rmsnorm_bf16(__bf16*, __bf16*, __bf16*)",
        "  referenced by librmsnorm_bf16_kernel.so"]
    cast = feedback_text(compiled(own(CAST))).splitlines()
    assert cast[2].startswith(f"  note: {TIK}/impl/kernel_operator_vec_vconv_impl.h:88:5: in inst")
    assert len(cast) == 7  # error, echo, the four notes (all shown), hint
    assert cast[-1].startswith("  hint: This AscendC API has no implementation")
    tail = feedback_text(compiled(own("compiler/candidate-not-viable-tail-errors-generated.txt")))
    assert tail.splitlines()[-1] == "(3 errors generated; 0 of them are in this log: it was cut)"


def test_feedback_for_runtime_pipes_and_timings() -> None:
    runtime = feedback_text(parse_runtime_error(
        real("runtime/ptoas-a3-aivec-ub-out-of-bounds-507035.txt")))
    assert runtime.startswith("runtime error 507035: vector core exception")
    pipes = feedback_text(parse_pipe_utilization(
        real("msprof/hammingdist-topk-PipeUtilization-no-bw-cols.csv")))
    assert pipes.splitlines()[0].startswith("bottleneck: aiv_vec 70.3% of core time")
    timing = feedback_text(
        parse_op_basic_info(real("msprof/neo-pan-cann852-OpBasicInfo-mix.csv")))
    assert timing == ("main_kernel_mix_aic (mix): 9.22 us, block dim 1, mix block dim 2, "
                      "1800/1800 MHz")
    triton = feedback_text(parse_triton_ascend_error(
        real("triton-ascend/sglang-16360-bishengir-unknown-target.txt")))
    assert "unknown_target" in triton
    assert "hint:" in triton


def test_own_feedback_for_runtime_pipes_and_timings() -> None:
    runtime = feedback_text(parse_runtime_error(
        own("runtime/aclrtSynchronizeStream-aivec-ub-out-of-bounds-507035.txt"))).splitlines()
    assert runtime[0] == ("runtime error 507035: vector core exception; VEC instruction error: "
                          "the ub address out of bounds")
    assert runtime[1] == (f"  api aclrtSynchronizeStream, at {RUNS}/20260914_081502_nightly/"
                          "cases/Rowmax/rowmax_f16/main.cpp:131, core aivec, id EZ9999")
    assert runtime[2].startswith("  hint: A vector instruction touched UB")
    inferred = feedback_text(parse_runtime_error(
        own("runtime/torch-npu-rank-warning-aivec-no-code-507035.txt")))
    assert inferred.startswith("runtime error 507035 (inferred): vector core exception")
    pipes = feedback_text(parse_pipe_utilization(
        own("msprof/layernorm-custom-PipeUtilization-no-bw-cols.csv"))).splitlines()
    assert pipes[0] == "bottleneck: aiv_mte2 60.8% of core time (59.47 us over 2 core(s))"
    assert pipes[1] == "  then: aiv_vec 23.3%, aiv_scalar 18.1%, aiv_mte3 4.7%"
    assert pipes[2] == "  core time 48.45-49.42 us over 2 core(s)"
    assert "double buffering" in pipes[3]
    timing = feedback_text(
        parse_op_basic_info(own("msprof/matmul-leakyrelu-mix-OpBasicInfo.csv")))
    assert timing == ("matmul_leakyrelu_mix_aic (mix): 212.365005 us, block dim 20, mix block "
                      "dim 40, 1800/1800 MHz")
    statistic = feedback_text(parse_op_statistic(own("msprof/op_statistic_two_types.csv")))
    assert statistic.splitlines()[1] == (
        "rope_custom (AI_VECTOR_CORE) x16: avg 37.69 us (min 36.71, max 39.84)")
    triton = feedback_text(parse_triton_ascend_error(
        own("triton-ascend/ub-overflow-note-rank-prefixed.txt")))
    assert triton.startswith("/home/ci/opbot-ops/triton_kernels/fused_rope_kernel.py:118: "
                             "triton-ascend ub_overflow: ub overflow")


def test_feedback_limits_long_lists() -> None:
    diags = [Diagnostic(severity="error", message=f"e{i}", file="k.cpp", line=i) for i in range(30)]
    text = feedback_text(diags, limit=3)
    assert text.count(": error: ") == 3
    assert "27 more diagnostics" in text


def test_results_are_plain_json() -> None:
    report = compiled(real("compiler/pto-isa-no-matching-function-SYNCALL-full.txt"))
    document = json.loads(json.dumps(to_json(report)))
    assert document["diagnostics"][0]["notes"][0]["line"] == 67
    pipes = parse_pipe_utilization(
        real("msprof/neo-pan-real_cann_minimal-PipeUtilization-mix.csv"))
    assert json.loads(json.dumps(pipes.to_json()))["bottleneck"] == "aic_scalar"


def test_own_results_are_plain_json() -> None:
    report = compiled(own("compiler/no-matching-function-two-candidates.txt"))
    document = json.loads(json.dumps(to_json(report)))
    assert document["diagnostics"][0]["notes"][1]["line"] == 77
    assert document["failed_targets"] == [
        "CMakeFiles/cross_core_barrier_kernel.dir/cross_core_barrier_kernel.cpp.o"]
    pipes = parse_pipe_utilization(own("msprof/matmul-leakyrelu-PipeUtilization-mix.csv"))
    assert json.loads(json.dumps(pipes.to_json()))["bottleneck"] == "aic_cube"
    runtime = parse_runtime_error(own("runtime/cann-error-EE1001-no-context-107002.txt"))
    assert json.loads(json.dumps(to_json([runtime])))[0]["error_ids"] == ["EE1001"]


# -- coverage of the fixtures and samples --------------------------------------------------

TEST_FILES = ("test_ascend_parsers.py", "test_ascend_detect.py", "test_doctor.py")


def _test_file(name: str) -> Path:
    """A test module by name, wherever under tests/ it lives."""
    [path] = [path for path in (REPO / "tests").rglob(name) if DATA not in path.parents]
    return path


def _test_sources() -> str:
    return "".join(_test_file(name).read_text(encoding="utf-8") for name in TEST_FILES)


def test_every_committed_fixture_is_used_by_a_test() -> None:
    """Each own fixture and licensed sample's name appears in one of the Ascend test files.
    Static, so it holds under pytest-xdist too."""
    sources = _test_sources()
    unused = sorted(str(path.relative_to(ASCEND)) for path in ASCEND.rglob("*")
                    if path.is_file() and path.name != "SOURCES.md" and path.name not in sources)
    assert unused == []
    assert len(list(OWN.rglob("*.*"))) >= 60  # the own fixtures are there (not only samples)


def test_every_real_sample_is_used_by_a_test() -> None:
    samples = shared_samples()
    if not samples.is_dir():
        pytest.skip(f"real samples not available: {samples} is missing")
    sources = _test_sources()
    unused = sorted(str(path.relative_to(samples)) for path in samples.rglob("*")
                    if path.is_file() and path.name != "SOURCES.md"
                    and path.name not in sources)
    assert unused == []


def test_only_licensed_samples_are_committed() -> None:
    """Everything under tests/data/ascend outside own/ is a licensed sample listed in SOURCES.md
    with its licence."""
    sources = (ASCEND / "SOURCES.md").read_text(encoding="utf-8")
    rows = {line.split("`")[1]: line for line in sources.splitlines()
            if line.startswith("| `")}
    copied = sorted(str(path.relative_to(ASCEND)) for path in ASCEND.rglob("*")
                    if path.is_file() and path.name != "SOURCES.md"
                    and OWN not in path.parents)
    assert copied == sorted(rows)
    assert all("MIT" in rows[name] or "Apache-2.0" in rows[name] for name in copied)
