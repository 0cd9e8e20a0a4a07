"""What an object defines, asked name by name as glibc's symbol lookup asks (elf/dl-lookup.c).

A symbol check asks, for the names its references carry, which of them an object in the
lookup scope defines. Two ways of answering, chosen per object by its size
(cudatx.elf.reader.read_exports):

- `Table`: every definition of the object read once into sets of names; a question is a set
  intersection, in C. Right for the many small objects every reference passes by (libc,
  libstdc++, libpython, most NVIDIA libraries), where glibc's own lookup would be asked the
  same question thousands of times.
- `Hashed`: the object's own DT_GNU_HASH table, walked for each name as do_lookup_x walks it
  (the Bloom filter, the bucket, the chain, then check_match on each entry of the same hash).
  Right for the few objects that export 50,000 to 140,000 symbols (libtorch_cpu, triton,
  cuSPARSELt): reading every name of theirs cost more than all the lookups a check makes.

Both apply the same rules (check_match, after glibc 2.36), so they answer alike:
- a definition has a section (or is absolute or TLS) and a value, a type of ALLOWED_STT, a
  binding of GLOBAL, WEAK or GNU_UNIQUE, and a visibility that is not hidden or internal
  (do_lookup_x, dl_symbol_visibility_binds_local_p);
- a reference to version V binds to a definition of V (`sym@V` or `sym@@V`), or to one of no
  version of the object's own that is not hidden (the base version is not available for
  matching, _dl_check_map_versions);
- a reference with no version binds to a definition of index 0, 1 or 2 (none, the base, the
  first version), or else to the only non-hidden definition of a later version.
"""

from __future__ import annotations

import array
import functools
import sys
from collections.abc import Mapping
from typing import NamedTuple

from cudatx.elf.symtab import VERSYM_HIDDEN, sym_reader


@functools.lru_cache(maxsize=1 << 16)
def gnu_hash(name: bytes) -> int:
    """dl_new_hash (elf/dl-new-hash.h): h = h * 33 + c from 5381, in 32 bits. Two bytes a
    step: the same sum, half the steps of Python code."""
    h = 5381
    if len(name) & 1:
        h = (h * 33 + name[0]) & 0xFFFFFFFF
        name = name[1:]
    pairs = _pairs()
    for word in memoryview(name).cast("H"):
        h = (h * 1089 + pairs[word]) & 0xFFFFFFFF
    return h


@functools.cache
def _pairs() -> list[int]:
    """Each 16-bit word of two name bytes (a, b), as memoryview.cast("H") reads it on this
    machine, to a * 33 + b; made when first needed (a warm run hashes no name)."""
    if sys.byteorder == "little":
        return [(w & 0xFF) * 33 + (w >> 8) for w in range(1 << 16)]
    return [(w >> 8) * 33 + (w & 0xFF) for w in range(1 << 16)]


class Definitions:
    """The lookups a symbol check makes of one object."""

    def bind_plain(self, names: set[bytes]) -> set[bytes]:
        """The names of `names` a reference without a version binds to here."""
        raise NotImplementedError

    def bind_versioned(self, refs: Mapping[bytes, bytes]) -> set[bytes]:
        """Of `refs` ("name@V" -> "name"), those a reference to that version binds to here."""
        raise NotImplementedError


class Table(Definitions):
    """Every definition as sets: `exact` "name@V" for each definition of version V, `plain`
    the names an unversioned reference binds to, `loose` those a reference to another
    version binds to (None: the same as `plain`, an object with no versions)."""

    def __init__(
        self, exact: frozenset[bytes], plain: frozenset[bytes], loose: frozenset[bytes] | None
    ) -> None:
        self.exact = exact
        self.plain = plain
        self.loose = plain if loose is None else loose

    def bind_plain(self, names: set[bytes]) -> set[bytes]:
        return names & self.plain

    def bind_versioned(self, refs: Mapping[bytes, bytes]) -> set[bytes]:
        found = refs.keys() & self.exact
        loose = self.loose.intersection(refs.values())
        if loose:
            found.update(key for key, name in refs.items() if name in loose)
        return found


