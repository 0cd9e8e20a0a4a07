"""Read what glibc's loader reads from an ELF object: header, program headers, dynamic table.

The only module that imports pyelftools, and it uses only its enum tables (machine and type
names). Every structure is unpacked here with `struct` from the bytes that hold it:
pyelftools' construct parses field by field, one read(2) each, which was most of a cold
scan's time, and its DynamicSegment walks every section and parses .gnu.hash element by
element. Only the bytes needed are read, since shared libraries reach 1 GB.
"""

from __future__ import annotations

import array
import collections
import functools
import itertools
import os
import re
import struct
import sys
from collections.abc import Callable, Iterator
from typing import IO, Any, NamedTuple, TypeVar

from cudatx.elf import exports as _ex
from cudatx.elf import symtab as _st
from cudatx.elf.exports import Definitions
from cudatx.errors import ElfReadError
from cudatx.models import ElfInfo, Symbols, VersionNeed
from cudatx.paths import pyinit_name
from cudatx.reading import open_regular

_MAGIC = b"\x7fELF"
_EI_NIDENT = 16
_PN_XNUM = 0xFFFF
_SHN_XINDEX = 0xFFFF

# (p_vaddr, p_filesz, p_offset) of one PT_LOAD segment.
_Load = tuple[int, int, int]
_T = TypeVar("_T")

# A soname-shaped string in .rodata: "lib" at a string boundary (the start of the section, or
# after any byte outside [A-Za-z0-9_.+-], so a NUL, a space of a message or the '/' of a path),
# the shortest run of name bytes up to ".so", any ".N" version parts, and then a byte outside
# the name bytes, or a '.' and one (so "libfoo.so.%d" gives the versionless "libfoo.so").
# Only names starting with "lib": plug-ins such as "nvshmem_bootstrap_uid.so.3" are left out,
# since without the prefix ".so" strings in .rodata are mostly noise ("s.so", "LG.so", ".so").
# The boundary is a lookbehind after the literal "lib" rather than before it, so that re can
# scan for the literal prefix: ~3 GB/s, where a leading lookbehind scans at ~80 MB/s.
_RODATA_SONAME = re.compile(
    rb"lib(?<![A-Za-z0-9_.+\-]lib)[A-Za-z0-9_.+\-]*?\.so(?:\.[0-9]+)*(?!\.?[A-Za-z0-9_+\-])"
)


class _Header(NamedTuple):
    """The ELF header fields the readers use."""

    e_type: int
    e_machine: int
    e_phoff: int
    e_shoff: int
    e_phentsize: int
    e_phnum: int
    e_shentsize: int
    e_shnum: int
    e_shstrndx: int


class _Elf(NamedTuple):
    """What every reader needs: the identification, the ELF header, the layouts of the
    structures of its class and byte order, and the file's size."""

    ident: bytes
    elf_class: int
    header: _Header
    layout: _Layouts
    size: int


class _Layouts(NamedTuple):
    """struct layouts of one class and byte order (<elf.h>: Elf32_* and Elf64_*)."""

    order: str
    ehdr: struct.Struct  # from e_type on
    phdr: struct.Struct  # p_type, p_offset, p_vaddr, p_filesz (other fields skipped)
    shdr: struct.Struct  # sh_name, sh_type, sh_offset, sh_size, sh_link, sh_info
    dyn: struct.Struct  # d_tag, d_val
    verneed: struct.Struct  # vn_version, vn_cnt, vn_file, vn_aux, vn_next
    vernaux: struct.Struct  # vna_hash, vna_flags, vna_other, vna_name, vna_next
    verdef: struct.Struct  # vd_version, vd_flags, vd_ndx, vd_cnt, vd_hash, vd_aux, vd_next
    verdaux: struct.Struct  # vda_name, vda_next


class _Section(NamedTuple):
    """The fields of a section header the readers use."""

    name: int
    kind: int
    offset: int
    size: int
    link: int
    info: int


@functools.lru_cache(maxsize=4)
def _layouts(little: bool, wide: bool) -> _Layouts:
    o = "<" if little else ">"
    if wide:
        ehdr, dyn = "HHIQQQIHHHHHH", "qQ"
        phdr = "I4xQQ8xQ16x"  # p_type p_flags p_offset p_vaddr p_paddr p_filesz p_memsz p_align
        shdr = "II16xQQII16x"  # sh_name sh_type sh_flags sh_addr sh_offset sh_size sh_link ...
    else:
        ehdr, dyn = "HHIIIIIHHHHHH", "iI"
        phdr = "III4xI12x"  # p_type p_offset p_vaddr p_paddr p_filesz p_memsz p_flags p_align
        shdr = "II8xIIII8x"  # sh_name sh_type sh_flags sh_addr sh_offset sh_size sh_link ...
    return _Layouts(
        order=o,
        ehdr=struct.Struct(o + ehdr),
        phdr=struct.Struct(o + phdr),
        shdr=struct.Struct(o + shdr),
        dyn=struct.Struct(o + dyn),
        verneed=struct.Struct(o + "HHIII"),
        vernaux=struct.Struct(o + "IHHII"),
        verdef=struct.Struct(o + "HHHHIII"),
        verdaux=struct.Struct(o + "II"),
    )


