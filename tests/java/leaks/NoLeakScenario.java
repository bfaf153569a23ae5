package leaktest;

/**
 * no_leak: only the common non-leaks (a watched object that was released and cleared, and a
 * watched, strongly held object that is not yet retained) plus an unwatched long-lived listener.
 * The analyzer must report no leak.
 */
final class NoLeakScenario {
  private NoLeakScenario() {}

  static void build(int scenario) {
    EventBus.register(new ListenerListScenario.LogListener());
  }
}
