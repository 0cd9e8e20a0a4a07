"""How fast cudatx is, against the tools a user already runs, in one interleaved run.

    PYTHONPATH=. python3 benchmarks/bench.py [--rounds N] [--scale-rounds N] [--only torch|scale]

Environments (built once, kept under $CUDATX_BENCH_DIR, default ~/.cache/cudatx-bench):
- torch: a hard-linked copy of the suite's real torch 2.14.1 environment
  (tests/support/torch_env.py, `pip install torch==2.14.1`) with `six` added by uv, so that
  `cudatx remove six --dry-run` has something to plan;
- scale-N for N in 250, 500, 1000, 2000, 5000: N real ELF objects compiled with cc (chains of nine
  libraries, each needing the one before it through RUNPATH $ORIGIN, and one extension module
  per chain that needs the chain through RPATH $ORIGIN/lib), one wheel per chain with RECORD,
  installed by uv; plus one pure-Python wheel `bench-pure`.

Every command runs as a child process: `python -m cudatx` from this checkout, `python -m pip`
and `ldd` as they are on this machine, uv from the `uv` package. All of them with bytecode
written to (and read from) a temporary PYTHONPYCACHEPREFIX, primed once, as an installed
tool has its .pyc files. Rounds are interleaved (A B C ... A B C ...), medians reported, each
ratio against a peer measured in the same rounds. Peak memory is each child's own maxrss
from wait4(2), measured in a separate run of each command alone. cudatx's cache lives in a
temporary CUDATX_CACHE_DIR: warm = after one priming run, cold = --no-cache.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import (  # noqa: E402
    build_wheel,
    compile_extension,
    compile_lib,
    ext_suffix,
    make_venv,
    uv_bin,
    uv_install,
)

SIZES = (250, 500, 1000, 2000, 5000)
CHAIN = 10  # ELF objects per package: nine libraries and one extension module
_ELF_MAGIC = b"\x7fELF"


@dataclass(frozen=True)
class Measured:
    """Walls of every interleaved round, and each command's peak RSS and exit code."""

    walls: dict[str, list[float]]
    peaks: dict[str, int]  # kB
    codes: dict[str, int]

    def medians(self) -> dict[str, float]:
        return {key: statistics.median(walls) for key, walls in self.walls.items()}

    def rounds(self) -> int:
        return len(next(iter(self.walls.values())))


@dataclass(frozen=True)
class Result:
    wall: float  # seconds
    maxrss_kb: int
    code: int


