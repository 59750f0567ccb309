"""``flowc lsp`` against a hostile client (issue 25, item 7): a real server process over
stdio, spoken to through raw frames (pytest-lsp cannot send a broken one) — invalid
params, malformed frames, huge and concurrent documents, a crashing analysis. Every
request must be answered within a bound, the server must keep serving, and a hang fails
the test (each wait has a deadline) instead of hanging it.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from fuzzing import EXAMPLES, generate_program, mutate_bytes, mutate_tokens, seeded

ROOT = Path(__file__).resolve().parent.parent
#: A program whose one diagnostic is W0001 (at parallelism 100 the default max
#: parallelism of its window aggregate moves with the parallelism).
CLICKS = (
    (ROOT / "examples" / "clicks_per_user.flow")
    .read_text(encoding="utf-8")
    .replace("parallelism = 8,", "parallelism = 100,")
)

#: Seconds any request may take to be answered (generous: the machine is shared).
BOUND = 10.0
#: Seconds a request on a small document may take while a big one is analysed.
SMALL_BOUND = 2.0

#: A JSON-RPC message as JSON decodes it.
Message = dict[str, Any]


def big_program(size: int) -> str:
    """A valid program of about ``size`` bytes: the clicks example and many views."""
    parts = [CLICKS]
    total = len(CLICKS)
    index = 0
    while total < size:
        view = (
            f"\nCREATE VIEW v{index} AS\n  FROM cleaned\n"
            f"  |> WHERE url IS NOT NULL AND user_id <> 'x{index}'\n"
            "  |> SELECT user_id, lower(url) AS url, ts;\n"
        )
        parts.append(view)
        total += len(view)
        index += 1
    return "".join(parts)


class Wire:
    """A ``flowc lsp`` process and a JSON-RPC client of raw frames: a reader thread puts
    every message the server writes on a queue; waits have deadlines."""

    def __init__(self, command: list[str] | None = None) -> None:
        self.log: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        self.process = subprocess.Popen(
            command or [sys.executable, "-m", "flowc", "lsp", "--stdio"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.inbox: queue.Queue[Message | None] = queue.Queue()
        self.seen: list[Message] = []
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        while True:
            length = None
            while True:
                line = stream.readline()
                if not line:
                    self.inbox.put(None)
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            assert length is not None, "the server wrote a frame without Content-Length"
            self.inbox.put(json.loads(stream.read(length)))

    # ------------------------------------------------------------------ sending

    def send_raw(self, data: bytes) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(data)
        stdin.flush()

    def send_body(self, body: bytes) -> None:
        self.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def send(self, message: Message) -> None:
        self.send_body(json.dumps(message).encode())

    def notify(self, method: str, params: object) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def ask(self, method: str, params: object) -> int:
        """Send a request without waiting; its id."""
        number = self.request_id()
        self.send({"jsonrpc": "2.0", "id": number, "method": method, "params": params})
        return number

    def request(self, method: str, params: object, bound: float = BOUND) -> Message:
        return self.answer(self.ask(method, params), bound, f"{method} {params!r:.200}")

    # ------------------------------------------------------------------ receiving

    def wait_for(self, wanted: Callable[[Message], bool], bound: float, what: str) -> Message:
        """The first message (seen before or arriving within ``bound`` s) ``wanted`` takes."""
        for message in self.seen:
            if wanted(message):
                self.seen.remove(message)
                return message
        deadline = time.monotonic() + bound
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(f"no {what} within {bound} s; the server's log:\n{self.stderr()}")
            try:
                arrived = self.inbox.get(timeout=left)
            except queue.Empty:
                continue
            if arrived is None:
                pytest.fail(f"the server exited waiting for {what}; its log:\n{self.stderr()}")
            if wanted(arrived):
                return arrived
            self.seen.append(arrived)

    def answer(self, number: int | None, bound: float = BOUND, what: str = "") -> Message:
        """The response to request ``number`` (None: an error reply to a message with no
        usable id)."""
        return self.wait_for(
            lambda m: "method" not in m and m.get("id", "missing") == number,
            bound,
            f"answer to request {number} {what}",
        )

    def error_code(self, number: int | None, what: str = "") -> int | None:
        reply = self.answer(number, BOUND, what)
        error = reply.get("error")
        return error.get("code") if isinstance(error, dict) else None

    def diagnostics(self, uri: str, bound: float = BOUND, version: int | None = None) -> Message:
        """The next publishDiagnostics of ``uri`` (of ``version``, when given)."""

        def wanted(m: Message) -> bool:
            if m.get("method") != "textDocument/publishDiagnostics":
                return False
            params = m["params"]
            return bool(params["uri"] == uri) and (
                version is None or params.get("version") == version
            )

        found = self.wait_for(wanted, bound, f"diagnostics of {uri}")
        params: Message = found["params"]
        return params

    def stderr(self) -> str:
        self.log.seek(0)
        return self.log.read()[-4000:].decode("utf-8", "replace")

    # ------------------------------------------------------------------ session

    def initialize(self, options: object = None) -> None:
        reply = self.request(
            "initialize",
            {
                "processId": None,
                "rootUri": ROOT.as_uri(),
                "capabilities": {},
                "initializationOptions": options,
            },
        )
        assert "result" in reply, reply
        self.notify("initialized", {})

    def open(self, uri: str, text: str, version: int = 1) -> None:
        self.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "flow", "version": version, "text": text}},
        )

    def change(self, uri: str, text: str, version: int) -> None:
        self.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]},
        )

    def close(self) -> None:
        try:
            if self.process.poll() is None:
                number = self.ask("shutdown", None)
                self.answer(number, BOUND, "shutdown")
                self.notify("exit", None)
                assert self.process.wait(timeout=BOUND) == 0, self.stderr()
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            self.log.close()


@pytest.fixture
def wire() -> Iterator[Wire]:
    server = Wire()
    server.initialize()
    yield server
    server.close()


def hover(uri: str, line: object, character: object) -> Message:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}


def still_serving(wire: Wire, uri: str) -> None:
    """A valid request on an open document is answered, with the right answer."""
    reply = wire.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})
    assert "result" in reply, reply
    result = reply["result"]
    assert isinstance(result, list) and {s["name"] for s in result} >= {"clicks", "cleaned"}


# ---------------------------------------------------------------------- invalid params

#: Positions outside LSP's ``uinteger`` (0 to 2^31-1), or no number: Invalid params.
INVALID_POSITIONS = [(0, -1), (0, 2**40), (-1, 0), (2**31, 0), (None, 0), (0, [1]), (0, {})]
#: Positions of another JSON type that pygls's converter takes as numbers ("1" as 1, 0.5
#: as 0): answered, with an error or a result.
LOOSE_POSITIONS = [(0, "1"), (0.5, 0), (True, 0)]


@pytest.mark.parametrize(
    "method",
    [
        "textDocument/hover",
        "textDocument/definition",
        "textDocument/references",
        "textDocument/completion",
    ],
)
def test_invalid_positions_are_answered_invalid_params(wire: Wire, method: str) -> None:
    uri = "file:///work/clicks.flow"
    wire.open(uri, CLICKS)
    wire.diagnostics(uri)
    for line, character in INVALID_POSITIONS + LOOSE_POSITIONS:
        params = hover(uri, line, character)
        if method == "textDocument/references":
            params["context"] = {"includeDeclaration": True}
        number = wire.ask(method, params)
        reply = wire.answer(number, BOUND, f"{method} at {line}:{character}")
        if (line, character) in INVALID_POSITIONS:
            assert reply.get("error", {}).get("code") == -32602, reply
        else:
            assert ("result" in reply) != ("error" in reply), reply
    still_serving(wire, uri)


def test_wrong_shapes_and_unknown_documents_are_answered(wire: Wire) -> None:
    uri = "file:///work/clicks.flow"
    wire.open(uri, CLICKS)
    wire.diagnostics(uri)
    wrong: list[tuple[str, object]] = [
        ("textDocument/hover", None),
        ("textDocument/hover", []),
        ("textDocument/hover", {"textDocument": {"uri": 7}, "position": {"line": 0}}),
        ("textDocument/hover", {"position": {"line": 0, "character": 0}}),
        ("textDocument/documentSymbol", {"textDocument": "clicks"}),
        ("textDocument/codeAction", {"textDocument": {"uri": uri}}),
        ("textDocument/completion", "hover"),
    ]
    for method, params in wrong:
        number = wire.ask(method, params)
        assert wire.error_code(number, f"{method} {params}") == -32602
    # Valid params: a document never opened, a position past the end, an unknown method.
    for unknown in ("file:///nowhere/missing.flow", "untitled:Untitled-1", "file:///dev/zero"):
        reply = wire.request("textDocument/hover", hover(unknown, 0, 0))
        assert reply.get("result", "no result") is None, reply
        reply = wire.request("textDocument/documentSymbol", {"textDocument": {"uri": unknown}})
        assert reply.get("result") == [], reply
    reply = wire.request("textDocument/hover", hover(uri, 10**6, 2**31 - 1))
    assert reply.get("result", "no result") is None, reply
    reply = wire.request("textDocument/completion", hover(uri, 10**6, 2**31 - 1))
    assert isinstance(reply.get("result"), dict), reply
    assert wire.error_code(wire.ask("flowc/noSuchMethod", {}), "unknown method") == -32601
    still_serving(wire, uri)


# ---------------------------------------------------------------------- malformed frames


def test_malformed_frames_are_answered_and_the_server_keeps_serving(wire: Wire) -> None:
    uri = "file:///work/clicks.flow"
    wire.open(uri, CLICKS)
    wire.diagnostics(uri)
    broken_bodies: list[tuple[bytes, int]] = [
        (b'{"jsonrpc": "2.0", "id": 1, "method": "textDocument/hover", ', -32700),
        (b"not json at all", -32700),
        (b"\xff\xfe\x00garbage", -32700),
        (b"[1, 2, 3]", -32600),
        (b"[]", -32600),
        (b"42", -32600),
        (b'"a string"', -32600),
        (b"null", -32600),
        (b"{}", -32600),
        (b'{"jsonrpc": "2.0"}', -32600),
        (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "textDocument/hover"}', -32600),
        (b'{"jsonrpc": "2.0", "id": [1], "method": "shutdown"}', -32600),
        (b'{"jsonrpc": "2.0", "method": 17}', -32600),
    ]
    for body, code in broken_bodies:
        wire.send_body(body)
        assert wire.error_code(None, repr(body)) == code, body
        still_serving(wire, uri)
    # A request of the wrong JSON-RPC version, or with a method that is not a string:
    # answered with its id.
    wire.send({"jsonrpc": "1.0", "id": 900, "method": "textDocument/hover", "params": {}})
    assert wire.error_code(900, "jsonrpc 1.0") == -32600
    wire.send({"jsonrpc": "2.0", "id": 901, "method": ["textDocument/hover"]})
    assert wire.error_code(901, "method a list") == -32600
    broken_headers = [
        b"Content-Length: abc\r\n\r\n{}",
        b"Content-Length: -5\r\n\r\n{}",
        b"Content-Length: 99999999999999999999\r\n\r\n{}",
        b"Content-Type: application/vscode-jsonrpc\r\n\r\n{}",
        b"Content-Length: 10\r\nContent-Length: 5\r\n\r\n{}",
        b"garbage without a colon\r\n\r\n",
    ]
    for frame in broken_headers:
        wire.send_raw(frame)
        assert wire.error_code(None, repr(frame)) == -32700, frame
        still_serving(wire, uri)
    # A Content-Length longer than the body swallows the start of the next frame: that
    # frame's bytes are a Parse error, and the one after is served.
    good = json.dumps({"jsonrpc": "2.0", "method": "$/noop", "params": {}}).encode()
    wire.send_raw(b"Content-Length: %d\r\n\r\n{}" % (len(good) + 5))
    wire.send_body(good)
    assert wire.error_code(None, "a long Content-Length") == -32700
    still_serving(wire, uri)
    # Shorter than the body: the body's rest is skipped.
    wire.send_raw(b"Content-Length: 2\r\n\r\n{}}}}garbage")
    assert wire.error_code(None, "a short Content-Length") == -32600
    still_serving(wire, uri)
    # A response, even an invalid one, is never answered (JSON-RPC).
    wire.send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "?"}})
    wire.send({"jsonrpc": "2.0", "id": "no-such-request", "result": 1})
    still_serving(wire, uri)
    assert [m for m in wire.seen if "error" in m] == []
    assert wire.process.poll() is None


def test_requests_before_initialize_and_after_shutdown_are_answered() -> None:
    wire = Wire()
    try:
        early = wire.ask("textDocument/hover", hover("file:///work/a.flow", 0, 0))
        assert wire.error_code(early, "hover before initialize") == -32002
        wire.initialize()
        wire.open("file:///work/clicks.flow", CLICKS)
        still_serving(wire, "file:///work/clicks.flow")
        assert "result" in wire.request("shutdown", None)
        late = wire.ask("textDocument/documentSymbol", {"textDocument": {"uri": "x"}})
        assert wire.error_code(late, "a request after shutdown") == -32600
    finally:
        wire.close()


# ---------------------------------------------------------------------- big documents

#: About 1 MB: the clicks example and some 8,000 views.
BIG = big_program(1_000_000)


def test_a_small_document_answers_while_a_big_one_is_analysed(wire: Wire) -> None:
    big, small = "file:///work/big.flow", "file:///work/small.flow"
    wire.open(small, CLICKS)
    wire.diagnostics(small)
    wire.open(big, BIG)
    time.sleep(0.5)  # the big analysis is under way
    latencies = []
    for _ in range(5):
        started = time.monotonic()
        reply = wire.request("textDocument/hover", hover(small, 13, 13), bound=BOUND)
        latencies.append(time.monotonic() - started)
        assert "result" in reply and reply["result"] is not None, reply
        assert "view `cleaned`" in json.dumps(reply["result"])
    assert max(latencies) < SMALL_BOUND, latencies
    # A change to the small document is checked at once too.
    wire.change(small, CLICKS.replace("lower(url)", "lower(uurl)"), 2)
    started = time.monotonic()
    found = wire.diagnostics(small, bound=BOUND, version=2)
    assert time.monotonic() - started < SMALL_BOUND + 0.3, "small document's check waited"
    assert [d["code"] for d in found["diagnostics"] if d["severity"] == 1] == ["E0201"]
    # And the big one is checked in the end (its bound of tokens, as `flowc check` says).
    result = wire.diagnostics(big, bound=120)
    assert [d["code"] for d in result["diagnostics"]] in (["E0903"], ["E0991"])


def test_an_analysis_past_its_budget_says_so() -> None:
    wire = Wire()
    try:
        wire.initialize({"analysisTimeout": 2})
        big = "file:///work/big.flow"
        wire.open(big, BIG)
        found = wire.diagnostics(big, bound=BOUND)
        (only,) = found["diagnostics"]
        assert only["code"] == "E0991" and only["severity"] == 1
        assert only["range"]["start"] == {"line": 0, "character": 0}
        assert "2 s" in only["message"] and "flowc check" in only["message"]
        # Requests on it are still answered (from the text alone).
        reply = wire.request("textDocument/hover", hover(big, 13, 13))
        assert "result" in reply, reply
        # A small document in the same server is checked as always.
        wire.open("file:///work/small.flow", CLICKS)
        small = wire.diagnostics("file:///work/small.flow")
        assert [d["code"] for d in small["diagnostics"]] == ["W0001"]
    finally:
        wire.close()


def test_a_stale_analysis_never_overwrites_a_newer_one(wire: Wire) -> None:
    uri = "file:///work/edited.flow"
    wire.open(uri, BIG, version=1)
    time.sleep(0.2)
    fixed = CLICKS.replace("lower(url)", "lower(uurl)")
    wire.change(uri, fixed, 2)
    found = wire.diagnostics(uri, bound=120, version=2)
    assert [d["code"] for d in found["diagnostics"] if d["severity"] == 1] == ["E0201"]
    # Version 1's analysis ends later and is dropped (the server says so in the client's
    # log): nothing was published for it, before or after version 2's.
    dropped = wire.wait_for(
        lambda m: (
            m.get("method") == "window/logMessage"
            and f"dropped the analysis of {uri} version 1" in m["params"]["message"]
        ),
        120,
        "the drop of version 1's analysis",
    )
    assert dropped["params"]["type"] == 4  # Log
    published = [m for m in wire.seen if m.get("method") == "textDocument/publishDiagnostics"]
    assert published == [], published
    still = wire.request("textDocument/hover", hover(uri, 13, 13))
    assert "view `cleaned`" in json.dumps(still["result"])


# ---------------------------------------------------------------------- a crashing analysis

CRASHING = (
    "import runpy, sys\n"
    "import flowc.lsp.analysis as analysis\n"
    "real = analysis.compile\n"
    "def compile(text, *args, **kwargs):\n"
    "    if 'CRASH_ME' in text:\n"
    "        raise KeyError('a bug in flowc')\n"
    "    return real(text, *args, **kwargs)\n"
    "analysis.compile = compile\n"
    "sys.argv = ['flowc', 'lsp']\n"
    "runpy.run_module('flowc', run_name='__main__')\n"
)


def test_a_crashing_analysis_publishes_an_internal_error() -> None:
    wire = Wire([sys.executable, "-c", CRASHING])
    try:
        wire.initialize()
        uri = "file:///work/crash.flow"
        wire.open(uri, "-- CRASH_ME\n" + CLICKS)
        found = wire.diagnostics(uri)
        (only,) = found["diagnostics"]
        assert only["code"] == "E0990" and only["severity"] == 1
        assert only["range"]["start"] == {"line": 0, "character": 0}
        assert "KeyError" in only["message"] and "report" in only["message"]
        # The symbols still come from the parse; the server keeps serving.
        reply = wire.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})
        assert {s["name"] for s in reply["result"]} >= {"clicks", "cleaned"}
        wire.change(uri, CLICKS, 2)
        assert [d["code"] for d in wire.diagnostics(uri, version=2)["diagnostics"]] == ["W0001"]
    finally:
        wire.close()


# ---------------------------------------------------------------------- the fuzzer


def _fuzzed_texts(count: int) -> list[str]:
    examples = sorted(EXAMPLES)
    texts = []
    for seed in range(count):
        chooser = seeded(9100 + seed)
        example = EXAMPLES[examples[seed % len(examples)]]
        if seed % 3 == 0:
            texts.append(generate_program(chooser))
        elif seed % 3 == 1:
            texts.append(mutate_tokens(chooser, example))
        else:
            texts.append(mutate_bytes(chooser, example.encode()).decode("utf-8", "replace"))
    return texts


def test_fuzzed_messages_on_concurrent_documents_are_all_answered(wire: Wire) -> None:
    """Forty documents opened at once and a 1 MB one, each asked everything at positions
    in, past and outside it (some invalid), with no wait between requests: every request
    is answered within the bound, with a result or an error of JSON-RPC's."""
    import random

    pick = random.Random(25)
    texts = _fuzzed_texts(40)
    uris = [f"file:///work/fuzz{i}.flow" for i in range(len(texts))]
    wire.open("file:///work/big.flow", BIG)
    for uri, text in zip(uris, texts, strict=True):
        wire.open(uri, text)
    asked: dict[int, str] = {}
    methods = [
        "textDocument/hover",
        "textDocument/definition",
        "textDocument/references",
        "textDocument/completion",
        "textDocument/documentSymbol",
        "textDocument/codeAction",
    ]
    positions: list[object] = [0, 1, 5, 200, 2**31 - 1, -3, 2**40, "x", None]
    for round_ in range(300):
        uri = pick.choice([*uris, "file:///work/big.flow", "file:///work/never-opened.flow"])
        method = pick.choice(methods)
        params: dict[str, object] = {"textDocument": {"uri": uri}}
        if method != "textDocument/documentSymbol":
            line, character = pick.choice(positions), pick.choice(positions)
            params["position"] = {"line": line, "character": character}
        if method == "textDocument/references":
            params["context"] = {"includeDeclaration": True}
        if method == "textDocument/codeAction":
            del params["position"]
            params["range"] = {
                "start": {"line": 0, "character": 0},
                "end": {"line": pick.choice(positions), "character": 0},
            }
            params["context"] = {"diagnostics": []}
        if round_ % 37 == 0:  # now and then, an edit in between
            index = pick.randrange(len(uris))
            wire.change(uris[index], texts[pick.randrange(len(texts))], 2 + round_)
        asked[wire.ask(method, params)] = f"{method} {params}"
    deadline = time.monotonic() + 60
    for number, what in asked.items():
        reply = wire.answer(number, max(deadline - time.monotonic(), 0.1), what)
        assert ("result" in reply) != ("error" in reply), reply
        if "error" in reply:
            assert reply["error"]["code"] in (-32602, -32800), (what, reply)
    assert wire.process.poll() is None
    wire.open("file:///work/clicks.flow", CLICKS)
    still_serving(wire, "file:///work/clicks.flow")
