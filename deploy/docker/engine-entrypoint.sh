#!/bin/sh
# Entrypoint of the sandbox-engine sidecar (prod sandbox pod, inside gVisor):
#   1. start dockerd on a Unix socket shared with the sandbox service (no TCP, no bridge network:
#      jobs run with network_mode=none, and gVisor needs --iptables=false);
#   2. import the job image from the tarball baked into this image (the pod cannot pull);
#   3. stay in the foreground with dockerd, forwarding SIGTERM to it.
set -eu

SOCKET_DIR=${ENGINE_SOCKET_DIR:-/run/docker}
SOCKET="$SOCKET_DIR/docker.sock"
GROUP=${ENGINE_SOCKET_GROUP:-10001}
JOB_IMAGE=${ENGINE_JOB_IMAGE:-agent-canvas/sandbox-job:local}
ROOTFS=${ENGINE_JOB_ROOTFS:-/opt/job-image/rootfs.tar}

mkdir -p "$SOCKET_DIR"
dockerd \
  --host="unix://$SOCKET" \
  --group="$GROUP" \
  --iptables=false \
  --ip6tables=false \
  --bridge=none \
  --data-root=/var/lib/docker &
DOCKERD=$!
trap 'kill -TERM "$DOCKERD" 2>/dev/null; wait "$DOCKERD"; exit 0' TERM INT

tries=0
until docker -H "unix://$SOCKET" version >/dev/null 2>&1; do
  tries=$((tries + 1))
  if [ "$tries" -gt 120 ] || ! kill -0 "$DOCKERD" 2>/dev/null; then
    echo "engine-entrypoint: dockerd did not come up" >&2
    exit 1
  fi
  sleep 0.5
done

if ! docker -H "unix://$SOCKET" image inspect "$JOB_IMAGE" >/dev/null 2>&1; then
  docker -H "unix://$SOCKET" import \
    --change 'USER 65534:65534' \
    --change 'WORKDIR /tmp' \
    --change 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV HOME=/tmp' \
    --change 'ENV MPLBACKEND=Agg' \
    "$ROOTFS" "$JOB_IMAGE" >/dev/null
  echo "engine-entrypoint: imported $JOB_IMAGE"
fi

wait "$DOCKERD"
