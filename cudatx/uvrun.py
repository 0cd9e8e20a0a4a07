"""uv, run as a program: cudatx never reimplements installing (design.md section 4)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence

from cudatx.errors import CudatxError, ExitCode, UsageError


class UvFailed(CudatxError):
    """uv exited non-zero, was killed, or could not be started; `message` carries its error."""

    exit_code = ExitCode.ROLLED_BACK


def find_uv(explicit: str | None) -> str:
    if explicit:
        found = shutil.which(explicit)
        if found is None:
            raise UsageError(f"--uv {explicit}: no such executable")
        return found
    try:
        from uv import find_uv_bin

        return os.fspath(find_uv_bin())
    except (ImportError, FileNotFoundError) as exc:
        raise UvFailed(
            f"cannot find uv ({exc}); install the uv package or pass --uv PATH"
        ) from None


def run_uv(uv: str, args: Sequence[str]) -> None:
    argv = [uv, *args]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL
        )
    except OSError as exc:
        raise UvFailed(f"cannot run {uv}: {exc.strerror or exc}") from None
    if done.returncode != 0:
        lines = [ln for ln in (done.stderr or done.stdout).strip().splitlines() if ln.strip()]
        last = lines[-1].strip() if lines else f"exit status {done.returncode}"
        if done.returncode < 0:
            last = f"killed by signal {-done.returncode}"
        raise UvFailed(f"uv {' '.join(args[:2])} failed: {last}")
