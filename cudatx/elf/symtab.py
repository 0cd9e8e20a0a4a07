"""The dynamic symbol table read column by column: which entries define a symbol, which refer
to one, and the keys of the names they point at.

A torch, triton or cuSPARSELt library has 50,000 to 140,000 entries, and a Python loop over
them cost half a second for each. Here every field is cut out of the table as a column of
bytes (a slice with a step), classified a byte at a time by `bytes.translate`, and columns
are combined as integers, so no Python code runs per entry: only C does, in the slicing,
the translation, `itertools.compress` and `map`. The rules are glibc's check_match
(elf/dl-lookup.c), as cudatx.elf.exports applies them name by name; tests/elf/test_elf.py
checks both against readelf.
"""

from __future__ import annotations

import array
import itertools
import operator
import struct
import sys
from collections.abc import Callable, Iterable
from typing import NamedTuple

# Symbol types a definition may have (check_match's ALLOWED_STT): NOTYPE, OBJECT, FUNC,
# COMMON, TLS, GNU_IFUNC; bindings that define (GLOBAL, WEAK, GNU_UNIQUE).
ALLOWED_STT = frozenset((0, 1, 2, 5, 6, 10))
DEFINING_BIND = frozenset((1, 2, 10))
STB_WEAK = 2
STT_TLS = 6
SHN_UNDEF = 0
SHN_ABS = 0xFFF1
VERSYM_HIDDEN = 0x8000


class Sym(NamedTuple):
    """The fields of one Elf32_Sym or Elf64_Sym a lookup reads."""

    name: int  # st_name
    info: int
    other: int
    shndx: int
    value: int

    def defines(self) -> bool:
        """check_match and do_lookup_x short of the name and the version: a section (or
        absolute, or TLS) and a value, an allowed type, a defining binding, and a visibility
        that does not bind locally (dl_symbol_visibility_binds_local_p)."""
        if self.shndx == SHN_UNDEF:
            return False
        if self.value == 0 and self.shndx != SHN_ABS and self.info & 0xF != STT_TLS:
            return False
        return (
            self.info & 0xF in ALLOWED_STT
            and self.info >> 4 in DEFINING_BIND
            and self.other & 3 not in (1, 2)
        )


def sym_reader(*, wide: bool, order: str) -> tuple[struct.Struct, Callable[[bytes, int], Sym]]:
    """(the struct of one entry, a reader of the entry at an offset of a buffer)."""
    if wide:  # st_name, st_info, st_other, st_shndx, st_value
        layout = struct.Struct(f"{order}IBBHQ")

        def read(raw: bytes, at: int) -> Sym:
            return Sym(*layout.unpack_from(raw, at))

    else:  # st_name, st_value, st_size, st_info, st_other, st_shndx
        layout = struct.Struct(f"{order}IIIBBH")

        def read(raw: bytes, at: int) -> Sym:
            name, value, _, info, other, shndx = layout.unpack_from(raw, at)
            return Sym(name, info, other, shndx, value)

    return layout, read


def _table(test: Iterable[bool]) -> bytes:
    """A bytes.translate table mapping each byte value to 1 where `test` holds, else 0."""
    return bytes(int(t) for t in test)


_DEFINES = _table(b & 0xF in ALLOWED_STT and b >> 4 in DEFINING_BIND for b in range(256))
_TLS = _table(b & 0xF == STT_TLS for b in range(256))
_STRONG = _table(b >> 4 == 1 for b in range(256))  # STB_GLOBAL: a reference that must bind
_WEAK = _table(b >> 4 == STB_WEAK for b in range(256))
# STV_INTERNAL and STV_HIDDEN bind locally (dl_symbol_visibility_binds_local_p).
_EXPORTED = _table(b & 3 not in (1, 2) for b in range(256))
_NONZERO = _table(b != 0 for b in range(256))
_ZERO = _table(b == 0 for b in range(256))
_IS_F1 = _table(b == 0xF1 for b in range(256))
_IS_FF = _table(b == 0xFF for b in range(256))
_BELOW_3 = _table(b < 3 for b in range(256))  # low byte of a version index
_NOT_7F = _table(b & 0x7F == 0 for b in range(256))  # high byte, the hidden bit aside
_SHOWN = _table(not b & 0x80 for b in range(256))  # high byte: not VERSYM_HIDDEN


