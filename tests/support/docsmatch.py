r"""What README.md and docs/ say cudatx exits with and prints, and whether the code says it.

The rules, in one place (docs/development.md says them to a writer):

- **Exit codes.** A mention is `exit N`, `exits N`, `is exit N`, `exit code N`, a list after
  one (`exit 1 ...; 2 for ...; 13 when ...`, `3/4/5 and 15`), and each row of the exit-code
  table in docs/commands.md (`| N | meaning |`). Every code mentioned is one the code can
  give: an `ExitCode`, 0, or 128 + a signal cudatx ends on. Every code the code can give has
  a row, and each row shares more words with its own ExitCode's comment in cudatx/errors.py
  than with any other's. Where the clause a mention closes (from the sentence's start, a `;`
  or the mention before it, to the mention and a parenthesis it opens or that follows it)
  names a situation of SITUATIONS, the code is the one that situation's exception class
  maps to: no two places give one situation two codes.
- **Messages.** Quoted output is: a code span starting `cudatx:`; a code span or a
  "double-quoted" string of two words or more that follows `says`, `prints`, `refuses with`,
  `warns`, `note:`... in its sentence (within 60 characters), unless another program says
  it (`glibc says`), or that is in the clause of an exit mention (`(exit 16, \`...\`)`);
  each line of an indented block after a `$ cudatx ...` line (up to the next `$`); and each
  line of an indented block that a paragraph ending with `:` or a heading introduces,
  unless it is a command or JSON. Lines of nothing but values (` - x==1`) are not read.
- **Matching.** The code's strings are its string literals and f-strings (docstrings aside),
  a `{...}` standing for any text, `cudatx: ` and `error: `/`warning: `/`note: ` before them
  the printer's. In a quote, `...` and an upper-case word (`NAME`, `FILE`, `X`) stand for
  any text. A quote matches when it is part of one string the code could build and holds
  at least 8 of that string's own letters (or all it has); a line of a block, which a
  renderer builds of several strings, when it holds such a part with any text around it.
  Every lower-case word of four letters or more in a quote must be a word of some string of
  the code (a value cannot explain a made-up word); a word after `import` is a module's
  name. A quote in the clause of an exit mention, where the code passes the string it
  matches to an exception, is raised as an exception of that code.
"""

from __future__ import annotations

import ast
import bisect
import importlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from cudatx import errors, interrupts
from cudatx.demo.errors import DemoError
from cudatx.trial.run import TrialFailed
from cudatx.uv import UvFailed

HOLE = "\x00"  # an f-string's `{...}`: any text
_SEP = "\x01"  # between two strings of the code: no quote crosses it
WILD = "\x02"  # in a quote: `...` or a placeholder, any text
_PREFIX = re.compile(r"^(?:cudatx: )?(?:(?:error|warning|note|internal error): )?")
_MIN_LETTERS = 4  # a string of the code with fewer letters than this is only its `{...}`


# Situations the docs name in words, each held to the exception class the code raises for
# it (so to that class's exit code). A phrase is here only where it names one situation
# wherever it is written; the table row and every prose mention must then agree.
SITUATIONS: dict[str, type[errors.CudatxError]] = {
    r"only a build could|can only be (?:checked|had) by building|building it|no-binary": (
        errors.NeedsBuild
    ),
    r"another user can write|other users? (?:than|can)|leading outside": errors.UnsafePaths,
    r"nothing to roll back|no transaction recorded": errors.NothingToRollBack,
    r"externally managed|EXTERNALLY-MANAGED|PEP 668": errors.ExternallyManaged,
    r"conda installed": errors.ForeignOwned,
    r"holds? (?:this environment's|the) lock|plan it again|holder": errors.Busy,
    r"must be rolled back first": errors.Interrupted,
    r"running processes map": errors.InUse,
    r"environment changed since the transaction": errors.Conflict,
    r"corrupt journal|snapshot store|saved bytes that fail": errors.StoreError,
    r"answer(?:ed|ing)? (?:to [^|]*)?(?:was )?no\b|declined": errors.Declined,
    r"--require-env|could not be found or did not answer": errors.EnvironmentNotFound,
    r"not in the environment": errors.NotInEnvironment,
    r"uv could not|resolve or fetch|names? the index": UvFailed,
    r"no transaction ID|bad command line": errors.UsageError,
    r"past its limit": errors.UnreadableFile,
    r"no compiler": DemoError,
    r"\brolls (?:the environment )?back\b|was rolled back": errors.RolledBack,
    r"trial (?:itself )?could not (?:be )?run|no shadow could be made": TrialFailed,
    r"is there but cannot be executed": errors.CommandNotExecutable,
    r"no such command": errors.CommandNotFound,
}


