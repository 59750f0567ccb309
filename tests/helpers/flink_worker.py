"""One long-lived PyFlink process for the tests that ask real Flink.

Each question to Flink used to be ``subprocess.run([FLINK_PYTHON, "-c", script, *args])``:
a new Python, a new ``import pyflink`` and a new JVM gateway before any work (seconds
each, about 30 times per CI run). :func:`run_flink` runs the script in one worker process
started on first use instead, as ``-c`` would run it (as ``__main__`` with fresh globals,
``sys.argv == ["-c", *args]``, ``sys.stdin`` the given text, its ``sys.stdout`` and
``sys.stderr`` captured, an uncaught exception is return code 1 with its traceback), and
gives back the ``CompletedProcess`` the subprocess gave.

Requests and replies travel over two pipes of their own, one JSON line each with the
request's unique id, never over the worker's stdout or stderr, where the JVM and PyFlink
write what they like (those go to files, read only for a dead worker's message). A worker
that dies or outlives a request's timeout is killed; the test fails saying so, and the next
request starts a new worker. A change of environment (other than pytest's own
``PYTEST_CURRENT_TEST``) starts a new worker too, as the JVM reads it at launch.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

#: Run by the worker (``FLINK_PYTHON -c DRIVER <request fd> <reply fd>``): one request at a
#: time, each script as ``python -c`` runs it.
DRIVER = r'''
import io, json, os, sys, types


def exit_code(stop, err):
    """What Python's -c exits with for a SystemExit (an object other than int is printed)."""
    if stop.code is None:
        return 0
    if isinstance(stop.code, int):
        return stop.code
    print(stop.code, file=err)
    return 1


def run(request):
    out, err = io.StringIO(), io.StringIO()
    saved = (sys.argv, sys.stdin, sys.stdout, sys.stderr, sys.modules["__main__"], os.getcwd())
    main = types.ModuleType("__main__")
    sys.argv = ["-c", *request["argv"]]
    sys.stdin = io.StringIO(request["stdin"] or "")
    sys.stdout, sys.stderr = out, err
    sys.modules["__main__"] = main
    code = 0
    try:
        os.chdir(request["cwd"])
        exec(compile(request["script"], "<string>", "exec"), main.__dict__)
    except SystemExit as stop:
        code = exit_code(stop, err)
    except BaseException as error:  # as -c: any uncaught exception is exit code 1
        # From the script's own frame on, by the interpreter's hook, as -c prints it.
        error.__traceback__ = error.__traceback__.tb_next
        sys.__excepthook__(type(error), error, error.__traceback__)
        code = 1
    finally:
        sys.argv, sys.stdin, sys.stdout, sys.stderr, sys.modules["__main__"], cwd = saved
        os.chdir(cwd)
    return {"id": request["id"], "stdout": out.getvalue(), "stderr": err.getvalue(),
            "returncode": code}


def serve(request_fd, reply_fd):
    os.set_inheritable(request_fd, False)
    os.set_inheritable(reply_fd, False)
    requests = os.fdopen(request_fd, "r", encoding="utf-8")
    replies = os.fdopen(reply_fd, "w", encoding="utf-8")
    for line in requests:
        replies.write(json.dumps(run(json.loads(line))) + "\n")
        replies.flush()


serve(int(sys.argv[1]), int(sys.argv[2]))
'''

#: Environment variables that change under pytest without changing what Flink does.
_VOLATILE_ENV = frozenset({"PYTEST_CURRENT_TEST"})


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _VOLATILE_ENV}


class FlinkWorker:
    """A PyFlink process that runs scripts one after another (see the module's doc)."""

    def __init__(self, python: str) -> None:
        self.python = python
        self.logs = Path(tempfile.mkdtemp(prefix="flowc-flink-worker-"))
        self.environment = _environment()
        request_read, self._requests = os.pipe()
        self._replies, reply_write = os.pipe()
        with (
            open(self.logs / "stdout", "wb") as stdout,
            open(self.logs / "stderr", "wb") as stderr,
        ):
            self.process = subprocess.Popen(
                [python, "-c", DRIVER, str(request_read), str(reply_write)],
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                pass_fds=(request_read, reply_write),
                start_new_session=True,  # its own process group: the JVM goes with it
            )
        os.close(request_read)
        os.close(reply_write)
        self._pending = b""

    def output_tail(self, chars: int = 3000) -> str:
        """The end of what the worker (and its JVM) wrote to its own stderr and stdout."""
        parts = []
        for name in ("stderr", "stdout"):
            text = (self.logs / name).read_text(encoding="utf-8", errors="replace")
            parts.append(f"--- worker {name} (tail) ---\n{text[-chars:]}")
        return "\n".join(parts)

    def run(
        self, script: str, args: list[str], stdin: str | None, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        """Runs ``script``; raises ``WorkerLost`` if the worker dies or overruns ``timeout``."""
        request_id = uuid.uuid4().hex
        request = {
            "id": request_id,
            "script": script,
            "argv": args,
            "stdin": stdin,
            "cwd": os.getcwd(),
        }
        data = memoryview(json.dumps(request).encode("utf-8") + b"\n")
        try:
            while data:
                data = data[os.write(self._requests, data) :]
        except BrokenPipeError:
            raise WorkerLost(f"the PyFlink worker had died\n{self.output_tail()}") from None
        line = self._read_line(time.monotonic() + timeout, timeout)
        reply = json.loads(line)
        if reply.get("id") != request_id:
            raise WorkerLost(f"the PyFlink worker answered another request: {line[:200]!r}")
        return subprocess.CompletedProcess(
            [self.python, "-c", script, *args],
            reply["returncode"],
            reply["stdout"],
            reply["stderr"],
        )

    def _read_line(self, deadline: float, timeout: float) -> str:
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerLost(
                    f"the PyFlink worker took longer than {timeout:g} s (killed)\n"
                    f"{self.output_tail()}"
                )
            ready, _, _ = select.select([self._replies], [], [], min(left, 5.0))
            if not ready:
                continue
            chunk = os.read(self._replies, 1 << 20)
            if not chunk:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=30)
                raise WorkerLost(
                    f"the PyFlink worker died (exit code {self.process.returncode})\n"
                    f"{self.output_tail()}"
                )
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line.decode("utf-8")

    def stop(self, wait: float = 10) -> None:
        """Ends the worker: closing its request pipe ends its loop; its group (the JVM
        too) is killed if it has not exited after ``wait`` seconds."""
        for fd in (self._requests, self._replies):
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=wait)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        shutil.rmtree(self.logs, ignore_errors=True)


class WorkerLost(Exception):
    """The worker died or overran a request's timeout (it has been stopped)."""


_worker: FlinkWorker | None = None


def run_flink(
    python: str, script: str, *args: str, stdin: str | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run([python, "-c", script, *args], input=stdin, capture_output=True,
    text=True, timeout=timeout)`` as the session's PyFlink worker runs it. A dead or
    overrunning worker fails the test (the next call starts a new worker)."""
    global _worker
    if _worker is not None and (
        _worker.python != python
        or _worker.environment != _environment()
        or _worker.process.poll() is not None
    ):
        _worker.stop()
        _worker = None
    if _worker is None:
        _worker = FlinkWorker(python)
    try:
        return _worker.run(script, list(args), stdin, timeout)
    except WorkerLost as lost:
        _worker.stop(wait=0)
        _worker = None
        pytest.fail(str(lost), pytrace=False)


def stop_worker() -> None:
    """Stops the session's worker, if one was started (at exit)."""
    global _worker
    if _worker is not None:
        _worker.stop()
        _worker = None


atexit.register(stop_worker)
