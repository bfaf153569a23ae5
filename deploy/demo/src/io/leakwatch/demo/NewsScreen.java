package io.leakwatch.demo;

import java.util.ArrayList;

/**
 * The demo's leak, in its classic form: a screen registers an inner-class listener on a global
 * event bus and forgets to unregister it in {@link #onDestroy()}. The listener
 * ({@code io.leakwatch.demo.NewsScreen$1}) keeps the destroyed screen through {@code this$0}:
 *
 * <pre>
 * EventBus.subscribers → ArrayList.elementData → Object[][0] → NewsScreen$1.this$0 → NewsScreen
 * </pre>
 *
 * This file holds only the app logic; watching and dumping are done by {@link DemoApp} (or, later,
 * by the JVM agent with {@code watch=io.leakwatch.demo.NewsScreen#onDestroy}).
 */
public final class NewsScreen {
  private final String title;
  private final StringBuilder headlines = new StringBuilder();
  private boolean destroyed;

  public NewsScreen(String title) {
    this.title = title;
  }

  public void onCreate() {
    EventBus.register(new EventBus.Listener() {
      @Override
      public void onEvent(String event) {
        headlines.append(event).append('\n'); // uses the outer screen: this$0
      }
    });
    EventBus.post("Leakwatch 0.1 released");
  }

  /** The end of the screen's life. Bug: the listener registered in onCreate stays registered. */
  public void onDestroy() {
    destroyed = true;
  }

  public boolean isDestroyed() {
    return destroyed;
  }

  public String title() {
    return title;
  }
}

/** A process-wide listener registry (the leak's GC root: the static field {@code subscribers}). */
final class EventBus {
  interface Listener {
    void onEvent(String event);
  }

  static final ArrayList<Listener> subscribers = new ArrayList<>();

  private EventBus() {}

  static void register(Listener listener) {
    subscribers.add(listener);
  }

  static void unregister(Listener listener) {
    subscribers.remove(listener);
  }

  static void post(String event) {
    for (Listener l : subscribers) {
      l.onEvent(event);
    }
  }
}
