"""The tiling simulator: plans the generated host code makes, and plans it must reject."""

from __future__ import annotations

import random

import pytest

from runners.ascendc.tiling import (
    MAX_BLOCK_DIM,
    UB_BYTES_DAV_2201,
    UB_RESERVED_BYTES,
    TilingConfig,
    TilingPlan,
    check_tiling,
    plan_tiling,
    scratch_bytes,
    simulate,
)

SIZES = [1, 2, 7, 8, 15, 16, 31, 32, 33, 63, 64, 65, 255, 256, 257, 1000, 4099, 65537,
         131071, 1000003, 2**24 + 3, 123456789]
CORES = [1, 2, 7, 8, 20, 24, 40, 48, 64]


def _config(total: int, *, dtype_bytes: int = 4, cores: int = 40, queues: int = 2,
            slots: int = 0, **extra: object) -> TilingConfig:
    return TilingConfig(total=total, dtype_bytes=dtype_bytes, cores=cores, queues=queues,
                        scratch_bytes_per_element=4 * slots, **extra)  # type: ignore[arg-type]


def _covered_exactly_once(config: TilingConfig, plan: TilingPlan) -> bool:
    """Walk every tile of every core, as the kernel does, and count each element."""
    seen = bytearray(config.total)
    for core in range(plan.block_dim):
        start = core * plan.block_length
        length = max(0, min(plan.block_length, config.total - start))
        tile = 0
        while tile * plan.tile_length < length:
            count = min(plan.tile_length, length - tile * plan.tile_length)
            for index in range(start + tile * plan.tile_length,
                               start + tile * plan.tile_length + count):
                seen[index] += 1
            tile += 1
    return all(value == 1 for value in seen)


@pytest.mark.parametrize("dtype_bytes", [2, 4])
@pytest.mark.parametrize("total", SIZES)
def test_generated_plans_break_no_rule(total: int, dtype_bytes: int) -> None:
    for cores in CORES:
        for queues, slots in ((2, 0), (3, 0), (2, 3), (4, 6)):
            config = _config(total, dtype_bytes=dtype_bytes, cores=cores, queues=queues,
                             slots=slots)
            report = simulate(config)
            assert report.ok, report.feedback()
            plan = report.plan
            assert 1 <= plan.block_dim <= min(cores, MAX_BLOCK_DIM)
            assert plan.tile_length % config.align_elements == 0
            assert plan.block_length % config.align_elements == 0
            assert report.ub_bytes_used <= UB_BYTES_DAV_2201 - UB_RESERVED_BYTES
            assert sum(core.length for core in report.cores) == total
            assert all(core.length > 0 for core in report.cores)


@pytest.mark.parametrize("total", [1, 31, 32, 33, 1000, 4099, 65537])
@pytest.mark.parametrize("cores", [1, 3, 8, 40])
def test_every_element_is_computed_exactly_once(total: int, cores: int) -> None:
    for dtype_bytes in (2, 4):
        config = _config(total, dtype_bytes=dtype_bytes, cores=cores, slots=3)
        assert _covered_exactly_once(config, plan_tiling(config))


def test_random_problems_are_covered() -> None:
    generator = random.Random(20240611)
    for _ in range(200):
        config = _config(generator.randint(1, 300_000), dtype_bytes=generator.choice([2, 4]),
                         cores=generator.randint(1, 64), queues=generator.randint(2, 5),
                         slots=generator.randint(0, 8))
        report = simulate(config)
        assert report.ok, report.feedback()
        ends = [core.start + core.length for core in report.cores]
        assert ends[-1] == config.total
        assert [core.start for core in report.cores[1:]] == ends[:-1]


def test_tails_that_are_no_32_byte_multiple_are_flagged_for_datacopy_pad() -> None:
    report = simulate(_config(1000003, dtype_bytes=4, cores=40))
    assert report.ok
    assert report.cores[-1].tail_needs_pad
    assert not report.cores[0].tail_needs_pad  # full 32-byte-aligned blocks elsewhere
    single = simulate(_config(33, dtype_bytes=2, cores=40))
    assert single.plan.block_dim == 3  # 33 halves: two 32-byte units and a tail
    assert single.cores[-1].tail_length == 1
    assert single.cores[-1].tail_needs_pad


