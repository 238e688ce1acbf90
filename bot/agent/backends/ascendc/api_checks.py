"""What the real Ascend C API's own checks say on the CPU model, and what usually causes it.

The CPU model runs the open library's parameter checks (api_check): they stop a block with
a message about offsets, sizes and buffer lengths, not about the kernel's mistake. These
hints name the usual cause, so the next draft fixes the kernel, not the symptom.
"""

from __future__ import annotations

import re

_HINTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"offset is \d+, which can not be larger than data len \d+", re.IGNORECASE),
     "a LocalTensor is indexed past the buffer the host tiling sized: the kernel's tile "
     "length and the tiling header's are out of step; use the tiling's tileLength (and "
     "rowLength) everywhere and hard-code no tile length"),
    (re.compile(r"tensor size needs to be at least \d+ bytes, while current tensor size is "
                r"only \d+ bytes", re.IGNORECASE),
     "the tensor holds fewer bytes than the count needs: a count above the tile, or a half "
     "tile used as float (a ReinterpretCast halves its elements); Cast into a float buffer "
     "of the tile's length instead"),
    (re.compile(r"buffer length is \d+, which should be times of 32", re.IGNORECASE),
     "InitBuffer lengths must be multiples of 32 bytes: round the tile's bytes up to 32"),
    (re.compile(r"buffer length is \d+.{0,80}<= ?\d+|InitBuffer\S* (?:numbers exceeds|"
                r"cannot larger|couldn't larger)", re.IGNORECASE),
     "the queues' buffers do not fit in the unified buffer: fewer buffers or smaller tiles "
     "(keep the tiling header's UB budget and the kernel's InitBuffer calls in step)"),
)


def api_check_hints(text: str) -> list[str]:
    """The hints for every API check message in `text`, in table order, once each."""
    return [hint for pattern, hint in _HINTS if pattern.search(text)]
