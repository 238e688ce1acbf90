"""`opbot generate --backend ascendc` and `opbot verify --backend ascendc`: the package is
written by the offline generator (through the agent loop), verified where CANN is, and never
called passed where not."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bot.agent.loop import generate
from bot.agent.outcome import GenerateOutcome
from bot.spec import OpSpec, load_spec
from runners.ascendc.backend import AscendCBackend, Toolchain, detect_toolchain
from tests.support import EXAMPLES, run_opbot
from tests.support_ascend import RecordingJudge, RecordingStepRunner

MISSING = Toolchain(False, "no CANN toolkit found (test)")
FOUND = Toolchain(True, "", "/opt/cann", "8.3.RC1", "legacy")


def _spec(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    shutil.copytree(EXAMPLES / name, folder)
    return folder / "op.yaml"


def _backend(toolchain: Toolchain, runner: RecordingStepRunner | None = None,
             judge: RecordingJudge | None = None) -> AscendCBackend:
    return AscendCBackend(detect=lambda: toolchain, runner=runner or RecordingStepRunner(),
                          soc="Ascend910B3", npu_arch="dav-2201",
                          judge=judge or RecordingJudge())


def _generate(spec: OpSpec, out: Path, backend: AscendCBackend) -> GenerateOutcome:
    """The offline generator's Ascend C package through the loop, on the given runner."""
    return generate(spec, backend="ascendc", out=out, progress=lambda _m: None,
                    runners={"ascendc": backend})


def test_without_cann_the_package_is_written_but_not_called_passed(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path, "gelu"))
    out = tmp_path / "out" / "gelu"
    outcome = _generate(spec, out, _backend(MISSING))
    assert (outcome.status, outcome.stopped_because) == ("failed", "unverified")
    assert "no CANN toolkit found (test)" in outcome.message
    assert "--backend ascendc" in outcome.message  # says how to verify it on a runner
    manifest = json.loads((out / "ascendc" / "opbot.json").read_text())
    assert manifest["generation"] == "legacy"
    assert (out / "ascendc" / "gelu_kernel.cpp").read_text().count("AscendC::") > 3
    assert load_spec(out / "op.yaml").name == "gelu"


def test_with_a_toolchain_the_package_is_built_and_judged(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path, "gelu"))
    runner, judge = RecordingStepRunner(), RecordingJudge()
    outcome = _generate(spec, tmp_path / "gelu", _backend(FOUND, runner, judge))
    assert outcome.status == "passed", outcome.message
    assert outcome.verification is not None
    assert outcome.verification.device.startswith("npu")
    assert [step.name for step in runner.steps][:3] == ["clean-cache", "configure", "build"]
    assert "test" not in [step.name for step in runner.steps]
    request = judge.requests[0]
    assert request.backend == "ascendc"
    assert request.reference.name == "reference.py"
    assert request.candidate.name == "opbot_candidate.py"
    assert "torch.ops.opbot_gelu.gelu" in judge.shims[0]
    assert {case.name for case in request.cases} >= {"shape0-float32", "shape0-float16"}


def test_a_failing_build_is_a_failure_with_the_compiler_message(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path, "gelu"))
    error = "gelu_kernel.cpp:12:3: error: use of undeclared identifier 'Foo'\n"
    runner = RecordingStepRunner({"build": (2, error)})
    outcome = _generate(spec, tmp_path / "gelu", _backend(FOUND, runner))
    assert (outcome.status, outcome.stopped_because) == ("failed", "no_more_drafts")
    assert "undeclared identifier" in outcome.message


def test_a_reduction_is_unsupported_with_a_pointer_to_triton(tmp_path: Path) -> None:
    # A softmax over the first dimension: neither elementwise nor the row pattern (which
    # reduces the last dimension); softmax over the last one is generated (the row pattern).
    path = _spec(tmp_path, "softmax")
    reference = path.parent / "reference.py"
    text = reference.read_text(encoding="utf-8")
    assert "torch.softmax(x, dim=-1)" in text
    reference.write_text(text.replace("torch.softmax(x, dim=-1)", "torch.softmax(x, dim=0)"),
                         encoding="utf-8")
    spec = load_spec(path)
    outcome = _generate(spec, tmp_path / "out", _backend(MISSING))
    assert outcome.status == "unsupported"
    assert outcome.out is None
    assert not (tmp_path / "out").exists()
    assert "Triton backend" in outcome.message


@pytest.fixture
def no_cann_here() -> None:
    toolchain = detect_toolchain()
    if toolchain.found:
        pytest.skip(f"this machine has CANN ({toolchain.home}); the refusal path needs none")


@pytest.mark.usefixtures("no_cann_here")
def test_cli_generate_and_verify_without_cann(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    generated = run_opbot("generate", str(_spec(tmp_path, "gelu")), "--backend", "ascendc",
                        "--llm", "offline", "--out", str(out), "--json")
    assert generated.code == 1, generated.stderr
    answer = json.loads(generated.stdout)
    assert (answer["backend"], answer["status"], answer["stopped_because"]) == (
        "ascendc", "failed", "unverified")
    assert (out / "ascendc" / "opbot.json").is_file()
    verified = run_opbot("verify", str(out / "op.yaml"), str(out), "--backend", "ascendc")
    assert verified.code == 2
    assert "the ascendc backend cannot run here" in verified.stderr
    assert "Traceback" not in verified.stderr
