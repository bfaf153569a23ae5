package io.leakwatch.demo;

import com.sun.management.HotSpotDiagnosticMXBean;
import io.leakwatch.KeyedWeakReference;
import io.leakwatch.LeakWatch;
import java.lang.management.ManagementFactory;
import java.lang.ref.ReferenceQueue;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.UUID;

/**
 * Leakwatch demo: leaks a {@link NewsScreen} through a static listener registry, watches it with
 * {@link KeyedWeakReference}, and optionally writes a heap dump.
 *
 * <pre>
 * java -cp demo.jar io.leakwatch.demo.DemoApp [--dump PATH] [--wait-ms N] [--linger SECONDS]
 * </pre>
 *
 * <ul>
 *   <li>{@code --dump PATH}: write a HotSpot heap dump to PATH (replaced if present) and exit;</li>
 *   <li>{@code --wait-ms N}: how long to wait before the retained check (default 500; with the
 *       agent, before {@code LeakWatch.dumpNow()}: default 6000);</li>
 *   <li>{@code --linger SECONDS}: without --dump, stay alive that long after the leak (so an
 *       attached agent can act), then exit (default 0; with the agent 10).</li>
 * </ul>
 * Exit codes: 0 done, 2 usage error, 1 failure.
 *
 * <p>With the Leakwatch agent loaded ({@code -agentpath:libleakwatch_jvm.so=...}, see
 * client/jvm/README.md) the agent does the watching and dumping: the destroyed screen is handed
 * to {@link LeakWatch#watch}, and after {@code --wait-ms} (default 6000: the agent's 5 s retained
 * delay plus its GC rounds; match it to the agent's {@code retained_delay_ms}) the demo calls
 * {@link LeakWatch#dumpNow()}, then lingers (default 10 s) so the agent can dump, spool and
 * upload. {@code --dump} still makes the demo's own dump, with or without the agent.
 *
 * <p>The steps are separate methods: the leak ({@link #runScreens()}), the watch/retain step
 * ({@link #watch}, {@link #checkRetained}) and the dump ({@link #dumpHeap}), so the JVM agent
 * can later take over watching and dumping.
 */
public final class DemoApp {
  /** Like LeakCanary's ObjectWatcher: the references stay reachable, so they are in the dump. */
  static final ArrayList<KeyedWeakReference> watched = new ArrayList<>();
  static final ReferenceQueue<Object> queue = new ReferenceQueue<>();

  private DemoApp() {}

  static long uptimeMillis() {
    return System.nanoTime() / 1_000_000;
  }

  /** The app: open the news screen, use it, destroy it. Returns the watch of the destroyed one. */
  static KeyedWeakReference runScreens() {
    NewsScreen screen = new NewsScreen("Top stories");
    System.out.println("demo: opening " + screen.title() + " (NewsScreen)");
    screen.onCreate();
    System.out.println("demo: destroying NewsScreen (its EventBus listener is not unregistered)");
    screen.onDestroy();
    return watch(screen, "NewsScreen destroyed");
  }

  /** Watch step: what the SDK does at the end of an object's life. */
  static KeyedWeakReference watch(Object destroyed, String description) {
    String key = UUID.randomUUID().toString();
    KeyedWeakReference ref =
        new KeyedWeakReference(destroyed, key, description, uptimeMillis(), queue);
    watched.add(ref);
    System.out.println("demo: watching key=" + key + " description=" + description);
    return ref;
  }

  /** Retain step: after a wait and a GC, a reference whose referent is still there is retained. */
  static boolean checkRetained(KeyedWeakReference ref, long waitMillis)
      throws InterruptedException {
    Thread.sleep(waitMillis);
    System.gc();
    Thread.sleep(100);
    if (ref.get() == null) {
      System.out.println("demo: reclaimed key=" + ref.key + " (no leak)");
      return false;
    }
    ref.retainedUptimeMillis = Math.max(uptimeMillis(), ref.watchUptimeMillis + 1);
    System.out.println("demo: retained key=" + ref.key + " after "
        + (ref.retainedUptimeMillis - ref.watchUptimeMillis) + " ms");
    return true;
  }

