"""Starts and verifies podman's Docker-compatible API socket (for CI, tests and developer machines).

    python -m services.sandbox.adapters.podman_service [--socket /run/podman/podman.sock] [--image TAG]

Starts `podman system service --time=0 unix://SOCKET` in the background (its own session, so it
outlives this command) unless the socket already answers, waits for /_ping, and imports the sandbox
image when it is missing. podman runs rootful with runc, the cgroupfs manager and the file events
logger, which works inside containers on cgroup v1 hosts (crun does not support hybrid cgroups).
Needs: apt-get install -y podman runc.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import subprocess
import time
from pathlib import Path

import docker
import docker.errors

from services.sandbox.adapters.docker_image import DEFAULT_TAG, import_image

logger = logging.getLogger(__name__)

DEFAULT_SOCKET = "/run/podman/podman.sock"
CONTAINERS_CONF = """\
[containers]
# No CAP_SYS_RESOURCE inside CI containers: podman must not try to raise these above the host's.
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
"""


class PodmanUnavailableError(RuntimeError):
    """podman is not installed or its API socket does not come up."""


def socket_answers(base_url: str) -> bool:
    try:
        client = docker.DockerClient(base_url=base_url, version="auto", timeout=5)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (docker.errors.DockerException, OSError):
        return False


def start_service(socket_path: str = DEFAULT_SOCKET, state_dir: str | None = None, timeout_s: float = 30.0) -> subprocess.Popen[bytes] | None:
    """Starts the service unless the socket answers already; returns the process it started (or None)."""
    base_url = f"unix://{socket_path}"
    if socket_answers(base_url):
        return None
    podman = shutil.which("podman")
    if podman is None:
        raise PodmanUnavailableError("podman is not installed (apt-get install -y podman runc)")
    state = Path(state_dir or Path(socket_path).parent)
    state.mkdir(parents=True, exist_ok=True)
    conf = state / "containers.conf"
    conf.write_text(CONTAINERS_CONF)
    Path(socket_path).parent.mkdir(parents=True, exist_ok=True)
    log = open(state / "podman-service.log", "ab")
    env = {**os.environ, "CONTAINERS_CONF": str(conf)}
    # conmon writes marker files (e.g. `oom`) into its working directory: keep them in the state dir.
    process = subprocess.Popen([podman, "system", "service", "--time=0", base_url], env=env, stdout=log, cwd=state,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise PodmanUnavailableError(f"podman system service exited with {process.returncode}; see {state}/podman-service.log")
        if socket_answers(base_url):
            return process
        time.sleep(0.05)
    process.kill()
    raise PodmanUnavailableError(f"podman socket {socket_path} did not answer within {timeout_s:.0f} s")


def ensure_image(base_url: str, tag: str = DEFAULT_TAG) -> str:
    client = docker.DockerClient(base_url=base_url, version="auto")
    try:
        try:
            return client.images.get(tag).id
        except docker.errors.ImageNotFound:
            return import_image(client, tag)
    finally:
        client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--socket", default=DEFAULT_SOCKET)
    parser.add_argument("--image", default=DEFAULT_TAG)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    started = start_service(args.socket)
    logger.info("podman API %s at unix://%s", "started" if started else "already running", args.socket)
    began = time.perf_counter()
    image_id = ensure_image(f"unix://{args.socket}", args.image)
    logger.info("image %s ready (%s) in %.2f s", args.image, image_id, time.perf_counter() - began)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
