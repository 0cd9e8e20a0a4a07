"""How long a trial takes on the real torch 2.14.1 environment, and where the time goes.

    python3 benchmarks/bench_trial.py [--rounds N]

Runs only where the test suite's torch environment exists (tests/support/torch_env.py:
~/.cache/cudatx-tests/torch-2.14.1, or CUDATX_TEST_TORCH_ENV); it never builds one. Four
commands, interleaved rounds (A B C D A B C D ...), medians:

- `cudatx remove nvidia-cudnn-cu13 --dry-run --trial --json` (the removal trial; issue 25's
  target: within 60 s on 2 cores),
- `cudatx doctor --trial --json` (the doctor trial; target: within 45 s),
- `cudatx remove nvidia-cudnn-cu13 --dry-run` (the model alone, for the trial's extra cost),
- `pip --python ENV check` (a peer a user already runs on the environment).

The trial's own JSON says where its time went: making the shadow, uv in the shadow, and the
imports (before and after together); the rest is the scan and the plan.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import CUDATX, child_env

TARGETS = {"removal trial": 60.0, "doctor trial": 45.0}


def _env_path() -> Path | None:
    default = Path.home() / ".cache" / "cudatx-tests" / "torch-2.14.1"
    path = Path(os.environ.get("CUDATX_TEST_TORCH_ENV") or default)
    return path if (path / ".cudatx-complete").exists() else None


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    venv = _env_path()
    if venv is None:
        print("no torch 2.14.1 environment (tests/support/torch_env.py): nothing measured")
        return 0
    cudatx = [sys.executable, "-c", CUDATX]
    commands = {
        "removal trial": [
            *cudatx, "remove", "nvidia-cudnn-cu13", "--python", str(venv), "--dry-run",
            "--trial", "--json",
        ],
        "doctor trial": [*cudatx, "doctor", "--python", str(venv), "--trial", "--json"],
        "removal, model only": [
            *cudatx, "remove", "nvidia-cudnn-cu13", "--python", str(venv), "--dry-run", "--json"
        ],
        "pip check": [sys.executable, "-m", "pip", "--python", str(venv), "check"],
    }  # fmt: skip
    walls: dict[str, list[float]] = {k: [] for k in commands}
    splits: dict[str, list[tuple[float, float, float]]] = {k: [] for k in TARGETS}
    with tempfile.TemporaryDirectory(prefix="cudatx-bench-trial-") as tmp:
        env = child_env(Path(tmp) / "pycache", Path(tmp) / "cache")
        for argv in commands.values():  # prime: bytecode, the scan cache, the page cache
            _run(argv, env, Path(tmp))
        for _ in range(args.rounds):
            for name, argv in commands.items():
                seconds, out = _run(argv, env, Path(tmp))
                walls[name].append(seconds)
                if name in TARGETS and out:
                    trial = json.loads(out)["trial"]
                    uv = trial.get("uv_seconds", 0.0)
                    judge = trial.get("judge_seconds", trial.get("seconds", 0.0))
                    splits[name].append((trial["shadow_seconds"], uv, judge))
    peer = statistics.median(walls["pip check"])
    print(f"torch 2.14.1 environment at {venv}; {os.cpu_count()} CPUs; {args.rounds} rounds")
    print(f"{'command':<22} {'median s':>9} {'x pip check':>12}  split (shadow / uv / imports)")
    for name, times in walls.items():
        median = statistics.median(times)
        split = ""
        if splits.get(name):
            parts = [statistics.median(p[i] for p in splits[name]) for i in range(3)]
            split = " / ".join(f"{p:.2f}" for p in parts)
        target = f"  (target {TARGETS[name]:.0f} s)" if name in TARGETS else ""
        print(f"{name:<22} {median:>9.2f} {median / peer:>12.1f}  {split}{target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
