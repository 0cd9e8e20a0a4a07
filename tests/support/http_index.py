"""A package index on 127.0.0.1: PEP 503 pages and wheel files over real HTTP, from a folder.

`http.server` from the standard library, with what it lacks for this: byte ranges (RFC 9110
section 14: `bytes=a-b`, `bytes=a-`, `bytes=-n`, one range per request, answered 206 with
Content-Range), switchable off (then every GET is answered 200 with the whole file, as a
server without range support does), a list of User-Agents to refuse (403, as an index that
wants credentials only uv has), and a count of the body bytes sent to each User-Agent (uv
sends `uv/...`, cudatx's urllib `Python-urllib/...`). With `sizes`, a client that asks for
PEP 691's JSON gets it, with each file's size (PEP 700) and its METADATA apart (PEP 658,
`/files/NAME.whl.metadata`), so uv resolves without reading the wheel. `hostile` may answer
a wheel's GET itself, or swap the bytes served (tests/support/hostile_index.py). It listens
on 127.0.0.1 only, and stops by itself after `lifetime` seconds.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


@dataclass
class Served:
    """What the server did, shared with its handler threads."""

    folder: Path
    ranges: bool = True
    refuse: tuple[str, ...] = ()  # User-Agent prefixes answered 403
    sent: Counter[str] = field(default_factory=Counter)  # body bytes per User-Agent word
    requests: list[tuple[str, str, str, int]] = field(
        default_factory=list
    )  # agent, path, range, status
    lock: threading.Lock = field(default_factory=threading.Lock)
    sizes: bool = False  # PEP 691 JSON (with PEP 700 sizes, PEP 658 metadata) when asked
    # (the handler, the wheel's file name, its bytes) -> the bytes to serve, or None where it
    # answered the request itself
    hostile: Callable[[BaseHTTPRequestHandler, str, bytes], bytes | None] | None = None
    stop: threading.Event = field(default_factory=threading.Event)  # set as the server stops

    def sent_to(self, agent: str) -> int:
        with self.lock:
            return sum(n for a, n in self.sent.items() if a.startswith(agent))

    def asked_by(self, agent: str) -> list[tuple[str, str, str, int]]:
        with self.lock:
            return [r for r in self.requests if r[0].startswith(agent)]


def _page(served: Served, project: str) -> bytes | None:
    links = []
    for wheel in sorted(served.folder.glob("*.whl")):
        name = parse_wheel_filename(wheel.name)[0]
        if canonicalize_name(name) != project:
            continue
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        links.append(f'<a href="/files/{wheel.name}#sha256={digest}">{wheel.name}</a><br/>')
    if not links:
        return None
    return ("<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n").encode()


def _json_page(served: Served, project: str) -> bytes | None:
    files: list[dict[str, object]] = []
    versions: set[str] = set()
    for wheel in sorted(served.folder.glob("*.whl")):
        name, version, _, _ = parse_wheel_filename(wheel.name)
        if canonicalize_name(name) != project:
            continue
        data = wheel.read_bytes()
        metadata = hashlib.sha256(_metadata(data)).hexdigest()
        files.append(
            {
                "filename": wheel.name,
                "url": f"/files/{wheel.name}",
                "hashes": {"sha256": hashlib.sha256(data).hexdigest()},
                "size": len(data),
                "core-metadata": {"sha256": metadata},
                "requires-python": None,
                "yanked": False,
            }
        )
        versions.add(str(version))
    if not files:
        return None
    page = {
        "meta": {"api-version": "1.1"},
        "name": project,
        "versions": sorted(versions),
        "files": files,
    }
    return json.dumps(page).encode()


def _metadata(wheel: bytes) -> bytes:
    import io

    with zipfile.ZipFile(io.BytesIO(wheel)) as zf:
        (member,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        return zf.read(member)


_JSON = "application/vnd.pypi.simple.v1+json"


def _handler(served: Served) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _agent(self) -> str:
            return self.headers.get("User-Agent", "")

        def _note(self, status: int) -> None:
            with served.lock:
                served.requests.append(
                    (self._agent(), self.path, self.headers.get("Range", ""), status)
                )

        def _send(self, status: int, body: bytes, headers: dict[str, str], head: bool) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self._note(status)
            if not head:
                self.wfile.write(body)
                with served.lock:
                    served.sent[self._agent().split(" ")[0]] += len(body)

        def _answer(self, head: bool) -> None:
            if any(self._agent().startswith(a) for a in served.refuse):
                self._send(403, b"forbidden\n", {}, head)
                return
            path = self.path.split("#", 1)[0].split("?", 1)[0]
            if path.startswith("/simple/"):
                project = canonicalize_name(path[len("/simple/") :].strip("/"))
                as_json = served.sizes and _JSON in self.headers.get("Accept", "")
                page = _json_page(served, project) if as_json else _page(served, project)
                if page is None:
                    self._send(404, b"not found\n", {}, head)
                else:
                    kind = _JSON if as_json else "text/html"
                    self._send(200, page, {"Content-Type": kind}, head)
                return
            if served.sizes and path.startswith("/files/") and path.endswith(".whl.metadata"):
                wheel = served.folder / path[len("/files/") : -len(".metadata")]
                if "/" not in path[len("/files/") :] and wheel.is_file():
                    self._send(200, _metadata(wheel.read_bytes()), {}, head)
                    return
            wheel = served.folder / path[len("/files/") :]
            if (
                not path.startswith("/files/")
                or "/" in path[len("/files/") :]
                or not wheel.is_file()
            ):
                self._send(404, b"not found\n", {}, head)
                return
            data = wheel.read_bytes()
            if served.hostile is not None and not head:
                swapped = served.hostile(self, wheel.name, data)
                if swapped is None:
                    self._note(0)
                    self.close_connection = True
                    return
                data = swapped
            asked = self.headers.get("Range")
            if not served.ranges or not asked:
                extra = {"Accept-Ranges": "bytes"} if served.ranges else {}
                self._send(200, data, {"Content-Type": "application/octet-stream", **extra}, head)
                return
            match = _RANGE.match(asked.strip())
            if match is None or (not match[1] and not match[2]):
                self._send(416, b"", {"Content-Range": f"bytes */{len(data)}"}, head)
                return
            if not match[1]:  # the last n bytes
                start, end = max(0, len(data) - int(match[2])), len(data) - 1
            else:
                start = int(match[1])
                end = min(int(match[2]) if match[2] else len(data) - 1, len(data) - 1)
            if start >= len(data) or start > end:
                self._send(416, b"", {"Content-Range": f"bytes */{len(data)}"}, head)
                return
            headers = {
                "Content-Type": "application/octet-stream",
                "Accept-Ranges": "bytes",
                "Content-Range": f"bytes {start}-{end}/{len(data)}",
            }
            self._send(206, data[start : end + 1], headers, head)

        def do_GET(self) -> None:
            self._answer(head=False)

        def do_HEAD(self) -> None:
            self._answer(head=True)

    return Handler


@contextmanager
def serve_index(
    folder: Path,
    *,
    ranges: bool = True,
    refuse: tuple[str, ...] = (),
    sizes: bool = False,
    hostile: Callable[[BaseHTTPRequestHandler, str, bytes], bytes | None] | None = None,
    lifetime: float = 600.0,
) -> Iterator[tuple[str, Served]]:
    """(the index URL, `http://127.0.0.1:PORT/simple`, and what the server did). The server
    stops when the block ends, or after `lifetime` seconds, whichever comes first."""
    served = Served(folder, ranges=ranges, refuse=refuse, sizes=sizes, hostile=hostile)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(served))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    watchdog = threading.Timer(lifetime, server.shutdown)
    watchdog.daemon = True
    watchdog.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple", served
    finally:
        watchdog.cancel()
        served.stop.set()  # a hostile answer in progress ends at its next step
        server.shutdown()
        server.server_close()
        thread.join()
