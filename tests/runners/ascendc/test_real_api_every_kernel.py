"""CI's promise: every Ascend C kernel opbot writes type-checks against the real devkit
headers - what the offline generator writes for every example operator, in both toolchain
generations (the golden packages: tests/runners/ascendc/test_realapi_typecheck.py).

Skipped, with the reason, only where the real sources are absent (a checkout without
`../shared/data/ascend-real` and no OPBOT_ASCEND_REAL_API).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.agent.offline.run import generate_in_worker
from bot.agent.package import write_files
from bot.spec import load_spec
from runners.warm import warm_for_this_process
from tests.support import EXAMPLES

GENERATIONS = ("legacy", "asc")


@pytest.fixture(autouse=True)
def _warm() -> Iterator[None]:
    """Drafts (and verifications) fork from this test process's warm servers, as in
    `opbot serve`, instead of a cold process each."""
    with warm_for_this_process():
        yield


def _require_real_api() -> None:
    from runners.ascendc.realapi.sources import real_api_status

    status = real_api_status()
    if not status.available:
        pytest.skip(f"the real Ascend C sources are not here: {status.reason}")


def _assert_typechecks(folder: Path, label: str) -> None:
    from runners.ascendc.realapi.typecheck import typecheck_package

    result = typecheck_package(folder)
    assert result.skipped is None, (label, result.skipped)
    errors = [f"{item.file}:{item.line}: {item.message}" for item in result.diagnostics
              if item.severity == "error"]
    assert not errors, (label, errors[:5])
    assert result.ok, (label, result.log[-2000:])


@pytest.mark.parametrize("generation", GENERATIONS)
def test_every_generated_kernel_typechecks(generation: str, tmp_path: Path) -> None:
    _require_real_api()
    generated = 0
    for spec_path in sorted(EXAMPLES.glob("*/op.yaml")):
        spec = load_spec(spec_path)
        if "ascendc" not in spec.targets:
            continue
        drafted = generate_in_worker(spec.reference_path, op_name=spec.name,
                                     cases=spec.cases(), init_args=None,
                                     backend="ascendc", generation=generation)
        if drafted.status != "generated":
            continue  # outside the offline generator's elementwise scope: nothing written
        out = tmp_path / generation / spec.name
        write_files(out, dict(drafted.files))
        _assert_typechecks(out / "ascendc", f"generated {generation}/{spec.name}")
        generated += 1
    assert generated >= 3  # gelu, relu, add at least
