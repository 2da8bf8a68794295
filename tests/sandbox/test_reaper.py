"""The reaper removes what a dead server left behind (cgroups, job directories, containers) and
leaves the live server's workers alone."""

from __future__ import annotations

import os
import socket

from services.sandbox.adapters.docker_backend import LABEL, OWNER_LABEL


def _dead_pid() -> int:
    pid = 4_000_000
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        pid += 1


async def test_reaper_removes_a_dead_servers_leftovers(sandbox):
    backend = sandbox.backend
    stale = f"sbx-{_dead_pid()}-deadbeef0001"
    if sandbox.name == "local":
        backend.layout.create(stale)
        (backend.jobs_dir / stale).mkdir()
        if backend._mount_work:  # a dead server's job directory is still a mounted tmpfs
            from services.sandbox.adapters.local import mount_work_tmpfs

            mount_work_tmpfs(backend.jobs_dir / stale, 1 << 20)
        (backend.jobs_dir / stale / "left.txt").write_text("x")
    else:
        backend.client.containers.create(backend.docker.image, ["/usr/bin/sleep", "infinity"], name=stale,
                                         labels={LABEL: "1", OWNER_LABEL: f"{socket.gethostname()}:{stale.split('-')[1]}"})
    # Only idle workers of full pools are compared: a worker being created is in _live before its
    # container exists, and one retired by an earlier job stays in _live until its removal ends, so
    # either would race a container listing. Nothing but the reaper could remove an idle worker.
    for pool in backend.pools.values():
        await pool.wait_full()
    idle_workers = {worker.name for pool in backend.pools.values() for worker in pool.idle_workers()}
    removed = await backend.reap()
    assert removed >= 1
    if sandbox.name == "local":
        present = set(backend.layout.children())
        assert not (backend.jobs_dir / stale).exists()
        assert str(backend.jobs_dir / stale) not in open("/proc/self/mounts").read()
    else:
        present = {n.lstrip("/") for c in backend.api.containers(all=True, filters={"label": LABEL}) for n in c["Names"]}
    assert stale not in present
    if sandbox.name == "local":
        # The reaper's own rule, checked directly: workers torn down in the background (cgroup removed
        # just before they leave _live) would make a comparison of directory listings racy.
        assert not any(backend._stale(name) for name in set(backend._live))
    else:
        assert idle_workers and idle_workers <= present  # the live server's idle workers are untouched
    for pool in backend.pools.values():
        await pool.wait_full()
    outcome = await sandbox.run("print('after reap')")
    assert outcome.stdout == "after reap\n"
