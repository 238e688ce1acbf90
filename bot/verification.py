"""`opbot verify`: a candidate against a spec's reference, through the backend's harness."""

from __future__ import annotations

import tempfile
from pathlib import Path

from bot.errors import BadInputError
from bot.spec import load_spec, write_reference
from runners.base import VerifyResult
from runners.triton import CandidateNotFoundError, TritonBackend, resolve_candidate


def verify_candidate(ref: Path, impl: Path, *, backend: str = "triton",
                     timeout_s: float = 300.0) -> VerifyResult:
    """The harness's verdict; BadInputError when REF or IMPL cannot be used at all."""
    spec = load_spec(ref)
    if backend != "triton":
        raise BadInputError(
            f"the {backend} backend needs the CANN toolkit and an Ascend NPU, which this "
            "machine lacks (see `opbot doctor` on an Ascend runner)")
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
