"""cudatx.elf.ldcache against `ldconfig -p`, on the real cache and on caches ldconfig writes
here."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cudatx.elf.ldcache import CacheEntry, LdCache, cache_flags_for, read_ld_cache

SYSTEM_CACHE = Path("/etc/ld.so.cache")
X86_64 = 0x0303
needs_ldconfig = pytest.mark.skipif(shutil.which("ldconfig") is None, reason="needs ldconfig")
# ldconfig's text for the flags it prints; anything else fails the test loudly.
FLAG_TEXT = {"libc6,x86-64": 0x0303, "libc6": 0x0003, "ELF": 0x0001, "libc6,AArch64": 0x0A03}


def ldconfig_view(cache: Path) -> list[tuple[str, int, bool, str]]:
    """(name, flags, has hwcap, path) of each entry, in file order, as `ldconfig -p` prints."""
    out = subprocess.run(
        ["ldconfig", "-p", "-C", str(cache)], check=True, capture_output=True
    ).stdout.decode(errors="replace")  # ldconfig -p prints garbage hwcap names for "compat"
    rows = []
    for line in out.splitlines():
        m = re.match(r"^\t(\S+) \(([^,)]+(?:,[^,)\s]+)?)(, hwcap: [^)]*)?\) => (.*)$", line)
        if m:
            rows.append((m[1], FLAG_TEXT[m[2]], m[3] is not None, m[4]))
    return rows


def our_view(cache: LdCache) -> list[tuple[str, int, bool, str]]:
    return [(e.name, e.flags, e.hwcap != 0, e.path) for e in cache.entries]


@needs_ldconfig
@pytest.mark.skipif(not SYSTEM_CACHE.is_file(), reason="no /etc/ld.so.cache")
def test_system_cache_matches_ldconfig() -> None:
    cache = read_ld_cache()
    expected = ldconfig_view(SYSTEM_CACHE)
    assert our_view(cache) == expected
    assert any(flags == X86_64 for _, flags, _, _ in expected)
    libc = [path for name, flags, hw, path in expected if name == "libc.so.6" and flags == X86_64]
    assert cache.lookup("libc.so.6", X86_64) == libc[0]
    assert cache.lookup("libc.so.6", cache_flags_for(64, 62)) == libc[0]
    assert cache.lookup("libno-such-library.so.1", X86_64) is None


def _cc(out: Path, *flags: str) -> bool:
    src = out.parent / "src.c"
    src.write_text("int f(void) { return 0; }\n")
    argv = ["cc", "-shared", "-fPIC", "-o", str(out), str(src), *flags]
    return subprocess.run(argv, capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tree ldconfig -r writes caches for: two folders, a glibc-hwcaps copy, a libc-less lib."""
    if os.geteuid() != 0 or shutil.which("ldconfig") is None or shutil.which("cc") is None:
        pytest.skip("ldconfig -r chroots (needs root), and a C compiler builds the libraries")
    root = tmp_path_factory.mktemp("root")
    first, second = root / "opt/first", root / "opt/second"
    hwcaps = first / "glibc-hwcaps/x86-64-v3"
    for d in (root / "etc", hwcaps, second):
        d.mkdir(parents=True)
    (root / "etc/ld.so.conf").write_text("/opt/first\n/opt/second\n")
    for out in (first / "libq.so.1", hwcaps / "libq.so.1", second / "libq.so.1"):
        assert _cc(out, "-Wl,-soname,libq.so.1")
    assert _cc(second / "libr.so.2", "-Wl,-soname,libr.so.2")
    # 32-bit without libc: ldconfig files it as plain "ELF" (flags 1), not as a libc6 library.
    _cc(second / "libbare.so.1", "-m32", "-nostdlib", "-Wl,-soname,libbare.so.1")
    return root


