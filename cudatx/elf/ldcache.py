"""/etc/ld.so.cache, read the way glibc's loader reads it (elf/dl-cache.c, dl-cache.h).

The file is parsed directly rather than through `ldconfig -p`: no subprocess, and the flags
and order glibc's lookup depends on are kept.

Deliberate deviations from glibc:
- entries for glibc-hwcaps subdirectories (hwcap != 0) are ignored: glibc would prefer one
  whose subdirectory the running CPU supports, which a static model does not know; the
  baseline entry is the one every CPU can load.
- for an architecture `cache_flags_for` does not know, any libc6 entry is accepted, whatever
  its architecture bits; glibc's check for x86-64, i386 and aarch64 is the one equality
  `lookup` makes, but other ports accept their own values (the generic one: 1 or 3).
"""

from __future__ import annotations

import os
import struct
import sys
from dataclasses import field

from cudatx.models import Frozen

_OLD_MAGIC = b"ld.so-1.7.0"
_OLD_HEADER = struct.Struct("=12sI")  # magic padded to 12, nlibs
_OLD_ENTRY = struct.Struct("=iII")  # flags, key, value
_NEW_MAGIC = b"glibc-ld.so.cache1.1"
_NEW_HEADER = struct.Struct("=20sIIB3xI12x")  # magic+version, nlibs, len_strings, flags, ext
_NEW_ENTRY = struct.Struct("=iIIIQ")  # flags, key, value, osversion_unused, hwcap
_NEW_ALIGN = 8  # __alignof__ (struct cache_file_new), for the new part after an old one

_ENDIAN_MASK = 3
_ENDIAN_UNSET = 0  # written by ldconfig before glibc 2.33; glibc accepts it
_ENDIAN_HOST = 2 if sys.byteorder == "little" else 3

FLAG_TYPE_MASK = 0x00FF
FLAG_ELF_LIBC6 = 0x0003
FLAG_X8664_LIB64 = 0x0300
FLAG_AARCH64_LIB64 = 0x0A00

EM_386 = 3
EM_X86_64 = 62
EM_AARCH64 = 183


class CacheEntry(Frozen, kw_only=False):
    name: str  # the key: a soname (or file name) ldconfig found
    path: str
    flags: int
    hwcap: int


class LdCache(Frozen, kw_only=False):
    entries: tuple[CacheEntry, ...] = ()
    _by_name: dict[str, tuple[CacheEntry, ...]] = field(
        init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        by_name: dict[str, list[CacheEntry]] = {}
        for entry in self.entries:
            by_name.setdefault(entry.name, []).append(entry)
        object.__setattr__(self, "_by_name", {k: tuple(v) for k, v in by_name.items()})

    def lookup(self, name: str, required_flags: int | None) -> str | None:
        """The path glibc's cache gives for `name`, or None.

        The first matching entry in file order: glibc binary-searches the sorted entries, walks
        back to the leftmost equal key and takes the first acceptable one from there, which is
        the same entry. `required_flags` is `cache_flags_for(...)` of the process; None (an
        unknown architecture) accepts any libc6 entry.
        """
        for entry in self._by_name.get(name, ()):
            if required_flags is None:
                if entry.flags & FLAG_TYPE_MASK != FLAG_ELF_LIBC6:
                    continue
            elif entry.flags != required_flags:
                continue
            if entry.hwcap != 0:
                continue  # a glibc-hwcaps subdirectory: see the module docstring
            return entry.path
        return None


def cache_flags_for(elf_class: int, machine: int) -> int | None:
    """The entry flags glibc's _dl_cache_check_flags accepts for a process of this kind."""
    if elf_class == 64 and machine == EM_X86_64:
        return FLAG_ELF_LIBC6 | FLAG_X8664_LIB64
    if elf_class == 32 and machine == EM_386:
        return FLAG_ELF_LIBC6
    if elf_class == 64 and machine == EM_AARCH64:
        return FLAG_ELF_LIBC6 | FLAG_AARCH64_LIB64
    return None


def read_ld_cache(path: str = "/etc/ld.so.cache") -> LdCache:
    """The entries of the cache at `path`; empty when it is missing or unusable, as for glibc."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return LdCache()
    return LdCache(tuple(_parse(data)))


def _parse(data: bytes) -> list[CacheEntry]:
    if data.startswith(_NEW_MAGIC):
        return _parse_new(data, 0)
    if not data.startswith(_OLD_MAGIC) or len(data) < _OLD_HEADER.size:
        return []
    (_, nlibs) = _OLD_HEADER.unpack_from(data)
    old_end = _OLD_HEADER.size + nlibs * _OLD_ENTRY.size
    if old_end > len(data):
        return []
    # A "compat" cache hides the new format after the old entries; glibc uses it alone (and
    # no cache at all if its byte order is wrong).
    new_start = old_end + (-old_end % _NEW_ALIGN)
    if data.startswith(_NEW_MAGIC, new_start):
        return _parse_new(data, new_start)
    # Old format only: strings are relative to the end of the old entries. ldconfig writes
    # glibc-hwcaps entries here too, without their hwcap, and glibc takes them like any other.
    entries: list[CacheEntry] = []
    for index in range(nlibs):
        flags, key, value = _OLD_ENTRY.unpack_from(data, _OLD_HEADER.size + index * _OLD_ENTRY.size)
        entry = _entry(data, old_end, flags, key, value, 0)
        if entry is not None:
            entries.append(entry)
    return entries


def _parse_new(data: bytes, start: int) -> list[CacheEntry]:
    if start + _NEW_HEADER.size > len(data):
        return []
    (_, nlibs, _, flags, _) = _NEW_HEADER.unpack_from(data, start)
    # A cache written for the other byte order is refused whole, as glibc does.
    if flags & _ENDIAN_MASK not in (_ENDIAN_UNSET, _ENDIAN_HOST):
        return []
    first = start + _NEW_HEADER.size
    if first + nlibs * _NEW_ENTRY.size > len(data):
        return []
    entries: list[CacheEntry] = []
    for index in range(nlibs):
        flags, key, value, _, hwcap = _NEW_ENTRY.unpack_from(data, first + index * _NEW_ENTRY.size)
        # New-format string offsets count from the start of the new header.
        entry = _entry(data, start, flags, key, value, hwcap)
        if entry is not None:
            entries.append(entry)
    return entries


def _entry(
    data: bytes, base: int, flags: int, key: int, value: int, hwcap: int
) -> CacheEntry | None:
    name, path = _string(data, base + key), _string(data, base + value)
    # glibc skips an entry whose strings lie outside the file (_dl_cache_verify_ptr).
    if name is None or path is None:
        return None
    return CacheEntry(name=name, path=path, flags=flags, hwcap=hwcap)


def _string(data: bytes, offset: int) -> str | None:
    end = data.find(b"\0", offset)
    if offset >= len(data) or end < 0:
        return None
    return os.fsdecode(data[offset:end])
