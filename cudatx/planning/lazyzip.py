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

The index may be hostile (the pre-commit hook reads it on changes from strangers;
design.md section 4, "a hostile index"): every byte from it is bounded in time, memory and disk, and
only what was verified is said to be.

- Time: each request has a wall-clock deadline (`Deadlines.request_s`), whatever the
  server does: every read of its socket is given only the time left (`_Socket`), so a
  server sending one byte a second cannot stretch it (a socket timeout alone, as
  `urlopen(timeout=)` sets, is per read: CPython's socket.settimeout). The caller's
  deadline for all its requests together (`Deadlines.check_s`) caps each one too.
- Memory: each body is read against a budget: what the zip needs (the tail, the central
  directory, the member's span; at most MAX_FETCH) and the file's length as the index
  declared it, whichever is smaller. A 206 whose Content-Range or Content-Length is not the
  span asked for is refused before its body is read (RFC 9110 section 14.4 lets a server
  send less or other than asked; a reader that believes the header buffers what it claims).
- Disk: a download writes at most the index's size of the wheel (else DOWNLOAD_CAP) to an
  anonymous temporary file, and hashes the bytes as it writes them: the member is
  `verified` only when the whole file's sha256 is the index's.
- Parsing: what http.client cannot parse (a bad status line, over 100 headers, a line over
  64 KiB, a bad chunk, a reset: http.client.HTTPException and OSError) is a RemoteError like
  any refusal, so the caller falls back to uv.
"""

from __future__ import annotations

import hashlib
import http.client
import io
import math
import socket
import ssl
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
import zlib
from collections.abc import Callable, Sequence
from typing import IO, Any, NamedTuple

from cudatx.reading import MIB

TAIL = 64 * 1024  # the first request: the end of central directory and, usually, the directory
_SLACK = 1024  # local extra fields may be longer than the central ones
MAX_FETCH = 64 * MIB  # one range larger than this is not a wheel's directory or RECORD
# A download of a wheel whose size the index did not declare (PEP 700's `size`; HTML pages
# have none): past this, uv downloads it (into its cache, which hashes what it keeps).
DOWNLOAD_CAP = 1024 * MIB
MAX_REQUESTS = 8  # per wheel: the tail, the directory, the member, and a few zipfile misses
REDIRECTS = 4  # urllib follows 10; an index redirects a file once (to its CDN)
_CHUNK = 1 << 20
REQUEST_S = 60.0  # wall clock, one request: connect, headers, body
CHECK_S = 300.0  # wall clock, all the requests of one check together


class Deadlines(NamedTuple):
    """How long an index is waited for, in seconds of wall clock (check-requirements'
    --index-timeout and --index-deadline)."""

    request_s: float = REQUEST_S
    check_s: float = CHECK_S


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
    # The whole file was read and its sha256 is the one asked for: the member is the wheel's
    # of that hash. Never so for range reads (they see a sliver of the file).
    verified: bool = False


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
# What reading an answer raises on one http.client cannot parse or the peer cut: a bad
# status line, a line over 64 KiB or over 100 headers (http.client._MAXLINE, _MAXHEADERS;
# LineTooLong and BadStatusLine are HTTPExceptions), a bad chunk size (IncompleteRead, or
# the ValueError of int(line, 16) in _read_next_chunk_size), a reset, a timeout (OSErrors).
_HTTP_ERRORS = (http.client.HTTPException, OSError, ValueError)

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


# -- a request with a deadline ------------------------------------------------------------


class _Socket:
    """A connection's socket whose every read gets only the time left before `deadline`
    (time.monotonic()): http.client reads the status line, the headers and the body through
    `makefile("rb")` (HTTPResponse.__init__), one recv at a time, and a socket timeout
    restarts at each. The rest (sendall, close once no reader is open, as CPython's
    socket.close() waits for its makefile()s) goes to the socket."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock = sock
        self._deadline = deadline
        self._readers = 0
        self._closed = False

    def makefile(self, mode: str = "rb", *args: object, **kwargs: object) -> io.BufferedReader:
        if mode != "rb":  # http.client asks for nothing else
            raise ValueError(f"mode {mode!r}")
        self._readers += 1
        return io.BufferedReader(_Reads(self))

    def recv_into(self, buffer: memoryview) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the deadline passed")
        self._sock.settimeout(left)
        return self._sock.recv_into(buffer)

    def release(self) -> None:
        self._readers -= 1
        if self._closed and self._readers <= 0:
            self._sock.close()

    def close(self) -> None:
        self._closed = True
        if self._readers <= 0:
            self._sock.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class _Reads(io.RawIOBase):
    """The reading end of a `_Socket` (socket.SocketIO with a deadline)."""

    def __init__(self, sock: _Socket) -> None:
        super().__init__()
        self._socket = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return self._socket.recv_into(memoryview(buffer).cast("B"))

    def close(self) -> None:
        if not self.closed:
            self._socket.release()
        super().close()


class _HTTPConnection(http.client.HTTPConnection):
    def __init__(self, *args: Any, deadline: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deadline = deadline

    def connect(self) -> None:
        super().connect()  # bounded by the timeout urllib gives: the time left
        self.sock = _Socket(self.sock, self.deadline)


class _HTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, *args: Any, deadline: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deadline = deadline

    def connect(self) -> None:
        # The TLS handshake, in HTTPSConnection.connect, reads with the timeout urllib gives
        # (the time left) per read; everything after it with the deadline.
        super().connect()
        self.sock = _Socket(self.sock, self.deadline)


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: float) -> None:
        super().__init__()
        self._deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_HTTPConnection, req, deadline=self._deadline)  # type: ignore[arg-type]


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: float) -> None:
        self._tls = ssl.create_default_context()
        super().__init__(context=self._tls)
        self._deadline = deadline

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(
            _HTTPSConnection,  # type: ignore[arg-type]
            req,
            context=self._tls,
            deadline=self._deadline,
        )


