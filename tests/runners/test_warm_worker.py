"""Warm workers (runners/warm.py): the same verdicts as cold ones, and a hostile candidate
forked from the warm server reaches no more than a cold one and leaves nothing behind.

Each hostile candidate is the good ReLU kernel with an attack run at import; what it saw
comes back as its load failure's message ("PROBE {json}"), the only channel it has.
One WarmWorkers serves the whole module (it imports torch and triton once).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runners.base import VerifyRequest, VerifyResult
from runners.sandbox import SandboxPolicy, sandbox_status
from runners.verify import run_harness
from runners.warm import ENV_SWITCH, WarmWorkers
from runners.warm_pool import wanted
from tests.support import CANDIDATES, loopback_listener

RELU = CANDIDATES / "refs" / "relu.py"
GOOD = CANDIDATES / "relu__good_tutorial.py"
BAD = CANDIDATES / "relu__bad_values_zeros.py"
SECRET = ("GITHUB_TOKEN", "ghp_warm_worker_secret_0a1b2c3d")
PROCESS_CAP = 256  # the pool's policy: a fork bomb meets it fast

pytestmark = pytest.mark.skipif(not sandbox_status().works,
                                reason="bubblewrap cannot start a sandbox here")


@pytest.fixture(scope="module")
def pool() -> Iterator[WarmWorkers]:
    """The module's warm workers, started while a secret sits in the environment."""
    os.environ[SECRET[0]] = SECRET[1]
    workers = WarmWorkers(policy=SandboxPolicy(processes=PROCESS_CAP))
    try:
        workers.start()
        yield workers
    finally:
        os.environ.pop(SECRET[0], None)
        workers.close()


def _request(candidate: Path, *, timeout_s: float = 120.0) -> VerifyRequest:
    return VerifyRequest(reference=RELU, candidate=candidate, timeout_s=timeout_s, seed=11)


def _warm(pool: WarmWorkers, candidate: Path, **options: Any) -> VerifyResult:
    forks = pool.forks
    result = run_harness(_request(candidate, **options), warm=pool)
    assert pool.forks == forks + 2, result.warnings  # both workers were forked warm
    return result


def _hostile(tmp_path: Path, attack: str, name: str = "hostile.py") -> Path:
    """The good kernel, with `attack` run at import (its own statements, unindented)."""
    path = tmp_path / name
    path.write_text(f"{attack}\n\n{GOOD.read_text(encoding='utf-8')}", encoding="utf-8")
    return path


PROBE_TAIL = 'raise RuntimeError("PROBE " + json.dumps(seen))'


def _probe(result: VerifyResult) -> Any:
    """What a probing candidate reported from inside its worker."""
    assert result.status == "failed"
    message = result.reasons[-1].message
    assert "PROBE " in message, message
    return json.loads(message.split("PROBE ", 1)[1])


def _checks(result: VerifyResult) -> list[str]:
    return sorted(item.check for item in result.reasons)


# -- the switch ---------------------------------------------------------------------------------


def test_cold_is_the_default_and_the_environment_turns_warm_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_SWITCH, raising=False)
    assert not wanted(None)
    monkeypatch.setenv(ENV_SWITCH, "1")
    assert wanted(None)
    assert not wanted(False)


# -- verdicts -----------------------------------------------------------------------------------


@pytest.mark.parametrize("candidate", [GOOD, BAD], ids=["good", "bad"])
def test_warm_gives_the_cold_verdict(pool: WarmWorkers, candidate: Path) -> None:
    cold = run_harness(_request(candidate), warm=False)
    warm = _warm(pool, candidate)
    assert (warm.status, _checks(warm)) == (cold.status, _checks(cold))
    assert [case.passed for case in warm.cases] == [case.passed for case in cold.cases]
    assert warm.status == ("passed" if candidate == GOOD else "failed")


# -- attacks ----------------------------------------------------------------------------------


