"""How much does `opbot verify` cost over simply running the candidate once?

Prints the median wall time of `opbot verify REF CAND --json` and of a bare Python run of
the same candidate (import, build ModelNew, one forward on the reference's get_inputs()),
each in a fresh process, and their ratio. Target: verify within 1.5x of the bare run
(verification runs the reference and the candidate in two sandboxed workers, started at
once, and compares in the parent).

Then, in this process and through the same API (bot.verification.verify_candidate), one
verification of the same candidate with cold workers (each started fresh: interpreter,
torch and triton imports) and with warm ones (forked from pre-imported servers,
runners/warm.py; measured after one warm-up verification). Target: warm at least 2x faster.

    .venv/bin/python benchmarks/verify_overhead.py [REF CAND] [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bot.verification import verify_candidate
from runners import warm, warm_pool

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_REF = ROOT / "tests" / "data" / "candidates" / "refs" / "softmax.py"
DEFAULT_CANDIDATE = ROOT / "tests" / "data" / "candidates" / "softmax__good_tutorial.py"

BARE_RUN = """
import importlib.util, os, sys
os.environ.setdefault("TRITON_INTERPRET", "1")
import torch

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

reference = load(sys.argv[1], "reference")
candidate = load(sys.argv[2], "candidate")
model = candidate.ModelNew(*reference.get_init_inputs())
with torch.no_grad():
    model(*reference.get_inputs())
"""


def _timed(command: list[str]) -> float:
    started = time.perf_counter()
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if completed.returncode not in (0, 1):
        sys.exit(f"{command[:3]} failed: {completed.stderr[-2000:]}")
    return elapsed


def _timed_verdict(ref: Path, candidate: Path) -> tuple[float, str]:
    """Seconds of one verification, and its verdict (status and failed checks)."""
    started = time.perf_counter()
    result = verify_candidate(ref, candidate, backend="triton", timeout_s=600.0, seed=1)
    elapsed = time.perf_counter() - started
    return elapsed, f"{result.status} {sorted(item.check for item in result.reasons)}"


def _median_run(ref: Path, candidate: Path, repeat: int) -> tuple[float, str]:
    runs = [_timed_verdict(ref, candidate) for _ in range(repeat)]
    verdicts = {verdict for _, verdict in runs}
    if len(verdicts) != 1:
        sys.exit(f"the same verification gave different verdicts: {verdicts}")
    return statistics.median(seconds for seconds, _ in runs), verdicts.pop()


def _cold_and_warm(ref: Path, candidate: Path, repeat: int) -> tuple[float, float]:
    """Medians of one in-process verification with cold workers, then with warm ones;
    exits when the two give different verdicts (a fast wrong answer is no speed-up)."""
    cold, cold_verdict = _median_run(ref, candidate, repeat)
    warm.enable()
    try:
        _timed_verdict(ref, candidate)  # the warm-up: the servers start and import
        hot, warm_verdict = _median_run(ref, candidate, repeat)
    finally:
        warm_pool.close_shared()
    if warm_verdict != cold_verdict:
        sys.exit(f"warm and cold verdicts differ: {warm_verdict} / {cold_verdict}")
    print(f"verdict (cold and warm): {cold_verdict}")
    return cold, hot


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ref", nargs="?", type=Path, default=DEFAULT_REF)
    parser.add_argument("candidate", nargs="?", type=Path, default=DEFAULT_CANDIDATE)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    bare = [sys.executable, "-c", BARE_RUN, str(args.ref), str(args.candidate)]
    verify = [sys.executable, "-m", "bot", "verify", str(args.ref), str(args.candidate),
              "--json"]
    bare_times = [_timed(bare) for _ in range(args.repeat)]
    verify_times = [_timed(verify) for _ in range(args.repeat)]
    bare_median = statistics.median(bare_times)
    verify_median = statistics.median(verify_times)
    print(f"candidate: {args.candidate.name}")
    print(f"bare run:     median {bare_median:.2f} s over {args.repeat}")
    print(f"opbot verify: median {verify_median:.2f} s over {args.repeat}")
    print(f"per-verification latency: {verify_median:.2f} s (bare run {bare_median:.2f} s)")
    print(f"ratio verify / bare: {verify_median / bare_median:.2f}x (target: at most 1.5x)")
    cold_median, warm_median = _cold_and_warm(args.ref, args.candidate, args.repeat)
    print(f"cold verify: {cold_median:.2f} s")
    print(f"warm verify: {warm_median:.2f} s")
    print(f"ratio cold / warm: {cold_median / warm_median:.2f}x (target: at least 2x)")


if __name__ == "__main__":
    main()
