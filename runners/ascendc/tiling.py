"""A Python mirror of the host tiling that generated Ascend C packages carry.

The generated `<op>_tiling.h` computes, at run time, how a flat elementwise problem is split
over the vector cores and into UB tiles; the kernel then walks exactly the ranges derived
here. Nothing on this machine can run the real thing, so this module does the same
arithmetic in Python (`plan_tiling` is line for line `ComputeTiling`) and `check_tiling`
replays the kernel's index arithmetic for any plan, generated or written by a model, and
says what is wrong in words the agent can act on. `estimate_time` ranks valid plans for
the tuning phase with a small, documented cost model (`CostModel`); the NPU timing decides.

Facts from the Ascend C docs that the rules encode:
- UB is 192 KB on dav-2201 (Atlas A2/A3), of which 8 KB + 256 B are reserved by default;
- UB buffers and plain DataCopy lengths are 32-byte multiples; DataCopyPad moves any
  number of bytes, so tails that are no 32-byte multiple need it;
- numBlocks lies in [1, 65535] and should not exceed the physical vector core count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

BUFFER_NUM = 2  # double buffering: copy-in of tile i+1 overlaps compute of tile i
BLOCK_BYTES = 32  # UB and plain DataCopy work in 32-byte blocks
UB_BYTES_DAV_2201 = 192 * 1024
UB_RESERVED_BYTES = 8 * 1024 + 256
MAX_BLOCK_DIM = 65535
UINT32_MAX = 2**32 - 1
FLOAT_BYTES = 4  # scratch tiles hold float32: inputs are widened before computing

CopyKind = Literal["pad", "plain"]


@dataclass(frozen=True)
class TilingConfig:
    """The problem and the machine, as the host sees them at launch time."""

    total: int  # elements of each (same-shaped) input and output
    dtype_bytes: int  # storage bytes per element of the queued tensors
    cores: int  # vector cores: GetCoreNumAiv()
    ub_bytes: int = UB_BYTES_DAV_2201  # GetCoreMemSize(CoreMemType::UB, ...)
    buffer_num: int = BUFFER_NUM
    queues: int = 2  # TQue count: one per input and one per output
    scratch_bytes_per_element: int = 0  # TBuf bytes per tile element (float32 slots x 4)
    reserved_bytes: int = UB_RESERVED_BYTES
    copy: CopyKind = "pad"  # how the kernel moves GM<->UB: DataCopyPad or plain DataCopy
    # Tuning knobs a tuned header may add (MAX_TILE_LENGTH, MAX_CORES); None: not declared.
    tile_cap: int | None = None  # elements per UB tile at most
    core_cap: int | None = None  # blocks launched at most, whatever the core count

    @property
    def usable_ub(self) -> int:
        return self.ub_bytes - self.reserved_bytes

    @property
    def align_elements(self) -> int:
        """Elements per 32-byte block: tile and block lengths are multiples of it."""
        return max(1, BLOCK_BYTES // self.dtype_bytes)

    @property
    def bytes_per_element(self) -> int:
        """UB bytes one tile element costs: every queue's buffers plus the scratch."""
        return self.buffer_num * self.queues * self.dtype_bytes + self.scratch_bytes_per_element


@dataclass(frozen=True)
class TilingPlan:
    """What the host passes the kernel (block_dim = 0 means: launch nothing)."""

    block_dim: int
    block_length: int  # elements per core; the last core takes what is left
    tile_length: int  # elements per UB tile; a core's last tile may be shorter


@dataclass(frozen=True)
class CoreRange:
    """One core's share, as the kernel derives it from GetBlockIdx() and the plan."""

    index: int
    start: int
    length: int
    tiles: int
    tail_length: int  # elements of the last tile
    tail_needs_pad: bool  # the last tile is no 32-byte multiple: only DataCopyPad moves it


@dataclass(frozen=True)
class TilingReport:
    config: TilingConfig
    plan: TilingPlan
    cores: tuple[CoreRange, ...]
    ub_bytes_used: int
    violations: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return not self.violations

    def feedback(self) -> str:
        """Text for the agent: the problem, the plan, and every violation on its own line."""
        head = (f"tiling of {self.config.total} elements x {self.config.dtype_bytes} B on "
                f"{self.config.cores} cores (UB {self.config.usable_ub} B usable): "
                f"blockDim={self.plan.block_dim} blockLength={self.plan.block_length} "
                f"tileLength={self.plan.tile_length}, UB used {self.ub_bytes_used} B")
        if self.ok:
            return head + ": ok"
        return "\n".join([head + ":", *(f"- {item}" for item in self.violations)])


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def max_tile_length(config: TilingConfig) -> int:
    """The longest 32-byte-aligned tile whose buffers and scratch fit the usable UB."""
    if config.usable_ub <= 0 or config.bytes_per_element <= 0:
        return 0
    align = config.align_elements
    return config.usable_ub // config.bytes_per_element // align * align


