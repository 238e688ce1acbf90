#!/usr/bin/env bash
# Build, test and profile the relu Ascend C package (legacy toolchain: ascendc.cmake, any CANN release); written by opbot.
#   ./build.sh             NPU build, then the NPU tests (pytest -m npu)
#   ./build.sh --cpu       CPU twin build and check: needs CANN, not an NPU
#   ./build.sh --profile   NPU build, then msprof op over bench_relu.py
# Options: --soc SOC (default Ascend910B3), --arch ARCH (default dav-2201),
#          --launch-count N (profiled launches, default 5).
# Needs the CANN environment: source <CANN root>/set_env.sh (sets ASCEND_HOME_PATH).
set -euo pipefail
cd "$(dirname "$0")"

MODE=npu
SOC_VERSION="${SOC_VERSION:-Ascend910B3}"
NPU_ARCH="${NPU_ARCH:-dav-2201}"
LAUNCH_COUNT=5
PYTHON="${PYTHON:-python3}"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --cpu) MODE=cpu ;;
        --profile) MODE=profile ;;
        --soc) SOC_VERSION="$2"; shift ;;
        --arch) NPU_ARCH="$2"; shift ;;
        --launch-count) LAUNCH_COUNT="$2"; shift ;;
        -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
        *) echo "build.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

: "${ASCEND_HOME_PATH:?source the CANN set_env.sh first (it sets ASCEND_HOME_PATH)}"
# The torch binding is built against the Python environment that will load it.
torch_settings() {
    TORCH_CMAKE_PREFIX="$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
    CXX11_ABI="$("$PYTHON" -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')"
    TORCH_NPU_PATH="$("$PYTHON" -c 'import importlib.util, os; print(os.path.dirname(importlib.util.find_spec("torch_npu").origin))')"
}

case "$MODE" in
    npu)
        torch_settings
        echo "[build.sh] npu: clean-cache"
        cmake -E rm -f build-npu/CMakeCache.txt
        echo "[build.sh] npu: configure"
        cmake -S . -B build-npu -DRUN_MODE=npu "-DSOC_VERSION=$SOC_VERSION" "-DASCEND_CANN_PACKAGE_PATH=$ASCEND_HOME_PATH" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=$TORCH_CMAKE_PREFIX" "-DTORCH_NPU_PATH=$TORCH_NPU_PATH" "-DGLIBCXX_USE_CXX11_ABI=$CXX11_ABI"
        echo "[build.sh] npu: build"
        cmake --build build-npu --parallel
        echo "[build.sh] npu: test"
        OPBOT_ASCENDC_LIB=build-npu/librelu_ops.so "$PYTHON" -m pytest tests/test_relu_npu.py -q -p no:cacheprovider --junitxml=build-npu/pytest-npu.xml -m npu
        ;;
    cpu)
        echo "[build.sh] cpu: clean-cache"
        cmake -E rm -f build-cpu/CMakeCache.txt
        echo "[build.sh] cpu: configure"
        cmake -S . -B build-cpu -DRUN_MODE=cpu "-DSOC_VERSION=$SOC_VERSION" "-DASCEND_CANN_PACKAGE_PATH=$ASCEND_HOME_PATH" -DCMAKE_BUILD_TYPE=Debug
        echo "[build.sh] cpu: build"
        cmake --build build-cpu --parallel
        echo "[build.sh] cpu: test"
        OPBOT_ASCENDC_CPU_TWIN=build-cpu/relu_cpu_twin "$PYTHON" -m pytest tests/test_relu_npu.py -q -p no:cacheprovider --junitxml=build-cpu/pytest-cpu.xml -k cpu_twin
        ;;
    profile)
        torch_settings
        echo "[build.sh] profile: clean-cache"
        cmake -E rm -f build-npu/CMakeCache.txt
        echo "[build.sh] profile: configure"
        cmake -S . -B build-npu -DRUN_MODE=npu "-DSOC_VERSION=$SOC_VERSION" "-DASCEND_CANN_PACKAGE_PATH=$ASCEND_HOME_PATH" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=$TORCH_CMAKE_PREFIX" "-DTORCH_NPU_PATH=$TORCH_NPU_PATH" "-DGLIBCXX_USE_CXX11_ABI=$CXX11_ABI"
        echo "[build.sh] profile: build"
        cmake --build build-npu --parallel
        echo "[build.sh] profile: profile"
        OPBOT_ASCENDC_LIB=build-npu/librelu_ops.so msprof op --output=prof '--kernel-name=relu_float32|relu_float16' --warm-up=20 "--launch-count=$LAUNCH_COUNT" "$PYTHON" bench_relu.py
        ;;
esac
