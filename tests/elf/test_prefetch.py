"""The child that reads .rodata names beside the scan (cudatx.elf.prefetch): the same names
as reading them in the scan's own process, in any order asked, and never a child left."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from cudatx.discover.target import start_query
from cudatx.elf.prefetch import RodataPrefetch
from cudatx.elf.reader import rodata_sonames
from cudatx.scan import scan
from tests.support import compile_lib, make_venv


def _children() -> set[int]:
    """This process's children, as /proc lists them (zombies included)."""
    me = str(os.getpid())
    out = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == me:
                out.add(int(entry))
    return out


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    root = tmp_path_factory.mktemp("prefetch")
    out = []
    for i in range(6):
        source = f'const char *name{i} = "libplug{i}.so.{i}";\nint f{i}(void) {{ return {i}; }}\n'
        out.append(str(compile_lib(root / f"libp{i}.so", soname=f"libp{i}.so", source=source)))
    text = root / "libtext.so"
    text.write_text("not an ELF object\n")
    return [*out, str(text)]


def _local(path: str) -> tuple[str, ...]:
    try:
        return rodata_sonames(path)
    except Exception:
        return ()


def test_names_as_read_here_in_any_order(objects: list[str]) -> None:
    before = _children()
    fetch = RodataPrefetch(objects)
    asked = list(reversed(objects))
    assert [fetch.take(p) for p in asked] == [_local(p) for p in asked]
    assert fetch.take(objects[0]) is None  # taken once; then the caller reads it itself
    assert fetch.take("/no/such/file.so") is None
    fetch.close()
    assert _children() == before


def test_a_child_that_dies_leaves_the_reading_to_the_scan(objects: list[str]) -> None:
    before = _children()
    fetch = RodataPrefetch(objects)
    (child,) = _children() - before
    os.kill(child, signal.SIGKILL)  # at once: it may have sent some of them, or none
    got = [fetch.take(p) for p in objects]
    # What it sent before it died is taken; for the rest None, and the caller reads them.
    assert all(g is None or g == _local(p) for g, p in zip(got, objects, strict=True))
    fetch.close()
    assert _children() == before


def test_a_scan_leaves_no_child(tmp_path: Path) -> None:
    venv = make_venv(tmp_path / "venv")
    before = _children()
    env = scan(start_query(str(venv)), ld_library_path=None)
    assert env.loads is not None
    assert _children() == before
