"""The Ascend C package an LLM draft lives in: which files the model writes, and the rest.

The model writes three files of `ascendc/`: the kernel (`<op>_kernel.cpp`, or `.asc` for
the CANN 9.x toolchain), the host tiling header (`<op>_tiling.h`) and the torch binding
(`op.cpp`). Everything else (CMakeLists.txt, build.sh, the CPU twin, the NPU tests, the
benchmark, opbot.json) comes from runners/ascendc/package.py's templates: those files
encode how a runner builds, tests and times a package, and a model that rewrote them
could break the build or weaken the tests it is judged by. A reply naming any other file
is rejected with feedback (bot/agent/backends/ascendc/reply.py).

The starting package is the offline generator's when it covers the operator (its kernel
is then the model's starting draft), else one rendered from the spec's inputs around a
placeholder kernel that the model's first reply must replace.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace

from bot.spec import OpSpec
from runners.ascendc.package import (
    KERNEL_DTYPES,
    MANIFEST,
    Generation,
    KernelBody,
    PackageRequest,
    compute_slots_of,
    kernel_file_name,
    render_package,
)

BINDING_FILE = "op.cpp"
# A kernel that only copies: the package must render, but the model replaces this kernel.
_PLACEHOLDER = KernelBody(compute=("AscendC::Muls(y0, x0, 1.0f, count);",), compute_slots=0,
                          summary="placeholder: the model writes this kernel")


def tiling_file_name(op: str) -> str:
    return f"{op}_tiling.h"


@dataclass(frozen=True)
class Skeleton:
    """A whole package (paths relative to the op folder), and what the model may write."""

    op: str
    generation: Generation
    inputs: tuple[str, ...]  # the kernel's tensor arguments, as the binding names them
    outputs: int
    dtypes: tuple[str, ...]
    files: Mapping[str, str]
    has_draft: bool  # the kernel is the offline generator's, a working starting draft
    pattern: str = "elementwise"  # the package's contract: "elementwise" or "rows"
    params: tuple[str, ...] = ()  # rows pattern: parameter tensors after the inputs

    @property
    def writable(self) -> tuple[str, ...]:
        """The file names a reply may carry, the kernel first."""
        return (kernel_file_name(self.op, self.generation), tiling_file_name(self.op),
                BINDING_FILE)

    @property
    def kernel_name(self) -> str:
        return self.writable[0]

    def text(self, name: str) -> str:
        return self.files[f"ascendc/{name}"]

    def model_files(self) -> dict[str, str]:
        """The current text of every file the model writes."""
        return {name: self.text(name) for name in self.writable}

    def compose(self, written: Mapping[str, str]) -> Skeleton:
        """This package with the model's files in place; a file the reply left out keeps
        its current text. PackageError when the kernel lacks COMPUTE_SLOTS."""
        files = dict(self.files)
        for name, text in written.items():
            files[f"ascendc/{name}"] = text
        kernel = files[f"ascendc/{self.kernel_name}"]
        # opbot.json records the kernel's scratch slots: keep it in step with the kernel.
        manifest_path = f"ascendc/{MANIFEST}"
        manifest = json.loads(files[manifest_path])
        manifest["compute_slots"] = compute_slots_of(kernel)
        files[manifest_path] = json.dumps(manifest, indent=2) + "\n"
        return replace(self, files=files, has_draft=False)


def skeleton_from_package(files: Mapping[str, str]) -> Skeleton:
    """The offline generator's package, as the starting draft."""
    manifest = json.loads(files[f"ascendc/{MANIFEST}"])
    generation: Generation = "asc" if manifest["generation"] == "asc" else "legacy"
    return Skeleton(op=str(manifest["op"]), generation=generation,
                    inputs=tuple(str(item) for item in manifest["inputs"]),
                    outputs=int(manifest["outputs"]),
                    dtypes=tuple(str(item) for item in manifest["entries"]),
                    files=dict(files), has_draft=True,
                    pattern=str(manifest.get("pattern", "elementwise")),
                    params=tuple(str(item["name"]) for item in manifest.get("params") or []))


def _spec_dtypes(spec: OpSpec) -> tuple[str, ...]:
    found = [dtype for item in spec.inputs or () if item.is_tensor for dtype in item.dtypes]
    kept = tuple(dict.fromkeys(dtype for dtype in found if dtype in KERNEL_DTYPES))
    return kept or ("float32",)


def skeleton_from_spec(spec: OpSpec, generation: Generation) -> Skeleton:
    """A package around a placeholder kernel, for operators the offline generator cannot
    lower; the spec must list its inputs (the binding's arguments come from them)."""
    tensors = tuple(item.name for item in spec.inputs or () if item.is_tensor)
    dtypes = _spec_dtypes(spec)
    tolerances = {name: {"atol": tol.atol, "rtol": tol.rtol}
                  for name, tol in spec.tolerance_table().items()}
    perf = spec.perf_case()
    request = PackageRequest(
        op=spec.name, generation=generation, body=_PLACEHOLDER, inputs=tensors, outputs=1,
        dtypes=dtypes, cases=tuple(case.to_json() for case in spec.cases()),
        tolerances=tolerances,
        init_args=None if spec.init_args is None else list(spec.init_args),
        perf_case=perf.to_json() if perf else None, derive_tail_cases=spec.derive_tail_cases)
    files = render_package(request)
    return replace(skeleton_from_package(files), has_draft=False)
