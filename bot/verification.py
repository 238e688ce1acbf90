"""`opbot verify`: a candidate against a spec's reference, through the backend's harness."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

from bot.errors import BackendUnavailableError, BadInputError
from bot.spec import load_spec, write_reference
from runners.base import Backend, VerifyResult
from runners.triton import CandidateNotFoundError, TritonBackend, resolve_candidate


def verify_candidate(ref: Path, impl: Path, *, backend: str = "triton",
                     timeout_s: float = 300.0, seed: int | None = None) -> VerifyResult:
    """The harness's verdict; BadInputError when REF or IMPL cannot be used at all."""
    spec = load_spec(ref)
    runner, candidate = _ascendc(impl) if backend == "ascendc" else _triton(impl)
    with tempfile.TemporaryDirectory(prefix="opbot-verify-") as tmp:
        reference = spec.reference_path
        if reference is None:
            reference = Path(tmp) / "reference.py"
            write_reference(spec, reference)
        request = spec.to_request(candidate.resolve(), backend=backend,
                                  reference_file=reference.resolve(), timeout_s=timeout_s)
        result = runner.verify(replace(request, seed=seed))
    _raise_for_reference(ref, result)
    return result


def _triton(impl: Path) -> tuple[Backend, Path]:
    try:
        return TritonBackend(), resolve_candidate(impl)
    except CandidateNotFoundError as exc:
        raise BadInputError(str(exc)) from None


def _ascendc(impl: Path) -> tuple[Backend, Path]:
    """An Ascend C package goes through CANN and the NPU; a clear refusal where they are
    missing."""
    from runners.ascendc.backend import AscendCBackend, resolve_package
    from runners.ascendc.package import PackageError

    backend = AscendCBackend()
    availability = backend.availability()
    if not availability.available:
        raise BackendUnavailableError(
            f"the ascendc backend cannot run here: {availability.reason} (see `opbot doctor`)")
    try:
        return backend, resolve_package(impl)
    except PackageError as exc:
        raise BadInputError(str(exc)) from None


def _raise_for_reference(ref: Path, result: VerifyResult) -> None:
    """A reference that does not run is the user's input error, not the candidate's."""
    failure = next((item for item in result.reasons if item.check == "reference"), None)
    if failure is not None:
        where = f" ({failure.location.render()})" if failure.location else ""
        raise BadInputError(f"{ref}: {failure.message}{where}")