class _Redirects(urllib.request.HTTPRedirectHandler):
    """urllib's redirects, fewer, to http and https only, and without reading the redirect's
    body: CPython's http_error_302 reads it to its end (`fp.read()`) before following, an
    unbounded read into memory."""

    max_redirections = REDIRECTS

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: Any,
        newurl: str,
    ) -> urllib.request.Request | None:
        if urllib.parse.urlsplit(newurl).scheme not in ("http", "https"):
            raise urllib.error.HTTPError(newurl, code, f"a redirect to {newurl}", headers, None)
        return super().redirect_request(req, fp, code, msg, headers, newurl)

    def http_error_302(
        self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str, headers: Any
    ) -> IO[bytes] | None:
        return super().http_error_302(req, _Unread(fp), code, msg, headers)  # type: ignore[arg-type]

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


class _Unread:
    """A redirect's body, closed unread."""

    def __init__(self, fp: IO[bytes]) -> None:
        self._fp = fp

    def read(self, *args: object) -> bytes:
        return b""

    def close(self) -> None:
        self._fp.close()


def _opener(deadline: float) -> urllib.request.OpenerDirector:
    """urllib's opener with only what a GET of a wheel needs (no ftp:, file: or data:, which
    a redirect could otherwise reach), every connection under `deadline`."""
    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.ProxyHandler(),  # the http_proxy and https_proxy urlopen honours
        urllib.request.UnknownHandler(),
        _HTTPHandler(deadline),
        _HTTPSHandler(deadline),
        urllib.request.HTTPDefaultErrorHandler(),
        _Redirects(),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener


def _header_int(response: IO[bytes], name: str) -> int | None:
    headers = getattr(response, "headers", None)
    value = (headers.get(name) if headers is not None else None) or ""
    return int(value) if value.strip().isdigit() else None


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


