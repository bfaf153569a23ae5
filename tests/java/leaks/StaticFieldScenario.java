package leaktest;

/**
 * static_field: class leaktest.StaticHolder --static leaked--> leaktest.DetailScreen.
 */
final class StaticFieldScenario {
  private StaticFieldScenario() {}

  static void build(int scenario, int n) {
    DetailScreen screen = new DetailScreen("detail");
    StaticHolder.leaked = screen;
    screen.destroy();
    Watcher.watchLeak(screen, Keys.leak(scenario, n), "DetailScreen destroyed");
  }
}
