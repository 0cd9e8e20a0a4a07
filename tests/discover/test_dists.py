"""cudatx.discover.dists: installed distributions read from real uv installs and hand-written
folders."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.requirements import Requirement

from cudatx.discover.dists import parse_record, scan_distributions
from cudatx.models import Distribution, Finding, RecordEntry
from tests.support import build_wheel, make_venv, record_hash, site_packages, uv_install

PY_VERSION = "3.11"  # any Python 3 for evaluating converted markers


@dataclass(frozen=True)
class Installed:
    venv: Path
    site: Path
    wheel: Path
    files: dict[str, bytes]
    dists: dict[str, Distribution]
    findings: list[Finding]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("dists")
    files = {
        "foo_bar/__init__.py": b"VALUE = 1\n",
        "foo_bar/lib/libfoo.so.1": b"not really ELF, only bytes to hash\n" * 7,
        "foo_bar-1.2.3.data/scripts/foo-tool": b"#!/bin/sh\necho foo\n",
    }
    wheel = build_wheel(
        root / "wheels",
        "Foo_Bar",
        "1.2.3",
        files,
        requires=["packaging>=20", 'click>=8; extra == "cli"'],
    )
    other = build_wheel(root / "wheels", "other.Dist", "0.1", {"other_dist.py": b"x = 2\n"})
    venv = make_venv(root / "venv")
    uv_install(venv, [wheel, other])
    site = site_packages(venv)
    dists, findings = scan_distributions((str(site),))
    return Installed(
        venv=venv,
        site=site,
        wheel=wheel,
        files=files,
        dists={d.name: d for d in dists},
        findings=findings,
    )


def _records(dist: Distribution) -> dict[str, RecordEntry]:
    return {entry.path: entry for entry in dist.records}


# -------------------------------------------------------------------------------------
# A real wheel installed by real uv
# -------------------------------------------------------------------------------------


def test_uv_install_is_scanned_without_findings(installed: Installed) -> None:
    assert set(installed.dists) == {"foo-bar", "other-dist"}
    assert installed.findings == []


def test_name_is_canonicalised_display_name_kept(installed: Installed) -> None:
    foo = installed.dists["foo-bar"]
    assert foo.display_name == "Foo_Bar"
    assert foo.version == "1.2.3"
    assert foo.owner == "dist-info"
    assert foo.site == str(installed.site)
    assert foo.metadata_dir == str(installed.site / "foo_bar-1.2.3.dist-info")
    other = installed.dists["other-dist"]
    assert (other.display_name, other.version) == ("other.Dist", "0.1")


def test_records_carry_hash_and_size_of_installed_bytes(installed: Installed) -> None:
    records = _records(installed.dists["foo-bar"])
    for rel in ("foo_bar/__init__.py", "foo_bar/lib/libfoo.so.1"):
        data = installed.files[rel]
        entry = records[rel]
        assert entry.hash_algorithm == "sha256"
        assert f"sha256={entry.hash_digest}" == record_hash(data)
        assert entry.size == len(data)
        on_disk = installed.site / rel
        assert on_disk.read_bytes() == data
    # RECORD lists itself without hash or size.
    own = records["foo_bar-1.2.3.dist-info/RECORD"]
    assert (own.hash_algorithm, own.hash_digest, own.size) == (None, None, None)


def test_every_record_path_is_relative_to_the_site_and_exists(installed: Installed) -> None:
    for dist in installed.dists.values():
        assert dist.records
        for entry in dist.records:
            assert not os.path.isabs(entry.path)
            assert os.path.lexists(os.path.join(dist.site, entry.path)), entry.path


def test_script_outside_site_is_kept_as_uv_wrote_it(installed: Installed) -> None:
    # uv installs <name>.data/scripts/x into the venv's bin and lists it as ../../../bin/x;
    # the entry must be exactly what the RECORD file says, not folded or made absolute.
    record_file = installed.site / "foo_bar-1.2.3.dist-info" / "RECORD"
    written = [
        line.split(",")[0]
        for line in record_file.read_text().splitlines()
        if line.split(",")[0].endswith("bin/foo-tool")
    ]
    assert len(written) == 1 and written[0].startswith("../")
    records = _records(installed.dists["foo-bar"])
    assert written[0] in records
    target = Path(os.path.normpath(installed.site / written[0]))
    assert target == installed.venv / "bin" / "foo-tool"
    assert target.is_file()


def test_requires_dist(installed: Installed) -> None:
    foo = installed.dists["foo-bar"]
    assert foo.requires == ("packaging>=20", 'click>=8; extra == "cli"')
    assert installed.dists["other-dist"].requires == ()


def test_installer_and_direct_url_of_a_local_wheel(installed: Installed) -> None:
    foo = installed.dists["foo-bar"]
    assert foo.installer == "uv"
    # uv records a local wheel path as an archive URL (PEP 610).
    assert foo.direct_url is not None
    direct = json.loads(foo.direct_url)
    assert direct["url"] == installed.wheel.absolute().as_uri()
    assert "archive_info" in direct


def test_first_distribution_of_a_name_wins(installed: Installed, tmp_path: Path) -> None:
    shadow = tmp_path / "shadow"
    meta = shadow / "FOO.BAR-9.9.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: FOO.BAR\nVersion: 9.9\n")
    (meta / "RECORD").write_text("FOO.BAR-9.9.dist-info/METADATA,,\n")
    dists, _ = scan_distributions((str(shadow), str(installed.site)))
    foo = [d for d in dists if d.name == "foo-bar"]
    assert [(d.version, d.site) for d in foo] == [("9.9", str(shadow))]
    dists, _ = scan_distributions((str(installed.site), str(shadow)))
    assert [d.version for d in dists if d.name == "foo-bar"] == ["1.2.3"]


def test_missing_and_file_sys_path_entries_are_skipped(installed: Installed) -> None:
    dists, findings = scan_distributions(
        (str(installed.site / "nope"), str(installed.wheel), str(installed.site))
    )
    assert {d.name for d in dists} == {"foo-bar", "other-dist"}
    assert findings == []


# -------------------------------------------------------------------------------------
# Hand-written metadata folders
# -------------------------------------------------------------------------------------


def test_record_entry_outside_site_kept_as_written(tmp_path: Path) -> None:
    meta = tmp_path / "tool-1.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: tool\nVersion: 1.0\n")
    (meta / "RECORD").write_text(
        "../../bin/x,sha256=AAAA,3\ntool/./a/../b.py,,\ntool-1.0.dist-info/RECORD,,\n"
    )
    (dist,), findings = scan_distributions((str(tmp_path),))
    assert findings == []
    assert [e.path for e in dist.records] == [
        "../../bin/x",
        "tool/./a/../b.py",
        "tool-1.0.dist-info/RECORD",
    ]


def test_egg_info_with_installed_files(tmp_path: Path) -> None:
    site = tmp_path / "site"
    egg = site / "Legacy_Pkg-0.5-py3.11.egg-info"
    egg.mkdir(parents=True)
    (site / "pkg").mkdir()
    (site / "pkg" / "__init__.py").write_text("")
    (egg / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: Legacy_Pkg\nVersion: 0.5\n")
    (egg / "installed-files.txt").write_text(
        "../pkg/__init__.py\n../pkg/__pycache__/__init__.cpython-311.pyc\n\nPKG-INFO\n"
    )
    (egg / "requires.txt").write_text(
        "six>=1.0\n\n[extra]\nrich\n\n[:python_version < '3']\nfutures\n\n"
        "[gpu:sys_platform == 'linux']\ncupy\n"
    )
    (dist,), findings = scan_distributions((str(site),))
    assert findings == []
    assert (dist.name, dist.display_name, dist.version) == ("legacy-pkg", "Legacy_Pkg", "0.5")
    assert dist.owner == "egg-info"
    paths = [e.path for e in dist.records]
    assert paths == [
        "pkg/__init__.py",
        "pkg/__pycache__/__init__.cpython-311.pyc",
        "Legacy_Pkg-0.5-py3.11.egg-info/PKG-INFO",
    ]
    assert (site / paths[0]).is_file()
    assert all(e.hash_digest is None and e.size is None for e in dist.records)

    requirements = [Requirement(r) for r in dist.requires]
    assert [r.name for r in requirements] == ["six", "rich", "futures", "cupy"]
    six, rich, futures, cupy = requirements
    assert six.marker is None and str(six.specifier) == ">=1.0"

    def applies(req: Requirement, **env: str) -> bool:
        assert req.marker is not None
        base = {"python_version": PY_VERSION, "sys_platform": "linux", "extra": ""}
        return req.marker.evaluate({**base, **env})

    assert applies(rich, extra="extra") and not applies(rich)
    assert not applies(futures) and applies(futures, python_version="2.7")
    assert applies(cupy, extra="gpu")
    assert not applies(cupy, extra="gpu", sys_platform="win32")
    assert not applies(cupy, sys_platform="linux")


def test_dist_info_without_record(tmp_path: Path) -> None:
    meta = tmp_path / "norec-2.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: norec\nVersion: 2.0\n")
    (dist,), findings = scan_distributions((str(tmp_path),))
    assert (dist.name, dist.version, dist.records) == ("norec", "2.0", ())
    assert [(f.kind, f.path) for f in findings] == [("no RECORD", str(meta))]


def test_metadata_without_name_uses_the_folder_name(tmp_path: Path) -> None:
    meta = tmp_path / "Bar_Baz-3.1.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nVersion: 3.1\nSummary: nameless\n")
    (meta / "RECORD").write_text("bar_baz.py,,\n")
    (dist,), _ = scan_distributions((str(tmp_path),))
    assert (dist.name, dist.display_name, dist.version) == ("bar-baz", "Bar_Baz", "3.1")
    assert [e.path for e in dist.records] == ["bar_baz.py"]


def test_metadata_missing_entirely_is_a_finding(tmp_path: Path) -> None:
    meta = tmp_path / "ghost-0.1.dist-info"
    meta.mkdir()
    (meta / "RECORD").write_text("ghost.py,,\n")
    (dist,), findings = scan_distributions((str(tmp_path),))
    assert (dist.name, dist.version) == ("ghost", "0.1")
    assert ("malformed metadata", str(meta)) in [(f.kind, f.path) for f in findings]


# -------------------------------------------------------------------------------------
# Garbage RECORD files: findings naming file:line, valid lines still parsed, no exception
# -------------------------------------------------------------------------------------

GARBAGE_LINES = [
    "good/a.py,sha256=AAAA,10",  # 1 valid
    "only,two",  # 2 wrong field count
    "one",  # 3 wrong field count
    "a,b,c,d",  # 4 wrong field count
    "good/b.py,sha256,5",  # 5 hash without '='
    "good/c.py,=digest,5",  # 6 hash without algorithm
    "good/d.py,sha256=,5",  # 7 hash without digest
    "good/e.py,sha256=BBBB,abc",  # 8 size not a number
    "good/f.py,sha256=CCCC,-3",  # 9 negative size
    ",sha256=DDDD,1",  # 10 empty path
    "\x7fELF\x02\x01\x01\x00\xff\xfe\x00\x00garbage\x01\x02,\x03",  # 11 binary junk
    "",  # 12 blank: skipped silently
    "good/g.py,,",  # 13 valid, no hash, no size
    '"good/h, with comma.py",sha256=EEEE,0',  # 14 valid, quoted
]
BAD_LINES = {2, 3, 4, 5, 6, 7, 8, 9, 10, 11}


def _finding_lines(findings: list[Finding], record_path: str) -> list[int]:
    numbers = []
    for finding in findings:
        assert finding.kind == "malformed RECORD"
        where, sep, number = finding.path.rpartition(":")
        assert sep and where == record_path, finding.path
        numbers.append(int(number))
    return numbers


def test_parse_record_garbage() -> None:
    findings: list[Finding] = []
    entries = parse_record("\n".join(GARBAGE_LINES) + "\n", "/x/RECORD", findings)
    assert [(e.path, e.hash_algorithm, e.hash_digest, e.size) for e in entries] == [
        ("good/a.py", "sha256", "AAAA", 10),
        ("good/g.py", None, None, None),
        ("good/h, with comma.py", "sha256", "EEEE", 0),
    ]
    assert sorted(_finding_lines(findings, "/x/RECORD")) == sorted(BAD_LINES)
    assert all(f.message for f in findings)


def test_parse_record_empty_and_crlf() -> None:
    findings: list[Finding] = []
    assert parse_record("", "R", findings) == ()
    assert findings == []
    entries = parse_record("a.py,sha256=AAAA,1\r\nb.py,,\r\n", "R", findings)
    assert [e.path for e in entries] == ["a.py", "b.py"]
    assert findings == []


def test_garbage_record_in_a_real_install(installed: Installed, tmp_path: Path) -> None:
    # A copy of uv's dist-info whose RECORD is garbage around one real line.
    site = tmp_path / "site"
    meta = site / "foo_bar-1.2.3.dist-info"
    meta.mkdir(parents=True)
    src = installed.site / "foo_bar-1.2.3.dist-info"
    for name in ("METADATA", "INSTALLER", "WHEEL"):
        (meta / name).write_bytes((src / name).read_bytes())
    real = next(
        ln for ln in (src / "RECORD").read_text().splitlines() if ln.startswith("foo_bar/__init__")
    )
    (meta / "RECORD").write_bytes(
        b"\x00\x01\x02 not,a\n" + real.encode() + b"\n\xff\xfe,sha256,zz\n"
    )
    (dist,), findings = scan_distributions((str(site),))
    assert [e.path for e in dist.records] == ["foo_bar/__init__.py"]
    assert sorted(_finding_lines(findings, str(meta / "RECORD"))) == [1, 3]


def test_empty_record_file(tmp_path: Path) -> None:
    meta = tmp_path / "empty-1.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Name: empty\nVersion: 1.0\n")
    (meta / "RECORD").write_bytes(b"")
    (dist,), findings = scan_distributions((str(tmp_path),))
    assert dist.records == ()
    assert findings == []  # empty is not missing


def test_parse_record_non_ascii_digit_size_is_a_finding() -> None:
    findings: list[Finding] = []
    entries = parse_record("a.py,,1\nb.py,,\u00b2\nc.py,,3\n", "R", findings)
    assert [e.path for e in entries] == ["a.py", "c.py"]
    assert [f.path for f in findings] == ["R:2"]


def test_parse_record_one_huge_field_spares_the_other_lines() -> None:
    findings: list[Finding] = []
    text = "a.py,,1\n" + "x" * 200_000 + ",,\nc.py,,3\n"
    entries = parse_record(text, "R", findings)
    assert [e.path for e in entries] == ["a.py", "c.py"]
    assert [f.path for f in findings] == ["R:2"]


def test_parse_record_line_numbers_count_newlines_only() -> None:
    findings: list[Finding] = []
    entries = parse_record("junk\x0cmore junk\nb.py,,zz\n", "R", findings)
    assert entries == ()
    assert sorted(f.path for f in findings) == ["R:1", "R:2"]


# A bounded fuzz: rows built from RECORD-like and arbitrary fields, joined by any newline.
_FIELD = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", "a.py", "../../bin/x", '"q,uoted"', "sha256", "sha256=", "=x"]),
    st.sampled_from(["sha256=AAAA", "md5=x=y", "12", "0", "-1", "abc", " 7", "1e3"]),
    st.integers(min_value=0, max_value=10**12).map(str),
)
_ROW = st.lists(_FIELD, min_size=0, max_size=5).map(",".join)
_TEXT = st.one_of(
    st.text(max_size=200),
    st.tuples(st.lists(_ROW, max_size=12), st.sampled_from(["\n", "\r\n", "\r"])).map(
        lambda rows_sep: rows_sep[1].join(rows_sep[0])
    ),
)


@settings(
    max_examples=200,
    deadline=None,
    database=None,  # keep .hypothesis/ out of the checkout
    derandomize=True,  # the same 200 examples every run
    suppress_health_check=[HealthCheck.too_slow],
)
@given(text=_TEXT)
def test_parse_record_never_raises(text: str) -> None:
    findings: list[Finding] = []
    entries = parse_record(text, "F/RECORD", findings)
    assert isinstance(entries, tuple)
    assert all(isinstance(e, RecordEntry) for e in entries)
    lines = max(1, len(text.splitlines()))
    for finding in findings:
        assert finding.kind == "malformed RECORD"
        where, _, number = finding.path.rpartition(":")
        assert where == "F/RECORD" and 1 <= int(number) <= lines
    for entry in entries:
        assert entry.path
        assert entry.size is None or entry.size >= 0
        assert (entry.hash_algorithm is None) == (entry.hash_digest is None)
        if entry.hash_algorithm is not None:
            assert entry.hash_algorithm and entry.hash_digest
    assert len(entries) + len(findings) <= lines


def _requiring(name: str, version: str, *requires: str) -> Distribution:
    """A distribution known only by its metadata: its name, version and Requires-Dist."""
    return Distribution(
        name=name,
        display_name=name,
        version=version,
        metadata_dir=f"/nowhere/{name}-{version}.dist-info",
        site="/nowhere",
        owner="dist-info",
        records=(),
        requires=requires,
    )


def test_applicable_requirements_skip_what_cannot_apply() -> None:
    """Markers are evaluated for the target with extra=""; hostile lines never raise."""
    from cudatx.discover.dists import applicable_requirements

    dist = _requiring(
        "x",
        "1",
        "a>=1",
        'b; sys_platform == "win32"',
        'c; extra == "gpu"',
        'd; python_version >= "3"',
        'e; bogus_variable == "1"',
        "not a requirement ((",
        'f; platform_machine ~= "x86_64"',
    )
    markers = {"sys_platform": "linux", "python_version": "3.11", "platform_machine": "x86_64"}
    names = [r.name for r in applicable_requirements(dist, markers)]
    assert names[:2] == ["a", "d"]
    assert "b" not in names and "c" not in names and "e" not in names


def test_installed_extras_are_those_whose_requirements_are_all_met() -> None:
    """An extra counts as asked for where every requirement behind it is installed at a
    version it allows; a line that applies without the extra, a marker an extra only widens,
    a reversed comparison and hostile lines count for none."""
    from cudatx.discover.dists import installed_extras

    dist = _requiring
    top = dist(
        "top",
        "1",
        "a>=1",
        'b>=2; extra == "gpu"',
        'c; extra == "gpu"',
        'd; extra == "cpu"',  # not installed: cpu is not taken
        'e; extra == "old" and python_version < "3"',  # behind nothing here
        'a; extra == "plain" or python_version >= "3"',  # applies without the extra
        'f; "rev" == extra',  # named only in a reversed comparison: no extra of its own
        'g<1; extra == "low"',  # installed at a version it does not allow
        'h; extra == "bad" and bogus == "1"',
        "not a requirement ((; extra == 'gpu'",
    )
    installed = (top, *(dist(n, v) for n, v in (("a", "1"), ("b", "2"), ("c", "1"), ("g", "1"))))
    markers = {"python_version": "3.11", "sys_platform": "linux"}
    assert installed_extras(installed, markers, frozenset({"top"})) == {"top": ("gpu",)}
    assert installed_extras(installed, markers, frozenset()) == {}


def test_behind_extras_evaluates_only_the_extras_a_marker_names_and_agrees_with_all() -> None:
    """Each marker is evaluated only with the extras it names as `extra == "<name>"`
    (normalized, PEP 685); what it finds is what evaluating it with every extra finds,
    for markers that use `extra` any other way too."""
    from packaging.requirements import Requirement

    from cudatx.discover.dists import _behind_extras

    lines = (
        'a; extra == "gpu"',
        'b; extra == "Multi_Word"',
        'c; extra == "multi-word" or extra == "gpu"',
        'd; extra != "gpu" and extra == "wide"',
        'e; "rev" == extra',
        'f; extra == "extra-x"',
        'g; extra not in "cpu"',
        'h; python_version >= "3" and extra == "wide"',
    )
    dist = _requiring("top", "1", *lines)
    markers = {"python_version": "3.11", "sys_platform": "linux"}
    named = ["Multi_Word", "extra-x", "gpu", "multi-word", "rev", "wide"]
    found = {k: [str(r) for r in v] for k, v in _behind_extras(dist, markers, named).items()}
    every: dict[str, list[str]] = {e: [] for e in named}
    for line in lines:
        marker = Requirement(line).marker
        assert marker is not None
        if marker.evaluate({**markers, "extra": ""}):
            continue  # applies without an extra: behind none
        for extra in named:
            if marker.evaluate({**markers, "extra": extra}):
                every[extra].append(str(Requirement(line)))
    assert found == every
    assert (
        found["multi-word"]
        == found["Multi_Word"]
        == [
            'b; extra == "multi-word"',
            'c; extra == "multi-word" or extra == "gpu"',
            'g; extra not in "cpu"',
        ]
    )


# -------------------------------------------------------------------------------------
# What fuzzing found (tests/test_fuzz.py): each was an uncaught exception or a name that
# would have split a one-line message
# -------------------------------------------------------------------------------------


def test_parse_record_size_beyond_ints_digit_limit_is_a_finding() -> None:
    findings: list[Finding] = []
    assert parse_record("a.py,,1" + "0" * 5000 + "\nb.py,,3\n", "R", findings) == (
        RecordEntry(path="b.py", size=3),
    )
    assert [f.path for f in findings] == ["R:1"]


def _dist_with(tmp_path: Path, metadata: str, direct_url: str | None = None) -> Distribution:
    info = tmp_path / "site" / "x-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(metadata)
    (info / "RECORD").write_text("x.py,,\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(direct_url)
    [dist], _ = scan_distributions((str(tmp_path / "site"),))
    return dist


def test_folded_and_unprintable_names_and_versions(tmp_path: Path) -> None:
    dist = _dist_with(tmp_path / "a", "Name:\n Folded\nVersion: 2.0\n")
    assert (dist.display_name, dist.version) == ("Folded", "2.0")
    dist = _dist_with(tmp_path / "b", "Name: x\u2028y\nVersion: 1\x0b2\n")
    assert (dist.display_name, dist.version) == ("x", "1.0")  # the folder's name and version


@pytest.mark.parametrize(
    "line",
    # What crashed packaging 26.2 (26.4 refuses both itself).
    ["a; os_name == 'Win\x00dows'", "a; " + "(" * 2000 + 'os_name=="x"' + ")" * 2000],
    ids=["nul-in-quoted-value", "nested-parentheses"],
)
def test_requirements_packaging_cannot_parse_are_skipped(tmp_path: Path, line: str) -> None:
    from cudatx.discover.dists import applicable_requirements

    dist = _dist_with(tmp_path, f"Name: x\nVersion: 1\nRequires-Dist: {line}\nRequires-Dist: b\n")
    assert [r.name for r in applicable_requirements(dist, {})] == ["b"]


@pytest.mark.parametrize(
    "text", ['{"url": "file:///a\\nb"}', "[" * 100_000 + "]" * 100_000], ids=["newline", "deep"]
)
def test_reinstall_spec_of_a_hostile_direct_url(tmp_path: Path, text: str) -> None:
    from cudatx.discover.dists import reinstall_spec

    assert reinstall_spec(_dist_with(tmp_path, "Name: x\nVersion: 1\n", text)) == "x==1"