class Layout(NamedTuple):
    """Where each field of an Elf32_Sym or Elf64_Sym lies in an entry of `entry` bytes."""

    entry: int
    little: bool
    info: int
    other: int
    shndx: int  # two bytes
    value: int
    value_size: int

    @classmethod
    def of(cls, *, wide: bool, little: bool, entry: int) -> Layout:
        if wide:  # st_name, st_info, st_other, st_shndx, st_value, st_size
            return cls(entry, little, info=4, other=5, shndx=6, value=8, value_size=8)
        # st_name, st_value, st_size, st_info, st_other, st_shndx
        return cls(entry, little, info=12, other=13, shndx=14, value=4, value_size=4)


def and_masks(*masks: bytes) -> bytes:
    """Masks of 0 and 1 bytes, combined byte by byte (as integers: one C operation)."""
    out = int.from_bytes(masks[0], "little")
    for mask in masks[1:]:
        out &= int.from_bytes(mask, "little")
    return out.to_bytes(len(masks[0]), "little")


def _or(*masks: bytes) -> bytes:
    out = 0
    for mask in masks:
        out |= int.from_bytes(mask, "little")
    return out.to_bytes(len(masks[0]), "little")


def not_mask(mask: bytes) -> bytes:
    return mask.translate(_ZERO)


class Columns(NamedTuple):
    """Per entry (the null symbol included): where its name starts, and masks of 0 and 1."""

    names: list[int]  # st_name
    defines: bytes  # a definition check_match accepts
    strong: bytes  # an undefined, non-weak reference with a name
    weak: bytes  # an undefined weak reference with a name


def columns(raw: bytes, layout: Layout, count: int) -> Columns:
    step = layout.entry

    def column(at: int) -> bytes:
        return raw[at : count * step : step]

    names = _names(raw, layout, count)
    info, other = column(layout.info), column(layout.other)
    lo, hi = column(layout.shndx), column(layout.shndx + 1)
    if not layout.little:
        lo, hi = hi, lo
    section = _or(lo, hi).translate(_NONZERO)  # st_shndx != SHN_UNDEF
    absolute = and_masks(lo.translate(_IS_F1), hi.translate(_IS_FF))
    valued = _or(*(column(layout.value + k) for k in range(layout.value_size)))
    # check_match: no value and neither absolute nor TLS is no definition.
    has_value = _or(valued.translate(_NONZERO), absolute, info.translate(_TLS))
    defines = and_masks(section, has_value, info.translate(_DEFINES), other.translate(_EXPORTED))
    named = _or(*(column(k) for k in range(4))).translate(_NONZERO)
    undefined = and_masks(not_mask(section), named)
    return Columns(
        names=names,
        defines=defines,
        strong=and_masks(undefined, info.translate(_STRONG)),
        weak=and_masks(undefined, info.translate(_WEAK)),
    )


def _names(raw: bytes, layout: Layout, count: int) -> list[int]:
    """st_name of every entry: the table as 32-bit words, every entry/4-th of them (the
    caller sees that an entry is a whole number of words)."""
    words = array.array("I")
    words.frombytes(raw[: count * layout.entry])
    names = words[:: layout.entry // 4]
    if layout.little != (sys.byteorder == "little"):
        names.byteswap()
    return names.tolist()


def version_masks(versym: array.array[int]) -> tuple[bytes, bytes]:
    """From `.gnu.version`, in this machine's byte order: (index below 3, not hidden) per
    entry."""
    raw = versym.tobytes()
    lo, hi = raw[0::2], raw[1::2]
    if sys.byteorder != "little":
        lo, hi = hi, lo
    return and_masks(lo.translate(_BELOW_3), hi.translate(_NOT_7F)), hi.translate(_SHOWN)


def names_of(offsets: list[int], strtab: bytes) -> list[bytes]:
    """The names at `offsets` in `strtab`: every string that starts after a NUL cut out in
    one C pass, then picked by offset; a name that is the tail of a longer one (the link
    editor merges suffixes) is cut out on its own."""
    pieces = strtab.split(b"\0")
    ends = map(operator.add, map(len, pieces), itertools.repeat(1))  # each with its NUL
    starting = dict(zip(itertools.accumulate(ends, initial=0), pieces, strict=False))
    found = list(map(starting.get, offsets))
    if None not in found:
        return found  # type: ignore[return-value]  # no None: every one started a string
    return [n if n is not None else name_at(o, strtab) for n, o in zip(found, offsets, strict=True)]


def name_at(offset: int, strtab: bytes) -> bytes:
    if not 0 <= offset < len(strtab):
        raise ValueError(f"string offset {offset} is outside the dynamic string table")
    end = strtab.find(b"\0", offset)
    return strtab[offset : end if end >= 0 else len(strtab)]
