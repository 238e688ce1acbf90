"""An attacker's corpus against `opbot verify`: wrong or non-kernel candidates, and
candidates that try to make the verifier itself misbehave.

Each file in tests/data/attacks/*.py starts with `# expect: failed <check>` and
`# ref: <name>` (a reference in tests/data/attacks/refs/ or tests/data/candidates/refs/).
Every one of them must be answered `failed` (exit 1) with that check among the reasons,
no traceback, and within the timeout plus a little. Files that need the test's help (a
host path to point at, a generated source, secrets in the environment) have their own
tests below; tests/data/attacks/README.md lists them all. The corpus meets the warm
workers a long-lived bot verifies with (forked from a pre-imported server: the path where
isolation between one candidate and the next is the harder part); the tests below run
`opbot verify` as a user does, in its own process with cold workers.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support import CANDIDATES, DATA, CliRun, run_opbot, run_opbot_here

pytestmark = pytest.mark.slow

ATTACKS = DATA / "attacks"
ATTACK_REFS = ATTACKS / "refs"
HOSTILE_CWD = ATTACKS / "hostile_cwd"
TIMEOUT_S = 30
VERDICT_SLACK_S = 15  # start-up, static scan, reference run: on top of --timeout
HOSTILE_SLACK_S = 10
HUGE_TIMEOUT_S = 5
HUGE_DEADLINE_S = 15

ATTACK_FILES = sorted(ATTACKS.glob("*.py"))
HOSTILE_FILES = sorted(HOSTILE_CWD.glob("*.py"))

# Secrets under names a prefix allowlist (TRITON_*, TORCH_*, ASCEND_*, NPU_*, CANN_*)
# would let through, and the usual ones; each value distinctive enough to grep for.
SECRETS = {
    "TRITON_CREDS": "trc-4b1d9e-attack-creds",
    "TORCH_PASS": "tpw-88c2f1-attack-pass",
    "ASCEND_PAT": "apat-19e7aa-attack-pat",
    "NPU_TOKEN": "npt-5c03d2-attack-token",
    "CANN_URL": "https://user:hunter2@example.invalid/",
    "OPBOT_LLM_API_KEY": "sk-attack-0d6e4f-llm-key",
    "GITHUB_TOKEN": "ghp_attack3a7c21forgetoken",
}
SECRET_NEEDLES = [value for name, value in SECRETS.items() if name != "CANN_URL"] + ["hunter2"]


def header(path: Path) -> tuple[str, str]:
    """(expected check, reference name) from an attack's first two lines."""
    lines = path.read_text(encoding="utf-8").splitlines()
    expect = lines[0].removeprefix("# expect:").split()
    ref = lines[1].removeprefix("# ref:").strip()
    assert expect[:1] == ["failed"], f"{path.name}: bad expect line {lines[0]!r}"
    assert len(expect) == 2, f"{path.name}: bad expect line {lines[0]!r}"
    assert lines[1].startswith("# ref:"), f"{path.name}: bad ref line {lines[1]!r}"
    assert ref, f"{path.name}: bad ref line {lines[1]!r}"
    return expect[1], ref


def reference(name: str) -> Path:
    file = name if name.endswith(".py") else f"{name}.py"
    for folder in (ATTACK_REFS, CANDIDATES / "refs"):
        if (folder / file).is_file():
            return folder / file
    raise AssertionError(f"no reference {file} in {ATTACK_REFS} or {CANDIDATES / 'refs'}")


def verify(ref: Path, candidate: Path, *, timeout_s: int = TIMEOUT_S, allowed_s: float,
           env: dict[str, str] | None = None, warm: bool = False) -> tuple[CliRun, float]:
    """`opbot verify --json`, timed; a run past `allowed_s` (plus a margin) is a failure.
    `warm`: in this process through its warm workers (the long-lived bot's path) instead of
    a process of its own with cold ones (the command line's)."""
    started = time.monotonic()
    args = ("verify", str(ref), str(candidate), "--json", "--timeout", str(timeout_s))
    if warm:
        return run_opbot_here(*args, env=env), time.monotonic() - started
    try:
        run = run_opbot(*args, timeout=allowed_s + 60, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{candidate.name}: no verdict within {allowed_s + 60:g} s "
                    f"(--timeout {timeout_s})")
    return run, time.monotonic() - started