def test_other_processes_are_out_of_reach(pool: WarmWorkers, tmp_path: Path) -> None:
    attack = """
import json, os
seen = {"readable": [], "cmdlines": []}
for pid in [name for name in os.listdir("/proc") if name.isdigit()]:
    if int(pid) == os.getpid():
        continue
    try:
        seen["cmdlines"].append(open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace"))
    except OSError:
        pass
    for part in ("environ", "mem", "maps"):
        try:
            with open(f"/proc/{pid}/{part}", "rb") as handle:
                handle.read(1)
            seen["readable"].append(f"{pid}/{part}")
        except OSError:
            pass
seen["parent"] = os.getppid()
seen["caps"] = [line.split()[1] for line in open("/proc/self/status")
                if line.startswith(("CapEff", "CapPrm", "CapBnd", "CapAmb"))]
""" + PROBE_TAIL
    seen = _probe(_warm(pool, _hostile(tmp_path, attack)))
    parent = seen["parent"]
    # The server (its parent) is not dumpable: neither its memory nor its environment.
    assert not [item for item in seen["readable"] if item.startswith(f"{parent}/")]
    assert not any("reference" in line for line in seen["cmdlines"])
    assert set(seen["caps"]) == {"0000000000000000"}  # no capability to bypass that


def test_nothing_written_reaches_a_later_verification(pool: WarmWorkers,
                                                      tmp_path: Path) -> None:
    plant = """
import json, os
seen = {"cwd": os.getcwd(), "wrote": []}
for target in ("/tmp/planted.py", os.path.join(os.getcwd(), "..", "planted-beside.py"),
               os.path.join(os.getcwd(), "planted-here.py"), "/dev/shm/planted",
               "/dev/planted", "/var/tmp/planted", os.path.expanduser("~/planted-home")):
    try:
        with open(target, "w") as handle:
            handle.write("x = 1")
        seen["wrote"].append(target)
    except OSError:
        pass
""" + PROBE_TAIL
    planted = _probe(_warm(pool, _hostile(tmp_path, plant, "plant.py")))
    assert "/var/tmp/planted" not in planted["wrote"]  # the root stays read-only
    targets = json.dumps([*planted["wrote"], planted["cwd"]])
    look = f"""
import json, os
targets = {targets}
seen = {{"found": [path for path in targets if os.path.exists(path)],
        "cwd": os.getcwd(), "cwd_entries": os.listdir(os.getcwd())}}
""" + PROBE_TAIL
    seen = _probe(_warm(pool, _hostile(tmp_path, look, "look.py")))
    assert seen["found"] == []  # the earlier folder and every planted file are gone
    assert seen["cwd"] != planted["cwd"]
    assert seen["cwd_entries"] == []  # a fresh, empty folder
    server = pool.servers["candidate"]
    # Emptied after each verification; what stays are the mount points of the read-only
    # binds (the venv, opbot) when they live under the host's /tmp (a CI clone there).
    left = [entry.name for entry in server.spool.iterdir() if entry.name not in server._bound]
    assert left == []


def _host_processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_no_process_outlives_its_verification(pool: WarmWorkers, tmp_path: Path) -> None:
    marker = f"opbot-warm-sleeper-{os.getpid()}"
    attack = f"""
import os, subprocess, sys
subprocess.Popen(["sleep", "4242"], start_new_session=True)
if os.fork() == 0:  # a double-forked daemon in a session of its own
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(999)",
                                  "{marker}"])
    os._exit(0)
"""
    result = _warm(pool, _hostile(tmp_path, attack))
    assert result.status in ("passed", "failed")
    assert _host_processes_with(marker) == []
    assert _host_processes_with("4242") == []


def test_a_fork_bomb_is_stopped_and_the_next_verification_runs(pool: WarmWorkers,
                                                               tmp_path: Path) -> None:
    attack = """
import os, time
for _ in range(14):
    try:
        os.fork()
    except OSError:
        break
time.sleep(120)
"""
    result = _warm(pool, _hostile(tmp_path, attack), timeout_s=60)
    assert result.status == "failed"
    assert any("processes" in item.message for item in result.reasons), result.reasons
    assert _warm(pool, GOOD).status == "passed"


