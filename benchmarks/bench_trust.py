"""What root's walk of an environment's code costs, beside `pip check` in the same rounds.

    python3 benchmarks/bench_trust.py [--python ENV] [--rounds N]

Before root runs an environment's code (a trial, `trace`, `--verify`), cudatx walks
everything its interpreter could import or run (cudatx.trust.code_writers: the site folders,
the folders `.pth` files add, the standard library, `bin/`) for a file or folder another
user could change (docs/reliability.md, "Whose environment"). Interleaved rounds (walk,
peer, walk, peer ...), medians; ENV defaults to the environment this script runs in.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cudatx.discover.target import find_target
from cudatx.trust import code_writers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.prefix)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    target = find_target(args.python, environ={}, cwd=Path.cwd())
    files = sum(len(names) for folder in target.sys_path for _, _, names in os.walk(folder))
    walks, peers = [], []
    for _ in range(args.rounds):
        start = time.perf_counter()
        found = code_writers(target)
        walks.append(time.perf_counter() - start)
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "pip", "--python", target.python, "check"],
            capture_output=True,
            check=False,
        )
        peers.append(time.perf_counter() - start)
    walk, peer = statistics.median(walks), statistics.median(peers)
    print(f"environment: {target.prefix} ({files:,} files on its sys.path)")
    print(f"  code_writers          {walk:7.3f} s  ({len(found)} found)")
    print(f"  pip --python ENV check {peer:6.3f} s")
    print(f"  ratio                 {walk / peer:7.2f}x  (medians of {args.rounds} rounds)")
    print(f"  load average          {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