def codes_the_code_gives() -> set[int]:
    """Every exit code cudatx can end with: success, each ExitCode, and 128 + each signal
    it ends on (interrupts.ENDING)."""
    return {0, *(int(c) for c in errors.ExitCode), *(128 + int(s) for s in interrupts.ENDING)}


# --- the strings of the code -------------------------------------------------------------


@dataclass(frozen=True)
class Template:
    text: str  # HOLE where a value goes
    where: str  # path:line
    raised: type[errors.CudatxError] | None  # the class it is the message of, where known


def _error_classes() -> dict[str, type[errors.CudatxError]]:
    # Every module whose errors a command raises is imported by the command line's.
    importlib.import_module("cudatx.cli.app")

    found: dict[str, type[errors.CudatxError]] = {}
    todo: list[type[errors.CudatxError]] = [errors.CudatxError]
    while todo:
        cls = todo.pop()
        found[cls.__name__] = cls
        todo.extend(cls.__subclasses__())
    return found


def _text(node: ast.expr) -> str | None:
    """The string `node` builds, HOLE for each value in it; None if it is not a string."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else HOLE
            for v in node.values
        )
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        if left is not None or right is not None:
            return (left if left is not None else HOLE) + (right if right is not None else HOLE)
    if isinstance(node, ast.Call) and _name(node.func) in {"one_line", "printable"} and node.args:
        return _text(node.args[0])
    return None


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def templates(package: Path) -> list[Template]:
    """Every string literal and f-string of the package's modules but their docstrings
    (expression statements), each with the CudatxError it is passed to, where it is."""
    classes = _error_classes()
    trees = {
        path.relative_to(package.parent).as_posix(): ast.parse(path.read_text(), str(path))
        for path in sorted(package.rglob("*.py"))
    }
    # What each function returns, by name, across modules: `raise NeedsBuild(needs_build(x))`
    # raises the string cudatx.errors.needs_build returns.
    returns: dict[str, list[ast.expr]] = {}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                returns.setdefault(node.name, []).extend(
                    r.value for r in ast.walk(node) if isinstance(r, ast.Return) and r.value
                )
    raised: dict[int, type[errors.CudatxError]] = {}
    for tree in trees.values():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or _name(node.func) not in classes:
                continue
            cls = classes[_name(node.func) or ""]
            message = node.args[0] if node.args else None
            message = next((k.value for k in node.keywords if k.arg == "message"), message)
            if isinstance(message, ast.Call) and _name(message.func) in returns:
                for value in returns[_name(message.func) or ""]:
                    raised[id(value)] = cls
            elif message is not None:
                raised[id(message)] = cls
    found: list[Template] = []
    for where, tree in trees.items():
        skip: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Expr):
                skip.add(id(node.value))  # a docstring, or a string said to no one
            elif isinstance(node, ast.JoinedStr):
                skip |= {id(v) for v in node.values}  # its parts are in it
            elif isinstance(node, ast.BinOp):
                skip |= {id(node.left), id(node.right)}
            elif isinstance(node, ast.Call) and _text(node) is not None:
                skip.add(id(node.args[0]))  # one_line(f"..."): the call is the string
        for node in ast.walk(tree):
            if id(node) in skip or not isinstance(node, ast.expr):
                continue
            text = _text(node)
            if text is None:
                continue
            text = _PREFIX.sub("", text)
            if sum(c.isalpha() for c in text) >= _MIN_LETTERS:
                found.append(Template(text, f"{where}:{node.lineno}", raised.get(id(node))))
    return found


_WORD = re.compile(r"[A-Za-z]{4,}")
_ENOUGH = 8  # letters of a template's own text a quote must hold (or all it has)


class Matcher:
    """Whether a quote is part of a string one template could build, holding at least
    `_ENOUGH` letters of the template's own text (or all of them): a `{...}` alone, which
    stands for anything, matches nothing.

    The templates that share a word with the quote are put in one text and an NFA is run
    over it with integers as bit sets (one bit per character), once per count of literal
    letters matched so far (0 to _ENOUGH)."""

    def __init__(self, found: list[Template]) -> None:
        self.templates = found
        self.words: dict[str, set[int]] = {}
        for i, t in enumerate(found):
            for word in _WORD.findall(t.text):
                self.words.setdefault(word, set()).add(i)
        self.vocabulary = {w.lower() for w in self.words}

    def unknown(self, quote: str) -> list[str]:
        """The words of `quote` (four letters or more, nothing but letters) that no string
        of the code holds: what a value cannot explain, since a report's values are names,
        versions and paths."""
        tokens = quote.split()
        # A word after `import` is a module's name; a capitalised one a name or another
        # program's message (`ImportError: Unable to load cuDNN`): values both.
        words = [
            t.strip("()[]{},.:;!?'\"`")
            for before, t in zip(["", *tokens], tokens, strict=False)
            if before != "import"
        ]
        return [
            w
            for w in words
            if len(w) >= 4 and w.isalpha() and w.islower() and w not in self.vocabulary
        ]

    def judge(self, quote: str, *, composed: bool = False) -> str | None:
        """Why `quote` (as the document writes it) is not output of the code; None if it is."""
        text = quoted(quote)
        if not text.replace(WILD, "").strip():
            return None
        unknown = self.unknown(text)
        if unknown:
            return f"no string of cudatx/ has {', '.join(repr(w) for w in unknown)}"
        if not self.matches(text, composed=composed):
            return "no string of cudatx/ (f-strings' values as any text) builds it"
        return None

    def matches(self, quote: str, *, composed: bool = False) -> list[Template]:
        """The templates of which `quote` (normalised by `quoted`) can be a part; where it
        is `composed` (a line of a report, which a renderer builds of several strings), of
        which it can hold a part, with any text on either side."""
        chosen = sorted({i for w in _WORD.findall(quote) for i in self.words.get(w, ())})
        run = _Run([self.templates[i] for i in chosen], composed)
        return [self.templates[chosen[i]] for i in run.run(quote)]


class _Run:
    def __init__(self, found: list[Template], composed: bool) -> None:
        around = HOLE if composed else ""
        text = _SEP + _SEP.join(around + t.text + around for t in found) + _SEP
        self.starts: list[int] = []
        self.needed: list[int] = []
        at = 1
        for t in found:
            self.starts.append(at)
            self.needed.append(min(_ENOUGH, sum(c.isalpha() for c in t.text)))
            at += len(t.text) + 1 + 2 * len(around)
        self.masks: dict[str, int] = {}
        for i, c in enumerate(text):
            self.masks[c] = self.masks.get(c, 0) | (1 << i)
        self.holes = self.masks.get(HOLE, 0)
        self.inside = ((1 << len(text)) - 1) & ~self.masks[_SEP]
        self.ends = self.inside | self.masks[_SEP]

    def _closure(self, states: int) -> int:
        # A `{...}` may stand for nothing: from it, the character after it is next too.
        for _ in range(3):
            states |= (states & self.holes) << 1
        return states

    def _anything(self, states: int) -> int:
        # The quote's `...`: any text of the template, so any later character of it.
        while True:
            more = states | ((states << 1) & self.inside)
            if more == states:
                return states
            states = more

    def run(self, quote: str) -> list[int]:
        # layers[k]: where the quote can be, having matched k letters of template text
        layers = [self._closure(self.inside)] + [0] * _ENOUGH
        for c in quote:
            if c == WILD:
                layers = [self._anything(states) for states in layers]
                continue
            mask = self.masks.get(c, 0)
            moved = [self._closure(((s & mask) << 1) & self.ends) for s in layers]
            stayed = [self._closure(s & self.holes) for s in layers]
            if c.isalpha():
                moved = [0, *moved[:-2], moved[-2] | moved[-1]]
            layers = [m | s for m, s in zip(moved, stayed, strict=True)]
            if not any(layers):
                return []
        found: set[int] = set()
        for k, states in enumerate(layers):
            while states:
                low = states & -states
                i = bisect.bisect_right(self.starts, low.bit_length() - 1) - 1
                if k >= self.needed[i]:
                    found.add(i)
                states ^= low
        return sorted(found)


_METAVAR = re.compile(r"(?<![\w./-])[A-Z][A-Z0-9_]*(?![\w/])|\.\.\.|…")


def quoted(quote: str) -> str:
    """A quote as the matcher reads it: the printer's prefix off, `...` and placeholders
    (upper-case words) as any text, white space as it prints."""
    quote = _PREFIX.sub("", quote.strip())
    return _METAVAR.sub(WILD, quote)


# --- what the documents say --------------------------------------------------------------


@dataclass(frozen=True)
class Mention:
    where: str  # FILE:LINE
    code: int
    context: str  # the text the mention closes, where its situation is named
    quotes: tuple[str, ...] = ()  # output quoted in the clause it closes


@dataclass(frozen=True)
class Quote:
    where: str
    text: str
    composed: bool = False  # a line of a report, not one message


@dataclass
class Document:
    mentions: list[Mention] = field(default_factory=list)
    quotes: list[Quote] = field(default_factory=list)
    table: dict[int, tuple[str, str]] = field(default_factory=dict)  # code: (where, meaning)


_MENTION = re.compile(
    r"\b(?:[Ee]xit(?:s|ed)?(?: codes?| status)?|is exit)[:\s]+"
    r"(\d+(?:(?:/|, | and | or )\d+\b(?! \w*[a-z]{3} [a-z]))*)(?!\s*\+|\d)"
)
_OPENER = re.compile(r"\b(?:[Ee]xit\w*|and|or|is)\b")  # before a code that opens its clause
_CONTINUED = re.compile(r"[;,]\s+(\d+)\s+(?:for|when|if|where|on)\b")
_SPAN = re.compile(r"(`+)(.+?)\1|\"([^\"]+)\"")
_SAYING = re.compile(
    r"\b(?:says?|said|prints?|printed|warns?|refuses with|refused with|answers?)\b"
    r"[^.`\"]{0,60}$|\b(?:note|warning|error):\s*$"
)
# Another program's words, quoted: `glibc says "..."`, `the size uv gives (...)`.
_FOREIGN = re.compile(
    r"\b(?:glibc|uv|pip|git|pre-commit|interpreter|ld\.so|Python)(?:'s)?\s+(?:own\s+)?"
    r"(?:says?|said|prints?|printed|gives|does|reports?)\b[^.`\"]{0,20}$"
)
_ROW = re.compile(r"^\|\s*([\d, ]+?)\s*\|\s*(.*?)\s*\|\s*$")
_COMMAND = re.compile(r"^(?:\$ |cudatx |python3? |pipx |uv |pip |eval |rm |git )")
_HEADING = re.compile(r"^#+ ")


def _paragraphs(text: str) -> Iterator[tuple[int, str, str]]:
    """(first line, kind, text) of each paragraph, table row and indented block: kind is
    `prose`, `row`, `block` (lines kept) or `fence`."""
    lines = text.splitlines()
    i = 0
    before = ""  # the paragraph before, to tell what introduces a block
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if line.startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            yield i + 1, "fence", "\n".join(lines[i + 1 : j])
            before, i = "", j + 1
            continue
        if line.startswith("    ") and (i == 0 or not lines[i - 1].strip()):
            j = i
            while j < len(lines) and (lines[j].startswith("    ") or not lines[j].strip()):
                j += 1
            block = "\n".join(x[4:] for x in lines[i:j]).rstrip("\n")
            yield i + 1, "block:" + before, block
            before, i = "", j
            continue
        if line.startswith("|"):
            yield i + 1, "row", line
            before, i = "", i + 1
            continue
        j = i
        while j < len(lines) and lines[j].strip() and not lines[j].startswith(("|", "```")):
            j += 1
            if _HEADING.match(lines[j - 1]):
                break
        para = " ".join(x.strip() for x in lines[i:j])
        yield i + 1, "prose", para
        before = para if not _HEADING.match(line) else ":"
        i = j


def _masked(text: str) -> str:
    """`text` with every quote's inside blanked, so its `.`, `;` and `exit` are not read."""
    return _SPAN.sub(lambda m: m.group(0)[0] + "x" * (len(m.group(0)) - 2) + m.group(0)[-1], text)


