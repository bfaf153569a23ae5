package leaktest;

/**
 * The two non-leaks every scenario has: a watched object that is released (its referent is
 * cleared by GC, although its reference is marked retained) and a watched object that is still
 * strongly held (Navigator.current) but whose retainedUptimeMillis stays -1.
 */
final class CommonWatches {
  private CommonWatches() {}

  static void add(int scenario) {
    watchReleased(scenario);
    VisibleScreen visible = new VisibleScreen("visible-" + scenario);
    Navigator.current = visible;
    Watcher.watchNotYetRetained(visible, Keys.notYetRetained(scenario), "VisibleScreen paused");
  }

  private static void watchReleased(int scenario) {
    ReleasedScreen screen = new ReleasedScreen("released-" + scenario);
    screen.destroyed = true;
    Watcher.watchReleased(screen, Keys.released(scenario), "ReleasedScreen destroyed");
    // the last strong reference (this local) goes away when this method returns
  }
}
