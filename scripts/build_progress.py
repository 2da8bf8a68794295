"""Progress for a long native build: reads the build's output on stdin, keeps all of it in LOGFILE, and prints a
short line whenever another 10% of the compile steps is done (and at least every 30 s), so a 5-minute pip step
does not look like a hang. Understands Ninja's "[12/140]" and Make's "[ 45%]" step markers.

  pip wheel -v ... 2>&1 | python3 scripts/build_progress.py LOGFILE LABEL
"""

from __future__ import annotations

import re
import sys
import time

NINJA = re.compile(r"^\s*\[(\d+)/(\d+)\]")
MAKE = re.compile(r"^\s*\[\s*(\d+)%\]")
STEP = 10
HEARTBEAT_S = 30.0


def main(logfile: str, label: str) -> int:
    start = last_print = time.monotonic()
    shown = -STEP
    with open(logfile, "w", encoding="utf-8", errors="replace") as log:
        for line in sys.stdin:
            log.write(line)
            log.flush()
            percent = None
            if match := NINJA.match(line):
                done, total = int(match[1]), int(match[2])
                percent = 100 * done // max(total, 1)
                where = f"{done}/{total} steps"
            elif match := MAKE.match(line):
                percent = int(match[1])
                where = f"{percent}%"
            now = time.monotonic()
            elapsed = f"{int(now - start) // 60}m{int(now - start) % 60:02d}s"
            if percent is not None and (percent >= shown + STEP or now - last_print >= HEARTBEAT_S):
                shown = percent - percent % STEP
                last_print = now
                print(f"    {label}: {percent:3d}% ({where}, {elapsed})", file=sys.stderr, flush=True)
            elif percent is None and now - last_print >= HEARTBEAT_S:
                last_print = now
                print(f"    {label}: still working ({elapsed}; full output in {logfile})", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "build"))
