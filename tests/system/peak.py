"""Peak memory of a command, by the kernel's own count (wait4's ru_maxrss).

The command is started by a fresh, small Python launcher, not by pytest
itself: Linux carries a process's peak RSS across exec (exec_mmap keeps the
old address space's high-water mark in signal->maxrss), and a child forked or
vforked from pytest starts in pytest's address space. Measured from pytest
directly, every command "peaked" at least at pytest's own size: 69 MiB on CI
for a diagnose run that peaks at 31 MiB. The launcher's own size (about
10 MiB) is the floor of what this measures.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

LAUNCHER = """
import os, subprocess, sys
p = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(p.pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss * 1024))
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


def measured(args: list[str]) -> tuple[int, str, str, int]:
    """Runs a command: exit code (128 + signal when killed), stdout, stderr,
    and its peak resident memory in bytes."""
    with tempfile.NamedTemporaryFile("r", suffix=".peak") as peak:
        p = subprocess.run([sys.executable, "-c", LAUNCHER, peak.name, *args], capture_output=True)
        return p.returncode, p.stdout.decode(), p.stderr.decode(), int(peak.read() or 0)
