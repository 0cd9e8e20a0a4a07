"""check-requirements without an environment against an index that lies, stalls or sends
without end (issue 31; design.md section 4, "a hostile index"): the real command, real uv,
real wheels, an index on 127.0.0.1 (tests/support/hostile_index.py) hostile to cudatx's own
requests.

Each run is bounded the way the hook must be: in memory by RLIMIT_AS and in disk by
RLIMIT_FSIZE (set in the child before it runs cudatx, inherited by uv), in time by a small
--index-timeout and the subprocess's timeout; and $TMPDIR is a folder of the test's own that
must be empty afterwards. What passes is what the hook should do: give up on the index in
time and have uv download the wheel (the real conflict is still found, exit 1), or, where uv
fails too, one line naming the index host (exit 13). No timing is asserted beyond finishing
under the subprocess timeout.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import zipfile
from pathlib import Path

import pytest

from cudatx.reading import MAX_RECORD_ROWS
from tests.support.cli import HIDDEN, argv, cudatx, environ
from tests.support.hostile_index import Behaviour, padded, serve_hostile
from tests.support.http_index import serve_index
from tests.support.wheels import build_wheel

FINDINGS = 1
UNREADABLE = 5
UV = 13
MEMORY = 3 << 29  # 1.5 GiB of address space for cudatx (and uv, its child)
DISK = 256 << 20  # no file written larger than this
DEADLINES = ("--index-timeout", "2", "--index-deadline", "20")
TIMEOUT = 150  # the subprocess's: a hook that hangs fails here


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """alpha and beta both write pkg/_x.so, with other bytes: a conflict, exit 1."""
    out = tmp_path_factory.mktemp("hostile-wheels")
    build_wheel(out, "alpha", "1.0", {"pkg/_x.so": b"alpha build\n", "alpha/pad.bin": b"0" * 4096})
    build_wheel(
        out, "beta", "1.0", {"pkg/_x.so": b"beta build\n", "beta/blob.bin": os.urandom(1 << 20)}
    )
    return out


def _bounded() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
    resource.setrlimit(resource.RLIMIT_FSIZE, (DISK, DISK))


def _check(
    tmp_path: Path, index: str, *, cache: Path | None = None, uv_cache: str = "uv-cache"
) -> subprocess.CompletedProcess[str]:
    """`cudatx check-requirements requirements.txt --json` (alpha, beta) against `index`,
    bounded; $TMPDIR is checked empty after it."""
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    (project / "requirements.txt").write_text("alpha\nbeta\n")
    temp = tmp_path / "tmp"
    temp.mkdir(exist_ok=True)
    env = {
        "UV_CACHE_DIR": str(tmp_path / uv_cache),
        "TMPDIR": str(temp),
        # glibc reserves 64 MiB of address space per thread's arena: 8 readers and uv's
        # workers would spend RLIMIT_AS on reservations, not on what is read.
        "MALLOC_ARENA_MAX": "2",
    }
    if cache is not None:
        env["CUDATX_CACHE_DIR"] = str(cache)
    words = ["check-requirements", "requirements.txt", "--index-url", index, "--json"]
    words += [*DEADLINES, *(() if cache is not None else ("--no-cache",))]
    done = subprocess.run(
        argv(*words),
        cwd=project,
        env=environ(HIDDEN, env),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        preexec_fn=_bounded,
        check=False,
    )
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert list(temp.iterdir()) == [], "cudatx left files in $TMPDIR"
    return done


def _reads(done: subprocess.CompletedProcess[str]) -> dict[str, dict[str, object]]:
    assert done.stdout.startswith("{"), done.stdout + done.stderr
    (check,) = json.loads(done.stdout)["files"]
    return {w["name"]: w for w in check["wheels"]}


def _errors(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("cudatx: error")]


FALLBACKS = [
    pytest.param(Behaviour.TRICKLE, False, "took longer than 2 s", id="trickle"),
    pytest.param(Behaviour.TRICKLE_BODY, False, "took longer than 2 s", id="trickle-body"),
    pytest.param(Behaviour.HUGE_RANGE, False, "asked for bytes", id="huge-range"),
    pytest.param(Behaviour.ENDLESS, True, "more than the", id="endless-body"),
    pytest.param(Behaviour.BAD_STATUS, False, "BadStatusLine", id="bad-status-line"),
    pytest.param(Behaviour.MANY_HEADERS, False, "more than 100 headers", id="many-headers"),
    pytest.param(Behaviour.BAD_CHUNKS, False, "IncompleteRead", id="bad-chunks"),
]


@pytest.mark.parametrize(("behaviour", "sizes", "said"), FALLBACKS)
def test_a_hostile_answer_falls_back_to_uv(
    wheels: Path, tmp_path: Path, behaviour: Behaviour, sizes: bool, said: str
) -> None:
    """cudatx gives up on the index within its budget (time, memory, disk) and uv downloads
    the wheels (honestly served to uv): the real conflict is found. Before: the trickles hung
    past the subprocess timeout, the huge range ran out of memory, the endless body out of
    RLIMIT_FSIZE (SIGXFSZ), and the three malformed answers were internal errors (exit 70)."""
    with serve_hostile(wheels, behaviour, sizes=sizes) as (index, served):
        done = _check(tmp_path, index)
    assert done.returncode == FINDINGS, done.stderr
    reads = _reads(done)
    host = index.split("/")[2]
    for name in ("alpha", "beta"):
        assert reads[name]["source"] == "uv download", reads[name]
        why = str(reads[name]["why"])
        assert why.startswith(f"from {host}: ") and said in why, why
        # What cudatx read before giving up: never more than the wheel (and one byte).
        (wheel,) = wheels.glob(f"{name}-*.whl")
        assert int(str(reads[name]["transferred"])) <= wheel.stat().st_size + 1
    if sizes:
        assert all(isinstance(r["size"], int) for r in reads.values())
    assert served.asked_by("uv")  # uv read the wheels itself


def test_where_uv_fails_too_one_line_names_the_index(wheels: Path, tmp_path: Path) -> None:
    """The index answers uv's downloads as badly (it resolves from PEP 658 metadata alone):
    one line naming the index host, exit 13 (uv)."""
    with serve_hostile(wheels, Behaviour.BAD_STATUS, to=("Python-urllib", "uv"), sizes=True) as (
        index,
        _,
    ):
        done = _check(tmp_path, index)
    assert done.returncode == UV, done.stderr
    (error,) = _errors(done)
    host = index.split("/")[2]
    assert f"from {host}: " in error and "BadStatusLine" in error, error


def test_an_index_that_trickles_to_uv_too_ends_at_the_checks_deadline(
    wheels: Path, tmp_path: Path
) -> None:
    """The index trickles its wheels to uv as well as to cudatx (uv resolves from PEP 658
    metadata alone, then waits on the download; uv's own HTTP timeout is per read, so one
    byte a second holds it for ever). The check's deadline (--index-deadline 20) bounds uv's
    fallback too: one line naming uv's step and the deadline, exit 13, well inside the
    subprocess's timeout (before: uv ran on until killed with the test)."""
    with serve_hostile(
        wheels, Behaviour.TRICKLE_BODY, to=("Python-urllib", "uv"), sizes=True, pace=0.5
    ) as (index, _):
        done = _check(tmp_path, index)
    assert done.returncode == UV, done.stderr
    (error,) = _errors(done)
    assert "wall clock" in error and "uv pip install" in error, error
    assert f"from {index.split('/')[2]}: " in error, error  # the index, named


