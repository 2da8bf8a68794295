"""cgroups for local jobs: detect v1 or v2 at start-up, one cgroup set per worker, a reaper.

v1 (hybrid hosts such as the CI machine): memory (+memsw, so swap cannot dodge the limit) under the
server's own memory cgroup, pids and cpu under the server's own cgroups of those hierarchies. v2: one
cgroup per worker under a delegated subtree with memory.max, memory.swap.max=0, pids.max, cpu.max.

Names are `sbx-<server pid>-<worker id>`, so a reaper can tell leftovers of dead servers from the
live workers of a concurrent server on the same host.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

ROOT = Path("/sys/fs/cgroup")
PARENT_NAME = "agentcanvas-sandbox"
CPU_PERIOD_US = 100_000


class CgroupUnavailableError(RuntimeError):
    """No writable cgroup hierarchy with the controllers the sandbox needs."""


def _own_paths() -> dict[str, str]:
    """controller -> this process's cgroup path ("" key for the v2 unified path)."""
    paths: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def _write(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


@dataclass(frozen=True)
class CgroupLayout:
    """Where worker cgroups go. `version` is 1 or 2; `parents` maps controller name -> parent dir."""

    version: int
    parents: dict[str, Path]

    @classmethod
    def detect(cls) -> "CgroupLayout":
        own = _own_paths()
        if "memory" in own and (ROOT / "memory").is_dir():
            parents = {}
            for controller in ("memory", "pids", "cpu"):
                mount = ROOT / controller
                if controller not in own or not mount.is_dir():
                    raise CgroupUnavailableError(f"cgroup v1 controller {controller!r} is not mounted")
                parents[controller] = mount / own[controller].lstrip("/") / PARENT_NAME
            if not (parents["memory"].parent / "memory.memsw.limit_in_bytes").exists():
                raise CgroupUnavailableError("cgroup v1 swap accounting (memory.memsw.*) is off; boot with swapaccount=1")
            layout = cls(1, parents)
        elif (ROOT / "cgroup.controllers").exists():
            base = ROOT / own.get("", "/").lstrip("/")
            available = set((base / "cgroup.controllers").read_text().split())
            missing = {"memory", "pids", "cpu"} - available
            if missing:
                raise CgroupUnavailableError(f"cgroup v2 controllers {sorted(missing)} are not delegated to {base}")
            layout = cls(2, {"unified": base / PARENT_NAME})
        else:
            raise CgroupUnavailableError("no cgroup v1 memory hierarchy and no cgroup v2 mount found")
        layout._ensure_parents()
        return layout

    def _ensure_parents(self) -> None:
        try:
            for parent in self.parents.values():
                parent.mkdir(exist_ok=True)
            if self.version == 2:
                parent = self.parents["unified"]
                _write(parent / "cgroup.subtree_control", "+memory +pids +cpu")
        except OSError as exc:
            raise CgroupUnavailableError(f"cannot create the sandbox cgroups: {exc}") from exc

    def create(self, name: str) -> "JobCgroup":
        dirs = {controller: parent / name for controller, parent in self.parents.items()}
        for directory in dirs.values():
            directory.mkdir()
        return JobCgroup(self.version, dirs)

    def children(self) -> list[str]:
        names: set[str] = set()
        for parent in self.parents.values():
            if parent.is_dir():
                names.update(entry.name for entry in parent.iterdir() if entry.is_dir() and entry.name.startswith("sbx-"))
        return sorted(names)

    def attach(self, name: str) -> "JobCgroup":
        return JobCgroup(self.version, {controller: parent / name for controller, parent in self.parents.items()})


@dataclass(frozen=True)
class JobCgroup:
    version: int
    dirs: dict[str, Path]

    def procs_files(self) -> list[str]:
        """cgroup.procs files a launcher writes its own pid to before exec'ing the sandbox."""
        return [str(directory / "cgroup.procs") for directory in self.dirs.values()]

    def set_limits(self, memory_bytes: int, pids: int, cpu_cores: float) -> None:
        quota = max(1000, int(cpu_cores * CPU_PERIOD_US))
        if self.version == 1:
            memory = self.dirs["memory"]
            current_memsw = int((memory / "memory.memsw.limit_in_bytes").read_text())
            # memory.limit <= memory.memsw.limit must hold after each write.
            order = ("memory.memsw.limit_in_bytes", "memory.limit_in_bytes")
            if memory_bytes < current_memsw:
                order = order[::-1]
            for name in order:
                _write(memory / name, str(memory_bytes))
            _write(self.dirs["pids"] / "pids.max", str(pids))
            _write(self.dirs["cpu"] / "cpu.cfs_period_us", str(CPU_PERIOD_US))
            _write(self.dirs["cpu"] / "cpu.cfs_quota_us", str(quota))
        else:
            unified = self.dirs["unified"]
            _write(unified / "memory.max", str(memory_bytes))
            _write(unified / "memory.swap.max", "0")
            _write(unified / "pids.max", str(pids))
            _write(unified / "cpu.max", f"{quota} {CPU_PERIOD_US}")

    def oom_kills(self) -> int:
        try:
            if self.version == 1:
                text = (self.dirs["memory"] / "memory.oom_control").read_text()
            else:
                text = (self.dirs["unified"] / "memory.events").read_text()
        except OSError:
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def pids(self) -> list[int]:
        found: set[int] = set()
        for directory in self.dirs.values():
            try:
                found.update(int(p) for p in (directory / "cgroup.procs").read_text().split())
            except OSError:
                continue
        return sorted(found)

    def kill_all(self) -> None:
        if self.version == 2:
            try:
                _write(self.dirs["unified"] / "cgroup.kill", "1")
                return
            except OSError:
                pass
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue

    def remove(self, attempts: int = 50) -> bool:
        """Kills what is left and removes the directories; False when something stayed (the reaper retries)."""
        for attempt in range(attempts):
            self.kill_all()
            remaining = False
            for directory in self.dirs.values():
                try:
                    directory.rmdir()
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    if exc.errno not in (errno.EBUSY, errno.ENOTEMPTY):
                        raise
                    remaining = True
            if not remaining:
                return True
            time.sleep(0.002 * (attempt + 1))  # dying tasks leave the cgroup within milliseconds
        return False


def owner_alive(name: str) -> bool:
    """`sbx-<pid>-<id>`: is the server that made it still running?"""
    parts = name.split("-")
    if len(parts) < 3 or not parts[1].isdigit():
        return False
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
