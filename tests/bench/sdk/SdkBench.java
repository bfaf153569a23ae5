package sdkbench;

import io.leakwatch.LeakWatch;
import java.io.File;
import java.util.ArrayList;
import java.util.Random;

/**
 * The JVM half of the SDK benchmark (tests/bench/sdk/run.py runs it under the agent).
 *
 * <pre>
 * java -agentpath:...=...,retained_delay_ms=3600000,watch=sdkbench.Screen#onDestroy \
 *     -cp leakwatch.jar:sdkbench.jar sdkbench.SdkBench cost CALLS
 * java -Xlog:gc -agentpath:...=...,retained_delay_ms=1000 -cp ... sdkbench.SdkBench pipeline HEAP_MB SPOOL
 * </pre>
 *
 * <ul>
 *   <li>{@code cost CALLS}: the mean cost of {@code LeakWatch.watch} (explicit) and of a call to
 *       a method hooked by {@code watch=sdkbench.Screen#onDestroy} (each hit is a JVMTI
 *       breakpoint: a safepoint, plus the watch), minus the same call unhooked
 *       ({@code Screen#close}, same body). CALLS of each stay under the agent's 10 000 watches.
 *       Prints {@code cost: explicit_us=.. hooked_us=.. plain_us=..}.
 *   <li>{@code pipeline HEAP_MB SPOOL}: fills about HEAP_MB of live heap (random byte[] "bitmaps"
 *       and a graph of small objects), goes to the background (one retained object dumps),
 *       leaks one screen and watches it, then waits until a report is in SPOOL/reports.
 *       run.py timestamps the agent's log lines: retained -> dump -> spooled, and reads the GC
 *       pauses of the retained check from -Xlog:gc.
 * </ul>
 */
public final class SdkBench {
  private SdkBench() {}

  static final ArrayList<Object> registry = new ArrayList<>();
  static final ArrayList<Object> live = new ArrayList<>();
  static volatile int sink;

  static long cost(int calls, boolean explicit, boolean hooked) {
    Screen[] screens = new Screen[calls];
    for (int i = 0; i < calls; i++) {
      screens[i] = new Screen(i);
    }
    long t0 = System.nanoTime();
    for (int i = 0; i < calls; i++) {
      Screen s = screens[i];
      if (explicit) {
        s.close();
        LeakWatch.watch(s, "sdkbench.Screen destroyed");
      } else if (hooked) {
        s.onDestroy();
      } else {
        s.close();
      }
    }
    return System.nanoTime() - t0;
  }

  public static void main(String[] args) throws Exception {
    if (args.length >= 2 && args[0].equals("cost")) {
      int calls = Integer.parseInt(args[1]);
      System.out.println("sdkbench: installed=" + LeakWatch.isInstalled());
      cost(200, false, false); // warm-up (JIT for the plain path; hooks are never compiled)
      cost(200, true, false);
      cost(200, false, true);
      long plain = cost(calls, false, false);
      long explicit = cost(calls, true, false);
      long hooked = cost(calls, false, true);
      System.out.printf("cost: calls=%d explicit_us=%.3f hooked_us=%.3f plain_us=%.3f%n", calls,
          explicit / 1e3 / calls, hooked / 1e3 / calls, plain / 1e3 / calls);
      return;
    }
    if (args.length >= 3 && args[0].equals("pipeline")) {
      long heapMb = Long.parseLong(args[1]);
      File reports = new File(args[2], "reports");
      Random r = new Random(7);
      long bytes = 0;
      // 60 % random byte[] (64 KB..1 MB), the rest small objects with short strings
      while (bytes < heapMb * 600_000L) {
        byte[] b = new byte[65536 + r.nextInt(1 << 20)];
        r.nextBytes(b);
        live.add(b);
        bytes += b.length;
      }
      Node prev = null;
      while (bytes < heapMb * 1_000_000L) {
        Node n = new Node(prev, "node " + r.nextInt(1_000_000), r.nextLong());
        if (r.nextInt(64) == 0) {
          live.add(n);
          prev = null;
        } else {
          prev = n;
        }
        bytes += 100;
      }
      live.add(prev);
      System.out.println("sdkbench: heap filled, ~" + heapMb + " MB live; used="
          + (Runtime.getRuntime().totalMemory() - Runtime.getRuntime().freeMemory()) / 1_000_000 + " MB");
      LeakWatch.setVisible(false);
      Screen leaked = new Screen(1);
      registry.add(leaked.listener());
      leaked.close();
      System.out.println("sdkbench: watching key=" + LeakWatch.watch(leaked, "sdkbench.Screen destroyed"));
      leaked = null;
      long deadline = System.nanoTime() + 600_000_000_000L;
      while (System.nanoTime() < deadline) {
        String[] l = reports.list();
        if (l != null && l.length > 0) {
          System.out.println("sdkbench: report in the spool: " + l[0]);
          Thread.sleep(500);
          return;
        }
        Thread.sleep(20);
      }
      System.out.println("sdkbench: no report in 600 s");
      System.exit(1);
    }
    System.err.println("usage: SdkBench cost CALLS | pipeline HEAP_MB SPOOL");
    System.exit(2);
  }
}

/** A node of the filler graph. */
final class Node {
  final Node next;
  final String label;
  final long value;

  Node(Node next, String label, long value) {
    this.next = next;
    this.label = label;
    this.value = value;
  }
}

/** A screen: onDestroy (hooked by watch=) and close (the same body, never hooked). */
class Screen {
  final int id;
  int state;

  Screen(int id) {
    this.id = id;
  }

  Object listener() {
    return new Object() {
      @Override
      public String toString() {
        return "listener of screen " + id + " " + Screen.this.state;
      }
    };
  }

  void onDestroy() {
    state = -1;
    SdkBench.sink += id;
  }

  void close() {
    state = -1;
    SdkBench.sink += id;
  }
}
