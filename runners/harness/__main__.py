"""Worker entry point: `python -m runners.harness`, the job arriving on stdin.

The job, the result path and a one-time key come on stdin (read before any user code
runs), so a candidate cannot learn from argv or the environment where the verdict goes.
The verdict is signed with the key: a file a candidate forges is not read as a verdict.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import sys
import traceback
from pathlib import Path
from typing import Any

from runners.base import Failure, VerifyResult


def json_safe(value: Any) -> Any:
    """Plain JSON: non-finite floats become strings ("nan", "inf")."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value


def sign(key: str, payload: str) -> str:
    return hmac.new(key.encode(), payload.encode(), hashlib.sha256).hexdigest()


def main() -> int:
    envelope = json.loads(sys.stdin.read())
    sys.stdin.close()
    result_path = Path(envelope.pop("result"))
    key = str(envelope.pop("key"))
    try:
        from runners.harness.session import Job, run_session

        result = run_session(Job.from_json(envelope["job"]))
    except BaseException as exc:  # noqa: BLE001 - a harness fault must still yield a verdict
        result = VerifyResult.failed(Failure(
            check="crash", message=f"the harness itself failed: {type(exc).__name__}: {exc}",
            log_tail=traceback.format_exc()[-4000:]))
    payload = json.dumps(json_safe(result.to_json()), default=str)
    document = json.dumps({"result": payload, "mac": sign(key, payload)})
    # Written whole, then renamed: a half-written file is never read as a verdict.
    partial = result_path.with_suffix(".partial")
    partial.write_text(document, encoding="utf-8")
    partial.replace(result_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
