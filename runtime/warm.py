"""A warm Spark: one local Spark Connect server per user, kept running between commands,
so ``flowc run`` and ``flowc test`` skip the 30 s a new JVM takes (docs/warm-spark.md).

This module is the part every process shares and imports no pyspark: where the server's
files are (a per-user state folder), the record the server writes once it listens, the
marks a client leaves while it uses the server (the server counts idle time from them),
and whether a job can run through the server exactly as it runs on a new local session.
The server itself is :mod:`flowc.runtime.warm_server`; ``flowc spark start|status|stop``
is :mod:`flowc.cli.spark`.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

from flowc.job import CompiledJob

#: The environment a local Spark takes its settings from: a server started under other
#: values would run a job differently from a new local session (a time zone changes
#: timestamps), so a client whose values differ runs the cold way.
ENVIRONMENT = (
    "TZ",
    "JAVA_HOME",
    "SPARK_HOME",
    "SPARK_CONF_DIR",
    "HADOOP_CONF_DIR",
    "PYSPARK_SUBMIT_ARGS",
    "SPARK_LOCAL_IP",
)

#: ``flowc spark start``'s default: minutes without a client before the server stops.
DEFAULT_IDLE_MINUTES = 30.0

#: The master the server runs, and the one ``flowc run`` uses unless told otherwise.
WARM_MASTER = "local[*]"


def state_dir() -> Path:
    """The per-user folder of the server's files: ``$FLOWC_STATE_DIR``, else
    ``$XDG_STATE_HOME/flowc``, else ``~/.local/state/flowc``."""
    given = os.environ.get("FLOWC_STATE_DIR")
    if given:
        return Path(given)
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "state"
    return base / "flowc"


def record_path(folder: Path) -> Path:
    """The server's record (:class:`Server`), written once it listens, removed as it stops."""
    return folder / "spark.json"


def log_path(folder: Path) -> Path:
    return folder / "spark.log"


def clients_dir(folder: Path) -> Path:
    """One file per process using the server (named by its pid): while one lives, the
    server is busy, however long its streaming job runs."""
    return folder / "clients"


def last_used_path(folder: Path) -> Path:
    """Touched as a client starts and ends, and by the server while it is busy: the idle
    time counts from its modification time."""
    return folder / "last-used"


def fingerprint() -> dict[str, str]:
    """What must be the same in a client and the server for a job to run alike on both:
    the Python, pyspark's version, and :data:`ENVIRONMENT`."""
    try:
        version = metadata.version("pyspark")
    except metadata.PackageNotFoundError:
        version = "none"
    values = {"python": sys.executable, "pyspark": version}
    values.update({name: os.environ.get(name, "") for name in ENVIRONMENT})
    return values


@dataclass(frozen=True, slots=True)
class Server:
    """What a running server wrote about itself."""

    pid: int
    port: int
    started: float
    idle_minutes: float
    master: str
    fingerprint: dict[str, str]
    token: str

    @property
    def url(self) -> str:
        """The URL a client connects with: Spark Connect's pre-shared token, which the
        server requires of every request (any local user can reach a port of 127.0.0.1,
        and a Spark Connect session runs code as the server's user). ``localhost``, as
        pyspark's client sends a token without TLS only there (its local credentials)."""
        return f"sc://localhost:{self.port}/;token={self.token}"

    @property
    def shown_url(self) -> str:
        """The URL as flowc prints it: without the token."""
        return shown(self.url)

    def write(self, folder: Path) -> None:
        """Atomically, so a reader never sees half a record, and readable by this user
        alone: it holds the token."""
        path = record_path(folder)
        part = path.with_suffix(f".{os.getpid()}.tmp")
        descriptor = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(json.dumps(asdict(self), indent=2) + "\n")
        os.replace(part, path)


def new_token() -> str:
    """A token for Spark Connect's ``spark.connect.authenticate.token``."""
    return secrets.token_urlsafe(32)


def shown(url: str) -> str:
    """A Spark Connect URL with its token (``;token=...``) taken out, to print."""
    return re.sub(r";token=[^;]*", "", url).removesuffix("/")