  /** Dump step: in-process HotSpot dump of live objects. */
  static void dumpHeap(Path path) throws Exception {
    Path dir = path.toAbsolutePath().getParent();
    if (dir != null) {
      Files.createDirectories(dir);
    }
    Files.deleteIfExists(path); // dumpHeap refuses to overwrite
    System.out.println("demo: dumping to " + path);
    KeyedWeakReference.heapDumpUptimeMillis = uptimeMillis();
    HotSpotDiagnosticMXBean bean =
        ManagementFactory.getPlatformMXBean(HotSpotDiagnosticMXBean.class);
    bean.dumpHeap(path.toString(), true);
  }

  private static void usage(String why) {
    System.err.println("demo: " + why);
    System.err.println(
        "usage: java io.leakwatch.demo.DemoApp [--dump PATH] [--wait-ms N] [--linger SECONDS]");
    System.exit(2);
  }

  /** With the agent: watch through LeakWatch, let the agent find it retained, ask for a dump. */
  static void runWithAgent(long waitMillis, long lingerSeconds) throws InterruptedException {
    NewsScreen screen = new NewsScreen("Top stories");
    System.out.println("demo: opening " + screen.title() + " (NewsScreen)");
    screen.onCreate();
    System.out.println("demo: destroying NewsScreen (its EventBus listener is not unregistered)");
    screen.onDestroy();
    String key = LeakWatch.watch(screen, "NewsScreen destroyed");
    screen = null;
    System.out.println("demo: LeakWatch is watching key=" + key);
    Thread.sleep(waitMillis);
    System.out.println("demo: LeakWatch.dumpNow() = " + LeakWatch.dumpNow());
    if (lingerSeconds > 0) {
      System.out.println("demo: lingering " + lingerSeconds + " s");
      Thread.sleep(lingerSeconds * 1000);
    }
  }

  public static void main(String[] args) {
    Path dump = null;
    long waitMillis = -1;
    long lingerSeconds = -1;
    try {
      for (int i = 0; i < args.length; i++) {
        String a = args[i];
        if (a.equals("--dump") || a.equals("--wait-ms") || a.equals("--linger")) {
          if (i + 1 >= args.length) {
            usage(a + " needs a value");
          }
          String v = args[++i];
          if (a.equals("--dump")) {
            dump = Paths.get(v);
          } else if (a.equals("--wait-ms")) {
            waitMillis = Long.parseLong(v);
          } else {
            lingerSeconds = Long.parseLong(v);
          }
        } else if (a.equals("-h") || a.equals("--help")) {
          usage("leaks a NewsScreen through EventBus.subscribers");
        } else {
          usage("unknown argument: " + a);
        }
      }
    } catch (NumberFormatException e) {
      usage("not a number: " + e.getMessage());
    }
    boolean agent = dump == null && LeakWatch.isInstalled();
    if (waitMillis < 0) {
      waitMillis = agent ? 6000 : 500;
    }
    if (lingerSeconds < 0) {
      lingerSeconds = agent ? 10 : 0;
    }
    try {
      if (agent) {
        runWithAgent(waitMillis, lingerSeconds);
        System.out.println("demo: done");
        System.exit(0);
      }
      KeyedWeakReference ref = runScreens();
      checkRetained(ref, waitMillis);
      if (dump != null) {
        dumpHeap(dump);
      } else if (lingerSeconds > 0) {
        System.out.println("demo: lingering " + lingerSeconds + " s");
        Thread.sleep(lingerSeconds * 1000);
      }
      System.out.println("demo: done");
      System.exit(0);
    } catch (Throwable t) {
      t.printStackTrace();
      System.exit(1);
    }
  }
}