def test_sizes_not_divisible_by_the_cores_leave_the_rest_to_the_last_core() -> None:
    report = simulate(_config(1000, dtype_bytes=4, cores=7))
    assert report.plan.block_dim == 7
    assert [core.length for core in report.cores] == [144] * 6 + [136]


def test_the_tile_shrinks_to_fit_the_ub() -> None:
    small = plan_tiling(_config(10**7, dtype_bytes=4, cores=1, queues=2))
    many = plan_tiling(_config(10**7, dtype_bytes=4, cores=1, queues=6, slots=8))
    usable = UB_BYTES_DAV_2201 - UB_RESERVED_BYTES
    assert small.tile_length * 2 * 2 * 4 <= usable < (small.tile_length + 8) * 2 * 2 * 4
    assert many.tile_length < small.tile_length


def test_an_empty_problem_launches_nothing() -> None:
    report = simulate(_config(0))
    assert report.plan == TilingPlan(0, 0, 0)
    assert report.ok
    launched = check_tiling(_config(0), TilingPlan(1, 8, 8))
    assert any("must not launch" in item for item in launched.violations)


# --------------------------------------------------------------------------- bad plans


@pytest.mark.parametrize(("plan", "expected"), [
    (TilingPlan(block_dim=48, block_length=32, tile_length=32), "exceeds the 40 vector cores"),
    (TilingPlan(block_dim=4, block_length=12, tile_length=12), "no multiple of 8 elements"),
    (TilingPlan(block_dim=4, block_length=1000, tile_length=40000), "UB overflow"),
    (TilingPlan(block_dim=2, block_length=256, tile_length=256), "computed by no core"),
    (TilingPlan(block_dim=10, block_length=512, tile_length=256), "past the end"),
    (TilingPlan(block_dim=0, block_length=0, tile_length=0), "at least one block"),
    (TilingPlan(block_dim=4, block_length=256, tile_length=0), "no tile fits"),
])
def test_bad_plans_are_reported(plan: TilingPlan, expected: str) -> None:
    report = check_tiling(_config(1000, dtype_bytes=4, cores=40), plan)
    assert not report.ok
    assert any(expected in item for item in report.violations), report.feedback()
    assert expected in report.feedback()


def test_plain_datacopy_of_a_tail_is_reported() -> None:
    config = _config(1001, dtype_bytes=4, cores=4, copy="plain")
    report = check_tiling(config, plan_tiling(config))
    assert any("use DataCopyPad" in item for item in report.violations)
    aligned = _config(1024, dtype_bytes=4, cores=4, copy="plain")
    assert check_tiling(aligned, plan_tiling(aligned)).ok


@pytest.mark.parametrize(("config", "expected"), [
    (TilingConfig(total=100, dtype_bytes=3, cores=4), "not 1, 2, 4 or 8"),
    (TilingConfig(total=100, dtype_bytes=4, cores=4, ub_bytes=4096), "leaves nothing"),
    (TilingConfig(total=2**32, dtype_bytes=4, cores=4), "overflow the kernel's uint32_t"),
    (TilingConfig(total=100, dtype_bytes=4, cores=0), "at least one block"),
    (TilingConfig(total=100, dtype_bytes=4, cores=4, queues=3000,
                  scratch_bytes_per_element=4 * 200), "no tile fits"),
])
def test_bad_configurations_are_reported(config: TilingConfig, expected: str) -> None:
    report = simulate(config)
    assert not report.ok
    assert any(expected in item for item in report.violations), report.feedback()


def test_scratch_counts_widening_slots_only_for_narrow_types() -> None:
    assert scratch_bytes(3, inputs=2, outputs=1, dtype_bytes=4) == 12
    assert scratch_bytes(3, inputs=2, outputs=1, dtype_bytes=2) == 24