def describe(run: CliRun) -> str:
    return f"exit {run.code}\nstdout: {run.stdout[-3000:]}\nstderr: {run.stderr[-3000:]}"


def failed_checks(run: CliRun) -> set[str]:
    """The checks of a failed verdict; asserts exit 1 and a JSON `failed` on stdout."""
    assert run.code == 1, describe(run)
    try:
        verdict: dict[str, Any] = run.json()
    except ValueError:
        pytest.fail(f"stdout is not one JSON verdict\n{describe(run)}")
    assert verdict["status"] == "failed", describe(run)
    return {reason["check"] for reason in verdict["reasons"]}


@pytest.mark.parametrize("candidate", ATTACK_FILES, ids=lambda path: path.stem)
def test_attack_headers(candidate: Path) -> None:
    expect, ref = header(candidate)
    assert reference(ref).is_file()
    assert expect != "reference"


@pytest.mark.parametrize("candidate", ATTACK_FILES, ids=lambda path: path.stem)
def test_attack_is_caught(candidate: Path) -> None:
    expect, ref = header(candidate)
    run, seconds = verify(reference(ref), candidate, allowed_s=TIMEOUT_S + VERDICT_SLACK_S,
                          warm=True)
    assert "Traceback" not in run.stderr, describe(run)
    checks = failed_checks(run)
    assert expect in checks, f"expected {expect}, got {sorted(checks)}\n{describe(run)}"
    # The candidate's sabotage is never the reference's fault (exit 2, "bad input").
    assert "reference" not in checks, describe(run)
    assert seconds <= TIMEOUT_S + VERDICT_SLACK_S, f"verdict after {seconds:.1f} s"


def test_a_forged_last_answer_is_never_a_pass() -> None:
    """The candidate forges the answer for the last case, after which the judge asks the
    candidate nothing more: the closing round trip (a fresh nonce, echoed) finds the honest
    answer where the echo should be: `crash`. (Some runs end as `timeout` instead, a failure
    too: where the worker blocks then is not understood yet.)"""
    candidate = ATTACKS / "cold" / "o_forged_last_answer.py"
    _, ref = header(candidate)
    # Cold, as `opbot verify` runs alone: the descriptors it writes to are a cold worker's.
    run, _ = verify(reference(ref), candidate, timeout_s=10, allowed_s=10 + VERDICT_SLACK_S,
                    env={"OPBOT_WARM_BROKER": ""})
    checks = failed_checks(run)
    assert checks & {"crash", "timeout"}, f"got {sorted(checks)}\n{describe(run)}"
    assert all(not case["passed"] for case in run.json()["cases"][-1:]), describe(run)


# -- class 7: hostile files in the worker's folder ------------------------------------------


@pytest.mark.parametrize("template", HOSTILE_FILES, ids=lambda path: path.stem)
def test_hostile_worker_folder(template: Path, tmp_path: Path) -> None:
    """Symlinks to host files, FIFOs, a 1,500-deep tree, junk on every descriptor: a
    verdict in time, no traceback, no host file's content in the output, no host file
    written through a link."""
    secret = tmp_path / "host-secret.txt"
    victim = tmp_path / "host-victim.txt"
    secret_text = "HOST-SECRET-7d41c2e9-do-not-print"
    victim_text = "host victim: must stay as it is"
    secret.write_text(secret_text + "\n", encoding="utf-8")
    victim.write_text(victim_text + "\n", encoding="utf-8")
    candidate = tmp_path / template.name
    candidate.write_text(template.read_text(encoding="utf-8")
                         .replace("__HOST_SECRET__", str(secret))
                         .replace("__HOST_VICTIM__", str(victim)), encoding="utf-8")
    _, ref = header(template)

    run, seconds = verify(reference(ref), candidate, allowed_s=TIMEOUT_S + HOSTILE_SLACK_S)

    assert seconds <= TIMEOUT_S + HOSTILE_SLACK_S, f"verdict after {seconds:.1f} s"
    assert "Traceback" not in run.stderr, describe(run)
    output = run.stdout + run.stderr
    assert secret_text not in output, "a host file's content reached the verdict"
    assert secret.read_text(encoding="utf-8") == secret_text + "\n"
    assert victim.read_text(encoding="utf-8") == victim_text + "\n", \
        "the verifier wrote to a host file through a link the candidate planted"
    failed_checks(run)
    assert len(run.stdout) < 1_000_000, "the candidate's junk flooded the verdict"


