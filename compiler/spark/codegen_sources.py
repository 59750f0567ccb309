"""The generated program's sources: one function per source, by connector (files, rate,
datagen, socket, kafka), with the malformed-record handling of json and csv files."""

from __future__ import annotations

from typing import Any

from flowc.catalog import CHANGELOG_FORMATS, DEBEZIUM_SCHEMA_INCLUDE, ERRORS_COLUMNS, OP_COLUMN
from flowc.program import Column, SourceDef
from flowc.spark.codegen_base import ProgramText, format_options, in_docstring, kafka_options
from flowc.spark.generated_runtime import (
    DEBEZIUM_HELPERS,
    MALFORMED_CONSTANTS,
    MALFORMED_HELPERS,
    source_text,
)
from flowc.sql.spark_sql import UnsupportedOnSpark, quote_name, sql_of, watermark_delay


class SourceWriter(ProgramText):
    """Writes the program's source functions."""

    def source(self, source: SourceDef) -> None:
        """A stream's reader; a table's (``CREATE TABLE``) is a batch read, whatever the job:
        Spark joins each micro-batch with it (a stream-static join)."""
        streaming_reader = self.reader
        if source.bounded:
            self.reader = "spark.read"
        try:
            self.source_body(source)
        finally:
            self.reader = streaming_reader

    def source_body(self, source: SourceDef) -> None:
        w = self.w
        name = self.var(f"source_{source.name}")
        self.names[f"source:{source.name}"] = name
        options = dict(source.options)
        w(f"def {name}(spark: SparkSession) -> DataFrame:")
        w(f'"""Source {in_docstring(repr(source.name))} ({source.connector})."""', 1)
        if source.connector == "files":
            fmt = str(options["format"])
            path = str(options["path"])
            reader_options = format_options(options)
            w(f"path = os.path.join(BASE_DIR, {path!r})", 1)
            if fmt in CHANGELOG_FORMATS:
                self.debezium_source(source, options, reader_options)
            elif fmt == "text":
                w(f"reader = {self.reader}.options(**{reader_options!r})", 1)
                w("df = reader.format('text').load(path)", 1)
                w(f"df = df.withColumnRenamed('value', {source.schema[0].name!r})", 1)
            elif source.on_error is not None:
                self.parsed_file_source(source, fmt, reader_options)
            else:
                w(f"schema = {_ddl(source.schema)!r}", 1)
                w(
                    f"df = {self.reader}.schema(schema).options(**{reader_options!r})"
                    f".format({fmt!r}).load(path)",
                    1,
                )
        elif source.connector == "rate":
            w("df = (spark.readStream.format('rate')", 1)
            w(f".option('rowsPerSecond', {int(str(options.get('rows_per_second', 1)))})", 2)
            partitions = self.spark_plan.source_partitions[source.name]
            w(f".option('numPartitions', {partitions}).load())", 2)
            w(f"df = df.select({', '.join(repr(c.name) for c in source.schema)})", 1)
        elif source.connector == "datagen":
            self.datagen(source, options)
        elif source.connector == "socket":
            w("df = (spark.readStream.format('socket')", 1)
            port = int(str(options["port"]))
            w(f".option('host', {options['host']!r}).option('port', {port!r})", 2)
            with_timestamp = bool(options.get("include_timestamp", False))
            w(f".option('includeTimestamp', {with_timestamp!r}).load())", 2)
            line = next(c.name for c in source.schema if c.type == "STRING")
            w(f"df = df.withColumnRenamed('value', {line!r})", 1)
        elif source.connector == "kafka":
            self.kafka_source(source, options)
        else:
            raise UnsupportedOnSpark(f"connector {source.connector!r} as a source")
        for computed in source.computed:
            # Flink's computed column: of the row's read columns, before the watermark.
            w(f"df = df.withColumn({computed.name!r}, F.expr({sql_of(computed.expr)!r}))", 1)
        if source.watermark is not None:
            column, delay = watermark_delay(source)
            w(f"df = df.withWatermark({column!r}, {delay!r})", 1)
        w("return df", 1)
        w("")
        w("")

    def parsed_file_source(
        self, source: SourceDef, fmt: str, reader_options: dict[str, str]
    ) -> None:
        """Read in Spark's PERMISSIVE mode, keeping each malformed record's text and file."""
        w = self.w
        record, file = _internal_names(source)
        w(f"schema = {_ddl(source.schema) + ', ' + quote_name(record) + ' STRING'!r}", 1)
        w(
            f"df = ({self.reader}.schema(schema).options(**{reader_options!r})"
            f".option('mode', 'PERMISSIVE').option('columnNameOfCorruptRecord', {record!r})",
            1,
        )
        w(f".format({fmt!r}).load(path))", 2)
        w(f"df = df.withColumn({file!r}, F.col('_metadata.file_path'))", 1)
        if source.on_error == "fail":
            index = self.parsed_sources.index(source)
            csv = _csv_options(reader_options) if fmt == "csv" else {}
            w(
                f"df = fail_on_malformed(df, {index}, {fmt!r}, {_columns_arg(source)}, "
                f"{csv!r}, {record!r}, {file!r})",
                1,
            )

    def debezium_source(
        self, source: SourceDef, options: dict[str, object], reader_options: dict[str, str]
    ) -> None:
        """Each line of the files is one Debezium envelope, read as text (so a malformed
        one keeps its text and file) and unpacked into the changes it holds, with their
        kind in the hidden op column (``debezium_changes``)."""
        w = self.w
        names = debezium_names(source)
        payload = bool(options.get(DEBEZIUM_SCHEMA_INCLUDE, False))
        json_options = {k: v for k, v in reader_options.items() if k in _JSON_VALUE_OPTIONS}
        text_options = {k: v for k, v in reader_options.items() if k in _TEXT_READER_OPTIONS}
        w(f"df = {self.reader}.options(**{text_options!r}).format('text').load(path)", 1)
        w(
            f"df = df.select(F.col('value').alias({names[0]!r}), "
            f"F.col('_metadata.file_path').alias({names[1]!r}))",
            1,
        )
        w(
            f"df = debezium_changes(df, {_columns_arg(source)}, {payload!r}, "
            f"{json_options!r}, {names!r})",
            1,
        )
        if source.on_error == "fail":
            index = self.parsed_sources.index(source)
            w(f"df = fail_on_bad_change(df, {index}, {names!r})", 1)

    def malformed_helpers(self) -> None:
        """Functions of the generated program for sources whose records can be malformed."""
        assert [name for name, _ in ERRORS_COLUMNS] == ["raw", "file", "error"]
        for name, value in MALFORMED_CONSTANTS.items():
            self.w(f"{name} = {value!r}")
        self.w("")
        self.w("")
        self.copy_functions(source_text(MALFORMED_HELPERS))
        if any(s.changelog for s in self.parsed_sources):
            self.copy_functions(source_text(DEBEZIUM_HELPERS))
        names = [s.name for s in self.parsed_sources]
        self.w(f"PARSED_SOURCES = {names!r}")
        self.w("")
        self.w("")

    def split_malformed(self, source: SourceDef, variable: str) -> None:
        """``on_error = 'route'``: malformed records to ``errors``, the rest on the main output."""
        options = format_options(dict(source.options))
        fmt = str(dict(source.options)["format"])
        record, file = _internal_names(source)
        errors = self.var(f"{source.name}_errors")
        self.names[f"errors:{source.name}"] = errors
        if source.changelog:
            names = debezium_names(source)
            self.w(f"{errors} = bad_changes({variable}, {names!r})", 1)
            self.w(f"{variable} = good_changes({variable}, {names!r})", 1)
            return
        csv = _csv_options(options) if fmt == "csv" else {}
        self.w(
            f"{errors} = malformed_records({variable}, {fmt!r}, {_columns_arg(source)}, "
            f"{csv!r}, {record!r}, {file!r})",
            1,
        )
        self.w(
            f"{variable} = well_formed_records({variable}, {_columns_arg(source)}, "
            f"{record!r}, {file!r})",
            1,
        )

    def datagen(self, source: SourceDef, options: dict[str, object]) -> None:
        """Deterministic rows from Spark's rate-micro-batch source: same seed, same rows."""
        w = self.w
        rows = options.get("number_of_rows")
        per_batch = (
            int(str(rows))
            if rows is not None
            else int(float(str(options.get("rows_per_second", 10))))
        )
        seed = int(str(options.get("seed", 0)))
        partitions = self.spark_plan.source_partitions[source.name]
        if self.batch:
            # The rows the streaming source gives in its first micro-batch (all of them, as
            # rowsPerBatch = number_of_rows), with its first batch's timestamp.
            w(f"df = spark.range(0, {int(str(rows))}, 1, {partitions})", 1)
            w("df = df.withColumnRenamed('id', 'value')", 1)
            w("df = df.withColumn('timestamp', F.timestamp_millis(F.lit(0)))", 1)
        else:
            w("df = (spark.readStream.format('rate-micro-batch')", 1)
            w(f".option('rowsPerBatch', {max(per_batch, 1)})", 2)
            w(f".option('numPartitions', {partitions}).load())", 2)
        if rows is not None and not self.batch:
            w(f"df = df.where(F.col('value') < {int(str(rows))})", 1)
        columns = []
        for index, column in enumerate(source.schema):
            columns.append(
                f"({_datagen_column(column, index, seed, options)}).alias({column.name!r})"
            )
        w("df = df.select(", 1)
        for text in columns:
            w(f"{text},", 2)
        w(")", 1)

    def kafka_source(self, source: SourceDef, options: dict[str, object]) -> None:
        w = self.w
        w("df = (spark.readStream.format('kafka')", 1)
        w(f".option('kafka.bootstrap.servers', {options['bootstrap_servers']!r})", 2)
        w(f".option('subscribe', {options['topic']!r})", 2)
        for key, value in kafka_options(options, _KAFKA_SOURCE_OPTIONS):
            w(f".option({key!r}, {value!r})", 2)
        w(".load())", 2)
        if options.get("format") == "json":
            w(f"schema = {_ddl(source.schema)!r}", 1)
            w("df = df.select(F.from_json(F.col('value').cast('string'), schema).alias('r'))", 1)
            w("df = df.select('r.*')", 1)
        else:
            renames = {"timestamp_type": "timestampType"}
            picks = []
            for column in source.schema:
                field_name = renames.get(column.name, column.name)
                picks.append(
                    f"F.col({field_name!r}).cast({column.type.lower()!r}).alias({column.name!r})"
                )
            w(f"df = df.select({', '.join(picks)})", 1)


