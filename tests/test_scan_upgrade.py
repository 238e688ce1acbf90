"""The nightly scan across a CANN upgrade, end to end on the fake forge.

Two fake toolkits in the layouts `opbot doctor` reads (8.3.RC1 in the ascend-toolkit layout,
9.0.0 with asc-devkit's ASC modules), found by the real detection; a fake build step that
builds every package under 8.3 and, under 9.0, fails the legacy package that calls an
overload 9.0 changed, with a compiler error taken from a real one
(../shared/data/ascend-samples/); the judge that would run the NPU test answers as a passing
device would (no NPU here). Everything else is the real thing: the scan, the agent loop's
offline generator writing for the new generation, git, PyGithub against the fake forge.

Night 1 (8.3): every operator passes, the dashboard is created. Night 2 (9.0): exactly the
broken package fails, with the compiler's file:line; it is regenerated for the ASC
generation and one pull request says which change broke it; healthy operators are left
alone; the dashboard is edited once. Night 3 (9.0 again): nothing changes. A maintainer
closes the pull request: it is not recreated for the same toolchain.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from bot.agent.backends.ascendc.workbench import toolchain_generation
from bot.agent.loop import generate
from bot.agent.outcome import GenerateOutcome
from bot.agent.transcript import Redactor
from bot.events import Plan
from bot.forge.base import Forge
from bot.forge.github.client import GitHubForge
from bot.forge.retrying import RetryingForge
from bot.job_settings import JobOutcome, JobSettings
from bot.jobs import _Job
from bot.publish import BOT_EMAIL
from bot.scan import record_toolchain, verifier
from bot.scan.nightly import NightlyOptions, run_scan
from bot.spec import OpSpec
from runners.ascendc.backend import AscendCBackend, toolchain_from
from runners.ascendc.detect import detect_cann, machine_arch
from runners.ascendc.package import Step
from runners.ascendc.steps import StepOutcome
from runners.base import Timing, VerifyResult
from tests.fakeforge import FakeForge
from tests.support import DATA, REPO
from tests.support_ascend import PASSED, RecordingJudge, RecordingStepRunner, real_sample

REPOSITORY = "octo/kernels"
OPS = ("add", "gelu", "relu")
GOLDEN = DATA / "ascendc_golden" / "legacy"
CHANGED_CALL = "AscendC::Exp("  # the overload the fake 9.0 changed: only gelu calls it


def _toolkit(root: Path, version: str, *, asc: bool) -> Path:
    """A toolkit as it lies on disk: the install info (a real one's text, its version
    changed) and the CMake modules the builds look for."""
    arch = machine_arch()
    home = root / ("cann" if asc else "ascend-toolkit/latest")
    info = real_sample("install/vllm-ascend-3002-ascend_toolkit_install-8.3.RC1-B085.txt")
    text = info.read_text(encoding="utf-8").replace("8.3.RC1", version).replace(
        "aarch64", arch)
    (home / f"{arch}-linux").mkdir(parents=True)
    (home / f"{arch}-linux" / "ascend_toolkit_install.info").write_text(text)
    cmake = home / (f"{arch}-linux/tikcpp" if asc else "compiler/tikcpp") / "ascendc_kernel_cmake"
    cmake.mkdir(parents=True)
    (cmake / "ascendc.cmake").write_text("# ascendc.cmake\n")
    if asc:
        config = home / f"{arch}-linux" / "lib64" / "cmake"
        config.mkdir(parents=True)
        (config / "asc-config.cmake").write_text("# asc-config.cmake\n")
    (home / "set_env.sh").write_text(f"export ASCEND_HOME_PATH={home}\n")
    return home


class FakeCannBuild(RecordingStepRunner):
    """The build step: under 9.0, a legacy kernel calling the changed overload does not
    compile (the error text is a real compiler's, pointed at the kernel's line)."""

    def __init__(self, breaks_legacy_exp: bool, sample: str) -> None:
        super().__init__()
        self.breaks_legacy_exp = breaks_legacy_exp
        self.sample = sample

    def __call__(self, step: Step, cwd: Path) -> StepOutcome:
        if step.name == "build" and self.breaks_legacy_exp:
            error = self._compile_error(cwd)
            if error is not None:
                self.steps.append(step)
                return StepOutcome(step.name, 2, 0.5, error)
        return super().__call__(step, cwd)

    def _compile_error(self, cwd: Path) -> str | None:
        for kernel in sorted(cwd.glob("*_kernel.cpp")):  # legacy sources; ASC ones are .asc
            lines = kernel.read_text(encoding="utf-8").splitlines()
            for number, line in enumerate(lines, start=1):
                if CHANGED_CALL in line:
                    column = line.index(CHANGED_CALL) + 1
                    first = self.sample.splitlines()[0]
                    first = re.sub(r"^\S+?:\d+:\d+:", f"{kernel}:{number}:{column}:", first)
                    return "\n".join([
                        f"[ 50%] Building CXX object CMakeFiles/{cwd.name}.dir/{kernel.name}.o",
                        first.replace("'TRowExpandBin'", "'Exp'"), line,
                        " " * (column - 1) + "^" + "~" * (len(CHANGED_CALL) - 2),
                        "1 error generated.", f"gmake[2]: *** [{kernel.name}.o] Error 1"])
        return None


@dataclass
class Toolkit:
    home: Path
    build: FakeCannBuild
    judge: RecordingJudge = field(default_factory=RecordingJudge)

    def backend(self) -> AscendCBackend:
        env = {"ASCEND_HOME_PATH": str(self.home)}
        return AscendCBackend(
            detect=lambda: toolchain_from(detect_cann(environ=env, run=lambda _argv: (127, "")),
                                          torch_npu_found=True),
            runner=self.build, judge=self.judge, soc="Ascend910B3", npu_arch="dav-2201",
            cpu_model=False)

    def record(self) -> Any:
        env = {"ASCEND_HOME_PATH": str(self.home)}
        return record_toolchain(
            cann=lambda: detect_cann(environ=env, run=lambda _argv: (127, "")),
            driver=lambda: "24.1.rc2.2", soc=lambda: "Ascend910B3")


@dataclass
class ScanJob(_Job):
    """The scan's job as a bot runs it, generating in this process with the runner's
    backend (the production job runs `opbot generate` as a child, which would not see the
    fake toolkit)."""

    backend: AscendCBackend | None = None
    hints: list[str | None] = field(default_factory=list)
    fail_generation: Callable[[str], None] = lambda _op: None

    def generate(self, spec: OpSpec, backends: list[str], *, hint: str | None = None,
                 draft: str | None = None, head_sha: str | None = None) -> GenerateOutcome:
        self.hints.append(hint)
        self.fail_generation(spec.name)
        assert self.backend is not None
        return generate(spec, backend=backends, out=self.workdir / "package" / spec.name,
                        progress=lambda _line: None, runners={"ascendc": self.backend})


@pytest.fixture
def toolkits(tmp_path: Path) -> dict[str, Toolkit]:
    sample = real_sample("compiler/pto-isa-no-matching-function-template.txt").read_text()
    return {"8.3": Toolkit(_toolkit(tmp_path / "cann-8.3", "8.3.RC1", asc=False),
                           FakeCannBuild(False, sample)),
            "9.0": Toolkit(_toolkit(tmp_path / "cann-9.0", "9.0.0", asc=True),
                           FakeCannBuild(True, sample))}


def _repository_files() -> dict[str, str]:
    files = {"README.md": "# kernels\n"}
    for op in OPS:
        spec = (REPO / "examples" / "ops" / op / "op.yaml").read_text(encoding="utf-8")
        files[f"ops/{op}/op.yaml"] = re.sub(r"(?m)^targets: .*$", "targets: [ascendc]", spec)
        files[f"ops/{op}/reference.py"] = (REPO / "examples" / "ops" / op / "reference.py"
                                           ).read_text(encoding="utf-8")
        package = GOLDEN / op / "ascendc"
        for path in sorted(package.rglob("*")):
            if path.is_file():
                files[f"ops/{op}/ascendc/{path.relative_to(package).as_posix()}"] = \
                    path.read_text(encoding="utf-8")
    assert CHANGED_CALL in files["ops/gelu/ascendc/gelu_kernel.cpp"]
    assert all(CHANGED_CALL not in files[f"ops/{op}/ascendc/{op}_kernel.cpp"]
               for op in ("add", "relu"))
    return files


def _night(fake: FakeForge, tmp_path: Path, toolkit: Toolkit, date: str,
           **job: Any) -> tuple[JobOutcome, ScanJob]:
    forge: Forge = RetryingForge(GitHubForge.connect(fake.github_url, fake.token, REPOSITORY),
                                 sleep=lambda _s: None)
    workdir = tmp_path / f"night-{date}"
    workdir.mkdir()
    scan = ScanJob(plan=Plan(action="scan", reason="nightly", forge="github", event="scan",
                             repo=REPOSITORY), forge=forge,
                   settings=JobSettings(bot_login=fake.bot), workdir=workdir,
                   backend=toolkit.backend(), **job)
    backend = toolkit.backend()
    outcome = run_scan(scan, Redactor([fake.token]), NightlyOptions(
        verify=verifier({"ascendc": backend}), record=toolkit.record, today=lambda: date))
    return outcome, scan


def _rows(outcome: JobOutcome) -> dict[str, dict[str, Any]]:
    assert outcome.report is not None
    return {row["op"]: row for row in outcome.report["ops"]}


def _new(fake: FakeForge, before: list[str]) -> list[str]:
    remaining = list(before)
    new = []
    for entry in fake.effect_log():
        if entry in remaining:
            remaining.remove(entry)
        else:
            new.append(entry)
    return new


@pytest.fixture(autouse=True)
def _bot_commits_are_the_bots(fake: FakeForge) -> None:
    """The bot's commits carry the address its account has (as OPBOT_GIT_EMAIL sets it
    for a bot process), so the forge links them to it."""
    fake.state.users[fake.bot].email = BOT_EMAIL


def test_a_cann_upgrade_breaks_one_package_and_the_scan_migrates_it(
        fake: FakeForge, tmp_path: Path, toolkits: dict[str, Toolkit]) -> None:
    fake.add_repo(REPOSITORY, files=_repository_files())

    # Night 1, CANN 8.3: all pass; the dashboard is created, once.
    first, _ = _night(fake, tmp_path, toolkits["8.3"], "2026-12-01")
    rows = _rows(first)
    assert {op: (row["backend"], row["status"], row["action"]) for op, row in rows.items()} \
        == {op: ("ascendc", "passed", "none") for op in OPS}
    assert first.report is not None
    assert first.report["toolchain"]["cann"] == "8.3.RC1"
    assert first.report["toolchain"]["cann_generation"] == "legacy"
    log = fake.effect_log()
    assert len([entry for entry in log if ":issue-open:" in entry]) == 1
    assert len([entry for entry in log if ":comment:" in entry]) == 1
    assert not [entry for entry in log if ":pr-open:" in entry]

    # Night 2, CANN 9.0: exactly gelu is broken, with the compiler's own file:line.
    second, job = _night(fake, tmp_path, toolkits["9.0"], "2026-12-02")
    rows = _rows(second)
    assert {op: (row["status"], row["action"]) for op, row in rows.items()} == {
        "add": ("passed", "none"), "relu": ("passed", "none"),
        "gelu": ("failed", "regenerate")}
    assert rows["gelu"]["breakage"] == "build"
    assert "no matching function for call to 'Exp'" in rows["gelu"]["reason"]
    assert re.search(r"gelu_kernel\.cpp:\d+\)", rows["gelu"]["reason"])
    assert second.report is not None
    assert second.report["changes"][0] == "CANN 8.3.RC1 (legacy) -> 9.0.0 (asc)"
    # The migration's feedback: what it was built with, what it fails on now.
    assert len(job.hints) == 1
    hint = job.hints[0] or ""
    assert "passed on CANN 8.3.RC1 (legacy)" in hint
    assert "fails on CANN 9.0.0 (asc)" in hint
    assert "no matching function for call to 'Exp'" in hint
    changes = _new(fake, log)
    opened = [entry for entry in changes if ":pr-open:" in entry]
    assert len(opened) == 1
    assert "opbot/gelu->main" in opened[0]
    assert len([entry for entry in changes if ":comment-edit:" in entry]) == 1
    assert not [entry for entry in changes if ":issue-open:" in entry]
    assert not [entry for entry in changes if "opbot/add" in entry or "opbot/relu" in entry]
    pull = fake.state.repos[REPOSITORY].issues[max(fake.state.repos[REPOSITORY].issues)]
    assert "CANN 8.3.RC1 (legacy) -> 9.0.0 (asc)" in pull.body
    assert "| ascendc | passed on CANN 8.3.RC1 (legacy)" in pull.body
    assert "failed on CANN 9.0.0 (asc)" in pull.body
    # The new package is written for the ASC generation, the legacy sources gone.
    branch = fake.state.repos[REPOSITORY].git
    assert branch.resolve("opbot/gelu") is not None
    assert toolchain_generation(toolkits["9.0"].backend()) == "asc"
    names = set(_tree(fake, "opbot/gelu"))
    assert "ops/gelu/ascendc/gelu_kernel.asc" in names
    assert "ops/gelu/ascendc/gelu_kernel.cpp" not in names
    assert "ops/relu/ascendc/relu_kernel.cpp" in names  # other operators untouched

    # Night 3, CANN 9.0 again: the pull request already proposes the fix; nothing changes.
    before = fake.effect_log()
    third, job = _night(fake, tmp_path, toolkits["9.0"], "2026-12-03")
    assert _rows(third)["gelu"]["action"] == "skip"
    assert "already proposes the fix" in _rows(third)["gelu"]["reason"]
    assert job.hints == []
    assert _new(fake, before) == []

    # A maintainer closes it: declined for this toolchain, shown so, not recreated.
    fake.close_pull(REPOSITORY, pull.number, by="alice")
    before = fake.effect_log()
    fourth, job = _night(fake, tmp_path, toolkits["9.0"], "2026-12-04")
    assert _rows(fourth)["gelu"]["action"] == "skip"
    assert "declined" in _rows(fourth)["gelu"]["reason"]
    later = _new(fake, before)
    assert not [entry for entry in later if ":pr-open:" in entry or ":push:" in entry]
    edits = [entry for entry in later if ":comment-edit:" in entry]
    assert len(edits) == 1
    assert re.search(rf"\[#{pull.number}\]\([^)]+\) declined", edits[0])
    assert "- [ ] <!-- opbot:regen gelu -->" in edits[0]


def _tree(fake: FakeForge, ref: str) -> list[str]:
    git = fake.state.repos[REPOSITORY].git
    return git._git("ls-tree", "-r", "--name-only", ref).split()


def test_one_operators_failure_does_not_stop_the_scan(
        fake: FakeForge, tmp_path: Path, toolkits: dict[str, Toolkit]) -> None:
    """Under 9.0 all three packages break; the first one's generation crashes, the two
    others are still regenerated and published in the same night (each in its own clone),
    and the dashboard names every outcome."""
    files = _repository_files()
    for op, call in (("relu", "AscendC::Relu("), ("add", "AscendC::Add(")):
        kernel = f"ops/{op}/ascendc/{op}_kernel.cpp"
        files[kernel] = files[kernel].replace(call, CHANGED_CALL, 1)
        assert CHANGED_CALL in files[kernel]
    fake.add_repo(REPOSITORY, files=files)

    def crash(op: str) -> None:
        if op == "gelu":
            raise RuntimeError("the generation step died")

    outcome, job = _night(fake, tmp_path, toolkits["9.0"], "2026-12-02",
                          fail_generation=crash)
    rows = _rows(outcome)
    assert {op: row["action"] for op, row in rows.items()} == dict.fromkeys(OPS, "regenerate")
    assert len(job.hints) == 3
    log = fake.effect_log()
    opened = sorted(entry.split(":pr-open:")[1][:30] for entry in log if ":pr-open:" in entry)
    assert [entry.split("->")[0] for entry in opened] == ["opbot/add", "opbot/relu"]
    board = [entry for entry in log if ":comment:<!-- opbot:status -->" in entry]
    assert len(board) == 1
    assert "failed: RuntimeError: the generation step died" in board[0]
    assert str(tmp_path) not in board[0]
    shutil.rmtree(tmp_path / "night-2026-12-02", ignore_errors=True)


def test_a_slower_kernel_on_the_device_is_a_regression_until_fixed(
        fake: FakeForge, tmp_path: Path, toolkits: dict[str, Toolkit]) -> None:
    """The same toolchain, the device's kernel time doubled: a performance regression
    against the first recorded figure, which stays the baseline night after night."""
    fake.add_repo(REPOSITORY, files=_repository_files())
    kit = toolkits["8.3"]

    def timed(ms: float) -> VerifyResult:
        return replace(PASSED, timing=Timing(
            device="npu (Ascend)", shapes=[[1024, 1024]], trials=50, candidate_ms=ms,
            candidate_min_ms=ms, candidate_max_ms=ms, reference_ms=0.5, speedup=0.5 / ms))

    kit.judge.verdict = timed(0.1)
    first, _ = _night(fake, tmp_path, kit, "2026-12-01")
    assert {row["kernel_ms"] for row in first.report["ops"]} == {0.1}  # type: ignore[index]
    kit.judge.verdict = timed(0.2)
    second, job = _night(fake, tmp_path, kit, "2026-12-02")
    rows = _rows(second)
    assert {op: (row["status"], row["breakage"]) for op, row in rows.items()} == dict.fromkeys(
        OPS, ("failed", "performance"))
    assert "2.00x the recorded 0.1 ms (the policy allows 1.25x)" in rows["gelu"]["reason"]
    assert len(job.hints) == 3  # regenerated: a pull request each (the cap is 3)
    third, job = _night(fake, tmp_path, kit, "2026-12-03")
    assert {row["status"] for row in third.report["ops"]} == {"failed"}  # type: ignore[index]
    assert job.hints == []  # each already has its pull request for this toolchain
