"""Worker entry point: `python -m bot.agent.offline`, the job arriving on stdin as JSON."""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

from runners.base import CaseSpec, InputCase


def main() -> int:
    envelope = json.loads(sys.stdin.read())
    result_path = Path(envelope["result"])
    job = envelope["job"]
    try:
        from bot.agent.offline.driver import generate, generate_ascendc

        cases = [CaseSpec(name=item["name"], seed=int(item["seed"]),
                          inputs=[InputCase(**entry) for entry in item["inputs"]])
                 for item in job.get("cases") or []]
        if job.get("backend") == "ascendc":
            result = generate_ascendc(Path(job["reference"]), init_args=job.get("init_args"),
                                      cases=cases, op_name=str(job["op"]),
                                      generation=str(job.get("generation", "legacy"))).to_json()
        else:
            result = generate(Path(job["reference"]), init_args=job.get("init_args"),
                              cases=cases, op_name=str(job["op"])).to_json()
    except Exception as exc:  # noqa: BLE001 - a generator bug is reported, never a crash
        result = {"status": "error", "reason": f"the offline generator failed: "
                  f"{type(exc).__name__}: {exc}", "log": traceback.format_exc()[-4000:]}
    partial = result_path.with_suffix(".partial")
    partial.write_text(json.dumps(result), encoding="utf-8")
    partial.replace(result_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
