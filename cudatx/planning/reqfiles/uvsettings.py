"""uv's settings that make it build what cudatx told it not to: `no-binary`.

cudatx keeps uv from building with `--only-binary :all:` (cudatx.uv.pip_argv), which uv
turns into `NoBuild::All`. A package that `no-binary` names beats it: uv's
`BuildOptions::no_build_package` (crates/uv-configuration/src/build_options.rs) answers
"may build" for a package of `NoBinary::Packages` even under `NoBuild::All` ("Allow `all` to
be overridden by specific binary exclusions"), and every source of `no-binary` is combined
into that one value, none of which cudatx's own words can clear: a requirements file's (and
its includes', and a `--constraints` file's: crates/uv-requirements/src/specification.rs
`extend`s each source's `no_binary`), and the configuration's (crates/uv/src/settings.rs,
`PipSettings::combine`: `[pip] no-binary` and the top-level `no-binary`,
`no-binary-package`). Seen with uv 0.13.9: each of these ran the build backend of an sdist
that had a wheel beside it, under `--only-binary :all:` and under `--no-build`.

A user's `no-binary` says the real install builds that package from source, so a plan of
its wheel would judge another distribution than the one installed: cudatx names the setting
and refuses (NeedsBuild) unless the user passes `--allow-build`, rather than clearing it
(`--no-config` would also drop the configuration's indexes, which decide which wheels are
judged). This module finds the configuration's settings as uv 0.13.9 finds them, and the
requirements files named by variables.

What cannot make uv build, and so is not looked for: `only-binary` and `no-build` (they
only forbid, and uv's `--only-binary` on the command line replaces the configuration's);
UV_NO_BUILD, UV_NO_BUILD_PACKAGE, UV_NO_BINARY and UV_NO_BINARY_PACKAGE, which `uv pip`
does not read (they belong to uv's project commands: crates/uv-cli/src/lib.rs
`BuildOptionsArgs`, crates/uv-settings/src/lib.rs `EnvironmentOptions`; `PipSettings::combine`
takes no build option from the environment; measured with uv 0.13.9:
UV_NO_BINARY_PACKAGE=NAME and UV_NO_BINARY=1 install the wheel); UV_BUILD_CONSTRAINT and
UV_EXCLUDE files (uv takes only their requirements; measured).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cudatx.errors import CudatxError
from cudatx.planning.reqfiles.common import TomlLines, read_text

# clap's BoolishValueParser, which uv's boolean variables go through (UV_NO_CONFIG,
# UV_NO_SYSTEM_CONFIG).
_TRUE = frozenset({"y", "yes", "t", "true", "on", "1"})

# The variables whose value is a list of requirements files `uv pip install` and `sync` read
# as if given on the command line, with their options (crates/uv-cli/src/lib.rs:
# `--constraints` env UV_CONSTRAINT, `--overrides` env UV_OVERRIDE; space-separated).
FILE_VARIABLES = ("UV_CONSTRAINT", "UV_OVERRIDE")

ALL = "every package"  # what `no-binary = true` or `:all:` names


def _truthy(value: str | None) -> bool:
    return value is not None and value.strip().lower() in _TRUE


def config_files(cwd: str, environ: Mapping[str, str]) -> list[str]:
    """The configuration files `uv pip` reads, most important first, as uv 0.13.9 finds them
    (crates/uv/src/lib.rs, where `filesystem` is made): UV_CONFIG_FILE alone where it is
    set; none under UV_NO_CONFIG; else the project's (crates/uv-settings/src/lib.rs
    `FilesystemOptions::find`: from the working folder up, the first folder with a
    `uv.toml`, or a `pyproject.toml` with a `[tool.uv]` table), the user's
    (`$XDG_CONFIG_HOME/uv/uv.toml`, else `~/.config/uv/uv.toml`: crates/uv-dirs
    `user_config_dir`) and the system's (the first `uv/uv.toml` of `$XDG_CONFIG_DIRS`, by
    default /etc/xdg, else /etc/uv/uv.toml: `system_config_file`), the last skipped under
    UV_NO_SYSTEM_CONFIG.

    One deviation, on the side of reading more: inside a workspace uv starts the project's
    search from the workspace root, here from the working folder (a nearer `uv.toml` inside
    a member is read here and not by uv)."""
    given = environ.get("UV_CONFIG_FILE", "")
    if given:
        return [os.path.join(cwd, given)]
    if _truthy(environ.get("UV_NO_CONFIG")):
        return []
    out: list[str] = []
    folder = os.path.abspath(cwd)
    while True:
        found = _project_config(folder)
        if found is not None:
            out.append(found)
            break
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    home = environ.get("XDG_CONFIG_HOME", "")
    if not os.path.isabs(home):  # the XDG spec: a relative path is ignored
        home = os.path.join(environ.get("HOME", os.path.expanduser("~")), ".config")
    user = os.path.join(home, "uv", "uv.toml")
    if os.path.isfile(user):
        out.append(user)
    if not _truthy(environ.get("UV_NO_SYSTEM_CONFIG")):
        dirs = environ.get("XDG_CONFIG_DIRS") or "/etc/xdg"
        for entry in dirs.split(":"):
            if not entry:
                break  # uv: take_while the entry is not empty
            candidate = os.path.join(entry, "uv", "uv.toml")
            if os.path.isfile(candidate):
                out.append(candidate)
                break
        else:
            if os.path.exists("/etc/uv/uv.toml"):
                out.append("/etc/uv/uv.toml")
    return out


def _project_config(folder: str) -> str | None:
    """uv's `FilesystemOptions::from_directory`: a `uv.toml`, else a `pyproject.toml` with
    a `[tool.uv]` table (one that does not parse is skipped, as uv skips it with a
    warning)."""
    toml = os.path.join(folder, "uv.toml")
    if os.path.isfile(toml):
        return toml
    pyproject = os.path.join(folder, "pyproject.toml")
    if os.path.isfile(pyproject) and _table(pyproject) is not None:
        return pyproject
    return None


def _table(path: str) -> tuple[dict[str, Any], str] | None:
    """uv's settings in `path` (a uv.toml, or a pyproject.toml's `[tool.uv]`), and its
    text; None where it has none or cannot be read (uv then fails, or skips it)."""
    import tomllib

    try:
        text = read_text(path)
        doc = tomllib.loads(text)
    except (CudatxError, tomllib.TOMLDecodeError, RecursionError):
        return None
    table = uv_table(path, doc)
    return None if table is None else (table, text)


def uv_table(path: str, doc: Mapping[str, Any]) -> dict[str, Any] | None:
    """A pyproject.toml's `[tool.uv]`; a uv.toml's whole document."""
    if os.path.basename(path) != "pyproject.toml":
        return dict(doc)
    tool = doc.get("tool")
    table = tool.get("uv") if isinstance(tool, dict) else None
    return table if isinstance(table, dict) else None


@dataclass(frozen=True)
class _Said:
    """One file's `no-binary` settings, each with where it is said (`path:line: key = value`)."""

    flag: tuple[bool, str] | None  # the top-level `no-binary`
    packages: tuple[tuple[str, ...], str] | None  # the top-level `no-binary-package`
    pip: tuple[tuple[str, ...], str] | None  # `[pip] no-binary`: names, `:all:`, `:none:`


