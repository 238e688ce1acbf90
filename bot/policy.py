"""The bot's policy: who may trigger it, budgets, nightly limits, paths, the sandbox, how
the LLM endpoint is asked (`llm`: output tokens, temperature, streaming... per model), and
how performance is measured and judged (`perf`: the spread that forces a re-measure, and
device peaks over opbot's built-in table).

Two layers, and the order matters:

1. The operator's policy is the ceiling. It is policies/default.yaml with the operator's
   `--policy` file laid over it (`load_policy`); the operator may loosen the shipped
   defaults, since it is their machine, their money and their endpoint.
2. A repository's `.opbot.yaml`, read from its default branch (never from the pull request
   being worked on, which could otherwise loosen its own rules), may only tighten that
   ceiling (`repository_policy`). On a shared server every repository runs on the
   operator's machine, so no repository may turn the sandbox off, raise a budget, lower
   the permission a trigger needs, widen the folders a change may touch or drop a
   forbidden path. Each setting a repository tried to loosen is kept at the ceiling's
   value and reported in a plain-English note the bot posts.

Both files are validated against policies/schema.json. An invalid file raises PolicyError
naming the file, the line and the field, so the message can be posted as it is. Reading is
bounded: a size cap, no YAML aliases (a "billion laughs" document expands from a few lines),
a nesting limit and a length limit on each value.
"""

from __future__ import annotations

import copy
import fnmatch
import json
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any, Protocol, cast

import yaml
import yaml.reader

from bot.errors import BadInputError
from bot.forge.base import PERMISSION_ORDER, Permission
from bot.perf.peaks import DevicePeaks
from runners.base import MAX_SPREAD_VARIABLE
from runners.sandbox import SandboxPolicy

if TYPE_CHECKING:
    import jsonschema

REPOSITORY_POLICY_PATH = ".opbot.yaml"
# The `llm` section handed to a child `opbot generate` (JSON), as the sandbox's is.
LLM_POLICY_VARIABLE = "OPBOT_LLM_POLICY"
MAX_POLICY_BYTES = 64 * 1024
MAX_POLICY_DEPTH = 16  # the schema nests three levels; the rest is room for honest mistakes
MAX_VALUE_CHARS = 1024  # no setting needs more; it also keeps int() away from huge numbers
SETTLE_FACTOR = 3  # a repository may wait up to this many times the operator's settle time
_DEFAULTS_SOURCE = "policies/default.yaml"


class PolicyError(BadInputError):
    """A policy file is not valid; the message names the file, the line and the field."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 column: int | None = None, field: str | None = None) -> None:
        self.file = file
        self.line = line
        self.column = column
        self.field = field
        self.detail = message
        super().__init__(self._render())

    def _render(self) -> str:
        where = self.file or "<policy>"
        if self.line is not None:
            where += f" line {self.line}"
            if self.column is not None:
                where += f", column {self.column}"
        if self.field:
            return f"{where}: {self.field}: {self.detail}"
        return f"{where}: {self.detail}"


# -- the policy -----------------------------------------------------------------------------


@dataclass(frozen=True)
class RunnerLimits:
    """Each NPU job container's limits on a runner host (runners/provision/job_limits.py
    applies them; here they are validated with the rest of the operator's file)."""

    memory_bytes: int | None
    pids: int | None
    cpus_per_job: int
    cpusets: tuple[tuple[str, str], ...]  # (NPU id, host cores), sorted
    shm_bytes: int

    def to_document(self) -> dict[str, Any]:
        return {"memory_bytes": self.memory_bytes, "pids": self.pids,
                "cpus_per_job": self.cpus_per_job, "cpusets": dict(self.cpusets),
                "shm_bytes": self.shm_bytes}


@dataclass(frozen=True)
class LLMRequest:
    """How each LLM request is made. None: the parameter is not sent (the server's default)."""

    max_output_tokens: int | None
    temperature: float | None
    reasoning_effort: str | None
    stream: bool
    timeout_s: float  # the silence allowed between two streamed chunks (or for a reply)

    def to_document(self) -> dict[str, Any]:
        return {"max_output_tokens": self.max_output_tokens, "temperature": self.temperature,
                "reasoning_effort": self.reasoning_effort, "stream": self.stream,
                "timeout_s": self.timeout_s}


