"""Time and memory against the size of one RECORD, beside uv and pip reading the same
environment in the same run (issue 23: a RECORD of 10^6 rows, 40 MB, took `doctor` 20 s and
1 GB and `remove --dry-run` 129 s and 1.56 GB).

    python3 benchmarks/bench_record.py [--rows 62500,125000,250000,1000000] [--rounds N]

For each size: the small venv of tests/support/pure_world.py (real uv, UV_LINK_MODE=copy)
with `pure`'s RECORD grown to that many rows (tests/support/big_record.py, 40 bytes a row,
files that are not there). Measured, cold (no cudatx cache), interleaved: `cudatx doctor`,
`cudatx remove pure --dry-run`, and the peers `uv pip list --python ENV` and
`pip --python ENV check` (both read each distribution's METADATA, not its RECORD: the floor
of reading the environment at all). Wall seconds and the child's
peak RSS (wait4). Above cudatx.reading.MAX_RECORD_ROWS, cudatx refuses at once (exit 5).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import CUDATX, child_env

from tests.support import uv_bin
from tests.support.big_record import grow_record
from tests.support.pure_world import build_pure_wheels, install_pure_world


def _measure(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in MB, exit code) of one child."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - start, usage.ru_maxrss / 1024, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="62500,125000,250000,1000000")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(n) for n in args.rows.split(",")]
    pip = shutil.which("pip") or shutil.which("pip3")
    with tempfile.TemporaryDirectory(prefix="cudatx-bench-record-") as folder:
        base = Path(folder)
        os.environ.setdefault("UV_LINK_MODE", "copy")
        wheels = build_pure_wheels(base / "wheels")
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        print(f"cudatx against one RECORD's rows  {when}")
        print(
            f"python {platform.python_version()}, {os.cpu_count()} CPUs, "
            f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
        )
        print(f"{args.rounds} interleaved rounds, medians; cold (no cudatx cache)")
        print(f"{'rows':>9} {'MB':>6}  {'command':<28} {'s':>7} {'RSS MB':>8} {'exit':>5}")
        for rows in sizes:
            root = base / str(rows)
            root.mkdir()
            world = install_pure_world(wheels, root)
            have = len(world.record.read_text().splitlines())
            size = grow_record(world.record, rows - have)
            venv = os.fspath(world.venv)
            python = os.fspath(world.venv / "bin" / "python")
            env = child_env(base / "pycache", root / "cache")
            commands = {
                "cudatx doctor": [
                    sys.executable,
                    "-c",
                    CUDATX,
                    "doctor",
                    "--python",
                    venv,
                    "--no-cache",
                ],
                "cudatx remove --dry-run": [
                    sys.executable,
                    "-c",
                    CUDATX,
                    "remove",
                    "pure",
                    "--dry-run",
                    "--python",
                    venv,
                    "--no-cache",
                ],
                "uv pip list": [uv_bin(), "pip", "list", "--python", python],
            }
            if pip:
                commands["pip --python ENV check"] = [pip, "--python", python, "check"]
            results: dict[str, list[tuple[float, float, int]]] = {k: [] for k in commands}
            for _ in range(args.rounds):
                for name, argv in commands.items():
                    results[name].append(_measure(argv, env, world.work))
            for name, got in results.items():
                wall = statistics.median(g[0] for g in got)
                rss = statistics.median(g[1] for g in got)
                cells = f"{name:<28} {wall:>7.2f} {rss:>8.0f} {got[-1][2]:>5}"
                print(f"{rows:>9} {size / 1e6:>6.1f}  {cells}")


if __name__ == "__main__":
    main()
