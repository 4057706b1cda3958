#!/usr/bin/env bash
# Build llama.cpp's `llama-server` for this machine's CPU and print the binary's path.
#
# The sources come from the llama-cpp-python sdist on PyPI (it vendors llama.cpp), pinned so
# that every machine tunes the same engine. The result lives in a git-ignored cache folder and
# is reused when present, so calling this again is cheap. The binary is built with
# -march=native: build it on the machine that runs it.
#
# Usage: scripts/build_llama_server.sh            # prints .cache/llama.cpp/<version>/bin/llama-server
# Env:   LLAMA_CPP_PYTHON_VERSION (default 0.3.36), LLAMA_CACHE_DIR (default <repo>/.cache/llama.cpp),
#        PYTHON (default python3; runs pip download),
#        BUILD_JOBS (default 2; the build takes ~6 minutes on 2 cores)
set -euo pipefail

version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache_dir="${LLAMA_CACHE_DIR:-$repo_root/.cache/llama.cpp}/$version"
binary="$cache_dir/bin/llama-server"
jobs="${BUILD_JOBS:-2}"

if [[ -x "$binary" ]]; then
    echo "$binary"
    exit 0
fi

log() { echo "build_llama_server: $*" >&2; }

mkdir -p "$cache_dir"
# A lock keeps two concurrent callers (CI steps, parallel tests) from building twice.
exec 9>"$cache_dir/.lock"
flock 9
if [[ -x "$binary" ]]; then
    echo "$binary"
    exit 0
fi

src_dir="$cache_dir/src"
sdist="$cache_dir/llama_cpp_python-$version.tar.gz"
if [[ ! -f "$sdist" ]]; then
    log "downloading llama-cpp-python==$version sdist"
    tmp_dl="$(mktemp -d "$cache_dir/dl.XXXXXX")"
    "${PYTHON:-python3}" -m pip download --quiet --no-deps --no-binary :all: --dest "$tmp_dl" \
        "llama-cpp-python==$version"
    mv "$tmp_dl"/llama_cpp_python-"$version".tar.gz "$sdist"
    rm -rf "$tmp_dl"
fi

if [[ ! -f "$src_dir/CMakeLists.txt" ]]; then
    log "unpacking vendor/llama.cpp"
    rm -rf "$src_dir" && mkdir -p "$src_dir"
    tar -xzf "$sdist" -C "$src_dir" --strip-components=3 \
        "llama_cpp_python-$version/vendor/llama.cpp"
    # The vendored tree carries a submodule .git file pointing nowhere; without it the build
    # records its version as unknown instead of printing git errors.
    rm -f "$src_dir/.git"
fi

build_dir="$cache_dir/build"
log "configuring (cmake Release, CPU only)"
# PREBUILT_UI/BUILD_UI off: otherwise the build tries to download the web UI.
cmake -S "$src_dir" -B "$build_dir" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=ON \
    -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF >&2

log "building llama-server with $jobs jobs"
start=$SECONDS
cmake --build "$build_dir" --target llama-server -j "$jobs" >&2
log "built in $((SECONDS - start)) s"

mkdir -p "$cache_dir/bin"
cp "$build_dir/bin/llama-server" "$binary.tmp"
mv "$binary.tmp" "$binary"
echo "$binary"
