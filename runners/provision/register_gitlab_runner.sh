#!/usr/bin/env bash
# Register this host's GitLab Runner for opbot's Ascend jobs, configured from the environment.
#
# Usage: register_gitlab_runner.sh [--dry-run]
#   --dry-run (or OPBOT_DRY_RUN=1) prints the command, token masked, and registers nothing.
#
# Required:
#   OPBOT_GITLAB_URL                 https://gitlab.example.com
#   OPBOT_GITLAB_RUNNER_TOKEN        glrt-... authentication token of a runner created in the
#                                    project (Settings > CI/CD > Runners, or POST /user/runners)
#                                    with tags ascend,<soc>, "run untagged" off, locked to the
#                                    project, protected branches only. GitLab keeps those
#                                    settings on its side: gitlab-runner refuses them here.
#   or OPBOT_GITLAB_REGISTRATION_TOKEN  legacy registration token (deprecated by GitLab); the
#                                    settings above then go on the command line.
#   OPBOT_IMAGE                      job image (Dockerfile beside this file); docker executor
# Optional:
#   OPBOT_RUNNER_SOC          chip label, e.g. ascend910b3 (default: read from npu-smi)
#   OPBOT_RUNNER_NAME         default <host>-<soc>
#   OPBOT_RUNNER_EXECUTOR     docker (default: a fresh container per job) or shell
#   OPBOT_NPU_DEVICES         chips this runner gets, e.g. "0" or "0 1" (default: all)
#   OPBOT_ASCEND_GID          group id owning the NPU nodes (default: the HwHiAiUser group)
#   OPBOT_RUNNER_EXTRA_TAGS   more tags, comma-separated
#   OPBOT_DOCKER_PULL_POLICY  default if-not-present (images built on this host); jobs may
#                             ask for no other policy
#   OPBOT_JOB_USER            user jobs run as, and the only one they may ask for (default
#                             10001, the image's opbot user; never root)
#   OPBOT_SECCOMP_PROFILE     seccomp profile of job containers (default
#                             /opt/opbot/runners/provision/seccomp-bwrap.json)
#   OPBOT_APPARMOR_ENABLED_FILE  where the kernel says whether AppArmor is on (default
#                             /sys/module/apparmor/parameters/enabled); "Y": jobs run under
#                             the AppArmor profile opbot-bwrap (apparmor/opbot-bwrap)
#   OPBOT_POLICY              the operator's policy; its `runner:` section sets memory, CPUs
#                             and /dev/shm of job containers (job_limits.py; default
#                             /etc/opbot/policy.yaml, built-in defaults when that is absent)
#   OPBOT_NPU_LOGIC_IDS       shell executor: the chips' logical ids (`npu-smi info -m`)
#                             where they differ from the device numbers of OPBOT_NPU_DEVICES
#   OPBOT_GITLAB_RUNNER_CONFIG  config.toml to write (default: gitlab-runner's own)
#   GITLAB_RUNNER             the gitlab-runner binary (default: from PATH)
# The token reaches gitlab-runner through its own environment variable (CI_SERVER_TOKEN or
# REGISTRATION_TOKEN), never through its command line, which other users can read in ps.
#
# The docker executor is locked down: the opbot image only, a non-root user, no
# capabilities, no-new-privileges, the seccomp (and AppArmor) profile opbot's sandbox needs,
# the limits of the policy. The shell executor isolates nothing beyond the chips it names.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Prints the JSON file named by its argument on one line, without spaces.
COMPACT_JSON='import json, sys
with open(sys.argv[1], encoding="utf-8") as handle:
    print(json.dumps(json.load(handle), separators=(",", ":")))'

die() {
    echo "register_gitlab_runner: $*" >&2
    exit 1
}
note() { echo "register_gitlab_runner: $*" >&2; }

dry_run="${OPBOT_DRY_RUN:-0}"
case "${1:-}" in
    "") ;;
    --dry-run) dry_run=1 ;;
    -h | --help)
        awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
        exit 0
        ;;
    *)
        echo "usage: register_gitlab_runner.sh [--dry-run]" >&2
        exit 64
        ;;
