"""The chaos suite's short variant (bench/chaos): every fault once, under a light load, on the suite's own
PostgreSQL and Redis (never the machine's shared ones). It asserts what must hold whatever the timing: no run is
lost, no client is shown text twice, and every FAILED run carries a typed reason. No timing is asserted."""

from __future__ import annotations

import glob
import shutil

import pytest

from bench.chaos.__main__ import run_suite
from bench.chaos.suite import FAULTS

MISSING = [name for name, found in (("PostgreSQL server binaries", glob.glob("/usr/lib/postgresql/*/bin/initdb")),
                                     ("redis-server", shutil.which("redis-server")), ("bwrap", shutil.which("bwrap")))
           if not found]


@pytest.mark.skipif(bool(MISSING), reason=f"needs {', '.join(MISSING)} (scripts/test.sh installs them)")
async def test_every_fault_loses_no_run_and_repeats_no_text():
    lines: list[dict] = []
    results = await run_suite(injections=1, clients=2, short=True, emit=lines.append)
    assert [line["fault"] for line in results] == [fault.name for fault in FAULTS]
    for line in results:
        assert line["runs_started"] > 0, line
        assert line["lost"] == 0 and line["duplicated_deltas"] == 0, line
        assert "(no reason)" not in line["failed_by_reason"], line
        assert line["succeeded"] + line["failed"] + line["cancelled"] == line["runs_started"], line
