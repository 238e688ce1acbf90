"""What using a resolved name means: the file-wide rules, PyTorch and host compute, the
reference, and what a @triton.jit body may call.
"""

from __future__ import annotations

from collections.abc import Callable

from runners.anticheat.nodes import is_dunder
from runners.anticheat.rules import (
    ATTRIBUTE_RULES,
    DEVICE_QUERIES,
    FILE_RULES,
    FRAMES_REASON,
    GLOBALS_REASON,
    HOST_ALIASES,
    HOST_COMPUTE_MODULES,
    HOST_LIBRARIES,
    HOST_LIBRARY_REASON,
    HOST_MATH,
    HOST_REASON,
    KERNEL_TORCH_REASON,
    MATMUL_REASON,
    NN_MODULE_REASON,
    NPU_REASON,
    PRIVATE_GUARDED,
    PRIVATE_REASON,
    REFERENCE,
    REFERENCE_REASON,
    TAMPER,
    TENSOR_ALLOWED_METHODS,
    TENSOR_COMPUTE_METHODS,
    TENSOR_HOST_METHODS,
    TENSOR_REASON,
    TORCH_ALLOWED,
    TORCH_ALLOWED_QUALIFIED,
    TORCH_DTYPES,
    TORCH_NN_ALLOWED,
    TORCH_OP,
    TORCH_REASON,
    Rule,
    Verdict,
)


def _rules_by_prefix() -> dict[str, Rule]:
    table: dict[str, Rule] = {}
    for rule in FILE_RULES:
        for prefix in rule.prefixes:
            table.setdefault(prefix, rule)  # the first rule listing a prefix wins
    return table


_RULE_BY_PREFIX = _rules_by_prefix()
_RULE_DEPTH = max(prefix.count(".") + 1 for prefix in _RULE_BY_PREFIX)


def _file_rule(name: str) -> Rule | None:
    """The rule whose prefix is `name` or one of its parents (`a`, `a.b`, ... of `a.b.c`)."""
    parts = name.split(".", _RULE_DEPTH)
    prefixes = (".".join(parts[:count]) for count in range(1, min(len(parts), _RULE_DEPTH) + 1))
    return next((_RULE_BY_PREFIX[p] for p in prefixes if p in _RULE_BY_PREFIX), None)


def name_verdict(name: str) -> Verdict | None:
    """File-wide verdict on a resolved name: the rules, then frames, internals, hosts."""
    rule = _file_rule(name)
    return (rule.check, rule.reason) if rule is not None else _extra_verdict(name)


def _extra_verdict(name: str) -> Verdict | None:
    """Frames, namespaces and internals reached by name; array libraries reached by name."""
    parts = name.split(".")
    attribute = next((ATTRIBUTE_RULES[p] for p in parts[1:] if p in ATTRIBUTE_RULES), None)
    if attribute is not None:
        return attribute
    if parts[0] == "inspect" and "frame" in parts[-1].lower():
        return TAMPER, FRAMES_REASON
    if parts[0] in PRIVATE_GUARDED and any(
            part.startswith("_") and not is_dunder(part) for part in parts[1:]):
        return TAMPER, PRIVATE_REASON
    return (TORCH_OP, HOST_LIBRARY_REASON) if reaches_host(name) else None


def reaches_host(name: str) -> bool:
    """numpy.exp, math.fsum, triton.runtime.interpreter.np: an array library reached."""
    parts = name.split(".")
    return (parts[0] in HOST_LIBRARIES or name in HOST_MATH
            or any(p in HOST_LIBRARIES or p in HOST_ALIASES for p in parts[1:]))


def _is_compute_method(name: str) -> bool:
    if name in TENSOR_ALLOWED_METHODS:
        return False
    in_place = name[:-1] if name.endswith("_") and not name.endswith("__") else ""
    return name in TENSOR_COMPUTE_METHODS or in_place in TENSOR_COMPUTE_METHODS


def method_verdict(name: str) -> Verdict | None:
    if name in TENSOR_HOST_METHODS:
        return TORCH_OP, HOST_REASON
    return (TORCH_OP, TENSOR_REASON) if _is_compute_method(name) else None