def _ddl(schema: tuple[Column, ...]) -> str:
    return ", ".join(f"{quote_name(c.name)} {c.type}" for c in schema)


def _internal_names(source: SourceDef) -> tuple[str, str]:
    """Columns for a malformed record's text and its file, unlike any declared column."""
    taken = {c.name for c in source.schema}
    record, file = "_corrupt_record", "_source_file"
    while record in taken:
        record += "_"
    while file in taken:
        file += "_"
    return record, file


def debezium_names(source: SourceDef) -> tuple[str, str, str, str]:
    """A debezium-json source's internal columns: the record's text, its file, why it is
    malformed (NULL if not), and each change's kind (:data:`OP_COLUMN`, the contract with
    the steps and sinks that consume changes)."""
    record, file = _internal_names(source)
    reason = "_malformed_reason"
    while reason in {c.name for c in source.schema}:
        reason += "_"
    return record, file, reason, OP_COLUMN


#: The options of a debezium-json source Spark's text reader takes, and the ones its JSON
#: parsing (``from_json``) takes, under Spark's names.
_TEXT_READER_OPTIONS = ("maxFilesPerTrigger", "latestFirst", "lineSep")
_JSON_VALUE_OPTIONS = ("timestampFormat", "dateFormat")


def _columns_arg(source: SourceDef) -> str:
    """The declared columns as the generated helpers take them: ``[(name, type), ...]``."""
    return repr([(c.name, c.type) for c in source.schema])