def plan_tiling(config: TilingConfig) -> TilingPlan:
    """Mirror of the generated ComputeTiling(): keep the two in step (a test compares them).

    Work is dealt in 32-byte units so every core starts on an aligned GM address; the
    block count is then recomputed so no core is launched without work. A tuned header's
    MAX_CORES and MAX_TILE_LENGTH (`core_cap`, `tile_cap`) clip the cores and the tile.
    """
    empty = TilingPlan(0, 0, 0)
    if config.total <= 0 or config.total > UINT32_MAX or config.cores <= 0:
        return empty
    if config.dtype_bytes <= 0:
        return empty
    max_tile = max_tile_length(config)
    if max_tile == 0:
        return empty
    align = config.align_elements
    units = _ceil_div(config.total, align)
    cores = config.cores if config.core_cap is None else min(config.cores, config.core_cap)
    if cores <= 0:
        return empty  # a zero MAX_CORES: the header would divide by zero
    blocks = min(cores, MAX_BLOCK_DIM, units)
    block_length = _ceil_div(units, blocks) * align
    blocks = _ceil_div(config.total, block_length)
    if config.tile_cap is not None:
        max_tile = min(max_tile, config.tile_cap)
    return TilingPlan(block_dim=blocks, block_length=block_length,
                      tile_length=min(max_tile, block_length))


def core_ranges(config: TilingConfig, plan: TilingPlan) -> tuple[CoreRange, ...]:
    """The kernel's own arithmetic: start = idx * blockLength, length clipped to the total."""
    ranges: list[CoreRange] = []
    for index in range(plan.block_dim):
        start = index * plan.block_length
        length = max(0, min(plan.block_length, config.total - start))
        tiles = _ceil_div(length, plan.tile_length) if plan.tile_length > 0 else 0
        tail = length - (tiles - 1) * plan.tile_length if tiles else 0
        ranges.append(CoreRange(index=index, start=start, length=length, tiles=tiles,
                                tail_length=tail,
                                tail_needs_pad=(tail * config.dtype_bytes) % BLOCK_BYTES != 0))
    return tuple(ranges)


def ub_bytes_used(config: TilingConfig, plan: TilingPlan) -> int:
    return plan.tile_length * config.bytes_per_element


def _config_violations(config: TilingConfig) -> list[str]:
    problems: list[str] = []
    if config.dtype_bytes not in (1, 2, 4, 8):
        problems.append(f"dtype size {config.dtype_bytes} B is not 1, 2, 4 or 8")
    if config.buffer_num < 1:
        problems.append(f"BUFFER_NUM={config.buffer_num}: a queue needs at least one buffer")
    if config.total > UINT32_MAX:
        problems.append(f"{config.total} elements overflow the kernel's uint32_t lengths")
    if config.usable_ub <= 0:
        problems.append(f"UB of {config.ub_bytes} B leaves nothing after the "
                        f"{config.reserved_bytes} B reserve")
    return problems


def _plan_violations(config: TilingConfig, plan: TilingPlan) -> list[str]:
    problems: list[str] = []
    align = config.align_elements
    if plan.block_dim < 1:
        problems.append(f"blockDim={plan.block_dim}: {config.total} elements need at least "
                        "one block")
    if plan.block_dim > config.cores:
        problems.append(f"blockDim={plan.block_dim} exceeds the {config.cores} vector cores "
                        "(GetCoreNumAiv): extra blocks run in costly extra rounds")
    if plan.block_dim > MAX_BLOCK_DIM:
        problems.append(f"blockDim={plan.block_dim} exceeds the launch limit {MAX_BLOCK_DIM}")
    if plan.tile_length <= 0:
        problems.append(f"tileLength={plan.tile_length}: no tile fits "
                        f"({config.bytes_per_element} B per element, {config.usable_ub} B "
                        "usable UB)")
    elif plan.tile_length % align:
        problems.append(f"tileLength={plan.tile_length} is no multiple of {align} elements "
                        "(32 bytes): UB buffers must be 32-byte aligned")
    if plan.block_length % align:
        problems.append(f"blockLength={plan.block_length} is no multiple of {align} "
                        "elements: cores would start at unaligned GM addresses")
    used = ub_bytes_used(config, plan)
    if used > config.usable_ub:
        problems.append(f"UB overflow: BUFFER_NUM {config.buffer_num} x {config.queues} "
                        f"queues x {plan.tile_length * config.dtype_bytes} B + scratch "
                        f"{plan.tile_length * config.scratch_bytes_per_element} B = {used} B "
                        f"> {config.usable_ub} B usable")
    return problems


