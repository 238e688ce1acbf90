"""A failed NPU run's log (ACL, torch_npu, device records, plog) -> the code, its meaning,
where it failed and a hint.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from runners.ascendc.parsers.common import JsonResult, clip


@dataclass
class RuntimeFailure(JsonResult):
    """What a failed NPU run says: the ACL code, its meaning, the core and kernel at fault."""

    code: int | None = None
    code_inferred: bool = False  # taken from the retCode text because no number was printed
    meaning: str | None = None
    error_id: str | None = None
    error_ids: list[str] = field(default_factory=list)
    api: str | None = None
    call_site: str | None = None
    operator: str | None = None
    kernel: str | None = None
    pta_code: str | None = None
    device: int | None = None
    core_type: str | None = None
    core_id: int | None = None
    ret_code: str | None = None
    reason: str | None = None
    error_str: str | None = None
    environmental: bool = False  # the machine failed (busy, out of memory), not the kernel
    hint: str | None = None
    log_lines: list[str] = field(default_factory=list)


# Meanings in plain words, from the ACL runtime's code table (rt_error_codes.h).
_CODE_MEANINGS: dict[int, str] = {
    107000: "invalid parameter to a runtime call",
    107001: "invalid device id",
    107002: "no current context (the device was not set in this thread)",
    107003: "the stream is not in the current context",
    500000: "unknown internal error",
    500001: "ACL internal error",
    500002: "GE (graph engine) error, usually an operator that failed to compile or run",
    500003: "runtime internal error",
    500004: "driver internal error",
    507000: "runtime internal error on the host",
    507001: "task scheduler internal error on the device",
    507011: "model/stream execution failed",
    507013: "system DMA hardware error",
    507014: "AI Core timeout",
    507015: "AI Core exception",
    507016: "AI Core trap exception",
    507033: "device set failed (the device could not be started)",
    507034: "vector core timeout",
    507035: "vector core exception",
    507036: "vector core trap exception",
    507899: "driver internal error",
}
_CODE_FROM_REASON = {
    "aicore timeout": 507014,
    "aicore exception": 507015,
    "aicore trap exception": 507016,
    "vector core timeout": 507034,
    "vector core exception": 507035,
}
_ERROR_ID_MEANINGS = {
    "EL0004": "memory allocation failure",
    "EL0005": "resource busy",
    "EE1001": "invalid argument",
    "EZ9999": "inner error (details follow in the device record)",
    "E40024": "a Python function called by the operator compiler failed",
}
# Failures of the machine or the harness (no device, no context, busy, out of memory): the
# agent must not "fix" the kernel for these.
_ENVIRONMENTAL_CODES = {107001, 107002, 507033}
_ENVIRONMENTAL_IDS = {"EL0004", "EL0005"}

_CODE_PATTERNS = (
    re.compile(r"\bfailed: (?P<code>\d{6})\b"),
    re.compile(r"error code is (?P<code>\d+)"),
    re.compile(r"runtime result = (?P<code>\d+)"),
    re.compile(r"error code:\s*(?P<code>\d{6})\b"),
)
_ACL_CALL = re.compile(r"(?P<api>\w+)\([^()]*\) failed: \d+(?: \((?P<site>[^()]+?:\d+)\))?")
_NPU_FUNCTION = re.compile(
    r"NPU function error: (?:call (?P<call>\w+) failed|(?:[\w:]+::)?(?P<api>\w+)\()")
_OPS_FUNCTION = re.compile(r"OPS function error: (?P<op>\w+)")
_WORKING_OPERATOR = re.compile(r"current working operator name is (?P<op>\w+)")
_FAULT_KERNEL = re.compile(r"fault kernel_name=(?P<kernel>[^,\s]+)")
_ERROR_ID = re.compile(r"\b(E[A-Z]\d{4}|E\d{5})\b")
_PTA_CODE = re.compile(r"\b(ERR\d{5})\b")
_RET_CODE = re.compile(r"retCode=(?P<ret>0x[0-9a-fA-F]+), \[(?P<reason>[^\]]+)\]")
_REASON = re.compile(r"reason=\[(?P<reason>[^\]]+)\]")
_CORE = re.compile(r"(?:exception of (?P<a>[\w ]+?) error|there is an? (?P<b>[\w ]+?) error "
                   r"exception), core id is (?P<id>\d+)")
_ERROR_STR = re.compile(r"errorStr: (?P<text>.+?)(?: fixp_error0| subErrType|\[FUNC|$)")
_DEVICE = re.compile(r"device\(chipId:(?P<a>\d+)|\bDevice:(?P<b>\d+)|device_id=(?P<c>\d+)")
_RELEVANT = re.compile(
    r"failed: \d|RecentErrMsg|errorStr|retCode=|error code is|ERR\d{5}|\[Error\]|"
    r"runtime result|fault kernel_name|Inner error|E[A-Z]\d{4}:|E\d{5}:|reason=\[")
# Prefixes that wrappers put before the runtime's own text (vLLM workers, torch ranks, plog).
_LOG_PREFIX = re.compile(
    r"^(?:\(\w[^)]*\)\s*)+(?:ERROR|WARNING|INFO) [\d-]+ [\d:]+ \[[^\]]+\]\s?"
    r"|^\[rank\d+\]:\s?|^(?:ERROR|WARNING|INFO) [\d-]+ [\d:]+ \[[^\]]+\]\s?"
    r"|^\[(?:ERROR|WARNING|INFO|EVENT)\] [\w:]+\(\d+,[^)]*\):[\d.:-]+ \[[^\]]+\]\d*\s?")


def parse_runtime_error(text: str) -> RuntimeFailure:
    """The failure an ACL/torch_npu run printed; every field None when nothing matched."""
    lines = [_LOG_PREFIX.sub("", line).strip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    body = "\n".join(lines)
    failure = RuntimeFailure()
    _runtime_code(failure, body)
    _runtime_where(failure, body)
    _runtime_core(failure, body)
    failure.error_ids = list(dict.fromkeys(_ERROR_ID.findall(body)))
    failure.error_id = failure.error_ids[0] if failure.error_ids else None
    pta = _PTA_CODE.search(body)
    failure.pta_code = pta.group(1) if pta else None
    failure.meaning = _runtime_meaning(failure)
    failure.environmental = (failure.code in _ENVIRONMENTAL_CODES
                             or bool(_ENVIRONMENTAL_IDS & set(failure.error_ids)))
    failure.hint = _runtime_hint(failure, body)
    failure.log_lines = [clip(line) for line in dict.fromkeys(
        line for line in lines if _RELEVANT.search(line))][:8]
    return failure


def _runtime_code(failure: RuntimeFailure, body: str) -> None:
    for pattern in _CODE_PATTERNS:
        match = pattern.search(body)
        if match is not None:
            failure.code = int(match["code"])
            return
    ret = _RET_CODE.search(body)
    if ret is not None and ret["reason"] in _CODE_FROM_REASON:
        failure.code = _CODE_FROM_REASON[ret["reason"]]
        failure.code_inferred = True


def _runtime_where(failure: RuntimeFailure, body: str) -> None:
    call = _ACL_CALL.search(body)
    if call is not None:
        failure.api, failure.call_site = call["api"], call["site"]
    npu = _NPU_FUNCTION.search(body)
    if npu is not None:
        failure.api = failure.api or npu["api"]
        failure.operator = npu["call"]  # "call aclnnXxx failed": an operator, not an ACL call
    for pattern in (_OPS_FUNCTION, _WORKING_OPERATOR):
        match = pattern.search(body)
        if match is not None and failure.operator is None:
            failure.operator = match["op"]
    kernel = _FAULT_KERNEL.search(body)
    failure.kernel = kernel["kernel"] if kernel else None
    device = _DEVICE.search(body)
    if device is not None:
        failure.device = int(device["a"] or device["b"] or device["c"])


def _runtime_core(failure: RuntimeFailure, body: str) -> None:
    core = _CORE.search(body)
    if core is not None:
        failure.core_type = (core["a"] or core["b"]).strip()
        failure.core_id = int(core["id"])
    ret = _RET_CODE.search(body)
    if ret is not None:
        failure.ret_code, failure.reason = ret["ret"], ret["reason"]
    else:
        # Several reason=[...] may appear ("driver error:internal error" before "aicore
        # timeout"): the one that names a known failure is the cause.
        reasons = _REASON.findall(body)
        known = [reason for reason in reasons if reason in _CODE_FROM_REASON]
        failure.reason = (known or reasons or [None])[0]
    error_str = _ERROR_STR.search(body)
    if error_str is not None:
        failure.error_str = error_str["text"].strip().rstrip(".").strip()


def _runtime_meaning(failure: RuntimeFailure) -> str | None:
    parts: list[str] = []
    if failure.code is not None:
        parts.append(_CODE_MEANINGS.get(failure.code, f"ACL error {failure.code}"))
    for error_id in failure.error_ids:
        meaning = _ERROR_ID_MEANINGS.get(error_id)
        if meaning and error_id != "EZ9999":
            parts.append(meaning)
    if failure.error_str:
        parts.append(failure.error_str)
    elif failure.reason and _CODE_FROM_REASON.get(failure.reason) != failure.code:
        parts.append(failure.reason)  # unless it only repeats what the code already says
    return "; ".join(dict.fromkeys(parts)) or None


def _runtime_hint(failure: RuntimeFailure, body: str) -> str | None:
    text = f"{failure.error_str or ''} {failure.reason or ''}".lower()
    code = failure.code
    if failure.environmental:
        return ("The machine failed, not the kernel (device busy, out of memory, or no "
                "device/context): check npu-smi for other processes, then rerun.")
    if "ub address out of bounds" in text:
        return ("A vector instruction touched UB outside its buffers: check the tile length "
                "against InitBuffer sizes and the count passed for the tail tile.")
    if "mte instruction is out of range" in text or "mpu address" in text:
        return ("A data copy read or wrote global memory outside the tensor: check the GM "
                "offsets (block index x block length + tile offset) and tail handling.")
    if "d-cache" in text:
        return ("A scalar access (GetValue/SetValue, pointer arithmetic) hit an invalid "
                "address: check scalar indices and GM/UB pointer offsets.")
    if code in (507014, 507034) or "timeout" in text:
        return ("The kernel never finished: look for a hang (unbalanced EnQue/DeQue or "
                "SetFlag/WaitFlag, a SyncAll over more blocks than run, an endless loop) or "
                "far too much work per core.")
    if code in (507015, 507035, 507016, 507036):
        return ("The kernel faulted on the device: usually an out-of-bounds or misaligned "
                "access. Run the CPU debug build to find the line.")
    if code == 500002:
        return ("An operator failed in the graph engine (compiling or running it): the "
                "E-coded message after it says why.")
    if code == 507011:
        return ("A task on the stream failed or hung while the host waited for it: the first "
                "device error earlier in the log is the cause.")
    if failure.pta_code or "Inner error happened" in body:
        return ("torch_npu reports an earlier device failure: the first error in the log "
                "(or the plog) is the real one.")
    return None
