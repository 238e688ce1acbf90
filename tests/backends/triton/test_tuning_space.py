"""The Triton tuning space: launch knobs read from a candidate's syntax tree, variants that
change only those knobs, and the loop keeping the fastest verified one.

Device timings cannot be produced here: the loop's test times the variants with a runner
answering from a recorded table (label -> median ms, or a failed verification), through
the real Triton workbench and the real loop.
"""

from __future__ import annotations

import ast
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from bot.agent.backends.base import BenchContext, Candidate
from bot.agent.backends.triton import tuning
from bot.agent.backends.triton.offline import generate_offline
from bot.agent.backends.triton.tuning import (
    MAX_BLOCK,
    MAX_VARIANTS,
    TritonVariant,
    tuning_variants,
)
from bot.agent.backends.triton.workbench import TritonWorkbench
from bot.agent.loop import TUNING_SKIPPED, Attempt, Loop
from bot.agent.offline.job import OfflineJob
from bot.agent.outcome import Budget
from bot.agent.report import tuning_table
from bot.agent.transcript import Redactor, Transcript
from bot.spec import OpSpec, load_spec
from runners.base import (
    Availability,
    BackendName,
    Failure,
    Timing,
    VerifyRequest,
    VerifyResult,
)
from tests.agent.table_bench import TableDrafter
from tests.support import DATA, EXAMPLES

EXAMPLE_OPS = sorted(path.name for path in EXAMPLES.iterdir() if (path / "op.yaml").is_file())
CANDIDATES = DATA / "candidates"
_KNOB_INSERT = re.compile(r", num_(?:warps|stages)=\d+")
_DIGITS = re.compile(r"\d+")


def _offline_kernel(op: str) -> str:
    spec = load_spec(EXAMPLES / op / "op.yaml")
    result = generate_offline(OfflineJob(
        EXAMPLES / op / "reference.py", spec.name, cases=spec.cases(),
        init_args=None if spec.init_args is None else list(spec.init_args)))
    assert result.status == "generated", result.reason
    return result.source


@pytest.fixture(scope="module")
def offline_kernels() -> dict[str, str]:
    """What the offline generator writes for each example operator (traced once)."""
    return {op: _offline_kernel(op) for op in EXAMPLE_OPS}


def _only_knobs_changed(original: str, variant: str) -> None:
    """Every line but the knobs' is byte-identical: a changed line differs from its
    original only in integer literals and in an added num_warps=/num_stages=."""
    before, after = original.splitlines(keepends=True), variant.splitlines(keepends=True)
    assert len(before) == len(after)
    for old, new in zip(before, after, strict=True):
        if old != new:
            assert _DIGITS.sub("N", _KNOB_INSERT.sub("", new)) == _DIGITS.sub("N", old), \
                (old, new)


def _assert_valid_space(source: str, variants: list[TritonVariant]) -> None:
    assert 0 < len(variants) <= MAX_VARIANTS
    assert len({variant.label for variant in variants}) == len(variants)
    assert len({variant.source for variant in variants} | {source}) == len(variants) + 1
    for variant in variants:
        ast.parse(variant.source)
        _only_knobs_changed(source, variant.source)
        assert variant.detail


# --------------------------------------------------------------------------- the examples


@pytest.mark.parametrize("op", EXAMPLE_OPS)
def test_each_offline_example_yields_a_bounded_valid_distinct_space(
        op: str, offline_kernels: dict[str, str]) -> None:
    source = offline_kernels[op]
    variants = tuning_variants(source)
    _assert_valid_space(source, variants)
    labels = [variant.label for variant in variants]
    assert any("num_warps=8" in label for label in labels)
    # The generator's launcher helpers fix the GPU's blocks: pointwise ones are tuned.
    if "_pointwise_block(" in source.split("def _launch", 1)[-1]:
        assert any("BLOCK=2048" in label for label in labels)


def test_the_matmul_example_scales_its_tile_with_its_warps_first(
        offline_kernels: dict[str, str]) -> None:
    variants = tuning_variants(offline_kernels["linear_relu"])
    assert variants[0].label == "BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8"
    # The helper's GPU return is what changed; the interpreter's branch is untouched.
    assert "    return 128, 128, 64\n" in variants[0].source
    assert "min(128, max(16, triton.next_power_of_2(m)))" in variants[0].source


def test_loops_get_stages_and_straight_kernels_do_not(offline_kernels: dict[str, str]) -> None:
    looping = [variant.label for variant in tuning_variants(offline_kernels["softmax"])]
    straight = [variant.label for variant in tuning_variants(offline_kernels["relu"])]
    assert any("num_stages=4" in label for label in looping)
    assert not any("num_stages" in label for label in straight)


