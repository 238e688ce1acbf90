"""The entry point: scan a candidate's source and answer its findings in line order."""

from __future__ import annotations

import ast
import re
from collections.abc import Collection, Sequence

from runners.anticheat.file_scan import FileScan
from runners.anticheat.findings import DeadlinePassed, Finding, FindingSink, ScanClock
from runners.anticheat.model import build_module
from runners.anticheat.reach import ForwardWalk
from runners.anticheat.rules import (
    MATCH_REASON,
    MAX_SOURCE_BYTES,
    NESTING_REASON,
    STRUCTURE,
    TAMPER,
    TIMEOUT,
    TIMEOUT_MESSAGE,
)


def _match_patterns(tree: ast.Module, sink: FindingSink) -> None:
    """`case object(softmax=f)` reads an attribute no Attribute node names: flagged."""
    for node in ast.walk(tree):
        if isinstance(node, ast.MatchClass) and node.kwd_attrs:
            sink.add(TAMPER, node, f"matches attributes {', '.join(node.kwd_attrs)} in a "
                                   f"class pattern: {MATCH_REASON}")


def check_source(source: str, *, filename: str = "<candidate>",
                 reference_names: Collection[str] = ("Model",),
                 deadline: float | None = None) -> list[Finding]:
    """Return the static anti-cheat findings for a candidate's source, in line order.

    `deadline` is a `time.monotonic()` value: past it the scan stops and answers what it
    found with a "timeout" finding. Never raises on odd input: a source that does not parse
    (the loader reports it) or is over MAX_SOURCE_BYTES (the caller checks sizes) gives no
    finding; one nested too deeply to parse or check gives a static_structure finding.
    """
    clock = ScanClock(deadline)
    if clock.expired():
        return [Finding(TIMEOUT, TIMEOUT_MESSAGE, 0, "")]
    if len(source.encode("utf-8", errors="replace")) > MAX_SOURCE_BYTES:
        return []
    sink = FindingSink(re.split(r"\r\n|\r|\n", source))
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        if "too many nested" in str(exc.msg):
            sink.add_line(STRUCTURE, exc.lineno or 0, f"the source nests too deeply to parse "
                                                       f"({exc.msg}): {NESTING_REASON}")
        return sink.findings()
    except (RecursionError, MemoryError):
        sink.add_line(STRUCTURE, 0, f"the source nests too deeply to parse: {NESTING_REASON}")
        return sink.findings()
    except (ValueError, OverflowError):
        return []
    refs = frozenset([reference_names] if isinstance(reference_names, str) else reference_names)
    try:
        _match_patterns(tree, sink)
        mod = build_module(tree, refs, clock)
        FileScan(mod, sink, clock).run()
        if mod.model is not None:
            ForwardWalk(mod, mod.model, sink, clock).run()
    except DeadlinePassed:
        sink.add_line(TIMEOUT, 0, TIMEOUT_MESSAGE)
    except (RecursionError, MemoryError):
        sink.add_line(STRUCTURE, 0, f"the source nests too deeply to check: {NESTING_REASON}")
    return sink.findings()


def summarize(findings: Sequence[Finding]) -> str:
    """One line per finding: ``line N: message``."""
    return "\n".join(f"line {finding.line}: {finding.message}" for finding in findings)
