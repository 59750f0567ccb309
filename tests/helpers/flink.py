"""Real Flink's JobGraphs beside flowc's, for the differential tests (opt-in: PyFlink).

Set ``FLOWC_FLINK_PYTHON`` to a Python that has ``apache-flink==2.3.0`` (kept in its own
virtualenv, never a flowc dependency) and Java 17 on the PATH; without it the tests that
use this are skipped, unless ``FLOWC_FLINK_REQUIRED=1`` (as in CI) makes that a failure.
Flink's own StreamGraph and JobGraph come from its Java gateway. Every script runs in the
session's one PyFlink process (tests/helpers/flink_worker.py), as ``-c`` would run it.
"""

from __future__ import annotations

import json
import os
import textwrap
from typing import Any

import pytest

import flowc
from tests.helpers.flink_worker import run_flink

FLINK_PYTHON = os.environ.get("FLOWC_FLINK_PYTHON") or None
FLINK_VERSION = "2.3.0"
# CI sets this: there a missing Flink is a failure, never a silent skip.
FLINK_REQUIRED = os.environ.get("FLOWC_FLINK_REQUIRED") == "1"

# A test module's ``pytestmark``: skipped where no Flink is set up, unless it is required.
requires_flink = pytest.mark.skipif(
    FLINK_PYTHON is None and not FLINK_REQUIRED,
    reason=f"set FLOWC_FLINK_PYTHON to a Python with apache-flink=={FLINK_VERSION}",
)


def checked_flink_python() -> str:
    """The Python that runs PyFlink, checked to hold the Flink these tests compare against
    (a module-scoped autouse fixture calls it, so a wrong Flink fails every case)."""
    if FLINK_PYTHON is None:
        pytest.fail(
            "FLOWC_FLINK_REQUIRED=1 but FLOWC_FLINK_PYTHON is not set: point it at a Python "
            f"with apache-flink=={FLINK_VERSION}"
        )
    probe = run_flink(
        FLINK_PYTHON, "import pyflink.version; print(pyflink.version.__version__)", timeout=120
    )
    assert probe.returncode == 0, f"{FLINK_PYTHON} cannot import pyflink: {probe.stderr[-2000:]}"
    assert probe.stdout.strip() == FLINK_VERSION, f"{FLINK_PYTHON} has Flink {probe.stdout}"
    return FLINK_PYTHON


PRELUDE = """
import json
from pyflink.common import Configuration, Types
from pyflink.common.watermark_strategy import WatermarkStrategy
from pyflink.datastream import DataStream, StreamExecutionEnvironment
from pyflink.datastream.connectors.number_seq import NumberSequenceSource

conf = Configuration()
conf.set_string("python.operator-chaining.enabled", "false")
env = StreamExecutionEnvironment.get_execution_environment(conf)
LONG = Types.LONG()


def source(name):
    return env.from_source(NumberSequenceSource(1, 10), WatermarkStrategy.no_watermarks(), name)
"""

DUMP = """
graph = env._j_stream_execution_environment.getStreamGraph().getJobGraph()
out = []
for v in graph.getVerticesSortedTopologicallyFromSources():
    out.append({
        "name": v.getName(),
        "parallelism": v.getParallelism(),
        "max_parallelism": v.getMaxParallelism(),
        "id": str(v.getID()),
        "group": v.getSlotSharingGroup().getSlotSharingGroupName(),
        "inputs": [
            [e.getSource().getProducer().getName(), e.getShipStrategyName(),
             str(e.getDistributionPattern())]
            for e in v.getInputs()
        ],
    })
print("JOBGRAPH" + json.dumps(out))
"""