@dataclass(frozen=True)
class LLMPolicy:
    """The operator's LLM request settings: defaults, and overrides for model names matching
    a pattern (fnmatch, case-insensitive; every matching pattern applies, later ones win)."""

    defaults: LLMRequest
    models: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()

    def for_model(self, model: str) -> LLMRequest:
        settings = self.defaults
        for pattern, overrides in self.models:
            if fnmatch.fnmatchcase(model.lower(), pattern.lower()):
                settings = replace(settings, **dict(overrides))
        return settings

    def to_document(self) -> dict[str, Any]:
        return {"defaults": self.defaults.to_document(),
                "models": {pattern: dict(overrides) for pattern, overrides in self.models}}


@dataclass(frozen=True)
class PeakSetting:
    """One device's peaks as the operator states them (policy perf.peaks)."""

    memory_gbps: float | None = None
    tflops: tuple[tuple[str, float], ...] = ()  # (dtype, dense TFLOP/s), sorted
    source: str = ""

    def to_document(self) -> dict[str, Any]:
        return {"memory_gbps": self.memory_gbps, "tflops": dict(self.tflops),
                "source": self.source}


DEFAULT_MAX_SPREAD = 0.10


@dataclass(frozen=True)
class PerfPolicy:
    """How timings are judged: a candidate's spread ((p80 - p20) / median) above
    `max_spread` is measured again; `peaks` (device-name substring -> peaks) win over the
    built-in table of published peaks."""

    max_spread: float = DEFAULT_MAX_SPREAD
    peaks: tuple[tuple[str, PeakSetting], ...] = ()

    def export(self) -> None:
        """The spread limit for this process's verifications and the opbot processes it
        starts (read by runners.base.default_max_spread), as the sandbox policy is."""
        os.environ[MAX_SPREAD_VARIABLE] = repr(self.max_spread)

    def peak_overrides(self) -> dict[str, DevicePeaks]:
        """The `peaks` as bot.perf takes them (roofline, PERF.md)."""
        return {name: DevicePeaks(device=name, memory_gbps=setting.memory_gbps,
                                  tflops=dict(setting.tflops),
                                  source=setting.source or "the operator's policy (perf.peaks)")
                for name, setting in self.peaks}

    def to_document(self) -> dict[str, Any]:
        return {"max_spread": self.max_spread,
                "peaks": {name: setting.to_document() for name, setting in self.peaks}}


@dataclass(frozen=True)
class Policy:
    repositories: tuple[str, ...]
    trigger_label: str
    min_permission: Permission
    attempts: int
    first_drafts: int  # independent first drafts asked at once; the best one goes on
    tokens: int
    wall_seconds: float
    usd_per_job: float
    usd_per_day: float
    usd_per_million_tokens: float
    ci_fixes_per_pull: int  # automatic CI-fix runs one pull request may get (0: none)
    review_settle_seconds: float  # how long a review burst may go quiet before the bot acts
    nightly_pull_requests: int
    allowed_paths: tuple[str, ...]
    forbidden_paths: tuple[str, ...]
    max_change_bytes: int
    max_file_bytes: int
    sandbox: SandboxPolicy
    runner: RunnerLimits
    llm: LLMPolicy
    # The nightly scan: operators verified at once, and how much slower than its recorded
    # figure a kernel may run on a device before it counts as a performance regression.
    nightly_parallel: int = 2
    nightly_slowdown: float = 1.25
    perf: PerfPolicy = PerfPolicy()  # frozen, so one shared default is safe

    def token_budget(self) -> int:
        """Tokens a job may spend: the token budget, capped by the money budget."""
        if self.usd_per_job <= 0 or self.usd_per_million_tokens <= 0:
            return self.tokens
        affordable = int(self.usd_per_job / self.usd_per_million_tokens * 1_000_000)
        return min(self.tokens, affordable)

    def cost_usd(self, tokens: int) -> float:
        return tokens * self.usd_per_million_tokens / 1_000_000

    def allows_repository(self, repo: str | None) -> bool:
        return not self.repositories or repo in self.repositories

    def folder_for(self, op: str) -> str:
        """The folder a change for `op` may touch (the first allowed pattern)."""
        return self.allowed_paths[0].format(op=op).rstrip("/")


