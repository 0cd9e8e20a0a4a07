"""cudatx.planning.reqfiles: every requirements format, read for one target.

The samples under tests/data/reqfiles/ were written by real uv 0.13.9 (so the tests run
offline): `freeze.txt` is `uv pip freeze` of a venv with a local project installed from its
folder; `compiled.txt` is `uv pip compile --generate-hashes --universal` of three lines;
`project/` holds a pyproject.toml, the `uv lock` of it (a fork: idna 3.7 below Python 3.11,
3.20 from 3.11 on) and its `uv export --format pylock.toml`. uv exports no `extras` or
`dependency_groups` markers, so `pylock.multi.toml` is hand-written after PEP 751.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cudatx.errors import CudatxError, UnreadableFile, UsageError
from cudatx.planning.reqfiles import Pin, RequirementsFile, kind_of, read_requirements
from tests.support.paths import DATA as SUITE_DATA

DATA = SUITE_DATA / "reqfiles"
PROJECT = DATA / "project"

LINUX_311 = {
    "implementation_name": "cpython",
    "implementation_version": "3.11.7",
    "os_name": "posix",
    "platform_machine": "x86_64",
    "platform_release": "6.8.0",
    "platform_system": "Linux",
    "platform_version": "#1 SMP",
    "python_full_version": "3.11.7",
    "platform_python_implementation": "CPython",
    "python_version": "3.11",
    "sys_platform": "linux",
}
LINUX_310 = {**LINUX_311, "python_full_version": "3.10.4", "python_version": "3.10"}


def read(path: Path | str, markers: dict[str, str] = LINUX_311, **kw: object) -> RequirementsFile:
    return read_requirements(str(path), markers=markers, **kw)  # type: ignore[arg-type]


def texts(found: RequirementsFile) -> list[str]:
    return [pin.text for pin in found.entries]


def by_name(found: RequirementsFile) -> dict[str, Pin]:
    return {pin.name: pin for pin in found.entries}


def refusal(path: Path | str, kind: type[CudatxError] = UsageError, **kw: object) -> str:
    with pytest.raises(kind) as caught:
        read(path, **kw)  # type: ignore[arg-type]
    message = caught.value.message
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("requirements.txt", "requirements"),
        ("requirements-dev.in", "requirements"),
        ("constraints.TXT", "requirements"),
        ("pyproject.toml", "pyproject"),
        ("uv.lock", "uv.lock"),
        ("pylock.toml", "pylock"),
        ("pylock.gpu.toml", "pylock"),
        ("pylock.a.b.toml", None),
        ("Pipfile.lock", None),
        ("setup.cfg", None),
    ],
)
def test_kind_of(name: str, kind: str | None) -> None:
    assert kind_of(f"some/folder/{name}") == kind


# --- requirements files -----------------------------------------------------------------------


def test_uv_pip_freeze_output() -> None:
    found = read(DATA / "freeze.txt")
    assert (found.kind, found.lock, found.options) == ("requirements", False, ())
    pins = by_name(found)
    assert list(pins) == ["idna", "local-tool", "six"]
    assert (pins["idna"].requirement, pins["idna"].version, pins["idna"].url) == (
        "idna==3.20",
        "3.20",
        None,
    )
    local = pins["local-tool"]
    assert (local.url, local.version, local.line) == ("file:///tmp/rq/p2", None, 2)
    assert local.requirement == "local-tool @ file:///tmp/rq/p2"


def test_compiled_with_hashes_and_via_comments() -> None:
    found = read(DATA / "compiled.txt")
    # colorama is for win32 only; the hashes and `# via` lines are not entries
    assert texts(found) == ["idna==3.20", "six==1.17.0"]
    assert [pin.line for pin in found.entries] == [7, 11]
    assert {pin.source for pin in found.entries} == {str(DATA / "compiled.txt")}
    windows = read(DATA / "compiled.txt", markers={**LINUX_311, "sys_platform": "win32"})
    assert by_name(windows)["colorama"].requirement == "colorama==0.4.6"  # marker dropped


def test_requirements_in_with_ranges_markers_includes_and_options(tmp_path: Path) -> None:
    (tmp_path / "wheels").mkdir()
    (tmp_path / "constraints.txt").write_text("torch<2.9\n")
    (tmp_path / "common.in").write_text(
        "Typing_Extensions>=4.8,<5\n--extra-index-url https://download.pytorch.org/whl/cu128\n"
    )
    main = tmp_path / "requirements.in"
    main.write_text(
        "# the training stack\n"
        "--index-url=https://pypi.example/simple\n"
        "-f ./wheels\n"
        "--find-links https://example.org/links\n"
        "--no-index\n"
        "--trusted-host pypi.example\n"
        "-c constraints.txt\n"
        "-r common.in\n"
        "torch>=2.4,<3 ; python_version >= '3.10'\n"
        "pywin32==306 ; sys_platform == 'win32'\n"
        "nvidia-cudnn-cu12==9.* \n"
        "legacy===1.0.post1\n"
        "tool[cli] @ https://example.org/tool-1.0-py3-none-any.whl\n"
        "numpy == 2.2.3 \\\n"
        "    --hash=sha256:abc\n"
    )
    found = read(main)
    assert texts(found) == [
        "Typing_Extensions>=4.8,<5",
        "torch>=2.4,<3 ; python_version >= '3.10'",
        "nvidia-cudnn-cu12==9.*",
        "legacy===1.0.post1",
        "tool[cli] @ https://example.org/tool-1.0-py3-none-any.whl",
        "numpy == 2.2.3",
    ]
    pins = by_name(found)
    assert (pins["typing-extensions"].source, pins["typing-extensions"].line) == (
        str(tmp_path / "common.in"),
        1,
    )
    assert pins["torch"].requirement == "torch<3,>=2.4"
    assert [pins[n].version for n in ("torch", "nvidia-cudnn-cu12", "legacy", "numpy")] == [
        None,
        None,
        "1.0.post1",
        "2.2.3",
    ]
    assert pins["tool"].url == "https://example.org/tool-1.0-py3-none-any.whl"
    assert (pins["numpy"].line, pins["legacy"].line) == (14, 12)
    assert found.options == (
        "--index-url",
        "https://pypi.example/simple",
        "--find-links",
        str(tmp_path / "wheels"),
        "--find-links",
        "https://example.org/links",
        "--no-index",
        "--constraints",  # no entries: handed to uv, which applies them
        str(tmp_path / "constraints.txt"),
        "--extra-index-url",
        "https://download.pytorch.org/whl/cu128",
    )


def test_editables_and_unnamed_references(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A requirement's relative path is relative to the working folder, as uv reads it."""
    monkeypatch.chdir(tmp_path)
    pkg = tmp_path / "pkgs" / "local-pkg"
    pkg.mkdir(parents=True)
    (pkg / "pyproject.toml").write_text('[project]\nname = "Local.Pkg"\nversion = "1"\n')
    reqs = tmp_path / "lists" / "dev.txt"
    reqs.parent.mkdir()
    reqs.write_text(
        "-e ./pkgs/local-pkg[test]\n"
        "git+https://github.com/org/repo@v1#egg=Repo_Tool\n"
        "./dist/built_thing-2.0-py3-none-any.whl\n"
        "https://example.org/sdists/other-3.1.tar.gz ; sys_platform == 'win32'\n"
    )
    pins = by_name(read(reqs))
    assert list(pins) == ["local-pkg", "repo-tool", "built-thing"]
    local = pins["local-pkg"]
    assert (local.url, local.editable) == (str(pkg), True)
    assert local.requirement == f"local-pkg[test] @ {pkg.as_uri()}"
    assert pins["repo-tool"].requirement == "repo-tool @ git+https://github.com/org/repo@v1"
    assert not pins["repo-tool"].editable
    assert pins["built-thing"].url == str(tmp_path / "dist" / "built_thing-2.0-py3-none-any.whl")
    assert not pins["built-thing"].editable
    (tmp_path / "bad.txt").write_text("six\n-e ./nowhere\n")
    message = refusal(tmp_path / "bad.txt")
    assert message.startswith(f"{tmp_path / 'bad.txt'}:2: cannot tell which project ./nowhere is")
    # uv: "Git sources cannot be editable"
    (tmp_path / "bad.txt").write_text("--editable git+https://github.com/org/repo@v1#egg=T\n")
    assert ": -e git+https://github.com/org/repo@v1#egg=T: an editable is a local" in refusal(
        tmp_path / "bad.txt"
    )


