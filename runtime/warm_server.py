"""The warm Spark's server process: a local Spark Connect server from the installed
pyspark, bound to 127.0.0.1, that stops itself after its idle minutes (docs/warm-spark.md).

``flowc spark start`` runs ``python -m flowc.runtime.warm_server PORT IDLE_MINUTES`` as a
detached process with its output in the state folder's ``spark.log``; the record
(:class:`flowc.runtime.warm.Server`) is written once the server listens, so a client
never finds a server that is still starting. SIGTERM (``flowc spark stop``) and the idle
limit stop the session (the JVM exits with its Python driver) and remove the record.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from types import FrameType

from flowc.runtime.warm import (
    WARM_MASTER,
    Server,
    busy_clients,
    fingerprint,
    idle_seconds,
    last_used_path,
    new_token,
    private_folder,
    record_path,
    state_dir,
    touch,
)


def serve(port: int, idle_minutes: float) -> int:
    from pyspark.sql import SparkSession

    folder = private_folder(state_dir())
    token = new_token()  # in no command line (ps shows those to every user)
    stopping: list[int] = []

    def stop(number: int, frame: FrameType | None) -> None:
        stopping.append(number)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    spark = (
        SparkSession.builder.master(WARM_MASTER)
        .appName("flowc-warm-spark")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.plugins", "org.apache.spark.sql.connect.SparkConnectPlugin")
        .config("spark.connect.grpc.binding.address", "127.0.0.1")
        .config("spark.connect.grpc.binding.port", str(port))
        .config("spark.connect.authenticate.token", token)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    server = Server(
        pid=os.getpid(),
        port=port,
        started=time.time(),
        idle_minutes=idle_minutes,
        master=WARM_MASTER,
        fingerprint=fingerprint(),
        token=token,
    )
    touch(last_used_path(folder))
    server.write(folder)
    print(f"flowc warm Spark: listening on {server.shown_url}", flush=True)
    check = min(5.0, max(0.2, idle_minutes * 60 / 4))
    try:
        while not stopping:
            time.sleep(check)
            if busy_clients(folder):
                touch(last_used_path(folder))
            elif idle_seconds(folder, server) >= idle_minutes * 60:
                print(f"flowc warm Spark: idle for {idle_minutes:g} minutes, stopping", flush=True)
                break
    finally:
        record_path(folder).unlink(missing_ok=True)
        spark.stop()
    print("flowc warm Spark: stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(serve(int(sys.argv[1]), float(sys.argv[2])))