@dataclass(frozen=True)
class RepositoryPolicy:
    """The policy in force for one repository, and what its file asked for in vain."""

    policy: Policy
    refused: tuple[str, ...]  # one plain-English line per refused loosening, to post
    source: str = REPOSITORY_POLICY_PATH


def _from_document(document: Mapping[str, Any],
                   sandbox_base: SandboxPolicy | None = None) -> Policy:
    """A Policy from a complete, valid document. `sandbox_base` carries the sandbox settings
    a policy file cannot express (device nodes), so tightening never drops them."""
    trigger, budgets = document["trigger"], document["budgets"]
    paths, sandbox = document["paths"], document["sandbox"]
    return Policy(
        repositories=tuple(document.get("repositories") or ()),
        trigger_label=str(trigger["label"]),
        min_permission=trigger["min_permission"],
        attempts=int(budgets["attempts"]), first_drafts=int(budgets["first_drafts"]),
        tokens=int(budgets["tokens"]),
        wall_seconds=float(budgets["wall_seconds"]), usd_per_job=float(budgets["usd_per_job"]),
        usd_per_day=float(budgets["usd_per_day"]),
        usd_per_million_tokens=float(budgets["usd_per_million_tokens"]),
        ci_fixes_per_pull=int(budgets["ci_fixes_per_pull"]),
        review_settle_seconds=float(budgets["review_settle_seconds"]),
        nightly_pull_requests=int(document["nightly"]["pull_requests"]),
        nightly_parallel=int(document["nightly"]["parallel"]),
        nightly_slowdown=float(document["nightly"]["slowdown"]),
        allowed_paths=tuple(paths["allowed"]), forbidden_paths=tuple(paths["forbidden"]),
        max_change_bytes=int(paths["max_change_bytes"]),
        max_file_bytes=int(paths["max_file_bytes"]),
        sandbox=replace(sandbox_base or SandboxPolicy(),
                        allow_unsandboxed=bool(sandbox["allow_unsandboxed"]),
                        network=bool(sandbox["network"]),
                        cpu_seconds=int(sandbox["cpu_seconds"]),
                        memory_bytes=sandbox["memory_bytes"],
                        file_bytes=int(sandbox["file_bytes"]),
                        processes=int(sandbox["processes"])),
        runner=_runner_limits(document["runner"]), llm=_llm_policy(document["llm"]),
        perf=_perf_policy(document.get("perf") or {}))


def _perf_number(value: Any, field: str) -> float:
    """A perf figure as a float; an integer too large for a float (400 digits) is a
    PolicyError naming the field, not an OverflowError traceback."""
    try:
        return float(value)
    except (OverflowError, ValueError, TypeError):
        raise PolicyError(f"{field}: expected a number (an integer or a decimal such as "
                          f"1.5e3) that fits a float, not {str(value)[:40]!r}") from None


def _perf_policy(perf: Mapping[str, Any]) -> PerfPolicy:
    peaks = tuple(
        (str(name), PeakSetting(
            memory_gbps=None if entry.get("memory_gbps") is None
            else _perf_number(entry["memory_gbps"], f"perf.peaks.{name}.memory_gbps"),
            tflops=tuple(sorted(
                (str(dtype), _perf_number(value, f"perf.peaks.{name}.tflops.{dtype}"))
                for dtype, value in (entry.get("tflops") or {}).items())),
            source=str(entry.get("source") or "")))
        for name, entry in (perf.get("peaks") or {}).items())
    return PerfPolicy(max_spread=_perf_number(perf.get("max_spread", DEFAULT_MAX_SPREAD),
                                              "perf.max_spread"),
                      peaks=peaks)


