#!/usr/bin/env python3
"""fresh-cache.py FILE...: drops each FILE from the page cache and reads it
back, so that every timed run starts from the same page cache: as a file
just read has it, in large folios that a mapping takes 2 MiB at a time.

Left as it was, the cache of a file read long before can be in small
pieces, and so can that of a file just written in small writes (editcap's
output): mapping the full-packet capture then took `tcpwhy stats` 0.15 s
instead of 0.08 s (2026-11-26, same binary, minutes apart), and a copy of
the snaplen-128 capture just written by editcap 86 ms instead of 79 ms
(3,232 page faults instead of 993). tcptrace, which copies with read(),
is not affected."""
import os
import sys

for path in sys.argv[1:]:
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError as e:
            print(f"fresh-cache: could not drop {path} from the page cache: {e}", file=sys.stderr)
        while os.read(fd, 1 << 20):
            pass
    finally:
        os.close(fd)