def settings_of(path: str) -> _Said:
    """A uv settings file's `no-binary` settings (a uv.toml, or a pyproject.toml's
    `[tool.uv]`); none where it has none or cannot be read."""
    found = _table(path)
    if found is None:
        return _Said(None, None, None)
    return settings_in(path, *found)


def settings_in(path: str, table: Mapping[str, Any], text: str) -> _Said:
    """The `no-binary` settings of uv's `table` read from `path` (its `text`)."""
    lines = TomlLines(text)
    prefix = "tool.uv." if os.path.basename(path) == "pyproject.toml" else ""

    def at(key: str, value: object) -> str:
        return f"{path}:{_key_line(lines, key)}: {prefix}{key} = {_toml(value)}"

    top = table.get("no-binary")
    flag = (top, at("no-binary", top)) if isinstance(top, bool) else None
    listed = table.get("no-binary-package")
    packages = _names(listed)
    pip = table.get("pip")
    given = pip.get("no-binary") if isinstance(pip, dict) else None
    specifiers = _names(given)
    return _Said(
        flag,
        (packages, at("no-binary-package", listed)) if packages else None,
        (specifiers, at("pip.no-binary", given)) if specifiers else None,
    )


def _names(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return ()
    from packaging.utils import InvalidName, canonicalize_name

    out = []
    for item in value:
        if not isinstance(item, str):
            continue
        if item in (":all:", ":none:"):
            out.append(item)
            continue
        try:
            out.append(str(canonicalize_name(item, validate=True)))
        except InvalidName:
            continue  # uv refuses the file: nothing builds
    return tuple(out)


def _key_line(lines: TomlLines, key: str) -> int:
    """The line of `key = ...` (`pip.KEY`: after the `[pip]` or `[tool.uv.pip]` header, or
    written `pip.KEY =`), else 1."""
    section, _, name = key.rpartition(".")
    start = 0
    if section:
        header = re.search(rf"^[ \t]*\[[ \t]*(?:tool\.uv\.)?{section}[ \t]*\]", lines.text, re.M)
        start = header.end() if header else 0
    pattern = re.compile(rf"^[ \t]*(?:[\w.-]*\.)?{re.escape(name)}[ \t]*=", re.M)
    found = pattern.search(lines.text, start)
    return lines.line_at(found.start()) if found else 1


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(f'"{v}"' for v in value) + "]"
    return str(value)


def built_by_config(cwd: str, environ: Mapping[str, str]) -> list[str]:
    """What the configuration `uv pip` reads makes uv build, each named with its setting:
    uv's combination (crates/uv/src/settings.rs `PipSettings::combine`; files merged
    project, user, system: a boolean from the first file that sets it, lists joined,
    crates/uv-settings/src/combine.rs) of `NoBinary::from_pip_args([pip] no-binary)` with
    `NoBinary::from_args(no-binary, no-binary-package)` (build_options.rs)."""
    return built_by([settings_of(path) for path in config_files(cwd, environ)])


def built_by(said: Sequence[_Said]) -> list[str]:
    """What these settings, merged in this order, have uv build (see `built_by_config`)."""
    out: list[str] = []
    # `[pip] no-binary`: specifiers read in order, `:none:` clears what came before, `:all:`
    # is every package (crates/uv-configuration, `PackageNameSpecifiers::from_iter`).
    named: dict[str, str] = {}
    every: str | None = None
    for names, where in (s.pip for s in said if s.pip is not None):
        for name in names:
            if name == ":none:":
                named, every = {}, None
            elif name == ":all:":
                every = where
            else:
                named.setdefault(name, where)
    if every is not None:
        out.append(f"{ALL} ({every})")
    out += [f"{name} ({where})" for name, where in named.items()]
    # `from_args(Some(true), _)` is every package; `Some(false)` none, whatever
    # no-binary-package says; unset, the packages listed.
    flag = next((s.flag for s in said if s.flag is not None), None)
    if flag is not None and flag[0]:
        out.append(f"{ALL} ({flag[1]})")
    elif flag is None:
        for names, where in (s.packages for s in said if s.packages is not None):
            out += [f"{name} ({where})" for name in names if name not in (":all:", ":none:")]
    return list(dict.fromkeys(out))


def env_files(cwd: str, environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """(variable, path) for each requirements file a variable hands `uv pip` (FILE_VARIABLES),
    a path relative to the working folder as uv reads it; URLs are left to uv."""
    out = []
    for variable in FILE_VARIABLES:
        for word in environ.get(variable, "").split(" "):
            if word and not word.startswith(("http://", "https://")):
                out.append((variable, os.path.join(cwd, word)))
    return out