def _optional(kind: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else kind(value)


# Each LLM request setting's type, as the schema allows it (null: not sent).
_LLM_TYPES: dict[str, Callable[[Any], Any]] = {
    "max_output_tokens": _optional(int), "temperature": _optional(float),
    "reasoning_effort": _optional(str), "stream": bool, "timeout_s": float}


def _llm_policy(llm: Mapping[str, Any]) -> LLMPolicy:
    # A model's overrides keep only the keys they set: an absent key inherits the default,
    # null means "not sent". File order stands: later patterns win.
    models = tuple((str(pattern), tuple(sorted((key, _LLM_TYPES[key](value))
                                               for key, value in (overrides or {}).items())))
                   for pattern, overrides in (llm.get("models") or {}).items())
    defaults = LLMRequest(**{key: kind(llm["defaults"][key]) for key, kind in _LLM_TYPES.items()})
    return LLMPolicy(defaults=defaults, models=models)


def _runner_limits(runner: Mapping[str, Any]) -> RunnerLimits:
    return RunnerLimits(
        memory_bytes=runner["memory_bytes"], pids=runner["pids"],
        cpus_per_job=int(runner["cpus_per_job"]),
        cpusets=tuple(sorted((str(npu), str(cores))
                             for npu, cores in (runner["cpusets"] or {}).items())),
        shm_bytes=int(runner["shm_bytes"]))


def _to_document(policy: Policy) -> dict[str, Any]:
    """The document a Policy came from: tightening compares documents field by field."""
    sandbox = policy.sandbox
    return {
        "version": 1,
        "repositories": list(policy.repositories),
        "trigger": {"label": policy.trigger_label, "min_permission": policy.min_permission},
        "budgets": {"attempts": policy.attempts, "first_drafts": policy.first_drafts,
                    "tokens": policy.tokens,
                    "wall_seconds": policy.wall_seconds, "usd_per_job": policy.usd_per_job,
                    "usd_per_day": policy.usd_per_day,
                    "usd_per_million_tokens": policy.usd_per_million_tokens,
                    "ci_fixes_per_pull": policy.ci_fixes_per_pull,
                    "review_settle_seconds": policy.review_settle_seconds},
        "nightly": {"pull_requests": policy.nightly_pull_requests,
                    "parallel": policy.nightly_parallel, "slowdown": policy.nightly_slowdown},
        "paths": {"allowed": list(policy.allowed_paths),
                  "forbidden": list(policy.forbidden_paths),
                  "max_change_bytes": policy.max_change_bytes,
                  "max_file_bytes": policy.max_file_bytes},
        "sandbox": {"allow_unsandboxed": sandbox.allow_unsandboxed, "network": sandbox.network,
                    "cpu_seconds": sandbox.cpu_seconds, "memory_bytes": sandbox.memory_bytes,
                    "file_bytes": sandbox.file_bytes, "processes": sandbox.processes},
        "runner": policy.runner.to_document(),
        "llm": policy.llm.to_document(),
        "perf": policy.perf.to_document(),
    }


# -- reading a policy file, bounded, with lines for every error -----------------------------


@dataclass(frozen=True)
class _Read:
    """A policy file's data and the composed YAML it came from (for line numbers)."""

    data: Any
    root: yaml.Node | None


class _Mark(Protocol):
    """Where a YAML token starts (PyYAML's pure-Python and libyaml marks both fit)."""

    line: int
    column: int


def _error_at(message: str, source: str, mark: _Mark | None, *,
              field: str | None = None, column: bool = True) -> PolicyError:
    """A PolicyError at a YAML mark (0-based there, 1-based for people). Field errors leave
    the column out: the field names the place on the line, a column would point at a value."""
    if mark is None:
        return PolicyError(message, file=source, field=field)
    return PolicyError(message, file=source, field=field, line=mark.line + 1,
                       column=mark.column + 1 if column else None)


def _syntax_error(exc: yaml.YAMLError, text: str, source: str) -> PolicyError:
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        return PolicyError(f"not valid YAML: {str(exc).splitlines()[0]}", file=source,
                           line=line)
    if isinstance(exc, yaml.MarkedYAMLError):
        detail = exc.problem or exc.context or "unreadable"
        if exc.problem and exc.context:
            detail = f"{exc.problem}, {exc.context}"
            if exc.context_mark is not None:
                detail += f" (it starts on line {exc.context_mark.line + 1})"
        return _error_at(f"not valid YAML: {detail}", source,
                         exc.problem_mark or exc.context_mark)
    return PolicyError(f"not valid YAML ({exc})", file=source)


def _check_size(text: str, source: str) -> None:
    # Characters first: a huge string is refused without encoding it.
    if len(text) > MAX_POLICY_BYTES or len(text.encode("utf-8", "replace")) > MAX_POLICY_BYTES:
        raise PolicyError(f"larger than {MAX_POLICY_BYTES // 1024} KiB", file=source)


def _check_events(text: str, source: str) -> None:
    """Refuse what could make composing or checking the document unbounded, before it is
    composed: aliases (a few lines of anchors expand into billions of nodes once walked),
    deep nesting (the composer recurses) and huge values."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            raise _error_at("YAML aliases (*name) are not allowed in a policy; write the "
                            "value out", source, event.start_mark)
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_POLICY_DEPTH:
                raise _error_at(f"nested deeper than {MAX_POLICY_DEPTH} levels", source,
                                event.start_mark)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
        elif isinstance(event, yaml.ScalarEvent) and len(event.value) > MAX_VALUE_CHARS:
            raise _error_at(f"a value longer than {MAX_VALUE_CHARS} characters", source,
                            event.start_mark)


def _check_nodes(node: yaml.Node, loader: yaml.SafeLoader, source: str) -> None:
    """Construct every scalar on its own, so a bad value (a 13th month) is reported at its
    line, and refuse duplicate keys and merge keys, which would hide what the file says."""
    if isinstance(node, yaml.ScalarNode):
        try:
            loader.construct_object(node)
        except (ValueError, OverflowError, yaml.YAMLError) as exc:
            raise _error_at(f"cannot read the value {node.value!r} ({exc})", source,
                            node.start_mark) from None
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _check_nodes(item, loader, source)
    elif isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            if key.tag == "tag:yaml.org,2002:merge":
                raise _error_at("merge keys (<<) are not allowed in a policy", source,
                                key.start_mark)
            if isinstance(key, yaml.ScalarNode):
                if key.value in seen:
                    raise _error_at(f"{key.value!r} is set twice", source, key.start_mark)
                seen.add(key.value)
            _check_nodes(key, loader, source)
            _check_nodes(value, loader, source)


def _read(text: str, source: str) -> _Read:
    """A policy file's data, or PolicyError with the line of the problem."""
    _check_size(text, source)
    try:
        _check_events(text, source)
        loader = yaml.SafeLoader(text)
        try:
            root = loader.get_single_node()
            if root is None:
                return _Read(None, None)
            _check_nodes(root, loader, source)
            return _Read(loader.construct_document(root), root)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise _syntax_error(exc, text, source) from None


# -- checking a document against the schema -------------------------------------------------


@cache
def _schema() -> dict[str, Any]:
    text = resources.files("policies").joinpath("schema.json").read_text(encoding="utf-8")
    return cast(dict[str, Any], json.loads(text))


def _node_at(root: yaml.Node | None, path: Sequence[str | int]) -> yaml.Node | None:
    """The deepest composed node along `path` (jsonschema's absolute_path)."""
    node = root
    for part in path:
        child: yaml.Node | None = None
        if isinstance(node, yaml.MappingNode):
            child = next((value for key, value in node.value if key.value == str(part)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) \
                and part < len(node.value):
            child = node.value[part]
        if child is None:
            break
        node = child
    return node


def _key_node(root: yaml.Node | None, path: Sequence[str | int],
              key: str) -> yaml.Node | None:
    mapping = _node_at(root, path)
    if isinstance(mapping, yaml.MappingNode):
        return next((node for node, _ in mapping.value if node.value == key), mapping)
    return mapping


def _dotted(path: Sequence[str | int]) -> str:
    return ".".join(str(part) for part in path)


def _schema_problem(error: jsonschema.ValidationError, read: _Read,
                    source: str) -> PolicyError:
    """One schema error as a PolicyError at the line of the offending key or value."""
    path = list(error.absolute_path)
    if (error.validator == "additionalProperties" and isinstance(error.instance, dict)
            and isinstance(error.schema, Mapping)):
        known = sorted(error.schema.get("properties", {}))
        unknown = [key for key in error.instance if key not in known]
        if unknown:
            key = str(unknown[0])
            return _error_at(f"not a setting opbot knows (known here: {', '.join(known)})",
                             source, _mark(_key_node(read.root, path, key)),
                             field=_dotted([*path, key]), column=False)
    message = error.message
    if error.validator == "pattern":  # the only pattern: no unseen characters in a label
        message = (f"{error.instance!r} holds control, invisible or bidirectional "
                   "characters")
    return _error_at(message, source, _mark(_node_at(read.root, path)),
                     field=_dotted(path) or None, column=False)


def _mark(node: yaml.Node | None) -> _Mark | None:
    return node.start_mark if node is not None else None


def _non_finite(data: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    """Paths of .inf and .nan: schema bounds do not catch NaN, and no budget is infinite."""
    if isinstance(data, float) and not math.isfinite(data):
        yield path
    elif isinstance(data, dict):
        for key, value in data.items():
            yield from _non_finite(value, (*path, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _non_finite(value, (*path, index))


def _validate(read: _Read, source: str) -> dict[str, Any]:
    """The file's settings (empty for an empty file), or PolicyError at the first problem
    in file order."""
    if read.data is None:
        return {}
    if not isinstance(read.data, dict):
        kind = "a list" if isinstance(read.data, list) else "a single value"
        raise _error_at(f"a policy is a mapping of settings, not {kind}", source,
                        _mark(read.root), column=False)
    for path in _non_finite(read.data):
        raise _error_at("not a finite number", source, _mark(_node_at(read.root, path)),
                        field=_dotted(path), column=False)
    import jsonschema  # ~0.1 s: only where a policy is read

    validator = jsonschema.Draft202012Validator(_schema())
    problems = sorted((_schema_problem(error, read, source)
                       for error in validator.iter_errors(read.data)),
                      key=lambda problem: problem.line or 0)
    if problems:
        first, more = problems[0], len(problems) - 1
        detail = first.detail
        if more:
            detail += f" (and {more} more problem{'s' if more > 1 else ''})"
        raise PolicyError(detail, file=first.file, line=first.line, field=first.field)
    return cast(dict[str, Any], read.data)


def _validated(text: str, source: str) -> dict[str, Any]:
    return _validate(_read(text, source), source)


# -- the operator's ceiling -----------------------------------------------------------------


@cache
def _default_document() -> dict[str, Any]:
    text = resources.files("policies").joinpath("default.yaml").read_text(encoding="utf-8")
    return _validated(text, _DEFAULTS_SOURCE)


def _merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def default_policy() -> Policy:
    """The shipped defaults (policies/default.yaml)."""
    return _from_document(_default_document())


def load_policy(text: str | None, source: str = REPOSITORY_POLICY_PATH) -> Policy:
    """The operator's policy: the shipped defaults with the operator's `--policy` text laid
    over them (None: the defaults). The operator may loosen the defaults; it is their
    machine. A repository's `.opbot.yaml` goes through `repository_policy` instead."""
    if text is None:
        return default_policy()
    return _from_document(_merge(_default_document(), _validated(text, source)))


def llm_policy_json(policy: Policy) -> str:
    """The `llm` section for LLM_POLICY_VARIABLE, so a child process asks as this one would."""
    return json.dumps(policy.llm.to_document())


def inherited_llm_policy(environ: Mapping[str, str]) -> LLMPolicy | None:
    """The `llm` section a parent process handed down (None: none was), checked like a
    policy file's."""
    text = environ.get(LLM_POLICY_VARIABLE)
    if not text:
        return None
    return load_policy(f'{{"llm": {text}}}', source=LLM_POLICY_VARIABLE).llm


# -- a repository's policy under the ceiling ------------------------------------------------

# A rule takes (field, the ceiling's value, the repository's value) and returns the value in
# force and, for each thing the repository asked for that would loosen the ceiling, a note.
_Ruling = tuple[Any, list[str]]
_Rule = Callable[[str, Any, Any], _Ruling]


def _show(value: Any) -> str:
    """A value as the YAML a person would write."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_show(item) for item in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{key}: {_show(item)}" for key, item in value.items()) + "}"
    return str(value)


def _kept(field: str, why: str, value: Any) -> list[str]:
    return [f"{field}: {why}; kept {_show(value)}"]


def _at_most(field: str, ceiling: Any, wanted: Any) -> _Ruling:
    """Numbers: the smaller of the two."""
    if wanted <= ceiling:
        return wanted, []
    return ceiling, _kept(field, f"the operator's policy allows at most {_show(ceiling)}, "
                                 f"not {_show(wanted)}", ceiling)


def _limit(no_limit: Any) -> _Rule:
    """Numbers where `no_limit` (0 or null) means unlimited: a repository may set a limit
    where the operator has none, and never remove the operator's."""
    def rule(field: str, ceiling: Any, wanted: Any) -> _Ruling:
        if ceiling == no_limit:
            return wanted, []
        if wanted == no_limit:
            return ceiling, _kept(field, f"{_show(no_limit)} (no limit) would remove the "
                                         f"operator's limit of {_show(ceiling)}", ceiling)
        return _at_most(field, ceiling, wanted)
    return rule


def _only_off(field: str, ceiling: Any, wanted: Any) -> _Ruling:
    """Switches that loosen when on (the sandbox's escape hatches): both must say yes."""
    if wanted and not ceiling:
        return False, _kept(field, "the operator's policy does not allow true", False)
    return bool(ceiling and wanted), []


def _stricter_permission(field: str, ceiling: Any, wanted: Any) -> _Ruling:
    if PERMISSION_ORDER.index(wanted) >= PERMISSION_ORDER.index(ceiling):
        return wanted, []
    return ceiling, _kept(field, f"the operator's policy requires at least {ceiling}, "
                                 f"not {wanted}", ceiling)


def _says_the_same(wanted: Any, ceiling: Any) -> bool:
    """A mapping says the same as the ceiling's where each key it names has the ceiling's
    value (a repository repeating part of the operator's LLM settings changes nothing)."""
    if isinstance(wanted, Mapping) and isinstance(ceiling, Mapping):
        return all(key in ceiling and _says_the_same(value, ceiling[key])
                   for key, value in wanted.items())
    return bool(wanted == ceiling)


def _operator_only(why: str) -> _Rule:
    """Settings that are the operator's facts or decisions; a repository cannot change them."""
    def rule(field: str, ceiling: Any, wanted: Any) -> _Ruling:
        if _says_the_same(wanted, ceiling):
            return ceiling, []
        return ceiling, _kept(field, f"{why}, not {_show(wanted)}", ceiling)
    return rule


def _repository_choice(_field: str, _ceiling: Any, wanted: Any) -> _Ruling:
    """Neither looser nor tighter, so the repository's word stands (a trigger label of its
    own still needs the permission the ceiling requires)."""
    return wanted, []


def _settle_time(field: str, ceiling: Any, wanted: Any) -> _Ruling:
    """Waiting for a review burst to end is a matter of taste, not of safety: a repository
    may choose anything from 0 to SETTLE_FACTOR times the operator's value (longer would
    hold work back beyond what the operator planned for)."""
    bound = ceiling * SETTLE_FACTOR
    if wanted <= bound:
        return wanted, []
    return bound, _kept(field, f"the operator's policy allows at most {_show(bound)} "
                               f"({SETTLE_FACTOR} times its {_show(ceiling)}), "
                               f"not {_show(wanted)}", bound)


def _plain_folder(pattern: str) -> bool:
    """A folder pattern with no way out of the folder it names: no `.`, `..` or empty
    segments, no placeholder but {op} (str.format would reach attributes), no backslash."""
    segments = pattern.rstrip("/").split("/")
    if any(segment in ("", ".", "..") for segment in segments):
        return False
    rest = pattern.replace("{op}", "")
    return not any(char in rest for char in "{}\\")


def _within(pattern: str, ceiling: Sequence[str]) -> bool:
    # Folder patterns end in "/", so a prefix is "the same folder or one inside it".
    return _plain_folder(pattern) and any(pattern.startswith(allowed) for allowed in ceiling)


def _narrower_folders(field: str, ceiling: Any, wanted: Any) -> _Ruling:
    """paths.allowed: the repository's folders that lie inside the ceiling's; if none is
    left, the ceiling's (a repository can narrow where changes go, never widen it)."""
    asked = list(dict.fromkeys(wanted))
    kept = [pattern for pattern in asked if _within(pattern, ceiling)]
    notes = [f"{field}: the operator's policy does not allow {pattern}; dropped"
             for pattern in asked if pattern not in kept]
    if kept:
        return kept, notes
    return list(ceiling), notes + _kept(field, "no folder the operator's policy allows is "
                                               "left", ceiling)


def _union(field: str, ceiling: Any, wanted: Any) -> _Ruling:
    """paths.forbidden: the repository adds to the operator's list, never removes from it.
    Only an empty list is reported: it adds nothing, so it can only mean to clear the list."""
    merged = list(dict.fromkeys([*ceiling, *wanted]))
    if not wanted and ceiling:
        return merged, _kept(field, "a repository can add forbidden paths, not remove the "
                                    "operator's", ceiling)
    return merged, []


# Every setting in policies/schema.json has its rule (a test holds the two together); a
# setting without one would be the operator's alone (fail closed).
_RULES: dict[str, _Rule] = {
    "version": _repository_choice,
    "repositories": _operator_only("the operator's list of repositories stands"),
    "trigger.label": _repository_choice,
    "trigger.min_permission": _stricter_permission,
    "budgets.attempts": _at_most,
    "budgets.first_drafts": _at_most,
    "budgets.tokens": _at_most,
    "budgets.wall_seconds": _at_most,
    "budgets.usd_per_job": _limit(0),
    "budgets.usd_per_day": _limit(0),
    "budgets.usd_per_million_tokens": _operator_only("the endpoint's price is the operator's "
                                                     "to state"),
    "budgets.ci_fixes_per_pull": _at_most,
    "budgets.review_settle_seconds": _settle_time,
    "nightly.pull_requests": _at_most,
    "nightly.parallel": _at_most,
    "nightly.slowdown": _repository_choice,
    "paths.allowed": _narrower_folders,
    "paths.forbidden": _union,
    "paths.max_change_bytes": _at_most,
    "paths.max_file_bytes": _at_most,
    "sandbox.allow_unsandboxed": _only_off,
    "sandbox.network": _only_off,
    "sandbox.cpu_seconds": _at_most,
    "sandbox.memory_bytes": _limit(None),
    "sandbox.file_bytes": _at_most,
    "sandbox.processes": _at_most,
    # The runner host's, read from its own file: a repository has no say in them.
    **{f"runner.{key}": _operator_only("a runner host's limits are its operator's")
       for key in ("memory_bytes", "pids", "cpus_per_job", "cpusets", "shm_bytes")},
    # The endpoint and what it costs are the operator's: a repository has no say either.
    **{f"llm.{key}": _operator_only("the LLM request settings are the operator's")
       for key in ("defaults", "models")},
    # The spread that forces a re-measure shapes only that repository's own reports (the
    # schema keeps it within 0.01..1); a device's peaks are facts about the operator's
    # hardware.
    "perf.max_spread": _repository_choice,
    "perf.peaks": _operator_only("a device's peaks are the operator's to state"),
}
# Settings whose value is a mapping (NPU id -> cores; LLM settings), compared whole, not
# walked into.
_MAPPING_SETTINGS = frozenset({"runner.cpusets", "llm.defaults", "llm.models", "perf.peaks"})
_FALLBACK_RULE = _operator_only("only the operator's policy sets this")


def _settings(document: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted field, value) for each setting; sections are mappings, settings are not."""
    for key, value in document.items():
        if isinstance(value, Mapping) and f"{prefix}{key}" not in _MAPPING_SETTINGS:
            yield from _settings(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _tighten(ceiling: Mapping[str, Any],
             wanted: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The ceiling's document with each of the repository's settings applied by its rule."""
    result = copy.deepcopy(dict(ceiling))
    notes: list[str] = []
    for field, value in _settings(wanted):
        section, _, key = field.rpartition(".")
        target = result[section] if section else result
        target[key], refused = _RULES.get(field, _FALLBACK_RULE)(field, target.get(key), value)
        notes.extend(refused)
    return result, notes


def repository_policy(ceiling: Policy, text: str | None,
                      source: str = REPOSITORY_POLICY_PATH) -> RepositoryPolicy:
    """The policy in force for a repository: `ceiling` (the operator's policy) tightened by
    the repository's policy text from its default branch (None or empty: the ceiling as it
    is). Raises PolicyError, naming `source`, the line and the field, for an invalid file."""
    wanted = _validated(text, source) if text is not None else {}
    document, notes = _tighten(_to_document(ceiling), wanted)
    policy = _from_document(document, sandbox_base=ceiling.sandbox)
    return RepositoryPolicy(policy=policy, refused=tuple(notes), source=source)
