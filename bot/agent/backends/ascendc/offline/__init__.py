"""The Ascend C offline generator: an operator package for elementwise references, no LLM.

The shared half (bot/agent/offline: tracing, lowering to the IR, the worker) hands this
package IR graphs; `lower` plans each graph into vector instructions (`rules`) over UB
tiles, `generator` renders the package, and `driver.generate_offline` answers a worker's
job. It imports without torch: tracing is imported where it is needed.
"""

from __future__ import annotations

from bot.agent.backends.ascendc.offline.driver import generate_offline
from bot.agent.backends.ascendc.offline.generator import (
    Generated,
    PackageOptions,
    generate,
    generate_from_model,
    generate_from_reference,
)
from bot.agent.backends.ascendc.offline.lower import Lowered, Unsupported, lower

__all__ = ["Generated", "Lowered", "PackageOptions", "Unsupported", "generate",
           "generate_from_model", "generate_from_reference", "generate_offline", "lower"]
