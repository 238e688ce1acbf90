"""The nightly scan's pieces: the toolchain record, the state kept in the dashboard (read
as untrusted), the breakage classes, the performance check, the ticked boxes, the rendered
dashboard, and the plan per operator (table tests on a recording forge)."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from bot.errors import BadInputError
from bot.forge.base import ForgeError, PullRequest, UnavailableError
from bot.job_settings import JobSettings
from bot.publish import marker
from bot.scan import verifier
from bot.scan.checks import (
    ScanRow,
    breakage_of,
    check_operator,
    row_from_verdict,
    slower_than_recorded,
)
from bot.scan.dashboard import Outcome, render, ticked
from bot.scan.nightly import _Night
from bot.scan.state import TOOLCHAINS_KEPT, PullRecord, ScanState, Verdict
from bot.scan.toolchain import ToolchainRecord, driver_version, record_toolchain
from bot.spec import load_spec
from runners.ascendc.backend import AscendCBackend, Toolchain
from runners.ascendc.detect import CannInfo
from runners.base import CaseResult, Failure, SourceLocation, Timing, VerifyResult
from tests.support import REPO
from tests.support_ascend import PASSED, RecordingJudge, RecordingStepRunner, real_sample

OLD = ToolchainRecord(cann="8.3.RC1", cann_generation="legacy", torch="2.13.0",
                      triton="3.9.0")
NEW = ToolchainRecord(cann="9.0.0", cann_generation="asc", torch="2.13.0", triton="3.9.0")
SPEC = load_spec(REPO / "examples" / "ops" / "gelu" / "op.yaml")


# -- the toolchain ---------------------------------------------------------------------------


def test_the_driver_version_is_read_from_a_real_version_info(tmp_path: Path) -> None:
    sample = real_sample("install/unresolved-4566936146-driver-version.info.txt")
    text = sample.read_text(encoding="utf-8").split("\n", 1)[1]  # past the `# cat` line
    (tmp_path / "version.info").write_text(text)
    assert driver_version((str(tmp_path / "missing"), str(tmp_path / "version.info"))) \
        == "24.1.rc2.2"
    assert driver_version((str(tmp_path / "missing"),)) is None


def test_the_record_names_cann_and_its_generation_and_says_what_changed() -> None:
    found = CannInfo(found=True, version="9.0.0", generation="asc")
    record = record_toolchain(cann=lambda: found, driver=lambda: "25.2.0", soc=lambda: None)
    assert (record.cann, record.cann_generation, record.driver) == ("9.0.0", "asc", "25.2.0")
    assert record.key().startswith("CANN 9.0.0 (asc), driver 25.2.0, torch ")
    assert NEW.changes_from(OLD) == ["CANN 8.3.RC1 (legacy) -> 9.0.0 (asc)"]
    assert OLD.changes_from(OLD) == []
    assert ToolchainRecord(torch="2.13.0").changes_from(OLD) == [
        "CANN 8.3.RC1 (legacy) -> none", "triton 3.9.0 -> none"]


def test_a_detection_that_raises_records_no_cann() -> None:
    def broken() -> CannInfo:
        raise RuntimeError("npu-smi fell over")

    record = record_toolchain(cann=broken, driver=lambda: None, soc=lambda: None)
    assert record.cann is None
    assert record.to_json()["cann"] is None


def test_a_recorded_toolchain_keeps_only_known_text_fields() -> None:
    record = ToolchainRecord.from_json({"cann": "9.0.0", "torch": 7, "evil": "x",
                                        "triton": "3" * 500})
    assert record.cann == "9.0.0"
    assert record.torch is None
    assert record.triton is not None
    assert len(record.triton) == 80
    assert ToolchainRecord.from_json(["not", "a", "mapping"]) == ToolchainRecord()


# -- the state, read back from a comment people can edit --------------------------------------


def test_the_state_round_trips_through_the_dashboard_comment() -> None:
    state = ScanState()
    state.arrive(NEW, "2026-12-02")
    state.record("gelu/ascendc", NEW.key(), Verdict(
        "failed", "build: no matching function --> here | <b>", "build", "2026-12-02"))
    state.pulls["gelu"] = PullRecord(7, NEW.key())
    back = ScanState.from_comment(f"<!-- opbot:status -->\n{state.marker()}\n## table")
    assert back.problem is None
    assert back.to_json() == state.to_json()


@pytest.mark.parametrize(("url", "link"), [
    ("https://gitlab.example.com/g/p/-/merge_requests/7", "[#7](https://gitlab.example.com/g/p/-/merge_requests/7)"),
    ("javascript:alert(1)", "#7"), ("https://x.test/a) [evil](https://e.test/b", "#7"),
    (12, "#7")])
def test_a_recorded_pull_links_only_a_plain_web_address(url: object, link: str) -> None:
    record = PullRecord.from_json({"number": 7, "toolchain": "T", "url": url})
    assert record is not None
    assert record.link() == link


@pytest.mark.parametrize("body", [
    "<!-- opbot:marker {not json} -->",
    marker({"kind": "something-else"}),
    marker({"kind": "opbot-scan-state", "verdicts": ["a"], "pulls": 5, "toolchain": "x"}),
    marker({"kind": "opbot-scan-state", "toolchains": ["T", 5],
            "verdicts": {"a/b": [{"t": 0, "status": 3}, {"status": "passed"}, "x",
                                 {"t": 1, "status": "passed"}, {"t": -1, "status": "passed"},
                                 {"t": "0", "status": "passed"}],
                         "c/d": {"t": {"status": "passed"}}},
            "pulls": {"a": {"number": -1, "toolchain": "t"}, "b": {"number": "7"}},
            "changes": "not a list", "since": 20261202}),
])
def test_a_malformed_state_is_dropped_not_obeyed(body: str) -> None:
    state = ScanState.from_comment(body)
    assert state.verdicts == {}
    assert state.pulls == {}
    assert state.changes == []


def test_a_huge_state_is_bounded() -> None:
    history = [{"t": index, "status": "passed", "reason": "x" * 400,
                "date": "2026-12-0"} for index in range(10)]
    body = marker({"kind": "opbot-scan-state", "toolchains": [f"T{i}" for i in range(10)],
                   "verdicts": {f"op{index}/triton": history for index in range(2500)}})
    state = ScanState.from_comment(body)
    assert len(state.verdicts) == 2000
    assert all(len(item) == TOOLCHAINS_KEPT for item in state.verdicts.values())
    verdict = state.verdicts["op0/triton"]["T9"]
    assert len(verdict.reason) == 300


def test_history_keeps_the_newest_toolchains_in_their_order() -> None:
    state = ScanState()
    for index in (9, 10, 2, 1, 30, 4):  # an order no sort would give back
        state.record("gelu/triton", f"T{index}", Verdict("passed", date="2026-12-01"))
    want = ["T2", "T1", "T30", "T4"][-TOOLCHAINS_KEPT:]
    assert list(state.verdicts["gelu/triton"]) == want
    back = ScanState.from_comment(state.marker())
    assert list(back.verdicts["gelu/triton"]) == want
    assert back.last_passed("gelu/triton") == ("T4", Verdict("passed", date="2026-12-01"))


def test_the_same_toolchain_keeps_its_arrival() -> None:
    state = ScanState()
    state.arrive(OLD, "2026-12-01")
    state.arrive(NEW, "2026-12-02")
    assert (state.changes, state.since) == (["CANN 8.3.RC1 (legacy) -> 9.0.0 (asc)"],
                                            "2026-12-02")
    state.arrive(NEW, "2026-12-03")
    assert (state.changes, state.since) == (["CANN 8.3.RC1 (legacy) -> 9.0.0 (asc)"],
                                            "2026-12-02")


# -- verdicts and breakage ----------------------------------------------------------------


def _failed(failure: Failure, device: str = "npu (Ascend)") -> VerifyResult:
    return VerifyResult(status="failed", reasons=[failure], cases=[], stages=[], device=device)


@pytest.mark.parametrize(("failure", "breakage", "words"), [
    (Failure("build", "build failed (exit status 2): no matching function for call to 'Exp'",
             location=SourceLocation("ascendc/gelu_kernel.cpp", 106)),
     "build", "(ascendc/gelu_kernel.cpp:106)"),
    (Failure("load", "ImportError: cannot import name 'libdevice' from triton.language"),
     "build", "libdevice"),
    (Failure("run", "the operator failed; the device says: runtime error 507015: aicore "
             "execution is abnormal", details={"runtime": {"code": 507015}}),
     "runtime", "507015"),
    (Failure("crash", "the worker died (SIGSEGV)"), "runtime", "SIGSEGV"),
    (Failure("values", "output 0: 12 of 4099 values differ", case="shape2-float16"),
     "mismatch", "[case shape2-float16]"),
    (Failure("input_mutation", "the kernel wrote into its input"), "rejected", "input"),
    (Failure("shape", "output 0 has shape (3,), the reference (4,)"), "mismatch", "shape"),
])
def test_a_failure_is_classed_from_the_platforms_words(failure: Failure, breakage: str,
                                                       words: str) -> None:
    assert breakage_of(failure) == breakage
    row = row_from_verdict(SPEC, "ascendc", _failed(failure))
    assert (row.status, row.breakage) == ("failed", breakage)
    assert row.reason.startswith(f"{breakage}: ")
    assert words in row.reason


PASSED_CASE = CaseResult("main", [[4099]], ["float32"], 1, True, 0.0, 0.0)


def test_an_ascendc_pass_on_the_cpu_model_is_unverified_but_its_failure_is_a_failure() -> None:
    passed = VerifyResult(status="passed", reasons=[], cases=[PASSED_CASE], stages=[],
                          device="cpu-model (asc-devkit 82b89a1; CPU, no NPU)")
    row = row_from_verdict(SPEC, "ascendc", passed)
    assert row.status == "unverified"
    assert "not built with CANN" in row.reason
    failed = _failed(Failure("values", "wrong"), device=passed.device)
    assert row_from_verdict(SPEC, "ascendc", failed).status == "failed"
    on_npu = VerifyResult(status="passed", reasons=[], cases=[PASSED_CASE], stages=[],
                          device="npu (Ascend910B3)")
    assert row_from_verdict(SPEC, "ascendc", on_npu).status == "passed"
    triton = VerifyResult(status="passed", reasons=[], cases=[PASSED_CASE], stages=[],
                          device="cpu (Triton interpreter)")
    assert row_from_verdict(SPEC, "triton", triton).status == "passed"


@pytest.mark.parametrize(("now", "recorded", "status"), [
    (1.30, 1.0, "failed"), (1.20, 1.0, "passed"), (1.30, None, "passed"),
    (None, 1.0, "passed")])
def test_slower_than_the_recorded_figure_is_a_performance_regression(
        now: float | None, recorded: float | None, status: str) -> None:
    row = ScanRow("gelu", "triton", "passed", "passed on cuda", kernel_ms=now)
    checked = slower_than_recorded(row, recorded, 1.25)
    assert checked.status == status
    if status == "failed":
        assert checked.breakage == "performance"
        assert "1.30x the recorded 1 ms (the policy allows 1.25x)" in checked.reason


JUDGED = Timing(device="npu (Ascend)", shapes=[[1024, 1024]], trials=50, candidate_ms=0.2,
                candidate_min_ms=0.19, candidate_max_ms=0.3, reference_ms=0.5, speedup=2.5)


def _op_with_package(tmp_path: Path, kernel: str) -> Path:
    """examples/ops/gelu with the golden legacy package, its manifest naming `kernel` (the
    kernel the real msprof samples profiled)."""
    folder = tmp_path / "ops" / "gelu"
    shutil.copytree(REPO / "examples" / "ops" / "gelu", folder)
    spec = folder / "op.yaml"
    spec.write_text(spec.read_text().replace("targets: [triton, ascendc]", "targets: [ascendc]"))
    shutil.copytree(REPO / "tests" / "data" / "ascendc_golden" / "legacy" / "gelu" / "ascendc",
                    folder / "ascendc")
    manifest = folder / "ascendc" / "opbot.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()),
                                    "entries": {"float32": kernel, "float16": kernel}}))
    return folder


def test_on_a_device_the_profilers_kernel_time_is_checked_against_the_record(
        tmp_path: Path) -> None:
    """The scan times on a device: the Ascend C package's profile step leaves msprof's
    real output, whose kernel time the scan keeps and checks against the recorded one."""
    folder = _op_with_package(tmp_path, "topk_custom")
    runner = RecordingStepRunner(profile_files={
        "prof/OPPROF_20250928085610_QJFCRNITGIYOFIZI/OpBasicInfo.csv":
            real_sample("msprof/hammingdist-topk-OpBasicInfo.csv").read_text()})
    backend = AscendCBackend(detect=lambda: Toolchain(True, "", "/opt/cann", "8.3.RC1",
                                                      "legacy"),
                             runner=runner, judge=RecordingJudge(replace(PASSED, timing=JUDGED)),
                             soc="Ascend910B3", npu_arch="dav-2201")
    rows = check_operator(folder / "op.yaml", verifier({"ascendc": backend}))
    assert [(row.backend, row.status) for row in rows] == [("ascendc", "passed")]
    assert [step.name for step in runner.steps][-1] == "profile"  # timed: a device
    assert rows[0].kernel_ms == pytest.approx(0.15574, rel=1e-4)
    assert slower_than_recorded(rows[0], 0.2, 1.25).status == "passed"
    slower = slower_than_recorded(rows[0], 0.1, 1.25)
    assert (slower.status, slower.breakage) == ("failed", "performance")
    assert "1.56x the recorded 0.1 ms" in slower.reason


# -- the dashboard ------------------------------------------------------------------------


def test_ticked_boxes_name_operators() -> None:
    body = ("- [x] <!-- opbot:regen gelu --> gelu\n- [ ] <!-- opbot:regen relu --> relu\n"
            "* [X] <!-- opbot:regen add --> add\n- [x] gelu_half without the marker\n"
            "- [x] <!-- opbot:regen ../etc --> nope\ntext - [x] <!-- opbot:regen mid --> x\n")
    assert ticked(body) == {"gelu", "add"}
    assert ticked(None) == set()


def _state() -> ScanState:
    state = ScanState()
    state.arrive(OLD, "2026-12-01")
    for op in ("add", "gelu"):
        state.record(f"{op}/ascendc", OLD.key(), Verdict("passed", "ok", None, "2026-12-01"))
    state.arrive(NEW, "2026-12-02")
    state.record("add/ascendc", NEW.key(), Verdict("passed", "ok", None, "2026-12-02"))
    state.record("gelu/ascendc", NEW.key(), Verdict("failed", "build: a | b <script>",
                                                    "build", "2026-12-02"))
    state.pulls["gelu"] = PullRecord(9, NEW.key())
    return state


def test_the_dashboard_shows_operators_by_backend_by_toolchain() -> None:
    rows = [ScanRow("add", "ascendc", "passed", "ok"),
            ScanRow("gelu", "ascendc", "failed", "build: a | b <script>", action="skip",
                    note="declined: #9 was closed")]
    text = render(rows, _state(), {})
    assert text == render(rows, _state(), {})  # the same state, the same text
    assert "| add | ascendc | passed (2026-12-02) | passed (2026-12-01) | ok |  |" in text
    assert ("| gelu | ascendc | failed (2026-12-02) | passed (2026-12-01) | "
            "build: a \\| b \\<script\\> | #9 declined |") in text
    assert "Changed from the toolchain before: CANN 8.3.RC1 (legacy) -\\> 9.0.0 (asc)." in text
    assert f"- T2: {OLD.key()}" in text
    assert "- [ ] <!-- opbot:regen gelu --> gelu (pull request #9" in text
    failed = render(rows, _state(), {"gelu": Outcome("failed: @alice ![x](http://t/)")})
    assert "| failed: @\u200balice \\!\\[x\\](http://t/) |" in failed
    kept = render(rows, _state(), {}, ticked={"gelu"})
    assert "- [x] <!-- opbot:regen gelu --> gelu" in kept
    assert "- [ ] <!-- opbot:regen add --> add" in kept


def test_planted_dates_are_not_rendered() -> None:
    state = ScanState.from_comment(marker({
        "kind": "opbot-scan-state", "since": "<!--", "toolchains": ["T"],
        "verdicts": {"gelu/triton": [{"t": 0, "status": "passed", "date": "<details>"}]}}))
    assert state.since == ""
    assert state.verdicts["gelu/triton"]["T"].date == ""


@pytest.mark.parametrize(("operators", "pulls"), [(1500, 1), (300, 300)])
def test_a_big_repository_keeps_its_whole_state_in_the_comment(operators: int,
                                                                pulls: int) -> None:
    rows = [ScanRow(f"op{index:04d}", backend, "passed", "passed on cpu")
            for index in range(operators) for backend in ("ascendc", "triton")]
    state = ScanState()
    for toolchain in (OLD, NEW):
        state.arrive(toolchain, "2026-12-01")
        for row in rows:
            state.record(row.key, toolchain.key(), Verdict("passed", "x" * 200, None,
                                                           "2026-12-01"))
    for index in range(pulls):
        state.pulls[f"op{index:04d}"] = PullRecord(index + 1, NEW.key())
    state.prune({row.op for row in rows}, keep_pulls={row.op for row in rows})
    text = render(rows, state, {})
    assert len(text) < 65_536 - 1_000
    back = ScanState.from_comment(text)
    assert back.problem is None
    assert back.pulls == state.pulls  # the declines survive
    header = next(line for line in text.splitlines() if line.startswith("| operator |"))
    assert header.startswith("| operator | backend | T1 |")  # a table, however cut
    assert render(rows, back, {}) == text  # the next night renders the same text


def test_operators_gone_from_the_repository_are_forgotten() -> None:
    state = _state()
    state.prune({"add", "gelu"}, keep_pulls={"add"})
    assert sorted(state.verdicts) == ["add/ascendc", "gelu/ascendc"]
    assert state.pulls == {}  # gelu passes again: its pull request need not be remembered
    state.prune({"add"}, keep_pulls={"add"})
    assert list(state.verdicts) == ["add/ascendc"]


# -- the plan per operator (a recording forge) -----------------------------------------------


@dataclass
class RecordingForge:
    pulls: dict[int, PullRequest] = field(default_factory=dict)
    branch_pulls: dict[str, PullRequest] = field(default_factory=dict)
    closed: list[PullRequest] = field(default_factory=list)
    broken: bool = False
    calls: list[str] = field(default_factory=list)

    def closed_pull_requests(self, head_branch: str) -> list[PullRequest]:
        self.calls.append(f"closed {head_branch}")
        return [pull for pull in self.closed if pull.head_branch == head_branch]

    def get_pull_request(self, number: int) -> PullRequest:
        self.calls.append(f"get #{number}")
        if self.broken:
            raise UnavailableError("GitHub 502")
        return self.pulls[number]

    def find_pull_request(self, head_branch: str) -> PullRequest | None:
        self.calls.append(f"find {head_branch}")
        return self.branch_pulls.get(head_branch)


@dataclass
class RecordingJob:
    forge: RecordingForge
    people: dict[str, list[str]] = field(default_factory=dict)
    workdir: Path = Path()
    settings: JobSettings = field(default_factory=lambda: JobSettings(bot_login="opbot"))

    def human_commits(self, op: str) -> list[str]:
        return self.people.get(op, [])


def _pull(number: int, state: str, *, toolchain: ToolchainRecord | None = None,
          author: str = "opbot", branch: str = "opbot/gelu") -> PullRequest:
    body = marker({"scan_toolchain": toolchain.key()}) if toolchain else "b"
    return PullRequest(number, "t", body, author, branch, "abc", "main", state=state,
                       url=f"https://forge.test/o/r/pull/{number}")


def _plan(rows: list[ScanRow], state: ScanState, forge: RecordingForge, *,
          forced: set[str] | None = None, people: dict[str, list[str]] | None = None,
          cap: int = 3) -> dict[str, tuple[str, str]]:
    night = _Night(RecordingJob(forge, people or {}), Path(), state, NEW,  # type: ignore[arg-type]
                   forced or set())
    plans = night.plan_operators(rows, cap)
    return {op: (plan.action, plan.reason) for op, plan in plans.items()}


def _row(op: str, status: str) -> ScanRow:
    return ScanRow(op, "ascendc", status, "r", spec=SPEC)


def _with_pull(number: int, toolchain: ToolchainRecord) -> ScanState:
    state = ScanState()
    state.pulls["gelu"] = PullRecord(number, toolchain.key())
    return state


@pytest.mark.parametrize(("state", "forge", "forced", "want"), [
    (ScanState(), RecordingForge(), set(), ("regenerate", "")),
    (_with_pull(4, NEW), RecordingForge({4: _pull(4, "open")}), set(),
     ("skip", "#4 already proposes the fix for this toolchain")),
    (_with_pull(4, NEW), RecordingForge({4: _pull(4, "closed")}), set(),
     ("skip", "declined: #4 was closed without merging")),
    (_with_pull(4, OLD), RecordingForge({4: _pull(4, "closed")}), set(), ("regenerate", "")),
    (_with_pull(4, OLD), RecordingForge({4: _pull(4, "open")}), set(),
     ("update-pr", "updating #4")),
    (_with_pull(4, NEW), RecordingForge({4: _pull(4, "closed")}), {"gelu"},
     ("regenerate", "ticked on the dashboard")),
    (_with_pull(4, NEW), RecordingForge({4: _pull(4, "merged")}), set(), ("regenerate", "")),
    (ScanState(), RecordingForge(branch_pulls={"opbot/gelu": _pull(5, "open")}), set(),
     ("update-pr", "updating #5")),
    (_with_pull(4, NEW), RecordingForge(broken=True), set(),
     ("skip", "the forge did not answer: GitHub 502")),
    # The state lost (a cut, a reset, a closed dashboard): the forge's closed PRs tell.
    (ScanState(), RecordingForge(closed=[_pull(6, "closed", toolchain=NEW)]), set(),
     ("skip", "declined: #6 was closed")),
    (ScanState(), RecordingForge(closed=[_pull(6, "closed", toolchain=OLD)]), set(),
     ("regenerate", "")),
    (ScanState(), RecordingForge(closed=[_pull(6, "closed", toolchain=NEW, author="eve")]),
     set(), ("regenerate", "")),
    (ScanState(), RecordingForge(closed=[_pull(6, "merged", toolchain=NEW)]), set(),
     ("regenerate", "")),
    (ScanState(), RecordingForge(branch_pulls={"opbot/gelu": _pull(5, "open", toolchain=NEW)}),
     set(), ("skip", "#5 already proposes the fix")),
    # The state remembers the newest PR; an older one declined this toolchain (it came back).
    (_with_pull(9, OLD), RecordingForge({9: _pull(9, "closed")},
                                        closed=[_pull(9, "closed"),
                                                _pull(6, "closed", toolchain=NEW)]), set(),
     ("skip", "declined: #6 was closed")),
    # A record someone edited to name a person's pull request is dropped.
    (_with_pull(8, NEW), RecordingForge({8: _pull(8, "closed", branch="alice/fix")}), set(),
     ("regenerate", "")),
], ids=["new", "open-same", "declined", "closed-older", "open-older", "ticked-declined",
        "merged", "someone-elses-open", "forge-down", "lost-declined", "lost-older",
        "lost-not-the-bots", "lost-merged", "lost-open-same", "round-trip-declined",
        "record-not-the-bots"])
def test_a_broken_operators_plan(state: ScanState, forge: RecordingForge, forced: set[str],
                                 want: tuple[str, str]) -> None:
    action, reason = _plan([_row("gelu", "failed")], state, forge, forced=forced)["gelu"]
    assert action == want[0]
    assert reason.startswith(want[1])


def test_without_its_login_the_bot_trusts_no_closed_pull_request() -> None:
    forge = RecordingForge(closed=[_pull(6, "closed", toolchain=NEW, author="eve")])
    night = _Night(RecordingJob(forge, settings=JobSettings()), Path(),  # type: ignore[arg-type]
                   ScanState(), NEW, set())
    assert night.plan_operators([_row("gelu", "failed")], 3)["gelu"].action == "regenerate"


def test_the_dashboards_link_is_the_forges() -> None:
    state = ScanState()
    state.pulls["gelu"] = PullRecord(4, NEW.key(), "https://evil.example/o/r/pull/4")
    _plan([_row("gelu", "failed")], state, RecordingForge({4: _pull(4, "open")}))
    assert state.pulls["gelu"].url == "https://forge.test/o/r/pull/4"


def test_a_dashboard_issue_in_other_digits_is_refused() -> None:
    with pytest.raises(BadInputError, match="is not an issue number"):
        JobSettings.from_environment({"OPBOT_DASHBOARD_ISSUE": "\u00b2"})
    assert JobSettings.from_environment({"OPBOT_DASHBOARD_ISSUE": " 12 "}).dashboard_issue == 12
    assert JobSettings.from_environment({}).dashboard_issue is None


def test_healthy_operators_are_left_alone_unless_ticked() -> None:
    forge = RecordingForge()
    rows = [_row("gelu", "passed"), _row("add", "passed"), _row("relu", "unverified")]
    plans = _plan(rows, ScanState(), forge, forced={"add", "relu", "ghost"})
    assert plans == {"gelu": ("none", ""), "add": ("regenerate", "ticked on the dashboard"),
                     "relu": ("regenerate", "ticked on the dashboard")}
    assert forge.calls == ["find opbot/add", "find opbot/relu"]  # nothing asked for gelu


def test_a_branch_a_person_pushed_to_is_theirs() -> None:
    plans = _plan([_row("gelu", "failed")], ScanState(), RecordingForge(),
                  people={"gelu": ["0a1b2c3d4e5f"]})
    assert plans["gelu"] == ("skip", "left alone: a person pushed to opbot/gelu "
                                     "(0a1b2c3d4e5f)")


def test_the_nightly_cap_counts_pull_requests() -> None:
    rows = [_row(op, "failed") for op in ("a", "b", "c", "d")]
    plans = _plan(rows, ScanState(), RecordingForge(), cap=2)
    assert [plans[op][0] for op in "abcd"] == ["regenerate", "regenerate", "skip", "skip"]
    assert plans["c"][1] == "over tonight's limit of 2 pull request(s)"


def test_a_forge_error_is_a_forge_error() -> None:
    assert issubclass(UnavailableError, ForgeError)