esac

# The chip label from the first chip row of `npu-smi info` ("| 0   910B3   | OK | ...").
detect_soc() {
    local smi
    smi="$(command -v npu-smi || true)"
    [[ -n "$smi" ]] || return 1
    "$smi" info 2>/dev/null | awk -F'|' '$2 ~ /^ *[0-9]+ +[A-Za-z0-9]/ {
        split($2, cell, " "); print cell[2]; exit }'
}

soc_label() {
    local name="${1,,}"
    printf 'ascend%s\n' "${name#ascend}"
}

# Shell-quotes a word only when it needs it, so the printed command stays readable.
quote() {
    if [[ "$1" =~ ^[A-Za-z0-9_./:=,@+%-]+$ ]]; then printf '%s' "$1"; else printf '%q' "$1"; fi
}

# Refuses a job user (USER or USER:GROUP) that is root in any spelling docker accepts: uid
# 0 written as 00 or 0000, the name root, group 0 or root. Only plain decimal numbers and
# ordinary names pass, so "+0" or " 0" cannot slip past as something else.
check_job_user() {
    local spec="$1" user group part
    user="${spec%%:*}"
    group=""
    if [[ "$spec" == *:* ]]; then
        group="${spec#*:}"
        [[ -n "$group" ]] || die "OPBOT_JOB_USER: '$spec' names no group after ':'"
    fi
    for part in "$user" ${group:+"$group"}; do
        if [[ "$part" =~ ^[0-9]{1,10}$ ]]; then
            # All zeros is uid/gid 0; compared as text, so no number is too long to parse.
            [[ ! "$part" =~ ^0+$ ]] || die "OPBOT_JOB_USER must not be root (uid or gid 0): '$spec'"
        elif [[ "$part" =~ ^[a-z_][a-z0-9_-]{0,31}$ ]]; then
            [[ "$part" != root ]] || die "OPBOT_JOB_USER must not be root: '$spec'"
        else
            die "OPBOT_JOB_USER: '$part' is neither a decimal id nor a user or group name"
        fi
    done
}

mask() {
    # The prefix tells the token's kind and is no secret; the rest is.
    if [[ "$1" == glrt-* ]]; then printf 'glrt-****'; else printf '****'; fi
}

url="${OPBOT_GITLAB_URL:-}"
[[ -n "$url" ]] || die "set OPBOT_GITLAB_URL (e.g. https://gitlab.example.com)"
auth_token="${OPBOT_GITLAB_RUNNER_TOKEN:-}"
legacy_token="${OPBOT_GITLAB_REGISTRATION_TOKEN:-}"
if [[ -n "$auth_token" && -n "$legacy_token" ]]; then
    die "set only one of OPBOT_GITLAB_RUNNER_TOKEN and OPBOT_GITLAB_REGISTRATION_TOKEN"
fi
[[ -n "$auth_token$legacy_token" ]] ||
    die "set OPBOT_GITLAB_RUNNER_TOKEN (glrt-..., preferred) or OPBOT_GITLAB_REGISTRATION_TOKEN"

soc="${OPBOT_RUNNER_SOC:-}"
if [[ -z "$soc" ]]; then
    soc="$(detect_soc || true)"
fi
[[ -n "$soc" ]] || die "cannot tell the chip: set OPBOT_RUNNER_SOC (e.g. ascend910b3)"
soc="$(soc_label "$soc")"
tags="ascend,$soc${OPBOT_RUNNER_EXTRA_TAGS:+,$OPBOT_RUNNER_EXTRA_TAGS}"
name="${OPBOT_RUNNER_NAME:-${HOSTNAME%%.*}-$soc}"
executor="${OPBOT_RUNNER_EXECUTOR:-docker}"

problems=()
args=(register --non-interactive --url "$url" --name "$name" --executor "$executor"
    # One job at a time per runner entry: a job owns its NPUs while it runs.
    --limit 1)
