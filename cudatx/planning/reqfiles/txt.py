"""pip/uv requirements files (`*.txt`, `*.in`), read as uv reads them: includes, constraints,
options, markers, hashes, editables, variables (docs/check-requirements.md, "How a
requirements file is read"; judged by tests/planning/test_reqfiles_uv.py)."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)

from cudatx.errors import UnreadableFile, UsageError
from cudatx.planning.reqfiles.common import (
    Pin,
    decode_text,
    make_pin,
    marker_holds,
    package_name,
    parse_marker_at,
    parse_requirement_at,
    project_name,
    read_bytes,
    url_path,
)
from cudatx.planning.reqfiles.uvsettings import ALL

# The statements of a requirements file as uv 0.13 scans them (crates/uv-requirements-txt,
# src/lib.rs `parse_entry`), ported: options are matched as prefixes, in uv's order.
_INCLUDES = ("-r", "--requirement")
_CONSTRAINTS = ("-c", "--constraint")
_EDITABLE = ("-e", "--editable")
# (prefix, the long name cudatx hands uv) for the global options uv reads from a file and
# takes on its command line too.
_VALUED = (
    ("-i", "--index-url"),
    ("--index-url", "--index-url"),
    ("--extra-index-url", "--extra-index-url"),
)
_FLAGS = ("--no-index", "--require-hashes")
_LINKS = ("--find-links", "-f")
_BINARY = ("--no-binary", "--only-binary")
# pip options uv ignores in a file, with a warning, and the rest of their line with them:
# no meaning for what gets installed here.
_IGNORED = ("--prefer-binary", "--pre", "--trusted-host", "--use-feature")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://|^file:")
_EXTRAS_SUFFIX = re.compile(r"\[[^\]]*\]$")
# pip's and uv's variables in a requirements file: `${NAME}` only, NAME of uppercase letters,
# digits and `_` (pip's req_file.ENV_VAR_RE, pypa/pip#3514; uv's uv-pep508 expand_env_vars).
# uv expands them in paths and URLs only (includes, options' values, direct references), never
# in names, versions or markers; a variable set to "" expands to ""; one unset stays as written,
# except PROJECT_ROOT, which is then the working folder.
_VARIABLE = re.compile(r"\$\{([A-Z0-9_]+)\}")
_BREAK = re.compile(r"\r\n|\r|\n")


def expand(value: str) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in os.environ:
            return os.environ[name]
        return os.getcwd() if name == "PROJECT_ROOT" else match.group(0)

    return _VARIABLE.sub(one, value)


def _unquote(value: str) -> str:
    """uv unquotes an option's value as a shell would (src/shquote.rs); an unbalanced quote
    leaves it as written."""
    if "'" not in value and '"' not in value:
        return value
    try:
        return " ".join(shlex.split(value))
    except ValueError:
        return value


@dataclass(frozen=True)
class _Statement:
    line: int  # 1-based, where the statement starts
    kind: str  # "requirement" | "editable" | "include" | "constraint" | "option"
    value: str  # the requirement as written, a file name, or an option's value
    flag: str = ""  # for "option": the long name uv takes on its command line
    text: str = ""  # for "option": the statement as written (`--no-binary=x`), for messages


class _Scanner:
    """uv's reading of one file: trivia (whitespace, `\\`-newlines, comments) between
    statements; a requirement ends at a newline, or at whitespace followed by `#` (a comment)
    or `--` (its `--hash` options, the only ones uv accepts there); an option's value ends at
    a newline or `#`. A `\\` continuation inside a requirement is kept, and refused as uv
    refuses it ("Trailing `\\` is not allowed")."""

    def __init__(self, text: str, where: str) -> None:
        self.s = text
        self.i = 0
        self.where = where
        self.start = 1  # the line of the statement being read
        self.counted = (0, 1)  # (an index, its line): lines are counted on from there

    def line(self) -> int:
        """The line at the cursor, counted on from the last statement's (statements only move
        forward; a count from the top each time made a long file quadratic)."""
        index, line = self.counted
        line += len(_BREAK.findall(self.s, index, self.i))
        self.counted = (self.i, line)
        return line

    def fail(self, message: str) -> UsageError:
        return UsageError(f"{self.where}:{self.start}: {message}")

    def at(self, chars: str) -> bool:
        return self.i < len(self.s) and self.s[self.i] in chars

    def eat_if(self, prefix: str) -> bool:
        if self.s.startswith(prefix, self.i):
            self.i += len(prefix)
            return True
        return False

    def eat_while(self, keep: Callable[[str], bool]) -> str:
        start = self.i
        while self.i < len(self.s) and keep(self.s[self.i]):
            self.i += 1
        return self.s[start : self.i]

    def wrappable(self) -> str:
        start = self.i
        self.eat_while(lambda c: c in " \t")
        while self.eat_if("\\\n") or self.eat_if("\\\r\n") or self.eat_if("\\\r"):
            self.eat_while(lambda c: c in " \t")
        return self.s[start : self.i]

    def rest_of_line(self) -> None:
        self.eat_while(lambda c: c not in "\r\n")

    def statements(self) -> Iterator[_Statement]:
        while True:
            self.wrappable()
            while self.at("\r\n#"):
                if self.eat_if("#"):
                    self.rest_of_line()
                else:
                    self.eat_if("\r\n") or self.eat_if("\r") or self.eat_if("\n")
                self.wrappable()
            if self.i >= len(self.s):
                return
            found = self.statement()
            if found is not None:
                yield found

    def statement(self) -> _Statement | None:
        line = self.start = self.line()
        for prefix in _INCLUDES:
            if self.eat_if(prefix):
                return _Statement(line, "include", _unquote(self.value(prefix)))
        for prefix in _CONSTRAINTS:
            if self.eat_if(prefix):
                return _Statement(line, "constraint", _unquote(self.value(prefix)))
        for prefix in _EDITABLE:
            if self.eat_if(prefix):
                if not (self.eat_if("=") or self.at_space()):
                    raise self.fail(f"{prefix}: expected '=' or whitespace")
                self.eat_while(str.isspace)
                return _Statement(line, "editable", self.requirement())
        for prefix, flag in (*_VALUED, *((p, "--find-links") for p in _LINKS)):
            if self.eat_if(prefix):
                return _Statement(line, "option", _unquote(self.value(prefix)), flag)
        for flag in _FLAGS:
            if self.eat_if(flag):
                return _Statement(line, "option", "", flag)
        for flag in _BINARY:
            start = self.i
            if self.eat_if(flag):
                value = _unquote(self.value(flag))
                return _Statement(line, "option", value, flag, self.s[start : self.i].strip())
        if (self.s[self.i].isascii() and self.s[self.i].isalnum()) or self.at("./$"):
            return _Statement(line, "requirement", self.requirement())
        for flag in _IGNORED:
            if self.eat_if(flag):
                self.eat_while(lambda c: c not in "\r\n#")
                return None
        word = self.s[self.i :].split(None, 1)[0]
        if word.startswith("-"):
            raise self.fail(f"{word.split('=')[0]}: not an option uv reads in a requirements file")
        raise self.fail(f"unexpected {self.s[self.i]!r}: not a requirement nor an option uv reads")

    def at_space(self) -> bool:
        if self.i < len(self.s) and self.s[self.i].isspace():
            self.i += 1
            return True
        return False

    def value(self, flag: str, *, word: bool = False) -> str:
        """After an option's name: `=VALUE` or whitespace (newlines too, as uv) and VALUE, to
        the end of the line or a `#` (a `--hash`'s: to the next whitespace)."""
        if not self.eat_if("="):
            if not self.at_space():
                raise self.fail(f"{flag}: expected '=' or whitespace after it")
            self.eat_while(str.isspace)
        if word:
            value = self.eat_while(lambda c: not c.isspace())
        else:
            value = self.eat_while(lambda c: c not in "\r\n#").rstrip()
        if not value:
            raise self.fail(f"{flag} needs a value")
        return value

    def requirement(self) -> str:
        start = self.i
        hashes = False
        while True:
            end = self.i
            if self.eat_if("\n"):
                break
            if self.eat_if("\r"):
                self.eat_if("\n")
                break
            if self.wrappable():
                if self.s.startswith("--", self.i):
                    hashes = True
                    break
                if self.eat_if("#"):
                    self.rest_of_line()
                    break
                continue
            if self.i >= len(self.s):
                break
            self.i += 1
        text = self.s[start:end].strip()
        if "\n" in text or "\r" in text:
            raise self.fail(
                "a '\\' continuation inside a requirement (uv takes one only before its --hash)"
            )
        if hashes:
            self.hashes()
        return text

    def hashes(self) -> None:
        """`--hash=ALGO:DIGEST` options after a requirement (uv: `parse_hashes`); uv checks
        them against what it downloads, cudatx has nothing to read from them."""
        while True:
            if not self.eat_if("--hash"):
                word = self.s[self.i :].split(None, 1)[0]
                raise self.fail(f"{word}: not an option uv reads after a requirement (--hash)")
            self.value("--hash", word=True)
            self.wrappable()
            if not self.s.startswith("--", self.i):
                return


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _location(written: str, folder: str, where: str, flag: str) -> str:
    """An index or find-links location as uv reads one (`written` as the file writes it,
    its variables expanded here): a path that exists (`-f` relative to the file,
    `-i`/`--extra-index-url` to the working folder), made absolute, else a URL; anything
    else uv refuses ("relative URL without a base"). The message shows it as written, as
    uv does: `--extra-index-url ${TOKEN}` must not print the token."""
    value = expand(written)
    local = os.path.join(folder, value)
    if os.path.exists(local):
        return os.path.abspath(local)
    if not _SCHEME.match(value):
        raise UsageError(f"{where}: {flag} {written}: neither a URL nor a path that exists")
    return value


# How deep `-r` includes may nest (pip and uv set no limit; 600 chained files made the
# recursive reader this replaced fail with RecursionError).
MAX_INCLUDE_DEPTH = 100


@dataclass
class _Open:
    path: str
    statements: Iterator[_Statement]
    depth: int
    constraints: bool  # a `-c` file, or one it includes: read for errors, adds no entries
    index: str | None = None  # its --index-url, or the first an include of it gave
    index_written: str = ""  # that --index-url as its file writes it, for messages


@dataclass
class RequirementsReader:
    markers: Mapping[str, str]
    entries: list[Pin] = field(default_factory=list)
    options: list[str] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)  # -r files read (uv reads each once)
    seen_constraints: set[str] = field(default_factory=set)
    # What a `--no-binary` of any file read (a -c file's too) has uv build, with its line:
    # cudatx.planning.reqfiles.uvsettings says why, cudatx.planning.building refuses it.
    builds: list[str] = field(default_factory=list)

    def read(self, path: str, text: str, including: tuple[str, ...] = ()) -> None:
        """Read `path` (its `text`) and its `-r`/`-c` includes, in order, iteratively: a stack
        of the files open, at most MAX_INCLUDE_DEPTH deep. As uv, an include already read is
        not read again (a cycle of includes ends there; the top file is not counted, so a
        cycle back to it reads it once more, as uv does, repeating its entries); `-c` files
        add no entries, and are handed to uv (`--constraints`), which applies them."""
        root = _Open(path, self._scan(path, text), len(including) + 1, False)
        stack = [root]
        while stack:
            top = stack[-1]
            step = next(top.statements, None)
            if step is None:
                stack.pop()
                if stack and not top.constraints:
                    self._inherit(stack[-1], top)
                continue
            if step.kind in ("include", "constraint"):
                target = self._included(top.path, step)
                constraints = top.constraints or step.kind == "constraint"
                seen = self.seen_constraints if constraints else self.seen
                if _identity(target) in seen:
                    continue
                if top.depth >= MAX_INCLUDE_DEPTH:
                    raise UsageError(
                        f"{top.path}:{step.line}: -r {step.value}: includes nested "
                        f"more than {MAX_INCLUDE_DEPTH} files deep"
                    )
                seen.add(_identity(target))
                if step.kind == "constraint" and not top.constraints:
                    self.options += ["--constraints", os.path.abspath(target)]
                try:
                    included = read_requirements_text(target)
                except UnreadableFile as exc:  # say which line named it, as it names it
                    where = f"{top.path}:{step.line}"
                    why = exc.message.removeprefix(f"{target}: ")
                    raise UnreadableFile(f"{where}: {step.value}: {why}", path=exc.path) from None
                scanned = self._scan(target, included)
                stack.append(_Open(target, scanned, top.depth + 1, constraints))
            elif step.kind == "option":
                if step.flag == "--no-binary":
                    self._no_binary(top, step)
                if not top.constraints:
                    self._option(top, step)
            else:
                if top.constraints and _unnamed(step.value):
                    raise UsageError(
                        f"{top.path}:{step.line}: {step.value}: a constraint needs a name "
                        "(uv: unnamed requirements are not allowed as constraints)"
                    )
                found = self._entry(top.path, step)
                if found is not None and not top.constraints:
                    self.entries.append(found)
        if root.index is not None:
            self.options[:0] = ["--index-url", root.index]

    @staticmethod
    def _scan(path: str, text: str) -> Iterator[_Statement]:
        return _Scanner(text.removeprefix("\ufeff"), path).statements()

    @staticmethod
    def _included(path: str, step: _Statement) -> str:
        """The file an include names. Messages show its name as written, never expanded (as
        uv shows it): a variable may hold a token."""
        value = expand(step.value)
        if value.startswith(("http://", "https://")):
            raise UsageError(
                f"{path}:{step.line}: {step.value}: a requirements file on the network; cudatx "
                "reads local files only"
            )
        if value.startswith("file:"):
            value = url_path(value, f"{path}:{step.line}", step.value)
        return os.path.join(os.path.dirname(path), value)

    def _option(self, top: _Open, step: _Statement) -> None:
        where = f"{top.path}:{step.line}"
        if step.flag in _FLAGS:
            self.options.append(step.flag)
        elif step.flag == "--find-links":
            folder = os.path.dirname(top.path)
            self.options += [step.flag, _location(step.value, folder, where, step.flag)]
        elif step.flag == "--index-url":
            if top.index is not None:  # uv: even the same one twice
                raise UsageError(f"{where}: a second --index-url (uv takes one per file)")
            top.index = _location(step.value, "", where, step.flag)
            top.index_written = step.value
        elif step.flag == "--extra-index-url":
            self.options += [step.flag, _location(step.value, "", where, step.flag)]
        else:  # --no-binary, --only-binary: `:all:`, `:none:` or one package name; uv does
            # not expand variables there (crates/uv-requirements-txt, `parse_entry`)
            if step.value not in (":all:", ":none:"):
                package_name(step.value, where)
            self.options += [step.flag, step.value]

    def _no_binary(self, top: _Open, step: _Statement) -> None:
        """`--no-binary NAME` (or `:all:`) has uv build NAME from its source distribution,
        whatever cudatx's `--only-binary :all:` says, and wherever it is written: the top
        file, an include, a constraints file (uv reads its options when cudatx hands it over
        with `--constraints`, and pip applies them): see cudatx.planning.reqfiles.uvsettings.
        `:none:` builds nothing (uv's `NoBinary::extend` of a file's statements: it clears
        nothing either)."""
        if step.value == ":none:":
            return
        what = ALL if step.value == ":all:" else package_name(step.value, f"{top.path}:{step.line}")
        self.builds.append(f"{what} ({os.path.basename(top.path)}:{step.line}: {step.text})")

    def _inherit(self, parent: _Open, child: _Open) -> None:
        """uv merges an include's --index-url into the file that includes it: taken where that
        file has none yet, refused where it has another."""
        if child.index is None:
            return
        if parent.index is None:
            parent.index, parent.index_written = child.index, child.index_written
        elif parent.index != child.index:
            raise UsageError(
                f"{child.path}: --index-url {child.index_written} conflicts with "
                f"{parent.path}'s {parent.index_written}"
            )

    def _entry(self, path: str, step: _Statement) -> Pin | None:
        where = f"{path}:{step.line}"
        text = step.value
        editable = step.kind == "editable"
        if text.endswith((".txt", ".in")) and os.path.isfile(text):
            raise UsageError(f"{where}: {text} is a requirements file: did you mean -r {text}?")
        if _unnamed(text):
            return self._unnamed(path, step.line, text, editable=editable)
        requirement = parse_requirement_at(_spaces(text), where)
        if editable and requirement.url is None:
            if requirement.specifier:
                raise UsageError(  # uv: "Registry requirements cannot be editable"
                    f"{where}: -e {text}: an editable is a local project folder, not a version"
                )
            return self._unnamed(path, step.line, text, editable=True)  # `-e pkg`: a path
        url = None
        if requirement.url is not None:
            url = expand(requirement.url)
            if not _URL.match(url):  # a path, relative to the working folder as uv reads it
                url = os.path.abspath(url)
                requirement.url = Path(url).as_uri()
            else:
                requirement.url = url
            local = url_path(url, where, text) if url.startswith("file:") else url
            if editable and (_URL.match(local) or os.path.isfile(local)):
                raise UsageError(  # uv: "Editable requirements must refer to a local directory"
                    f"{where}: -e {text}: an editable is a local project folder, as uv reads it"
                )
        if not marker_holds(requirement.marker, {**self.markers, "extra": ""}, where):
            return None
        return make_pin(
            requirement, source=path, line=step.line, text=text, url=url, editable=editable
        )

    def _unnamed(self, path: str, number: int, line: str, *, editable: bool) -> Pin | None:
        """A path or URL without `name @` (`-e ./pkg`, `./dist/x.whl`, `git+https://...`):
        the name comes from `#egg=`, a wheel or sdist file name, or a folder's pyproject. A
        relative path is relative to the working folder, as uv reads it (pip too). Messages
        show it as written (`written`), never expanded."""
        where = f"{path}:{number}"
        parts = re.split(r"\s;\s*|;\s+", line, maxsplit=1)
        written = parts[0].strip()
        target = expand(written)
        marker = parse_marker_at(parts[1], where) if len(parts) > 1 else None
        if not marker_holds(marker, {**self.markers, "extra": ""}, where):
            return None
        base, _, fragment = target.partition("#")
        egg = dict(p.partition("=")[::2] for p in fragment.split("&")).get("egg", "")
        rest = "&".join(p for p in fragment.split("&") if p and not p.startswith("egg="))
        extras, local = "", None
        if _URL.match(base) and not base.startswith("file:"):
            url = base + (f"#{rest}" if rest else "")  # `#egg=` is pip's, not the reference's
            filename = url_path(base, where, written).rsplit("/", 1)[-1]
        else:
            raw = url_path(base, where, written) if base.startswith("file:") else base
            if found := _EXTRAS_SUFFIX.search(raw):
                extras, raw = found.group(0), raw[: found.start()]
            local = Path(os.path.abspath(raw))
            url, filename = str(local), local.name
        if editable and (local is None or local.is_file()):
            raise UsageError(  # uv: "Editable requirements must refer to a local directory"
                f"{where}: -e {written}: an editable is a local project folder, as uv reads it"
            )
        name = _egg_name(egg, where) or _file_name(filename)
        if name is None and local is not None and local.is_dir():
            name = project_name(local)
        if name is None:
            raise UsageError(
                f"{where}: cannot tell which project {written} is (no #egg=NAME, no wheel or "
                "sdist file name, no pyproject.toml with a [project] name there)"
            )
        reference = local.as_uri() if local is not None else url
        requirement = parse_requirement_at(f"{name}{extras} @ {reference}", where)
        return make_pin(
            requirement, source=path, line=number, text=line, url=url, editable=editable
        )


