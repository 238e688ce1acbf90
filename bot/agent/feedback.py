"""Verification results -> precise, compact feedback for the model's next attempt.

The more exact the platform's feedback, the better the next draft: errors come as
file:line, the message and the offending source line; mismatches with the output, the
case (shapes, dtype, seed), max abs/rel error, the first wrong indices with expected and
actual values, and whether the errors sit in the tails; cheats said plainly; crashes and
timeouts with the end of the log. Repeats are dropped and long logs lose their middle, so
a prompt stays within its budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePath
from typing import Any

from runners.base import CaseResult, Failure, Timing, VerifyResult

# Roughly four characters a token: enough to keep prompts within a budget.
CHARS_PER_TOKEN = 4
DEFAULT_FEEDBACK_TOKENS = 3000
_LOG_CHARS = 1500

_PLAIN_WORDS = {
    "torch_op": "The forward computed with PyTorch instead of the kernel. Every arithmetic "
                "step must happen inside @triton.jit kernels; the wrapper may only allocate "
                "(torch.empty...), reshape/view and launch.",
    "static_torch_op": "The source calls PyTorch compute on the forward path; only "
                       "allocation, views and launches are allowed outside kernels.",
    "static_reference_call": "The candidate calls the reference (Model / super().forward); "
                             "it must compute the result itself.",
    "static_fallback": "A try/except falls back to PyTorch; remove the fallback and fix "
                       "the kernel.",
    "static_stream": "The candidate uses threads, streams or deferred work; launch the "
                     "kernels on the default stream and return when done.",
    "static_tamper": "The candidate tampers with timers, the harness or the environment; "
                     "remove that code.",
    "cached_output": "The forward returned an earlier call's result for fresh inputs: "
                     "compute from the inputs every time, no caching.",
    "input_mutation": "The forward modified its input tensors; write to a new output.",
    "no_kernel": "The forward launched no Triton kernel.",
    "timeout": "The run did not finish in time: look for an infinite loop or a grid that "
               "is far too large.",
    "out_of_bounds": "A load or store reached outside the tensors the kernel was given: "
                     "mask every access (offsets < n) and check the grid covers only the "
                     "real sizes.",
    "crash": "The process died: typically an out-of-bounds load or store (check every mask).",
}


def truncate_middle(text: str, limit: int) -> str:
    """Keep the start and the end of a long text: both carry the useful parts of a log."""
    if len(text) <= limit:
        return text
    keep = max(limit - 40, 20)
    head = keep // 3
    tail = keep - head
    return f"{text[:head]}\n[... {len(text) - head - tail} characters cut ...]\n{text[-tail:]}"


def _case_words(case: CaseResult | None, name: str | None) -> str:
    if case is None:
        return f"case {name}" if name else ""
    shapes = ", ".join("x".join(str(size) for size in shape) for shape in case.shapes)
    return (f"case {case.name} (input shapes {shapes}; dtypes {', '.join(case.dtypes)}; "
            f"seed {case.seed})")


def _tails(details: dict[str, Any]) -> str:
    ranges = details.get("mismatch_index_ranges") or []
    if not ranges:
        return ""
    low, high, size = ranges[-1]
    if low > 0 and high == size - 1:
        return (f"All mismatches of the last dim lie in indices {low}..{high} of {size}: "
                "the tail (a missing or wrong mask, or a grid that skips the last block).")
    return f"Mismatching index ranges per dim [first, last, size]: {ranges}."


def _value_lines(failure: Failure) -> list[str]:
    details = failure.details
    lines = [f"max abs error {details.get('max_abs_err', 0):.6g}, max rel error "
             f"{details.get('max_rel_err', 0):.6g}; {details.get('mismatches')} of "
             f"{details.get('total')} values outside atol={details.get('atol')}, "
             f"rtol={details.get('rtol')}."]
    samples = details.get("first_mismatches") or []
    if samples:
        shown = "; ".join(f"index {item['index']}: expected {item['expected']:.6g}, got "
                          f"{item['actual']:.6g}" for item in samples)
        lines.append(f"First mismatches: {shown}.")
    tails = _tails(details)
    if tails:
        lines.append(tails)
    return lines


def _failure_lines(failure: Failure, cases: dict[str, CaseResult]) -> list[str]:
    where = _case_words(cases.get(failure.case or ""), failure.case)
    output = f", output {failure.output}" if failure.output is not None else ""
    # Value failures say it all in their detail lines; others in their message.
    message = "" if failure.check == "values" else f": {failure.message}"
    lines = [f"[{failure.check}]{' ' + where if where else ''}{output}{message}"]
    if failure.location is not None:
        name = PurePath(failure.location.file).name
        lines.append(f"  at line {failure.location.line} of {name}: "
                     f"{failure.location.source_line.strip()}")
    if failure.check == "values":
        lines += [f"  {line}" for line in _value_lines(failure)]
    elif failure.details and failure.check in ("shape", "dtype", "nan_inf", "torch_op"):
        lines.append(f"  details: {failure.details}")
        tails = _tails(failure.details) if failure.check == "nan_inf" else ""
        if tails:
            lines.append(f"  {tails}")
    plain = _PLAIN_WORDS.get(failure.check)
    if plain:
        lines.append(f"  {plain}")
    # A located error says where; the log adds only the harness's own frames.
    if failure.log_tail and (failure.check in ("timeout", "crash") or failure.location is None):
        lines.append("  log (end):\n" + truncate_middle(failure.log_tail, _LOG_CHARS))
    return lines


def _again(failures: Sequence[Failure]) -> str:
    parts = []
    for failure in failures:
        error = failure.details.get("max_abs_err")
        parts.append(f"{failure.case} (max abs error {error:.6g})" if isinstance(
            error, float) else str(failure.case))
    return "  The same problem on cases: " + ", ".join(parts) + "."


def verification_feedback(result: VerifyResult, *,
                          budget_tokens: int = DEFAULT_FEEDBACK_TOKENS) -> str:
    """What the next attempt must fix, most important first, deduplicated, within budget."""
    cases = {case.name: case for case in result.cases}
    groups: dict[tuple[str, int | None, str], list[Failure]] = {}
    for failure in result.reasons:
        # One problem, many cases: a value mismatch per output; other checks per message.
        text = "" if failure.check in ("values", "nan_inf", "shape", "dtype") else \
            failure.message
        groups.setdefault((failure.check, failure.output, text), []).append(failure)
    blocks = []
    for failures in groups.values():
        lines = _failure_lines(failures[0], cases)
        if len(failures) > 1:
            lines.append(_again(failures[1:]))
        blocks.append("\n".join(lines))
    passed = [case.name for case in result.cases if case.passed]
    summary = (f"Verification failed on {result.device}: {len(blocks)} distinct problem(s)."
               + (f" Cases that passed: {', '.join(passed)}." if passed else ""))
    text = "\n\n".join([summary, *blocks])
    return truncate_middle(text, budget_tokens * CHARS_PER_TOKEN)


def timing_feedback(timing: Timing, bytes_moved: int | None = None) -> str:
    lines = [f"The kernel passed verification. Timing on {timing.device}: kernel "
             f"{timing.candidate_ms:.4g} ms (min {timing.candidate_min_ms:.4g}), PyTorch "
             f"{timing.reference_ms:.4g} ms: {timing.speedup:.3g}x."]
    if bytes_moved:
        bandwidth = bytes_moved / (timing.candidate_ms / 1000.0) / 1e9
        lines.append(f"Achieved bandwidth: {bandwidth:.4g} GB/s.")
    lines.append("Make it faster while keeping it correct (block sizes, fusion, "
                 "memory access order).")
    return "\n".join(lines)
