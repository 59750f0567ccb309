"""``flowc spark start|status|stop``: the warm Spark, a local Spark Connect server that
``flowc run`` and ``flowc test`` use while it runs (docs/warm-spark.md).

``start`` runs :mod:`flowc.runtime.warm_server` as a detached process (its own session,
output in the state folder's ``spark.log``) on a free port of 127.0.0.1 and waits until it
listens; ``status`` shows its pid, port, uptime and idle time; ``stop`` ends it with
SIGTERM (it stops its Spark session, and the JVM ends with it). Nothing here imports
pyspark: the server process does.
"""

from __future__ import annotations

import argparse
import fcntl
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from flowc.cli.output import EXIT_ERRORS, EXIT_OK, write_stdout

#: How long ``start`` waits for the server to listen: a JVM took 30-75 s here, loaded.
START_TIMEOUT = 300.0
#: How long ``stop`` waits for the server to stop its session before killing it.
STOP_TIMEOUT = 60.0


def spark(args: argparse.Namespace) -> int:
    from flowc.runtime.warm import DEFAULT_IDLE_MINUTES, state_dir

    folder = state_dir()
    if args.action == "start":
        idle = DEFAULT_IDLE_MINUTES if args.idle_minutes is None else args.idle_minutes
        return _start(folder, idle)
    if args.action == "status":
        return _status(folder)
    return _stop(folder)


def _start(folder: Path, idle_minutes: float) -> int:
    from flowc.runtime.warm import listening, log_path, private_folder, read_server

    if importlib.util.find_spec("pyspark") is None:
        sys.stderr.write(
            f"error: flowc spark start needs pyspark, and {sys.executable} has none: "
            "pip install 'flowc[connect]'\n"
        )
        return EXIT_ERRORS
    if importlib.util.find_spec("grpc") is None:
        sys.stderr.write(
            "error: the warm Spark is a Spark Connect server, whose clients need grpc: "
            "pip install 'flowc[connect]'\n"
        )
        return EXIT_ERRORS
    if idle_minutes <= 0:
        sys.stderr.write("error: --idle-minutes must be more than 0\n")
        return EXIT_ERRORS
    private_folder(folder)
    with (folder / "spark.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one start at a time: the second finds the first
        running = read_server(folder)
        if running is not None:
            write_stdout(f"the warm Spark already runs: {running.shown_url} (pid {running.pid})\n")
            return EXIT_OK
        port = _free_port()
        log = log_path(folder)
        write_stdout(f"starting Spark Connect on 127.0.0.1:{port} (a new JVM, ~30 s); log {log}\n")
        with log.open("a", encoding="utf-8") as output:
            process = subprocess.Popen(
                [sys.executable, "-m", "flowc.runtime.warm_server", str(port), str(idle_minutes)],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # not stopped by the terminal's Ctrl-C or hang-up
                env={**os.environ, "FLOWC_STATE_DIR": str(folder)},
            )
        started = time.monotonic()
        while True:
            server = read_server(folder)
            if server is not None and server.pid == process.pid and listening(server.port):
                seconds = time.monotonic() - started
                write_stdout(
                    f"the warm Spark runs: {server.shown_url} (pid {server.pid}, started in "
                    f"{seconds:.0f} s; stops after {idle_minutes:g} idle minutes)\n"
                )
                return EXIT_OK
            if process.poll() is not None:
                sys.stderr.write(f"error: the Spark Connect server exited; see {log}:\n")
                sys.stderr.write(_tail(log))
                return EXIT_ERRORS
            if time.monotonic() - started > START_TIMEOUT:
                process.terminate()
                sys.stderr.write(
                    f"error: the Spark Connect server did not listen within {START_TIMEOUT:.0f}"
                    f" s; see {log}\n"
                )
                return EXIT_ERRORS
            time.sleep(0.2)


def _status(folder: Path) -> int:
    from flowc.runtime.warm import busy_clients, idle_seconds, log_path, read_server

    server = read_server(folder)
    if server is None:
        write_stdout("the warm Spark is not running (flowc spark start starts it)\n")
        return EXIT_ERRORS
    now = time.time()
    clients = busy_clients(folder)
    idle = idle_seconds(folder, server, now)
    users = f" (in use by pid {', '.join(map(str, clients))})" if clients else ""
    write_stdout(
        f"the warm Spark runs: {server.shown_url}\n"
        f"  pid       {server.pid}\n"
        f"  port      {server.port}\n"
        f"  uptime    {_duration(now - server.started)}\n"
        f"  idle      {_duration(idle)}{users}\n"
        f"  stops after {server.idle_minutes:g} idle minutes\n"
        f"  log       {log_path(folder)}\n"
    )
    return EXIT_OK


def _stop(folder: Path) -> int:
    from flowc.runtime.warm import read_server

    server = read_server(folder)
    if server is None:
        write_stdout("the warm Spark is not running\n")
        return EXIT_OK
    os.kill(server.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    while read_server(folder) is not None or _alive(server.pid):
        if time.monotonic() > deadline:
            os.kill(server.pid, signal.SIGKILL)
            write_stdout(f"the warm Spark (pid {server.pid}) did not stop in time: killed\n")
            return EXIT_OK
        time.sleep(0.2)
    write_stdout(f"the warm Spark (pid {server.pid}) stopped\n")
    return EXIT_OK


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:  # a child of this process (start, then stop, in one test) is reaped here
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == 0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "".join(f"    {line}\n" for line in text.splitlines()[-lines:])


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"
