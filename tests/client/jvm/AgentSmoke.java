package agenttest;

import io.leakwatch.KeyedWeakReference;
import io.leakwatch.LeakWatch;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * End-to-end check of the JVM agent (libleakwatch_jvm.so) with its facade, run in a real JVM.
 *
 * <pre>
 * java -agentpath:libleakwatch_jvm.so=spool=DIR,app=smoke,retained_delay_ms=300,\
 *        watch=agenttest.AgentSmoke$Screen#onDestroy \
 *      -cp leakwatch.jar:agentsmoke-classes agenttest.AgentSmoke 300 [AGENT_PATH]
 * java -cp leakwatch.jar:agentsmoke-classes agenttest.AgentSmoke --no-agent
 * </pre>
 *
 * The first argument must equal the agent's retained_delay_ms. With AGENT_PATH it also starts
 * child JVMs to check that bad options stop the JVM with a message naming the option, and that
 * the facade is a no-op without the agent. Exit status 0 = all checks passed, 1 = a check
 * failed (each failure is printed), 2 = usage.
 */
public final class AgentSmoke {
  /** A screen whose onDestroy is hooked by watch=agenttest.AgentSmoke$Screen#onDestroy. */
  static class Screen {
    Screen child;

    void onDestroy() {
      if (child != null) {
        child.onDestroy(); // another object: watched too
      }
    }

    /** Static, same name: not hooked (no object to watch). */
    static void onDestroy(int unused) {}
  }

  /** Overrides and calls super: one watch per object, not two. */
  static class SubScreen extends Screen {
    @Override
    void onDestroy() {
      super.onDestroy();
    }
  }

  /** Does not override: covered by the breakpoint on Screen.onDestroy. */
  static class LeafScreen extends Screen {}

  /** Same method name, unrelated class: not hooked. */
  static class Other {
    void onDestroy() {}
  }

  /** watch=agenttest.AgentSmoke$Frame#dispose: dispose() is declared by the superclass only
   * (as JFrame#dispose is java.awt.Window's), so the agent hooks Window.dispose and watches
   * only receivers that are Frames. */
  static class Window {
    void dispose() {}
  }

  static class Frame extends Window {}

  static class FancyFrame extends Frame {}

  static class Dialog extends Window {}

  /** The leaks: kept reachable on purpose. */
  static final List<Object> kept = new ArrayList<>();

  private static int failures;

  private static void check(boolean ok, String what) {
    System.out.println((ok ? "ok   " : "FAIL ") + what);
    if (!ok) {
      failures++;
    }
  }

  private static long uptimeMillis() {
    return System.nanoTime() / 1_000_000;
  }

  @SuppressWarnings("unchecked")
  private static Set<KeyedWeakReference> watchedReferences() throws ReflectiveOperationException {
    Field f = LeakWatch.class.getDeclaredField("watchedReferences");
    f.setAccessible(true);
    return (Set<KeyedWeakReference>) f.get(null);
  }

  private static KeyedWeakReference byKey(String key) throws ReflectiveOperationException {
    Set<KeyedWeakReference> set = watchedReferences();
    synchronized (set) {
      for (KeyedWeakReference r : set) {
        if (r.key.equals(key)) {
          return r;
        }
      }
    }
    return null;
  }

  private static List<KeyedWeakReference> byReferent(Object o) throws ReflectiveOperationException {
    List<KeyedWeakReference> out = new ArrayList<>();
    Set<KeyedWeakReference> set = watchedReferences();
    synchronized (set) {
      for (KeyedWeakReference r : set) {
        if (r.refersTo(o)) {
          out.add(r);
        }
      }
    }
    return out;
  }

  /** Watches an object nobody keeps (its only reference dies with this frame). */
  private static String watchGarbage() {
    return LeakWatch.watch(new byte[1024], "garbage that is reclaimed");
  }

  private static boolean waitFor(long timeoutMillis, java.util.function.BooleanSupplier cond)
      throws InterruptedException {
    long end = uptimeMillis() + timeoutMillis;
    while (uptimeMillis() < end) {
      if (cond.getAsBoolean()) {
        return true;
      }
      Thread.sleep(20);
    }
    return cond.getAsBoolean();
  }