def test_text_is_parsed_instead_of_the_file(tmp_path: Path) -> None:
    (tmp_path / "base.txt").write_text("idna==3.20\n")
    reqs = tmp_path / "requirements.txt"
    reqs.write_text("six==1.17.0\n")
    found = read(reqs, text="-r base.txt\nsix==1.16.0\n")
    assert texts(found) == ["idna==3.20", "six==1.16.0"]


def test_blank_and_comment_only_files_have_no_entries(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "comments.txt").write_text("# nothing yet\n\n   # really\n")
    assert read(tmp_path / "empty.txt").entries == ()
    assert read(tmp_path / "comments.txt").entries == ()


def test_a_name_cudatx_cannot_place_is_read_as_requirements(tmp_path: Path) -> None:
    (tmp_path / "to-remove").write_text("six\n")
    found = read(tmp_path / "to-remove")
    assert (found.kind, texts(found)) == ("requirements", ["six"])


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("six\nthis is not a requirement!\n", ":2: not a requirement: Expected "),
        ("--config-settings a=b\n", ":1: --config-settings: not an option uv reads"),
        ("--index-url\n", ":1: --index-url needs a value"),
        ("-r\n", ":1: -r needs a value"),
        ("six ; python_version >= 'x' and nonsense\n", ":1: not a requirement: "),
        ("Beta_==1.0\n", ":1: 'Beta_' is not a package name"),
        ("legacy===1.0-custom\n", ":1: ===1.0-custom: not a PEP 440 version"),
        ("https://[bad/x.whl\n", ":1: not a URL: https://[bad/x.whl"),
    ],
)
def test_malformed_requirements_are_one_line(tmp_path: Path, text: str, says: str) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text(text)
    assert refusal(bad).startswith(f"{bad}{says}")


