"""What this machine's dynamic loader does that no ELF file says: asked of ld.so itself.

The system search folders and the subfolders glibc tries inside every search folder
(glibc-hwcaps, and before glibc 2.37 the legacy hwcap and platform folders) depend on how
glibc was built and on the CPU. Rather than guess, cudatx runs the target's own program
interpreter (PT_INTERP) once with `--help` (glibc >= 2.33) and once with LD_DEBUG=libs over a
probe LD_LIBRARY_PATH, and reads what it prints. Where that fails, it falls back to the
folders glibc's Makeconfig gives for the architecture and no subfolders, and says so.
"""

from __future__ import annotations

import os
import re
import subprocess

from cudatx.elf.ldcache import LdCache, cache_flags_for, read_ld_cache
from cudatx.models import ElfInfo, Frozen

_EM_X86_64 = 62
_EM_AARCH64 = 183

# Fallbacks when ld.so cannot be asked: Debian/Ubuntu multiarch layout, which is what
# `ld.so --help` prints on the machines this was written on.
_FALLBACK_DIRS = {
    (64, _EM_X86_64): ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib"),
    (64, _EM_AARCH64): ("/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib", "/usr/lib"),
}
# $LIB expands to glibc's configured slibdir tail; Debian builds set it to the multiarch
# folder (measured with LD_DEBUG=libs on Debian 12, glibc 2.36: "lib/x86_64-linux-gnu").
_LIB = {(64, _EM_X86_64): "lib/x86_64-linux-gnu", (64, _EM_AARCH64): "lib/aarch64-linux-gnu"}
_PLATFORM = {(64, _EM_X86_64): "x86_64", (64, _EM_AARCH64): "aarch64"}

_PROBE_DIR = "/nonexistent/cudatx-probe"
_TIMEOUT_S = 20


class SystemLoader(Frozen, kw_only=False):
    interpreter: str
    default_dirs: tuple[str, ...]
    subdirs: tuple[str, ...]  # tried in order inside every search folder, before the folder
    lib: str
    platform: str
    cache: LdCache
    cache_flags: int | None
    notes: tuple[str, ...] = ()


def _run(argv: list[str], env: dict[str, str]) -> str | None:
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_S,
            env=env,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout + done.stderr


def _default_dirs(help_text: str) -> tuple[str, ...]:
    return tuple(re.findall(r"^\s+(/\S*) \(system search path\)$", help_text, re.MULTILINE))


def _subdirs(debug_text: str) -> tuple[str, ...] | None:
    for line in debug_text.splitlines():
        match = re.search(r"search path=(\S+)\s+\(LD_LIBRARY_PATH\)", line)
        if match is None:
            continue
        # glibc lists a legacy subfolder twice when two capabilities share a name; trying
        # it twice finds nothing new, so keep the first.
        prefix = _PROBE_DIR + "/"
        out = [e[len(prefix) :] for e in match.group(1).split(":") if e.startswith(prefix)]
        return tuple(dict.fromkeys(out))
    return None


def probe_system(executable: ElfInfo) -> SystemLoader:
    key = (executable.elf_class, executable.machine)
    interpreter = executable.interpreter or "/lib64/ld-linux-x86-64.so.2"
    notes: list[str] = []
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    help_text = _run([interpreter, "--help"], env) or ""
    dirs = _default_dirs(help_text)
    if not dirs:
        dirs = _FALLBACK_DIRS.get(key, ("/lib", "/usr/lib"))
        notes.append(f"{interpreter} --help gave no search path; assumed {':'.join(dirs)}")
    debug_text = _run(
        [interpreter, "--list", executable.path],
        {**env, "LD_DEBUG": "libs", "LD_LIBRARY_PATH": _PROBE_DIR},
    )
    subdirs = _subdirs(debug_text or "")
    if subdirs is None:
        subdirs = ()
        notes.append(f"{interpreter} did not show its hwcap subfolders; none are searched")
    return SystemLoader(
        interpreter=interpreter,
        default_dirs=dirs,
        subdirs=subdirs,
        lib=_LIB.get(key, "lib64" if executable.elf_class == 64 else "lib"),
        platform=_PLATFORM.get(key, ""),
        cache=read_ld_cache(),
        cache_flags=cache_flags_for(executable.elf_class, executable.machine),
        notes=tuple(notes),
    )