def run(argv: Sequence[str], env: dict[str, str], cwd: Path) -> Result:
    """One child: wall time, and its own peak RSS as wait4(2) reports it."""
    start = time.perf_counter()
    child = subprocess.Popen(
        argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    return Result(wall, usage.ru_maxrss, child.returncode)


# -- environments ---------------------------------------------------------------------------


def bench_dir() -> Path:
    default = Path.home() / ".cache" / "cudatx-bench"
    path = Path(os.environ.get("CUDATX_BENCH_DIR", default))
    path.mkdir(parents=True, exist_ok=True)
    return path


def torch_env(base: Path) -> Path:
    """The suite's torch 2.14.1 environment, copied (hard links) with six added."""
    from tests.support.torch_env import copy_env, download_wheels
    from tests.support.torch_env import torch_env as pristine_env

    folder = base / "torch"
    done = folder / ".complete"
    if done.exists():
        return folder / "env"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    env = copy_env(pristine_env(), folder)
    six = download_wheels(["six"], folder / "wheels")
    uv_install(env, six, link_mode="copy")
    done.write_text("torch 2.14.1 + six\n")
    return env


def _chain(build: Path, index: int) -> Path:
    """Package bench-NNNN: nine libraries in a RUNPATH chain and an extension; its wheel."""
    name = f"bench_{index:04d}"
    wheel_dir = build / "wheels"
    found = sorted(wheel_dir.glob(f"{name}-1.0-*.whl"))
    if found:
        return found[0]
    folder = build / "objects" / name
    libs: list[Path] = []
    for link in range(CHAIN - 1):
        soname = f"libbench{index:04d}_{link}.so.1"
        libs.append(
            compile_lib(folder / "lib" / soname, soname=soname, needed=libs[-1:], runpath="$ORIGIN")
        )
    ext = compile_extension(folder, "_ext", needed=libs[-1:], rpath="$ORIGIN/lib")
    files: dict[str, bytes | Path] = {f"{name}/__init__.py": b""}
    files.update({f"{name}/lib/{lib.name}": lib for lib in libs})
    files[f"{name}/_ext{ext_suffix()}"] = ext
    return build_wheel(wheel_dir, name, "1.0", files, tag="py3-none-linux_x86_64")


def scale_env(base: Path, size: int) -> Path:
    folder = base / f"scale-{size}"
    done = folder / ".complete"
    if done.exists():
        return folder / "venv"
    shutil.rmtree(folder, ignore_errors=True)
    build = base / "scale-build"
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        wheels = list(pool.map(lambda i: _chain(build, i), range(size // CHAIN)))
    pure = build_wheel(build / "wheels", "bench-pure", "1.0", {"bench_pure.py": b"VALUE = 1\n"})
    venv = make_venv(folder / "venv")
    uv_install(venv, [*wheels, pure])
    done.write_text(f"{size} ELF objects\n")
    return venv


def elf_files(env: Path) -> list[str]:
    out = []
    for folder, _, files in os.walk(env):
        for name in files:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                continue
            try:
                with open(path, "rb") as stream:
                    if stream.read(4) == _ELF_MAGIC:
                        out.append(path)
            except OSError:
                continue
    return sorted(out)


# -- measuring ------------------------------------------------------------------------------


# cudatx from this checkout, as `python -m cudatx` runs it. Not through PYTHONPATH: pip
# passes that on to the environment it checks, where the checkout's cudatx.egg-info then
# counts as an installed distribution (whose requirements are not met there).
CUDATX = (
    f"import runpy, sys; sys.path.insert(0, {str(ROOT)!r}); "
    "runpy.run_module('cudatx', run_name='__main__', alter_sys=True)"
)


def child_env(pycache: Path, cache: Path) -> dict[str, str]:
    hidden = (
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "LD_LIBRARY_PATH",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONPATH",
    )
    env = {k: v for k, v in os.environ.items() if k not in hidden}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    env["CUDATX_CACHE_DIR"] = str(cache)
    return env


def measure(
    commands: dict[str, list[str]], env: dict[str, str], cwd: Path, rounds: int
) -> Measured:
    """Interleaved rounds of every command (walls), then each alone once (peak RSS)."""
    for argv in commands.values():  # prime: bytecode, the cache, the page cache
        run(argv, env, cwd)
    walls: dict[str, list[float]] = {k: [] for k in commands}
    codes: dict[str, int] = {}
    for _ in range(rounds):
        for key, argv in commands.items():
            result = run(argv, env, cwd)
            walls[key].append(result.wall)
            codes[key] = result.code
    peaks = {key: run(argv, env, cwd).maxrss_kb for key, argv in commands.items()}
    return Measured(walls, peaks, codes)


# The CUDA 12 twins of the four CUDA 13 wheels torch 2.14.1 installs that share their paths,
# as a contaminated environment has them over the CUDA 13 ones (from the package index).
CU12_FOUR = [
    "nvidia-cudnn-cu12==9.10.2.21",
    "nvidia-nccl-cu12==2.27.5",
    "nvidia-cusparselt-cu12==0.7.1",
    "nvidia-nvshmem-cu12==3.3.20",
]


def contaminated_env(base: Path) -> Path:
    """The torch environment with the CUDA 12 four installed over its CUDA 13 ones."""
    from tests.support.torch_env import copy_env, download_wheels

    folder = base / "contaminated"
    done = folder / ".complete"
    if done.exists():
        return folder / "env"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    env = copy_env(torch_env(base), folder)
    wheels = download_wheels(CU12_FOUR, folder / "wheels")
    uv_install(env, wheels, link_mode="copy")
    done.write_text("torch 2.14.1 + six + " + " ".join(CU12_FOUR) + "\n")
    return env


# The hook's file (issue 36): torch and a CUDA 13 wheel, as a project pins them.
HOOK_FILE = "torch==2.14.1\nnvidia-cudnn-cu13==9.24.0.43\n"


def torch_bench(base: Path, work: Path, rounds: int) -> tuple[int, Measured]:
    env_path = torch_env(base)
    twins = contaminated_env(base)
    py = sys.executable
    env = child_env(work / "pycache", work / "cache-torch")
    elfs = elf_files(env_path)
    hook = work / "hook" / "requirements.txt"
    hook.parent.mkdir()
    hook.write_text(HOOK_FILE)
    cudatx = [py, "-c", CUDATX]
    target = ["--python", str(env_path)]
    commands = {
        "cudatx remove six --dry-run (warm)": [*cudatx, "remove", "six", "--dry-run", *target],
        "cudatx remove six --dry-run (cold)": [
            *cudatx,
            "remove",
            "six",
            "--dry-run",
            "--no-cache",
            *target,
        ],
        "cudatx doctor (warm)": [*cudatx, "doctor", *target],
        "cudatx doctor (cold)": [*cudatx, "doctor", "--no-cache", *target],
        "pip --python ENV check": [py, "-m", "pip", "--python", str(env_path), "check"],
        "cudatx remove six --dry-run (cold, cu12 over)": [
            *cudatx,
            "remove",
            "six",
            "--dry-run",
            "--no-cache",
            "--python",
            str(twins),
        ],
        "cudatx remove six --dry-run --json (warm, cu12 over)": [
            *cudatx,
            *("remove", "six", "--dry-run", "--json", "--python", str(twins)),
        ],
        "cudatx remove six --dry-run --json (cold, cu12 over)": [
            *cudatx,
            *("remove", "six", "--dry-run", "--json", "--no-cache", "--python", str(twins)),
        ],
        "cudatx doctor (warm, cu12 over)": [*cudatx, "doctor", "--python", str(twins)],
        "cudatx doctor (cold, cu12 over)": [
            *cudatx,
            "doctor",
            "--no-cache",
            "--python",
            str(twins),
        ],
        "pip --python ENV check (cu12 over)": [py, "-m", "pip", "--python", str(twins), "check"],
        "cudatx remove six --dry-run --trial": [
            *cudatx,
            "remove",
            "six",
            "--dry-run",
            "--trial",
            *target,
        ],
        # The hook on CI: no environment (the work folder has no .venv and VIRTUAL_ENV is
        # unset), the file alone, against `uv pip compile` of the same file.
        "cudatx check-requirements FILE (no env)": [*cudatx, "check-requirements", str(hook)],
        "uv pip compile FILE": [uv_bin(), "pip", "compile", "-q", str(hook)],
        "uv pip list --python ENV": [uv_bin(), "pip", "list", "--python", str(env_path)],
        f"ldd over every ELF ({len(elfs)})": ["ldd", *elfs],
        "cudatx --version": [*cudatx, "--version"],
        "pip --version": [py, "-m", "pip", "--version"],
    }
    return len(elfs), measure(commands, env, work, rounds)


def scale_bench(base: Path, work: Path, rounds: int) -> Measured:
    py = sys.executable
    env = child_env(work / "pycache", work / "cache-scale")
    commands: dict[str, list[str]] = {}
    for size in SIZES:
        venv = scale_env(base, size)
        plan = [py, "-c", CUDATX, "remove", "bench-0000", "--dry-run", "--python", str(venv)]
        commands[f"{size} warm"] = plan
        commands[f"{size} cold"] = [*plan, "--no-cache"]
    return measure(commands, env, work, rounds)


# -- the report -----------------------------------------------------------------------------


def _row(cells: Sequence[str], widths: Sequence[int]) -> str:
    pairs = enumerate(zip(cells, widths, strict=True))
    return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in pairs)


def report(torch: tuple[int, Measured] | None, scale: Measured | None) -> str:
    lines = [
        f"cudatx benchmark  {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
    ]
    if torch is not None:
        elf_objects, measured = torch
        peaks, codes, median = measured.peaks, measured.codes, measured.medians()
        check = median["pip --python ENV check"]
        version = median["pip --version"]
        lines += [
            "",
            f"torch 2.14.1 environment ({elf_objects} ELF objects), "
            f"{measured.rounds()} interleaved rounds, medians",
        ]
        widths = (42, 9, 12, 10, 5)
        lines.append(_row(("command", "median s", "ratio", "peak MB", "exit"), widths))
        twins = median["pip --python ENV check (cu12 over)"]
        compile_ = median["uv pip compile FILE"]
        for key, value in median.items():
            peer = (
                version
                if "version" in key
                else compile_
                if "check-requirements" in key or "compile" in key
                else twins
                if "cu12 over" in key
                else check
            )
            cells = (key, f"{value:.3f}", f"{value / peer:.2f}x", f"{peaks[key] / 1024:.0f}")
            lines.append(_row((*cells, str(codes[key])), widths))
        lines.append(
            "ratio: to `pip --python ENV check` of the same environment; --version lines to "
            "`pip --version`; check-requirements to `uv pip compile` of the same file; "
            "cu12 over: torch 2.14.1 with the CUDA 12 cuDNN, NCCL, "
            "cuSPARSELt and NVSHMEM installed over its CUDA 13 ones"
        )
        warm = median["cudatx remove six --dry-run (warm)"] / check
        cold = median["cudatx remove six --dry-run (cold)"] / check
        ver = median["cudatx --version"] / version
        peak = (
            max(
                peaks["cudatx remove six --dry-run (cold)"],
                peaks["cudatx remove six --dry-run (cold, cu12 over)"],
            )
            / 1024
        )
        over = median["cudatx remove six --dry-run (cold, cu12 over)"] / twins
        # The targets: a cold plan on the contaminated environment as fast as pip's check
        # of it, with the symbol checks in every plan and doctor.
        lines += [
            f"target  cold remove six, cu12 over, <= 1.0x pip check: {over:.2f}x  "
            f"{'met' if over <= 1.0 else 'NOT met'}",
            "",
            f"target  warm remove six --dry-run <= 0.3x pip check: {warm:.2f}x  "
            f"{'met' if warm <= 0.3 else 'NOT met'}",
            f"target  cold remove six --dry-run <= 1.0x pip check: {cold:.2f}x  "
            f"{'met' if cold <= 1.0 else 'NOT met'}",
            f"target  cudatx --version <= 0.3x pip --version:     {ver:.2f}x  "
            f"{'met' if ver <= 0.3 else 'NOT met'}",
            f"target  peak memory of a cold plan < 250 MB:        {peak:.0f} MB  "
            f"{'met' if peak < 250 else 'NOT met'}",
            "",
        ]
        # Issue 36's goals, on the contaminated environment users bring to cudatx.
        for key, goal in (
            ("cudatx remove six --dry-run --json (warm, cu12 over)", 0.25),
            ("cudatx remove six --dry-run --json (cold, cu12 over)", 0.6),
            ("cudatx doctor (warm, cu12 over)", 0.3),
            ("cudatx doctor (cold, cu12 over)", 1.0),
        ):
            got = median[key] / twins
            lines.append(
                f"goal    {key.removeprefix('cudatx ')} <= {goal}x pip check: {got:.2f}x  "
                f"{'met' if got <= goal else 'NOT met'}"
            )
        hook_ratio = median["cudatx check-requirements FILE (no env)"] / compile_
        trial = median["cudatx remove six --dry-run --trial"] / check
        lines += [
            f"goal    check-requirements FILE (no env) <= 1.5x uv pip compile: {hook_ratio:.2f}x  "
            f"{'met' if hook_ratio <= 1.5 else 'NOT met'}",
            f"goal    remove six --dry-run --trial <= 3x pip check: {trial:.2f}x  "
            f"{'met' if trial <= 3 else 'NOT met'}",
        ]
    if scale is not None:
        peaks, median = scale.peaks, scale.medians()
        lines += [
            "",
            f"scaling: cudatx remove bench-0000 --dry-run, {scale.rounds()} interleaved rounds, "
            "medians",
        ]
        columns = (12, 9, 9, 13, 13, 9, 9)
        head = ("ELF objects", "warm s", "cold s", "warm ms/ELF", "cold ms/ELF", "warm MB")
        lines.append(_row((*head, "cold MB"), columns))
        for size in SIZES:
            w, c = median[f"{size} warm"], median[f"{size} cold"]
            lines.append(
                _row(
                    (
                        str(size),
                        f"{w:.3f}",
                        f"{c:.3f}",
                        f"{w / size * 1000:.3f}",
                        f"{c / size * 1000:.3f}",
                        f"{peaks[f'{size} warm'] / 1024:.0f}",
                        f"{peaks[f'{size} cold'] / 1024:.0f}",
                    ),
                    columns,
                )
            )
        small, large = SIZES[0], SIZES[-1]
        for kind in ("warm", "cold"):
            per_large = median[f"{large} {kind}"] / large
            per_small = median[f"{small} {kind}"] / small
            # Linear growth: the time per ELF object at 5000 within 1.5x of that at 250.
            # With a fixed start-up cost, it is well under 1x; above 1.5x means superlinear.
            ratio = per_large / per_small
            marginal = (median[f"{large} {kind}"] - median[f"{small} {kind}"]) / (large - small)
            lines.append(
                f"target  {kind} time per ELF at {large} / at {small}: {ratio:.2f}x  "
                f"{'met' if ratio <= 1.5 else 'NOT met'}  "
                f"(marginal {marginal * 1000:.3f} ms per ELF from {small} to {large})"
            )
        increments = [
            (median[f"{b} cold"] - median[f"{a} cold"]) / (b - a) * 1000
            for a, b in itertools.pairwise(SIZES)
        ]
        lines.append(
            "cold marginal ms per ELF between sizes: "
            + ", ".join(f"{x:.3f}" for x in increments)
            + " (flat = linear)"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds (torch)")
    parser.add_argument("--scale-rounds", type=int, default=5, help="rounds (scaling)")
    parser.add_argument("--only", choices=("torch", "scale"), default=None)
    args = parser.parse_args()
    base = bench_dir()
    with tempfile.TemporaryDirectory(prefix="cudatx-bench-") as tmp:
        work = Path(tmp)
        torch = scale = None
        if args.only in (None, "torch"):
            torch = torch_bench(base, work, args.rounds)
        if args.only in (None, "scale"):
            scale = scale_bench(base, work, args.scale_rounds)
    text = report(torch, scale)
    print(text, end="")
    raw = {
        "torch": None if torch is None else {"elf_objects": torch[0], **asdict(torch[1])},
        "scale": None if scale is None else asdict(scale),
    }
    (base / "last-run.json").write_text(json.dumps(raw, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