def test_include_cycle_and_missing_include(tmp_path: Path) -> None:
    """As uv: an include already read is not read again, so a cycle ends there; a cycle back
    to the top file reads it once more (uv counts only includes), repeating its entries."""
    (tmp_path / "a.txt").write_text("six\n-r b.txt\n-r ./b.txt\n")
    (tmp_path / "b.txt").write_text("\n\n-r a.txt\nidna\n")
    assert texts(read(tmp_path / "a.txt")) == ["six", "six", "idna"]
    (tmp_path / "c.txt").write_text("-r missing.txt\n")
    assert "missing.txt: No such file or directory" in refusal(tmp_path / "c.txt", UnreadableFile)


def test_variables_are_expanded_as_uv_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`${NAME}` in an include, a path and a URL: expanded from the environment, as uv does;
    unset variables stay as written; one set to "" expands to ""; never in a version."""
    monkeypatch.chdir(tmp_path)
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "a.txt").write_text("six==1.16.0\n")
    wheel = "pkg_x-1.0-py3-none-any.whl"
    reqs = tmp_path / "requirements.txt"
    reqs.write_text(
        "-r ${SUBDIR}/a.txt\n"
        f"./${{DIST}}/{wheel}\n"
        "idna @ https://${HOST}/idna-3.7-py3-none-any.whl\n"
        "--find-links=${EMPTY}links\n"
    )
    (tmp_path / "links").mkdir()
    monkeypatch.setenv("EMPTY", "")
    monkeypatch.setenv("SUBDIR", "sub")
    monkeypatch.setenv("DIST", "dist")
    monkeypatch.setenv("HOST", "files.example")
    monkeypatch.delenv("UNSET_HERE", raising=False)
    found = read(reqs)
    pins = by_name(found)
    assert pins["six"].source == str(sub / "a.txt")
    assert pins["pkg-x"].url == str(tmp_path / "dist" / wheel)
    assert pins["idna"].url == "https://files.example/idna-3.7-py3-none-any.whl"
    assert found.options == ("--find-links", str(tmp_path / "links"))
    monkeypatch.delenv("SUBDIR")
    assert "${SUBDIR}/a.txt" in refusal(reqs, UnreadableFile)  # unset: as written
    reqs.write_text("--find-links ${UNSET_HERE}/wheels\n")
    assert refusal(reqs).endswith("${UNSET_HERE}/wheels: neither a URL nor a path that exists")
    monkeypatch.setenv("VERSION", "1.0")
    reqs.write_text("six==${VERSION}\n")
    assert ":1: not a requirement: " in refusal(reqs)


def test_unreadable_files(tmp_path: Path) -> None:
    assert "No such file" in refusal(tmp_path / "none.txt", UnreadableFile)
    (tmp_path / "latin1.txt").write_bytes(b"caf\xe9\n")
    assert "not UTF-8 text" in refusal(tmp_path / "latin1.txt", UnreadableFile)
    assert refusal(tmp_path, UnreadableFile).startswith(str(tmp_path))  # a folder


# --- pyproject.toml ---------------------------------------------------------------------------


def test_pyproject_dependencies_for_the_target() -> None:
    found = read(PROJECT / "pyproject.toml")
    assert (found.kind, found.lock, found.options) == ("pyproject", False, ())
    assert texts(found) == ["idna>=3.7 ; python_version >= '3.11'"]
    assert (found.entries[0].line, found.entries[0].requirement) == (6, "idna>=3.7")
    older = read(PROJECT / "pyproject.toml", markers=LINUX_310)
    assert [(p.name, p.line) for p in older.entries] == [("idna", 7), ("typing-extensions", 9)]


def test_pyproject_extras() -> None:
    found = read(PROJECT / "pyproject.toml", extras=("CLI",))
    assert [(p.name, p.line) for p in found.entries] == [("idna", 6), ("six", 13)]
    message = refusal(PROJECT / "pyproject.toml", extras=("gpu",))
    assert message.endswith("no extra 'gpu' in [project.optional-dependencies] (it has: cli)")


def test_pyproject_extra_markers_see_their_extra(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        "[project]\nname = 'x'\nversion = '1'\ndependencies = ['idna']\n"
        "[project.optional-dependencies]\n"
        "gpu = [\n  \"cupy ; extra == 'gpu'\",\n  \"fastrlock ; extra == 'other'\",\n]\n"
    )
    assert texts(read(pyproject, extras=("gpu",))) == ["idna", "cupy ; extra == 'gpu'"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[tool.black]\nline-length = 100\n", None),
        ("[project]\nname = 'x'\n", None),
        ("[project]\ndependencies = 3\n", ": project.dependencies is not a list"),
        ("[project]\ndependencies = [1]\n", ": project.dependencies is not a list of strings"),
        ("project = 3\n", ": [project] is not a table"),
        ("[project]\ndynamic = ['dependencies']\n", ": project.dependencies is dynamic"),
        ("[project]\ndependencies = [\n  'six',\n  'six >>= 1',\n]\n", ":4: not a requirement: "),
        ("[project\n", ": not valid TOML: Expected ']' at the end of a table declaration"),
    ],
)
def test_pyproject_shapes(tmp_path: Path, text: str, says: str | None) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(text)
    if says is None:
        assert read(pyproject).entries == ()
    else:
        assert refusal(pyproject).startswith(f"{pyproject}{says}")


# --- uv.lock ----------------------------------------------------------------------------------


def _line_of(path: Path, needle: str, after: int = 0) -> int:
    lines = path.read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if n > after and line == needle)


def test_uv_lock_what_uv_sync_installs() -> None:
    lock = PROJECT / "uv.lock"
    found = read(lock)
    assert (found.kind, found.lock, found.options) == ("uv.lock", True, ())
    # the project (editable), idna of the >=3.11 fork, and the default `dev` group; not
    # colorama (win32) nor typing-extensions (<3.11), nor the `cli` extra
    assert texts(found) == ["demo-app==0.1.0", "idna==3.20", "iniconfig==2.3.1"]
    pins = by_name(found)
    assert (pins["demo-app"].url, pins["demo-app"].editable) == (str(PROJECT), True)
    assert pins["demo-app"].requirement == f"demo-app @ {PROJECT.as_uri()}"
    first_idna = _line_of(lock, 'name = "idna"')
    assert pins["idna"].line == _line_of(lock, 'name = "idna"', after=first_idna)
    assert (pins["idna"].version, pins["idna"].url) == ("3.20", None)


def test_uv_lock_fork_and_extras() -> None:
    older = read(PROJECT / "uv.lock", markers=LINUX_310)
    assert texts(older)[1:] == ["idna==3.7", "iniconfig==2.3.1", "typing-extensions==4.16.0"]
    assert "six==1.17.0" in texts(read(PROJECT / "uv.lock", extras=("cli",)))
    message = refusal(PROJECT / "uv.lock", extras=("gpu",))
    assert message.endswith("(it has: cli)")


def test_uv_lock_virtual_root_is_not_installed() -> None:
    lock = PROJECT / "uv.lock"
    text = lock.read_text().replace('source = { editable = "." }', 'source = { virtual = "." }')
    assert texts(read(lock, text=text)) == ["idna==3.20", "iniconfig==2.3.1"]


def test_uv_lock_default_groups_from_the_pyproject_beside(tmp_path: Path) -> None:
    shutil.copy(PROJECT / "uv.lock", tmp_path)
    pyproject = (PROJECT / "pyproject.toml").read_text()
    (tmp_path / "pyproject.toml").write_text(pyproject + "\n[tool.uv]\ndefault-groups = []\n")
    assert "iniconfig==2.3.1" not in texts(read(tmp_path / "uv.lock"))
    (tmp_path / "pyproject.toml").write_text(pyproject.replace("demo-app", "other-app"))
    # no package of that name: every editable/virtual package is a root
    assert texts(read(tmp_path / "uv.lock"))[0] == "demo-app==0.1.0"


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (("version = 1\n", "version = 2\n"), ": uv.lock version 2 is not one cudatx reads (1)"),
        (('requires-python = ">=3.10"', 'requires-python = ">=3.12"'), ": requires-python >=3.12"),
        (('\nname = "iniconfig"', '\nnom = "iniconfig"'), ":76: a package has no name"),
        (('{ name = "iniconfig" }', '{ name = "iniconfig", version = "9" }'), ":19: demo-app"),
        (('source = { editable = "." }', 'source = { svn = "." }'), ":19: demo-app has no source"),
        (('{ name = "idna", version = "3.20"', '{ name = 3, version = "3.20"'), ":19: a package"),
        (("[[package]]", "[[package]]\nname = 1\n[[package]]"), ":10: a package has no name"),
    ],
)
def test_uv_lock_shapes(edit: tuple[str, str], says: str) -> None:
    lock = PROJECT / "uv.lock"
    text = lock.read_text()
    assert edit[0] in text
    with pytest.raises(UsageError) as caught:
        read(lock, text=text.replace(edit[0], edit[1], 1))
    assert caught.value.message.startswith(f"{lock}{says}"), caught.value.message


def test_uv_lock_not_toml_and_nothing_to_start_from(tmp_path: Path) -> None:
    lock = tmp_path / "uv.lock"
    lock.write_text("version = 1\n[[package]\n")
    assert refusal(lock).startswith(f"{lock}: not valid TOML: ")
    lock.write_text(
        'version = 1\n[[package]]\nname = "six"\nversion = "1"\n'
        'source = { registry = "https://pypi.org/simple" }\n'
    )
    assert refusal(lock).endswith("nothing to start from")


# --- pylock.toml ------------------------------------------------------------------------------


def test_pylock_from_uv_export() -> None:
    lock = PROJECT / "pylock.toml"
    found = read(lock)
    assert (found.kind, found.lock, found.options) == ("pylock", True, ())
    assert texts(found) == [f"demo-app @ {PROJECT.as_uri()}", "idna==3.20", "iniconfig==2.3.1"]
    demo = by_name(found)["demo-app"]
    assert (demo.url, demo.editable, demo.version) == (str(PROJECT), True, None)
    assert by_name(found)["idna"].line == 28
    older = read(lock, markers=LINUX_310)
    assert texts(older)[1:] == ["idna==3.7", "iniconfig==2.3.1", "typing-extensions==4.16.0"]


MULTI = DATA / "pylock.multi.toml"  # hand-written: extras, groups, vcs and archive sources
MULTI_USE = MULTI.read_text()


def test_pylock_extras_groups_and_sources(tmp_path: Path) -> None:
    lock = tmp_path / "pylock.multi.toml"
    lock.write_text(MULTI_USE)
    found = read(lock)
    pins = by_name(found)
    assert list(pins) == ["pytest", "tool", "blob"]
    assert (
        pins["tool"].requirement == "tool @ git+https://github.com/org/tool@0123abc#subdirectory=py"
    )
    assert pins["blob"].requirement == f"blob @ {(tmp_path / 'vendor/blob-1.0.tar.gz').as_uri()}"
    assert (pins["pytest"].line, pins["blob"].version) == (16, "1.0")
    assert list(by_name(read(lock, extras=("cli",)))) == ["click", "pytest", "tool", "blob"]
    assert refusal(lock, extras=("gpu",)).endswith("(it has: cli)")


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (('lock-version = "1.0"', 'lock-version = "2.0"'), ": lock-version '2.0' is not one"),
        (("environments = [", "environments = [\"os_name == 'nt'\", "), None),
        (("sys_platform == 'linux'", "sys_platform == 'aix'"), ": none of its environments"),
        (('requires-python = ">=3.10"', 'requires-python = ">=3.13"'), ": requires-python >=3.13"),
        (('name = "sphinx"', 'name = "tool"'), None),
        (('name = "blob"', 'name = "tool"'), ":32: tool is listed twice for this target"),
        (('version = "1.0"\narchive', "wheels = []\narchive"), ":32: blob has conflicting"),
        (("marker = \"'cli' in extras\"", "marker = \"'cli' in\""), ":10: not a marker"),
        (('name = "blob"\nversion = "1.0"', 'name = "blob"\nrequires-python = ">=4"'), ":32: blob"),
        ((MULTI_USE, 'lock-version = "1.0"\npackages = 3\n'), ": packages is not a list"),
    ],
)
def test_pylock_shapes(tmp_path: Path, edit: tuple[str, str], says: str | None) -> None:
    lock = tmp_path / "pylock.toml"
    assert edit[0] in MULTI_USE
    lock.write_text(MULTI_USE.replace(edit[0], edit[1], 1))
    if says is None:
        read(lock)
    else:
        assert refusal(lock).startswith(f"{lock}{says}")


# --- nothing but CudatxError escapes ----------------------------------------------------------

SAMPLES = {
    "freeze.txt": (DATA / "freeze.txt").read_text(),
    "compiled.txt": (DATA / "compiled.txt").read_text(),
    "requirements.in": (
        "-r compiled.txt\n-e ./project\n--index-url https://x.example/simple\n"
        "torch>=2.4,<3 ; python_version >= '3.10'\n./dist/a-1.0-py3-none-any.whl\n"
        "tool @ git+https://github.com/org/tool#egg=tool\n"
    ),
    "project/pyproject.toml": (PROJECT / "pyproject.toml").read_text(),
    "project/uv.lock": (PROJECT / "uv.lock").read_text(),
    "project/pylock.toml": (PROJECT / "pylock.toml").read_text(),
    "pylock.multi.toml": MULTI_USE,
}
_ALPHABET = st.sampled_from([*"[]{}=\"'#;@\\-., \n\t<>!~*$:/0123456789abcdefxyz", "\x00"])


@st.composite
def _mutated(draw: st.DrawFn, text: str) -> str:
    for _ in range(draw(st.integers(1, 4))):
        start = draw(st.integers(0, len(text)))
        end = draw(st.integers(start, min(len(text), start + 40)))
        insert = draw(st.text(_ALPHABET, max_size=12))
        if draw(st.booleans()):  # or copy another piece of the file in
            at = draw(st.integers(0, len(text)))
            insert = text[at : at + draw(st.integers(0, 60))]
        text = text[:start] + insert + text[end:]
    return text


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_mutated_samples_fail_only_as_cudatx_errors(sample: str) -> None:
    path = DATA / sample

    @settings(
        max_examples=200,
        deadline=None,
        database=None,  # keep .hypothesis/ out of the checkout
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(text=_mutated(SAMPLES[sample]), extras=st.sampled_from([(), ("cli",), ("x",)]))
    def check(text: str, extras: tuple[str, ...]) -> None:
        for markers in (LINUX_311, LINUX_310):
            try:
                found = read(path, markers=markers, text=text, extras=extras)
            except CudatxError as exc:
                assert exc.message and "\n" not in exc.message
            else:
                assert all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", p.name) for p in found.entries)

    check()
