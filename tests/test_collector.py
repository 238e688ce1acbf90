"""The garbage collector's tuning (runners/collector.py) reaches the processes it is for: an
`opbot` command, and the forks of a process that settled before forking (a warm server)."""

from __future__ import annotations

import json
import subprocess
import sys

from runners import collector
from tests.support import REPO


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_an_opbot_command_runs_with_fewer_collections() -> None:
    code = ("import gc, sys\nfrom bot.cli import main\n"
            "sys.argv = ['opbot', 'verify', 'no-such-spec.yaml', 'no-such-folder']\n"
            "try:\n    main(prog_name='opbot')\nexcept SystemExit:\n    pass\n"
            "print(list(gc.get_threshold()))")
    assert json.loads(_python(code)) == [collector.YOUNG_THRESHOLD, *collector.OLDER_THRESHOLDS]


def test_a_fork_after_settling_inherits_the_frozen_objects_and_the_tuning() -> None:
    code = ("import gc, os, json\nfrom runners import collector\nimport runners.sandbox\n"
            "before = gc.get_freeze_count()\ncollector.tune()\ncollector.settle_before_forks()\n"
            "reader, writer = os.pipe()\nchild = os.fork()\n"
            "if child == 0:\n"
            "    os.write(writer, json.dumps([gc.get_freeze_count(), gc.get_threshold()[0]])"
            ".encode())\n    os._exit(0)\n"
            "os.waitpid(child, 0)\nfrozen, threshold = json.loads(os.read(reader, 200))\n"
            "print(json.dumps([before, frozen, threshold]))")
    before, frozen, threshold = json.loads(_python(code))
    assert before == 0
    assert frozen > 1000  # the imports' objects
    assert threshold == collector.YOUNG_THRESHOLD