if [[ -n "${OPBOT_GITLAB_RUNNER_CONFIG:-}" ]]; then
    args+=(--config "$OPBOT_GITLAB_RUNNER_CONFIG")
fi

if [[ -n "$legacy_token" ]]; then
    token_var=REGISTRATION_TOKEN
    token="$legacy_token"
    # Protected refs only and locked to this project: pipelines of forks and unprotected
    # branches (anyone with Developer access) never reach the NPU host.
    args+=(--tag-list "$tags" --run-untagged=false --locked=true --access-level=ref_protected)
else
    token_var=CI_SERVER_TOKEN
    token="$auth_token"
fi

case "$executor" in
    docker)
        image="${OPBOT_IMAGE:-}"
        [[ -n "$image" ]] || die "set OPBOT_IMAGE: the docker executor runs every job in it"
        pull_policy="${OPBOT_DOCKER_PULL_POLICY:-if-not-present}"
        job_user="${OPBOT_JOB_USER:-10001}"
        check_job_user "$job_user"
        # No cache or build volumes kept between jobs: a job cannot leave files for the next.
        # A job may name no other image (nor service), pull policy or user than these.
        args+=(--docker-image "$image" --docker-privileged=false --docker-disable-cache=true
            --docker-allowed-images "$image" --docker-allowed-services "$image"
            --docker-pull-policy "$pull_policy" --docker-allowed-pull-policies "$pull_policy"
            --docker-user "$job_user" --docker-allowed_users "$job_user"
            --docker-cap-drop ALL
            --docker-security-opt no-new-privileges
            --docker-services-security-opt no-new-privileges)
        # Docker's default seccomp profile forbids the namespaces bwrap creates. The engine's
        # API, which gitlab-runner calls, takes the profile's JSON itself, not a path (only
        # the docker command line reads a file), so the profile goes in as compact JSON.
        seccomp="${OPBOT_SECCOMP_PROFILE:-/opt/opbot/runners/provision/seccomp-bwrap.json}"
        if profile_json="$(python3 -c "$COMPACT_JSON" "$seccomp" 2>/dev/null)"; then
            args+=(--docker-security-opt "seccomp=$profile_json")
        else
            problems+=("cannot read the seccomp profile $seccomp (set OPBOT_SECCOMP_PROFILE)")
        fi
        # Docker refuses an apparmor= option where the kernel has no AppArmor.
        apparmor_flag="${OPBOT_APPARMOR_ENABLED_FILE:-/sys/module/apparmor/parameters/enabled}"
        if [[ "$(cat "$apparmor_flag" 2>/dev/null || true)" == Y* ]]; then
            args+=(--docker-security-opt apparmor=opbot-bwrap)
        fi
        devices=()
        if [[ -n "${OPBOT_NPU_DEVICES:-}" ]]; then
            for chip in ${OPBOT_NPU_DEVICES//,/ }; do
                [[ "$chip" =~ ^[0-9]+$ ]] || die "OPBOT_NPU_DEVICES: '$chip' is not a chip number"
                devices+=("/dev/davinci$chip")
            done
        else
            while IFS= read -r node; do
                devices+=("$node")
            done < <(find /dev -maxdepth 1 -name 'davinci[0-9]*' 2>/dev/null | sort -V)
        fi
        [[ ${#devices[@]} -gt 0 ]] || problems+=("no /dev/davinci<N> on this host")
        # The container sees only its own chips, renumbered from 0: the variable takes
        # logical ids (CANN's environment variable reference), so 0..k-1, as github_jit.py
        # sets them, never the host's chip numbers.
        if [[ ${#devices[@]} -gt 0 ]]; then
            args+=(--env "ASCEND_RT_VISIBLE_DEVICES=$(seq -s, 0 $((${#devices[@]} - 1)))")
        fi
        # Limits from the policy's `runner:` section, with the first chip's CPU set.
        first_chip="${devices[0]:-/dev/davinci0}"
        first_chip="${first_chip##*/davinci}"
        limits_args=(--npu "$first_chip" --format gitlab)
        policy="${OPBOT_POLICY:-/etc/opbot/policy.yaml}"
        if [[ -f "$policy" ]]; then
            limits_args=(--policy "$policy" "${limits_args[@]}")
        elif [[ -n "${OPBOT_POLICY:-}" ]]; then
            die "OPBOT_POLICY: there is no file $policy"
        fi
        if ! limits="$(python3 "$here/job_limits.py" "${limits_args[@]}")"; then
            die "job_limits.py could not turn the policy into limits (see above)"
        fi
        while IFS= read -r flag; do
            if [[ -n "$flag" ]]; then
                args+=("$flag")
            fi
        done <<<"$limits"
        devices+=(/dev/davinci_manager /dev/devmm_svm /dev/hisi_hdc)
        for node in "${devices[@]}"; do
            [[ -e "$node" ]] || problems+=("missing $node")
            args+=(--docker-devices "$node")
        done
        # The driver must match the host's kernel module: mounted read-only, never in the image.
        for path in /usr/local/Ascend/driver /usr/local/dcmi /usr/local/bin/npu-smi; do
            [[ -e "$path" ]] || problems+=("missing $path")
            args+=(--docker-volumes "$path:$path:ro")
        done
        if [[ -e /etc/ascend_install.info ]]; then
            args+=(--docker-volumes /etc/ascend_install.info:/etc/ascend_install.info:ro)
        fi
        # The image's user is not root; it opens the NPU nodes through their group.
        gid="${OPBOT_ASCEND_GID:-$(getent group HwHiAiUser | cut -d: -f3 || true)}"
        if [[ -n "$gid" ]]; then
            args+=(--docker-group-add "$gid")
        else
            problems+=("no HwHiAiUser group: set OPBOT_ASCEND_GID")
        fi
        ;;
    shell)
        note "the shell executor runs jobs on this host as gitlab-runner: files and processes" \
            "a job leaves stay for the next one; prefer the docker executor"
        # On the host every chip is visible; the runtime then shows the job only these. The
        # variable takes logical ids, comma-separated and ascending (CANN's environment
        # variable reference); they are the device numbers unless `npu-smi info -m` differs.
        logic_ids="${OPBOT_NPU_LOGIC_IDS:-${OPBOT_NPU_DEVICES:-}}"
        if [[ -n "$logic_ids" ]]; then
            visible=()
            for chip in ${logic_ids//,/ }; do
                [[ "$chip" =~ ^[0-9]+$ ]] || die "'$chip' is not a chip number"
                visible+=("$chip")
            done
            visible_list="$(printf '%s\n' "${visible[@]}" | sort -n | paste -sd, -)"
            args+=(--env "ASCEND_RT_VISIBLE_DEVICES=$visible_list")
        fi
        ;;
    *) die "OPBOT_RUNNER_EXECUTOR must be docker or shell, not '$executor'" ;;
esac

runner="${GITLAB_RUNNER:-gitlab-runner}"
if [[ -n "$auth_token" ]]; then
    note "tags ($tags), run-untagged=false, locked and ref_protected are settings of the" \
        "runner created in GitLab; check them there (README.md, GitLab step 1)"
fi

if [[ "$dry_run" == "1" ]]; then
    for problem in "${problems[@]}"; do
        note "on this host: $problem"
    done
    printf '%s=%s %s' "$token_var" "$(mask "$token")" "$(quote "$runner")"
    for arg in "${args[@]}"; do
        printf ' %s' "$(quote "$arg")"
    done
    printf '\n'
    exit 0
fi

command -v "$runner" >/dev/null || die "$runner not found: install GitLab Runner first"
if [[ ${#problems[@]} -gt 0 ]]; then
    die "not registering, this host is not ready: $(printf '%s; ' "${problems[@]}")"
fi
unset OPBOT_GITLAB_RUNNER_TOKEN OPBOT_GITLAB_REGISTRATION_TOKEN
export "$token_var=$token"
exec "$runner" "${args[@]}"
