#!/usr/bin/env bash
# Installs everything Spora's build and tests need on Debian 12, idempotently.
# Debian packages through apt-get; Python packages into a virtual environment
# at ${SPORA_VENV:-.venv} (created once, reused after).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${SPORA_VENV:-$here/.venv}

pkgs=(
  build-essential cmake ninja-build ccache pkg-config git file binutils
  libboost-dev            # Boost.DLL (header-only, used with std::filesystem)
  nlohmann-json3-dev libspdlog-dev libfmt-dev
  libdnnl-dev             # oneDNN for the cpu plugin
  libgtest-dev libgmock-dev
  python3 python3-venv python3-dev
  dataset-fashion-mnist   # the Python main job's data (IDX files, no download)
  zlib1g-dev              # gzip IDX files in the data pipeline (core/src/data)
  libjpeg62-turbo-dev libpng-dev  # JPEG/PNG decoding in the data pipeline (vision.Decode, ImageFolderDataset)
  hipcc libamdhip64-dev   # builds the ROCm plugin (hipcc 5.2, gfx90a); no AMD GPU needed
  libopenmpi-dev openmpi-bin  # the mpi collective plugin and its tests (mpirun)
  libze-dev clang-14 llvm-spirv-14 ocl-icd-opencl-dev pocl-opencl-icd  # plugins/ze: Level Zero loader, OpenCL C -> SPIR-V, kernel-math test on PoCL
  # plugins/nccl: no Debian package; built when the CUDA toolkit with NCCL is in /usr/local/cuda (nccl.h, libcudart_static.a)
)

sudo_=""
[ "$(id -u)" -eq 0 ] || sudo_="sudo"

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[install-deps] installing: ${missing[*]}"
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "[install-deps] Debian packages: all present"
fi

# Python environment: numpy is the reference the tests compare against;
# nanobind builds the binding module, scikit-build-core drives `pip install .`,
# matplotlib draws the main job's curves, onnx and onnxruntime check ONNX
# import and export against an independent runtime (docs/onnx.md).
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c "import numpy, pytest, nanobind, scikit_build_core, matplotlib, onnx, onnxruntime" 2>/dev/null; then
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q numpy pytest nanobind scikit-build-core matplotlib onnx onnxruntime
fi
echo "[install-deps] done (venv: $venv)"