def _torch_allowed(name: str) -> bool:
    parts = name.split(".")
    head = parts[1] if len(parts) > 1 else ""
    tail = parts[2] if len(parts) > 2 else ""
    return (
        len(parts) == 1
        or (len(parts) == 2 and head in TORCH_ALLOWED)
        or name in TORCH_ALLOWED_QUALIFIED
        or head in TORCH_DTYPES
        or head in ("version", "__version__", "backends")
        or (head in ("cuda", "npu") and (not tail or tail in DEVICE_QUERIES))
        or (head == "nn" and len(parts) == 3 and tail in TORCH_NN_ALLOWED)
        or (head == "Tensor" and not (tail and _is_compute_method(tail)))
        or parts[-1].endswith(("Error", "Warning", "Exception"))
    )


def is_torch_module_class(name: str) -> bool:
    """torch.nn.Linear, torch.nn.modules.linear.Linear: a module class that computes."""
    parts = name.split(".")
    return (len(parts) >= 3 and parts[:2] == ["torch", "nn"] and parts[-1][:1].isupper()
            and parts[-1] not in TORCH_NN_ALLOWED)


def _torch_verdict(name: str) -> Verdict | None:
    if _torch_allowed(name):
        return None
    if is_torch_module_class(name):
        return TORCH_OP, NN_MODULE_REASON
    return TORCH_OP, TENSOR_REASON if name.startswith("torch.Tensor.") else TORCH_REASON


def names_reference(name: str, refs: frozenset[str]) -> bool:
    parts = name.split(".")
    return parts[-1] in refs or any("reference" in part.lower() for part in parts[:-1])


def _check_reference(name: str, call: bool, refs: frozenset[str]) -> Verdict | None:
    return (REFERENCE, REFERENCE_REASON) if names_reference(name, refs) else None


def _check_torch(name: str, call: bool, refs: frozenset[str]) -> Verdict | None:
    return _torch_verdict(name) if name.split(".", 1)[0] == "torch" else None


def _check_npu(name: str, call: bool, refs: frozenset[str]) -> Verdict | None:
    parts = name.split(".")
    if parts[0] != "torch_npu" or not call:
        return None
    query = len(parts) > 2 and parts[1] == "npu" and parts[2] in DEVICE_QUERIES
    return None if query else (TORCH_OP, NPU_REASON)


def _check_host(name: str, call: bool, refs: frozenset[str]) -> Verdict | None:
    host = call and name.split(".", 1)[0] in HOST_COMPUTE_MODULES
    return (TORCH_OP, HOST_REASON) if host else None


def _check_builtin(name: str, call: bool, refs: frozenset[str]) -> Verdict | None:
    if name in ("operator.matmul", "operator.imatmul", "operator.__matmul__"):
        return TORCH_OP, MATMUL_REASON
    return (REFERENCE, GLOBALS_REASON) if name == "builtins.globals" else None


_SCOPE_CHECKS: tuple[Callable[[str, bool, frozenset[str]], Verdict | None], ...] = (
    _check_reference, _check_torch, _check_npu, _check_host, _check_builtin,
)


def scope_verdict(name: str, call: bool, refs: frozenset[str]) -> Verdict | None:
    """What using a resolved name on the forward path means (file rules are reported apart)."""
    if _file_rule(name) is not None:
        return None
    return next((v for v in (f(name, call, refs) for f in _SCOPE_CHECKS) if v), None)


def value_verdict(name: str) -> Verdict | None:
    """A compute function of PyTorch (or the host) named as a value, not called."""
    root = name.split(".", 1)[0]
    if root == "torch":
        return _torch_verdict(name)
    if root in HOST_LIBRARIES:
        return TORCH_OP, HOST_LIBRARY_REASON
    if root == "torch_npu":
        return _check_npu(name, True, frozenset())
    return _check_builtin(name, True, frozenset()) if root == "operator" else None


def kernel_verdict(name: str) -> Verdict | None:
    root = name.split(".", 1)[0]
    torch_op = root == "torch" and not _torch_allowed(name)
    return (TORCH_OP, KERNEL_TORCH_REASON) if torch_op or root in HOST_COMPUTE_MODULES else None