def flink_job_graphs(jobs: list[str], as_pyflink_runs: bool = False) -> list[list[dict[str, Any]]]:
    """Flink's JobGraph of each job, all built in one JVM. ``as_pyflink_runs``: the
    StreamGraph PyFlink hands Flink when it runs a job (``_generate_stream_graph``, whose
    PythonConfigUtil gives the key extractor its input's parallelism and chains it there,
    as Java's ``keyBy`` has no operator), not the bare Java environment's."""
    assert FLINK_PYTHON is not None
    dump = DUMP
    if as_pyflink_runs:
        dump = dump.replace(
            "env._j_stream_execution_environment.getStreamGraph()",
            "env._generate_stream_graph(clear_transformations=False)",
        )
    script = PRELUDE
    for index, job in enumerate(jobs):
        script += "env = StreamExecutionEnvironment.get_execution_environment(conf)\n"
        script += textwrap.dedent(job) + dump.replace('"JOBGRAPH"', f'"JOBGRAPH{index} "')
    result = run_flink(FLINK_PYTHON, script)
    assert result.returncode == 0, result.stderr[-2000:]
    graphs = []
    for index in range(len(jobs)):
        line = next(x for x in result.stdout.splitlines() if x.startswith(f"JOBGRAPH{index} "))
        vertices: list[dict[str, Any]] = json.loads(line.split(" ", 1)[1])
        for vertex in vertices:
            # PyFlink's key extractor is a Python operator that flowc does not have.
            vertex["name"] = vertex["name"].replace(" -> _stream_key_by_map_operator", "")
            for edge in vertex["inputs"]:
                edge[0] = edge[0].replace(" -> _stream_key_by_map_operator", "")
        graphs.append(vertices)
    return graphs


def flowc_job_graph(program: str) -> list[dict[str, Any]]:
    """flowc's JobGraph of ``program``, vertex by vertex as ``flink_job_graphs`` gives Flink's."""
    job = flowc.compile(textwrap.dedent(program), "differential.flow")
    graph = job.job_graph
    out = []
    for vertex in graph.topological():
        out.append(
            {
                "name": vertex.name,
                "parallelism": vertex.flink_parallelism,
                "max_parallelism": vertex.max_parallelism or -1,
                "id": vertex.id,
                "group": vertex.slot_sharing_group,
                "inputs": [
                    [graph.vertices[e.producer].name, e.ship_strategy, e.distribution]
                    for e in vertex.inputs
                ],
            }
        )
    return out


def only_uid_ids(program: str, *graphs: list[dict[str, Any]]) -> None:
    """Blank, in ``graphs``, every vertex id that no uid of ``program`` fixes: where PyFlink
    adds operators (its key extractor), the traversal hashes differ, the uid'ed ids do not."""
    uid_ids = {
        op.operator_id
        for v in flowc.compile(textwrap.dedent(program), "d.flow").job_graph.vertices.values()
        for op in v.operators
        if op.uid
    }
    for graph in graphs:
        for vertex in graph:
            if vertex["id"] not in uid_ids:
                vertex["id"] = "(traversal hash)"


def ask_flink(script: str, asked: object) -> Any:
    """What a PyFlink ``script`` prints last as JSON, given ``asked`` as JSON in argv[1]."""
    assert FLINK_PYTHON is not None
    probe = run_flink(FLINK_PYTHON, script, json.dumps(asked))
    assert probe.returncode == 0, probe.stderr[-3000:]
    return json.loads(probe.stdout.strip().splitlines()[-1])


#: A PyFlink script: each query's collected changelog over files it is given (argv[1]:
#: {name: [statements..., query]}), as [kind, row] pairs (for :func:`ask_flink`).
COLLECT_CHANGELOG = r"""
import json, sys
from pyflink.table import EnvironmentSettings, TableEnvironment
out = {}
for name, statements in json.loads(sys.argv[1]).items():
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    env.get_config().set("parallelism.default", "1")
    for s in statements[:-1]:
        env.execute_sql(s)
    with env.execute_sql(statements[-1]).collect() as rows:
        out[name] = [[str(r.get_row_kind()), list(r)] for r in rows]
print(json.dumps(out))
"""
