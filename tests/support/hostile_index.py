"""A package index that misbehaves when cudatx reads a wheel from it, for the hook's reads of
wheels' RECORDs (cudatx.planning.lazyzip; design.md section 4, "a hostile index").

tests/support/http_index.py's index, on 127.0.0.1 only, whose answers to a wheel's GET from
the User-Agents in `to` (by default cudatx's urllib; uv's `uv/...` then gets honest answers,
as an index aiming at cudatx would give) are one of `Behaviour`: a trickle, a lying
Content-Range, a body without end, a bad status line, over 100 headers, a bad chunk, or a
wheel's bytes swapped for another's under the real wheel's name, size and sha256 (a
poisoning). Every loop that sends is bounded by a count of bytes and by `until` seconds,
and ends as soon as the server stops or the client hangs up.
"""

from __future__ import annotations

import enum
import io
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from tests.support.http_index import Served, serve_index

TIB = 1 << 40
_BLOCK = b"\0" * (1 << 20)


class Behaviour(enum.Enum):
    TRICKLE = "trickle"  # the whole answer, status line first, one byte every `pace` s
    TRICKLE_BODY = "trickle-body"  # honest headers, then the body one byte every `pace` s
    HUGE_RANGE = "huge-range"  # 206, Content-Range claims bytes 0-(1 TiB - 1); no end
    ENDLESS = "endless"  # Range ignored: 200, no Content-Length, no end
    BAD_STATUS = "bad-status"  # `HTTP/1.1 two-hundred OK`
    MANY_HEADERS = "many-headers"  # 150 headers (http.client reads at most 100)
    BAD_CHUNKS = "bad-chunks"  # chunked, with a chunk size that is not hexadecimal
    POISON = "poison"  # `swap`'s bytes for the wheel, range requests answered honestly


def padded(fake: Path, real: Path) -> bytes:
    """`fake`'s bytes, grown to `real`'s size by bytes before the zip (as a self-extracting
    archive has; zipfile finds the directory from the end), so a reader that checks the
    index's size still believes them."""
    data = fake.read_bytes()
    size = real.stat().st_size
    assert len(data) <= size, "the fake wheel must not be larger than the real one"
    out = b"\0" * (size - len(data)) + data
    with zipfile.ZipFile(io.BytesIO(out)) as zf:
        assert zf.testzip() is None
    return out


def _answer(head: bytes, body: Iterator[bytes] | bytes) -> tuple[bytes, Iterator[bytes]]:
    if isinstance(body, bytes):
        return head, iter((body,))
    return head, body


def _endless(count: int) -> Iterator[bytes]:
    for _ in range(count):
        yield _BLOCK


def _range(data: bytes, asked: str) -> tuple[int, int]:
    """The span `bytes=a-b` or `bytes=-n` asks of `data` (the fixture's own requests only)."""
    spec = asked.strip().removeprefix("bytes=")
    first, _, last = spec.partition("-")
    if not first:
        return max(0, len(data) - int(last)), len(data) - 1
    return int(first), min(int(last) if last else len(data) - 1, len(data) - 1)


