package leaktest;

/**
 * thread: root THREAD_OBJECT, leaktest.PollingThread (name "dialog-poller") --dialog-->
 * leaktest.ClosedDialog.
 */
final class ThreadScenario {
  private ThreadScenario() {}

  static void build(int scenario, int n) throws InterruptedException {
    ClosedDialog dialog = new ClosedDialog("Are you sure?");
    dialog.dismissed = true;
    new PollingThread(dialog).startAndWait();
    Watcher.watchLeak(dialog, Keys.leak(scenario, n), "ClosedDialog dismissed");
  }
}
