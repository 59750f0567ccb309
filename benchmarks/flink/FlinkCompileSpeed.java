import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.charset.StandardCharsets;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.api.graph.StreamGraph;

/**
 * Flink's side of benchmarks/compile_speed.py --against-flink: benchmarks/generate.py's job
 * written with Flink's DataStream API, built from the program to the JobGraph in one warm JVM.
 *
 * <p>One round, timed with System.nanoTime and the JVM's CPU clocks: a new environment,
 * the DataStream calls (type information, closure cleaning, transformations), getStreamGraph
 * (StreamGraphGenerator) and getJobGraph (StreamingJobGraphGenerator, chaining included).
 * Reads a command per line on stdin: "round" runs one timed round and prints one line of
 * JSON; "quit" ends. The first WARMUP rounds run before the first command, unmeasured.
 */
public final class FlinkCompileSpeed {
    private static final TypeInformation<Tuple2<Long, Long>> ROW = Types.TUPLE(Types.LONG, Types.LONG);
    private static final TypeInformation<Tuple3<Long, Long, Long>> WIDE =
            Types.TUPLE(Types.LONG, Types.LONG, Types.LONG);

    private FlinkCompileSpeed() {}

    /** benchmarks/generate.py's job of {@code views} views; returns stream nodes and vertices. */
    static int[] compile(int views) {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(4); // SET parallelism = 4
        env.setMaxParallelism(128); // SET max_parallelism = 128
        DataGeneratorSource<Tuple2<Long, Long>> generator =
                new DataGeneratorSource<>(i -> Tuple2.of(i, i), Long.MAX_VALUE, ROW);
        DataStream<Tuple2<Long, Long>> stream =
                env.fromSource(generator, WatermarkStrategy.noWatermarks(), "src").setParallelism(2);
        for (int i = 0; i < views; i++) {
            final long n = i;
            stream = stream
                    .filter(t -> t.f1 > n) // WHERE v > i
                    .map(t -> Tuple2.of(t.f0, t.f1 + 1)).returns(ROW) // SELECT k, v + 1 AS v
                    .map(t -> Tuple3.of(t.f0, t.f1, t.f1 * 2)).returns(WIDE) // EXTEND v * 2 AS w
                    .map(t -> Tuple2.of(t.f0, t.f1)).returns(ROW) // DROP w
                    .rebalance() // REBALANCE
                    .filter(t -> t.f0 != n) // WHERE k <> i
                    .map(t -> Tuple2.of(t.f0, t.f1)).returns(ROW) // SELECT k, v
                    .keyBy(t -> t.f0, Types.LONG) // KEY BY k
                    .reduce((a, b) -> Tuple2.of(a.f0, a.f1 + b.f1)).uid("agg-" + i) // AGGREGATE sum(v)
                    .filter(t -> t.f1 != null); // WHERE v IS NOT NULL
        }
        stream.sinkTo(new DiscardingSink<>()).name("out");
        StreamGraph streamGraph = env.getStreamGraph();
        JobGraph jobGraph = streamGraph.getJobGraph();
        return new int[] {streamGraph.getStreamNodes().size(), jobGraph.getNumberOfVertices()};
    }

    public static void main(String[] args) throws Exception {
        int views = Integer.parseInt(args[0]);
        int warmup = Integer.parseInt(args[1]);
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        com.sun.management.OperatingSystemMXBean os =
                (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        for (int i = 0; i < warmup; i++) {
            compile(views);
        }
        System.out.println("{\"ready\": true}");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null && !line.equals("quit"); line = in.readLine()) {
            long process0 = os.getProcessCpuTime();
            long thread0 = threads.getCurrentThreadCpuTime();
            long wall0 = System.nanoTime();
            int[] sizes = compile(views);
            long wall = System.nanoTime() - wall0;
            long thread = threads.getCurrentThreadCpuTime() - thread0;
            long process = os.getProcessCpuTime() - process0;
            System.out.println(String.format(
                    "{\"wall\": %.6f, \"cpu\": %.6f, \"thread_cpu\": %.6f, \"nodes\": %d, \"vertices\": %d}",
                    wall / 1e9, process / 1e9, thread / 1e9, sizes[0], sizes[1]));
            System.out.flush();
        }
    }
}
