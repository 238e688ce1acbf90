"""The Ascend C agent loop: the real `openai` client against a scripted server on loopback,
and an Ascend C backend whose toolchain and runner steps are played by the test.

Lint and tiling findings must reach the next request before any compiler runs; compiler
errors must come back as file:line with the message and the source line; without a runner
the package is written but never called passed."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from bot.agent.backends.ascendc.checks import static_check, tiling_problems
from bot.agent.backends.ascendc.reply import parse_ascendc_reply
from bot.agent.backends.ascendc.skeleton import Skeleton, skeleton_from_package
from bot.agent.backends.ascendc.workbench import AscendCWorkbench
from bot.agent.backends.base import BenchContext
from bot.agent.llm import LLMSettings, OpenAIChatClient
from bot.agent.loop import generate
from bot.agent.outcome import Budget, GenerateOutcome, LLMChoice
from bot.agent.replay import ReplayReport, replay_transcript
from bot.agent.reply import ReplyError
from bot.spec import OpSpec, load_spec
from runners.ascendc.backend import AscendCBackend, Toolchain, detect_toolchain
from runners.ascendc.package import Step as BuildStep
from runners.ascendc.steps import StepOutcome
from tests.fake_llm import ScriptedLLM, Step
from tests.support import EXAMPLES, run_opbot
from tests.support_ascend import RecordingJudge, RecordingStepRunner

KEY = "sk-opbot-ascend-3b9d7e21c4"
MISSING = Toolchain(False, "no CANN toolkit found (test)")
FOUND = Toolchain(True, "", "/opt/cann", "8.3.RC1", "legacy")
KERNEL = "gelu_kernel.cpp"
FREE_OUT = "outQueue0_.FreeTensor(out0);"


@pytest.fixture(scope="module")
def offline(tmp_path_factory: pytest.TempPathFactory) -> Skeleton:
    """The offline generator's legacy package for the gelu example (the starting draft)."""
    folder = tmp_path_factory.mktemp("offline")
    spec = load_spec(EXAMPLES / "gelu" / "op.yaml")
    assert spec.reference_path is not None
    runner = _backend(MISSING)
    context = BenchContext(spec=spec, reference=spec.reference_path, workdir=folder,
                           progress=lambda _message: None, timeout_s=60.0, drafting="offline",
                           runner=runner)
    drafted = AscendCWorkbench(context, runner, "legacy", runner.availability()).offline_package()
    assert drafted.status == "generated", drafted.reason
    return skeleton_from_package(drafted.files)


@pytest.fixture
def spec(tmp_path: Path) -> OpSpec:
    folder = tmp_path / "gelu"
    shutil.copytree(EXAMPLES / "gelu", folder)
    return load_spec(folder / "op.yaml")


def _good(offline: Skeleton) -> str:
    # A reviewer's touch, so the written package provably holds the model's kernel.
    return "// drafted by the scripted model\n" + offline.text(KERNEL)


def _leaky(offline: Skeleton) -> str:
    kernel = _good(offline)
    assert FREE_OUT in kernel
    return kernel.replace(FREE_OUT, "", 1)


def _cpp(files: dict[str, str]) -> Step:
    blocks = "\n\n".join(f"```cpp file={name}\n{text}\n```" for name, text in files.items())
    return Step(content=f"Here are the files.\n\n{blocks}\n")


def _backend(toolchain: Toolchain, runner: RecordingStepRunner | None = None) -> AscendCBackend:
    return AscendCBackend(detect=lambda: toolchain, runner=runner or RecordingStepRunner(),
                          soc="Ascend910B3", npu_arch="dav-2201", judge=RecordingJudge())


def _generate(server: ScriptedLLM, spec: OpSpec, out: Path, backend: AscendCBackend,
              budget: Budget | None = None) -> GenerateOutcome:
    settings = LLMSettings(base_url=server.base_url, model="scripted-model", api_key=KEY,
                           max_retries=0)
    choice = LLMChoice(client=OpenAIChatClient(settings), model=settings.model, api_key=KEY)
    return generate(spec, backend="ascendc", out=out, progress=lambda _message: None,
                    llm=choice, budget=budget or Budget(), timeout_s=60.0,
                    runners={"ascendc": backend})


def _assert_key_hidden(server: ScriptedLLM, out: Path) -> None:
    for request in server.requests:
        assert request.headers["authorization"] == f"Bearer {KEY}"
        assert KEY not in json.dumps(request.body)
    assert KEY not in (out / "transcript.jsonl").read_text(encoding="utf-8")


class _BuildsInTurn(RecordingStepRunner):
    """A runner whose build step answers from a list, one outcome per build."""

    def __init__(self, builds: list[tuple[int, str]]) -> None:
        super().__init__()
        self.builds = builds

    def __call__(self, step: BuildStep, cwd: Path) -> StepOutcome:
        if step.name == "build":
            self.outcomes["build"] = self.builds.pop(0)
        return super().__call__(step, cwd)


