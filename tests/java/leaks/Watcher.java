package leaktest;

import io.leakwatch.KeyedWeakReference;
import java.lang.ref.ReferenceQueue;
import java.util.ArrayList;

/**
 * Holds every {@link KeyedWeakReference} of a test scenario, like LeakCanary's ObjectWatcher
 * keeps its watched objects: the references stay strongly reachable (through {@link #watched})
 * so they are in the dump; their referents are never followed by the analyzer.
 */
public final class Watcher {
  static final ReferenceQueue<Object> queue = new ReferenceQueue<>();
  /** All references, in watch order. */
  static final ArrayList<KeyedWeakReference> watched = new ArrayList<>();

  // What the scenario expects of each reference (checked by settle()).
  private static final ArrayList<KeyedWeakReference> leaking = new ArrayList<>();
  private static final ArrayList<KeyedWeakReference> released = new ArrayList<>();
  private static final ArrayList<KeyedWeakReference> notYetRetained = new ArrayList<>();

  private Watcher() {}

  static long uptimeMillis() {
    return System.nanoTime() / 1_000_000;
  }

  private static KeyedWeakReference watch(Object o, String key, String description) {
    KeyedWeakReference ref =
        new KeyedWeakReference(o, key, description, uptimeMillis(), queue);
    watched.add(ref);
    return ref;
  }

  /** Watches an object that stays strongly reachable: it will be marked retained (a leak). */
  static void watchLeak(Object o, String key, String description) {
    leaking.add(watch(o, key, description));
  }

  /** Watches an object whose last strong reference the caller drops: its referent gets cleared. */
  static void watchReleased(Object o, String key, String description) {
    released.add(watch(o, key, description));
  }

  /** Watches an object that stays strongly reachable but is never marked retained (-1). */
  static void watchNotYetRetained(Object o, String key, String description) {
    notYetRetained.add(watch(o, key, description));
  }

  /**
   * Simulates the SDK's retain step: GC, check, and set retainedUptimeMillis on the leaking
   * references (and on the released ones, as when the dump's own GC clears a retained object).
   * Throws if the heap is not in the state the scenario promises.
   */
  static void settle() throws InterruptedException {
    for (int round = 0; ; round++) {
      System.gc();
      boolean allCleared = true;
      for (KeyedWeakReference r : released) {
        if (r.get() != null) {
          allCleared = false;
        }
      }
      if (allCleared) {
        break;
      }
      if (round == 50) {
        throw new IllegalStateException("a released object was not garbage collected");
      }
      Thread.sleep(20);
    }
    for (KeyedWeakReference r : leaking) {
      if (r.get() == null) {
        throw new IllegalStateException("leaking object " + r.key + " was collected");
      }
    }
    for (KeyedWeakReference r : notYetRetained) {
      if (r.get() == null) {
        throw new IllegalStateException("not-yet-retained object " + r.key + " was collected");
      }
    }
    for (KeyedWeakReference r : leaking) {
      r.retainedUptimeMillis = Math.max(uptimeMillis(), r.watchUptimeMillis + 1);
    }
    for (KeyedWeakReference r : released) {
      r.retainedUptimeMillis = Math.max(uptimeMillis(), r.watchUptimeMillis + 1);
    }
  }

  /** Latest retainedUptimeMillis/watchUptimeMillis among all references. */
  static long latestUptimeMillis() {
    long t = 0;
    for (KeyedWeakReference r : watched) {
      t = Math.max(t, Math.max(r.watchUptimeMillis, r.retainedUptimeMillis));
    }
    return t;
  }
}
