package io.leakwatch;

import java.util.Collections;
import java.util.HashSet;
import java.util.Objects;
import java.util.Set;

/**
 * The Leakwatch facade for JVM apps. The work is done by the JVMTI agent
 * ({@code -agentpath:libleakwatch_jvm.so=...}, see client/jvm/README.md), which implements the
 * natives below. Without the agent every method is a no-op that returns {@code null} or
 * {@code false}, so an app can ship the calls and enable Leakwatch only where the agent is
 * loaded.
 *
 * <pre>
 * screen.onDestroy();
 * LeakWatch.watch(screen, "NewsScreen destroyed"); // a leak if it is still there 5 s later
 * </pre>
 */
public final class LeakWatch {

  /**
   * The references that watch objects now (like LeakCanary's ObjectWatcher), so that heap dumps
   * hold them. Written by the agent only.
   */
  static final Set<KeyedWeakReference> watchedReferences =
      Collections.synchronizedSet(new HashSet<>());

  /** False once a native turned out to be missing (no agent): later calls skip it. */
  private static volatile boolean linked = true;

  private LeakWatch() {}

  /**
   * Watches {@code watchedObject}, which should be garbage collected soon (a closed screen, a
   * stopped service). If it is still reachable after the retained delay (default 5 s) and a
   * garbage collection, it is reported as a leak.
   *
   * @param watchedObject the object that reached the end of its life
   * @param description what it is, e.g. {@code "NewsScreen destroyed"}
   * @return the watch's key (a UUID, also {@code KeyedWeakReference.key} in heap dumps), or
   *     {@code null} when Leakwatch is not installed or refused the watch (see its log)
   */
  public static String watch(Object watchedObject, String description) {
    Objects.requireNonNull(watchedObject, "watchedObject");
    Objects.requireNonNull(description, "description");
    if (!linked) {
      return null;
    }
    try {
      return watch0(watchedObject, description);
    } catch (UnsatisfiedLinkError e) {
      linked = false;
      return null;
    }
  }

  /**
   * Tells Leakwatch whether the app is in the foreground: while visible it waits for more
   * retained objects before dumping the heap (a dump pauses the app).
   */
  public static void setVisible(boolean visible) {
    if (!linked) {
      return;
    }
    try {
      setVisible0(visible);
    } catch (UnsatisfiedLinkError e) {
      linked = false;
    }
  }

  /**
   * Dumps the heap now if any watched object is retained, without waiting for the retained
   * count threshold. The dump, its analysis and its upload run on Leakwatch's own threads; the
   * dump itself pauses the whole JVM (about 5 s per GB of heap on HotSpot).
   *
   * @return true when a dump was started, false when nothing is retained, when Leakwatch is not
   *     installed, or when it refused (a dump in progress, a limit; see its log)
   */
  public static boolean dumpNow() {
    if (!linked) {
      return false;
    }
    try {
      return dumpNow0();
    } catch (UnsatisfiedLinkError e) {
      linked = false;
      return false;
    }
  }

  /** True when the Leakwatch agent is loaded and running in this JVM. */
  public static boolean isInstalled() {
    if (!linked) {
      return false;
    }
    try {
      return isInstalled0();
    } catch (UnsatisfiedLinkError e) {
      linked = false;
      return false;
    }
  }

  private static native String watch0(Object watchedObject, String description);

  private static native void setVisible0(boolean visible);

  private static native boolean dumpNow0();

  private static native boolean isInstalled0();
}