def _misbehave(behaviour: Behaviour, data: bytes, asked: str) -> tuple[bytes, Iterator[bytes]]:
    """The raw bytes of the answer: its head, then its body piece by piece."""
    start, end = _range(data, asked) if asked else (0, len(data) - 1)
    span = data[start : end + 1]
    honest = (
        f"HTTP/1.1 206 Partial Content\r\nContent-Type: application/octet-stream\r\n"
        f"Content-Range: bytes {start}-{end}/{len(data)}\r\nContent-Length: {len(span)}\r\n"
        "Connection: close\r\n"
    )
    if behaviour in (Behaviour.TRICKLE, Behaviour.TRICKLE_BODY):
        return _answer((honest + "\r\n").encode(), span)
    if behaviour is Behaviour.HUGE_RANGE:
        head = (
            "HTTP/1.1 206 Partial Content\r\nContent-Type: application/octet-stream\r\n"
            f"Content-Range: bytes 0-{TIB - 1}/{TIB}\r\nConnection: close\r\n\r\n"
        )
        return _answer(head.encode(), _endless(64 * 1024))  # 64 GiB at most
    if behaviour is Behaviour.ENDLESS:
        head = (
            "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n"
        )
        return _answer(head.encode(), _endless(64 * 1024))
    if behaviour is Behaviour.BAD_STATUS:
        return _answer(b"HTTP/1.1 two-hundred OK\r\nConnection: close\r\n\r\n", b"")
    if behaviour is Behaviour.MANY_HEADERS:
        pads = "".join(f"X-Pad-{i}: {i}\r\n" for i in range(150))
        return _answer((honest + pads + "\r\n").encode(), span)
    if behaviour is Behaviour.BAD_CHUNKS:
        head = honest.replace(f"Content-Length: {len(span)}\r\n", "Transfer-Encoding: chunked\r\n")
        return _answer((head + "\r\n").encode(), b"zz-not-hex\r\n" + span + b"\r\n0\r\n\r\n")
    raise AssertionError(behaviour)


def hostile(
    behaviour: Behaviour,
    *,
    to: tuple[str, ...] = ("Python-urllib",),
    pace: float = 1.0,
    until: float = 60.0,
    swap: dict[str, bytes] | None = None,
) -> Callable[[Served], Callable[[BaseHTTPRequestHandler, str, bytes], bytes | None]]:
    """The `hostile` of serve_index for `behaviour`, given the Served (for its stop)."""

    def bound(served: Served) -> Callable[[BaseHTTPRequestHandler, str, bytes], bytes | None]:
        def answer(handler: BaseHTTPRequestHandler, filename: str, data: bytes) -> bytes | None:
            if not any(handler.headers.get("User-Agent", "").startswith(a) for a in to):
                return data
            if behaviour is Behaviour.POISON:
                return (swap or {}).get(filename, data)
            head, body = _misbehave(behaviour, data, handler.headers.get("Range", ""))
            deadline = time.monotonic() + until
            try:
                if behaviour is Behaviour.TRICKLE:
                    _trickle(handler, head + b"".join(body), pace, deadline, served)
                    return None
                handler.wfile.write(head)
                handler.wfile.flush()
                if behaviour is Behaviour.TRICKLE_BODY:
                    _trickle(handler, b"".join(body), pace, deadline, served)
                    return None
                for piece in body:
                    if served.stop.is_set() or time.monotonic() > deadline:
                        break
                    handler.wfile.write(piece)
            except OSError:  # the client hung up: what cudatx should do
                pass
            return None

        return answer

    return bound


def _trickle(
    handler: BaseHTTPRequestHandler, data: bytes, pace: float, deadline: float, served: Served
) -> None:
    """`data`, one byte every `pace` s: at most len(data) bytes, until `deadline`."""
    for i in range(len(data)):
        if served.stop.wait(pace) or time.monotonic() > deadline:
            return
        handler.wfile.write(data[i : i + 1])
        handler.wfile.flush()


@contextmanager
def serve_hostile(
    folder: Path,
    behaviour: Behaviour,
    *,
    to: tuple[str, ...] = ("Python-urllib",),
    pace: float = 1.0,
    until: float = 60.0,
    swap: dict[str, bytes] | None = None,
    sizes: bool = False,
    lifetime: float = 300.0,
) -> Iterator[tuple[str, Served]]:
    """serve_index of `folder` (on 127.0.0.1), hostile to `to` as `behaviour` says."""
    make = hostile(behaviour, to=to, pace=pace, until=until, swap=swap)
    box: list[Served] = []

    def late(handler: BaseHTTPRequestHandler, filename: str, data: bytes) -> bytes | None:
        return make(box[0])(handler, filename, data)

    with serve_index(folder, sizes=sizes, hostile=late, lifetime=lifetime) as (index, served):
        box.append(served)
        yield index, served
