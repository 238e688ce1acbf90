"""Trace a reference module into a decomposed ATen graph with symbolic sizes."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from typing import Any

import torch
from torch._decomp import core_aten_decompositions, get_decompositions
from torch.export import Dim, ExportedProgram, export

from bot.agent.offline.graph import UnsupportedGraphError

aten = torch.ops.aten

# Composite ops decomposed further than core ATen, into ops the code generator knows.
_EXTRA_DECOMPOSITIONS = [
    "_softmax", "_log_softmax", "native_layer_norm", "linalg_vector_norm", "var_mean",
    "mse_loss", "smooth_l1_loss", "huber_loss", "l1_loss", "hardtanh", "leaky_relu", "elu",
    "softplus", "hardsigmoid", "hardswish", "mish", "logsumexp", "norm", "native_group_norm",
    "rsub", "addcmul", "addcdiv", "lerp", "logit", "selu", "celu", "softshrink", "hardshrink",
    "threshold", "xlogy", "kl_div", "binary_cross_entropy", "nll_loss_forward", "std_mean",
    "frobenius_norm", "cosine_similarity", "glu", "matmul", "linear", "baddbmm", "addmv", "mv",
    "dot", "vdot", "squeeze", "square", "relu6", "prelu", "rrelu", "sgn", "heaviside",
    "log_sigmoid_forward", "mean", "sum", "triplet_margin_loss", "hinge_embedding_loss",
    "margin_ranking_loss", "soft_margin_loss", "cosine_embedding_loss",
    "_native_batch_norm_legit_functional", "_native_batch_norm_legit",
    "_native_batch_norm_legit_no_training", "native_batch_norm", "diag_embed", "diag",
    "tril", "triu", "nll_loss2d_forward", "cross_entropy_loss", "log_sigmoid_forward",
]


def decomposition_table() -> dict[Any, Any]:
    """A fresh copy each time: run_decompositions takes entries out of the table it gets."""
    return dict(_decomposition_table())


@functools.cache
def _decomposition_table() -> dict[Any, Any]:
    # Built once a process (about 0.1 s a trace otherwise).
    table = dict(core_aten_decompositions())
    packets = [getattr(aten, name) for name in _EXTRA_DECOMPOSITIONS if hasattr(aten, name)]
    table.update(get_decompositions(packets))
    return table


class _WarmUp(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x @ y, dim=-1).sum(dim=0) + x.mean()


def warm_up() -> None:
    """One throwaway trace: a process's first torch.export costs about a second more than
    the next ones (lazy registrations, decomposition tables, dynamo's set-up). The warm
    generator server pays it once, and every generation it forks starts past it. On the
    meta device: nothing is computed, so no thread pool starts that a fork would break."""
    inputs = [torch.empty(4, 4, device="meta"), torch.empty(4, 4, device="meta")]
    export_reference(_WarmUp(), inputs)


def export_reference(model: torch.nn.Module, inputs: Sequence[Any]) -> ExportedProgram:
    """torch.export with every tensor dim dynamic where the reference allows it."""
    dynamic = tuple({dim: Dim.AUTO for dim in range(value.dim())}
                    if isinstance(value, torch.Tensor) else None for value in inputs)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = export(model, tuple(inputs), dynamic_shapes=dynamic, strict=False)
            decomposed: ExportedProgram = program.run_decompositions(decomposition_table())
            return decomposed
    except Exception as exc:  # noqa: BLE001 - export fails in many ways; all mean "unsupported"
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UnsupportedGraphError([], f"torch.export could not trace the reference: "
                                    f"{type(exc).__name__}: {first_line[:300]}") from None


def aten_ops(program: ExportedProgram) -> list[str]:
    """The aten operators the traced program calls ("convolution", "amax", ...), sorted:
    what the operator contains, whatever its name says."""
    names = set()
    for node in program.graph.nodes:
        if node.op == "call_function":
            packet = getattr(node.target, "overloadpacket", None)  # aten.sum for sum.dim_IntList
            names.add(str(getattr(packet, "__name__", None) or
                          getattr(node.target, "__name__", node.target)))
    return sorted(names)
