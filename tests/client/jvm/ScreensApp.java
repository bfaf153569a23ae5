package e2etest;

import io.leakwatch.KeyedWeakReference;
import io.leakwatch.LeakWatch;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.Set;

/**
 * The end-to-end test app of tests/client/test_e2e_screens.py: opens and destroys screens, leaks
 * some of them through a known path and releases the rest, under the Leakwatch JVM agent.
 *
 * <pre>
 * java -agentpath:libleakwatch_jvm.so=...[,watch=e2etest.Screen#onDestroy] -cp leakwatch.jar:screens.jar \
 *     e2etest.ScreensApp --watch explicit|hook [--pixels BYTES] --script STEP,STEP,...
 * </pre>
 *
 * <p>The leak: {@code ListenerRegistry.listeners} (a static ArrayList) keeps the
 * {@code Screen$Listener} of a leaked screen, whose {@code this$0} is the screen. A released
 * screen unregisters its listener in {@code onDestroy()}. The path, in trace terms:
 * {@code e2etest.ListenerRegistry.listeners -> java.util.ArrayList.elementData ->
 * java.lang.Object[][x] -> e2etest.Screen$Listener.this$0 -> e2etest.Screen}.
 *
 * <p>{@code --watch explicit}: the app calls {@code LeakWatch.watch(screen, "e2etest.Screen
 * destroyed")} after {@code onDestroy()}; {@code --watch hook}: the app calls nothing and relies on
 * the agent's {@code watch=e2etest.Screen#onDestroy}.
 *
 * <p>Script steps (comma-separated, run in order):
 *
 * <ul>
 *   <li>{@code round:N:K} opens and destroys N screens and leaks K of them (spread over the N);
 *       prints {@code screens: leaked NAME key=KEY} / {@code screens: released NAME key=KEY}
 *       (with --watch hook the key is read from the agent's reference; "-" when not watched);
 *   <li>{@code sleep:MS} waits (for the agent's retained check: retained_delay_ms + 3 GC rounds);
 *   <li>{@code dump} calls {@code LeakWatch.dumpNow()} and prints its answer;
 *   <li>{@code background} / {@code foreground} calls {@code LeakWatch.setVisible};
 *   <li>{@code gate} prints {@code screens: gate N} and waits for a line on stdin (EOF goes on),
 *       so a driver decides when the app moves on (e.g. once its report was uploaded);
 *   <li>{@code gc} runs {@code System.gc()} (the leaked screens survive it).
 * </ul>
 *
 * The leaked screens stay leaked until the JVM exits. Exit 0 when done, 2 on usage errors.
 */
public final class ScreensApp {
  private ScreensApp() {}

  static boolean explicit;
  static int pixelBytes = 64 * 1024;
  static int counter;
  static final Random random = new Random(42);

  /** A round of screens: open, destroy, leak or release, watch. */
  static void round(int n, int k) {
    int leakedSoFar = 0;
    for (int i = 0; i < n; i++) {
      // leak K of the N, spread out: screen i leaks when the integer part of i*K/N grows
      boolean leak = k > 0 && (long) (i + 1) * k / n > leakedSoFar;
      if (leak) {
        leakedSoFar++;
      }
      String name = "screen-" + (counter++);
      Screen screen = new Screen(name, pixelBytes);
      screen.onCreate();
      screen.leakOnDestroy = leak;
      screen.onDestroy();
      String key = explicit ? LeakWatch.watch(screen, "e2etest.Screen destroyed") : keyOf(screen);
      System.out.println("screens: " + (leak ? "leaked " : "released ") + name + " key=" + key);
    }
    System.out.println("screens: round done: " + n + " destroyed, " + leakedSoFar + " leaked, "
        + ListenerRegistry.size() + " listeners registered in all");
  }