def test_a_killed_server_is_restarted_and_the_verification_falls_back_cold(
        pool: WarmWorkers, tmp_path: Path) -> None:
    attack = """
import os, signal
os.kill(1, signal.SIGKILL)  # the sandbox's init ignores it
os.kill(os.getppid(), signal.SIGKILL)
"""
    killed = _warm(pool, _hostile(tmp_path, attack))
    assert killed.status == "failed"
    assert "crash" in _checks(killed)
    fallback = run_harness(_request(GOOD), warm=pool)
    assert fallback.status == "passed"
    assert any("ran cold" in warning for warning in fallback.warnings), fallback.warnings
    assert _warm(pool, GOOD).status == "passed"  # the restarted server serves again


def test_a_hanging_candidate_times_out(pool: WarmWorkers, tmp_path: Path) -> None:
    attack = """
import time
while True:
    time.sleep(1)
"""
    result = _warm(pool, _hostile(tmp_path, attack), timeout_s=12)
    assert "timeout" in _checks(result)
    assert _warm(pool, GOOD).status == "passed"


def test_poisoned_modules_do_not_reach_the_next_verification(pool: WarmWorkers,
                                                             tmp_path: Path) -> None:
    attack = """
import os, sys
import torch
import triton.language as tl
import runners.harness.compare
torch.empty_like = lambda x: torch.zeros(1)
tl.maximum = lambda a, b: a * 0
sys.modules["runners.harness.tensors"] = None
os.environ["OPBOT_POISONED"] = "1"
raise RuntimeError("poisoned")
"""
    assert _warm(pool, _hostile(tmp_path, attack)).status == "failed"
    check = """
import json, os
import torch
seen = {"poisoned": "OPBOT_POISONED" in os.environ,
        "empty_like": torch.empty_like(torch.ones(3)).shape[0]}
""" + PROBE_TAIL
    assert _probe(_warm(pool, _hostile(tmp_path, check, "check.py"))) == {
        "poisoned": False, "empty_like": 3}
    assert _warm(pool, GOOD).status == "passed"


def test_no_secret_of_the_parent_is_visible(pool: WarmWorkers, tmp_path: Path) -> None:
    attack = """
import json, os
texts = [repr(dict(os.environ))]
for path in ("/proc/self/environ", f"/proc/{os.getppid()}/environ", "/proc/1/environ"):
    try:
        texts.append(open(path, "rb").read().decode(errors="replace"))
    except OSError:
        pass
seen = {"hits": [text[:40] for text in texts if "ghp_" in text or "GITHUB_TOKEN" in text]}
""" + PROBE_TAIL
    assert _probe(_warm(pool, _hostile(tmp_path, attack))) == {"hits": []}


def test_loopback_of_the_host_is_unreachable(pool: WarmWorkers, tmp_path: Path) -> None:
    with loopback_listener() as (port, received):
        attack = f"""
import json, socket
seen = {{}}
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3).sendall(b"leak")
    seen["connected"] = True
except OSError as exc:
    seen["connected"] = False
    seen["error"] = type(exc).__name__
""" + PROBE_TAIL
        seen = _probe(_warm(pool, _hostile(tmp_path, attack)))
    assert seen["connected"] is False
    assert received == []


