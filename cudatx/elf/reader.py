"""Read what glibc's loader reads from an ELF object: header, program headers, dynamic table.

The only module that imports pyelftools, and it uses only its structs: pyelftools'
DynamicSegment walks every section and parses .gnu.hash element by element when it is built,
30-100x slower than the few reads below, and ELFFile rebuilds every struct for each file, which
was half the time of a read before the structs were cached here. Only the bytes needed are
read, since shared libraries reach 1 GB.
"""

from __future__ import annotations

import array
import functools
import itertools
import os
import re
import struct
import sys
import zlib
from collections.abc import Callable
from typing import IO, Any, NamedTuple, TypeVar

from elftools.common.exceptions import ELFError, ELFParseError
from elftools.common.utils import struct_parse
from elftools.construct import ConstructError
from elftools.elf.enums import ENUM_E_MACHINE
from elftools.elf.structs import ELFStructs

from cudatx.digest import pack_keys
from cudatx.errors import ElfReadError
from cudatx.models import ElfInfo, Symbols, VersionNeed
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


class _Elf(NamedTuple):
    """What every reader needs: the identification, the ELF header and the file's size."""

    ident: bytes
    elf_class: int
    header: Any  # pyelftools' Elf_Ehdr container
    structs: ELFStructs
    size: int


def read_elf(path: str) -> ElfInfo:
    """The loader-relevant facts of the ELF object at `path`; raises ElfReadError."""
    return read_object(path)[0]


def read_object(path: str) -> tuple[ElfInfo, tuple[str, ...]]:
    """read_elf's facts and, from the same read, the `PyInit_*` names of the dynamic string table.

    Python imports a file only if it exports `PyInit_<module>`: the names tell an extension
    module from a plain library (`libfoo.so` in a package's lib folder has the ".so" suffix
    too). A whole string of the table is enough, which is cheaper than the symbol table.
    """
    info, strtab = _read(path, functools.partial(_parse_dynamic, path, with_versions=True))
    names: list[str] = []
    start = strtab.find(b"PyInit_")
    while start >= 0:
        end = strtab.find(b"\0", start)
        if end < 0:
            break  # not NUL-terminated: not a whole string
        # The table starts with a NUL by convention, but do not rely on it for the first string.
        if start == 0 or strtab[start - 1] == 0:
            names.append(os.fsdecode(strtab[start:end]))
        start = strtab.find(b"PyInit_", end)
    return info, tuple(names)


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
    except ElfReadError:
        raise
    except PermissionError:
        raise ElfReadError(path, "permission denied", io=True) from None
    except OSError as exc:
        raise ElfReadError(path, f"cannot read: {exc.strerror or exc}", io=True) from None
    except (ELFError, ConstructError):
        # Every read past EOF surfaces as one of these (struct_parse wraps construct's errors).
        raise ElfReadError(path, "truncated ELF file") from None
    except Exception as exc:
        # Garbage offsets, counts or enum values in a damaged file: never a crash of the scan.
        raise ElfReadError(path, f"malformed ELF: {exc}") from None


def _read_header(path: str, stream: IO[bytes]) -> _Elf:
    ident = stream.read(_EI_NIDENT)
    if not ident.startswith(_MAGIC):
        if ident and len(ident) < len(_MAGIC) and _MAGIC.startswith(ident):
            raise ElfReadError(path, "truncated ELF file")
        raise ElfReadError(path, "not an ELF file")
    if len(ident) < _EI_NIDENT:
        raise ElfReadError(path, "truncated ELF file")
    # pyelftools' structs exist only for these; anything else is damage, not truncation.
    if ident[4] not in (1, 2) or ident[5] not in (1, 2):
        raise ElfReadError(path, f"malformed ELF: EI_CLASS {ident[4]}, EI_DATA {ident[5]}")

    little_endian, elf_class = ident[5] == 1, 32 if ident[4] == 1 else 64
    header = struct_parse(_header_structs(little_endian, elf_class).Elf_Ehdr, stream, 0)
    osabi = header["e_ident"]["EI_OSABI"]
    structs = _structs(little_endian, elf_class, header["e_type"], header["e_machine"], osabi)
    return _Elf(ident, elf_class, header, structs, os.fstat(stream.fileno()).st_size)


class _Dynamic(NamedTuple):
    """The dynamic table of an object: its segments, tags and string table."""

    loads: list[_Load]
    tags: dict[str, int]  # the last value of each single-valued tag
    needed: list[int]  # DT_NEEDED string offsets, in order
    interpreter: str | None
    strtab: bytes