# <elf.h>
_PT_LOAD, _PT_DYNAMIC, _PT_INTERP = 1, 2, 3
_SHT_NOBITS = 8
_DT_NULL, _DT_NEEDED = 0, 1
# The single-valued tags the readers use, by number (the last of each wins, as in l_info).
_TAGS = {
    4: "DT_HASH",
    5: "DT_STRTAB",
    6: "DT_SYMTAB",
    10: "DT_STRSZ",
    11: "DT_SYMENT",
    14: "DT_SONAME",
    15: "DT_RPATH",
    29: "DT_RUNPATH",
    30: "DT_FLAGS",
    0x6FFFFEF5: "DT_GNU_HASH",
    0x6FFFFFF0: "DT_VERSYM",
    0x6FFFFFFB: "DT_FLAGS_1",
    0x6FFFFFFC: "DT_VERDEF",
    0x6FFFFFFD: "DT_VERDEFNUM",
    0x6FFFFFFE: "DT_VERNEED",
    0x6FFFFFFF: "DT_VERNEEDNUM",
}
_FS_ENCODING = sys.getfilesystemencoding()


@functools.cache
def _e_types() -> dict[int, str]:
    """e_type -> its name. Imported when a header is first read: a warm run reads every
    ELF fact from the scan cache, and pyelftools' enums pull in its construct package."""
    from elftools.elf.enums import ENUM_E_TYPE

    return {number: name for name, number in ENUM_E_TYPE.items() if name.startswith("ET_")}


def read_elf(path: str) -> ElfInfo:
    """The loader-relevant facts of the ELF object at `path`; raises ElfReadError."""
    return _read(path, lambda stream, elf: _parse_dynamic(path, elf, stream, _dynamic(stream, elf)))


def read_object(path: str) -> tuple[ElfInfo, tuple[str, ...]]:
    """read_elf's facts and, from the same read, the `PyInit_*` name the object exports, if
    it exports the one its file name gives.

    Python imports `NAME.SUFFIX` only if it exports `PyInit_NAME` (dlsym: a defined, visible
    symbol); the name tells an extension module from a plain library (`libfoo.so` in a
    package's lib folder has the ".so" suffix too). It is looked up in the object's own
    hash table, as dlsym looks it up, so that the string table (15 MB for a torch library)
    is not read whole; an object without DT_GNU_HASH has its string table searched instead.
    """
    wanted = pyinit_name(path)

    def both(stream: IO[bytes], elf: _Elf) -> tuple[ElfInfo, tuple[str, ...]]:
        dyn = _dynamic(stream, elf)
        info = _parse_dynamic(path, elf, stream, dyn)
        found = _exports_name(stream, elf, dyn, os.fsencode(wanted))
        if found is None:  # no hash table: the string table, searched for the name
            table = dyn.strtab.whole()
            at = table.find(b"\0" + os.fsencode(wanted) + b"\0")
            found = at >= 0 or table.startswith(os.fsencode(wanted) + b"\0")
        return info, (wanted,) if found else ()

    return _read(path, both)


def rodata_sonames(path: str) -> tuple[str, ...]:
    """The distinct soname-shaped strings of the `.rodata` section, in order of first appearance.

    Evidence of libraries loaded with dlopen by name (cuDNN's sub-libraries, libcuda.so.1):
    "lib" at a string boundary up to ".so" and its numeric version parts, so a name inside a
    message ("cannot load libfoo.so.1") counts, a path gives its basename ("/x/libfoo.so.1" gives
    "libfoo.so.1"), and a printf pattern gives the versionless stem ("libfoo.so.%d" gives
    "libfoo.so"). Only `.rodata` is read, found through the section headers; an object without
    one (or without section headers) has none. Raises ElfReadError as read_elf does.
    """
    return _read(path, _rodata_sonames)