def test_an_index_that_stalls_uvs_resolution_is_named_at_the_deadline(tmp_path: Path) -> None:
    """An index that accepts the connection and never answers a page: uv's resolution waits
    (its HTTP timeout is per read, and by default 30 s a read), the check's deadline ends it:
    one line naming the index's host, exit 13."""
    import socket
    import threading

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        host = f"127.0.0.1:{listener.getsockname()[1]}"
        stop = threading.Event()
        held: list[socket.socket] = []

        def accept() -> None:  # takes connections and says nothing, until the test ends
            listener.settimeout(0.2)
            while not stop.is_set() and len(held) < 64:
                try:
                    held.append(listener.accept()[0])
                except TimeoutError:
                    continue

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        try:
            project = tmp_path / "project"
            project.mkdir()
            (project / "requirements.txt").write_text("alpha\n")
            done = cudatx(
                "check-requirements", "requirements.txt", "--index-url",
                f"http://user:secret@{host}/simple", "--index-deadline", "5", "--no-cache",
                cwd=project, env={"UV_CACHE_DIR": str(tmp_path / "uv-cache")}, timeout=TIMEOUT,
            )  # fmt: skip
        finally:
            stop.set()
            thread.join()
            for conn in held:
                conn.close()
    assert done.returncode == UV, done.stderr
    (error,) = _errors(done)
    assert "wall clock" in error and f"waiting on {host}" in error, error
    assert "secret" not in done.stderr, done.stderr