def _coverage_violations(config: TilingConfig, ranges: tuple[CoreRange, ...]) -> list[str]:
    problems: list[str] = []
    covered = 0
    for item in ranges:
        if item.length == 0:
            problems.append(f"core {item.index} starts at {item.start}, past the end "
                            f"({config.total}): it is launched with no work")
            continue
        if item.start != covered:
            problems.append(f"core {item.index} starts at {item.start} but elements from "
                            f"{covered} are not yet covered")
        covered = max(covered, item.start + item.length)
    if covered < config.total:
        problems.append(f"elements [{covered}, {config.total}) are computed by no core: "
                        "blockDim x blockLength is too small")
    if config.copy == "plain":
        for item in ranges:
            if item.tail_needs_pad:
                problems.append(
                    f"core {item.index}'s last tile has {item.tail_length} elements "
                    f"({item.tail_length * config.dtype_bytes} B, no 32-byte multiple): "
                    "plain DataCopy cannot move it; use DataCopyPad")
                break  # one is enough to make the point
    return problems


def check_tiling(config: TilingConfig, plan: TilingPlan) -> TilingReport:
    """Replay the kernel's ranges for `plan` and list everything that breaks a rule."""
    ranges = core_ranges(config, plan) if plan.block_dim <= MAX_BLOCK_DIM else ()
    violations = _config_violations(config)
    if config.total > 0:
        violations += _plan_violations(config, plan)
        if plan.tile_length > 0:
            violations += _coverage_violations(config, ranges)
    elif plan.block_dim:
        violations.append("an empty problem must not launch a kernel")
    return TilingReport(config=config, plan=plan, cores=ranges,
                        ub_bytes_used=ub_bytes_used(config, plan),
                        violations=tuple(violations))


def simulate(config: TilingConfig) -> TilingReport:
    """Plan as the generated host code does, then check that plan."""
    return check_tiling(config, plan_tiling(config))


def scratch_bytes(compute_slots: int, *, inputs: int, outputs: int, dtype_bytes: int) -> int:
    """Scratch per element of the generated kernels: float32 slots for the compute chain,
    plus one per input and output to widen/narrow them when they are not float32."""
    widen = 0 if dtype_bytes == FLOAT_BYTES else inputs + outputs
    return (compute_slots + widen) * FLOAT_BYTES


# --------------------------------------------------------------------------- cost model


@dataclass(frozen=True)
class CostModel:
    """A ranking heuristic for plans of one elementwise kernel, in estimated microseconds.

    Assumptions (rough orders of magnitude for an Atlas A2 vector core, not measurements:
    only the ratio between plans of the same problem means anything, and the NPU timing
    decides which plan is kept):
    - a launch costs a fixed time plus a little per block dispatched, so a tiny problem
      gains nothing from many cores;
    - the blocks run at once and the kernel lasts as long as its slowest core, so load
      imbalance and a short last core count through the maximum;
    - a tile runs three stages on three pipes: copy-in (MTE2, one DMA per input), compute
      (the vector unit) and copy-out (MTE3, one DMA per output);
    - a DMA costs a fixed latency (queue handshake and MTE issue) plus its bytes, rounded
      up to 32, over the core's bandwidth: the per-core DMA limit or an equal share of the
      chip's HBM bandwidth, whichever is lower; copy-in and copy-out share that bandwidth;
    - a vector instruction costs an issue overhead plus the tile's float32 bytes at the
      vector unit's width (256 B per cycle);
    - with BUFFER_NUM >= 2 the three stages of neighbouring tiles overlap, so a tile costs
      its slowest stage; with one buffer only copy-in of the next tile overlaps copy-out
      of this one, and compute waits for both. The last tile runs all three stages.
    Ignored: L2 hits, UB bank conflicts, scalar loop overhead, DMA bursts.
    """

    launch_us: float = 3.0
    block_launch_us: float = 0.05
    dma_latency_us: float = 0.5
    core_bytes_per_us: float = 100e3  # ~100 GB/s of DMA per vector core
    hbm_bytes_per_us: float = 1.6e6  # ~1.6 TB/s of HBM for the whole chip
    vector_bytes_per_us: float = 460e3  # 256 B per cycle at ~1.8 GHz
    vector_issue_us: float = 0.02