def _read(path: str, reader: Callable[[IO[bytes], _Elf], _T]) -> _T:
    """`reader` over the open file and its ELF header, every failure as ElfReadError."""
    try:
        # O_NONBLOCK and a regular file only (cudatx.reading): a FIFO named like a library
        # would block open(2), and a scan, for ever.
        fd, _ = open_regular(path)
        with open(fd, "rb") as stream:
            return reader(stream, _read_header(path, stream))
    except (ElfReadError, ImportError):
        # An ImportError is cudatx's own install (pyelftools missing), not the file: it must
        # not be reported, or cached, as "malformed ELF" for every library there is.
        raise
    except PermissionError:
        raise ElfReadError(path, "permission denied", passing=True) from None
    except OSError as exc:
        raise ElfReadError(path, f"cannot read: {exc.strerror or exc}", passing=True) from None
    except _PastTheEnd:
        raise ElfReadError(path, "truncated ELF file") from None
    except Exception as exc:
        # Garbage offsets, counts or enum values in a damaged file: never a crash of the scan.
        # Not cached either (passing): the same exception may be a fault of the reading code,
        # which the next cudatx fixes; a damaged file is then merely read again each run.
        raise ElfReadError(path, f"malformed ELF: {exc}", passing=True) from None


def _read_header(path: str, stream: IO[bytes]) -> _Elf:
    ident = stream.read(_EI_NIDENT)
    if not ident.startswith(_MAGIC):
        if ident and len(ident) < len(_MAGIC) and _MAGIC.startswith(ident):
            raise ElfReadError(path, "truncated ELF file")
        raise ElfReadError(path, "not an ELF file")
    if len(ident) < _EI_NIDENT:
        raise ElfReadError(path, "truncated ELF file")
    # The only classes and byte orders there are; anything else is damage, not truncation.
    if ident[4] not in (1, 2) or ident[5] not in (1, 2):
        raise ElfReadError(path, f"malformed ELF: EI_CLASS {ident[4]}, EI_DATA {ident[5]}")

    little, elf_class = ident[5] == 1, 32 if ident[4] == 1 else 64
    layout = _layouts(little, elf_class == 64)
    size = os.fstat(stream.fileno()).st_size
    fields = layout.ehdr.unpack(_read_at(stream, _EI_NIDENT, layout.ehdr.size, size))
    header = _Header(*fields[0:2], *fields[4:6], *fields[8:13])
    return _Elf(ident, elf_class, header, layout, size)


class _Dynamic(NamedTuple):
    """The dynamic table of an object: its segments, tags and string table."""

    loads: list[_Load]
    tags: dict[str, int]  # the last value of each single-valued tag
    needed: list[int]  # DT_NEEDED string offsets, in order
    interpreter: str | None
    strtab: _Strings


def _dynamic(stream: IO[bytes], elf: _Elf) -> _Dynamic:
    _, _, header, layout, size = elf
    phoff, phentsize, phnum = header.e_phoff, header.e_phentsize, header.e_phnum
    if phnum == _PN_XNUM:
        # Too many program headers for e_phnum: the count is in section 0's sh_info.
        phnum = _Section(*_unpack(layout.shdr, stream, header.e_shoff, size)).info
    if phnum and phentsize < layout.phdr.size:
        raise ValueError(f"e_phentsize {phentsize} is too small")
    if phnum and phoff + phnum * phentsize > size:
        raise _PastTheEnd("the program headers run past the end of the file")

    loads: list[_Load] = []
    dynamic: tuple[int, int] | None = None  # p_offset, p_filesz
    interpreter: str | None = None
    table = _read_at(stream, phoff, phnum * phentsize, size) if phnum else b""
    for index in range(phnum):
        kind, offset, vaddr, filesz = layout.phdr.unpack_from(table, index * phentsize)
        if kind == _PT_LOAD:
            loads.append((vaddr, filesz, offset))
        elif kind == _PT_DYNAMIC:
            dynamic = (offset, filesz)
        elif kind == _PT_INTERP:
            raw = _read_at(stream, offset, filesz, size)
            interpreter = os.fsdecode(raw.split(b"\0", 1)[0])

    needed: list[int] = []
    # glibc keeps one l_info slot per tag, so a repeated single-valued tag: the last one wins.
    tags: dict[str, int] = {}
    if dynamic is not None:
        start, filesz = dynamic
        whole = filesz - filesz % layout.dyn.size
        for tag, value in layout.dyn.iter_unpack(_read_at(stream, start, whole, size)):
            if tag == _DT_NULL:
                break
            if tag == _DT_NEEDED:
                needed.append(value)
            elif tag in _TAGS:
                tags[_TAGS[tag]] = value

    strtab = _Strings(stream, 0, 0, size)
    if "DT_STRTAB" in tags:
        if "DT_STRSZ" not in tags:
            raise ValueError("DT_STRTAB without DT_STRSZ")
        strtab_offset = _file_offset(loads, tags["DT_STRTAB"])
        strtab = _Strings(stream, strtab_offset, tags["DT_STRSZ"], size)
    return _Dynamic(loads, tags, needed, interpreter, strtab)