def _dynamic(stream: IO[bytes], elf: _Elf) -> _Dynamic:
    _, _, header, structs, size = elf
    phoff: int = header["e_phoff"]
    phentsize: int = header["e_phentsize"]
    phnum: int = header["e_phnum"]
    if phnum == _PN_XNUM:
        # Too many program headers for e_phnum: the count is in section 0's sh_info.
        phnum = struct_parse(structs.Elf_Shdr, stream, header["e_shoff"])["sh_info"]
    if phnum and phentsize < structs.Elf_Phdr.sizeof():
        raise ValueError(f"e_phentsize {phentsize} is too small")
    if phnum and phoff + phnum * phentsize > size:
        raise ELFParseError("the program headers run past the end of the file")

    loads: list[_Load] = []
    dynamic: Any = None
    interpreter: str | None = None
    for index in range(phnum):
        phdr = struct_parse(structs.Elf_Phdr, stream, phoff + index * phentsize)
        kind = phdr["p_type"]
        if kind == "PT_LOAD":
            loads.append((phdr["p_vaddr"], phdr["p_filesz"], phdr["p_offset"]))
        elif kind == "PT_DYNAMIC":
            dynamic = phdr
        elif kind == "PT_INTERP":
            raw = _read_at(stream, phdr["p_offset"], phdr["p_filesz"], size)
            interpreter = os.fsdecode(raw.split(b"\0", 1)[0])

    needed: list[int] = []
    # glibc keeps one l_info slot per tag, so a repeated single-valued tag: the last one wins.
    tags: dict[str, int] = {}
    if dynamic is not None:
        entry_size = structs.Elf_Dyn.sizeof()
        start: int = dynamic["p_offset"]
        for offset in range(start, start + dynamic["p_filesz"] - entry_size + 1, entry_size):
            entry = struct_parse(structs.Elf_Dyn, stream, offset)
            tag = entry["d_tag"]
            if tag == "DT_NULL":
                break
            if tag == "DT_NEEDED":
                needed.append(entry["d_val"])
            elif isinstance(tag, str):
                tags[tag] = entry["d_val"]

    strtab = b""
    if "DT_STRTAB" in tags:
        if "DT_STRSZ" not in tags:
            raise ValueError("DT_STRTAB without DT_STRSZ")
        strtab_offset = _file_offset(loads, tags["DT_STRTAB"])
        strtab = _read_at(stream, strtab_offset, tags["DT_STRSZ"], size)
    return _Dynamic(loads, tags, needed, interpreter, strtab)


