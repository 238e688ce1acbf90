"""`opbot verify`: a candidate against a spec's reference, through the backend's harness."""

from __future__ import annotations

import tempfile
from pathlib import Path

from bot.errors import BackendUnavailableError, BadInputError
from bot.spec import OpSpec, load_spec, write_reference
from runners.base import VerifyResult
from runners.triton import CandidateNotFoundError, TritonBackend, resolve_candidate


def verify_candidate(ref: Path, impl: Path, *, backend: str = "triton",
                     timeout_s: float = 300.0) -> VerifyResult:
    """The harness's verdict; BadInputError when REF or IMPL cannot be used at all."""
    spec = load_spec(ref)
    if backend == "ascendc":
        return _verify_ascendc(spec, impl, timeout_s)
    try:
        candidate = resolve_candidate(impl)
    except CandidateNotFoundError as exc:
        raise BadInputError(str(exc)) from None
    with tempfile.TemporaryDirectory(prefix="opbot-verify-") as tmp:
        reference = spec.reference_path
        if reference is None:
            reference = Path(tmp) / "reference.py"
            write_reference(spec, reference)
        result = TritonBackend().verify(spec.to_request(
            candidate.resolve(), backend=backend, reference_file=reference.resolve(),
            timeout_s=timeout_s))
    reference_failure = next((item for item in result.reasons if item.check == "reference"),
                             None)
    if reference_failure is not None:
        where = f" ({reference_failure.location.render()})" if reference_failure.location else ""
        raise BadInputError(f"{ref}: {reference_failure.message}{where}")
    return result


def _verify_ascendc(spec: OpSpec, impl: Path, timeout_s: float) -> VerifyResult:
    """An Ascend C package through CANN and the NPU; a clear refusal where they are missing."""
    from runners.ascendc.backend import AscendCBackend, resolve_package
    from runners.ascendc.package import PackageError

    backend = AscendCBackend()
    availability = backend.availability()
    if not availability.available:
        raise BackendUnavailableError(
            f"the ascendc backend cannot run here: {availability.reason} (see `opbot doctor`)")
    try:
        package = resolve_package(impl)
    except PackageError as exc:
        raise BadInputError(str(exc)) from None
    with tempfile.TemporaryDirectory(prefix="opbot-verify-") as tmp:
        reference = spec.reference_path
        if reference is None:
            reference = Path(tmp) / "reference.py"
            write_reference(spec, reference)
        return backend.verify(spec.to_request(package.resolve(), backend="ascendc",
                                              reference_file=reference.resolve(),
                                              timeout_s=timeout_s))
