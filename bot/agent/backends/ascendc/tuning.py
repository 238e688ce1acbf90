"""Tiling candidates for the tuning phase of an Ascend C package.

The generated host tiling (runners/ascendc/templates/tiling.h.in) exposes three knobs:
- BUFFER_NUM (header and kernel): 2 overlaps copies with compute, 1 frees UB for tiles
  twice as long;
- MAX_TILE_LENGTH, a cap on the elements of one UB tile (the template takes the largest
  tile the UB holds): shorter tiles fill the copy/compute pipeline sooner;
- MAX_CORES, a cap on the blocks launched (the template uses every vector core).
The caps are not in the template; a variant adds each as one `constexpr` and clips the
one expression of ComputeTiling it bounds, and runners/ascendc/tiling.py's plan_tiling
mirrors both (`tile_cap`, `core_cap`).

Every candidate is planned with that mirror for each dtype, simulated core count and
problem size; one whose plans equal the current's (a cap never reached) is no experiment
and is dropped, as is one whose plans break a rule (checks.py's static_check reads no
caps, so the capped plans are checked here). The rest are ranked by the cost model
(estimate_time: a heuristic, the NPU timing decides), relative to the current tiling, and
kept while the package passes static_check. A header that is not the template's, modulo
these knobs and comments, gets no variants: the simulator mirrors only the template's
ComputeTiling, so anything else would be a guess.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from bot.agent.backends.ascendc.checks import SIMULATED_CORES, constants, static_check
from bot.agent.backends.ascendc.skeleton import Skeleton
from runners.ascendc.package import KERNEL_DTYPES, PackageError, compute_slots_of, render_template
from runners.ascendc.tiling import (
    FLOAT_BYTES,
    CopyKind,
    TilingConfig,
    TilingPlan,
    check_tiling,
    estimate_time,
    plan_tiling,
    scratch_bytes,
)

BUFFER_CHOICES = (2, 1)
TILE_CAPS: tuple[int | None, ...] = (None, 1024, 2048, 4096, 8192, 16384)  # 32-element multiples
CORE_CAPS: tuple[int | None, ...] = (None, 4, 8, 16, 24, 32, 40)
_TEMPLATE_BUFFER_NUM = 2
_HEADER_CONSTANTS = ("BUFFER_NUM", "UB_RESERVED_BYTES", "NUM_INPUTS", "NUM_OUTPUTS",
                     "COMPUTE_SLOTS")
# Calls in a kernel that are no vector instruction over a tile (copies, indices, casts:
# casts are counted per narrow dtype instead).
_NOT_VECTOR = re.compile(r"DataCopy\w*|Get\w+|Set\w+|Wait\w+|PipeBarrier|Cast")
_ASCENDC_CALL = re.compile(r"\bAscendC::(\w+)\s*\(")
_QUEUE_INIT = re.compile(r"\bInitBuffer\s*\(\s*\w+\s*,\s*(\w+)\s*,")


@dataclass(frozen=True)
class TilingVariant:
    """One candidate: the whole package (paths as in Skeleton.files) with the knobs set."""

    label: str  # e.g. "tile cap 8192, all cores, double buffer"
    files: dict[str, str]
    estimate: float  # simulated time relative to the current tiling: lower is better
    detail: str  # one line: what changed and what the simulator expects


@dataclass(frozen=True)
class Knobs:
    buffer_num: int
    tile_cap: int | None = None
    core_cap: int | None = None

    def label(self) -> str:
        tile = "no tile cap" if self.tile_cap is None else f"tile cap {self.tile_cap}"
        cores = "all cores" if self.core_cap is None else f"core cap {self.core_cap}"
        buffer = {1: "single buffer", 2: "double buffer"}.get(self.buffer_num,
                                                               f"{self.buffer_num} buffers")
        return f"{tile}, {cores}, {buffer}"

    def changes(self, current: Knobs) -> str:
        """The knobs that differ from `current`, as header constants."""
        parts = [f"{name} {_shown(before)} -> {_shown(after)}"
                 for name, before, after in (
                     ("BUFFER_NUM", current.buffer_num, self.buffer_num),
                     ("MAX_TILE_LENGTH", current.tile_cap, self.tile_cap),
                     ("MAX_CORES", current.core_cap, self.core_cap)) if before != after]
        return ", ".join(parts)

    def distance(self, current: Knobs) -> int:
        return sum(before != after for before, after in (
            (current.buffer_num, self.buffer_num), (current.tile_cap, self.tile_cap),
            (current.core_cap, self.core_cap)))


BASE_KNOBS = Knobs(buffer_num=_TEMPLATE_BUFFER_NUM)


def _shown(value: int | None) -> str:
    return "unset" if value is None else str(value)


# --------------------------------------------------------------------------- editing

_BUFFER_NOTES = {
    "header": {2: "double buffering, as in the kernel", 1: "single buffering, as in the kernel"},
    "kernel": {1: "tuned: one buffer per queue (no copy/compute overlap)"},
}
_CAP_LINES = {
    "MAX_TILE_LENGTH": "tuned: elements per UB tile at most",
    "MAX_CORES": "tuned: vector cores used at most",
}
_BLOCKS = re.compile(r"Min\(Min\((?:Min\(cores, MAX_CORES\)|cores), MAX_BLOCK_DIM\), units\)")
_TILE = re.compile(r"Min\((?:Min\(maxTile, MAX_TILE_LENGTH\)|maxTile), blockLength\)")
_SLOTS_LINE = re.compile(r"^[ \t]*constexpr\s+[\w:]+\s+COMPUTE_SLOTS\s*=[^\n]*\n", re.MULTILINE)


def _constant_line(name: str) -> re.Pattern[str]:
    return re.compile(rf"^(?P<head>[ \t]*constexpr\s+[\w:]+\s+{name}\s*=\s*)[^;\n]+;"
                      r"(?P<pad>[ \t]*)(?P<comment>//[^\n]*)?$", re.MULTILINE)


def _set_constant(text: str, name: str, value: int, note: str | None) -> str | None:
    """`name`'s value set, its comment replaced by `note`; None unless declared once."""
    pattern = _constant_line(name)
    if len(pattern.findall(text)) != 1:
        return None

    def edit(match: re.Match[str]) -> str:
        pad = match["pad"] if match["comment"] and match["pad"] else "  "
        return f"{match['head']}{value};" + (f"{pad}// {note}" if note else "")

    return pattern.sub(edit, text)


