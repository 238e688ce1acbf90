"""Worker entry point: `python -m runners.harness reference|candidate`.

The judge (runners/verify.py) starts one of each, sandboxed, with stdin and stdout as the
channel; everything the worker needs arrives over it (runners/harness/wire.py). A warm
server (runners/warm.py) forks its children into `run_role` with the same descriptors.
"""

from __future__ import annotations

import sys

from runners import collector
from runners.harness.worker import Channel

ROLES = ("reference", "candidate")


def run_role(role: str) -> int:
    """Be one worker of `role` on the channel at stdin/stdout, until the judge says exit."""
    collector.tune()  # a cold worker's own; a warm server's child has it already
    channel = Channel.take_stdio()
    if role == "reference":
        from runners.harness import reference_worker

        reference_worker.main(channel)
    else:
        from runners.harness import candidate_worker

        candidate_worker.run(channel)
    return 0


def main() -> int:
    role = sys.argv[1] if len(sys.argv) > 1 else ""
    if role not in ROLES:
        print("usage: python -m runners.harness reference|candidate", file=sys.stderr)
        return 2
    return run_role(role)


if __name__ == "__main__":
    sys.exit(main())
