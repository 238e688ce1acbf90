"""Every backend through the same agent loop: the contract the registry promises.

Each backend in the registry runs with the real `openai` client against a scripted server
on loopback, and a scripted runner standing in for the device (it reads the candidate the
workbench wrote and answers from its text). Whatever the backend, a failed verdict's
feedback must reach the next request, a passed one must stop the loop and publish the
package with PERF.md and the transcript, a machine that cannot verify must never call a
draft passed, tuning must keep the fastest verified draft, and replay must agree.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bot.agent.backends import backend_names, get_backend
from bot.agent.conversation import TokenCount
from bot.agent.llm import Completion, LLMSettings, OpenAIChatClient
from bot.agent.loop import TUNING_SKIPPED, generate
from bot.agent.outcome import Budget, GenerateOutcome, LLMChoice
from bot.agent.replay import replay_transcript
from bot.spec import OpSpec, load_spec
from runners.base import BACKENDS as RUNNER_BACKENDS
from runners.base import Availability, Failure, Timing, VerifyRequest, VerifyResult
from tests.fake_llm import ScriptedLLM, Step
from tests.support import DATA, EXAMPLES, REPO

KEY = "sk-opbot-contract-5c1e0d"
ASCEND_KERNEL = (DATA / "ascendc_golden" / "legacy" / "gelu" / "ascendc" /
                 "gelu_kernel.cpp").read_text(encoding="utf-8")


# A well-formed reply per backend, told apart by a mark: a new backend adds its own here.
REPLIES: dict[str, Callable[[str], str]] = {
    "triton": lambda mark: (f"Here it is.\n\n```python file=model_new.py\nimport torch\n\n\n"
                            f"class ModelNew(torch.nn.Module):\n    pass  # {mark}\n```\n"),
    "ascendc": lambda mark: (f"Here it is.\n\n```cpp file=gelu_kernel.cpp\n// {mark}\n"
                             f"{ASCEND_KERNEL}\n```\n"),
}


def _reply(backend: str, mark: str) -> Step:
    return Step(content=REPLIES[backend](mark))


def _timing(device: str, milliseconds: float) -> Timing:
    return Timing(device=device, shapes=[[4096]], trials=20, candidate_ms=milliseconds,
                  candidate_min_ms=milliseconds, candidate_max_ms=milliseconds,
                  reference_ms=1.0, speedup=1.0 / milliseconds)


def _text_of(path: Path) -> str:
    if path.is_dir():
        return "\n".join(item.read_text(encoding="utf-8", errors="replace")
                         for item in sorted(path.rglob("*")) if item.is_file())
    return path.read_text(encoding="utf-8")


@dataclass
class ScriptedRunner:
    """A device stand-in: the verdict comes from the candidate's text (its marks)."""

    device: str = "npu (scripted)"
    available: bool = True
    speeds: dict[str, float] = field(default_factory=dict)  # mark -> median ms
    requests: list[VerifyRequest] = field(default_factory=list)
    name: str = "scripted"

    def availability(self) -> Availability:
        return Availability(self.available, self.device if self.available else "none",
                            "ready" if self.available else "no device here (scripted)")

    def verify(self, request: VerifyRequest) -> VerifyResult:
        self.requests.append(request)
        text = _text_of(request.candidate)
        if "WRONG" in text:
            return VerifyResult(status="failed", cases=[], stages=[], device=self.device,
                                reasons=[Failure(check="mismatch",
                                                 message="output 0 differs: MARK-MISMATCH")])
        speed = next((ms for mark, ms in self.speeds.items() if mark in text), 2.0)
        return VerifyResult(status="passed", reasons=[], cases=[], stages=[],
                            device=self.device,
                            timing=_timing(self.device, speed) if request.time_it else None)


@pytest.fixture
def spec(tmp_path: Path) -> OpSpec:
    folder = tmp_path / "gelu"
    shutil.copytree(EXAMPLES / "gelu", folder)
    return load_spec(folder / "op.yaml")


def _run(server: ScriptedLLM, spec: OpSpec, out: Path, backends: list[str],
         runners: dict[str, ScriptedRunner], budget: Budget | None = None) -> GenerateOutcome:
    settings = LLMSettings(base_url=server.base_url, model="scripted-model", api_key=KEY,
                           max_retries=0)
    choice = LLMChoice(client=OpenAIChatClient(settings), model=settings.model, api_key=KEY)
    return generate(spec, backend=backends if len(backends) > 1 else backends[0], out=out,
                    progress=lambda _message: None, llm=choice,
                    budget=budget or Budget(tuning_attempts=0), timeout_s=60.0,
                    runners=runners)


