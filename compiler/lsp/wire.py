"""JSON-RPC as ``flowc lsp`` reads it off stdin: LSP's frames (``Content-Length`` headers,
then the body) and the message inside, answering every request and every frame that is
no message. pygls 2 logs such a frame and answers nothing (the client waits forever), so
the frames are read here and each body goes to :meth:`FlowProtocol.receive`:

- a frame whose headers are wrong (no, two or a bad ``Content-Length``, a line that is no
  header) or whose body is no JSON: ``-32700`` (Parse error), id null; a body of unknown
  length is skipped up to the next ``Content-Length`` header;
- JSON that is no JSON-RPC message (not an object, no ``"jsonrpc": "2.0"``, a method or id
  of the wrong type): ``-32600`` (Invalid Request), with the id when it is one;
- a request whose params are not the method's type (a negative position, a string for a
  number, no text document): ``-32602`` (Invalid params), with its id;
- a request after ``shutdown``: ``-32600``; before ``initialize``: ``-32002``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import BinaryIO, Protocol

from lsprotocol import types
from pygls.protocol import LanguageServerProtocol

log = logging.getLogger("flowc.lsp")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
SERVER_NOT_INITIALIZED = -32002

#: Bytes of one header line; a longer line is no header.
MAX_HEADER_LINE = 8192
#: Bytes of one body: flowc's bound on a program (4 Mi characters), escaped in JSON.
MAX_BODY = 64 * 1024 * 1024

_CONTENT_LENGTH = re.compile(rb"content-length[ \t]*:", re.IGNORECASE)
_HEADER = re.compile(rb"[!-9;-~]+[ \t]*:[^\r\n]*\r?\n")


class FlowProtocol(LanguageServerProtocol):
    """pygls's LSP protocol, fed one body at a time by :func:`serve`: every message it
    cannot take is answered with JSON-RPC's error instead of being dropped."""

    initialized = False

    def receive(self, body: bytes) -> None:
        """Handle one frame's body."""
        try:
            data = json.loads(body.decode("utf-8"))
        except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
            self.reply_error(None, PARSE_ERROR, f"Parse error: {error}")
            return
        problem = _invalid_request(data)
        if problem is not None:
            if (
                isinstance(data, dict)
                and "method" not in data
                and ("result" in data or "error" in data)
            ):
                log.warning("flowc lsp: dropped an invalid response: %s", problem)
                return  # JSON-RPC never answers a response
            self.reply_error(_request_id(data), INVALID_REQUEST, f"Invalid Request: {problem}")
            return
        request_id = _request_id(data) if "method" in data else None
        try:
            message = self.structure_message(data)
        except Exception as error:
            cause = error.__cause__ or error
            if request_id is None:
                log.warning("flowc lsp: dropped a notification %s: %s", data["method"], cause)
            else:
                self.reply_error(
                    request_id, INVALID_PARAMS, f"Invalid params for {data['method']}: {cause}"
                )
            return
        self.handle_message(message)

    def handle_message(self, message: object) -> None:
        method = getattr(message, "method", None)
        request_id = getattr(message, "id", None) if method is not None else None
        if method == types.INITIALIZE:
            self.initialized = True
        elif method is not None and method != types.EXIT:
            if self._shutdown:
                if request_id is not None:
                    self.reply_error(request_id, INVALID_REQUEST, "the server is shutting down")
                return
            if not self.initialized:
                if request_id is not None:
                    self.reply_error(request_id, SERVER_NOT_INITIALIZED, "initialize comes first")
                return
        super().handle_message(message)  # type: ignore[arg-type]

    def reply_error(self, request_id: int | str | None, code: int, message: str) -> None:
        """An error response (a plain dict: pygls's types would leave a null id out)."""
        self._send_data(
            {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
        )


def _request_id(data: object) -> int | str | None:
    if not isinstance(data, dict):
        return None
    found = data.get("id")
    return found if isinstance(found, int | str) and not isinstance(found, bool) else None


def _invalid_request(data: object) -> str | None:
    """Why ``data`` is no JSON-RPC 2.0 request, notification or response (None: it is one)."""
    if not isinstance(data, dict):
        return f"a message is a JSON object, not {type(data).__name__}"
    if data.get("jsonrpc") != "2.0":
        return 'a message says "jsonrpc": "2.0"'
    if "id" in data and _request_id(data) is None:
        return "an id is an integer or a string"
    if "method" in data:
        if not isinstance(data["method"], str):
            return "a method is a string"
        return None
    if "id" in data and ("result" in data) != ("error" in data):
        return None  # a response to one of the server's requests
    return "a message has a method (a request or notification) or a result or error"


class Reader(Protocol):
    """Where :func:`serve` reads frames from."""

    async def readline(self) -> bytes: ...

    async def read(self, size: int) -> bytes: ...


class StdinReader:
    """Blocking reads of stdin on a thread of their own, bounded per header line."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.thread = ThreadPoolExecutor(1, thread_name_prefix="flowc-lsp-stdin")

    async def readline(self) -> bytes:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.thread, self.stream.readline, MAX_HEADER_LINE)

    async def read(self, size: int) -> bytes:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.thread, self.stream.read, size)


class Receiver(Protocol):
    """What :func:`serve` hands frames to (:class:`FlowProtocol`)."""

    def receive(self, body: bytes) -> None: ...

    def reply_error(self, request_id: int | str | None, code: int, message: str) -> None: ...


async def serve(stop: threading.Event, reader: Reader, protocol: Receiver) -> None:
    """Read frames until end of input (or exit), each body to the protocol.

    Bytes that are no frame are answered with one Parse error per run of them, and
    skipped: whole lines before a frame's ``Content-Length``, and silently, what comes
    before a ``Content-Length`` header on its line (the rest of a frame whose length was
    wrong, already answered). So a valid frame after any junk is still served."""
    carry = b""  # the end of a line too long to be a header, where the next one may start
    junk = False  # inside a run of junk already answered
    while not stop.is_set():
        length: int | None = None
        problems: list[str] = []
        started = False
        while True:
            chunk = await reader.readline()
            if not chunk:
                return
            line, carry = carry + chunk, b""
            header = _CONTENT_LENGTH.search(line)
            if header is not None and header.start() > 0:
                log.warning("flowc lsp: skipped %d bytes that are no frame", header.start())
                line, length, problems, started = line[header.start() :], None, [], False
            if not line.endswith(b"\n") or (length is None and not _HEADER.fullmatch(line)):
                if line.strip() == b"" and line.endswith(b"\n"):
                    if started:
                        break
                    continue  # blank lines between frames
                if not line.endswith(b"\n"):
                    carry = line[-64:]  # a long line: a header may begin at its very end
                if not junk:
                    protocol.reply_error(None, PARSE_ERROR, f"Parse error: no frame: {line[:80]!r}")
                junk, length, problems, started = True, None, [], False
                continue
            if line.strip() == b"":
                break
            started = True
            if not _HEADER.fullmatch(line):
                problems.append(f"a header line that is no 'Name: value': {line[:80]!r}")
                continue
            name, _, value = line.partition(b":")
            if name.strip().lower() != b"content-length":
                continue
            if length is not None:
                problems.append("two Content-Length headers")
            text = value.strip()
            if not text.isdigit() or len(text) > 12 or int(text) > MAX_BODY:
                problems.append(f"Content-Length {text[:40]!r} is no length up to {MAX_BODY}")
                length = -1
            elif length is None:
                length = int(text)
        junk = False
        if length is None:
            problems.append("a frame without Content-Length")
        if length is not None and length >= 0 and not problems:
            body = await reader.read(length)
            if len(body) < length:
                return
            protocol.receive(body)
            continue
        known = length is not None and length >= 0 and "two Content-Length headers" not in problems
        if known and length is not None:
            if len(await reader.read(length)) < length:
                return
        else:
            junk = True  # its body follows, of unknown length: answered by this reply
        protocol.reply_error(None, PARSE_ERROR, "Parse error: " + "; ".join(problems))