def _set_caps(header: str, knobs: Knobs) -> str | None:
    """The header with MAX_TILE_LENGTH and MAX_CORES declared and applied, or neither."""
    for name in _CAP_LINES:
        header = re.sub(rf"^[ \t]*constexpr\s+[\w:]+\s+{name}\s*=[^\n]*\n", "", header,
                        flags=re.MULTILINE)
    blocks = "Min(Min(Min(cores, MAX_CORES), MAX_BLOCK_DIM), units)" if knobs.core_cap \
        else "Min(Min(cores, MAX_BLOCK_DIM), units)"
    tile = "Min(Min(maxTile, MAX_TILE_LENGTH), blockLength)" if knobs.tile_cap \
        else "Min(maxTile, blockLength)"
    header, found_blocks = _BLOCKS.subn(blocks, header)
    header, found_tile = _TILE.subn(tile, header)
    slots = list(_SLOTS_LINE.finditer(header))
    if (found_blocks, found_tile, len(slots)) != (1, 1, 1):
        return None
    declared = "".join(f"constexpr uint64_t {name} = {value};  // {_CAP_LINES[name]}\n"
                       for name, value in (("MAX_TILE_LENGTH", knobs.tile_cap),
                                           ("MAX_CORES", knobs.core_cap)) if value)
    end = slots[0].end()
    return header[:end] + declared + header[end:]


def _apply_header(header: str, knobs: Knobs) -> str | None:
    buffered = _set_constant(header, "BUFFER_NUM", knobs.buffer_num,
                             _BUFFER_NOTES["header"].get(knobs.buffer_num))
    return None if buffered is None else _set_caps(buffered, knobs)


def _apply_kernel(kernel: str, knobs: Knobs) -> str | None:
    return _set_constant(kernel, "BUFFER_NUM", knobs.buffer_num,
                         _BUFFER_NOTES["kernel"].get(knobs.buffer_num))


# --------------------------------------------------------------------------- recognising


def _normalised(source: str) -> str:
    """Code without comments or layout: what recognising the template compares."""
    return " ".join(re.sub(r"//[^\n]*", "", source).split())


@dataclass(frozen=True)
class _Layout:
    """What a package exposes to tuning, read from its tiling header and kernel."""

    current: Knobs
    buffer_knob: bool  # the kernel sizes its queues from a BUFFER_NUM constant
    queues: int
    compute_slots: int
    inputs: int
    outputs: int
    reserved: int
    vector_ops: int
    copy: CopyKind


def _template_header(skeleton: Skeleton, header: dict[str, int]) -> str:
    return render_template("tiling.h.in", {
        "op": skeleton.op, "guard": f"OPBOT_{skeleton.op.upper()}_TILING_H",
        "num_inputs": header["NUM_INPUTS"], "num_outputs": header["NUM_OUTPUTS"],
        "compute_slots": header["COMPUTE_SLOTS"]})