def test_a_lint_finding_is_fed_back_and_without_cann_nothing_is_called_passed(
        tmp_path: Path, spec: OpSpec, offline: Skeleton) -> None:
    out = tmp_path / "out"
    with ScriptedLLM([_cpp({KERNEL: _leaky(offline)}), _cpp({KERNEL: _good(offline)})]) as server:
        outcome = _generate(server, spec, out, _backend(MISSING))
    assert (outcome.status, outcome.stopped_because, outcome.attempts) == (
        "failed", "unverified", 2)
    assert "no CANN toolkit found (test)" in outcome.message
    assert "--backend ascendc" in outcome.message
    first, second = (request.last_user_message() for request in server.requests)
    assert offline.text(KERNEL).strip() in first  # the offline draft is the starting point
    assert "file=gelu_tiling.h" in first
    assert "file=op.cpp" in first
    assert "[queue-balance]" in second
    assert "outQueue0_" in second
    assert "[queue-balance]" not in first
    written = (out / "ascendc" / KERNEL).read_text(encoding="utf-8")
    assert written.strip() == _good(offline).strip()
    assert json.loads((out / "ascendc" / "opbot.json").read_text())["op"] == "gelu"
    answer = outcome.to_json()
    assert answer["backend"] == "ascendc"
    assert answer["cases"] == []
    assert not any("Triton" in note for note in answer["notes"])
    _assert_key_hidden(server, out)


def test_a_compiler_error_comes_back_located_then_the_package_passes(
        tmp_path: Path, spec: OpSpec, offline: Skeleton) -> None:
    good = _good(offline)
    marker = "AscendC::Foo(y0, x0, count);"
    anchor = "const AscendC::LocalTensor<float> s0 = Slot(0);"
    assert anchor in good
    broken = good.replace(anchor, f"{anchor}\n        {marker}", 1)
    line = broken.splitlines().index(f"        {marker}") + 1
    error = (f"/runner/ops/gelu/ascendc/{KERNEL}:{line}:9: error: no member named 'Foo' in "
             "namespace 'AscendC'\n1 error generated.\n")
    runner = _BuildsInTurn([(2, error), (0, "built")])
    with ScriptedLLM([_cpp({KERNEL: broken}), _cpp({KERNEL: good})]) as server:
        # Tuning off (tests/agent/test_tuning.py and the contract suite tune): each draft
        # is built once.
        outcome = _generate(server, spec, tmp_path / "out", _backend(FOUND, runner),
                            budget=Budget(tuning_attempts=0))
    assert (outcome.status, outcome.stopped_because, outcome.attempts) == (
        "passed", "passed", 2), outcome.message
    second = server.requests[1].last_user_message()
    assert f"{KERNEL}:{line}: error: no member named 'Foo' in namespace 'AscendC'" in second
    assert marker in second  # the offending source line, read from the draft
    assert [step.name for step in runner.steps].count("build") == 2
    assert outcome.verification is not None
    assert outcome.verification.device.startswith("npu")
    assert (tmp_path / "out" / "ascendc" / KERNEL).read_text().strip() == good.strip()
    _assert_key_hidden(server, tmp_path / "out")

    # Replayed on a runner: both drafts rebuilt from the transcript and tested again.
    again = _BuildsInTurn([(2, error), (0, "built")])
    report = _replay(tmp_path / "out" / "transcript.jsonl", _backend(FOUND, again))
    assert [(a.recorded, a.replayed) for a in report.attempts] == [
        ("failed", "failed"), ("passed", "passed")]
    assert report.consistent
    assert report.notes == []
    assert [step.name for step in again.steps].count("build") == 2


def _replay(transcript: Path, backend: AscendCBackend) -> ReplayReport:
    return replay_transcript(transcript, runners={"ascendc": backend})


def test_replay_rebuilds_each_draft_and_catches_a_doctored_transcript(
        tmp_path: Path, spec: OpSpec, offline: Skeleton) -> None:
    out = tmp_path / "out"
    with ScriptedLLM([_cpp({KERNEL: _leaky(offline)}), _cpp({KERNEL: _good(offline)})]) as server:
        assert _generate(server, spec, out, _backend(MISSING)).stopped_because == "unverified"
    transcript = out / "transcript.jsonl"
    run = run_opbot("replay", str(transcript), "--json")  # no CANN here: the static stage
    assert run.code == 0, run.stdout + run.stderr
    report = run.json()
    assert [(a["recorded"], a["replayed"]) for a in report["attempts"]] == [
        ("static-findings", "static-findings"), ("static-clean", "static-clean")]
    assert "[queue-balance]" in report["attempts"][0]["reasons"][0]["message"]

    # A transcript whose clean draft was swapped for the leaky one no longer agrees.
    lines = transcript.read_text(encoding="utf-8").splitlines()
    doctored = []
    for line in lines:
        entry = json.loads(line)
        if entry["kind"] == "candidate" and entry["attempt"] == 2:
            entry["files"] = {KERNEL: _leaky(offline)}
        doctored.append(json.dumps(entry))
    transcript.write_text("\n".join(doctored) + "\n", encoding="utf-8")
    run = run_opbot("replay", str(transcript), "--json")
    assert run.code == 1
    assert run.json()["attempts"][1]["replayed"] == "static-findings"