  /**
   * With --watch hook the agent watched the screen in onDestroy(): its key, read from the
   * agent's KeyedWeakReference in LeakWatch.watchedReferences (a test-only peek), or "-".
   */
  static String keyOf(Object screen) {
    try {
      Field f = LeakWatch.class.getDeclaredField("watchedReferences");
      f.setAccessible(true);
      Set<?> refs = (Set<?>) f.get(null);
      synchronized (refs) {
        for (Object o : refs) {
          KeyedWeakReference ref = (KeyedWeakReference) o;
          if (ref.refersTo(screen)) {
            return ref.key;
          }
        }
      }
    } catch (ReflectiveOperationException | RuntimeException e) {
      System.out.println("screens: cannot read the agent's watched references: " + e);
    }
    return "-";
  }

  private static void usage(String why) {
    System.err.println("screens: " + why);
    System.err.println("usage: java e2etest.ScreensApp --watch explicit|hook [--pixels BYTES] "
        + "--script round:N:K,sleep:MS,dump,gate,background,foreground,gc");
    System.exit(2);
  }

  public static void main(String[] args) throws Exception {
    String watch = null;
    String script = null;
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      if (i + 1 >= args.length) {
        usage(a + " needs a value");
      }
      String v = args[++i];
      if (a.equals("--watch")) {
        watch = v;
      } else if (a.equals("--pixels")) {
        pixelBytes = Integer.parseInt(v);
      } else if (a.equals("--script")) {
        script = v;
      } else {
        usage("unknown argument: " + a);
      }
    }
    if (watch == null || !(watch.equals("explicit") || watch.equals("hook"))) {
      usage("--watch explicit|hook is required");
    }
    if (script == null) {
      usage("--script is required");
    }
    explicit = watch.equals("explicit");
    System.out.println("screens: LeakWatch installed=" + LeakWatch.isInstalled() + " watch=" + watch);
    BufferedReader stdin =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    int gates = 0;
    for (String step : script.split(",")) {
      String[] p = step.split(":");
      switch (p[0]) {
        case "round":
          round(Integer.parseInt(p[1]), Integer.parseInt(p[2]));
          break;
        case "sleep":
          Thread.sleep(Long.parseLong(p[1]));
          break;
        case "dump":
          System.out.println("screens: dumpNow=" + LeakWatch.dumpNow());
          break;
        case "background":
          LeakWatch.setVisible(false);
          break;
        case "foreground":
          LeakWatch.setVisible(true);
          break;
        case "gc":
          System.gc();
          break;
        case "gate":
          System.out.println("screens: gate " + (++gates));
          System.out.flush();
          try {
            stdin.readLine();
          } catch (IOException e) {
            // a closed stdin goes on
          }
          break;
        default:
          usage("unknown step: " + step);
      }
      System.out.flush();
    }
    System.out.println("screens: done, " + ListenerRegistry.size() + " screens leaked");
  }
}

/** The known leak path: a static registry of listeners that a leaky screen never leaves. */
final class ListenerRegistry {
  static final ArrayList<Object> listeners = new ArrayList<>();

  private ListenerRegistry() {}

  static synchronized void register(Object listener) {
    listeners.add(listener);
  }

  static synchronized void unregister(Object listener) {
    listeners.remove(listener);
  }

  static synchronized int size() {
    return listeners.size();
  }
}

/** A screen: a title, a bitmap-like buffer of pseudo-random bytes and a registry listener. */
class Screen {
  final String title;
  final byte[] pixels;
  final List<String> lines = new ArrayList<>();
  boolean leakOnDestroy;
  private Listener listener;

  Screen(String title, int pixelBytes) {
    this.title = title;
    this.pixels = new byte[pixelBytes];
    ScreensApp.random.nextBytes(pixels);
  }

  /** Uses the enclosing screen, so javac keeps its this$0 field (JDK 18+ drops unused ones). */
  final class Listener {
    void onEvent(String event) {
      lines.add(title + ": " + event);
    }
  }

  void onCreate() {
    listener = new Listener();
    ListenerRegistry.register(listener);
    listener.onEvent("created");
  }

  /** The lifecycle end: hooked by watch=e2etest.Screen#onDestroy. A leaky screen forgets to
   * unregister its listener. */
  void onDestroy() {
    if (!leakOnDestroy) {
      ListenerRegistry.unregister(listener);
    }
  }
}
