"""Reads a dead job's output directory from the host without ever following a path the job made.

Every name is opened relative to a directory fd with O_NOFOLLOW, must be a regular file (fstat on the
opened fd, so a swap between check and read is impossible), and is read up to the size cap.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from services.sandbox.core.artifacts import acceptable_name, mime_type
from services.sandbox.core.models import ArtifactFile

logger = logging.getLogger(__name__)


def read_output_dir(directory: Path, max_count: int, max_bytes: int) -> list[ArtifactFile]:
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return []
    found: list[ArtifactFile] = []
    try:
        for name in sorted(os.listdir(dir_fd)):
            if len(found) >= max_count:
                break
            if not acceptable_name(name):
                continue
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
            except OSError:
                continue  # a symlink (ELOOP), a FIFO nobody writes, ...
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    continue
                if info.st_size > max_bytes:
                    head = os.read(fd, 16)
                    found.append(ArtifactFile(name, mime_type(name, head), info.st_size, b"", True))
                    continue
                content = _read_all(fd, max_bytes + 1)
                if len(content) > max_bytes:
                    found.append(ArtifactFile(name, mime_type(name, content[:16]), len(content), b"", True))
                else:
                    found.append(ArtifactFile(name, mime_type(name, content[:16]), len(content), content))
            finally:
                os.close(fd)
    finally:
        os.close(dir_fd)
    return found


def _read_all(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while total < limit:
        chunk = os.read(fd, min(1 << 20, limit - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)
