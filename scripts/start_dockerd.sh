#!/usr/bin/env bash
# Makes a Docker daemon available on this machine, idempotently, for the docker launcher tests.
#
# No GPU, no registry, no bridge networking here: dockerd runs with the vfs storage driver
# (works inside containers without overlay support) and without iptables or a bridge
# (containers use the host network). Safe to call when a daemon already answers.
set -euo pipefail

LOG=${DOCKERD_LOG:-/tmp/tune-dockerd.log}
WAIT_S=${DOCKERD_WAIT_S:-60}

if docker info >/dev/null 2>&1; then
    echo "docker daemon already running"
    exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
    echo "installing docker.io (dockerd missing)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq docker.io >/dev/null
fi

if ! pgrep -x dockerd >/dev/null 2>&1; then
    echo "starting dockerd (vfs, no iptables, no bridge); log in $LOG"
    # setsid: the daemon must outlive this script and not receive the caller's Ctrl-C.
    setsid dockerd --storage-driver=vfs --iptables=false --bridge=none >"$LOG" 2>&1 < /dev/null &
fi

for _ in $(seq 1 "$WAIT_S"); do
    if docker info >/dev/null 2>&1; then
        echo "docker daemon ready"
        exit 0
    fi
    sleep 1
done
echo "docker daemon did not answer within ${WAIT_S}s; last log lines:" >&2
tail -n 20 "$LOG" >&2 || true
exit 1
