package leaktest;

import com.sun.management.HotSpotDiagnosticMXBean;
import io.leakwatch.KeyedWeakReference;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

/**
 * Builds one leak scenario and writes a HotSpot heap dump of it.
 *
 * <pre>java -Xmx256m -cp leaktest.jar leaktest.Main SCENARIO OUTPUT.hprof</pre>
 *
 * Scenarios: static_field, listener_list, thread, array_slot, map_value, local_only, multi,
 * no_leak. Expected analyzer results: tests/java/expected/SCENARIO.json. And long_chain (a
 * leak path of 12,002 elements), which has none: the server's tests use it.
 * Exit codes: 0 dump written, 2 usage error, 1 anything else.
 *
 * <p>Nothing of a scenario stays in a local variable of the main thread: every scenario is built
 * in methods that have returned before the dump.
 */
public final class Main {
  private Main() {}

  private static int build(String scenario) throws InterruptedException {
    switch (scenario) {
      case "static_field":
        StaticFieldScenario.build(1, 1);
        return 1;
      case "listener_list":
        ListenerListScenario.build(2, 1);
        return 2;
      case "thread":
        ThreadScenario.build(3, 1);
        return 3;
      case "array_slot":
        ArraySlotScenario.build(4, 1);
        return 4;
      case "map_value":
        MapValueScenario.build(5, 1);
        return 5;
      case "local_only":
        LocalOnlyScenario.build(6, 1);
        return 6;
      case "multi":
        MultiScenario.build(7);
        return 7;
      case "no_leak":
        NoLeakScenario.build(8);
        return 8;
      case "long_chain":
        LongChainScenario.build(9, 12000);
        return 9;
      default:
        return -1;
    }
  }

  public static void main(String[] args) {
    if (args.length != 2) {
      System.err.println("usage: leaktest.Main SCENARIO OUTPUT.hprof");
      System.exit(2);
    }
    try {
      int n = build(args[0]);
      if (n < 0) {
        System.err.println("unknown scenario: " + args[0]);
        System.exit(2);
      }
      CommonWatches.add(n);
      Watcher.settle();
      KeyedWeakReference.heapDumpUptimeMillis =
          Math.max(Watcher.uptimeMillis(), Watcher.latestUptimeMillis() + 1);
      System.gc();
      System.gc();
      dump(Paths.get(args[1]).toAbsolutePath());
      System.out.println("leaktest: " + args[0] + " -> " + args[1]);
      System.exit(0);
    } catch (Throwable t) {
      t.printStackTrace();
      System.exit(1);
    }
  }

  private static void dump(Path out) throws Exception {
    Path dir = out.getParent();
    if (dir != null) {
      Files.createDirectories(dir);
    }
    Files.deleteIfExists(out); // dumpHeap refuses to overwrite
    HotSpotDiagnosticMXBean bean =
        ManagementFactory.getPlatformMXBean(HotSpotDiagnosticMXBean.class);
    bean.dumpHeap(out.toString(), true);
  }
}