class _Strings:
    """The dynamic string table, read a block at a time as names are asked for (a torch
    library's is 15 MB, and the loader's facts need a few dozen of its names), or whole."""

    _BLOCK = 1 << 12

    def __init__(self, stream: IO[bytes], offset: int, size: int, file_size: int) -> None:
        if offset < 0 or size < 0 or offset + size > file_size:
            raise _PastTheEnd(f"{size} bytes at {offset} run past the end of the file")
        self._stream, self._offset, self._size, self._file = stream, offset, size, file_size
        self._blocks: dict[int, bytes] = {}
        self._whole: bytes | None = None

    def whole(self) -> bytes:
        if self._whole is None:
            self._whole = _read_at(self._stream, self._offset, self._size, self._file)
        return self._whole

    def cstring(self, at: int) -> bytes:
        """The string at offset `at`, up to its NUL or the table's end."""
        if not 0 <= at < self._size:
            raise ValueError(f"string offset {at} is outside the dynamic string table")
        if self._whole is not None:
            end = self._whole.find(b"\0", at)
            return self._whole[at : end if end >= 0 else self._size]
        pieces = []
        while at < self._size:
            number, start = divmod(at, self._BLOCK)
            block = self._blocks.get(number)
            if block is None:
                first = number * self._BLOCK
                length = min(self._BLOCK, self._size - first)
                block = _read_at(self._stream, self._offset + first, length, self._file)
                self._blocks[number] = block
            end = block.find(b"\0", start)
            if end >= 0:
                pieces.append(block[start:end])
                break
            pieces.append(block[start:])
            at = (number + 1) * self._BLOCK
        return b"".join(pieces)


def _parse_dynamic(path: str, elf: _Elf, stream: IO[bytes], dyn: _Dynamic) -> ElfInfo:
    """The ElfInfo of the object."""
    ident, elf_class, header, _, _ = elf
    loads, tags, needed, interpreter, strtab = dyn

    def string(key: str) -> str | None:
        return _cstring(strtab, tags[key]) if key in tags else None

    version_needs = [
        VersionNeed(file=file, versions=tuple(n for n, _, _ in auxes), weak=weak)
        for file, auxes in _verneed(stream, elf, loads, tags, strtab)
        for weak in [tuple(n for n, flags, _ in auxes if flags & _VER_FLG_WEAK)]
    ]
    version_defs: tuple[str, ...] | None = None
    if "DT_VERDEF" in tags:
        version_defs = tuple(_verdef(stream, elf, loads, tags, strtab).values())

    return ElfInfo(
        path=path,
        elf_class=elf_class,
        data=ident[5],
        machine=header.e_machine,
        elf_type=_e_types().get(header.e_type, f"{header.e_type:#x}"),
        soname=string("DT_SONAME"),
        needed=tuple(_cstring(strtab, offset) for offset in needed),
        rpath=string("DT_RPATH"),
        runpath=string("DT_RUNPATH"),
        flags=tags.get("DT_FLAGS", 0),
        flags_1=tags.get("DT_FLAGS_1", 0),
        interpreter=interpreter,
        version_needs=tuple(version_needs),
        version_defs=version_defs,
    )


def _verneed(
    stream: IO[bytes], elf: _Elf, loads: list[_Load], tags: dict[str, int], strtab: _Strings
) -> list[tuple[str, list[tuple[str, int, int]]]]:
    """DT_VERNEED: each file and its (version name, vna_flags, vna_other) entries.

    Bounded by the counts (as readelf does); glibc follows vn_next/vna_next until 0 and
    ignores them, which reads the same in any object the link editor wrote.
    """
    out: list[tuple[str, list[tuple[str, int, int]]]] = []
    if "DT_VERNEED" not in tags:
        return out
    layout, size = elf.layout, elf.size
    offset = _file_offset(loads, tags["DT_VERNEED"])
    for _ in range(tags.get("DT_VERNEEDNUM", 0)):
        _, count, file, aux, following = _unpack(layout.verneed, stream, offset, size)
        auxes: list[tuple[str, int, int]] = []
        aux_offset = offset + aux
        for _ in range(count):
            _, flags, other, name, step = _unpack(layout.vernaux, stream, aux_offset, size)
            auxes.append((_cstring(strtab, name), flags, other))
            if not step:
                break
            aux_offset += step
        out.append((_cstring(strtab, file), auxes))
        if not following:
            break
        offset += following
    return out


