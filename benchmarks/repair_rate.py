"""How often would a model repair its mistake from our feedback? A rate per mistake class.

Injects the mistakes real models make into verified kernels (benchmarks/repair/mistakes.py),
judges each through the agent loop's workbench, and lets a repair oracle undo it only when
the feedback names it (benchmarks/repair/oracle.py). Prints injected / detected / named /
repaired per class; `--check` fails when a rate falls below benchmarks/repair/floors.json.

    .venv/bin/python benchmarks/repair_rate.py [--set full|ci] [--json] [--check]
        [--only CLASS[/VARIANT]] [--reverify fresh|cached] [--feedback]

Ascend C variants that only the real-header type-check or the CPU model can catch run only
where those run (OPBOT_ASCENDC_REAL_CHECKS not 0, the devkit sources present).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the repository root holds `benchmarks`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.repair.runner import (
    Trial,
    ci_plans,
    full_plan,
    real_checks_here,
    run_plan,
)
from benchmarks.repair.table import (
    below_floor,
    load_floors,
    rates,
    render_caveats,
    render_table,
    render_trials,
)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--set", choices=("full", "ci"), default="full",
                        help="every example kernel, or the CI test's reduced set")
    parser.add_argument("--only", action="append", metavar="CLASS[/VARIANT]",
                        help="only this mistake class (repeatable; full set only)")
    parser.add_argument("--reverify", choices=("fresh", "cached"), default="fresh",
                        help="judge each repaired kernel again, or reuse the verdict on the "
                             "identical verified files")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a class's rate is below its floor")
    parser.add_argument("--feedback", action="store_true",
                        help="print the feedback each injected mistake got")
    return parser.parse_args()


def _trial_json(trial: Trial) -> dict[str, object]:
    return {"mistake": trial.mistake, "variant": trial.variant, "backend": trial.backend,
            "op": trial.op, "detected": trial.detected, "caught_by": trial.caught_by,
            "cues": list(trial.cues), "repaired": trial.repaired,
            "repair_stage": trial.repair_stage, "seconds": round(trial.seconds, 2),
            "feedback": trial.feedback}


def main() -> int:
    args = _arguments()
    real = real_checks_here()
    plans = [full_plan(real_checks=real, keys=args.only)] if args.set == "full" \
        else ci_plans(real_checks=real)
    started = time.monotonic()
    progress = (lambda _message: None) if args.json else \
        (lambda message: print(f".. {message}", file=sys.stderr, flush=True))
    trials = [trial for plan in plans
              for trial in run_plan(plan, reverify=args.reverify, progress=progress)]
    seconds = time.monotonic() - started
    rows = rates(trials)
    problems = below_floor(rows, load_floors(args.set)) if args.check else []
    if args.json:
        print(json.dumps({"set": args.set, "real_checks": real, "seconds": round(seconds, 1),
                          "classes": [row.to_json() for row in rows],
                          "trials": [_trial_json(trial) for trial in trials],
                          "below_floor": problems}, indent=2))
    else:
        if args.feedback:
            for trial in trials:
                print(f"=== {trial.backend}/{trial.op} {trial.mistake}: {trial.variant}\n"
                      f"{trial.feedback or '(no feedback: every check passed)'}\n")
        print(render_trials(trials), end="\n\n")
        print(render_table(rows))
        caveats = render_caveats(trials)
        if caveats:
            print(f"\nUndetected here, and why:\n{caveats}")
        print(f"\n{len(trials)} injections in {seconds:.0f} s; Ascend C real checks "
              f"{'on' if real else 'off (type-check / CPU-model variants left out)'}")
        for problem in problems:
            print(f"BELOW FLOOR: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
