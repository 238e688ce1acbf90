"""Tensors in, tensors out: the CPU-model shim's operator body (runners/ascendc/cpu_verify.py).

Runs inside the judge's candidate worker, which is already sandboxed, so the package's
CPU twin starts as a plain child process there (bwrap cannot nest). The guard sees only
`torch.ops.<namespace>.<op>`: what happens inside the operator is the package's work.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def run_tensors(package: str, program: str, tensors: list[torch.Tensor], outputs: int,
                cores: int, *, params: int = 0) -> list[torch.Tensor]:
    """The package's outputs for `tensors` (the inputs, one dtype, one shape; then `params`
    parameter tensors, sent as float32), as the CPU twin wrote them."""
    import numpy as np
    import torch

    from runners.ascendc.cpumodel import run_numpy

    inputs = tensors[:len(tensors) - params] if params else tensors
    weights = tensors[len(tensors) - params:] if params else []
    dtype = str(inputs[0].dtype).removeprefix("torch.")
    arrays = [tensor.detach().contiguous().cpu().numpy() for tensor in inputs]
    rows = [tensor.detach().float().contiguous().cpu().numpy().reshape(-1)
            for tensor in weights]
    results = run_numpy(Path(package), Path(program), dtype, arrays, cores, sandboxed=False,
                        params=rows)
    if len(results) != outputs:
        raise RuntimeError(f"the CPU twin wrote {len(results)} outputs, the operator has "
                           f"{outputs}")
    return [torch.from_numpy(np.ascontiguousarray(result)) for result in results]
