"""The CPU model's intrinsics against NumPy: one compiled probe (csrc/probe) runs every case
of the table in one process; each case is one instruction on a byte image.

Bit-exact where IEEE fixes the result (arithmetic, sqrt, conversions with each rounding
mode on ties, overflow, subnormals and NaN); the transcendentals (exp, ln) within 1 ulp,
as libm and NumPy may differ there.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from runners.ascendc.cpumodel import cpu_model_status
from tests.runners.ascendc.cpumodel_reference import TYPES, Case, address, expected

PROBE_SOURCE = (Path(__file__).resolve().parents[3] / "runners" / "ascendc" / "cpumodel" /
                "csrc" / "probe" / "intrinsic_probe.cpp")
STATUS = cpu_model_status()
pytestmark = pytest.mark.skipif(not STATUS.available, reason=f"CPU model: {STATUS.reason}")

RNG = np.random.default_rng(7)
F32 = [1, 1, 1, 8, 8]  # repeat 1, unit block strides, contiguous repeats (unary form)
B32 = [1, 1, 1, 1, 8, 8, 8]


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from runners.ascendc.cpumodel.library import LINK_LIBS, prepare_library

    library = prepare_library()
    binary = tmp_path_factory.mktemp("probe") / "intrinsic_probe"
    done = subprocess.run(["g++", *library.compile_flags(), str(PROBE_SOURCE),
                           str(library.archive), *LINK_LIBS, "-o", str(binary)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return binary


def run_cases(probe: Path, cases: list[Case]) -> list[np.ndarray]:
    text = "".join(case.line() + "\n" for case in cases)
    done = subprocess.run([str(probe)], input=text, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert len(lines) == len(cases), lines[:3]
    for case, line in zip(cases, lines, strict=True):
        assert not line.startswith("unknown"), f"probe does not know {case.name}"
    return [np.frombuffer(bytes.fromhex(line), np.uint8).copy() for line in lines]


def _fill(image: np.ndarray, at: int, values: np.ndarray) -> None:
    raw = np.frombuffer(values.tobytes(), np.uint8)
    image[at:at + raw.size] = raw


def _operands(dtype: str, count: int, *, positive: bool = False) -> np.ndarray:
    kind = TYPES[dtype]
    if dtype in ("u32", "u16"):
        return RNG.integers(0, np.iinfo(kind).max, count).astype(kind)
    if dtype in ("s32", "s16"):
        return RNG.integers(-1000, 1000, count).astype(kind)
    values = RNG.standard_normal(count) * 3
    return (np.abs(values) + 0.01 if positive else values).astype(kind)


def _elementwise_case(name: str, dtype: str, operands: int, fields: list[int], **kw: object
                      ) -> Case:
    image = np.zeros(4096, np.uint8)
    positive = name in ("vln", "vsqrt", "vrsqrt")
    for index in range(1, operands + 1):
        size = 4 if dtype in ("f32", "s32", "u32") else 2
        _fill(image, 1024 * index, _operands(dtype, 1024 // size // 2, positive=positive))
    return Case(name, dtype, [1024 * index for index in range(operands + 1)], fields,
                image=image, **kw)  # type: ignore[arg-type]


def elementwise_cases() -> Iterator[tuple[str, Case, int]]:
    """(id, case, allowed ulps)."""
    for name in ("vabs", "vexp", "vln", "vsqrt", "vrsqrt", "vrec", "vrelu"):
        for dtype in ("f32", "f16"):
            ulps = 1 if name in ("vexp", "vln") else 0
            yield f"{name}-{dtype}", _elementwise_case(name, dtype, 1, [2, 1, 1, 8, 8]), ulps
    for name in ("vadd", "vsub", "vmul", "vdiv", "vmax", "vmin"):
        for dtype in ("f32", "f16", "s32") if name != "vdiv" else ("f32", "f16"):
            yield f"{name}-{dtype}", _elementwise_case(name, dtype, 2, [2, *B32[1:]]), 0
    for name in ("vand", "vor"):
        yield f"{name}-s16", _elementwise_case(name, "s16", 2, B32), 0
    yield "vnot-s16", _elementwise_case("vnot", "s16", 1, F32), 0
    for dtype in ("u32", "u16"):
        yield f"vcopy-{dtype}", _elementwise_case("vcopy", dtype, 1, [2, 1, 2, 8, 16]), 0
    for name in ("vadds", "vmuls", "vmaxs", "vmins", "vlrelu"):
        for dtype in ("f32", "f16"):
            yield f"{name}-{dtype}", _elementwise_case(name, dtype, 1, F32, scalar=0.75), 0
    yield "vadds-s32", _elementwise_case("vadds", "s32", 1, F32, scalar=-17), 0
    # Layout: strided blocks and repeats, a partial mask, the upper half of a 16-bit mask.
    yield "vadd-strided", _elementwise_case("vadd", "f32", 2, [2, 2, 1, 2, 16, 8, 16],
                                            low=0x00FF_00FF_F0F0_0001), 0
    yield "vmul-f16-high-mask", _elementwise_case("vmul", "f16", 2, [1, 1, 1, 1, 8, 8, 8],
                                                  low=0, high=0x8000_0000_0000_FFFF), 0
    # Counter mode: the first N elements over as many repeats, the repeat field ignored.
    yield "vadd-counter", _elementwise_case("vadd", "f32", 2, [1, *B32[1:]], counter=True,
                                            high=0, low=150), 0
    yield "vrelu-f16-counter", _elementwise_case("vrelu", "f16", 1, [1, 1, 1, 8, 8],
                                                 counter=True, high=0, low=300), 0
    yield "vector_dup-f32", Case("vector_dup", "f32", [0], [3, 1, 1, 8, 8], scalar=2.5), 0
    yield "vector_dup-f16-counter", Case("vector_dup", "f16", [64], [1, 1, 1, 8, 8],
                                         scalar=-1.5, counter=True, high=0, low=77), 0
    yield "vector_dup-s32-strided", Case("vector_dup", "s32", [0], [2, 2, 1, 16, 8],
                                         scalar=7, low=0xFFFF), 0


ELEMENTWISE = list(elementwise_cases())


def _ulp_distance(got: np.ndarray, want: np.ndarray, dtype: str) -> int:
    kind = {"f32": (np.float32, np.int32), "f16": (np.float16, np.int16)}.get(dtype)
    if kind is None:
        return 0 if np.array_equal(got, want) else 1 << 30
    values_got = got.view(kind[0])
    values_want = want.view(kind[0])
    same_nan = np.isnan(values_got) & np.isnan(values_want)
    distance = np.abs(got.view(kind[1]).astype(np.int64) - want.view(kind[1]).astype(np.int64))
    return int(np.max(np.where(same_nan, 0, distance), initial=0))


def test_elementwise_intrinsics_match_numpy(probe: Path) -> None:
    results = run_cases(probe, [case for _, case, _ in ELEMENTWISE])
    failures = []
    for (ident, case, ulps), got in zip(ELEMENTWISE, results, strict=True):
        want = expected(case)
        if ulps == 0:
            if not np.array_equal(got, want):
                failures.append(ident)
            continue
        size = 4 if case.dtype == "f32" else 2
        usable = got.size // size * size
        distance = _ulp_distance(got[:usable], want[:usable], case.dtype)
        if distance > ulps:
            failures.append(f"{ident} ({distance} ulp)")
    assert not failures, f"differ from NumPy: {failures}"


def test_masked_elements_and_gaps_are_left_alone(probe: Path) -> None:
    case = _elementwise_case("vadd", "f32", 2, [1, 2, 1, 1, 16, 8, 8], low=0b101)
    case.image[0:1024] = 0xAB
    (got,) = run_cases(probe, [case])
    touched = {address(0, 0, index, 4, 2, 16) for index in (0, 2)}
    untouched = [at for at in range(0, 1024, 4) if at not in touched]
    assert all(got[at] == 0xAB for at in untouched)
    assert not any(np.all(got[at:at + 4] == 0xAB) for at in touched)


# --------------------------------------------------------------------------- conversions

F16_EDGES = np.array([0.0, -0.0, 1.0, -2.5, 65504.0, -65504.0, np.inf, -np.inf, np.nan,
                      6.1e-05, 5.96e-08, 1e-07, -3e-06, 1234.5, 0.1], np.float16)
F32_EDGES = np.array([
    0.0, -0.0, 1.0, 0.5, 1.5, 2.5, -2.5, 3.5,            # ties between integers
    1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11,              # half-way between halves (ties)
    -(1.0 + 2.0 ** -11), 1.0 + 2.0 ** -12, 2049.0, 2051.0,
    65504.0, 65519.0, 65520.0, 70000.0, -65520.0, 1e10,   # overflow to inf or saturation
    2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26, 2.0 ** -26, 1e-9,  # half subnormals and below
    -(2.0 ** -25), 1e-45, np.inf, -np.inf, np.nan, 0.1, -7.7,
], np.float32)


def _pad64(values: np.ndarray) -> np.ndarray:
    return np.resize(values, 64)


def _half_candidates(value: float) -> tuple[float, float]:
    """The halves just below and above `value` (inf beyond the range)."""
    with np.errstate(over="ignore"):
        return _half_neighbours(value)


def _half_neighbours(value: float) -> tuple[float, float]:
    nearest = float(np.float16(value))
    if nearest == value:
        return nearest, nearest
    if nearest < value:
        return nearest, float(np.nextafter(np.float16(nearest), np.float16(np.inf)))
    return float(np.nextafter(np.float16(nearest), np.float16(-np.inf))), nearest


def _round_to_half(value: float, mode: str) -> np.float16:
    if np.isnan(value) or np.isinf(value) or mode in ("", "r"):
        with np.errstate(over="ignore"):
            return np.float16(value)
    low, high = _half_candidates(value)
    if low == high:
        return np.float16(low)
    toward_zero = high if value < 0 else low
    away = low if value < 0 else high
    if mode == "f":
        return np.float16(low)
    if mode == "c":
        return np.float16(high)
    if mode == "z":
        return np.float16(toward_zero)
    if mode == "o":
        finite = toward_zero if np.isinf(away) else None
        if finite is not None:
            return np.float16(finite)
        odd = np.array([low], np.float16).view(np.uint16)[0] & 1
        return np.float16(low if odd else high)
    # a: to nearest, ties away from zero; inf counts as 65536 for the distance.
    top = 65536.0 if np.isinf(high) else high
    bottom = -65536.0 if np.isinf(low) else low
    if value - bottom == top - value:
        return np.float16(away)
    return np.float16(low if value - bottom < top - value else high)


def _round_integral(value: float, mode: str) -> float:
    if np.isnan(value) or np.isinf(value):
        return value
    if mode == "r":
        return float(np.rint(value))
    if mode == "a":
        return float(np.copysign(np.floor(abs(value) + 0.5), value))
    return float({"f": np.floor, "c": np.ceil, "z": np.trunc}[mode](value))


def _conv_case(name: str, values: np.ndarray, dst_size: int, src_size: int) -> Case:
    image = np.zeros(1024, np.uint8)
    _fill(image, 512, _pad64(values))
    # One repeat of 64 elements: the wider side takes 8 blocks, the narrower 4.
    return Case(name, "f32", [0, 512], [1, 1, 1, 8 * dst_size // 4, 8 * src_size // 4],
                image=image)


def conversion_cases() -> Iterator[tuple[str, Case, np.ndarray]]:
    """(id, case, the expected first 64 destination elements)."""
    yield ("vconv_f162f32", _conv_case("vconv_f162f32", F16_EDGES, 4, 2),
           _pad64(F16_EDGES).astype(np.float32))
    for mode in ("", "r", "a", "f", "c", "z", "o"):
        name = f"vconv_f322f16{mode}"
        want = np.array([_round_to_half(float(v), mode) for v in _pad64(F32_EDGES)], np.float16)
        yield name, _conv_case(name, F32_EDGES, 2, 4), want
    finite = F32_EDGES[np.isfinite(F32_EDGES)]
    for mode in ("r", "a", "f", "c", "z"):
        name = f"vconv_f322f32{mode}"
        want = np.array([_round_integral(float(v), mode) for v in _pad64(F32_EDGES)], np.float32)
        yield name, _conv_case(name, F32_EDGES, 4, 4), want
        name = f"vconv_f322s32{mode}"
        ints = np.concatenate([finite, np.array([3e9, -3e9, 2147483520.0], np.float32)])
        rounded = [_round_integral(float(v), mode) for v in _pad64(ints)]
        want = np.clip(np.array(rounded), -2**31, 2**31 - 1).astype(np.int32)
        yield name, _conv_case(name, ints, 4, 4), want
    halves = np.array([0.5, 1.5, 2.5, -2.5, -0.4, 7.7, -7.7, 65504.0, -65504.0, 1000.5],
                      np.float16)
    for mode in ("r", "a", "f", "c", "z"):
        integral = np.array([_round_integral(float(v), mode) for v in _pad64(halves)])
        name = f"vconv_f162s32{mode}"
        yield name, _conv_case(name, halves, 4, 2), integral.astype(np.int32)
        name = f"vconv_f162s16{mode}"
        yield name, _conv_case(name, halves, 2, 2), \
            np.clip(integral, -2**15, 2**15 - 1).astype(np.int16)
    shorts = np.array([0, 1, -1, 2049, 2051, -2051, 4097, 32767, -32768], np.int16)
    for mode in ("r", "a", "f", "c", "z"):
        name = f"vconv_s162f16{mode}"
        want = np.array([_round_to_half(float(v), mode if mode != "a" else "a")
                         for v in _pad64(shorts)], np.float16)
        yield name, _conv_case(name, shorts, 2, 2), want
    yield ("vconv_s162f32", _conv_case("vconv_s162f32", shorts, 4, 2),
           _pad64(shorts).astype(np.float32))
    big = np.array([0, 1, -1, 2**24 + 1, -(2**24 + 1), 2**24 + 3, 2**31 - 1, -2**31, 123456789],
                   np.int32)
    for mode in ("r", "f", "c", "z"):
        name = f"vconv_s322f32{mode}"
        want = np.array([_float_round(int(v), mode) for v in _pad64(big)], np.float32)
        yield name, _conv_case(name, big, 4, 4), want


def _float_round(value: int, mode: str) -> np.float32:
    nearest = np.float32(value)
    if int(nearest) == value or mode == "r":
        return nearest
    below = nearest if int(nearest) < value else np.nextafter(nearest, np.float32(-np.inf))
    above = nearest if int(nearest) > value else np.nextafter(nearest, np.float32(np.inf))
    if mode == "f":
        return below
    if mode == "c":
        return above
    return above if value < 0 else below  # z


CONVERSIONS = list(conversion_cases())


@pytest.mark.parametrize("ident", [ident for ident, _, _ in CONVERSIONS])
def test_conversions_round_like_ieee(probe: Path, ident: str,
                                     conversion_results: dict[str, np.ndarray]) -> None:
    _, _, want = next(item for item in CONVERSIONS if item[0] == ident)
    got = conversion_results[ident][:want.nbytes].view(want.dtype)
    if want.dtype.kind == "f":
        same = (got.view(f"u{want.itemsize}") == want.view(f"u{want.itemsize}")) | \
            (np.isnan(got) & np.isnan(want))
    else:
        same = got == want
    bad = np.flatnonzero(~same)
    assert bad.size == 0, f"{ident}: at {bad[:5]} got {got[bad[:5]]} want {want[bad[:5]]}"


@pytest.fixture(scope="module")
def conversion_results(probe: Path) -> dict[str, np.ndarray]:
    results = run_cases(probe, [case for _, case, _ in CONVERSIONS])
    return {ident: result for (ident, _, _), result in zip(CONVERSIONS, results, strict=True)}


# --------------------------------------------------------------------------- data movement


def test_gm_to_ub_pad_copy_places_bursts_pads_and_gaps(probe: Path) -> None:
    image = np.zeros(2048, np.uint8)
    source = np.arange(100, dtype=np.float32)
    _fill(image, 1024, source)
    pad = int(np.array([-1.0], np.float32).view(np.uint32)[0])
    # 3 bursts of 5 floats (20 bytes), 2 pad elements left and 1 right, 8 bytes skipped in
    # GM between bursts, 1 block skipped in UB between rows.
    case = Case("copy_gm_to_ubuf_align_b32", "f32", [0, 1024], [0, 3, 20, 2, 1, 8, 1],
                pad=pad, image=image)
    (got,) = run_cases(probe, [case])
    rows = got[:3 * 64].view(np.float32).reshape(3, 16)  # 32-byte row + 32-byte gap each
    for burst in range(3):
        first = burst * 7  # 5 elements + 8 bytes (2 floats) of GM gap
        assert list(rows[burst, :8]) == [-1, -1, *source[first:first + 5], -1]
        assert not rows[burst, 8:].any()


def test_ub_to_gm_pad_copy_packs_rows(probe: Path) -> None:
    image = np.zeros(2048, np.uint8)
    rows = np.arange(48, dtype=np.float16)  # two UB rows of 32 bytes + 1 gap block each
    _fill(image, 0, rows)
    case = Case("copy_ubuf_to_gm_align_b16", "f16", [1024, 0], [0, 2, 14, 0, 0, 1, 4],
                image=image)
    (got,) = run_cases(probe, [case])
    gm = got[1024:1024 + 64]
    assert list(gm[:14].view(np.float16)) == list(rows[:7])
    assert not gm[14:18].any()  # the 4-byte GM gap is skipped, not written
    assert list(gm[18:32].view(np.float16)) == list(rows[32:39])


def test_block_copy_counts_in_32_byte_blocks(probe: Path) -> None:
    image = np.zeros(2048, np.uint8)
    image[1024:1024 + 256] = np.arange(256, dtype=np.uint8)
    case = Case("copy_gm_to_ubuf", "f32", [0, 1024], [0, 2, 2, 1, 3], image=image)
    (got,) = run_cases(probe, [case])
    assert list(got[0:64]) == list(range(64))
    assert not got[64:160].any()
    assert list(got[160:224]) == list(range(96, 160))