@pytest.mark.parametrize("path", sorted(CANDIDATES.glob("*__good_*.py")), ids=lambda p: p.stem)
def test_hand_written_candidates_yield_valid_spaces(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    _assert_valid_space(source, tuning_variants(source))


def test_the_limit_bounds_the_space(offline_kernels: dict[str, str]) -> None:
    source = offline_kernels["add"]
    assert len(tuning_variants(source, limit=3)) == 3
    assert tuning_variants(source, limit=0) == []


# --------------------------------------------------------------------------- rewriting

_MODULE_CONSTANT = '''\
import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024  # elements a program handles: é, so offsets are bytes, not characters


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        copy_kernel[(triton.cdiv(n, BLOCK_SIZE),)](x, out, n, BLOCK_SIZE=BLOCK_SIZE)
        return out
'''


def test_a_module_constant_is_the_one_line_that_changes() -> None:
    variants = {variant.label: variant for variant in tuning_variants(_MODULE_CONSTANT)}
    assert list(variants)[:3] == ["BLOCK_SIZE=2048, num_warps=8", "BLOCK_SIZE=2048",
                                  "num_warps=8"]
    bigger = variants["BLOCK_SIZE=2048"].source
    assert bigger == _MODULE_CONSTANT.replace("BLOCK_SIZE = 1024", "BLOCK_SIZE = 2048")
    warps = variants["num_warps=8"].source
    assert warps == _MODULE_CONSTANT.replace("BLOCK_SIZE=BLOCK_SIZE)",
                                             "BLOCK_SIZE=BLOCK_SIZE, num_warps=8)")
    assert variants["num_warps=8"].detail == "num_warps 4 (Triton default) -> 8"
    assert all(int(_DIGITS.findall(label)[0]) <= MAX_BLOCK for label in variants
               if label.startswith("BLOCK"))


def test_literal_launch_options_are_rewritten_in_place() -> None:
    source = _MODULE_CONSTANT.replace(
        "BLOCK_SIZE=BLOCK_SIZE)", "BLOCK_SIZE=BLOCK_SIZE, num_warps=2, num_stages=1)")
    labels = [variant.label for variant in tuning_variants(source)]
    assert "num_warps=4" in labels
    assert not any("num_stages" in label for label in labels)  # no loop to pipeline
    four = next(variant for variant in tuning_variants(source) if variant.label == "num_warps=4")
    assert four.source == source.replace("num_warps=2", "num_warps=4")


def test_variants_run_correctly_on_the_interpreter() -> None:
    """Each variant stays a working candidate: imported and run on a ragged size."""
    values = torch.randn(5000)
    for variant in tuning_variants(_MODULE_CONSTANT)[:4]:
        namespace: dict[str, object] = {}
        exec(compile(variant.source, variant.label, "exec"), namespace)
        model = namespace["ModelNew"]()  # type: ignore[operator]
        torch.testing.assert_close(model(values), values)


# --------------------------------------------------------------------------- left alone

_AUTOTUNED = '''\
import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK_SIZE": 512}, num_warps=4),
                          triton.Config({"BLOCK_SIZE": 1024}, num_warps=8)], key=["n"])
@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        copy_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)](x, out, n)
        return out
'''

_DYNAMIC = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def row_kernel(x_ptr, out_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    row = tl.program_id(0) * n_cols
    tl.store(out_ptr + row + cols, tl.load(x_ptr + row + cols, mask=mask), mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        BLOCK_SIZE = triton.next_power_of_2(x.shape[1])
        num_warps = 8 if BLOCK_SIZE >= 2048 else 4
        row_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK_SIZE=BLOCK_SIZE,
                                  num_warps=num_warps)
        return out
'''

_KERNEL_ONLY = _MODULE_CONSTANT.split("class ModelNew", maxsplit=1)[0]


def _labels(source: str) -> list[str]:
    return [variant.label for variant in tuning_variants(source)]


@pytest.mark.parametrize(("source", "why"), [
    (_AUTOTUNED, "autotuned: the kernel searches its own configs"),
    (_DYNAMIC, "block and warps computed at run time"),
    (_KERNEL_ONLY, "no wrapper launches the kernel"),
    (_MODULE_CONSTANT.replace("(x, out, n, BLOCK_SIZE=BLOCK_SIZE)", "(*args, **options)"),
     "forwarded arguments"),
    (_MODULE_CONSTANT.replace("copy_kernel[(", "self.copy_kernel[("),
     "a launch through an attribute"),
    (_MODULE_CONSTANT.replace("@triton.jit", "@jit").replace(
        "import torch\n", "import torch\nfrom numba import jit\n", 1),
     "a bare @jit that is not triton's"),
    ("def broken(:\n", "not Python"),
    ("", "empty"),
    ("x = " + "(" * 300 + "1" + ")" * 300 + "\n", "too deeply nested"),
    ("x = [" * 5000 + "]" * 5000 + "\n", "deeper than the parser"),
    ("import triton\n\n\n@triton.jit\ndef k(\udc80x):\n    pass\n", "no encodable source"),
    ("\x00", "a null byte"),
])
def test_hostile_sources_yield_nothing(source: str, why: str) -> None:
    assert tuning_variants(source) == [], why


@pytest.mark.parametrize(("edit", "why"), [
    (("BLOCK_SIZE = 1024  #", "BLOCK_SIZE = 1000  #"), "not a power of two"),
    (("BLOCK_SIZE = 1024  #", "BLOCK_SIZE = 1 << 10  #"), "an expression, not a literal"),
    (("BLOCK_SIZE = 1024  #", "BLOCK_SIZE = 1024\nBLOCK_SIZE = 512  #"), "bound twice"),
    (("    def forward(self, x):\n", "    def forward(self, x):\n        global BLOCK_SIZE\n"),
     "rebound through global"),
    (("tl.load(x_ptr + offsets, mask=mask)", "tl.load(x_ptr + offsets)"),
     "an unmasked load relies on full blocks"),
    (("(triton.cdiv(n, BLOCK_SIZE),)](x, out, n, BLOCK_SIZE=BLOCK_SIZE)",
      "(triton.cdiv(n, 1024),)](x, out, n, BLOCK_SIZE=1024)"),
     "the grid repeats the literal"),
    (("        n = x.numel()\n", "        n = x.numel()\n        BLOCK_SIZE = 512 if n else 256\n"),
     "chosen at run time in the wrapper"),
])
def test_unsafe_blocks_are_left_alone_and_warps_still_tuned(edit: tuple[str, str],
                                                           why: str) -> None:
    old, new = edit
    assert old in _MODULE_CONSTANT
    labels = _labels(_MODULE_CONSTANT.replace(old, new))
    assert labels == ["num_warps=8", "num_warps=2"], why


def test_a_covering_block_only_grows() -> None:
    """A row kernel that reads the whole row in one block: a smaller block drops columns."""
    source = _DYNAMIC.replace("BLOCK_SIZE = triton.next_power_of_2(x.shape[1])",
                              "BLOCK_SIZE = 1024").replace("num_warps=num_warps", "num_warps=4")
    labels = _labels(source)
    assert "BLOCK_SIZE=2048" in labels
    assert "BLOCK_SIZE=4096" in labels
    assert not any(label.startswith("BLOCK_SIZE=512") for label in labels)


# --------------------------------------------------------------------------- the loop


class RecordedRunner:
    """The device stand-in: each variant's verdict and median come from a recorded table,
    looked up by the kernel source the workbench wrote."""

    name: BackendName = "triton"

    def __init__(self, device: str, table: dict[str, float | None]) -> None:
        self.device = device
        self.table = table  # kernel source -> median ms; None: verification fails
        self.verified: list[str] = []

    def availability(self) -> Availability:
        return Availability(True, self.device)

    def verify(self, request: VerifyRequest) -> VerifyResult:
        source = request.candidate.read_text(encoding="utf-8")
        self.verified.append(source)
        milliseconds = self.table[source]
        if milliseconds is None:
            return VerifyResult(status="failed", cases=[], stages=[], device=self.device,
                                reasons=[Failure(check="values", message="output 0 differs")])
        return _passed(self.device, milliseconds)


def _passed(device: str, milliseconds: float) -> VerifyResult:
    timing = Timing(device=device, shapes=[[5000]], trials=10, candidate_ms=milliseconds,
                    candidate_min_ms=milliseconds, candidate_max_ms=milliseconds,
                    reference_ms=1.0, speedup=1.0 / milliseconds)
    return VerifyResult(status="passed", reasons=[], cases=[], stages=[], device=device,
                        timing=timing)


@pytest.fixture
def transcript(tmp_path: Path) -> Iterator[Transcript]:
    kept = Transcript(tmp_path / "transcript.jsonl", Redactor([]))
    yield kept
    kept.close()


def _tuning_loop(tmp_path: Path, transcript: Transcript, runner: RecordedRunner,
                 attempts: int) -> tuple[Loop, TritonWorkbench]:
    spec: OpSpec = load_spec(EXAMPLES / "relu" / "op.yaml")
    context = BenchContext(spec=spec, reference=EXAMPLES / "relu" / "reference.py",
                           workdir=tmp_path, progress=lambda _message: None, timeout_s=60.0,
                           drafting="offline", runner=runner)
    bench = TritonWorkbench(context, runner)
    loop = Loop(spec=spec, bench=bench, drafter=TableDrafter([]),
                budget=Budget(tuning_attempts=attempts), transcript=transcript,
                progress=lambda _message: None, workdir=tmp_path)
    return loop, bench


def _drafted(bench: TritonWorkbench) -> Candidate:
    return bench.adopt({bench.kernel: _MODULE_CONSTANT})


def test_the_loop_keeps_the_fastest_verified_variant(tmp_path: Path,
                                                    transcript: Transcript) -> None:
    runner = RecordedRunner("cuda (H100, recorded)", {})
    loop, bench = _tuning_loop(tmp_path, transcript, runner, attempts=4)
    first = _drafted(bench)
    variants = bench.tuning_variants(first)
    recorded = {"BLOCK_SIZE=2048, num_warps=8": 0.8, "BLOCK_SIZE=2048": 0.9,
                "num_warps=8": None,  # the fastest, had it passed: it must not be kept
                "BLOCK_SIZE=512": 1.3}
    assert [variant.label for variant in variants[:4]] == list(recorded)
    runner.table = {variant.candidate.files[bench.kernel]: recorded[variant.label]
                    for variant in variants[:4]}
    kept = loop.tune(Attempt(1, first, _passed(runner.device, 1.0)))
    assert kept.candidate.files[bench.kernel] == variants[0].candidate.files[bench.kernel]
    assert loop.latest is kept.candidate  # the package is written from the kept variant
    assert len(runner.verified) == 4  # the tuning budget: the first four variants
    rows = [(row.label, row.status, row.candidate_ms, row.kept) for row in loop.tuning]
    assert rows == [("as drafted", "passed", 1.0, False),
                    ("BLOCK_SIZE=2048, num_warps=8", "passed", 0.8, True),
                    ("BLOCK_SIZE=2048", "passed", 0.9, False),
                    ("num_warps=8", "failed", None, False),
                    ("BLOCK_SIZE=512", "passed", 1.3, False)]
    table = tuning_table(loop.tuning)
    assert "| BLOCK_SIZE=2048, num_warps=8 | - | passed | 0.8" in "\n".join(table)
    assert [line.endswith("| yes |") for line in table[2:]] == [False, True, False, False,
                                                                 False]


def test_the_interpreter_tunes_nothing(tmp_path: Path, transcript: Transcript) -> None:
    runner = RecordedRunner("cpu (Triton interpreter)", {})
    loop, bench = _tuning_loop(tmp_path, transcript, runner, attempts=4)
    first = Attempt(1, _drafted(bench), _passed(runner.device, 50.0))
    assert loop.tune(first) is first
    assert runner.verified == []
    assert TUNING_SKIPPED in loop.notes
    assert loop.tuning == []


def test_the_workbench_offers_nothing_for_an_autotuned_kernel(tmp_path: Path,
                                                             transcript: Transcript) -> None:
    _, bench = _tuning_loop(tmp_path, transcript, RecordedRunner("cuda", {}), attempts=4)
    assert bench.tuning_variants(bench.adopt({bench.kernel: _AUTOTUNED})) == []


# --------------------------------------------------------------------------- hostile layouts

_LONE_CR_DOC = '"""A docstring with a lone\rcarriage return."""\n' + _MODULE_CONSTANT


@pytest.mark.parametrize(("source", "why"), [
    (_LONE_CR_DOC, "a lone \\r inside a string ends a line for the parser"),
    (_MODULE_CONSTANT.replace("\n", "\r"), "old Mac line endings"),
    (_MODULE_CONSTANT.replace("\n", "\r\n"), "Windows line endings"),
])
def test_line_endings_the_parser_counts_keep_offsets_right(source: str, why: str) -> None:
    variants = {variant.label: variant for variant in tuning_variants(source)}
    assert variants["BLOCK_SIZE=2048"].source == \
        source.replace("BLOCK_SIZE = 1024", "BLOCK_SIZE = 2048"), why
    assert variants["num_warps=8"].source == source.replace(
        "BLOCK_SIZE=BLOCK_SIZE)", "BLOCK_SIZE=BLOCK_SIZE, num_warps=8)"), why
    _assert_valid_space(source, list(variants.values()))


def test_a_rewrite_at_wrong_offsets_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Defence in depth: with offsets counted the old way (\\n only), the lone \\r shifts
    every site; the token check drops each variant that changed more than its knobs."""
    def newlines_only(encoded: bytes) -> list[int]:
        return [0, *(index + 1 for index, byte in enumerate(encoded) if byte == ord("\n"))]

    # Shifted one line down, the block's site lands inside this comment: still Python.
    source = _LONE_CR_DOC.replace("\n\n\n@triton.jit",
                                  "\n# powers of two, as masks assume\n\n@triton.jit")
    monkeypatch.setattr(tuning, "_line_offsets", newlines_only)
    variants = tuning_variants(source)
    for variant in variants:
        _only_knobs_changed(source, variant.source)
    monkeypatch.setattr(tuning, "_only_knobs_differ", lambda *_args: True)
    assert len(tuning_variants(source)) > len(variants)  # what the check dropped


def test_the_token_check_allows_knobs_and_nothing_else() -> None:
    source = _MODULE_CONSTANT
    original = tuning._tokens(source)
    assert original is not None
    knob = tuning._Knob("block", "BLOCK_SIZE", 1024, sites=[tuning._Site(0, 0)])
    settings = [tuning._Setting(knob, 2048)]
    assert tuning._only_knobs_differ(
        original, source.replace("BLOCK_SIZE = 1024", "BLOCK_SIZE = 2048"), settings)
    for forged in (source.replace("@triton.jit", "@triton2048"),
                   source.replace("BLOCK_SIZE = 1024", "BLOCK_SIZE = 2048").replace(
                       "tl.program_id(0)", "tl.program_id(1)"),
                   source.replace("BLOCK_SIZE = 1024", "BLOCK_SIZE = 2048  # more"),
                   source):  # nothing changed: the setting's site was not rewritten
        assert not tuning._only_knobs_differ(original, forged, settings)


def test_a_launch_ending_in_a_trailing_comma_still_gets_warps() -> None:
    source = _MODULE_CONSTANT.replace("BLOCK_SIZE=BLOCK_SIZE)", "BLOCK_SIZE=BLOCK_SIZE,)")
    variants = {variant.label: variant for variant in tuning_variants(source)}
    assert variants["num_warps=8"].source == source.replace(
        "BLOCK_SIZE=BLOCK_SIZE,)", "BLOCK_SIZE=BLOCK_SIZE, num_warps=8,)")


_LOOPING = _MODULE_CONSTANT.replace(
    "    mask = offsets < n\n",
    "    mask = offsets < n\n    for _ in range(2):\n        tl.load(x_ptr + offsets, mask=mask)\n")


@pytest.mark.parametrize(("source", "option"), [
    (_MODULE_CONSTANT.replace("BLOCK_SIZE=BLOCK_SIZE)",
                              "BLOCK_SIZE=BLOCK_SIZE, num_warps=" + "9" * 400 + ")"),
     "num_warps"),
    (_MODULE_CONSTANT.replace("BLOCK_SIZE=BLOCK_SIZE)", "BLOCK_SIZE=BLOCK_SIZE, num_warps=64)"),
     "num_warps"),
    (_LOOPING.replace("BLOCK_SIZE=BLOCK_SIZE)",
                      "BLOCK_SIZE=BLOCK_SIZE, num_stages=" + "1" * 400 + ")"), "num_stages"),
])
def test_absurd_launch_options_are_no_knobs(source: str, option: str) -> None:
    labels = _labels(source)
    assert "BLOCK_SIZE=2048" in labels  # the block is still tuned
    assert not any(option in label for label in labels)


def _many_launches(count: int) -> str:
    launch = ("        copy_kernel[(triton.cdiv(n, BLOCK_SIZE),)]"
              "(x, out, n, BLOCK_SIZE=BLOCK_SIZE)\n")
    return _MODULE_CONSTANT.replace(launch, launch * count)


def test_reading_asks_each_question_once_per_wrapper(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each launch re-walking its wrapper made reading quadratic in the launches."""
    calls: list[str] = []
    walk = tuning._stores

    def counted(tree: ast.AST, name: str) -> list[ast.AST]:
        calls.append(name)
        return walk(tree, name)

    monkeypatch.setattr(tuning, "_stores", counted)
    assert "BLOCK_SIZE=2048" in _labels(_many_launches(tuning.MAX_LAUNCHES))
    assert len(calls) <= 4


def test_too_many_launches_or_too_much_source_yield_nothing_fast() -> None:
    started = time.monotonic()
    assert tuning_variants(_many_launches(1000)) == []  # took 22 s before the cap
    assert tuning_variants(_MODULE_CONSTANT + "#" * tuning.MAX_SOURCE_BYTES + "\n") == []
    assert time.monotonic() - started < 5
