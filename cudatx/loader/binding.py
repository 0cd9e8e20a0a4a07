"""What glibc checks after every name of a dlopen is found: versions, then symbols.

Following glibc 2.36:

- elf/dl-open.c dl_open_worker_begin: once _dl_map_object_deps has mapped the new objects,
  _dl_check_map_versions runs for each of them in the order of the dlopen's search list,
  and then every new object is relocated, under RTLD_NOW binding every symbol;
- elf/dl-version.c: each Elf_Vernaux of an object must name a version that the object its
  Elf_Verneed names (found by name among the loaded objects, find_needed) defines in
  DT_VERDEF, or the load fails with "version `V' not found (required by F)", unless the
  need is weak (VER_FLG_WEAK); a provider with no DT_VERDEF at all passes (glibc says "no
  version information available" only when verbose, which a dlopen never is);
- elf/dl-object.c _dl_new_object and elf/dl-lookup.c _dl_lookup_symbol_x: a new object's
  lookup scope is the global scope (the executable's search list, to which RTLD_GLOBAL
  loads append theirs) and then the search list of the object the dlopen opened; each
  non-weak undefined symbol must find a definition there (check_match: `sym@@V` and
  `sym@V` both answer a reference to V, an unversioned definition answers any reference
  that is not hidden, an unversioned reference takes the base or first version, or the
  only non-hidden one), or the load fails with "undefined symbol: S, version V".

Deliberate deviations (also listed in README.md):
- the symbols checked are every undefined symbol of .dynsym, not the relocations that
  name them; where several fail, the one named is the first of the object relocated first
  (the search list read backwards, standing for l_initfini's order), in .dynsym order;
- lazy binding is not modelled: a load that is not RTLD_NOW (a library's own dlopen at run
  time) has its versions checked and its symbols only if the object asks for BIND_NOW; a
  symbol a lazy load misses fails when first called, which cudatx does not predict;
- IFUNC resolvers, copy relocations, protected symbols (_dl_check_protected_symbol),
  STB_GNU_UNIQUE's table and RTLD_DEEPBIND are not modelled: none decides whether a
  symbol binds;
- where the scope holds one of the NVIDIA driver's libraries, which cudatx never resolves
  or reads, a symbol nothing else defines is judged only if the driver could not define
  it: versioned for a file read here, or a C++ name (the driver's libraries export C
  functions); where it holds an object whose symbols cannot be read, no symbol of that
  load is judged at all.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from cudatx.elf.exports import Definitions, Hashed, Table
from cudatx.models import ElfInfo

# DT_FLAGS DF_BIND_NOW, DT_FLAGS_1 DF_1_NOW: the object's relocations are done at load
# whatever the dlopen's mode (elf/get-dynamic-info.h sets l_info for both).
DF_BIND_NOW = 0x8
DF_1_NOW = 0x1

Reference = tuple[str, str | None, str | None]  # name, version, the version's file


def binds_now(info: ElfInfo) -> bool:
    return bool(info.flags & DF_BIND_NOW or info.flags_1 & DF_1_NOW)


def version_message(provider: str, version: str, needer: str) -> str:
    """glibc's dlerror for a missing version (elf/dl-version.c match_symbol)."""
    return f"{provider}: version `{version}' not found (required by {needer})"


def symbol_message(needer: str, name: str, version: str | None) -> str:
    """glibc's dlerror for a symbol nothing binds (elf/dl-lookup.c _dl_lookup_symbol_x)."""
    return f"{needer}: undefined symbol: {name}" + (f", version {version}" if version else "")


def missing_versions(info: ElfInfo, file: str, provider: ElfInfo) -> list[str]:
    """The versions `info` needs from `file` that `provider` lacks, weak ones left out."""
    if provider.version_defs is None:
        return []  # no version information: glibc accepts it (a warning only when verbose)
    defined = set(provider.version_defs)
    out: list[str] = []
    for need in info.version_needs:
        if need.file == file:
            out += [v for v in need.versions if v not in defined and v not in need.weak]
    return out


def key(name: str, version: str | None) -> bytes:
    """A reference as the lookups take it: b"name", or b"name@V"."""
    return os.fsencode(name if version is None else f"{name}@{version}")


def unbound_keys(references: Iterable[Reference], scope: Sequence[Definitions]) -> set[bytes]:
    """The keys of `references` that no object of `scope` defines.

    Whether a reference binds does not depend on which object of the scope answers it, so
    the objects are asked in the order that costs least (_cost), not glibc's: those read
    into sets first (one intersection each), those asked through their hash table last,
    about what is still unbound.
    """
    plain: set[bytes] = set()
    versioned: dict[bytes, bytes] = {}
    for name, version, _ in references:
        if version is None:
            plain.add(os.fsencode(name))
        else:
            versioned[key(name, version)] = os.fsencode(name)
    for exports in sorted(scope, key=_cost):
        if not plain and not versioned:
            break
        if plain:
            plain -= exports.bind_plain(plain)
        if versioned:
            for bound in exports.bind_versioned(versioned):
                del versioned[bound]
    return plain | versioned.keys()


def _cost(exports: Definitions) -> int:
    """The order unbound_keys asks in: objects with versions of their own first (libc,
    libstdc++: they answer most versioned references, which then ask no one else), the
    other objects read into sets, those asked through their hash table last."""
    if isinstance(exports, Hashed):
        return 2
    return 0 if isinstance(exports, Table) and exports.exact else 1


def unbound(
    references: Iterable[Reference],
    missing: set[bytes],
    *,
    opaque: bool,
    readable: Iterable[str] = (),
    unmapped: bool = False,
) -> list[tuple[str, str | None]]:
    """The `references` (Symbols.references: .dynsym order) among `missing`
    (unbound_keys), as (name, version). `opaque`: the scope holds an object whose symbols are
    unknown, which could define any C name; `readable` then names the files (sonames)
    whose versions only known objects can define. `unmapped`: a name of the load was not
    found at all, and what it would have mapped could define any name, C++ ones too."""
    known = set(readable)
    out: list[tuple[str, str | None]] = []
    for name, version, file in references:
        if key(name, version) not in missing:
            continue
        # The unknown object could define a C name, and a version of a file not read here.
        unknowable = version is None or file is None or file not in known
        if unknowable and (unmapped or (opaque and not name.startswith("_Z"))):
            continue
        out.append((name, version))
    return out


def provides(info: ElfInfo, exports: Definitions | None, missing: Iterable[str]) -> bool | None:
    """Whether an object with these facts has every one of `missing` (as Resolution.missing
    spells them: "`V'", "S@V", "S"); None where its symbols cannot be read."""
    for item in missing:
        if item.startswith("`"):
            version = item.strip("`'")
            if info.version_defs is not None and version not in info.version_defs:
                return False
            continue
        if exports is None:
            return None
        name, _, version = item.partition("@")
        if version:
            asked = {os.fsencode(item): os.fsencode(name)}
            if not exports.bind_versioned(asked):
                return False
        elif not exports.bind_plain({os.fsencode(name)}):
            return False
    return True


def split_message(detail: str) -> tuple[str, str]:
    """(the object glibc names, the rest) of a version or symbol message."""
    text = detail.removeprefix("cannot load: ")
    for mark in (": version `", ": undefined symbol: "):
        head, found, _ = text.partition(mark)
        if found:
            return head, text[len(head) + 2 :]
    return "", text
