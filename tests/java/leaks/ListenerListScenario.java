package leaktest;

/**
 * listener_list: class leaktest.EventBus --static subscribers--> java.util.ArrayList
 * --elementData--> java.lang.Object[] --[2]--> leaktest.NewsScreen$1 --this$0-->
 * leaktest.NewsScreen.
 */
final class ListenerListScenario {
  private ListenerListScenario() {}

  /** A well-behaved, long-lived listener (static nested class, holds no screen). */
  static final class LogListener implements EventBus.Listener {
    int seen;

    @Override
    public void onEvent(String event) {
      seen++;
    }
  }

  static void build(int scenario, int n) {
    EventBus.register(new LogListener()); // index 0
    EventBus.register(new LogListener()); // index 1
    NewsScreen screen = new NewsScreen();
    screen.create(); // index 2
    EventBus.post("refresh");
    screen.destroy();
    Watcher.watchLeak(screen, Keys.leak(scenario, n), "NewsScreen destroyed");
  }
}