class Entries(NamedTuple):
    """The dynamic symbol table as bytes, with what a lookup reads beside it."""

    raw: bytes  # .dynsym, `total` entries
    entry: int
    wide: bool  # ELFCLASS64
    order: str  # "<" or ">"
    total: int  # entries of .dynsym
    strtab: bytes
    versym: array.array[int] | None  # .gnu.version, this machine's byte order
    defs: dict[int, bytes]  # DT_VERDEF: version index -> name, the base included


class GnuHash(NamedTuple):
    """DT_GNU_HASH, as _dl_setup_hash reads it."""

    nbuckets: int
    symoffset: int
    shift: int
    bloom: array.array[int]  # words of the ELF class's size
    buckets: array.array[int]
    chain: array.array[int]  # hash values of symbols symoffset.., low bit ends a chain


class Hashed(Definitions):
    """Lookups through the object's own DT_GNU_HASH table (do_lookup_x)."""

    def __init__(self, entries: Entries, table: GnuHash) -> None:
        self._e = entries
        self._h = table
        self._bits = 64 if entries.wide else 32
        _, self._sym = sym_reader(wide=entries.wide, order=entries.order)
        self._found: dict[bytes, list[int]] = {}

    def bind_plain(self, names: set[bytes]) -> set[bytes]:
        return {name for name in names if self._plain(name)}

    def bind_versioned(self, refs: Mapping[bytes, bytes]) -> set[bytes]:
        return {key for key, name in refs.items() if self._versioned(name, key)}

    def _plain(self, name: bytes) -> bool:
        versym = self._e.versym
        later = 0
        for index in self.defining(name):
            if versym is None:
                return True
            number = versym[index] & 0x7FFF
            if number < 3:
                return True
            if not versym[index] & VERSYM_HIDDEN:
                later += 1
        return later == 1

    def _versioned(self, name: bytes, key: bytes) -> bool:
        versym, defs = self._e.versym, self._e.defs
        version = key[len(name) + 1 :]
        for index in self.defining(name):
            if versym is None:
                return True
            number, hidden = versym[index] & 0x7FFF, versym[index] & VERSYM_HIDDEN
            own = defs.get(number) if number >= 2 else None
            if own == version or (own is None and not hidden):
                return True
        return False

    def defining(self, name: bytes) -> list[int]:
        """Indexes of the symbols named `name` that define it (check_match short of the
        version), found as do_lookup_x finds them."""
        found = self._found.get(name)
        if found is None:
            found = self._found[name] = self._defining(name)
        return found

    def _defining(self, name: bytes) -> list[int]:
        table, bits = self._h, self._bits
        h = gnu_hash(name)
        bloom = table.bloom
        if bloom:  # bitmask_nwords is a power of two: l_gnu_bitmask_idxbits masks
            word = bloom[(h // bits) & (len(bloom) - 1)]
            if not (word >> (h % bits)) & (word >> ((h >> table.shift) % bits)) & 1:
                return []
        index = table.buckets[h % table.nbuckets]
        start = table.symoffset
        if index < start:
            return []  # 0: an empty bucket
        chain = table.chain
        found = []
        at = index - start
        while at < len(chain):
            value = chain[at]
            if (value ^ h) >> 1 == 0 and self._defines(start + at, name):
                found.append(start + at)
            if value & 1:
                break
            at += 1
        return found

    def _defines(self, index: int, name: bytes) -> bool:
        e = self._e
        if index >= e.total:
            return False
        sym = self._sym(e.raw, index * e.entry)
        end = sym.name + len(name)
        if not e.strtab.startswith(name, sym.name) or end >= len(e.strtab) or e.strtab[end]:
            return False
        return sym.defines()
