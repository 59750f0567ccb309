"""``flowc.lsp.wire.serve``, the frame reader of ``flowc lsp``, in-process: valid frames
between any junk (bytes that are no frame, broken headers, wrong lengths) are each
served once and in order, junk is answered with Parse errors, and reading ends at the
end of input. tests/test_lsp_fuzz.py drives the same through a real server process.
"""

from __future__ import annotations

import asyncio
import io
import json
import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from flowc.lsp.wire import MAX_HEADER_LINE, PARSE_ERROR, serve


class Bytes:
    """A :class:`flowc.lsp.wire.Reader` over bytes, with stdin's bound on a line."""

    def __init__(self, data: bytes) -> None:
        self.stream = io.BytesIO(data)

    async def readline(self) -> bytes:
        return self.stream.readline(MAX_HEADER_LINE)

    async def read(self, size: int) -> bytes:
        return self.stream.read(size)


class Recorder:
    """A :class:`flowc.lsp.wire.Receiver` that keeps what it is handed."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.errors: list[tuple[int | str | None, int]] = []

    def receive(self, body: bytes) -> None:
        self.bodies.append(body)

    def reply_error(self, request_id: int | str | None, code: int, message: str) -> None:
        self.errors.append((request_id, code))


def served(data: bytes) -> Recorder:
    recorder = Recorder()
    asyncio.run(serve(threading.Event(), Bytes(data), recorder))
    return recorder


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def request(number: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": number, "method": "textDocument/hover"}).encode()


#: Junk: random bytes (never the text of a Content-Length header, where a frame would
#: begin), lines too long to be headers, headers that are wrong, frames of a wrong length.
JUNK = st.one_of(
    st.binary(max_size=40),
    st.tuples(st.integers(0, MAX_HEADER_LINE * 3), st.binary(min_size=1, max_size=4)).map(
        lambda n_tail: b"j" * n_tail[0] + n_tail[1]
    ),
    st.sampled_from(
        [
            b"\r\n",
            b"garbage\r\n",
            b"X-Thing: 1\r\n",
            b"Content-Type: text/plain\r\n\r\n{}",
            b"Content-Length: abc\r\n\r\n{}",
            b"Content-Length: -1\r\n\r\n",
            b"Content-Length: 2\r\n\r\n{}}}}",
            b"Content-Length: 99999999999999999999\r\n\r\n{",
            b"Content-Length: 1\r\nContent-Length: 2\r\n\r\n{}",
            b"Content-Length: 4\r\ngarbage\r\n\r\nnull",
        ]
    ),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(JUNK, max_size=6), st.lists(st.lists(JUNK, max_size=3), min_size=1, max_size=4))
def test_every_valid_frame_after_junk_is_served_once_in_order(
    before: list[bytes], between: list[list[bytes]]
) -> None:
    data = b"".join(before)
    expected = []
    for number, junk in enumerate(between):
        data += frame(request(number)) + b"".join(junk)
        expected.append(request(number))
    found = served(data)
    served_requests = [body for body in found.bodies if body in expected]
    assert served_requests == expected
    assert all(error == (None, PARSE_ERROR) for error in found.errors)


def test_broken_frames_are_parse_errors_and_reading_goes_on() -> None:
    good = frame(request(1))
    for broken, errors in [
        (b"Content-Length: abc\r\n\r\n{}", 1),
        (b"Content-Type: text/plain\r\n\r\n{}", 1),
        (b"garbage\r\nmore garbage\r\n\r\n", 1),  # one answer for a run of junk
        (b"Content-Length: 4\r\ngarbage\r\n\r\nnull", 1),
        (b"x" * (MAX_HEADER_LINE * 5), 1),
        (b"\r\n\r\n", 0),
    ]:
        found = served(broken + good)
        assert found.bodies == [request(1)], broken
        assert found.errors == [(None, PARSE_ERROR)] * errors, broken


def test_the_end_of_input_ends_reading() -> None:
    for cut in (b"", b"Content-Length: 10\r\n", b"Content-Length: 10\r\n\r\n{}", b"junk"):
        found = served(frame(request(1)) + cut)
        assert found.bodies == [request(1)]
