#!/usr/bin/env bash
# Entrypoint of the opbot Ascend image: load CANN's environment, then run the command.
#
# CANN's set_env.sh moved between toolchain generations (<= 8.3: ascend-toolkit/, >= 8.5:
# cann/ or cann-<version>/), so it is looked up at run time instead of being written into
# the image: the same image then works on whichever CANN the base image or a host mount
# provides. Sourced by check_runner.sh (which reuses find_cann_set_env); executed, it
# runs "$@".
#
# Environment:
#   OPBOT_CANN_SET_ENV   a set_env.sh to use before any other candidate
#   ASCEND_HOME_PATH     the CANN root a previous set_env.sh or the base image exported
#   OPBOT_ASCEND_ROOT    where CANN is installed (default /usr/local/Ascend)
#   OPBOT_REQUIRE_CANN   1: fail when no set_env.sh is found (default: warn and go on,
#                        since `opbot serve` and the CPU paths do not need CANN)
#   OPBOT_ENTRYPOINT_FORWARD_SIGNALS
#                        1: run the command as a child and pass signals on to it even
#                        when this script is not PID 1 (tests use it); never with a
#                        terminal on stdin
#
# Signals: as PID 1 of a container (docker run without --init) the kernel delivers to this
# process only the signals it handles, and the command exec'd in its place would inherit
# that position: the GitHub runner's run.sh, for one, then never sees `docker stop`'s
# SIGTERM, the job is not cancelled and docker kills it after the grace period. So as PID 1
# forward_signals.py (exec'd in this script's place, python3 from the image) runs the command
# as a child in its own process group; TERM, INT, HUP, QUIT and every other signal meant
# for the command are passed on to that whole group, orphans are reaped, and the exit status
# is the command's (128+N when signal N killed it). With a terminal on stdin (docker run -it) the
# command is exec'd instead: a background process group could not read the terminal. Not
# PID 1: exec.
set -euo pipefail

# Prints the first set_env.sh that exists, in order of preference; returns 1 if none does.
find_cann_set_env() {
    local root="${OPBOT_ASCEND_ROOT:-/usr/local/Ascend}"
    local -a candidates=()
    if [[ -n "${OPBOT_CANN_SET_ENV:-}" ]]; then
        candidates+=("$OPBOT_CANN_SET_ENV")
    fi
    if [[ -n "${ASCEND_HOME_PATH:-}" ]]; then
        # >= 8.5 keeps set_env.sh in the root itself; <= 8.3 one level above `latest`.
        candidates+=("$ASCEND_HOME_PATH/set_env.sh" "$(dirname "$ASCEND_HOME_PATH")/set_env.sh")
    fi
    candidates+=("$root/cann/set_env.sh")
    # Versioned roots (cann-9.0.1) when there is no `cann` link: the newest wins.
    local versioned
    versioned="$(find "$root" -mindepth 2 -maxdepth 2 -path "$root/cann-*/set_env.sh" \
        2>/dev/null | sort -V | tail -n 1 || true)"
    if [[ -n "$versioned" ]]; then
        candidates+=("$versioned")
    fi
    candidates+=("$root/ascend-toolkit/set_env.sh")
    local candidate
    for candidate in "${candidates[@]}"; do
        if [[ -f "$candidate" ]]; then
            printf '%s\n' "$candidate"
            return 0
        fi
    done
    return 1
}

# Sources CANN's environment into this shell. Called with no arguments on purpose: a sourced
# script sees the caller's positional parameters, and set_env.sh parses its own.
load_cann_env() {
    local set_env
    if ! set_env="$(find_cann_set_env)"; then
        echo "opbot-entrypoint: no CANN set_env.sh found (ASCEND_HOME_PATH," \
            "${OPBOT_ASCEND_ROOT:-/usr/local/Ascend}/{cann,cann-*,ascend-toolkit})" >&2
        return 1
    fi
    # CANN's scripts read unset variables (LD_LIBRARY_PATH, PYTHONPATH) freely and are not
    # written for errexit.
    set +eu
    # shellcheck source=/dev/null
    source "$set_env"
    # triton-ascend compiles through bishengir-compile, whose environment ships apart
    # from the toolkit's in CANN 9 images.
    local ir_env="${ASCEND_HOME_PATH:-}/share/info/ascendnpu-ir/bin/set_env.sh"
    if [[ -n "${ASCEND_HOME_PATH:-}" && -f "$ir_env" ]]; then
        # shellcheck source=/dev/null
        source "$ir_env"
    fi
    set -eu
    export OPBOT_CANN_SET_ENV_USED="$set_env"
}

# Until the command starts, a signal ends this script with 128+N. Untrapped, bash would let
# a SIGINT pass while it waits for a command substitution that did not itself die of it
# (it takes the child to have handled it) and run the command anyway; as PID 1 the kernel
# would not deliver an untrapped signal at all. exec puts every trapped signal back to its
# default.
exit_on_signals_until_exec() {
    local entry
    for entry in TERM:15 INT:2 HUP:1 QUIT:3; do
        # shellcheck disable=SC2064 # the status is fixed now
        trap "exit $((128 + ${entry#*:}))" "${entry%:*}"
    done
}

main() {
    exit_on_signals_until_exec
    if [[ $# -eq 0 ]]; then
        echo "usage: entrypoint.sh COMMAND [ARG...]" >&2
        return 64
    fi
    if ! load_cann_env; then
        if [[ "${OPBOT_REQUIRE_CANN:-0}" == "1" ]]; then
            return 1
        fi
        echo "opbot-entrypoint: going on without CANN (NPU work will fail)" >&2
    fi
    if [[ ! -t 0 && ($$ -eq 1 || "${OPBOT_ENTRYPOINT_FORWARD_SIGNALS:-0}" == "1") ]]; then
        # A shell loop around `wait` can miss a signal that arrives just before it blocks;
        # forward_signals.py takes signals with sigwaitinfo and cannot.
        local forwarder
        forwarder="$(dirname "${BASH_SOURCE[0]}")/forward_signals.py"
        # LC_CTYPE as the command must see it: Python's start-up may set it (PEP 538).
        export OPBOT_FORWARD_LC_CTYPE="${LC_CTYPE--}"
        exec python3 -I -S "$forwarder" "$@"
    fi
    exec "$@"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    main "$@"
fi
