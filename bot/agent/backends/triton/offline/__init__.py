"""The Triton offline generator: a Triton module from the reference's own graph, no LLM.

The shared half (bot/agent/offline: tracing with torch.export, lowering to the IR, the
worker) hands this package an IR graph per traced signature; `plan` decides what is
fused, `emit`/`ops`/`kernels` write each kernel and `codegen` the readable module around
them. Anything outside the IR's families is answered `unsupported`, naming the ops.
"""

from __future__ import annotations

from bot.agent.backends.triton.offline.driver import generate_offline

__all__ = ["generate_offline"]
