#!/usr/bin/env bash
# Builds the `tune-sim:latest` image: an empty rootfs that runs the host's Python and project.
#
# No registry is reachable here, so the image is made with `docker import` from a tarball of a
# bare merged-/usr rootfs (lib -> usr/lib, lib64 -> usr/lib64, bin -> usr/bin). Everything it
# runs comes from read-only bind mounts at run time: the host's /usr, the Python installation
# (same path as on the host) and the project (see search_spaces/sim_docker.yaml). Copying them
# into the image instead would cost a full copy per container with the vfs storage driver.
#
# Usage: scripts/make_sim_image.sh [--force] [IMAGE]   (idempotent without --force)
set -euo pipefail
# shellcheck source=scripts/_bare_rootfs.sh
source "$(dirname "$0")/_bare_rootfs.sh"

FORCE=0
if [[ "${1:-}" == "--force" ]]; then FORCE=1; shift; fi
IMAGE=${1:-tune-sim:latest}
PYTHON=${PYTHON:-python3}

if [[ $FORCE == 0 ]] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
    echo "$IMAGE already present"
    exit 0
fi

PREFIX=$("$PYTHON" -c 'import sys; print(sys.base_prefix)')
ROOT=$(mktemp -d)
trap 'rm -rf "$ROOT"' EXIT
bare_rootfs "$ROOT" "$PREFIX" opt/tune

tar -C "$ROOT" -c . | docker import \
    --change "ENV PATH=$PREFIX/bin:/usr/local/bin:/usr/bin:/bin" \
    --change "ENV PYTHONPATH=/opt/tune" \
    --change "ENV PYTHONDONTWRITEBYTECODE=1" \
    --change "ENV PYTHONUNBUFFERED=1" \
    --change "WORKDIR /opt/tune" \
    --change "LABEL tune.python_prefix=$PREFIX" \
    - "$IMAGE" >/dev/null
echo "built $IMAGE (mount /usr, $PREFIX and the project at /opt/tune read-only to run it)"
