"""Regenerate the demo's prebuilt libraries: ``python -m cudatx.demo.build_prebuilt``.

Compiles ``c/*.c`` exactly as ``cudatx demo`` does (see :mod:`cudatx.demo.libs`) and
writes the objects to ``prebuilt/<machine>/<key>.elf`` with ``SOURCES.sha256``, the digest of
the sources they came from (the demo refuses copies whose digest does not match). The
extension is built against the limited API (abi3), so the interpreter running this does
not matter as long as it is CPython >= 3.8. A developer tool: it prints what it wrote.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from cudatx.demo.libs import (
    DIGEST_FILE,
    PREBUILT_NAMES,
    PREBUILT_ROOT,
    SOURCES,
    CompileFailed,
    compile_libraries,
    sources_digest,
)


def regenerate(out_dir: Path, *, compiler: str | None = None) -> list[Path]:
    """Compile into a scratch folder, then replace ``out_dir``'s objects and digest."""
    with tempfile.TemporaryDirectory(prefix="cudatx-prebuilt-") as tmp:
        libs = compile_libraries(Path(tmp) / "build", compiler=compiler, tmp_dir=Path(tmp))
        built = libs.files
        written: list[Path] = []
        out_dir.mkdir(parents=True, exist_ok=True)
        # A copy whose key is gone would ship for nothing.
        for stale in out_dir.glob("*.elf"):
            if stale.name not in PREBUILT_NAMES.values():
                stale.unlink()
        for key, name in PREBUILT_NAMES.items():
            target = out_dir / name
            shutil.copyfile(built[key], target)
            written.append(target)
    digest = out_dir / DIGEST_FILE
    digest.write_text(f"{sources_digest()}  {' '.join('c/' + name for name in SOURCES)}\n")
    written.append(digest)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cudatx.demo.build_prebuilt")
    parser.add_argument("--compiler", help="C compiler command [default: $CC or cc]")
    parser.add_argument(
        "--out",
        type=Path,
        default=PREBUILT_ROOT / platform.machine(),
        help="output folder [default: %(default)s]",
    )
    args = parser.parse_args(argv)
    try:
        written = regenerate(args.out, compiler=args.compiler)
    except CompileFailed as exc:
        print(f"build_prebuilt: {exc.message}: {exc.last_line}", file=sys.stderr)
        return 1
    for path in written:
        print(f"{path.stat().st_size:>7}  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
