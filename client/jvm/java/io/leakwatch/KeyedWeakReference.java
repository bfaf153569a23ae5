package io.leakwatch;

import java.lang.ref.ReferenceQueue;
import java.lang.ref.WeakReference;

/**
 * A weak reference to an object that reached the end of its life and is being watched for leaks.
 *
 * <p>The heap analyzer (libleakcore, {@code leakscan}) finds watched objects in a heap dump
 * through this class and its fields: every instance of {@code io.leakwatch.KeyedWeakReference}
 * whose {@link #retainedUptimeMillis} is not {@code -1} and whose referent is not cleared
 * marks its referent as a leaking object. <b>The class name, the field names and the field
 * types must not change</b>: they follow LeakCanary 2's {@code leakcanary.KeyedWeakReference}
 * layout, which the analyzer reads by name.
 *
 * <ul>
 *   <li>{@link #key}: a random UUID string identifying this watch (selectable with
 *       {@code leakscan analyze --key UUID});</li>
 *   <li>{@link #description}: what was watched, e.g. {@code "NewsScreen destroyed"};</li>
 *   <li>{@link #watchUptimeMillis}: uptime (ms, monotonic clock) when the object was watched;</li>
 *   <li>{@link #retainedUptimeMillis}: uptime when the object was found retained, or
 *       {@code -1} while it is watched but not (yet) retained — such objects are not leaks;</li>
 *   <li>{@link #heapDumpUptimeMillis}: uptime of the last heap dump, set just before dumping.</li>
 * </ul>
 */
public final class KeyedWeakReference extends WeakReference<Object> {

  /** Uptime in ms at which the last heap dump was started; read by the analyzer. */
  public static volatile long heapDumpUptimeMillis;

  /** Unique key of this watch (a UUID string). */
  public final String key;

  /** Human-readable description of the watched object. */
  public final String description;

  /** Uptime in ms at which the object was watched. */
  public final long watchUptimeMillis;

  /** Uptime in ms at which the object was found retained; -1 = watched, not yet retained. */
  public volatile long retainedUptimeMillis;

  public KeyedWeakReference(Object referent, String key, String description,
      long watchUptimeMillis, ReferenceQueue<Object> queue) {
    super(referent, queue);
    if (key == null || description == null) {
      throw new NullPointerException("key and description must not be null");
    }
    this.key = key;
    this.description = description;
    this.watchUptimeMillis = watchUptimeMillis;
    this.retainedUptimeMillis = -1L;
  }

  /** Clears the referent; a cleared reference is no longer retained (as in LeakCanary). */
  @Override
  public void clear() {
    super.clear();
    retainedUptimeMillis = -1L;
  }
}