_CSV_PARSE_OPTIONS = ("sep", "delimiter", "quote", "escape", "comment", "nullValue")


def _csv_options(options: dict[str, str]) -> dict[str, str]:
    """The reader options that change how a CSV line splits into fields."""
    return {k: v for k, v in options.items() if k in _CSV_PARSE_OPTIONS}


#: A Kafka source's options under Spark's names (the sink has none of these: Spark's Kafka
#: writer reads only ``topic`` and the ``kafka.*`` client properties).
_KAFKA_SOURCE_OPTIONS = {
    "starting_offsets": "startingOffsets",
    "fail_on_data_loss": "failOnDataLoss",
    "max_offsets_per_trigger": "maxOffsetsPerTrigger",
}


def _datagen_column(column: Column, index: int, seed: int, options: dict[str, object]) -> str:
    """A column computed from the row number: a pure function of (seed, row, column)."""

    def option(name: str, default: object) -> Any:
        return options.get(f"fields.{column.name}.{name}", default)

    kind = option("kind", "random")
    low = option("min", 0)
    high = option("max", 1000)
    hashed = f"F.abs(F.xxhash64(F.lit({seed}), F.col('value'), F.lit({index})))"
    number = "F.col('value')" if kind == "sequence" else hashed
    base = column.type
    if base in ("TINYINT", "SMALLINT", "INT", "BIGINT"):
        if kind == "sequence":
            return f"(F.lit({int(low)}) + F.col('value')).cast({base.lower()!r})"
        span = int(high) - int(low) + 1
        offset = f"F.lit({int(low)}) + " if int(low) else ""
        return f"({offset}{number} % {max(span, 1)}).cast({base.lower()!r})"
    if base in ("FLOAT", "DOUBLE") or base.startswith("DECIMAL"):
        fraction = f"(({number} % 1000000) / F.lit(1000000.0))"
        scale = float(high) - float(low)
        return f"(F.lit({float(low)}) + {fraction} * {scale}).cast({base.lower()!r})"
    if base == "BOOLEAN":
        return f"({number} % 2 == 0)"
    if base == "TIMESTAMP":
        return "F.col('timestamp')"
    if base == "DATE":
        return "F.to_date(F.col('timestamp'))"
    if base == "STRING":
        length = int(option("length", 10))
        parts = f"F.lit({seed}), F.col('value'), F.lit({index})"
        return f"F.substring(F.sha2(F.concat_ws('/', {parts}), 256), 1, {length})"
    raise UnsupportedOnSpark(f"datagen column type {base}")