BACKENDS = backend_names()


def test_the_registry_names_every_backend_once() -> None:
    assert len(set(BACKENDS)) == len(BACKENDS) >= 2
    assert set(REPLIES) == set(BACKENDS), "give the contract suite a reply for each backend"


def test_the_spec_schema_and_the_runners_know_every_registered_backend() -> None:
    # A backend the registry offers must be writable in op.yaml and runnable by a runner.
    schema = json.loads((REPO / "bot" / "schemas" / "op-spec.schema.json").read_text(
        encoding="utf-8"))
    assert schema["properties"]["targets"]["items"]["enum"] == list(BACKENDS)
    assert RUNNER_BACKENDS == BACKENDS
    for name in BACKENDS:
        assert get_backend(name).name == name
        assert get_backend(name).title


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_failed_verdict_is_fed_back_and_a_pass_publishes(
        backend: str, spec: OpSpec, tmp_path: Path) -> None:
    runner = ScriptedRunner()
    out = tmp_path / "out"
    with ScriptedLLM([_reply(backend, "WRONG first"), _reply(backend, "second")]) as server:
        outcome = _run(server, spec, out, [backend], {backend: runner})
    assert (outcome.status, outcome.attempts, outcome.backend) == ("passed", 2, backend)
    assert "MARK-MISMATCH" in server.requests[1].last_user_message()
    assert len(runner.requests) == 2
    kernel = next(out / path for path in get_backend(backend).kernel_paths(spec.name)
                  if (out / path).is_file())
    assert "second" in kernel.read_text(encoding="utf-8")
    for name in ("op.yaml", "reference.py", "PERF.md", "transcript.jsonl"):
        assert (out / name).is_file(), name
    perf = (out / "PERF.md").read_text(encoding="utf-8")
    assert get_backend(backend).title in perf
    assert "**passed**" in perf
    assert KEY not in (out / "transcript.jsonl").read_text(encoding="utf-8")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_reply_without_a_candidate_is_answered_not_judged(
        backend: str, spec: OpSpec, tmp_path: Path) -> None:
    judge = ScriptedRunner()
    with ScriptedLLM([Step(content="I would tile it over the cores."),
                 _reply(backend, "after prose")]) as server:
        outcome = _run(server, spec, tmp_path / "out", [backend], {backend: judge})
    assert (outcome.status, outcome.attempts) == ("passed", 2)
    assert len(judge.requests) == 1
    assert "block" in server.requests[1].last_user_message()  # asks for fenced files


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_spent_budget_fails_with_the_last_error_and_still_writes(
        backend: str, spec: OpSpec, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with ScriptedLLM([_reply(backend, "WRONG one"), _reply(backend, "WRONG two")]) as server:
        outcome = _run(server, spec, out, [backend], {backend: ScriptedRunner()},
                       Budget(attempts=2, tuning_attempts=0))
    assert (outcome.status, outcome.stopped_because) == ("failed", "budget")
    assert "MARK-MISMATCH" in outcome.message
    assert "FAILED" in (out / "PERF.md").read_text(encoding="utf-8") or \
        "failed" in (out / "PERF.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("backend", BACKENDS)
def test_nothing_is_called_passed_where_nothing_can_verify(
        backend: str, spec: OpSpec, tmp_path: Path) -> None:
    runner = ScriptedRunner(available=False)
    out = tmp_path / "out"
    with ScriptedLLM([_reply(backend, "only")]) as server:
        outcome = _run(server, spec, out, [backend], {backend: runner})
    assert (outcome.status, outcome.stopped_because) == ("failed", "unverified")
    assert runner.requests == []
    assert "no device here (scripted)" in outcome.message
    perf = (out / "PERF.md").read_text(encoding="utf-8")
    assert "not measured" in perf.lower()
    assert "**passed**" not in perf


@pytest.mark.parametrize("backend", BACKENDS)
def test_tuning_keeps_the_fastest_verified_draft(backend: str, spec: OpSpec,
                                                 tmp_path: Path) -> None:
    runner = ScriptedRunner(speeds={"FAST": 0.5, "SLOW": 3.0})
    out = tmp_path / "out"
    steps = [_reply(backend, "first"), _reply(backend, "SLOW tuned"),
             _reply(backend, "FAST tuned")]
    with ScriptedLLM(steps) as server:
        outcome = _run(server, spec, out, [backend], {backend: runner},
                       Budget(tuning_attempts=2))
    assert outcome.status == "passed"
    assert outcome.verification is not None
    assert outcome.verification.timing is not None
    assert outcome.verification.timing.candidate_ms == 0.5
    assert "2 ms" in server.requests[1].last_user_message()  # the timing is the feedback
    kernel = next(out / path for path in get_backend(backend).kernel_paths(spec.name)
                  if (out / path).is_file())
    assert "FAST tuned" in kernel.read_text(encoding="utf-8")


@pytest.mark.parametrize("backend", BACKENDS)
def test_interpreter_timings_tune_nothing(backend: str, spec: OpSpec, tmp_path: Path) -> None:
    runner = ScriptedRunner(device="cpu (Triton interpreter)")
    with ScriptedLLM([_reply(backend, "first")]) as server:
        outcome = _run(server, spec, tmp_path / "out", [backend], {backend: runner},
                       Budget(tuning_attempts=2))
    assert outcome.status == "passed"
    assert TUNING_SKIPPED in outcome.notes
    assert len(server.requests) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_replay_agrees_with_the_run(backend: str, spec: OpSpec, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with ScriptedLLM([_reply(backend, "WRONG first"), _reply(backend, "second")]) as server:
        _run(server, spec, out, [backend], {backend: ScriptedRunner()})
    replayed = replay_transcript(out / "transcript.jsonl", runners={backend: ScriptedRunner()})
    assert [item.replayed for item in replayed.attempts] == ["failed", "passed"]
    assert replayed.consistent


def test_both_backends_side_by_side_share_a_package_and_compare(spec: OpSpec,
                                                                tmp_path: Path) -> None:
    first, second = BACKENDS[:2]
    runners = {first: ScriptedRunner(speeds={"mine": 0.3}),
               second: ScriptedRunner(speeds={"mine": 0.9})}
    out = tmp_path / "out"
    with ScriptedLLM([_reply(first, "mine"), _reply(second, "mine")]) as server:
        outcome = _run(server, spec, out, [first, second], runners)
    assert outcome.status == "passed"
    assert [item.backend for item in outcome.backends] == [first, second]
    # Spend counts every backend's conversation: the ledger charges all of it.
    assert outcome.tokens.total == sum(item.tokens.total for item in outcome.backends) > 0
    assert outcome.recommended == first
    data = outcome.to_json()
    assert data["recommended"] == first
    assert len(data["backends"]) == 2
    for name in (first, second):
        assert any((out / path).is_file() for path in get_backend(name).kernel_paths(spec.name))
        assert (out / f"transcript-{name}.jsonl").is_file()
    perf = (out / "PERF.md").read_text(encoding="utf-8")
    assert "## Comparison" in perf
    row = next(line for line in perf.splitlines()
               if line.startswith(f"| {get_backend(first).title} |"))
    assert "**recommended**" in row
    assert GenerateOutcome.from_json(data).recommended == first
    # The package's spec names both: a later review or /regen iterates on both.
    assert load_spec(out / "op.yaml").targets == (first, second)


def test_side_by_side_recommends_only_a_verified_backend(spec: OpSpec, tmp_path: Path) -> None:
    first, second = BACKENDS[:2]
    runners = {first: ScriptedRunner(speeds={"mine": 0.1}),
               second: ScriptedRunner(speeds={"mine": 0.9})}
    out = tmp_path / "out"
    with ScriptedLLM([_reply(first, "WRONG mine"), _reply(first, "WRONG again"),
                      _reply(second, "mine")]) as server:
        outcome = _run(server, spec, out, [first, second], runners,
                       Budget(attempts=2, tuning_attempts=0))
    assert [item.status for item in outcome.backends] == ["failed", "passed"]
    assert outcome.recommended == second
    assert outcome.status == "passed"


def test_negative_token_counts_from_an_endpoint_give_no_budget_back() -> None:
    tokens = TokenCount()
    tokens.add(Completion(text="", prompt_tokens=-5000, completion_tokens=-7))
    tokens.add(Completion(text="", prompt_tokens=10, completion_tokens=3))
    assert (tokens.prompt, tokens.completion) == (10, 3)