# -- class 8: a huge hostile source ---------------------------------------------------------


def huge_source(attrs: int = 5500, calls: int = 4200, methods: int = 200, chains: int = 10,
                chain_len: int = 300) -> str:
    """~140 KB: thousands of class attributes and of self-calls to names that do not exist
    (each one a lookup through the whole class body), 200 chained methods, long attribute
    chains; the last method computes with PyTorch."""
    out = ["# expect: failed static_torch_op", "# ref: relu", "import torch",
           "import torch.nn as nn", "import triton", "import triton.language as tl", "",
           "class _Node:", "    pass", "", "_root = _Node()", ""]
    walk = "".join(f".n{i}" for i in range(chain_len))
    out += [f"_chain{k} = lambda: _root{walk}.end{k}" for k in range(chains)]
    out += ["", "@triton.jit",
            "def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):",
            "    pid = tl.program_id(axis=0)",
            "    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)",
            "    mask = offsets < n_elements",
            "    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)",
            "    tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)", "",
            "class ModelNew(nn.Module):"]
    out += ["    " + ";".join(f"a{i}={i}" for i in range(start, min(start + 500, attrs)))
            for start in range(0, attrs, 500)]
    out += ["    def __init__(self):", "        super().__init__()", "",
            "    def forward(self, x):"]
    out += ["        if x is None: " + ";".join(
        f"self.z{i % 7}(x)" for i in range(start, min(start + 500, calls)))
        for start in range(0, calls, 500)]
    out += ["        return self.m0(x)", ""]
    for i in range(methods):
        following = f"self.m{i + 1}(x)" if i + 1 < methods else "torch.relu(x)"
        out += [f"    def m{i}(self, x):",
                f"        self.a{i} = self.a{(i * 7) % attrs} + len(str(_chain{i % chains}))",
                f"        return {following}"]
    return "\n".join(out) + "\n"


def test_huge_hostile_source(tmp_path: Path) -> None:
    source = huge_source()
    assert 90_000 <= len(source) <= 150_000
    candidate = tmp_path / "huge_candidate.py"
    candidate.write_text(source, encoding="utf-8")

    run, seconds = verify(reference("relu"), candidate, timeout_s=HUGE_TIMEOUT_S,
                          allowed_s=HUGE_DEADLINE_S)

    assert seconds <= HUGE_DEADLINE_S, f"verdict after {seconds:.1f} s (--timeout 5)"
    assert "Traceback" not in run.stderr, describe(run)
    failed_checks(run)


# -- class 9: secrets by another name -------------------------------------------------------


def test_secrets_never_reach_the_output() -> None:
    candidate = ATTACKS / "c9_environ_in_exception.py"
    _, ref = header(candidate)

    run, _ = verify(reference(ref), candidate, allowed_s=TIMEOUT_S + VERDICT_SLACK_S,
                    env=SECRETS)

    output = run.stdout + run.stderr
    leaked = [needle for needle in SECRET_NEEDLES if needle in output]
    assert not leaked, f"secrets in the verdict: {leaked}"
    assert "Traceback" not in run.stderr, describe(run)
    failed_checks(run)


def test_forged_failure_fields_render_in_text_mode() -> None:
    """A worker's answer with fields of odd JSON types: the table, not a traceback."""
    candidate = ATTACKS / "o_forged_failure.py"
    run = run_opbot("verify", str(ATTACKS / "refs" / "o_relu.py"), str(candidate),
                    "--timeout", "60")
    assert "Traceback" not in run.stderr + run.stdout
    assert run.code == 1
    assert "failed" in run.stdout
