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
#   OPBOT_DOCKER_PULL_POLICY  default if-not-present (images built on this host)
#   OPBOT_GITLAB_RUNNER_CONFIG  config.toml to write (default: gitlab-runner's own)
#   GITLAB_RUNNER             the gitlab-runner binary (default: from PATH)
# The token reaches gitlab-runner through its own environment variable (CI_SERVER_TOKEN or
# REGISTRATION_TOKEN), never through its command line, which other users can read in ps.
set -euo pipefail

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
        # No cache or build volumes kept between jobs: a job cannot leave files for the next.
        args+=(--docker-image "$image" --docker-privileged=false --docker-disable-cache=true
            --docker-pull-policy "${OPBOT_DOCKER_PULL_POLICY:-if-not-present}"
            --docker-security-opt no-new-privileges)
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
