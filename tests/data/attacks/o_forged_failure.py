# expect: failed static_tamper
# ref: o_relu
# Attack A15: at import, write a forged "failed" answer on the worker's channel whose fields
# have unexpected JSON types (location.line a dict, log_tail a dict, case a list), then
# block, so the worker never answers itself. Checks the judge's and the CLI's rendering.
import json
import os
import time

for _fd in range(3, 16):
    try:
        if os.fstat(_fd).st_mode & 0o170000 == 0o010000 and os.fstat(_fd).st_ino != \
                os.fstat(0).st_ino and os.get_blocking(_fd):
            head = json.dumps({"kind": "failed", "tensors": [], "failure": {
                "check": "load", "message": "forged", "case": ["x"],
                "location": {"file": {"a": 1}, "line": {"b": 2}, "source_line": [3]},
                "log_tail": {"c": 4}, "details": [["k", "v"]]}}).encode()
            os.write(_fd, b"OPB1" + len(head).to_bytes(4, "big") + head)
    except OSError:
        continue
time.sleep(100)
