"""Run the Ascend C offline generator on one job, inside the worker process.

The job's `generation` option picks the toolchain layout ("legacy" or "asc"); anything
else falls back to legacy, the layout every CANN release builds.
"""

from __future__ import annotations

from bot.agent.backends.ascendc.offline.generator import (
    PackageOptions,
    generate_from_reference,
)
from bot.agent.backends.ascendc.offline.lower import Unsupported
from bot.agent.offline.job import OfflineJob, OfflineResult, reference_error
from runners.ascendc.package import Generation


def package_options(job: OfflineJob) -> PackageOptions:
    generation: Generation = "asc" if job.option("generation", "legacy") == "asc" else "legacy"
    return PackageOptions(generation=generation,
                          cases=tuple(case.to_json() for case in job.cases))


def generate_offline(job: OfflineJob) -> OfflineResult:
    """The Ascend C package for the job's (elementwise) reference."""
    try:
        result = generate_from_reference(job.reference, job.op_name, cases=job.cases,
                                         init_args=job.init_args, options=package_options(job))
    except Exception as exc:  # noqa: BLE001 - the reference is user code
        return reference_error(exc)
    if isinstance(result, Unsupported):
        return OfflineResult(status="unsupported", unsupported_ops=list(result.ops),
                             reason=result.reason)
    return OfflineResult(status="generated", files=dict(result.files))
