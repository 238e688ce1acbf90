"""`opbot verify`: a candidate against a spec's reference, through the backend's harness."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from bot.agent.backends import get_backend
from bot.errors import BackendUnavailableError, BadInputError
from bot.spec import load_spec, write_reference
from runners.ascendc.cpu_verify import ENVIRONMENT
from runners.base import Backend as Runner
from runners.base import VerifyResult
from runners.sandbox import private_workdir


def verify_candidate(ref: Path, impl: Path, *, backend: str = "triton",
                     timeout_s: float = 300.0, seed: int | None = None,
                     runner: Runner | None = None, time_it: bool = False) -> VerifyResult:
    """The harness's verdict; BadInputError when REF or IMPL cannot be used at all,
    BackendUnavailableError when this machine cannot run the backend. `runner` replaces
    the backend's own (the nightly scan's tests build on fake toolkits)."""
    spec = load_spec(ref)
    agent = get_backend(backend)
    runner = runner or agent.runner()
    availability = runner.availability()
    if not availability.available:
        raise BackendUnavailableError(
            f"the {agent.name} backend cannot run here: {availability.reason} (see "
            "`opbot doctor`)")
    candidate = agent.resolve_candidate(impl)
    with private_workdir("opbot-verify-") as tmp:
        reference = spec.reference_path
        if reference is None:
            reference = tmp / "reference.py"
            write_reference(spec, reference)
        request = spec.to_request(candidate.resolve(), backend=agent.name,
                                  reference_file=reference.resolve(), timeout_s=timeout_s,
                                  time_it=time_it)
        result = runner.verify(replace(request, seed=seed))
    broken = [item for item in result.reasons if item.check == ENVIRONMENT]
    if broken:  # this machine's fault, not the candidate's: exit 2, as when unavailable
        raise BackendUnavailableError(f"the {agent.name} backend cannot run here: "
                                      f"{broken[0].message} (see `opbot doctor`)")
    _raise_for_reference(ref, result)
    return result


def _raise_for_reference(ref: Path, result: VerifyResult) -> None:
    """A reference that does not run is the user's input error, not the candidate's."""
    failure = next((item for item in result.reasons if item.check == "reference"), None)
    if failure is not None:
        where = f" ({failure.location.render()})" if failure.location else ""
        raise BadInputError(f"{ref}: {failure.message}{where}")
