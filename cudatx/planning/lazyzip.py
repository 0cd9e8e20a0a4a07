"""One member of a wheel on an HTTP server, read without downloading the wheel.

A zip keeps its directory at the end: the end of central directory record (the last 22
bytes, or up to 64 KiB more with a comment) gives the central directory's offset and size,
and each central entry gives its member's offset and compressed size. So a member costs
three reads of the file: its end, its central directory, and the member's own bytes. Over
HTTP each is a range request (RFC 9110, section 14). This is the mechanism pip reads
metadata with (src/pip/_internal/network/lazy_wheel.py: `LazyZipOverHTTP`, a file object
backed by range requests that `zipfile` reads) and uv too (crates/uv-client/src/
remote_metadata.rs). Two differences from pip's:

- the first request is a suffix range (`Range: bytes=-65536`), whose `Content-Range` gives
  the file's length, so no HEAD request is made (pip starts with one); where the central
  directory lies inside those last bytes (any wheel of a few hundred files) it is the only
  request before the member;
- the member's whole span (local header, name, extra field, data) is fetched in one request
  before `zipfile` reads it, rather than in the chunks `zipfile` asks for.

A server that ignores `Range` answers 200 with the whole file: then it is read to its end
into a temporary file and the member read from that (a download, counted as such). Every
byte of every response body is counted in `transferred`.
"""

from __future__ import annotations

import io
import tempfile
import urllib.error
import urllib.request
import zipfile
import zlib
from collections.abc import Callable, Sequence
from typing import IO, NamedTuple

from cudatx.reading import MIB

TAIL = 64 * 1024  # the first request: the end of central directory and, usually, the directory
_SLACK = 1024  # local extra fields may be longer than the central ones
MAX_FETCH = 64 * MIB  # one range larger than this is not a wheel's directory or RECORD
_CHUNK = 1 << 20
TIMEOUT_S = 60.0


class RemoteError(Exception):
    """The member could not be read this way: `reason` says why, in a few words."""

    def __init__(self, reason: str, transferred: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.transferred = transferred


class Member(NamedTuple):
    data: bytes
    transferred: int  # response body bytes read
    ranged: bool  # False: the server sent the whole file (a download)
    size: int  # the file's length


# What zipfile raises on a damaged or hostile archive (zlib.error is not an OSError).
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    NotImplementedError,
    EOFError,
    OSError,
    ValueError,
    zlib.error,
)

Pick = Callable[[Sequence[str]], str | None]
"""Chooses the member to read from the zip's names; None: there is none to read."""


class _Sparse(io.RawIOBase):
    """The remote file as `zipfile` reads it: pieces fetched by range, a miss fetched."""

    def __init__(self, fetch: Callable[[int, int], bytes], size: int) -> None:
        super().__init__()
        self._fetch = fetch
        self._size = size
        self._pieces: list[tuple[int, bytes]] = []
        self._pos = 0

    def add(self, start: int, data: bytes) -> None:
        self._pieces.append((start, data))

    def prefetch(self, start: int, end: int) -> None:
        """Have [start, end) in one piece, fetched in one request if it is not yet."""
        end = min(end, self._size)
        if start < end and self._covered(start, end) is None:
            self.add(start, self._fetch(start, end))

    def _covered(self, start: int, end: int) -> bytes | None:
        for at, data in self._pieces:
            if at <= start and end <= at + len(data):
                return data[start - at : end - at]
        return None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        end = self._size if size is None or size < 0 else min(self._size, self._pos + size)
        if end <= self._pos:
            return b""
        data = self._covered(self._pos, end)
        if data is None:
            self.prefetch(self._pos, end)
            data = self._covered(self._pos, end) or b""
        self._pos += len(data)
        return data

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class _Client:
    """GETs of one URL, counting every body byte read."""

    def __init__(self, url: str, timeout: float) -> None:
        self.url = url
        self.timeout = timeout
        self.transferred = 0

    def open(self, header: str | None) -> IO[bytes]:
        request = urllib.request.Request(self.url, headers={"Range": header} if header else {})
        # The wheel's bytes, not a cached or transformed copy (pip sends the same).
        request.add_header("Cache-Control", "no-cache")
        request.add_header("Accept-Encoding", "identity")
        try:
            response: IO[bytes] = urllib.request.urlopen(request, timeout=self.timeout)
        except urllib.error.HTTPError as exc:
            exc.close()
            raise RemoteError(f"HTTP {exc.code} {exc.reason}", self.transferred) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise RemoteError(f"cannot fetch: {reason}", self.transferred) from None
        return response

    def body(self, response: IO[bytes], limit: int, sink: IO[bytes] | None = None) -> bytes:
        """The response body, at most `limit` bytes (more is an error); into `sink` if given."""
        chunks: list[bytes] = []
        total = 0
        try:
            while chunk := response.read(_CHUNK):
                total += len(chunk)
                self.transferred += len(chunk)
                if total > limit:
                    raise RemoteError(f"the server sent more than {limit} bytes", self.transferred)
                if sink is not None:
                    sink.write(chunk)
                else:
                    chunks.append(chunk)
        except OSError as exc:
            raise RemoteError(f"the transfer failed: {exc}", self.transferred) from None
        finally:
            response.close()
        return b"".join(chunks)

    def fetch(self, start: int, end: int) -> bytes:
        """Bytes [start, end) by a range request; anything but 206 and that span is an error."""
        if end - start > MAX_FETCH:
            raise RemoteError(f"a range of {end - start} bytes is not a wheel's directory")
        response = self.open(f"bytes={start}-{end - 1}")
        status = getattr(response, "status", None)
        got = _content_range(response)
        if status != 206 or got is None or got[0] != start:
            response.close()
            raise RemoteError("the server stopped answering range requests", self.transferred)
        data = self.body(response, end - start)
        if len(data) != end - start:
            raise RemoteError("the server sent a short range", self.transferred)
        return data


