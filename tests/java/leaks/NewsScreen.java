package leaktest;

/**
 * Registers an anonymous listener (leaktest.NewsScreen$1, which holds this$0) on the EventBus
 * and forgets to unregister it when destroyed.
 */
final class NewsScreen {
  private int unread;
  boolean destroyed;

  void create() {
    // The only anonymous class of NewsScreen: javac names it leaktest.NewsScreen$1.
    // It uses the outer instance, so it has the synthetic field this$0 on any javac.
    EventBus.register(new EventBus.Listener() {
      @Override
      public void onEvent(String event) {
        unread++;
      }
    });
  }

  void destroy() {
    destroyed = true; // bug: the listener is not unregistered
  }

  int unread() {
    return unread;
  }
}