def _spaces(text: str) -> str:
    """Any Unicode whitespace between a requirement's tokens as a space: uv-pep508 skips
    `char::is_whitespace`, packaging only spaces and tabs (`beta\u3000==1.0`)."""
    out, quote = [], ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char.isspace():
            char = " "
        out.append(char)
    return "".join(out)


def _unnamed(text: str) -> bool:
    """A path or URL, not `name ...` (uv-pep508 reads those as unnamed requirements)."""
    return bool(_URL.match(text)) or text.startswith((".", "/", "$"))


def _identity(path: str) -> str:
    """A file's identity for 'already read' (uv: `visited_file`, a lexical normalisation)."""
    return os.path.normpath(os.path.abspath(path))


def read_requirements_text(path: str) -> str:
    """A requirements file's text as uv decodes one (uv-fs read_to_string_transcode): UTF-8,
    or UTF-16 where a byte-order mark says so; a UTF-8 mark is dropped."""
    return decode_text(path, read_bytes(path), transcode=True)


def _egg_name(egg: str, where: str) -> str | None:
    if not egg:
        return None
    return package_name(_EXTRAS_SUFFIX.sub("", egg), where)


def _file_name(filename: str) -> str | None:
    try:
        if filename.endswith(".whl"):
            return canonicalize_name(parse_wheel_filename(filename)[0])
        if filename.endswith((".tar.gz", ".zip")):
            return canonicalize_name(parse_sdist_filename(filename)[0])
    except (InvalidWheelFilename, InvalidSdistFilename):
        return None
    return None