def _current_knobs(header_text: str, header: dict[str, int]) -> Knobs | None:
    """The header's knobs, when it is the template with at most these knobs changed."""
    current = Knobs(buffer_num=header["BUFFER_NUM"], tile_cap=header.get("MAX_TILE_LENGTH"),
                    core_cap=header.get("MAX_CORES"))
    as_declared = _apply_header(header_text, current)
    if as_declared is None or _normalised(as_declared) != _normalised(header_text):
        return None  # caps declared but not applied, or applied but not declared
    return current


def _is_template(skeleton: Skeleton, header_text: str, header: dict[str, int]) -> bool:
    base = _apply_header(header_text, BASE_KNOBS)
    return base is not None and \
        _normalised(base) == _normalised(_template_header(skeleton, header))


def _buffer_knob(kernel: str, buffer_num: int) -> bool:
    """Whether BUFFER_NUM can change: the kernel declares it and every queue uses it."""
    queues = _QUEUE_INIT.findall(kernel)
    return (constants(kernel).get("BUFFER_NUM") == buffer_num and bool(queues)
            and all(item == "BUFFER_NUM" for item in queues))


def _vector_ops(kernel: str) -> int:
    """Vector instructions per tile, casts aside: a weight for the compute side."""
    code = re.sub(r"//[^\n]*", "", kernel)
    return max(1, sum(not _NOT_VECTOR.fullmatch(name) for name in _ASCENDC_CALL.findall(code)))


def _read_layout(skeleton: Skeleton) -> _Layout | None:
    """The knobs and facts tuning needs, or None when the package exposes no known knob."""
    header_text = skeleton.text(skeleton.writable[1])
    kernel = skeleton.text(skeleton.kernel_name)
    header = constants(header_text)
    if any(name not in header for name in _HEADER_CONSTANTS):
        return None
    current = _current_knobs(header_text, header)
    if current is None or not _is_template(skeleton, header_text, header):
        return None
    try:
        slots = compute_slots_of(kernel)
    except PackageError:
        return None
    code = re.sub(r"//[^\n]*", "", kernel)
    return _Layout(current=current, buffer_knob=_buffer_knob(kernel, current.buffer_num),
                   queues=header["NUM_INPUTS"] + header["NUM_OUTPUTS"], compute_slots=slots,
                   inputs=header["NUM_INPUTS"], outputs=header["NUM_OUTPUTS"],
                   reserved=header["UB_RESERVED_BYTES"], vector_ops=_vector_ops(kernel),
                   copy="pad" if "DataCopyPad(" in code else "plain")


# --------------------------------------------------------------------------- simulating


@dataclass(frozen=True)
class _Scenario:
    dtype: str
    cores: int
    sizes: tuple[int, ...]


@dataclass(frozen=True)
class _Simulated:
    knobs: Knobs
    plans: tuple[tuple[TilingPlan, ...], ...]  # per scenario, per size: the signature
    times: tuple[tuple[float, ...], ...]  # per scenario, per size: estimated microseconds
    ok: bool  # no plan breaks a rule


def _config(layout: _Layout, knobs: Knobs, dtype: str, cores: int, total: int) -> TilingConfig:
    dtype_bytes = KERNEL_DTYPES[dtype].size
    return TilingConfig(
        total=total, dtype_bytes=dtype_bytes, cores=cores, buffer_num=knobs.buffer_num,
        queues=layout.queues, reserved_bytes=layout.reserved, copy=layout.copy,
        scratch_bytes_per_element=scratch_bytes(layout.compute_slots, inputs=layout.inputs,
                                                outputs=layout.outputs,
                                                dtype_bytes=dtype_bytes),
        tile_cap=knobs.tile_cap, core_cap=knobs.core_cap)


def _simulate(layout: _Layout, knobs: Knobs, scenarios: Sequence[_Scenario]) -> _Simulated:
    plans: list[tuple[TilingPlan, ...]] = []
    times: list[tuple[float, ...]] = []
    ok = True
    for scenario in scenarios:
        narrow = KERNEL_DTYPES[scenario.dtype].size != FLOAT_BYTES
        ops = layout.vector_ops + (layout.queues if narrow else 0)  # widen and narrow casts
        configs = [_config(layout, knobs, scenario.dtype, scenario.cores, total)
                   for total in scenario.sizes]
        row = [plan_tiling(config) for config in configs]
        pairs = list(zip(configs, row, strict=True))
        ok = ok and all(check_tiling(config, plan).ok for config, plan in pairs)
        plans.append(tuple(row))
        times.append(tuple(estimate_time(config, plan, vector_ops=ops, outputs=layout.outputs)
                           for config, plan in pairs))
    return _Simulated(knobs=knobs, plans=tuple(plans), times=tuple(times), ok=ok)


