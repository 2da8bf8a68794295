"""CPU accounting from Linux /proc, shared by the benchmarks: per process, and for the whole machine.

Steal time matters on the shared VMs these benchmarks run on: it is CPU time the hypervisor gave to other
guests while ours had work to run. A run with a high steal share measures the host more than our code, and
hurts the side that hands work between threads and processes (a gRPC call wakes several) far more than a
single-process loop, so the benchmarks print it beside their ratios.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (0 when it is gone or this is not Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


class MachineTicks(NamedTuple):
    """Clock ticks of all CPUs since boot: `busy` (everything but idle and iowait, steal included), `steal`
    and `total`."""

    busy: int
    steal: int
    total: int

    def since(self, earlier: MachineTicks) -> MachineTicks:
        return MachineTicks(self.busy - earlier.busy, self.steal - earlier.steal, self.total - earlier.total)

    def plus(self, other: MachineTicks) -> MachineTicks:
        return MachineTicks(self.busy + other.busy, self.steal + other.steal, self.total + other.total)

    @property
    def steal_share(self) -> float:
        return self.steal / self.total if self.total > 0 else 0.0


def machine_ticks() -> MachineTicks:
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
    except OSError:
        return MachineTicks(0, 0, 0)
    # user nice system idle iowait irq softirq steal; guest time is already inside user and nice.
    values = [int(value) for value in first[1:9]]
    total = sum(values)
    return MachineTicks(busy=total - values[3] - values[4], steal=values[7], total=total)