def test_a_poisoned_record_is_not_believed_elsewhere(wheels: Path, tmp_path: Path) -> None:
    """An index lists the real alpha's name, size and sha256 but sends cudatx's range
    requests a fake alpha without pkg/_x.so. The first check believes it (range reads cannot
    be checked against the sha256): exit 0. What it cached is that index's answer, not "the
    RECORD of that sha256": a later check of the real wheels from an honest index, with the
    same cudatx cache, finds the real conflict (before: exit 0, from the cache)."""
    fakes = tmp_path / "fakes"
    fakes.mkdir()
    fake = build_wheel(fakes, "alpha", "1.0", {"alpha/ok.py": b""})
    real = wheels / fake.name
    cache = tmp_path / "cudatx-cache"
    swap = {fake.name: padded(fake, real)}
    with serve_hostile(wheels, Behaviour.POISON, swap=swap, sizes=True) as (index, _):
        poisoned = _check(tmp_path, index, cache=cache, uv_cache="uv-cache-1")
    assert poisoned.returncode == 0, poisoned.stderr
    assert _reads(poisoned)["alpha"]["source"] == "range requests"
    with serve_index(wheels, sizes=True) as (index, _):
        done = _check(tmp_path, index, cache=cache, uv_cache="uv-cache-2")
    assert done.returncode == FINDINGS, done.stderr
    assert _reads(done)["alpha"]["source"] == "range requests"


def test_only_a_download_is_cached_by_its_hash(wheels: Path, tmp_path: Path) -> None:
    """A RECORD read by range requests is read again from the cache for the same URL only; one
    from a download whose bytes hashed to the index's sha256 for that sha256 anywhere."""
    cache = tmp_path / "cudatx-cache"
    with serve_index(wheels, sizes=True) as (index, _):
        first = _check(tmp_path, index, cache=cache, uv_cache="uv-1")
        again = _check(tmp_path, index, cache=cache, uv_cache="uv-2")
    assert {r["source"] for r in _reads(first).values()} == {"range requests"}
    assert {r["source"] for r in _reads(again).values()} == {"cudatx cache"}
    assert first.returncode == again.returncode == FINDINGS
    with serve_index(wheels, sizes=True) as (index, _):  # another port: another origin
        elsewhere = _check(tmp_path, index, cache=cache, uv_cache="uv-3")
    assert {r["source"] for r in _reads(elsewhere).values()} == {"range requests"}
    with serve_index(wheels, sizes=True, ranges=False) as (index, _):
        downloaded = _check(tmp_path, index, cache=cache, uv_cache="uv-4")
    assert {r["source"] for r in _reads(downloaded).values()} == {"download"}
    with serve_index(wheels, sizes=True) as (index, _):
        hashed = _check(tmp_path, index, cache=cache, uv_cache="uv-5")
    assert {r["source"] for r in _reads(hashed).values()} == {"cudatx cache"}, (
        downloaded.stdout + downloaded.stderr + hashed.stderr
    )
    assert hashed.returncode == FINDINGS


def test_a_record_from_an_index_has_an_installed_records_rows(tmp_path: Path) -> None:
    """A wheel whose RECORD has more rows than cudatx reads in an installed one
    (MAX_RECORD_ROWS) is refused: one line, exit 5 (before: read whole)."""
    folder = tmp_path / "wheels"
    folder.mkdir()
    build_wheel(folder, "beta", "1.0", {"pkg/_x.so": b"beta build\n"})
    many = build_wheel(folder, "alpha", "1.0", {"alpha/__init__.py": b""})
    rows = "".join(f"alpha/generated/m{i:07d}.py,,\n" for i in range(MAX_RECORD_ROWS + 1))
    _grow_record(many, rows)
    with serve_index(folder, sizes=True) as (index, _):
        done = _check(tmp_path, index)
    assert done.returncode == UNREADABLE, done.stderr
    (error,) = _errors(done)
    assert f"{MAX_RECORD_ROWS:,} cudatx reads" in error and "alpha-1.0" in error, error


def _grow_record(wheel: Path, rows: str) -> None:
    """Add `rows` to the wheel's RECORD (files that are not in it: nothing checks a RECORD
    lists only what is there, until it is installed)."""
    with zipfile.ZipFile(wheel) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    (record,) = [n for n in members if n.endswith(".dist-info/RECORD")]
    members[record] += rows.encode()
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
