package org.manypy;

import java.util.ArrayList;
import java.util.List;
import org.manypy.internal.ManypyNative;
import org.manypy.internal.Utf8;

/**
 * The built-in sampled profiler: aggregates sampled operators of every interpreter and the host by
 * model id and operator. Uses one of the 16 operator callback registrations until closed. Thread
 * safe.
 */
public final class Profiler extends NativeResource {
  private Profiler(long handle) {
    super(handle, ManypyNative::manypy_profiler_free, "Profiler");
  }

  /** Starts profiling with the given sampling probability in (0, 1]. */
  public static Profiler start(double samplingProbability) {
    NativeLibrary.ensureLoaded();
    long[] out = new long[1];
    Status.check(ManypyNative.manypy_profiler_start(samplingProbability, out));
    return new Profiler(out[0]);
  }

  /** The aggregates so far. */
  public List<ProfileEntry> snapshot() {
    long profiler = acquire();
    try {
      long[] entries = new long[1];
      long[] count = new long[1];
      Status.check(ManypyNative.manypy_profiler_snapshot(profiler, entries, count));
      try {
        List<ProfileEntry> list = new ArrayList<>();
        for (long i = 0; i < count[0]; ++i) {
          long[] n = ManypyNative.manypy_jni_profile_entry_numbers(entries[0], i);
          list.add(
              new ProfileEntry(
                  Utf8.decode(ManypyNative.manypy_jni_profile_entry_model(entries[0], i)),
                  Utf8.decode(ManypyNative.manypy_jni_profile_entry_op(entries[0], i)),
                  n[0],
                  n[1],
                  n[2],
                  n[3]));
        }
        return list;
      } finally {
        ManypyNative.manypy_profile_entries_free(entries[0], count[0]);
      }
    } finally {
      release();
    }
  }

  /** The aggregates in the Prometheus text format, for a /metrics endpoint. */
  public String prometheus() {
    return (String)
        with(
            profiler ->
                Values.result(out -> ManypyNative.manypy_profiler_prometheus(profiler, out)));
  }

  /** The latest sampled events as Chrome trace-event JSON (Perfetto, chrome://tracing). */
  public String chromeTrace() {
    return (String)
        with(
            profiler ->
                Values.result(out -> ManypyNative.manypy_profiler_chrome_trace(profiler, out)));
  }
}
