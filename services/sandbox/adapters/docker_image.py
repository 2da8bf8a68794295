"""Builds the registry-free sandbox image and imports it through the Docker API (podman or Docker).

The image holds only symlinks, mount points and a passwd entry for uid 65534 (about 10 kB); the
interpreters come from the host's /usr, mounted read-only at run time (`sandbox.docker.bind_host_usr`).
For production, bake interpreters and packages into a real image instead and set `bind_host_usr: false`.

    python -m services.sandbox.adapters.docker_image [--base-url unix:///run/podman/podman.sock] [--tag IMAGE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import io
import logging
import tarfile
import time

import docker

logger = logging.getLogger(__name__)

DEFAULT_TAG = "localhost/agentcanvas-sandbox:1"
PYTHON_PATH_SLOTS = 8


def build_rootfs_tar() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        def add_dir(path: str, mode: int = 0o755) -> None:
            info = tarfile.TarInfo(path)
            info.type = tarfile.DIRTYPE
            info.mode = mode
            archive.addfile(info)

        def add_link(path: str, target: str) -> None:
            info = tarfile.TarInfo(path)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            archive.addfile(info)

        def add_file(path: str, content: bytes) -> None:
            info = tarfile.TarInfo(path)
            info.size = len(content)
            info.mode = 0o644
            archive.addfile(info, io.BytesIO(content))

        for directory in ("usr", "proc", "dev", "sys", "etc", "opt", "opt/agentcanvas", "opt/agentcanvas/python"):
            add_dir(directory)
        add_dir("tmp", 0o1777)
        add_dir("work", 0o1777)
        for slot in range(PYTHON_PATH_SLOTS):
            add_dir(f"opt/agentcanvas/python/{slot}")
        for link, target in (("bin", "usr/bin"), ("lib", "usr/lib"), ("lib64", "usr/lib64"), ("sbin", "usr/sbin")):
            add_link(link, target)
        add_file("etc/passwd", b"root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
        add_file("etc/group", b"root:x:0:\nnogroup:x:65534:\n")
    return buffer.getvalue()


def import_image(client: docker.DockerClient, tag: str = DEFAULT_TAG) -> str:
    repository, _, version = tag.rpartition(":")
    if not repository:
        repository, version = tag, "latest"
    reply = client.api.import_image_from_data(build_rootfs_tar(), repository=repository, tag=version)
    image_id = ""
    for line in str(reply).splitlines():
        with contextlib.suppress(ValueError):
            image_id = json.loads(line).get("id") or json.loads(line).get("status") or image_id
    # podman's compat import ignores the tag parameter: tag explicitly.
    image = client.images.get(image_id) if image_id.startswith("sha256:") else client.images.get(tag)
    image.tag(repository, version)
    return image.id


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", default="unix:///run/podman/podman.sock")
    parser.add_argument("--tag", default=DEFAULT_TAG)
    args = parser.parse_args(argv)
    client = docker.DockerClient(base_url=args.base_url, version="auto")
    started = time.perf_counter()
    image_id = import_image(client, args.tag)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logger.info("imported %s (%s) in %.2f s", args.tag, image_id, time.perf_counter() - started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
