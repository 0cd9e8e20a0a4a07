"""How fast `cudatx check-requirements` judges a torch requirements file with no environment,
and how many bytes it moves, cold and warm.

    python3 benchmarks/bench_checkreq.py [--rounds N] [--requirements FILE]

The file (default: the seed's, `torch==2.9.1` and `nvidia-cudnn-cu13`) is checked from a
folder with no environment, so the check is the conflict check of the file alone: uv
resolves it (nothing built) and every wheel's RECORD is read. Three states, interleaved:

- cold: an empty uv cache and an empty cudatx cache: uv fetches the index pages and the
  metadata, and cudatx reads each RECORD by HTTP range requests;
- warm (uv cache): uv's cache holds every wheel unpacked (filled once by `uv pip install`
  into a venv under $CUDATX_BENCH_DIR/checkreq, several GB), cudatx's cache is empty: every
  RECORD comes from uv's cache, nothing is transferred by cudatx;
- warm (cudatx cache): an empty uv cache, but cudatx's cache kept from a cold run: the
  RECORDs come from it; uv still fetches the index pages and the metadata.

Bytes are what cudatx itself read over the network (the JSON's `wheels[].transferred`),
beside what the wheels weigh; uv's own traffic for the resolution is not counted. The
resolution alone (`uv pip compile --no-build` with the warm uv cache) is measured too, the
floor under the warm check.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import CUDATX, ROOT, bench_dir, child_env

from tests.support import uv_bin

SEED = "torch==2.9.1\nnvidia-cudnn-cu13\n"
TARGET_WARM_S = 10.0


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int, str]:
    """(wall seconds, exit code, stdout) of one child."""
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, done.returncode, done.stdout


def warm_uv_cache(base: Path, requirements: str) -> Path:
    """uv's cache with every wheel of the file unpacked: `uv pip install` into a venv, once."""
    folder = base / "checkreq"
    cache = folder / "uv-cache"
    mark = folder / ".complete"
    if mark.exists() and mark.read_text() == requirements:
        return cache
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "requirements.txt").write_text(requirements)
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"} | {"UV_CACHE_DIR": str(cache)}
    venv = folder / "venv"
    subprocess.run([uv_bin(), "venv", "-q", "--clear", str(venv)], check=True, env=env)
    subprocess.run(
        [
            uv_bin(),
            "pip",
            "install",
            "-q",
            "--python",
            str(venv),
            "-r",
            str(folder / "requirements.txt"),
        ],
        check=True,
        env=env,
    )
    mark.write_text(requirements)
    return cache


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requirements", type=Path, default=None)
    args = parser.parse_args()
    requirements = args.requirements.read_text() if args.requirements else SEED
    base = bench_dir()
    warm = warm_uv_cache(base, requirements)
    cudatx = [sys.executable, "-c", CUDATX, "check-requirements", "requirements.txt", "--json"]
    walls: dict[str, list[float]] = {}
    moved: dict[str, list[int]] = {}
    sources: dict[str, set[str]] = {}
    codes: dict[str, int] = {}
    weight = 0
    with tempfile.TemporaryDirectory(prefix="cudatx-bench-checkreq-") as tmp:
        work = Path(tmp)
        project = work / "project"
        project.mkdir()
        (project / "requirements.txt").write_text(requirements)
        pycache = work / "pycache"
        primed = work / "cudatx-cache-primed"

        def state(name: str, uv_cache: Path, cudatx_cache: Path) -> None:
            nonlocal weight
            env = child_env(pycache, cudatx_cache) | {"UV_CACHE_DIR": str(uv_cache)}
            wall, code, out = _run(cudatx, env, project)
            (check,) = json.loads(out)["files"]
            walls.setdefault(name, []).append(wall)
            moved.setdefault(name, []).append(sum(w["transferred"] for w in check["wheels"]))
            sources.setdefault(name, set()).update(w["source"] for w in check["wheels"])
            codes[name] = code
            weight = sum(w["size"] or 0 for w in check["wheels"])

        # Prime: bytecode, and cudatx's cache for the third state.
        state("prime", work / "uv-prime", primed)
        for n in range(args.rounds):
            state("cold", work / f"uv-cold-{n}", work / f"cudatx-cold-{n}")
            state("warm (uv cache)", warm, work / f"cudatx-warm-{n}")
            state("warm (cudatx cache)", work / f"uv-cc-{n}", primed)
            env = child_env(pycache, work / "unused") | {"UV_CACHE_DIR": str(warm)}
            compile_argv = [
                uv_bin(),
                "pip",
                "compile",
                "-q",
                "--no-build",
                "--python",
                sys.executable,
                "requirements.txt",
            ]
            wall, code, _ = _run(compile_argv, env, project)
            walls.setdefault("uv pip compile (warm)", []).append(wall)
            codes["uv pip compile (warm)"] = code
    del walls["prime"]
    lines = [
        "cudatx check-requirements, no environment  "
        + time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        f"python {platform.python_version()}, {os.cpu_count()} CPUs, load average "
        + " ".join(f"{x:.2f}" for x in os.getloadavg()),
        f"file: {requirements.strip().replace(chr(10), ', ')}; "
        f"the wheels weigh {weight / 1e9:.2f} GB",
        f"{args.rounds} interleaved rounds, medians",
        f"{'state':<28}{'median s':>10}{'cudatx MB':>12}  {'exit':>4}  RECORDs from",
    ]
    for name, values in walls.items():
        mb = statistics.median(moved[name]) / 1e6 if name in moved else 0.0
        said = ", ".join(sorted(sources.get(name, ()))) or "-"
        lines.append(
            f"{name:<28}{statistics.median(values):>10.2f}{mb:>12.2f}  {codes[name]:>4}  {said}"
        )
    warm_s = statistics.median(walls["warm (uv cache)"])
    met = "met" if warm_s <= TARGET_WARM_S else "NOT MET"
    lines.append(f"target  warm (uv cache) <= {TARGET_WARM_S:.0f} s: {warm_s:.2f} s  {met}")
    cold_mb = statistics.median(moved["cold"]) / 1e6
    lines.append(f"cold: cudatx moved {cold_mb:.2f} MB of {weight / 1e6:.0f} MB of wheels")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    (base / "last-run-checkreq.json").write_text(
        json.dumps({"walls": walls, "moved": moved, "weight": weight, "root": str(ROOT)}, indent=2)
        + "\n"
    )


if __name__ == "__main__":
    main()
