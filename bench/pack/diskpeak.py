#!/usr/bin/env python3
"""diskpeak.py - the peak use of a file system while a command runs.

Usage: bench/pack/diskpeak.py MOUNTPOINT COMMAND [ARG...]

Polls the used bytes of MOUNTPOINT's file system (statvfs) every 2 ms while
COMMAND runs and prints the most it grew by, and by how much it had grown when
COMMAND ended. Give servd-pack build an -o on a file system nothing else writes
to (a tmpfs: mount -t tmpfs -o size=2g tmpfs /mnt/x) to see the room a build
needs there beside its pack. python3 stdlib only.
"""
import os
import subprocess
import sys
import time


def used(mnt):
    s = os.statvfs(mnt)
    return (s.f_blocks - s.f_bfree) * s.f_frsize


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.strip().splitlines()[2])
    mnt, cmd = sys.argv[1], sys.argv[2:]
    base = peak = used(mnt)
    p = subprocess.Popen(cmd)
    while p.poll() is None:
        peak = max(peak, used(mnt))
        time.sleep(0.002)
    final = used(mnt)
    print("exit %d: peak %.1f MB, at the end %.1f MB"
          % (p.returncode, (max(peak, final) - base) / 1e6, (final - base) / 1e6))
    sys.exit(p.returncode)


if __name__ == "__main__":
    main()
