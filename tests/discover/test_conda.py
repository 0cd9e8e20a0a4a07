"""Reading conda-meta records: what conda writes, and what damage or hostility can put there.

Every record here is real JSON in a real prefix (tests/support/conda.py writes the ones
conda would); a record cudatx cannot use is a finding, never an error or a crash.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest

import cudatx.cache as cache_module
from cudatx.cache import file_key, open_cache
from cudatx.digest import record_encode
from cudatx.discover.owners.conda import read_conda_records
from tests.support.conda import CondaPackage, install_conda_package


def test_not_a_conda_environment(tmp_path: Path) -> None:
    assert read_conda_records(str(tmp_path)) == ((), [])


def test_a_record_as_conda_writes_it(tmp_path: Path) -> None:
    data = b"\x7fELF fake library bytes"
    install_conda_package(
        tmp_path,
        CondaPackage(
            name="libfoo",
            version="1.2",
            build="h0_1",
            files={"lib/libfoo.so.1": data},
            links={"lib/libfoo.so": "libfoo.so.1"},
            depends=("libgcc-ng >=12",),
        ),
    )
    (dist,), findings = read_conda_records(str(tmp_path))
    assert findings == []
    assert (dist.name, dist.display_name, dist.version, dist.owner) == (
        "conda:libfoo",
        "libfoo",
        "1.2",
        "conda",
    )
    assert dist.package is not None and dist.package.depends == ("libgcc-ng >=12",)
    assert dist.metadata_dir == str(tmp_path / "conda-meta" / "libfoo-1.2-h0_1.json")
    rows = {e.path: e for e in dist.records}
    digest = record_encode(hashlib.sha256(data).digest())
    assert rows["lib/libfoo.so.1"] == ("lib/libfoo.so.1", "sha256", digest, len(data))
    assert rows["lib/libfoo.so"] == ("lib/libfoo.so", None, None, None)


def _write(prefix: Path, name: str, text: str) -> None:
    meta = prefix / "conda-meta"
    meta.mkdir(exist_ok=True)
    (meta / name).write_text(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"version": "1"}', "no printable name, version and build"),
        ('{"name": "x\\ny", "version": "1"}', "no printable name, version and build"),
        ('{"name": "", "version": "1"}', "no name"),
        ("[" * 100_000 + "]" * 100_000, "not JSON"),
    ],
)
def test_a_damaged_record_is_a_finding(tmp_path: Path, text: str, message: str) -> None:
    _write(tmp_path, "bad-1-0.json", text)
    dists, findings = read_conda_records(str(tmp_path))
    assert dists == ()
    (finding,) = findings
    assert finding.kind == "malformed conda record" and finding.message.startswith(message)


def test_entries_that_name_nothing_usable_are_left_out(tmp_path: Path) -> None:
    paths = [
        {"_path": "/etc/passwd", "path_type": "hardlink"},
        {"_path": "a\0b", "path_type": "hardlink"},
        {"_path": 7},
        "not an entry",
        {"_path": "share/x", "path_type": "directory"},
        {"_path": "lib/python3.11/site-packages/x/__pycache__/x.pyc", "path_type": "pyc_file"},
        {"_path": "lib/ok.so", "path_type": "hardlink", "sha256": "zz", "size_in_bytes": True},
    ]
    record = {"name": "x", "version": "1", "build": "0", "paths_data": {"paths": paths}}
    _write(tmp_path, "x-1-0.json", json.dumps(record))
    (dist,), findings = read_conda_records(str(tmp_path))
    assert [e.path for e in dist.records] == ["lib/ok.so"]
    assert dist.records[0][1:] == (None, None, None)  # no usable digest, a bool is no size
    assert len(findings) == 4


def test_a_record_without_paths_data_lists_its_files(tmp_path: Path) -> None:
    record = {"name": "old", "version": "1", "build": "0", "files": ["lib/libold.so", "/abs"]}
    _write(tmp_path, "old-1-0.json", json.dumps(record))
    (dist,), _ = read_conda_records(str(tmp_path))
    assert [e.path for e in dist.records] == ["lib/libold.so"]


def test_a_fifo_named_like_a_record_does_not_hang(tmp_path: Path) -> None:
    (tmp_path / "conda-meta").mkdir()
    os.mkfifo(tmp_path / "conda-meta" / "fifo-1-0.json")
    dists, (finding,) = read_conda_records(str(tmp_path))
    assert dists == () and finding.kind == "unreadable"


def test_the_scan_cache_gives_the_same_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = tmp_path / "env"
    install_conda_package(
        env, CondaPackage(name="libfoo", version="1", build="0", files={"lib/libfoo.so": b"x"})
    )
    record = env / "conda-meta" / "libfoo-1-0.json"
    time.sleep(cache_module.RACY_NS / 1e9 + 0.1)  # let the record settle, so it is kept
    monkeypatch.setenv("CUDATX_CACHE_DIR", str(tmp_path / "cache"))
    fresh = read_conda_records(str(env))
    for _ in range(2):  # the first run stores, the second reads what was stored
        cache = open_cache()
        assert cache is not None
        assert read_conda_records(str(env), cache) == fresh
        cache.close()
    cache = open_cache()
    assert cache is not None
    state = ":".join(file_key(os.stat(record)))
    assert cache.get("conda", f"{env}\0{record}", state) is not None
    cache.close()