def _line_of(at: int, first: int, lengths: list[int]) -> int:
    """The document's line of character `at` of a paragraph whose lines (stripped, joined
    by one space) have `lengths` and whose first line is `first`."""
    line, total = first, 0
    for n in lengths:
        if total + n + 1 > at:
            return line
        total += n + 1
        line += 1
    return line


def read(name: str, text: str) -> Document:
    """The mentions, quotes and exit-code table of one Markdown document."""
    doc = Document()
    raw = text.splitlines()
    for first, kind, para in _paragraphs(text):
        if kind == "fence":
            continue
        if kind.startswith("block:"):
            _block(doc, name, first, para, kind.removeprefix("block:"))
            continue
        lengths = [len(raw[k].strip()) for k in range(first - 1, len(raw))]
        if kind == "row":
            row = _ROW.match(para)
            if row and re.fullmatch(r"\d+(?:, \d+)*", row.group(1)):
                meaning = row.group(2)
                # `...; an apply rolls back first (exit 10)`: that clause is exit 10's
                inner = _MENTION.search(_masked(meaning))
                if inner:
                    meaning = meaning[: max([0, *_stops(_masked(meaning)[: inner.start()])])]
                for code in row.group(1).split(", "):
                    doc.table[int(code)] = (f"{name}:{first}", row.group(2))
                    doc.mentions.append(Mention(f"{name}:{first}", int(code), meaning))
        _prose(doc, name, first, para, lengths)
    return doc