COST_MODEL = CostModel()


@dataclass(frozen=True)
class _TileCost:
    copy_in_us: float
    compute_us: float
    copy_out_us: float
    traffic_us: float  # all of the tile's bytes at the core's bandwidth

    @property
    def through_us(self) -> float:
        """One tile alone, stage after stage."""
        return self.copy_in_us + self.compute_us + self.copy_out_us

    def period_us(self, *, buffered: bool) -> float:
        """Steady-state time per tile when many run back to back."""
        copies = max(self.copy_in_us, self.copy_out_us, self.traffic_us)
        return max(copies, self.compute_us) if buffered else copies + self.compute_us


@dataclass(frozen=True)
class _Rates:
    """What one tile's cost depends on besides its length."""

    config: TilingConfig
    outputs: int
    vector_ops: int
    bandwidth: float  # bytes per microsecond for this core
    model: CostModel

    def tile(self, elements: int) -> _TileCost:
        moved = _ceil_div(elements * self.config.dtype_bytes, BLOCK_BYTES) * BLOCK_BYTES
        inputs = self.config.queues - self.outputs
        model = self.model
        dma = model.dma_latency_us + moved / self.bandwidth
        vector = model.vector_issue_us + elements * FLOAT_BYTES / model.vector_bytes_per_us
        return _TileCost(copy_in_us=inputs * dma, compute_us=self.vector_ops * vector,
                         copy_out_us=self.outputs * dma,
                         traffic_us=self.config.queues * moved / self.bandwidth)


def _core_us(core: CoreRange, full: _TileCost, tail: _TileCost, *, buffered: bool) -> float:
    """One core's time: its full tiles back to back, then the last one through the stages."""
    if core.tiles == 0:
        return 0.0
    return (core.tiles - 1) * full.period_us(buffered=buffered) + tail.through_us


def estimate_time(config: TilingConfig, plan: TilingPlan, *, vector_ops: int, outputs: int = 1,
                  model: CostModel = COST_MODEL) -> float:
    """Estimated microseconds of `plan` under `model` (see CostModel): a ranking heuristic.

    `vector_ops` is the vector instructions a tile runs, casts included; `outputs` of the
    config's queues are outputs, the rest inputs. A plan that launches nothing costs 0 for
    an empty problem and infinity otherwise.
    """
    if plan.block_dim <= 0 or plan.tile_length <= 0:
        return 0.0 if config.total <= 0 else math.inf
    rates = _Rates(config=config, outputs=min(max(outputs, 0), config.queues),
                   vector_ops=max(vector_ops, 0), model=model,
                   bandwidth=min(model.core_bytes_per_us, model.hbm_bytes_per_us / plan.block_dim))
    full = rates.tile(plan.tile_length)
    buffered = config.buffer_num >= 2
    slowest = max(_core_us(core, full, rates.tile(core.tail_length), buffered=buffered)
                  for core in core_ranges(config, plan))
    return model.launch_us + model.block_launch_us * plan.block_dim + slowest


# --------------------------------------------------------------------------- rows pattern
# The mirror of the row pattern's ComputeTiling (templates/tiling_rows.h.in): whole rows
# per core, one row in UB at a time, so the only fit question is whether one row (with its
# queues, scratch rows, parameters and reduction tree) fits the usable UB.

ROW_ALIGN = 16  # elements per row buffer step: 32 bytes of float16 (and 64 of float32)
STAT_LEN = 8  # float32 lanes of one 32-byte block: one per-row scalar


@dataclass(frozen=True)
class RowTilingConfig:
    rows: int
    row_length: int
    dtype_bytes: int
    cores: int
    ub_bytes: int = UB_BYTES_DAV_2201
    inputs: int = 1
    params: int = 0
    outputs: int = 1
    compute_slots: int = 0
    stat_slots: int = 0
    buffer_num: int = BUFFER_NUM
    reserved_bytes: int = UB_RESERVED_BYTES

    @property
    def usable_ub(self) -> int:
        return self.ub_bytes - self.reserved_bytes


@dataclass(frozen=True)
class RowPlan:
    """What the host passes the row kernel (block_dim = 0: launch nothing, or no fit)."""

    block_dim: int
    rows_per_core: int
    row_stride: int  # UB elements per row buffer
    reduce_length: int  # lanes of the reduction tree


def reduce_length(row_length: int) -> int:
    """The reduction tree's lanes: a power of two, at least one 32-byte block of float32."""
    lanes = STAT_LEN
    while lanes < row_length:
        lanes *= 2
    return lanes


