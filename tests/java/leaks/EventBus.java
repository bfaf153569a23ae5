package leaktest;

import java.util.ArrayList;

/** A global listener registry: listeners that are never unregistered leak their owners. */
final class EventBus {
  interface Listener {
    void onEvent(String event);
  }

  static final ArrayList<Listener> subscribers = new ArrayList<>();

  private EventBus() {}

  static void register(Listener l) {
    subscribers.add(l);
  }

  static void unregister(Listener l) {
    subscribers.remove(l);
  }

  static void post(String event) {
    for (Listener l : subscribers) {
      l.onEvent(event);
    }
  }
}