def _parse_dynamic(
    path: str, stream: IO[bytes], elf: _Elf, *, with_versions: bool
) -> tuple[ElfInfo, bytes]:
    """The ElfInfo of the object and its raw dynamic string table."""
    ident, elf_class, header, structs, _ = elf
    machine, elf_type = header["e_machine"], header["e_type"]
    loads, tags, needed, interpreter, strtab = _dynamic(stream, elf)

    def string(key: str) -> str | None:
        return _cstring(strtab, tags[key]) if key in tags else None

    version_needs: list[VersionNeed] = []
    version_defs: tuple[str, ...] | None = None
    if with_versions:
        version_needs = [
            VersionNeed(file=file, versions=tuple(n for n, _, _ in auxes), weak=weak)
            for file, auxes in _verneed(stream, structs, loads, tags, strtab)
            for weak in [tuple(n for n, flags, _ in auxes if flags & _VER_FLG_WEAK)]
        ]
        if "DT_VERDEF" in tags:
            version_defs = tuple(_verdef(stream, structs, loads, tags, strtab).values())

    info = ElfInfo(
        path=path,
        elf_class=elf_class,
        data=ident[5],
        machine=ENUM_E_MACHINE[machine] if isinstance(machine, str) else int(machine),
        elf_type=elf_type if isinstance(elf_type, str) else f"{elf_type:#x}",
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
    return info, strtab


def _verneed(
    stream: IO[bytes], structs: ELFStructs, loads: list[_Load], tags: dict[str, int], strtab: bytes
) -> list[tuple[str, list[tuple[str, int, int]]]]:
    """DT_VERNEED: each file and its (version name, vna_flags, vna_other) entries.

    Bounded by the counts (as readelf does); glibc follows vn_next/vna_next until 0 and
    ignores them, which reads the same in any object the link editor wrote.
    """
    out: list[tuple[str, list[tuple[str, int, int]]]] = []
    if "DT_VERNEED" not in tags:
        return out
    offset = _file_offset(loads, tags["DT_VERNEED"])
    for _ in range(tags.get("DT_VERNEEDNUM", 0)):
        verneed = struct_parse(structs.Elf_Verneed, stream, offset)
        auxes: list[tuple[str, int, int]] = []
        aux_offset = offset + verneed["vn_aux"]
        for _ in range(verneed["vn_cnt"]):
            vernaux = struct_parse(structs.Elf_Vernaux, stream, aux_offset)
            auxes.append(
                (_cstring(strtab, vernaux["vna_name"]), vernaux["vna_flags"], vernaux["vna_other"])
            )
            if not vernaux["vna_next"]:
                break
            aux_offset += vernaux["vna_next"]
        out.append((_cstring(strtab, verneed["vn_file"]), auxes))
        if not verneed["vn_next"]:
            break
        offset += verneed["vn_next"]
    return out


def _verdef(
    stream: IO[bytes], structs: ELFStructs, loads: list[_Load], tags: dict[str, int], strtab: bytes
) -> dict[int, str]:
    """DT_VERDEF: version index (vd_ndx) -> name, the base version (VER_FLG_BASE) included;
    its index is the base's (1) in every object the link editor writes."""
    out: dict[int, str] = {}
    offset = _file_offset(loads, tags["DT_VERDEF"])
    for _ in range(tags.get("DT_VERDEFNUM", 0)):
        verdef = struct_parse(structs.Elf_Verdef, stream, offset)
        aux = struct_parse(structs.Elf_Verdaux, stream, offset + verdef["vd_aux"])
        out[verdef["vd_ndx"] & 0x7FFF] = _cstring(strtab, aux["vda_name"])
        if not verdef["vd_next"]:
            break
        offset += verdef["vd_next"]
    return out


def read_symbols(path: str) -> Symbols:
    """The dynamic symbols of the object at `path`, sorted as glibc's lookup asks about them
    (cudatx.models.Symbols); raises ElfReadError as read_elf does."""
    return _read(path, _parse_symbols)


# Symbol types a definition may have (check_match's ALLOWED_STT): NOTYPE, OBJECT, FUNC,
# COMMON, TLS, GNU_IFUNC; bindings that define (GLOBAL, WEAK, GNU_UNIQUE).
_ALLOWED_STT = frozenset((0, 1, 2, 5, 6, 10))
_DEFINING_BIND = frozenset((1, 2, 10))
_STB_WEAK = 2
_STT_TLS = 6
_SHN_UNDEF = 0
_SHN_ABS = 0xFFF1
_VER_FLG_WEAK = 0x2
_VERSYM_HIDDEN = 0x8000


def _parse_symbols(stream: IO[bytes], elf: _Elf) -> Symbols:
    loads, tags, _, _, strtab = _dynamic(stream, elf)
    if "DT_SYMTAB" not in tags:
        return Symbols()
    little = elf.ident[5] == 1
    order = "<" if little else ">"
    wide = elf.elf_class == 64
    entry = tags.get("DT_SYMENT") or (24 if wide else 16)
    symtab = _file_offset(loads, tags["DT_SYMTAB"])
    count = _symbol_count(stream, elf, loads, tags, order)
    raw = _read_at(stream, symtab, count * entry, elf.size)
    # (st_name, st_info, st_other, st_shndx, st_value) of each entry, unpacked in C.
    if wide:
        layout = struct.Struct(f"{order}IBBHQ{'x' * (entry - 16)}")
        records: Any = layout.iter_unpack(raw)
    else:
        layout = struct.Struct(f"{order}IIxxxxBBH{'x' * (entry - 16)}")
        records = ((n, i, o, x, v) for n, v, i, o, x in layout.iter_unpack(raw))
    versym: array.array[int] | None = None
    if "DT_VERSYM" in tags:
        versym = array.array("H")
        at = _file_offset(loads, tags["DT_VERSYM"])
        versym.frombytes(_read_at(stream, at, 2 * count, elf.size))
        if little != (sys.byteorder == "little"):
            versym.byteswap()
    structs = elf.structs
    defs = _verdef(stream, structs, loads, tags, strtab) if "DT_VERDEF" in tags else {}
    needs = {
        other & 0x7FFF: (name, file)
        for file, auxes in _verneed(stream, structs, loads, tags, strtab)
        for name, _, other in auxes
    }
    # Definitions are keyed from their bytes (cudatx.digest.symbol_key): a torch library
    # has 75,000 of them, and decoding each name cost more than all the rest. Every string
    # that starts after a NUL is keyed at once, in C; a name that shares the tail of a
    # longer one (the link editor merges suffixes) is cut out on its own.
    suffix = {number: b"@" + os.fsencode(name) for number, name in defs.items()}
    find, size = strtab.find, len(strtab)
    crc, adler = zlib.crc32, zlib.adler32
    pieces = strtab.split(b"\0")
    starts = itertools.accumulate((len(p) + 1 for p in pieces), initial=0)
    keys = [c << 32 | a for c, a in zip(map(crc, pieces), map(adler, pieces), strict=True)]
    keyed = dict(zip(starts, keys, strict=False))  # one start more than pieces: the end

    def key_at(offset: int) -> int:
        found = keyed.get(offset)
        if found is None:
            if not 0 <= offset < size:
                raise ValueError(f"string offset {offset} is outside the dynamic string table")
            end = find(b"\0", offset)
            name = strtab[offset : end if end >= 0 else size]
            found = crc(name) << 32 | adler(name)
        return found

    rows = list(records)
    if versym is None and not defs:
        # Unversioned (torch's libraries): every definition answers a plain reference.
        get = keyed.get
        plain_keys = [
            key if (key := get(n)) is not None else key_at(n)
            for n, info, other, shndx, value in rows[1:]
            if shndx != _SHN_UNDEF
            and (value or shndx == _SHN_ABS or info & 0xF == _STT_TLS)
            and info & 0xF in _ALLOWED_STT
            and info >> 4 in _DEFINING_BIND
            and other & 3 not in (1, 2)
        ]
        refs = [
            (_cstring(strtab, n), info >> 4)
            for n, info, _, shndx, _ in rows[1:]
            if shndx == _SHN_UNDEF and n and info >> 4 in (1, _STB_WEAK)
        ]
        return Symbols(
            undefined=tuple(name for name, bind in refs if bind != _STB_WEAK),
            weak_undefined=tuple(name for name, bind in refs if bind == _STB_WEAK),
            plain=pack_keys(plain_keys),
        )
    undefined: list[str] = []
    weak: list[str] = []
    exact: list[int] = []
    plain: list[int] = []
    loose: list[int] = []
    # Unversioned lookups accept the only non-hidden definition of index >= 3 in an object
    # ("exactly one versioned symbol", do_lookup_x); count them per name.
    later: dict[int, int] = {}
    for index, (st_name, info, other, shndx, value) in enumerate(rows):
        if not index:
            continue  # the null symbol
        bind = info >> 4
        if shndx == _SHN_UNDEF:
            if bind not in (1, _STB_WEAK) or not st_name:
                continue
            ref = _cstring(strtab, st_name)
            number = versym[index] & 0x7FFF if versym is not None else 1
            if number >= 2 and number in needs:
                version, file = needs[number]
                ref = f"{ref}@{version}@{file}"
            elif number >= 2 and number in defs:
                ref = f"{ref}@{defs[number]}@"
            (weak if bind == _STB_WEAK else undefined).append(ref)
            continue
        kind = info & 0xF
        # check_match: no value and neither absolute nor TLS is no definition; hidden and
        # internal visibility binds locally (dl_symbol_visibility_binds_local_p).
        if value == 0 and shndx != _SHN_ABS and kind != _STT_TLS:
            continue
        if kind not in _ALLOWED_STT or bind not in _DEFINING_BIND or other & 3 in (1, 2):
            continue
        key = key_at(st_name)
        if versym is None:
            plain.append(key)
            continue
        ndx = versym[index]
        number, hidden = ndx & 0x7FFF, ndx & _VERSYM_HIDDEN
        if number >= 2 and number in defs:
            end = find(b"\0", st_name)
            versioned = strtab[st_name : end if end >= 0 else size] + suffix[number]
            exact.append(crc(versioned) << 32 | adler(versioned))
        if number < 3:
            plain.append(key)  # no version, the base, or the first version
            if (number < 2 or number not in defs) and not hidden:
                loose.append(key)
        elif not hidden:
            later[key] = later.get(key, 0) + 1
    if versym is not None:
        plain += [key for key, seen in later.items() if seen == 1]
    return Symbols(
        undefined=tuple(undefined),
        weak_undefined=tuple(weak),
        exact=pack_keys(exact),
        plain=pack_keys(plain),
        loose=pack_keys(loose) if versym is not None else None,
    )


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
    size: int = section["sh_size"]
    return size // (tags.get("DT_SYMENT") or (24 if elf.elf_class == 64 else 16))


def _rodata_sonames(stream: IO[bytes], elf: _Elf) -> tuple[str, ...]:
    rodata = _section(stream, elf, b".rodata")
    if rodata is None or rodata["sh_type"] == "SHT_NOBITS":
        return ()
    data = _read_at(stream, rodata["sh_offset"], rodata["sh_size"], elf.size)
    found = dict.fromkeys(match.group() for match in _RODATA_SONAME.finditer(data))
    return tuple(name.decode("ascii") for name in found)


def _section(stream: IO[bytes], elf: _Elf, name: bytes) -> Any:
    """The header (pyelftools' Elf_Shdr container) of the first section called `name`, or None."""
    header, structs = elf.header, elf.structs
    shoff: int = header["e_shoff"]
    shentsize: int = header["e_shentsize"]
    if not shoff:
        return None
    shnum: int = header["e_shnum"]
    shstrndx: int = header["e_shstrndx"]
    if not shnum or shstrndx == _SHN_XINDEX:
        # Too many sections for the header's fields: section 0 holds the count in sh_size and
        # the index of the section-name string table in sh_link.
        first = struct_parse(structs.Elf_Shdr, stream, shoff)
        shnum = shnum or first["sh_size"]
        if shstrndx == _SHN_XINDEX:
            shstrndx = first["sh_link"]
    if shnum and shentsize < structs.Elf_Shdr.sizeof():
        raise ValueError(f"e_shentsize {shentsize} is too small")
    if shoff + shnum * shentsize > elf.size:
        raise ELFParseError("the section headers run past the end of the file")
    if not shstrndx:  # SHN_UNDEF: the sections have no names
        return None
    if shstrndx >= shnum:
        raise ValueError(f"e_shstrndx {shstrndx} is not a section (of {shnum})")

    names = struct_parse(structs.Elf_Shdr, stream, shoff + shstrndx * shentsize)
    table = _read_at(stream, names["sh_offset"], names["sh_size"], elf.size)
    for index in range(shnum):
        section = struct_parse(structs.Elf_Shdr, stream, shoff + index * shentsize)
        start: int = section["sh_name"]
        end = table.find(b"\0", start)
        # A name offset past the table (damage in some other section) names nothing.
        if table[start : end if end >= 0 else len(table)] == name:
            return section
    return None


@functools.lru_cache(maxsize=4)
def _header_structs(little_endian: bool, elf_class: int) -> ELFStructs:
    structs = ELFStructs(little_endian=little_endian, elfclass=elf_class)
    structs.create_basic_structs()
    return structs


# Keyed by what the structs depend on (e_type, e_machine and EI_OSABI pick enum tables); the
# structs are stateless parsers, so one set serves every file of a kind.
@functools.lru_cache(maxsize=64)
def _structs(
    little_endian: bool, elf_class: int, e_type: Any, machine: Any, osabi: Any
) -> ELFStructs:
    structs = ELFStructs(little_endian=little_endian, elfclass=elf_class)
    structs.create_basic_structs()
    structs.create_advanced_structs(e_type, machine, osabi)
    return structs


def _read_at(stream: IO[bytes], offset: int, length: int, size: int) -> bytes:
    # Checked before reading so that a garbage length never allocates gigabytes.
    if offset < 0 or length < 0 or offset + length > size:
        raise ELFParseError(f"{length} bytes at {offset} run past the end of the file")
    stream.seek(offset)
    data = stream.read(length)
    if len(data) != length:
        raise ELFParseError(f"short read at {offset}")
    return data


def _file_offset(loads: list[_Load], address: int) -> int:
    for vaddr, filesz, offset in loads:
        if vaddr <= address < vaddr + filesz:
            return offset + address - vaddr
    raise ValueError(f"address {address:#x} lies in no PT_LOAD segment")


def _cstring(strtab: bytes, offset: int) -> str:
    if not 0 <= offset < len(strtab):
        raise ValueError(f"string offset {offset} is outside the dynamic string table")
    end = strtab.find(b"\0", offset)
    # fsdecode, as os.listdir does, so that a non-UTF-8 RPATH still names the same folders.
    return os.fsdecode(strtab[offset : end if end >= 0 else len(strtab)])