def _relative(variant: _Simulated, current: _Simulated) -> float:
    """Geometric mean, over the scenarios, of the variant's summed time over the current's:
    within a scenario the large problems weigh most, as they do on the NPU."""
    logs = [math.log(sum(mine) / sum(theirs))
            for mine, theirs in zip(variant.times, current.times, strict=True)]
    return math.exp(sum(logs) / len(logs))


def _candidates(layout: _Layout) -> Iterator[Knobs]:
    buffers = BUFFER_CHOICES if layout.buffer_knob else (layout.current.buffer_num,)
    for buffer_num, tile_cap, core_cap in itertools.product(buffers, TILE_CAPS, CORE_CAPS):
        knobs = Knobs(buffer_num=buffer_num, tile_cap=tile_cap, core_cap=core_cap)
        if knobs != layout.current:
            yield knobs


def _distinct(simulated: Sequence[_Simulated], current: _Simulated) -> list[_Simulated]:
    """Valid variants whose plans differ from the current's and from each other's: a cap
    the plans never reach is no experiment. The fewest changed knobs win a tie."""
    seen = {(current.knobs.buffer_num, current.plans)}
    kept: list[_Simulated] = []
    for item in sorted(simulated, key=lambda entry: entry.knobs.distance(current.knobs)):
        signature = (item.knobs.buffer_num, item.plans)
        if item.ok and signature not in seen:
            seen.add(signature)
            kept.append(item)
    return kept


def _scenarios(skeleton: Skeleton, sizes: Sequence[int]) -> tuple[_Scenario, ...]:
    positive = tuple(sorted({int(size) for size in sizes if size > 0}))
    if not positive:
        return ()
    return tuple(_Scenario(dtype, cores, positive)
                 for dtype in skeleton.dtypes if dtype in KERNEL_DTYPES
                 for cores in SIMULATED_CORES)


# --------------------------------------------------------------------------- the variants


def _detail(item: _Simulated, current: _Simulated, scenarios: Sequence[_Scenario],
            estimate: float) -> str:
    """One line: the change, the estimate, and the largest problem on the most cores."""
    row = max(range(len(scenarios)), key=lambda index: scenarios[index].cores)
    scenario = scenarios[row]
    plan, mine, theirs = item.plans[row][-1], item.times[row][-1], current.times[row][-1]
    return (f"{item.knobs.changes(current.knobs)}: simulated {estimate:.3f}x the current "
            f"tiling's time; {scenario.dtype} x {scenario.sizes[-1]} on {scenario.cores} "
            f"cores: {plan.block_dim} blocks, tiles of {plan.tile_length}, "
            f"{theirs:.1f} us -> {mine:.1f} us")


def _files(skeleton: Skeleton, knobs: Knobs, current: Knobs) -> dict[str, str] | None:
    """The package with `knobs` set: the header always, the kernel only for BUFFER_NUM."""
    header_name, kernel_name = skeleton.writable[1], skeleton.kernel_name
    header = _apply_header(skeleton.text(header_name), knobs)
    kernel = skeleton.text(kernel_name) if knobs.buffer_num == current.buffer_num \
        else _apply_kernel(skeleton.text(kernel_name), knobs)
    if header is None or kernel is None:
        return None
    files = dict(skeleton.files)
    files[f"ascendc/{header_name}"] = header
    files[f"ascendc/{kernel_name}"] = kernel
    return files


def tiling_variants(skeleton: Skeleton, sizes: Sequence[int], *,
                    limit: int = 4) -> list[TilingVariant]:
    """The best `limit` tiling variants of `skeleton` for problems of `sizes` elements,
    best first, each passing static_check; [] when the package exposes no known knob.

    `estimate` is the variant's simulated time over the current tiling's (see _relative
    and runners/ascendc/tiling.py's CostModel): a ranking heuristic for what to time.
    """
    if skeleton.pattern != "elementwise":
        return []  # the row tiling has no knobs yet: one whole row per step
    layout = _read_layout(skeleton)
    scenarios = _scenarios(skeleton, sizes)
    if layout is None or not scenarios or limit <= 0:
        return []
    current = _simulate(layout, layout.current, scenarios)
    if not current.ok:
        return []  # tune a sound tiling only: the agent fixes this one first
    simulated = [_simulate(layout, knobs, scenarios) for knobs in _candidates(layout)]
    ranked = sorted(((_relative(item, current), order, item)
                     for order, item in enumerate(_distinct(simulated, current))),
                    key=lambda entry: (entry[0], entry[1]))
    variants: list[TilingVariant] = []
    for estimate, _, item in ranked:
        files = _files(skeleton, item.knobs, layout.current)
        if files is None or not static_check(replace(skeleton, files=files), sizes).ok:
            continue
        variants.append(TilingVariant(label=item.knobs.label(), files=files,
                                      estimate=estimate,
                                      detail=_detail(item, current, scenarios, estimate)))
        if len(variants) == limit:
            break
    return variants
