"""Test-wide setup: Triton runs through its CPU interpreter in the test process too; the
fake forge's fixtures for the modules that use it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

# Before anything imports triton: @triton.jit reads it when a kernel is defined.
os.environ.setdefault("TRITON_INTERPRET", "1")
# The real-header type-check and the CPU model cost seconds per Ascend C package: the tests
# that exercise them switch them on (runners/ascendc/cpu_verify.py SWITCH); the rest judge
# packages as a machine without them does.
os.environ.setdefault("OPBOT_ASCENDC_REAL_CHECKS", "0")

if TYPE_CHECKING:
    from tests.fakeforge import FakeForge, FakeServer
    from tests.fakeforge.scenario import World

# The corpora: many independent cases, each a whole verification or generation: their
# tests spread over every worker one by one, while every other module's tests stay together
# on one worker (its module-scoped fixtures and stories run once). A scheduler of our own:
# xdist's loadgroup renames node ids, which pytest 9 no longer allows.
CORPORA = (
    "tests/backends/triton/test_generate_corpus.py",
    "tests/runners/test_verify_corpus.py",
    "tests/runners/test_attacks.py",
)
SHARDED_MODULES = frozenset(CORPORA)
# The scheduler hands out whole modules (their stories run once) and the corpora's cases one by
# one. Longest first, as measured (seconds of test time in a fresh-clone CI on 2 cores, the
# durations pytest prints): no long module is left running alone at the end, and the
# corpora's short cases come last, to fill the gaps. Refresh with `--durations=0`.
LONGEST_FIRST = (
    "tests/backends/ascendc/test_offline_row_ops.py",  # 232
    "tests/runners/ascendc/test_realapi_pch.py",  # 184
    "tests/test_bot_e2e.py",  # 122
    "tests/runners/ascendc/test_program_cache.py",  # 114
    "tests/stories/test_review.py",  # 111
    "tests/runners/test_warm_worker.py",  # 111
    "tests/agent/test_llm_endpoint.py",  # 108
    "tests/runners/ascendc/test_cpumodel_kernels.py",  # 93
    "tests/test_scan.py",  # 86
    "tests/runners/ascendc/test_cpu_model_cli.py",  # 76
    "tests/runners/ascendc/test_ascendc_package.py",  # 75
    "tests/stories/test_ci.py",  # 60
    "tests/test_workflows.py",  # 59
    "tests/forge/test_fakeforge_events.py",  # 58
    "tests/runners/ascendc/test_real_api_every_kernel.py",  # 57
    "tests/stories/test_human_push.py",  # 55
    "tests/agent/test_loop.py",  # 54
    "tests/test_cli.py",  # 53
    "tests/runners/ascendc/test_ascendc_backend.py",  # 50
    "tests/test_gate.py",  # 49
    "tests/runners/ascendc/test_cpumodel_pch.py",  # 49
    "tests/test_provision_jit.py",  # 44
    "tests/stories/test_op_request.py",  # 43
    "tests/test_scan_upgrade.py",  # 35
    "tests/test_job_guards.py",  # 33
    "tests/runners/test_warm_broker.py",  # 24
    "tests/test_scaled_shapes.py",  # 23
    "tests/forge/test_dispatch.py",  # 23
    "tests/test_doctor.py",  # 22
    "tests/runners/ascendc/test_twin_hijack.py",  # 21
)


def _module_path(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class CorporaSpread(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if _module_path(nodeid) in SHARDED_MODULES:
                return nodeid
            return _module_path(nodeid)

    return CorporaSpread(config, log)


# Modules whose tests take more than ~20 s together on 2 cores (whole generations,
# verifications, CPU-model builds, forge stories): `scripts/test -m "not slow"` leaves them
# out for a quick inner loop; the full run (CI) keeps them.
SLOW_MODULES = frozenset({
    *SHARDED_MODULES,
    "tests/agent/test_backend_contract.py",
    "tests/agent/test_first_drafts.py",
    "tests/agent/test_llm_endpoint.py",
    "tests/agent/test_loop.py",
    "tests/agent/test_offline_worker.py",
    "tests/agent/test_repair_rate.py",
    "tests/agent/test_replay_hostile.py",
    "tests/agent/test_tuning.py",
    "tests/backends/ascendc/test_flow.py",
    "tests/backends/ascendc/test_llm_loop.py",
    "tests/backends/ascendc/test_offline_row_ops.py",
    "tests/backends/ascendc/test_tuning_loop.py",
    "tests/backends/triton/test_tuning_space.py",
    "tests/forge/test_contract.py",
    "tests/forge/test_dispatch.py",
    "tests/forge/test_fakeforge_events.py",
    "tests/forge/test_hostile_input.py",
    "tests/forge/test_streams.py",
    "tests/runners/ascendc/test_ascendc_backend.py",
    "tests/runners/ascendc/test_ascendc_package.py",
    "tests/runners/ascendc/test_cpu_model_attacks.py",
    "tests/runners/ascendc/test_cpu_model_cli.py",
    "tests/runners/ascendc/test_cpumodel_kernels.py",
    "tests/runners/ascendc/test_program_cache.py",
    "tests/runners/ascendc/test_real_api_every_kernel.py",
    "tests/runners/ascendc/test_realapi_pch.py",
    "tests/runners/ascendc/test_realapi_typecheck.py",
    "tests/runners/ascendc/test_twin_hijack.py",
    "tests/runners/test_bench_harness.py",
    "tests/runners/test_harness_session.py",
    "tests/runners/test_judge_units.py",
    "tests/runners/test_sandbox_attacks.py",
    "tests/runners/test_warm_worker.py",
    "tests/stories/test_ci.py",
    "tests/stories/test_fork.py",
    "tests/stories/test_human_push.py",
    "tests/stories/test_op_request.py",
    "tests/stories/test_review.py",
    "tests/test_bot_e2e.py",
    "tests/test_cli.py",
    "tests/test_gate.py",
    "tests/test_job_guards.py",
    "tests/test_provision_host.py",
    "tests/test_provision_jit.py",
    "tests/test_scaled_shapes.py",
    "tests/test_scan.py",
    "tests/test_scan_upgrade.py",
    "tests/test_workflows.py",
})


def pytest_configure(config: pytest.Config) -> None:
    from runners import collector

    collector.tune()  # as opbot's own processes: pytest's reports, the fake forge's models


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _module_path(item.nodeid) in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)

    def rank(item: pytest.Item) -> int:
        module = _module_path(item.nodeid)
        if module in LONGEST_FIRST:
            return LONGEST_FIRST.index(module)
        if module in CORPORA:  # after every other module: a case takes 2-10 s
            return len(LONGEST_FIRST) + 1 + CORPORA.index(module)
        return len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the order within a module stays


@pytest.fixture(scope="session", autouse=True)
def warm_broker() -> Iterator[None]:
    """The opbot processes a test starts (`opbot verify`, `opbot serve`, a job's generation
    step) borrow this test process's warm servers (runners/warm_broker.py), as a job's steps
    borrow `opbot serve`'s: a process start, not three torch imports, per verification.
    OPBOT_TEST_COLD=1 runs them cold, as a machine without a broker does. Two server sets,
    each started when first needed: a scan verifies two operators at once, and a story's
    serve may run two jobs; the second borrower would otherwise start cold workers."""
    from runners.sandbox import sandbox_status
    from runners.warm_broker import BROKER_VARIABLE, Broker

    if os.environ.get("OPBOT_TEST_COLD") == "1" or not sandbox_status().works:
        yield
        return
    broker = Broker(pool_size=2)
    before = os.environ.get(BROKER_VARIABLE)
    os.environ.update(broker.environment())
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(BROKER_VARIABLE, None)
        else:
            os.environ[BROKER_VARIABLE] = before
        broker.close()


# The fake forge (and PyGithub, python-gitlab) load only in the modules that use it.


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest) -> Iterator[FakeServer]:
    """One fake forge server per module; a module with `GITHUB_SPEC = False` talks GitLab
    only and does without GitHub's OpenAPI description."""
    from tests.support_forge import fake_server

    with fake_server(github_spec=getattr(request.module, "GITHUB_SPEC", True)) as srv:
        yield srv


@pytest.fixture
def fake(server: FakeServer, tmp_path: Path) -> Iterator[FakeForge]:
    """A fresh fake forge state for one test, checked for honesty afterwards."""
    from tests.support_forge import fake_forge

    with fake_forge(server, tmp_path / "forge") as forge:
        yield forge


@pytest.fixture
def world(fake: FakeForge) -> World:
    """The standard world (tests/fakeforge/scenario.py) on the fake forge."""
    from tests.fakeforge.scenario import standard_world

    return standard_world(fake)