@pytest.mark.parametrize("fmt", ["new", "old", "compat"])
def test_ldconfig_written_cache(root: Path, fmt: str) -> None:
    cache_file = root / f"etc/ld.so.cache.{fmt}"
    subprocess.run(
        ["ldconfig", "-r", str(root), "-c", fmt, "-C", f"/etc/ld.so.cache.{fmt}"], check=True
    )
    cache = read_ld_cache(str(cache_file))
    expected = ldconfig_view(cache_file)
    assert our_view(cache) == expected
    if (root / "opt/second/libbare.so.1").exists():  # cc could build 32-bit objects
        assert ("libbare.so.1", 0x0001, False, "/opt/second/libbare.so.1") in expected
    hwcaps_path = "/opt/first/glibc-hwcaps/x86-64-v3/libq.so.1"
    if fmt == "old":
        # No hwcap field: the glibc-hwcaps entry is a plain first entry, and glibc takes it.
        assert cache.lookup("libq.so.1", X86_64) == hwcaps_path
    else:
        assert ("libq.so.1", X86_64, True, hwcaps_path) in expected
        # The hwcap entry comes first in the file and is skipped; the first folder wins.
        assert cache.lookup("libq.so.1", X86_64) == "/opt/first/libq.so.1"
    assert cache.lookup("libr.so.2", X86_64) == "/opt/second/libr.so.2"
    assert cache.lookup("libr.so.2", cache_flags_for(32, 3)) is None
    assert cache.lookup("libbare.so.1", X86_64) is None
    assert cache.lookup("libbare.so.1", None) is None  # FLAG_ELF is not a libc6 entry
    assert cache.lookup("libr.so.2", None) == "/opt/second/libr.so.2"


@pytest.mark.skipif(not SYSTEM_CACHE.is_file(), reason="no /etc/ld.so.cache")
@pytest.mark.parametrize("size", [0, 10, 47, 48, 100, 1000])
def test_truncated_cache_is_empty(tmp_path: Path, size: int) -> None:
    data = SYSTEM_CACHE.read_bytes()
    assert len(data) > 1000 + 48
    (tmp_path / "cache").write_bytes(data[:size])
    assert read_ld_cache(str(tmp_path / "cache")).entries == ()


@pytest.mark.skipif(not SYSTEM_CACHE.is_file(), reason="no /etc/ld.so.cache")
def test_cache_for_the_other_byte_order_is_empty(tmp_path: Path) -> None:
    data = bytearray(SYSTEM_CACHE.read_bytes())
    if not data.startswith(b"glibc-ld.so.cache1.1"):
        pytest.skip("the system cache has an old-format prefix")
    assert data[28] & 3 in (0, 2)
    data[28] = (data[28] & ~3) | 3  # "big endian" on a little-endian host; 1 is "invalid"
    (tmp_path / "cache").write_bytes(bytes(data))
    assert read_ld_cache(str(tmp_path / "cache")).entries == ()


def test_garbage_missing_and_unreadable_caches_are_empty(tmp_path: Path) -> None:
    (tmp_path / "garbage").write_bytes(os.urandom(4096))
    (tmp_path / "text").write_text("glibc-ld.so.cache is not this\n")
    for path in ("garbage", "text", "missing", "."):
        assert read_ld_cache(str(tmp_path / path)) == LdCache()


def test_cache_flags_for() -> None:
    assert cache_flags_for(64, 62) == 0x0303
    assert cache_flags_for(32, 3) == 0x0003
    assert cache_flags_for(64, 183) == 0x0A03
    assert cache_flags_for(64, 21) is None
    assert cache_flags_for(32, 62) is None


def test_lookup_takes_the_first_entry_in_file_order() -> None:
    cache = LdCache(
        (
            CacheEntry("liba.so.1", "/hw/liba.so.1", X86_64, 1 << 62),
            CacheEntry("liba.so.1", "/i386/liba.so.1", 0x0003, 0),
            CacheEntry("liba.so.1", "/one/liba.so.1", X86_64, 0),
            CacheEntry("liba.so.1", "/two/liba.so.1", X86_64, 0),
        )
    )
    assert cache.lookup("liba.so.1", X86_64) == "/one/liba.so.1"
    assert cache.lookup("liba.so.1", 0x0003) == "/i386/liba.so.1"
    assert cache.lookup("liba.so.1", None) == "/i386/liba.so.1"
    assert cache == LdCache(cache.entries) and hash(cache) == hash(LdCache(cache.entries))