def _parenthesis(masked: str, at: int) -> tuple[int, int]:
    """The bounds of the innermost parenthesis around `at` ((at, at) where there is none)."""
    depth, start = 0, -1
    for k in range(at - 1, -1, -1):
        if masked[k] == ")":
            depth += 1
        elif masked[k] == "(":
            if depth == 0:
                start = k
                break
            depth -= 1
    if start < 0:
        return at, at
    depth = 0
    for k in range(start, len(masked)):
        if masked[k] == "(":
            depth += 1
        elif masked[k] == ")":
            depth -= 1
            if depth == 0:
                return start, k + 1
    return start, len(masked)


def _prose(doc: Document, name: str, first: int, para: str, lengths: list[int]) -> None:
    masked = _masked(para)
    spans = [
        (m.start(), m.end(), m.group(2) if m.group(2) is not None else m.group(3))
        for m in _SPAN.finditer(para)
    ]
    found: list[tuple[int, int, int]] = []  # (start, end, code)
    for m in _MENTION.finditer(masked):
        for code in re.split(r"/|, | and | or ", m.group(1)):
            found.append((m.start(), m.end(), int(code)))
        tail = masked[m.end() :]
        stop = re.search(r"\.(?:\s|$)", tail)
        for c in _CONTINUED.finditer(tail[: stop.start() if stop else len(tail)]):
            found.append((m.end() + c.start(1), m.end() + c.end(), int(c.group(1))))
    found = sorted(set(found))
    said: set[int] = set()
    previous_end = 0
    for start, end, code in found:
        open_, close = _parenthesis(masked, start)
        bounds = [previous_end, *(k + 1 for k in _stops(masked[:start]))]
        context_start = max(bounds)
        # `(exit 16, \`...\`)`: the parenthesis the mention opens is the mention's too
        opens = open_ < close and not masked[open_ + 1 : start].strip()
        context_end = close if opens else end
        after = re.match(r"\s*\(", masked[end:])
        if after:  # `exits 14 (\`nothing to roll back\`)`: the parenthesis after it too
            context_end = _parenthesis(masked, end + after.end())[1]
        if not _OPENER.sub("", masked[context_start:start]).strip(" *:,"):
            # `exit 1 with the findings; 2 for a file that ...`: the clause the code opens
            ahead = [k for k in _stops(masked[end:])]
            context_end = end + ahead[0] if ahead else len(masked)
        inside = [
            s for s in spans if context_start <= s[0] and s[1] <= context_end and _message(s[2])
        ]
        quotes = tuple(s[2] for s in inside)
        said |= {s[0] for s in inside}
        where = f"{name}:{_line_of(start, first, lengths)}"
        doc.mentions.append(Mention(where, code, para[context_start:context_end], quotes))
        previous_end = max(end, close)
    for s_start, _, quote in spans:
        if not _message(quote):
            continue
        sentence = masked[max([0, *(k + 1 for k in _stops(masked[:s_start]))]) : s_start]
        if _FOREIGN.search(sentence):
            continue
        if s_start in said or quote.startswith("cudatx:") or _SAYING.search(sentence):
            where = f"{name}:{_line_of(s_start, first, lengths)}"
            doc.quotes.append(Quote(where, quote))