def test_the_budget_stops_the_loop(tmp_path: Path, spec: OpSpec, offline: Skeleton) -> None:
    leaky = _cpp({KERNEL: _leaky(offline)})
    with ScriptedLLM([leaky, leaky, leaky]) as server:
        outcome = _generate(server, spec, tmp_path / "out", _backend(MISSING),
                            budget=Budget(attempts=2))
    assert (outcome.status, outcome.stopped_because, outcome.attempts) == (
        "failed", "budget", 2)
    assert len(server.requests) == 2
    assert "queue-balance" in outcome.message
    assert any("attempts (2)" in note for note in outcome.notes)


def test_a_reply_that_writes_the_build_is_rejected(tmp_path: Path, spec: OpSpec,
                                                   offline: Skeleton) -> None:
    cmake = "# the model's own build\nproject(mine)\n"
    replies = [_cpp({KERNEL: _good(offline), "CMakeLists.txt": cmake}),
               _cpp({KERNEL: _good(offline)})]
    with ScriptedLLM(replies) as server:
        outcome = _generate(server, spec, tmp_path / "out", _backend(MISSING))
    assert (outcome.stopped_because, outcome.attempts) == ("unverified", 2)
    second = server.requests[1].last_user_message()
    assert "CMakeLists.txt" in second
    assert "may write only" in second
    written = (tmp_path / "out" / "ascendc" / "CMakeLists.txt").read_text(encoding="utf-8")
    assert written == offline.text("CMakeLists.txt")


def test_replies_are_parsed_to_the_writable_files(offline: Skeleton) -> None:
    writable = offline.writable
    assert parse_ascendc_reply("```cpp\nint k;\n```", writable) == {KERNEL: "int k;\n"}
    named = parse_ascendc_reply(f"```cpp file={KERNEL}\nk\n```\n```cpp file=op.cpp\nb\n```",
                                writable)
    assert named == {KERNEL: "k\n", "op.cpp": "b\n"}
    with pytest.raises(ReplyError, match=re.escape("build.sh")):
        parse_ascendc_reply(f"```cpp file={KERNEL}\nk\n```\n```sh file=build.sh\nx\n```",
                            writable)
    with pytest.raises(ReplyError, match=re.escape(KERNEL)):
        parse_ascendc_reply("```cpp file=op.cpp\nb\n```", writable)


def test_the_tiling_simulator_catches_a_header_out_of_step_with_the_kernel(
        offline: Skeleton) -> None:
    assert static_check(offline, [1000, 1 << 24]).ok  # the offline package is clean
    header = offline.text("gelu_tiling.h")
    assert "8 * 1024 + 256" in header
    greedy = offline.compose({"gelu_tiling.h": header.replace("8 * 1024 + 256", "256")})
    problems = tiling_problems(greedy, [1000, 1 << 24])
    assert any("UB overflow" in problem for problem in problems)
    assert tiling_problems(greedy, [1000]) == []  # small problems fit either way


@pytest.fixture
def no_cann_here() -> None:
    toolchain = detect_toolchain()
    if toolchain.found:
        pytest.skip(f"this machine has CANN ({toolchain.home}); the unverified path needs none")


@pytest.mark.usefixtures("no_cann_here")
def test_cli_json_without_cann(tmp_path: Path, spec: OpSpec, offline: Skeleton) -> None:
    out = tmp_path / "pkg"
    with ScriptedLLM([_cpp({KERNEL: _good(offline)})]) as server:
        run = run_opbot("generate", str(spec.spec_path), "--backend", "ascendc", "--llm",
                        "openai", "--llm-base-url", server.base_url, "--llm-model", "m",
                        "--out", str(out), "--json", env={"OPBOT_LLM_API_KEY": KEY})
    assert run.code == 1, run.stderr[-2000:]
    answer = run.json()
    assert (answer["status"], answer["stopped_because"], answer["attempts"]) == (
        "failed", "unverified", 1)
    assert answer["notes"] == []
    assert answer["transcript"] == str(out / "transcript.jsonl")
    assert KEY not in run.stdout + run.stderr
    _assert_key_hidden(server, out)