  private static void withAgent(long delayMillis, String agentPath) throws Exception {
    check(LeakWatch.isInstalled(), "LeakWatch.isInstalled() with the agent");
    LeakWatch.setVisible(true);

    // 1. reclaimed: watched, dropped, must leave the watch set unretained
    long before = uptimeMillis();
    String k1 = watchGarbage();
    long after = uptimeMillis();
    check(k1 != null && k1.matches("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"),
        "watch() returns a UUID key: " + k1);
    KeyedWeakReference r1 = byKey(k1);
    check(r1 != null, "the KeyedWeakReference is in LeakWatch.watchedReferences with that key");
    if (r1 == null) {
      return;
    }
    check(r1.description.equals("garbage that is reclaimed"), "description kept");
    check(r1.retainedUptimeMillis == -1, "not retained at first");
    check(before <= r1.watchUptimeMillis && r1.watchUptimeMillis <= after,
        "watchUptimeMillis " + r1.watchUptimeMillis + " is on System.nanoTime's clock ["
            + before + ", " + after + "]");

    // 2. kept: the leak
    Object leak = new StringBuilder("leaked");
    kept.add(leak);
    String k2 = LeakWatch.watch(leak, "kept on purpose");
    KeyedWeakReference r2 = byKey(k2);
    check(r2 != null && r2.refersTo(leak), "the kept object is watched");

    // 3. watch=agenttest.AgentSmoke$Screen#onDestroy
    Screen screen = new Screen();
    SubScreen sub = new SubScreen();
    LeafScreen leaf = new LeafScreen();
    Screen parent = new Screen();
    Screen child = new Screen();
    parent.child = child;
    Other other = new Other();
    kept.add(screen);
    kept.add(sub);
    kept.add(leaf);
    kept.add(parent);
    kept.add(child);
    kept.add(other);
    screen.onDestroy();
    sub.onDestroy();
    leaf.onDestroy();
    parent.onDestroy();
    other.onDestroy();
    Screen.onDestroy(1);
    String hookDesc = "agenttest.AgentSmoke$Screen#onDestroy was called";
    List<KeyedWeakReference> hs = byReferent(screen);
    check(hs.size() == 1 && hs.get(0).description.equals(hookDesc),
        "watch= fires on Screen.onDestroy(): " + hs.size() + " watch(es)"
            + (hs.isEmpty() ? "" : ", \"" + hs.get(0).description + "\""));
    check(byReferent(sub).size() == 1, "an override calling super is watched once: "
        + byReferent(sub).size());
    check(byReferent(leaf).size() == 1, "a subclass without an override is watched: "
        + byReferent(leaf).size());
    check(byReferent(parent).size() == 1 && byReferent(child).size() == 1,
        "a hooked method destroying another screen watches both");
    check(byReferent(other).isEmpty(), "an unrelated class's onDestroy is not hooked");
    Frame frame = new Frame();
    FancyFrame fancy = new FancyFrame();
    Dialog dialog = new Dialog();
    frame.dispose();
    fancy.dispose();
    dialog.dispose();
    check(byReferent(frame).size() == 1
            && byReferent(frame).get(0).description.equals("agenttest.AgentSmoke$Frame#dispose was called"),
        "watch=Frame#dispose fires on the dispose() Frame inherits from Window: " + byReferent(frame).size());
    check(byReferent(fancy).size() == 1, "... and on a subclass of Frame: " + byReferent(fancy).size());
    check(byReferent(dialog).isEmpty(), "... but not on another Window subclass: " + byReferent(dialog).size());
    // held here: after a dump the SDK releases its watches (they leave the watch set)
    KeyedWeakReference rs = hs.isEmpty() ? null : hs.get(0);

    // 4. after the retained delay: reclaimed vs retained
    // The hooked screens were watched after r2, so their batch may come later: wait for both.
    boolean settled = waitFor(delayMillis + 10_000, () -> r2.retainedUptimeMillis != -1
        && r1.refersTo(null) && !contains(r1) && (rs == null || rs.retainedUptimeMillis != -1));
    check(settled, "the retained check ran within the retained delay + 10 s");
    check(r1.refersTo(null), "the dropped object was reclaimed");
    check(!contains(r1), "the reclaimed watch was released (left the watch set)");
    check(r1.retainedUptimeMillis == -1, "the reclaimed one was never marked retained");
    check(r2.retainedUptimeMillis >= r2.watchUptimeMillis + delayMillis,
        "the kept one is retained: retainedUptimeMillis=" + r2.retainedUptimeMillis
            + " watchUptimeMillis=" + r2.watchUptimeMillis);
    check(r2.retainedUptimeMillis <= uptimeMillis(), "retainedUptimeMillis is not in the future");
    check(rs != null && rs.retainedUptimeMillis != -1, "the hooked screen is retained too");

    // 5. a dump: asked for here, unless the SDK's threshold (6 retained objects) already took one
    long retainedAt = r2.retainedUptimeMillis;
    boolean asked = LeakWatch.dumpNow();
    boolean dumped = waitFor(60_000, () -> KeyedWeakReference.heapDumpUptimeMillis >= retainedAt);
    check(dumped, "a dump (dumpNow() returned " + asked + ") set KeyedWeakReference.heapDumpUptimeMillis="
        + KeyedWeakReference.heapDumpUptimeMillis + " >= the retained time " + retainedAt);

    if (agentPath != null) {
      childJvms(agentPath);
    }
  }

