"""The generated program's sinks: one streaming query per INSERT, or in batch mode one write
of the whole result."""

from __future__ import annotations

from flowc.analyze.upsert_sinks import postgres_type
from flowc.program import CdcUpsert, cdc_join, cdc_upsert
from flowc.spark.changelog_chains import updating_chain
from flowc.spark.codegen_base import ProgramText, format_options, in_docstring, kafka_options
from flowc.sql.spark_sql import UnsupportedOnSpark

#: Spark's console sink takes the number of rows to show; the largest it accepts.
CONSOLE_ALL_ROWS = 2**31 - 1


class SinkWriter(ProgramText):
    """Writes the query (or batch write) of each INSERT."""

    def write(self, index: int, df: str) -> None:
        w = self.w
        insert = self.program.inserts[index]
        sink = self.program.sink(insert.sink)
        options = dict(sink.options)
        query = self.spark_plan.queries[index]
        name = insert.sink
        w(f"writer = {df}.writeStream.queryName({name!r}).outputMode({query.output_mode!r})", 1)
        w(
            f"writer = writer.option('checkpointLocation', "
            f"os.path.join(checkpoint_dir, *{query.checkpoint!r}))",
            1,
        )
        interval = query.trigger_interval_ms
        w("if available_now:", 1)
        w("writer = writer.trigger(availableNow=True)", 2)
        if interval is not None:
            w("else:", 1)
            w(f"writer = writer.trigger(processingTime='{interval} milliseconds')", 2)
        connector = sink.connector
        if query.upsert_key is not None:
            chain = updating_chain(self.program, insert)
            processors = self.spark_plan.changelog_processors
            changelog = chain is not None and (
                self.spark_plan.step_nodes[id(chain.consumer)] in processors
            )
            before_deletes = changelog and chain is not None and chain.before_deletes
            cdc = cdc_upsert(self.program, insert)
            joined = cdc_join(self.program, insert)
            if joined is not None and self.spark_plan.step_nodes[id(joined.join)] in processors:
                changelog = True
            self.upsert(
                index,
                options,
                query.upsert_key,
                query.checkpoint,
                query.upsert_groups,
                changelog or cdc is not None or index in self.marked_inserts,
                cdc,
                before_deletes,
            )
        elif connector == "console":
            # Every row of a micro-batch unless the sink says how many (Spark shows 20).
            rows = int(str(options["rows"])) if "rows" in options else CONSOLE_ALL_ROWS
            truncate = bool(options.get("truncate", True))
            # On the warm Spark, flowc's relay shows each batch here, as the console
            # sink would (flowc.runtime.console_relay); else Spark's console sink.
            w("if CONSOLE_RELAY is not None:", 1)
            w(f"writer = writer.foreachBatch(CONSOLE_RELAY({name!r}, {rows}, {truncate!r}))", 2)
            w("else:", 1)
            w("writer = writer.format('console')", 2)
            w(f"writer = writer.option('numRows', {rows})", 2)
            if "truncate" in options:
                w(f"writer = writer.option('truncate', {truncate!r})", 2)
        elif connector in ("memory", "noop"):
            w(f"writer = writer.format({connector!r})", 1)
        elif connector == "files":
            fmt = str(options["format"])
            writer_options = format_options(options)
            w(f"writer = writer.format({fmt!r}).options(**{writer_options!r})", 1)
            w(
                f"writer = writer.option('path', os.path.join(BASE_DIR, {str(options['path'])!r}))",
                1,
            )
            if query.partition_by:
                w(f"writer = writer.partitionBy(*{list(query.partition_by)!r})", 1)
        elif connector == "kafka":
            w("writer = writer.format('kafka')", 1)
            servers = options["bootstrap_servers"]
            w(f"writer = writer.option('kafka.bootstrap.servers', {servers!r})", 1)
            w(f"writer = writer.option('topic', {options['topic']!r})", 1)
            for key, value in kafka_options(options, {}):
                w(f"writer = writer.option({key!r}, {value!r})", 1)
        else:
            raise UnsupportedOnSpark(f"connector {connector!r} as a sink")
        w("queries.append(writer.start())", 1)

    def upsert(
        self,
        index: int,
        options: dict[str, object],
        key: tuple[str, ...],
        checkpoint_segments: tuple[str, ...],
        groups: tuple[str, ...] | None,
        changelog: bool = False,
        cdc: CdcUpsert | None = None,
        before_deletes: bool = False,
    ) -> None:
        """An upsert sink's foreachBatch function (:mod:`flowc.analyze.upsert_sinks`), one row per
        ``key``, its checkpoint where the plan puts it; ``groups``: a TOP's groups, whose old
        rows each micro-batch replaces (SparkQuery.upsert_groups); ``cdc``: a CDC source's
        changes, applied in order (``changes_in_order``); ``before_deletes``: a processor's
        changelog filtered by a WHERE, whose '-U' rows delete their key unless upserted."""
        w = self.w
        insert = self.program.inserts[index]
        sink = self.program.sink(insert.sink)
        name = insert.sink
        keys = list(key)
        checkpoint = (
            "None" if self.batch else f"os.path.join(checkpoint_dir, *{checkpoint_segments!r})"
        )
        if sink.connector == "postgres":
            schema = insert.stream.schema
            columns = [(c.name, postgres_type(c.type)) for c in schema]
            connection: dict[str, object] = {
                "host": str(options.get("host", "localhost")),
                "port": int(str(options.get("port", 5432))),
                "dbname": str(options["database"]),
            }
            if "user" in options:
                connection["user"] = str(options["user"])
            if "password" in options:
                connection["password"] = str(options["password"])
            w(f"connection = {connection!r}", 1)
            if "password_env" in options:
                variable = str(options["password_env"])
                w(f"connection['password'] = os.environ.get({variable!r}, '')", 1)
            w(
                f"{self._upsert_target()}(postgres_upsert({name!r}, "
                f"{str(options['table'])!r}, {columns!r}, {keys!r}, connection, {checkpoint}"
                + (f", groups={list(groups)!r}" if groups is not None else "")
                + self._changes(changelog, cdc, before_deletes),
                1,
            )
            return
        fmt = str(options["format"])
        writer_options = format_options(options)
        path = f"os.path.join(BASE_DIR, {str(options['path'])!r})"
        w(
            f"{self._upsert_target()}(file_upsert({name!r}, {path}, {fmt!r}, {keys!r}, "
            f"{writer_options!r}, {checkpoint}"
            + (f", groups={list(groups)!r}" if groups is not None else "")
            + self._changes(changelog, cdc, before_deletes),
            1,
        )

    @staticmethod
    def _changes(changelog: bool, cdc: CdcUpsert | None, before_deletes: bool = False) -> str:
        """The upsert call's last arguments: whether it reads a changelog, and how."""
        if cdc is not None:
            return f", changelog=True, in_order=True, before_deletes={cdc.before_deletes!r}))"
        if before_deletes:
            return ", changelog=True, before_deletes=True))"
        return ", changelog=True))" if changelog else "))"

    def _upsert_target(self) -> str:
        """Streaming: the query's foreachBatch; batch: ``upsert``, which write_batch calls
        once with the whole result as batch 0."""
        return "upsert = " if self.batch else "writer = writer.foreachBatch"

    def write_batch(self, index: int, df: str) -> None:
        """Batch mode: one write of the whole result; console and memory sinks collect it."""
        w = self.w
        insert = self.program.inserts[index]
        sink = self.program.sink(insert.sink)
        options = dict(sink.options)
        name = insert.sink
        w(f"plan = executed_plan({df})", 1)
        connector = sink.connector
        if connector in ("console", "memory"):
            w(f"rows = {df}.collect()", 1)
            w(f"result = spark.createDataFrame(rows, {df}.schema)", 1)
            if connector == "console":
                shown = int(str(options["rows"])) if "rows" in options else None
                truncate = bool(options.get("truncate", True))
                w(f"print(f'[{in_docstring(name)}] {{len(rows)}} rows')", 1)
                limit = "len(rows)" if shown is None else f"min(len(rows), {shown})"
                w(f"result.show(max({limit}, 1), truncate={truncate!r})", 1)
            else:
                w(f"result.createOrReplaceTempView({name!r})", 1)
            w(f"queries.append(({name!r}, len(rows), plan))", 1)
            return
        w(f"observation = Observation({name!r})", 1)
        w(f"observed = {df}.observe(observation, F.count(F.lit(1)).alias('rows'))", 1)
        w("writer = observed.write", 1)
        query = self.spark_plan.queries[index]
        if query.upsert_key is not None:
            # The whole result, upserted by key once; no TOP groups to replace: a batch
            # result holds each group's final rows only (E0709 is streaming's).
            self.upsert(index, options, query.upsert_key, query.checkpoint, None)
            w("upsert(observed, 0)", 1)
        elif connector == "noop":
            w("writer.format('noop').mode('overwrite').save()", 1)
        elif connector == "files":
            fmt = str(options["format"])
            writer_options = format_options(options)
            path = f"os.path.join(BASE_DIR, {str(options['path'])!r})"
            partition_by = self.spark_plan.queries[index].partition_by
            if partition_by:
                w(f"writer = writer.partitionBy(*{list(partition_by)!r})", 1)
            # The final result replaces the previous run's output, only once it is written.
            w(
                f"replace_output({path}, lambda folder: writer.format({fmt!r})"
                f".options(**{writer_options!r}).save(folder))",
                1,
            )
        else:
            assert connector == "kafka"
            servers = options["bootstrap_servers"]
            w(
                f"writer.format('kafka').option('kafka.bootstrap.servers', {servers!r})"
                f".option('topic', {options['topic']!r}).save()",
                1,
            )
        w(f"queries.append(({name!r}, int(observation.get['rows']), plan))", 1)