class _Client:
    """GETs of one URL, counting every body byte read, each under its deadline."""

    def __init__(self, url: str, request_s: float, deadline: float) -> None:
        self.url = url
        self.request_s = request_s
        self.deadline = deadline  # the caller's, for all its requests (time.monotonic())
        self.transferred = 0
        self.requests = 0

    def _late(self) -> RemoteError:
        if self.deadline <= time.monotonic():
            return RemoteError("the check's time for reading from the index ran out")
        return RemoteError(f"a request took longer than {self.request_s:g} s")

    def open(self, header: str | None) -> IO[bytes]:
        if self.requests >= MAX_REQUESTS:
            raise RemoteError(f"more than {MAX_REQUESTS} requests for one member")
        self.requests += 1
        now = time.monotonic()
        until = min(now + self.request_s, self.deadline)
        if until <= now:
            raise self._late()
        request = urllib.request.Request(self.url, headers={"Range": header} if header else {})
        # The wheel's bytes, not a cached or transformed copy (pip sends the same).
        request.add_header("Cache-Control", "no-cache")
        request.add_header("Accept-Encoding", "identity")
        try:
            response: IO[bytes] = _opener(until).open(request, timeout=until - now)
        except urllib.error.HTTPError as exc:
            exc.close()
            raise RemoteError(f"HTTP {exc.code} {exc.reason}") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise self._late() from None
            raise RemoteError(f"cannot fetch: {exc.reason}") from None
        except TimeoutError:
            raise self._late() from None
        except _HTTP_ERRORS as exc:
            raise RemoteError(f"a bad answer: {type(exc).__name__}: {exc}") from None
        return response

    def body(
        self, response: IO[bytes], budget: int, sink: Callable[[bytes], object] | None = None
    ) -> bytes:
        """The response body, at most `budget` bytes (more is an error, and no more than one
        byte over it is read); given to `sink` as it comes if there is one."""
        chunks: list[bytes] = []
        total = 0
        try:
            while chunk := response.read(min(_CHUNK, budget + 1 - total)):
                total += len(chunk)
                self.transferred += len(chunk)
                if total > budget:
                    raise RemoteError(f"the server sent more than the {budget} bytes expected")
                if sink is not None:
                    sink(chunk)
                else:
                    chunks.append(chunk)
        except TimeoutError:
            raise self._late() from None
        except _HTTP_ERRORS as exc:
            raise RemoteError(f"the transfer failed: {type(exc).__name__}: {exc}") from None
        finally:
            response.close()
        return b"".join(chunks)

    def ranged(self, response: IO[bytes], first: int, last: int, length: int) -> None:
        """Refuse a 206 that is not exactly bytes first-last of a file of `length`, by its
        headers, before its body is read."""
        status = getattr(response, "status", None)
        got = _content_range(response)
        sent = _header_int(response, "Content-Length")
        if status != 206 or got is None:
            response.close()
            raise RemoteError("the server stopped answering range requests")
        if got != (first, last, length) or (sent is not None and sent != last - first + 1):
            response.close()
            said = f"Content-Range {got[0]}-{got[1]}/{got[2]}, Content-Length {sent}"
            raise RemoteError(f"asked for bytes {first}-{last}/{length}, the server said {said}")

    def fetch(self, start: int, end: int, length: int) -> bytes:
        """Bytes [start, end) of the file of `length` by a range request; anything but 206
        and that span is an error."""
        if end - start > MAX_FETCH:
            raise RemoteError(f"a range of {end - start} bytes is not a wheel's directory")
        if self.transferred + end - start > 2 * MAX_FETCH:  # the directory and the member
            raise RemoteError(f"more than {2 * MAX_FETCH // MIB} MiB of ranges for one member")
        response = self.open(f"bytes={start}-{end - 1}")
        self.ranged(response, start, end - 1, length)
        data = self.body(response, end - start)
        if len(data) != end - start:
            raise RemoteError("the server sent a short range")
        return data


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
    sha256: str | None = None,
    request_s: float = REQUEST_S,
    deadline: float = math.inf,
    download_cap: int = DOWNLOAD_CAP,
) -> Member:
    """The member `pick` chooses from the zip at `url` (http or https), at most `limit`
    bytes. `size` and `sha256`: the file's length and hash as the index gave them; the size
    bounds every read and is checked against the server's, the hash is checked where the
    whole file comes. `request_s`: each request's time; `deadline` (time.monotonic()): the
    caller's, for all of them. Raises RemoteError (with the bytes read before it) when it
    cannot be read."""
    client = _Client(url, request_s, deadline)
    try:
        tail = min(TAIL, size) if size is not None else TAIL
        if tail <= 0:
            raise RemoteError("the index says the file is empty")
        response = client.open(f"bytes=-{tail}")
        status = getattr(response, "status", None)
        if status == 206:
            got = _content_range(response)
            length = size if size is not None else got[2] if got is not None else 0
            client.ranged(response, max(0, length - tail), length - 1, length)
            data = client.body(response, min(tail, length))
            if len(data) != min(tail, length):
                raise RemoteError("the server sent a short range")
            sparse = _Sparse(lambda start, end: client.fetch(start, end, length), length)
            sparse.add(max(0, length - tail), data)
            member = _member(sparse, pick, limit, sparse)  # type: ignore[arg-type]
            return Member(member, client.transferred, True, length)
        if status != 200:
            response.close()
            raise RemoteError(f"HTTP {status}")
        return _download(client, response, pick, limit, size, sha256, download_cap)
    except RemoteError as exc:
        exc.transferred = client.transferred
        raise


def _download(
    client: _Client,
    response: IO[bytes],
    pick: Pick,
    limit: int,
    size: int | None,
    sha256: str | None,
    cap: int,
) -> Member:
    """No ranges: the whole file came. Written to an anonymous temporary file (nothing is
    left in $TMPDIR, whatever happens) up to its declared size, hashed as it is written;
    then the member read from it."""
    budget = size if size is not None else cap
    sent = _header_int(response, "Content-Length")
    if sent is not None and (sent > budget or (size is not None and sent != size)):
        response.close()
        raise RemoteError(f"the server would send {sent} bytes; the index said {size}")
    digest = hashlib.sha256()
    with tempfile.TemporaryFile(prefix="cudatx-wheel-") as whole:

        def keep(chunk: bytes) -> None:
            digest.update(chunk)
            whole.write(chunk)

        client.body(response, budget, sink=keep)
        length = whole.tell()
        if size is not None and length != size:
            raise RemoteError(f"the server's file has {length} bytes; the index said {size}")
        verified = sha256 is not None and digest.hexdigest() == sha256.lower()
        if sha256 is not None and not verified:
            raise RemoteError("the server's file is not the sha256 the index gave")
        whole.seek(0)
        data = _member(whole, pick, limit, None)
    return Member(data, client.transferred, False, length, verified)