def row_ub_bytes(config: RowTilingConfig, row_length: int | None = None) -> int:
    """UB bytes one core needs for rows of `row_length` (default: the config's)."""
    length = config.row_length if row_length is None else row_length
    stride = _ceil_div(length, ROW_ALIGN) * ROW_ALIGN
    widen = 0 if config.dtype_bytes == FLOAT_BYTES else config.inputs + config.outputs
    return (config.buffer_num * (config.inputs + config.outputs) * stride * config.dtype_bytes
            + (config.params + config.compute_slots + widen) * stride * FLOAT_BYTES
            + reduce_length(length) * FLOAT_BYTES + config.stat_slots * STAT_LEN * FLOAT_BYTES)


def max_row_length(config: RowTilingConfig) -> int:
    """The longest row whose working set fits the usable UB (0: none does)."""
    low, high = 0, max(1, config.usable_ub)  # a row costs at least a byte per element
    while low < high:
        middle = (low + high + 1) // 2
        if row_ub_bytes(config, middle) <= config.usable_ub:
            low = middle
        else:
            high = middle - 1
    return low


def row_fit_problem(config: RowTilingConfig) -> str | None:
    """Why a row does not fit in UB, in numbers, or None when it does."""
    needed = row_ub_bytes(config)
    if needed <= config.usable_ub:
        return None
    return (f"a row of {config.row_length} elements ({config.dtype_bytes}-byte dtype) needs "
            f"{needed} B of UB for its queues, {config.compute_slots} scratch rows, "
            f"{config.params} parameter rows and the reduction tree, but {config.usable_ub} B "
            f"are usable: rows up to {max_row_length(config)} elements fit. The row pattern "
            "keeps a whole row in UB (its reduction needs it); longer rows need a kernel that "
            "reduces in chunks")


def plan_rows(config: RowTilingConfig) -> RowPlan:
    """Mirror of the row pattern's ComputeTiling(): keep the two in step."""
    none = RowPlan(0, 0, 0, 0)
    if (config.rows <= 0 or config.row_length <= 0 or config.cores <= 0
            or config.rows * config.row_length > UINT32_MAX or config.dtype_bytes <= 0
            or config.usable_ub <= 0 or row_fit_problem(config) is not None):
        return none
    blocks = min(config.cores, MAX_BLOCK_DIM, config.rows)
    per_core = _ceil_div(config.rows, blocks)
    return RowPlan(block_dim=_ceil_div(config.rows, per_core), rows_per_core=per_core,
                   row_stride=_ceil_div(config.row_length, ROW_ALIGN) * ROW_ALIGN,
                   reduce_length=reduce_length(config.row_length))


def row_ranges(config: RowTilingConfig, plan: RowPlan) -> list[tuple[int, int]]:
    """(first row, rows) per launched core, as the kernel derives them."""
    ranges = []
    for block in range(plan.block_dim):
        first = block * plan.rows_per_core
        count = max(0, min(plan.rows_per_core, config.rows - first))
        ranges.append((first, count))
    return ranges


def check_row_tiling(config: RowTilingConfig, plan: RowPlan) -> list[str]:
    """Every rule a row plan breaks (empty: none): each row once, on a launched core that
    has rows, within the core count, in UB, with aligned buffers and a valid tree."""
    if plan.block_dim == 0:
        problem = row_fit_problem(config)
        return [problem] if problem and config.rows > 0 else []
    problems: list[str] = []
    if plan.block_dim > min(config.cores, MAX_BLOCK_DIM):
        problems.append(f"blockDim {plan.block_dim} exceeds the {config.cores} vector cores")
    covered = 0
    for first, count in row_ranges(config, plan):
        if count == 0:
            problems.append(f"the core starting at row {first} is launched without rows")
        elif first != covered:
            problems.append(f"rows {covered}..{first - 1} are on no core")
        covered = max(covered, first + count)
    if covered != config.rows:
        problems.append(f"the cores cover {covered} of {config.rows} rows")
    if plan.row_stride < config.row_length or plan.row_stride % ROW_ALIGN:
        problems.append(f"rowStride {plan.row_stride} must be a multiple of {ROW_ALIGN} "
                        f"elements, at least the row length {config.row_length}")
    lanes = plan.reduce_length
    if lanes < max(config.row_length, STAT_LEN) or lanes & (lanes - 1):
        problems.append(f"reduceLength {lanes} must be a power of two >= the row length")
    problem = row_fit_problem(config)
    if problem:
        problems.append(problem)
    return problems