def private_folder(folder: Path) -> Path:
    """The state folder, made if missing and kept to this user (the record holds the
    token; the log, what the jobs print)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if folder.stat().st_uid == os.getuid():
        folder.chmod(0o700)
    return folder


def read_server(folder: Path) -> Server | None:
    """The running server's record; None where there is none, or its process is gone
    (a record left by a server that was killed is removed)."""
    path = record_path(folder)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        server = Server(
            pid=int(data["pid"]),
            port=int(data["port"]),
            started=float(data["started"]),
            idle_minutes=float(data["idle_minutes"]),
            master=str(data["master"]),
            fingerprint={str(k): str(v) for k, v in data["fingerprint"].items()},
            token=str(data["token"]),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if not is_server_process(server.pid):
        path.unlink(missing_ok=True)
        return None
    return server


def is_server_process(pid: int) -> bool:
    """Whether ``pid`` is alive and is a warm server (not another process that was given
    the number of one that ended)."""
    if not alive(pid):
        return False
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc: trust the record
    return b"flowc.runtime.warm_server" in command


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def busy_clients(folder: Path) -> list[int]:
    """The pids of the live processes using the server; the marks of dead ones removed."""
    found = []
    try:
        entries = list(clients_dir(folder).iterdir())
    except OSError:
        return []
    for entry in entries:
        try:
            pid = int(entry.name)
        except ValueError:
            continue
        if alive(pid):
            found.append(pid)
        else:
            entry.unlink(missing_ok=True)
    return found


def idle_seconds(folder: Path, server: Server, now: float | None = None) -> float:
    """Seconds since the server was last used (0 while a client uses it)."""
    now = time.time() if now is None else now
    if busy_clients(folder):
        return 0.0
    try:
        last = last_used_path(folder).stat().st_mtime
    except OSError:
        last = server.started
    return max(0.0, now - max(last, server.started))


def touch(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    os.utime(path)


@contextmanager
def using(folder: Path) -> Iterator[None]:
    """Mark this process as the server's client while inside (the server is not idle)."""
    mark = clients_dir(folder) / str(os.getpid())
    touch(last_used_path(folder))
    touch(mark)
    try:
        yield
    finally:
        mark.unlink(missing_ok=True)
        touch(last_used_path(folder))


#: What a new local session's start says first: nothing else shows for the 30 s it takes.
COLD_START = "starting Spark (a new JVM, ~30 s; `flowc spark start` keeps one warm)\n"
#: How the line that says why a job does not run on the warm Spark starts.
COLD = "running on a new local Spark, not the warm one: "


@dataclass(frozen=True, slots=True)
class Choice:
    """Where a job runs: ``url`` the warm server's, or None (a new local session), and
    the one line that says why it runs cold when a server runs (None where none does)."""

    url: str | None
    reason: str | None = None


def connect_blockers(job: CompiledJob) -> list[str]:
    """What in the job Spark Connect cannot run as a local session does: Python run on
    Spark's side (the server's workers have neither the job's functions nor its
    packages) and a Spark package only a new session loads. A console sink runs warm:
    flowc.runtime.console_relay prints its batches here."""
    reasons = []
    if job.program.functions:
        names = ", ".join(f.name for f in job.program.functions)
        reasons.append(f"its Python functions ({names}) run in Spark's Python workers")
    if job.spark_plan.processors:
        reasons.append("its stateful processors (transformWithState) run in Spark's Python workers")
    connectors = [s.connector for s in job.program.sources]
    connectors += [s.connector for s in job.program.sinks]
    if "kafka" in connectors:
        reasons.append("its Kafka connector needs Spark's Kafka package, which a new session loads")
    upserts = [q.name for q in job.spark_plan.queries if q.upsert is not None]
    if upserts:
        reasons.append(f"its upsert sinks ({', '.join(upserts)}) write through foreachBatch")
    return reasons


def choose(job: CompiledJob, master_given: bool, folder: Path | None = None) -> Choice:
    """The warm server where one runs and the job can run through it exactly; else a new
    local session, with the reason where a server runs."""
    folder = state_dir() if folder is None else folder
    if record_path(folder).exists():  # first: a server deciding it is idle sees this use
        touch(last_used_path(folder))
    server = read_server(folder)
    if server is None:
        return Choice(None)
    cold = COLD
    if master_given:
        return Choice(None, cold + "--master was given")
    blockers = connect_blockers(job)
    if blockers:
        return Choice(None, cold + "; ".join(blockers))
    mine = fingerprint()
    differ = [k for k in sorted(mine) if mine[k] != server.fingerprint.get(k)]
    if differ:
        return Choice(None, cold + f"the warm one was started with another {', '.join(differ)}")
    return Choice(server.url)
