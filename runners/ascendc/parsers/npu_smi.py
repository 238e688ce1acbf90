"""npu-smi's tables and key/value blocks -> chips, processes and their usage."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from runners.ascendc.parsers.common import JsonResult, to_float, to_int


@dataclass
class NpuChip(JsonResult):
    """One chip (one logical device) of the `npu-smi info` table."""

    npu_id: int
    chip_id: int | None
    name: str
    health: str | None = None
    phy_id: int | None = None  # the A3 layout ("Chip  Phy-ID") numbers every die
    bus_id: str | None = None
    power_w: float | None = None
    temp_c: float | None = None
    aicore_pct: float | None = None
    memory_used_mb: int | None = None
    memory_total_mb: int | None = None
    hbm_used_mb: int | None = None
    hbm_total_mb: int | None = None


@dataclass
class NpuProcess(JsonResult):
    npu_id: int
    chip_id: int | None
    pid: int
    name: str
    memory_mb: int | None


@dataclass
class NpuSmiInfo(JsonResult):
    smi_version: str | None = None
    chips: list[NpuChip] = field(default_factory=list)
    processes: list[NpuProcess] = field(default_factory=list)
    phy_id_layout: bool = False

    @property
    def device_count(self) -> int:
        """Logical devices: one per chip (A3 boards show two chips per NPU, each a device)."""
        return len(self.chips)

    @property
    def npu_count(self) -> int:
        return len({chip.npu_id for chip in self.chips})


_BUS_ID = re.compile(r"^[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]$")
_SMI_VERSION = re.compile(r"npu-smi\s+(?P<v>\S+)")
_USAGE_PAIR = re.compile(r"(\d+)\s*/\s*(\d+)")


def parse_npu_smi(text: str) -> NpuSmiInfo:
    """`npu-smi info` (the 98-column, A3 Phy-ID and wide 116-column tables)."""
    info = NpuSmiInfo()
    in_processes = False
    pending: NpuChip | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line.startswith("|"):
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        version = _SMI_VERSION.search(line)
        if info.smi_version is None and version is not None:
            info.smi_version = version["v"]
            continue
        if "Phy-ID" in cells[0]:
            info.phy_id_layout = True
        if cells[0].startswith("NPU") and any("Process" in cell for cell in cells):
            in_processes = True
            continue
        if in_processes:
            _smi_process_row(info, cells)
        else:
            pending = _smi_chip_row(info, cells, pending)
    return info


def _smi_chip_row(info: NpuSmiInfo, cells: list[str], pending: NpuChip | None) -> NpuChip | None:
    """The table gives each chip two rows: `npu name | health | power temp ...` then
    `chip [phy-id] | bus-id | aicore memory hbm`. Returns the chip awaiting its second row."""
    if len(cells) < 3:
        return pending
    first = cells[0].split()
    if len(first) >= 2 and first[0].isdigit() and not _BUS_ID.match(cells[1]):
        numbers = cells[2].split()
        return NpuChip(npu_id=int(first[0]), chip_id=None, name=" ".join(first[1:]),
                       health=cells[1] or None,
                       power_w=to_float(numbers[0]) if numbers else None,
                       temp_c=to_float(numbers[1]) if len(numbers) > 1 else None)
    if pending is not None and first and first[0].isdigit() and _BUS_ID.match(cells[1]):
        pending.chip_id = int(first[0])
        pending.phy_id = int(first[1]) if len(first) > 1 and first[1].isdigit() else None
        pending.bus_id = cells[1]
        _smi_usage(pending, cells[2])
        info.chips.append(pending)
        return None
    return pending


def _smi_usage(chip: NpuChip, cell: str) -> None:
    head = cell.split()
    chip.aicore_pct = to_float(head[0]) if head else None
    pairs = _USAGE_PAIR.findall(cell)
    if pairs:
        chip.memory_used_mb, chip.memory_total_mb = int(pairs[0][0]), int(pairs[0][1])
    if len(pairs) > 1:
        chip.hbm_used_mb, chip.hbm_total_mb = int(pairs[-1][0]), int(pairs[-1][1])


def _smi_process_row(info: NpuSmiInfo, cells: list[str]) -> None:
    if len(cells) < 4:
        return
    ids = cells[0].split()
    if len(ids) < 1 or not ids[0].isdigit() or not cells[1].isdigit():
        return
    info.processes.append(NpuProcess(
        npu_id=int(ids[0]), chip_id=int(ids[1]) if len(ids) > 1 and ids[1].isdigit() else None,
        pid=int(cells[1]), name=cells[2], memory_mb=to_int(cells[3])))


@dataclass
class NpuSmiChipName(JsonResult):
    npu_id: int
    chip_id: int
    logic_id: int | None
    name: str


def parse_npu_smi_chip_names(text: str) -> list[NpuSmiChipName]:
    """`npu-smi info -m`: NPU ID, Chip ID, Chip Logic ID, Chip Name ("Ascend 910B3", "Mcu")."""
    out: list[NpuSmiChipName] = []
    for raw in text.splitlines():
        parts = raw.split()
        if len(parts) < 4 or not (parts[0].isdigit() and parts[1].isdigit()):
            continue
        name = " ".join(parts[3:])
        if name.lower() == "mcu":  # the board's management controller, not a device
            continue
        out.append(NpuSmiChipName(int(parts[0]), int(parts[1]),
                                  int(parts[2]) if parts[2].isdigit() else None, name))
    return out


_SMI_PROCESS_INLINE = re.compile(
    r"Process id:(?P<pid>\d+)\s+Process name:(?P<name>.*?)\s+Process memory\(MB\):(?P<mem>\d+)")


def parse_npu_smi_fields(text: str) -> list[dict[str, str]]:
    """`npu-smi info -t board|common|proc-mem -i N`: `Key : value` blocks, one dict per block."""
    blocks: list[dict[str, str]] = [{}]
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            if blocks[-1]:
                blocks.append({})
            continue
        inline = _SMI_PROCESS_INLINE.search(line)
        if inline is not None:
            blocks[-1].update({"Process id": inline["pid"], "Process name": inline["name"],
                               "Process memory(MB)": inline["mem"]})
            continue
        key, sep, value = line.partition(" : ")
        if sep:
            blocks[-1][key.strip()] = value.strip()
    return [block for block in blocks if block]
