#!/usr/bin/env python3
"""The operator's policy `runner:` section, turned into one job container's limits.

A job runs code from a pull request; without limits one job can take the host's memory,
fork until the pid table is full or crowd the other chips' jobs off their CPUs. The limits
come from the same policy file the bot reads, so there is one place to change them::

    runner:
      memory_bytes: 68719476736   # 64 GiB, swap included (no swap); null: no limit
      pids: 4096                  # null: no limit
      cpus_per_job: 0             # N: NPU i gets cores i*N .. (i+1)*N-1; 0: no cpuset
      cpusets: {"0": "0-23,96-119"}   # explicit per NPU, wins over cpus_per_job
      shm_bytes: 2147483648       # /dev/shm (torch's DataLoader workers share tensors there)

Standard library only (the file runs on a runner host without opbot): YAML is read when
PyYAML is importable, JSON always. The command line prints the flags for one NPU::

    python3 job_limits.py [--policy FILE] --npu N --format docker|gitlab|json

github_jit.py imports it from the same folder.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, overload

DEFAULT_MEMORY_BYTES = 64 * 1024**3
DEFAULT_PIDS = 4096
DEFAULT_SHM_BYTES = 2 * 1024**3
# The same floors as policies/schema.json: below them a job cannot even start.
MIN_MEMORY_BYTES = 64 * 1024**2
MIN_PIDS = 64
MIN_SHM_BYTES = 1024**2
MAX_CPUS_PER_JOB = 4096
# Ceilings: far above any real host, low enough that a typo (or an extra zero) is caught
# here rather than handed to docker. The kernel's own limits: pid_max 4194304, NR_CPUS 16384.
MAX_MEMORY_BYTES = 16 * 1024**4
MAX_PIDS = 4_194_304
MAX_SHM_BYTES = 1024**4
MAX_CPU_ID = 16383
EXIT_USAGE = 2
# ASCII digits only: \d would take Arabic-Indic or other Unicode digits, docker does not.
_CPU_RANGE = re.compile(r"([0-9]{1,5})(?:-([0-9]{1,5}))?")
_NPU_KEY = re.compile(r"[0-9]{1,4}")


class LimitsError(ValueError):
    """A policy value that cannot become a container limit; the message says which."""


@dataclass(frozen=True)
class JobLimits:
    memory_bytes: int | None = DEFAULT_MEMORY_BYTES  # None: the operator chose no limit
    pids: int | None = DEFAULT_PIDS
    cpuset: str | None = None
    shm_bytes: int = DEFAULT_SHM_BYTES

    def docker_flags(self) -> list[str]:
        # --memory-swap equal to --memory: memory plus swap may not exceed the memory
        # limit, so the container never swaps (a swapping job only gets slower, then killed).
        flags = []
        if self.memory_bytes is not None:
            flags += [f"--memory={self.memory_bytes}", f"--memory-swap={self.memory_bytes}"]
        if self.pids is not None:
            flags.append(f"--pids-limit={self.pids}")
        if self.cpuset:
            flags.append(f"--cpuset-cpus={self.cpuset}")
        return [*flags, f"--shm-size={self.shm_bytes}"]

    def gitlab_flags(self) -> list[str]:
        # GitLab Runner's docker executor has no pids limit among its [runners.docker]
        # settings (memory, memory_swap, cpuset_cpus, shm_size are there), so `pids` cannot
        # be handed to it; set one daemon-wide (dockerd --default-pids-limit) instead.
        flags = []
        if self.memory_bytes is not None:
            flags += [f"--docker-memory={self.memory_bytes}",
                      f"--docker-memory-swap={self.memory_bytes}"]
        if self.cpuset:
            flags.append(f"--docker-cpuset-cpus={self.cpuset}")
        return [*flags, f"--docker-shm-size={self.shm_bytes}"]

    def as_json(self) -> dict[str, Any]:
        return {"memory_bytes": self.memory_bytes, "pids": self.pids, "cpuset": self.cpuset,
                "shm_bytes": self.shm_bytes}


def load_policy(path: Path) -> dict[str, Any]:
    """The policy file as a mapping: JSON always, YAML when PyYAML is there."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LimitsError(f"cannot read the policy file {path}: {exc.strerror}") from None
    try:
        data: Any = json.loads(text)
    except ValueError:
        data = _yaml(text, path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise LimitsError(f"{path} does not hold a mapping")
    return data


def _yaml(text: str, path: Path) -> Any:
    try:
        import yaml
    except ImportError:
        raise LimitsError(f"{path} is not JSON, and reading YAML needs PyYAML for the "
                          "host's python3: apt-get install python3-yaml (Debian, Ubuntu) or "
                          "dnf install python3-pyyaml (openEuler, RHEL), or pass a JSON "
                          "policy") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise LimitsError(f"{path} is neither JSON nor YAML: {exc}") from None


def limits_for(policy: Mapping[str, Any], chips: Sequence[int] | None) -> JobLimits:
    """The limits of a job on `chips` (None: every chip, so no cpuset) under `policy`."""
    section = policy.get("runner") or {}
    if not isinstance(section, Mapping):
        raise LimitsError("runner: must be a mapping")
    cpusets = section.get("cpusets") or {}
    if not isinstance(cpusets, Mapping):
        raise LimitsError("runner.cpusets must map an NPU number to a cpuset such as 0-23")
    for key in cpusets:
        if isinstance(key, bool) or not _NPU_KEY.fullmatch(str(key)):
            raise LimitsError(f"runner.cpusets: {key!r} is not an NPU number")
    per_job = _count(section, "cpus_per_job", 0, least=0)
    if per_job > MAX_CPUS_PER_JOB:
        raise LimitsError(f"runner.cpus_per_job must be at most {MAX_CPUS_PER_JOB}, "
                          f"not {per_job}")
    cpuset = None
    if chips:
        parts = [_chip_cpuset(chip, cpusets, per_job) for chip in chips]
        cpuset = ",".join(part for part in parts if part) or None
    memory = _count(section, "memory_bytes", DEFAULT_MEMORY_BYTES, least=MIN_MEMORY_BYTES,
                    most=MAX_MEMORY_BYTES, nullable=True)
    shm = _count(section, "shm_bytes", DEFAULT_SHM_BYTES, least=MIN_SHM_BYTES,
                 most=MAX_SHM_BYTES)
    if memory is not None and shm > memory:
        # /dev/shm is memory of the container: more of it than the limit cannot be used.
        raise LimitsError(f"runner.shm_bytes ({shm}) must not exceed runner.memory_bytes "
                          f"({memory})")
    return JobLimits(
        memory_bytes=memory,
        pids=_count(section, "pids", DEFAULT_PIDS, least=MIN_PIDS, most=MAX_PIDS,
                    nullable=True),
        cpuset=cpuset, shm_bytes=shm)


def _chip_cpuset(chip: int, cpusets: Mapping[Any, Any], per_job: int) -> str | None:
    # YAML reads `0:` as an integer key and `"0":` as a string: accept either.
    explicit = cpusets.get(str(chip), cpusets.get(chip))
    if explicit is not None:
        return check_cpuset(explicit, f"runner.cpusets[{chip}]")
    if per_job:
        last = (chip + 1) * per_job - 1
        if last > MAX_CPU_ID:
            raise LimitsError(f"runner.cpus_per_job {per_job} gives NPU {chip} CPUs up to "
                              f"{last}, past the highest CPU number {MAX_CPU_ID}")
        return f"{chip * per_job}-{last}"
    return None


def check_cpuset(value: Any, where: str) -> str:
    """A cpuset in docker's syntax (0-3,8,10-11), else LimitsError."""
    if not isinstance(value, str) or not value.strip():
        raise LimitsError(f"{where} must be a cpuset such as 0-23,96-119, not {value!r}")
    for part in value.split(","):
        match = _CPU_RANGE.fullmatch(part.strip())
        if match is None or (match[2] is not None and int(match[2]) < int(match[1])) \
                or int(match[2] or match[1]) > MAX_CPU_ID:
            raise LimitsError(f"{where}: {part.strip()!r} in {value!r} is not a CPU number "
                              f"or an ascending range like 0-23 (CPU numbers 0-{MAX_CPU_ID})")
    return ",".join(part.strip() for part in value.split(","))


@overload
def _count(section: Mapping[str, Any], key: str, default: int, *, least: int,
           most: int | None = None, nullable: Literal[False] = False) -> int: ...


@overload
def _count(section: Mapping[str, Any], key: str, default: int, *, least: int,
           most: int | None = None, nullable: Literal[True]) -> int | None: ...


def _count(section: Mapping[str, Any], key: str, default: int, *, least: int,
           most: int | None = None, nullable: bool = False) -> int | None:
    value = section.get(key, default)
    if value is None and nullable:
        return None  # written out as null: the operator's explicit "no limit"
    # bool is an int in Python; `memory_bytes: yes` is a typo, not a byte count.
    if isinstance(value, bool) or not isinstance(value, int):
        what = "a whole number or null" if nullable else "a whole number"
        raise LimitsError(f"runner.{key} must be {what}, not {value!r}")
    if value < least:
        # Below the floor a job cannot start; 0 or a negative would also mean "no limit"
        # or nonsense to docker.
        raise LimitsError(f"runner.{key} must be at least {least}, not {value}")
    if most is not None and value > most:
        raise LimitsError(f"runner.{key} must be at most {most}, not {value}")
    return value


def policy_limits(path: Path | None, chips: Sequence[int] | None) -> JobLimits:
    """The limits from the policy file at `path`, or the defaults when there is none."""
    return limits_for(load_policy(path) if path is not None else {}, chips)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="job_limits.py",
        description="Print one job container's limits from the policy's runner: section.")
    parser.add_argument("--policy", type=Path,
                        help="opbot policy file (YAML or JSON); default: built-in defaults")
    parser.add_argument("--npu", type=int, required=True, help="the job's NPU number")
    parser.add_argument("--format", choices=("docker", "gitlab", "json"), required=True)
    args = parser.parse_args(argv)
    if args.npu < 0:
        parser.error("--npu must be 0 or more")
    try:
        limits = policy_limits(args.policy, [args.npu])
    except LimitsError as exc:
        print(f"job_limits: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.format == "json":
        print(json.dumps(limits.as_json()))
    else:
        flags = limits.docker_flags() if args.format == "docker" else limits.gitlab_flags()
        print("\n".join(flags))
    return 0


if __name__ == "__main__":
    sys.exit(main())