def _message(quote: str) -> bool:
    """Whether a quote can be a message: not a name, a command or a JSON document's shape."""
    return (
        " " in quote.strip() and not _COMMAND.match(quote) and not quote.startswith(("{", "[", "-"))
    )


def _stops(text: str) -> list[int]:
    return [m.start() for m in re.finditer(r"[.;](?=\s)|\|", text)]


def _block(doc: Document, name: str, first: int, block: str, before: str) -> None:
    lines = block.splitlines()
    introduced = before.rstrip().endswith(":")
    command_block = bool(lines) and bool(_COMMAND.match(lines[0]))
    if not command_block and (not introduced or lines[0].lstrip().startswith(("{", "["))):
        return
    output = not command_block
    for k, line in enumerate(lines):
        if line.startswith("$ "):
            output = line.startswith("$ cudatx ")
            continue
        text = line.strip()
        if not output or re.fullmatch(r"\.\.\..*\.\.\.|\.\.\.", text):
            continue
        if not any(word.isalpha() for word in text.split()):
            continue  # nothing but values (` - nvidia-cudnn-cu12==9.10.2.21`)
        doc.quotes.append(Quote(f"{name}:{first + k}", line, composed=True))


# --- the checks ----------------------------------------------------------------------------

TABLE = "docs/commands.md"  # where every code the code gives has its row