  private static boolean contains(KeyedWeakReference r) {
    try {
      return watchedReferences().contains(r);
    } catch (ReflectiveOperationException e) {
      throw new AssertionError(e);
    }
  }

  private static String java() {
    return System.getProperty("java.home") + File.separator + "bin" + File.separator + "java";
  }

  private static String[] run(List<String> cmd) throws IOException, InterruptedException {
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
    Process p = pb.start();
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (InputStream in = p.getInputStream()) {
      in.transferTo(out);
    }
    if (!p.waitFor(60, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      return new String[] {"timeout", out.toString(StandardCharsets.UTF_8)};
    }
    return new String[] {Integer.toString(p.exitValue()), out.toString(StandardCharsets.UTF_8)};
  }

  /** Bad options stop the JVM naming the option; without the agent the facade is a no-op. */
  private static void childJvms(String agentPath) throws Exception {
    File spool = new File(System.getProperty("java.io.tmpdir"), "lw-agentsmoke-" + ProcessHandle.current().pid());
    String sp = "spool=" + spool.getPath() + ",app=smoke";
    String[][] bad = {
      {"bogus=1," + sp, "unknown option 'bogus'"},
      {"app=smoke", "option spool:"},
      {"spool=" + spool.getPath(), "option app:"},
      {sp + ",build=12x", "option build:"},
      {sp + ",mode=fast", "option mode:"},
      {sp + ",log=loud", "option log:"},
      {sp + ",watch=com.example.Screen", "option watch:"},
      {sp + ",watch=com..Screen#onDestroy", "option watch:"},
      {sp + ",server=ftp://x", "option server:"},
      {sp + ",server=http://127.0.0.1:1", "option key:"},
      {sp + ",app=Bad", "option app:"},
      {sp + ",retained_delay_ms=0", "option retained_delay_ms:"},
      {sp + ",analyzer=/nonexistent/leakscan,mode=traces", "option analyzer:"},
      {sp.replace("app=smoke", "app=a,app=b"), "option app: given twice"},
      {sp + ",noequals", "'noequals' is not name=value"},
    };
    for (String[] b : bad) {
      List<String> cmd = List.of(java(), "-agentpath:" + agentPath + "=" + b[0], "-version");
      String[] r = run(cmd);
      check(!r[0].equals("0") && r[1].contains("leakwatch: error: ") && r[1].contains(b[1]),
          "refused: " + b[0] + " (exit " + r[0] + ", message contains \"" + b[1] + "\")");
      if (r[0].equals("0") || !r[1].contains(b[1])) {
        System.out.println(r[1]);
      }
    }
    if (spool.isDirectory()) {
      spool.delete(); // empty: no child got far enough to spool anything
    }
    String[] none = run(List.of(java(), "-cp", System.getProperty("java.class.path"),
        AgentSmoke.class.getName(), "--no-agent"));
    check(none[0].equals("0"), "without the agent the facade is a no-op (child exit " + none[0] + ")");
    if (!none[0].equals("0")) {
      System.out.println(none[1]);
    }
  }

  private static void withoutAgent() {
    check(!LeakWatch.isInstalled(), "isInstalled() is false");
    check(LeakWatch.watch(new Object(), "x") == null, "watch() returns null");
    LeakWatch.setVisible(false);
    check(!LeakWatch.dumpNow(), "dumpNow() returns false");
    try {
      LeakWatch.watch(null, "x");
      check(false, "watch(null, ...) throws NullPointerException");
    } catch (NullPointerException e) {
      check(true, "watch(null, ...) throws NullPointerException");
    }
  }

  public static void main(String[] args) throws Exception {
    if (args.length == 1 && args[0].equals("--no-agent")) {
      withoutAgent();
    } else if (args.length == 1 || args.length == 2) {
      withAgent(Long.parseLong(args[0]), args.length == 2 ? args[1] : null);
    } else {
      System.err.println("usage: AgentSmoke RETAINED_DELAY_MS [AGENT_PATH] | --no-agent");
      System.exit(2);
    }
    System.out.println(failures == 0 ? "AgentSmoke: all checks passed" : "AgentSmoke: " + failures + " failed");
    System.exit(failures == 0 ? 0 : 1);
  }
}