def _verdef(
    stream: IO[bytes], elf: _Elf, loads: list[_Load], tags: dict[str, int], strtab: _Strings
) -> dict[int, str]:
    """DT_VERDEF: version index (vd_ndx) -> name, the base version (VER_FLG_BASE) included;
    its index is the base's (1) in every object the link editor writes."""
    layout, size = elf.layout, elf.size
    out: dict[int, str] = {}
    offset = _file_offset(loads, tags["DT_VERDEF"])
    for _ in range(tags.get("DT_VERDEFNUM", 0)):
        _, _, ndx, _, _, aux, following = _unpack(layout.verdef, stream, offset, size)
        name, _ = _unpack(layout.verdaux, stream, offset + aux, size)
        out[ndx & 0x7FFF] = _cstring(strtab, name)
        if not following:
            break
        offset += following
    return out


def read_symbols(path: str) -> Symbols:
    """The dynamic references of the object at `path` (cudatx.models.Symbols); raises
    ElfReadError as read_elf does."""
    return _read(path, lambda stream, elf: _references(_symbol_table(stream, elf)))


def read_exports(path: str) -> Definitions:
    """What the object at `path` defines, for a symbol check's lookups (cudatx.elf.exports):
    its own DT_GNU_HASH table where it hashes HASHED_FROM symbols or more, else every
    definition read into sets. Raises ElfReadError as read_elf does."""
    return _read(path, lambda stream, elf: _exports(stream, elf, _symbol_table(stream, elf)))


def read_symbol_facts(path: str) -> tuple[Symbols, Definitions]:
    """read_symbols and read_exports from one read of the tables they share."""

    def both(stream: IO[bytes], elf: _Elf) -> tuple[Symbols, Definitions]:
        table = _symbol_table(stream, elf)
        return _references(table), _exports(stream, elf, table)

    return _read(path, both)


_VER_FLG_WEAK = 0x2
# From how many hashed symbols a lookup walks the object's hash table rather than reading
# every definition: reading costs about 1 us a symbol, a lookup about 5 us a name, and the
# objects of a CUDA environment are either far below this (libc, libstdc++, the NVIDIA
# libraries: under 3,000) or far above it (libtorch_cpu 75,000, cuSPARSELt 90,000, triton
# 135,000, each asked about a few thousand names).
HASHED_FROM = 16384


class _Table(NamedTuple):
    """The dynamic symbol table and what reading it needs."""

    entries: _ex.Entries
    needs: dict[int, tuple[str, str]]  # version index -> (version, file) of DT_VERNEED
    layout: _st.Layout
    loads: list[_Load]
    tags: dict[str, int]


def _symbol_table(stream: IO[bytes], elf: _Elf) -> _Table | None:
    loads, tags, _, _, strtab = _dynamic(stream, elf)
    if "DT_SYMTAB" not in tags:
        return None
    little = elf.ident[5] == 1
    order = "<" if little else ">"
    wide = elf.elf_class == 64
    entry = tags.get("DT_SYMENT") or (24 if wide else 16)
    if entry < (24 if wide else 16) or entry % 4:
        raise ValueError(f"DT_SYMENT {entry} is no symbol size")
    count = _symbol_count(stream, elf, loads, tags, order)
    raw = _read_at(stream, _file_offset(loads, tags["DT_SYMTAB"]), count * entry, elf.size)
    versym: array.array[int] | None = None
    if "DT_VERSYM" in tags:
        versym = array.array("H")
        at = _file_offset(loads, tags["DT_VERSYM"])
        versym.frombytes(_read_at(stream, at, 2 * count, elf.size))
        if little != (sys.byteorder == "little"):
            versym.byteswap()
    defs = _verdef(stream, elf, loads, tags, strtab) if "DT_VERDEF" in tags else {}
    needs = {
        other & 0x7FFF: (name, file)
        for file, auxes in _verneed(stream, elf, loads, tags, strtab)
        for name, _, other in auxes
    }
    entries = _ex.Entries(
        raw=raw,
        entry=entry,
        wide=wide,
        order=order,
        total=count,
        strtab=strtab.whole(),
        versym=versym,
        defs={number: os.fsencode(name) for number, name in defs.items()},
    )
    layout = _st.Layout.of(wide=wide, little=little, entry=entry)
    return _Table(entries, needs, layout, loads, tags)


def _references(table: _Table | None) -> Symbols:
    if table is None:
        return Symbols()
    e, needs = table.entries, table.needs
    cols = _st.columns(e.raw, table.layout, e.total)
    names, versym, strtab = cols.names, e.versym, e.strtab
    own = {number: os.fsdecode(name) for number, name in e.defs.items()}

    def refs(mask: bytes) -> tuple[str, ...]:
        """The references of the entries `mask` marks, as Symbols spells them (its
        docstring): the names cut out and decoded together, a version added where
        `.gnu.version` gives one (torch's libtorch_python has 6,000 references)."""
        at = list(itertools.compress(range(e.total), mask))
        if not at:
            return ()
        cut = [_st.name_at(names[index], strtab) for index in at]
        # fsdecode, as _cstring: a name that is not UTF-8 keeps its bytes as surrogates.
        text = b"\0".join(cut).decode(_FS_ENCODING, "surrogateescape").split("\0")
        if versym is None:
            return tuple(text)
        for position, index in enumerate(at):
            number = versym[index] & 0x7FFF
            if number >= 2:
                if number in needs:
                    version, file = needs[number]
                    text[position] += f"@{version}@{file}"
                elif number in own:
                    text[position] += f"@{own[number]}@"
        return tuple(text)

    return Symbols(undefined=refs(cols.strong), weak_undefined=refs(cols.weak))