def test_servers_started_without_the_interpreter_switch_verify_alike(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Triton reads TRITON_INTERPRET on its first import: a server importing it before
    the worker picks the CPU would fail every kernel ("outside of the scope of a kernel")."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    workers = WarmWorkers()
    try:
        assert _warm(workers, GOOD).status == "passed"
    finally:
        workers.close()


# -- the offline generator, warm ---------------------------------------------------------


def test_the_offline_generator_runs_warm_with_the_cold_answer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPBOT_OFFLINE_CACHE", "0")  # both answers traced, not kept
    from bot.agent.offline.run import generate_in_worker
    from runners.warm import warm_for_this_process
    from runners.warm_pool import shared_workers

    cold = generate_in_worker(RELU, op_name="relu", init_args=None, cases=[])
    workers = shared_workers(sys.executable, None)
    forks = workers.forks
    with warm_for_this_process():
        warm = generate_in_worker(RELU, op_name="relu", init_args=None, cases=[])
    assert workers.forks == forks + 1  # the generator was forked, not started
    assert cold.status == warm.status == "generated", (cold.reason, warm.reason)
    assert warm.source == cold.source
    assert warm.aten_ops == cold.aten_ops


def test_the_warm_generator_forks_its_generations_past_the_first_trace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server traced once before forking: a generation finds the decomposition table
    built (torch.export's first-trace costs paid), in a server that started no thread."""
    monkeypatch.setenv("OPBOT_OFFLINE_CACHE", "0")
    from bot.agent.offline.run import generate_in_worker
    from runners.warm import warm_for_this_process

    probe = tmp_path / "warm_probe_ref.py"
    probe.write_text(f"""
import os
from bot.agent.offline import trace
built = trace._decomposition_table.cache_info().currsize
threads = len(os.listdir(f"/proc/{{os.getppid()}}/task"))
if (built, threads) != (1, 1):
    raise RuntimeError(f"PROBE built={{built}} server threads={{threads}}")
{RELU.read_text(encoding="utf-8")}
""", encoding="utf-8")
    with warm_for_this_process():
        result = generate_in_worker(probe, op_name="relu", init_args=None, cases=[])
    assert result.status == "generated", result.reason


def test_the_tracing_warm_up_starts_no_thread_and_changes_no_draft() -> None:
    code = """
import json, os, sys
from tests.support import REFS
from bot.agent.offline.job import OfflineJob
from bot.agent.offline.__main__ import registry_backend, warm_up
import torch
job = OfflineJob(reference=REFS / "kb_20_softmax.py", op_name="softmax")
before = len(os.listdir("/proc/self/task"))
warm_up()
after = len(os.listdir("/proc/self/task"))
warmed = registry_backend("triton").generate_offline(job).source
print(json.dumps([before, after, warmed]))
"""
    cold_code = """
import json
from tests.support import REFS
from bot.agent.offline.job import OfflineJob
from bot.agent.offline.__main__ import registry_backend
job = OfflineJob(reference=REFS / "kb_20_softmax.py", op_name="softmax")
print(json.dumps(registry_backend("triton").generate_offline(job).source))
"""
    repo = Path(__file__).resolve().parents[2]
    runs = [subprocess.run([sys.executable, "-c", text], cwd=repo, capture_output=True,
                           text=True, timeout=300, check=True) for text in (code, cold_code)]
    before, after, warmed = json.loads(runs[0].stdout)
    assert after == before
    assert warmed
    assert warmed == json.loads(runs[1].stdout)


def test_a_hostile_reference_in_the_warm_generator_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference is user code and the generator runs it: its daemon dies with the
    generation, what it wrote is gone for the next one, and a hang meets the timeout."""
    monkeypatch.setenv("OPBOT_OFFLINE_CACHE", "0")
    from bot.agent.offline.run import generate_in_worker
    from runners.warm import warm_for_this_process

    marker = f"opbot-warm-generator-sleeper-{os.getpid()}"
    hostile = tmp_path / "hostile_ref.py"
    hostile.write_text(f"""
import os, subprocess, sys
from pathlib import Path
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(999)", "{marker}"],
                 start_new_session=True)
Path("planted.txt").write_text("left for the next one")
{RELU.read_text(encoding="utf-8")}
""", encoding="utf-8")
    probe = tmp_path / "probe_ref.py"
    probe.write_text(f"""
import os
from pathlib import Path
planted = [str(path) for path in Path("/tmp").glob("**/planted.txt")]
if planted:
    raise RuntimeError("PROBE found " + repr(planted))
{RELU.read_text(encoding="utf-8")}
""", encoding="utf-8")
    hang = tmp_path / "hang_ref.py"
    hang.write_text(f"import time\ntime.sleep(600)\n{RELU.read_text(encoding='utf-8')}",
                    encoding="utf-8")
    with warm_for_this_process():
        first = generate_in_worker(hostile, op_name="relu", init_args=None, cases=[])
        assert _host_processes_with(marker) == []
        second = generate_in_worker(probe, op_name="relu", init_args=None, cases=[])
        stopped = generate_in_worker(hang, op_name="relu", init_args=None, cases=[],
                                     timeout_s=5)
    assert first.status == "generated", first.reason
    assert second.status == "generated", second.reason  # an empty folder, no planted file
    assert stopped.status == "error"
    assert "ran past 5 s" in stopped.reason


# -- the server's own limits ---------------------------------------------------------------

STANDING_PROBE = """
import json, os, resource
server = os.getppid()
seen = {"as": list(resource.prlimit(server, resource.RLIMIT_AS)),
        "nofile": list(resource.prlimit(server, resource.RLIMIT_NOFILE)),
        "nice": os.getpriority(os.PRIO_PROCESS, server),
        "cpus": sorted(os.sched_getaffinity(server))}
""" + PROBE_TAIL

LOWER_AFFINITY = """
import os
os.sched_setaffinity(os.getppid(), {min(os.sched_getaffinity(os.getppid()))})
"""

LOWER_EVERYTHING = """
import contextlib, os, resource
server = os.getppid()
vm = 0
for line in open(f"/proc/{server}/status"):
    if line.startswith("VmSize:"):
        vm = int(line.split()[1]) * 1024
with contextlib.suppress(OSError, ValueError):
    resource.prlimit(server, resource.RLIMIT_AS, (vm + (8 << 20), vm + (8 << 20)))
resource.prlimit(server, resource.RLIMIT_NOFILE, (64, 64))
os.setpriority(os.PRIO_PROCESS, server, 19)
""" + LOWER_AFFINITY


def test_a_lowered_affinity_of_the_server_is_put_back(pool: WarmWorkers,
                                                      tmp_path: Path) -> None:
    probe = _hostile(tmp_path, STANDING_PROBE, "probe.py")
    before = _probe(_warm(pool, probe))
    _warm(pool, _hostile(tmp_path, LOWER_AFFINITY))
    assert _probe(_warm(pool, probe)) == before  # forked warm, from the original CPUs


def test_lowered_limits_of_the_server_make_it_restart(pool: WarmWorkers,
                                                      tmp_path: Path) -> None:
    """A child lowers its server's rlimits, niceness and affinity (no capability needed);
    the server, unable to raise them back, refuses the next fork: that verification runs
    cold with a warning, and the next one is forked by a fresh server with the original."""
    probe = _hostile(tmp_path, STANDING_PROBE, "probe.py")
    before = _probe(_warm(pool, probe))
    _warm(pool, _hostile(tmp_path, LOWER_EVERYTHING))
    honest = run_harness(_request(GOOD), warm=pool)
    assert honest.status == "passed", honest.reasons
    assert any("refused to fork" in warning and "ran cold" in warning
               for warning in honest.warnings), honest.warnings
    assert _probe(_warm(pool, probe)) == before
    assert _warm(pool, GOOD).status == "passed"


def test_a_warm_child_resolves_paths_in_its_own_folder(pool: WarmWorkers,
                                                       tmp_path: Path) -> None:
    """As a cold `python -m` run in its folder: the import path starts there, and temporary
    files and torch's inductor cache go there, not into the server's spool."""
    attack = """
import glob, json, os, sys, tempfile
from torch._inductor.runtime.cache_dir_utils import cache_dir
here = os.getcwd()
seen = {"path0": sys.path[0] == here, "tmp": tempfile.gettempdir() == here,
        "inductor": cache_dir().startswith(here + "/"),
        "spool": glob.glob("/tmp/torchinductor_*")}
""" + PROBE_TAIL
    seen = _probe(_warm(pool, _hostile(tmp_path, attack)))
    assert seen == {"path0": True, "tmp": True, "inductor": True, "spool": []}