def _content_range(response: IO[bytes]) -> tuple[int, int, int] | None:
    """(first, last, length) of `Content-Range: bytes first-last/length`."""
    headers = getattr(response, "headers", None)
    value = headers.get("Content-Range", "") if headers is not None else ""
    unit, _, rest = value.strip().partition(" ")
    span, _, length = rest.partition("/")
    first, _, last = span.partition("-")
    if unit != "bytes" or not (first.isdigit() and last.isdigit() and length.isdigit()):
        return None
    return int(first), int(last), int(length)


def _member(archive: IO[bytes], pick: Pick, limit: int, sparse: _Sparse | None) -> bytes:
    try:
        with zipfile.ZipFile(archive) as zf:
            name = pick(zf.namelist())
            if name is None:
                raise RemoteError("the wheel has no such member")
            info = zf.getinfo(name)
            if info.file_size > limit:
                raise RemoteError(f"{name} is larger than {limit // MIB} MiB")
            if sparse is not None:
                # Local header (30 bytes), name, extra field, data: one request.
                span = 30 + len(info.orig_filename.encode()) + len(info.extra) + _SLACK
                sparse.prefetch(info.header_offset, info.header_offset + span + info.compress_size)
            with zf.open(info) as member:
                data = member.read(limit + 1)
    except _ZIP_ERRORS as exc:
        raise RemoteError(f"not a readable zip: {exc}") from None
    if len(data) > limit:
        raise RemoteError(f"{name} is larger than {limit // MIB} MiB")
    return data


def read_member(
    url: str,
    pick: Pick,
    *,
    limit: int,
    size: int | None = None,
    timeout: float = TIMEOUT_S,
    download_limit: int = 1 << 40,
) -> Member:
    """The member `pick` chooses from the zip at `url` (http or https), at most `limit`
    bytes. `size`: the length the index gave, checked against the server's. Raises
    RemoteError (with the bytes read before it) when it cannot be read."""
    client = _Client(url, timeout)
    try:
        response = client.open(f"bytes=-{TAIL}")
        status = getattr(response, "status", None)
        if status == 206:
            got = _content_range(response)
            if got is None:
                response.close()
                raise RemoteError("a 206 answer without Content-Range")
            first, last, length = got
            if size is not None and length != size:
                response.close()
                raise RemoteError(f"the server's file has {length} bytes; the index said {size}")
            tail = client.body(response, last - first + 1)
            sparse = _Sparse(client.fetch, length)
            sparse.add(first, tail)
            data = _member(sparse, pick, limit, sparse)  # type: ignore[arg-type]
            return Member(data, client.transferred, True, length)
        if status != 200:
            response.close()
            raise RemoteError(f"HTTP {status}")
        # No ranges: the whole file came; read it to the end, then the member from it.
        with tempfile.TemporaryFile(prefix="cudatx-wheel-") as whole:
            client.body(response, download_limit, sink=whole)
            length = whole.tell()
            if size is not None and length != size:
                raise RemoteError(f"the server's file has {length} bytes; the index said {size}")
            whole.seek(0)
            data = _member(whole, pick, limit, None)
        return Member(data, client.transferred, False, length)
    except RemoteError as exc:
        exc.transferred = client.transferred
        raise