def _exports(stream: IO[bytes], elf: _Elf, table: _Table | None) -> Definitions:
    if table is None:
        return _ex.Table(frozenset(), frozenset(), None)
    e = table.entries
    gnu = _gnu_hash(stream, elf, table) if "DT_GNU_HASH" in table.tags else None
    if gnu is not None and e.total - gnu.symoffset >= HASHED_FROM:
        return _ex.Hashed(e, gnu)
    cols = _st.columns(e.raw, table.layout, e.total)
    defines = cols.defines
    if gnu is not None:
        # Only the symbols the hash table holds can be found (do_lookup_x): those from
        # symoffset on, where the link editor puts every one it exports.
        first = min(gnu.symoffset, e.total)
        defines = bytes(first) + defines[first:]
    if e.defs:
        return _versioned(e, cols.names, defines)
    return _unversioned(e, cols.names, defines)


def _versioned(e: _ex.Entries, names: list[int], defines: bytes) -> _ex.Table:
    """The definitions of an object with versions of its own (DT_VERDEF: libc, libstdc++,
    the versioned NVIDIA libraries; a few thousand entries), entry by entry."""
    strtab, versym, defs = e.strtab, e.versym, e.defs
    exact: list[bytes] = []
    plain: list[bytes] = []
    loose: list[bytes] = []
    # An unversioned lookup accepts the only non-hidden definition of index >= 3 in an object
    # ("exactly one versioned symbol", do_lookup_x); count them per name.
    later: dict[bytes, int] = {}
    for index in itertools.compress(range(e.total), defines):
        name = _st.name_at(names[index], strtab)
        if versym is None:
            plain.append(name)
            continue
        number, hidden = versym[index] & 0x7FFF, versym[index] & _st.VERSYM_HIDDEN
        if number >= 2 and number in defs:
            exact.append(name + b"@" + defs[number])
        if number < 3:
            plain.append(name)  # no version, the base, or the first version
            if (number < 2 or number not in defs) and not hidden:
                loose.append(name)
        elif not hidden:
            later[name] = later.get(name, 0) + 1
    if versym is None:
        return _ex.Table(frozenset(), frozenset(plain), None)
    plain += [name for name, seen in later.items() if seen == 1]
    return _ex.Table(frozenset(exact), frozenset(plain), frozenset(loose))


def _unversioned(e: _ex.Entries, names: list[int], defines: bytes) -> _ex.Table:
    """The sets _versioned makes, for an object without DT_VERDEF, column by column: every
    definition is plain; loose unless `.gnu.version` hides it; an index >= 3 (no version of
    its own, so a stray one) counts as plain only where it is its name's one definition."""
    defined = _st.names_of(list(itertools.compress(names, defines)), e.strtab)
    if e.versym is None:
        return _ex.Table(frozenset(), frozenset(defined), None)

    def pick(*masks: bytes) -> list[bytes]:
        return list(itertools.compress(defined, itertools.compress(_st.and_masks(*masks), defines)))

    low, shown = _st.version_masks(e.versym)
    plain = pick(low)
    later = collections.Counter(pick(_st.not_mask(low), shown))
    plain += [name for name, seen in later.items() if seen == 1]
    return _ex.Table(frozenset(), frozenset(plain), frozenset(pick(low, shown)))