def _comments() -> dict[int, str]:
    """Each ExitCode's comment in cudatx/errors.py: what the code says the code means."""
    said: dict[int, str] = {}
    for line in Path(errors.__file__).read_text().splitlines():
        found = re.match(r"\s+([A-Z_]+) = (\d+)\s+# (.*)", line)
        if found:
            said[int(found.group(2))] = found.group(3)
    return said


_STOP = {"that", "this", "what", "with", "from", "could", "must", "would", "there", "their"}


def _words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z]{4,}", text)} - _STOP


def exit_problems(documents: dict[str, str]) -> list[str]:
    """Every way the documents' exit codes differ from the code's, `FILE:LINE: why`."""
    gives = codes_the_code_gives()
    read_ = {name: read(name, text) for name, text in documents.items()}
    problems: list[str] = []
    table = read_[TABLE].table if TABLE in read_ else {}
    for code in sorted(gives - set(table)):
        problems.append(f"{TABLE}: exit {code} (the code gives it) has no row in the table")
    comments = _comments()
    for code, (where, meaning) in sorted(table.items()):
        if code not in comments:
            continue
        overlap = {c: len(_words(meaning) & _words(said)) for c, said in comments.items()}
        if overlap[code] < max(overlap.values()) or overlap[code] == 0:
            best = max(overlap, key=lambda c: overlap[c])
            problems.append(
                f"{where}: exit {code} reads as ExitCode {best} ({comments[best]!r}), "
                f"not as {errors.ExitCode(code).name} ({comments[code]!r})"
            )
    for doc in read_.values():
        for mention in doc.mentions:
            if mention.code not in gives:
                problems.append(f"{mention.where}: exit {mention.code}: the code never gives it")
                continue
            for pattern, cls in SITUATIONS.items():
                named = re.search(pattern, mention.context)
                if named and int(cls.exit_code) != mention.code:
                    problems.append(
                        f"{mention.where}: exit {mention.code} for {named.group(0)!r}, which "
                        f"the code raises as {cls.__name__}: exit {int(cls.exit_code)}"
                    )
    return problems


def message_problems(documents: dict[str, str], matcher: Matcher) -> list[str]:
    """Every quote of output the code does not give, and every quote given with an exit
    code that the code raises with another, `FILE:LINE: why`."""
    problems: list[str] = []
    for name, text in documents.items():
        doc = read(name, text)
        for quote in doc.quotes:
            why = matcher.judge(quote.text, composed=quote.composed)
            if why:
                problems.append(f"{quote.where}: {quote.text.strip()!r}: {why}")
        for mention in doc.mentions:
            for quote in mention.quotes:
                raised = {t.raised for t in matcher.matches(quoted(quote)) if t.raised is not None}
                if raised and mention.code not in {int(c.exit_code) for c in raised}:
                    names = ", ".join(
                        sorted(f"{c.__name__} (exit {int(c.exit_code)})" for c in raised)
                    )
                    problems.append(
                        f"{mention.where}: {quote!r} with exit {mention.code}: the code raises "
                        f"it as {names}"
                    )
    return problems