def _exports_name(stream: IO[bytes], elf: _Elf, dyn: _Dynamic, name: bytes) -> bool | None:
    """Whether the object's DT_GNU_HASH table finds `name` defined and visible, as dlsym's
    lookup does (do_lookup_x, the Hashed lookup of cudatx.elf.exports, one name, reading
    only the words it visits); None for an object without such a table."""
    tags, loads, size = dyn.tags, dyn.loads, elf.size
    if "DT_GNU_HASH" not in tags or "DT_SYMTAB" not in tags:
        return None
    order, wide = elf.layout.order, elf.elf_class == 64
    bits = 64 if wide else 32
    start = _file_offset(loads, tags["DT_GNU_HASH"])
    nbuckets, symoffset, nbloom, shift = struct.unpack(
        f"{order}IIII", _read_at(stream, start, 16, size)
    )
    if not nbuckets:
        raise ValueError("DT_GNU_HASH has no buckets")
    h = _ex.gnu_hash(name)
    if nbloom:  # bitmask_nwords is a power of two: l_gnu_bitmask_idxbits masks
        at = start + 16 + ((h // bits) & (nbloom - 1)) * (bits // 8)
        (word,) = struct.unpack(
            f"{order}{'Q' if wide else 'I'}", _read_at(stream, at, bits // 8, size)
        )
        if not (word >> (h % bits)) & (word >> ((h >> shift) % bits)) & 1:
            return False
    buckets = start + 16 + nbloom * (bits // 8)
    (index,) = struct.unpack(f"{order}I", _read_at(stream, buckets + 4 * (h % nbuckets), 4, size))
    if index < symoffset:
        return False  # 0: an empty bucket
    chain = buckets + 4 * nbuckets
    symtab = _file_offset(loads, tags["DT_SYMTAB"])
    entry = tags.get("DT_SYMENT") or (24 if wide else 16)
    layout, read = _st.sym_reader(wide=wide, order=order)
    while True:
        at = chain + 4 * (index - symoffset)
        (value,) = struct.unpack(f"{order}I", _read_at(stream, at, 4, size))
        if (value ^ h) >> 1 == 0:
            sym = read(_read_at(stream, symtab + index * entry, layout.size, size), 0)
            if sym.defines() and dyn.strtab.cstring(sym.name) == name:
                return True
        if value & 1:
            return False
        index += 1


def _gnu_hash(stream: IO[bytes], elf: _Elf, table: _Table) -> _ex.GnuHash:
    """DT_GNU_HASH (nbuckets, symoffset, bloom_size, bloom_shift, then the Bloom words,
    the buckets and the chain), as _dl_setup_hash reads it."""
    order, size = table.entries.order, elf.size
    start = _file_offset(table.loads, table.tags["DT_GNU_HASH"])
    nbuckets, symoffset, nbloom, shift = struct.unpack(
        f"{order}IIII", _read_at(stream, start, 16, size)
    )
    word = "Q" if elf.elf_class == 64 else "I"
    bloom = array.array(word)
    at = start + 16
    bloom.frombytes(_read_at(stream, at, nbloom * bloom.itemsize, size))
    at += nbloom * bloom.itemsize
    buckets = array.array("I")
    buckets.frombytes(_read_at(stream, at, 4 * nbuckets, size))
    at += 4 * nbuckets
    chain = array.array("I")
    chained = max(table.entries.total - symoffset, 0)
    chain.frombytes(_read_at(stream, at, 4 * chained, size))
    if order != ("<" if sys.byteorder == "little" else ">"):
        for column in (bloom, buckets, chain):
            column.byteswap()
    if nbuckets == 0:
        raise ValueError("DT_GNU_HASH has no buckets")
    return _ex.GnuHash(nbuckets, symoffset, shift, bloom, buckets, chain)


def _symbol_count(
    stream: IO[bytes], elf: _Elf, loads: list[_Load], tags: dict[str, int], order: str
) -> int:
    """How many entries .dynsym has: DT_HASH's nchain, else the end of DT_GNU_HASH's last
    chain, else the size of the .dynsym section (the dynamic table gives no count)."""
    if "DT_HASH" in tags:
        head = _read_at(stream, _file_offset(loads, tags["DT_HASH"]), 8, elf.size)
        return int(struct.unpack(f"{order}II", head)[1])
    if "DT_GNU_HASH" in tags:
        start = _file_offset(loads, tags["DT_GNU_HASH"])
        nbuckets, symoffset, bloom, _ = struct.unpack(
            f"{order}IIII", _read_at(stream, start, 16, elf.size)
        )
        word = 8 if elf.elf_class == 64 else 4
        buckets_at = start + 16 + bloom * word
        buckets = array.array("I")
        buckets.frombytes(_read_at(stream, buckets_at, 4 * nbuckets, elf.size))
        if order != ("<" if sys.byteorder == "little" else ">"):
            buckets.byteswap()
        last = max(buckets, default=0)
        if last < symoffset:
            return int(symoffset)
        chain_at = buckets_at + 4 * nbuckets
        while True:
            (value,) = struct.unpack(
                f"{order}I", _read_at(stream, chain_at + 4 * (last - symoffset), 4, elf.size)
            )
            last += 1
            if value & 1:
                return last
    section = _section(stream, elf, b".dynsym")
    if section is None:
        return 0
    return section.size // (tags.get("DT_SYMENT") or (24 if elf.elf_class == 64 else 16))


def _rodata_sonames(stream: IO[bytes], elf: _Elf) -> tuple[str, ...]:
    rodata = _section(stream, elf, b".rodata")
    if rodata is None or rodata.kind == _SHT_NOBITS:
        return ()
    if rodata.offset < 0 or rodata.size < 0 or rodata.offset + rodata.size > elf.size:
        raise _PastTheEnd(".rodata runs past the end of the file")
    found: dict[bytes, None] = {}
    for window in _name_windows(stream, rodata.offset, rodata.size):
        found.update(dict.fromkeys(match.group() for match in _RODATA_SONAME.finditer(window)))
    return tuple(name.decode("ascii") for name in found)


# The bytes a soname-shaped string is made of; a match of _RODATA_SONAME lies in one run of
# them, from its start (the lookbehind) to at most its end.
_NAME_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.+-"
_WINDOW = 4 << 20
_LONGEST_RUN = 1 << 20  # longer runs of name bytes are data, not names


def _name_windows(stream: IO[bytes], offset: int, size: int) -> Iterator[bytes]:
    """The bytes at `offset` in windows of about 4 MiB, each cut after a byte outside
    _NAME_BYTES, so that every run of name bytes lies whole in one window. A cold scan reads
    300 MB of .rodata; read whole, a section of 50 MB was a fresh allocation each time, and
    the allocating cost three times the reading."""
    stream.seek(offset)
    carry = b""
    left = size
    while left > 0:
        chunk = stream.read(min(_WINDOW, left))
        if not chunk:
            raise _PastTheEnd(f"short read at {offset + size - left}")
        left -= len(chunk)
        data = carry + chunk if carry else chunk
        if not left:
            yield data
            return
        whole = len(data.rstrip(_NAME_BYTES))  # up to and with the last byte outside a name
        carry = data[whole:]
        if len(carry) > _LONGEST_RUN:
            carry = b""
        if whole:
            yield data[:whole]


def _section(stream: IO[bytes], elf: _Elf, name: bytes) -> _Section | None:
    """The header of the first section called `name`, or None."""
    header, shdr, size = elf.header, elf.layout.shdr, elf.size
    shoff, shentsize = header.e_shoff, header.e_shentsize
    if not shoff:
        return None
    shnum, shstrndx = header.e_shnum, header.e_shstrndx
    if not shnum or shstrndx == _SHN_XINDEX:
        # Too many sections for the header's fields: section 0 holds the count in sh_size and
        # the index of the section-name string table in sh_link.
        first = _Section(*_unpack(shdr, stream, shoff, size))
        shnum = shnum or first.size
        if shstrndx == _SHN_XINDEX:
            shstrndx = first.link
    if shnum and shentsize < shdr.size:
        raise ValueError(f"e_shentsize {shentsize} is too small")
    if shoff + shnum * shentsize > size:
        raise _PastTheEnd("the section headers run past the end of the file")
    if not shstrndx:  # SHN_UNDEF: the sections have no names
        return None
    if shstrndx >= shnum:
        raise ValueError(f"e_shstrndx {shstrndx} is not a section (of {shnum})")

    headers = _read_at(stream, shoff, shnum * shentsize, size)
    names = _Section(*shdr.unpack_from(headers, shstrndx * shentsize))
    table = _read_at(stream, names.offset, names.size, size)
    for index in range(shnum):
        section = _Section(*shdr.unpack_from(headers, index * shentsize))
        start = section.name
        end = table.find(b"\0", start)
        # A name offset past the table (damage in some other section) names nothing.
        if table[start : end if end >= 0 else len(table)] == name:
            return section
    return None


class _PastTheEnd(Exception):
    """A read past the end of the file: a truncated one."""


def _unpack(layout: struct.Struct, stream: IO[bytes], offset: int, size: int) -> tuple[Any, ...]:
    return layout.unpack(_read_at(stream, offset, layout.size, size))


def _read_at(stream: IO[bytes], offset: int, length: int, size: int) -> bytes:
    # Checked before reading so that a garbage length never allocates gigabytes.
    if offset < 0 or length < 0 or offset + length > size:
        raise _PastTheEnd(f"{length} bytes at {offset} run past the end of the file")
    stream.seek(offset)
    data = stream.read(length)
    if len(data) != length:
        raise _PastTheEnd(f"short read at {offset}")
    return data


def _file_offset(loads: list[_Load], address: int) -> int:
    for vaddr, filesz, offset in loads:
        if vaddr <= address < vaddr + filesz:
            return offset + address - vaddr
    raise ValueError(f"address {address:#x} lies in no PT_LOAD segment")


def _cstring(strtab: _Strings, offset: int) -> str:
    # fsdecode, as os.listdir does, so that a non-UTF-8 RPATH still names the same folders.
    return os.fsdecode(strtab.cstring(offset))
