package leaktest;

import java.lang.ref.Reference;
import java.util.concurrent.CountDownLatch;

/**
 * local_only: root THREAD_OBJECT, java.lang.Thread "wizard-worker" --local (Java local)-->
 * leaktest.WizardScreen. The screen is created by the worker itself, kept in a local variable of
 * {@link WizardTask#run()} while the thread blocks forever; nothing else references it.
 */
final class LocalOnlyScenario {
  static final String THREAD_NAME = "wizard-worker";

  private LocalOnlyScenario() {}

  /** Holds only latches and the key, never the screen. */
  static final class WizardTask implements Runnable {
    private final String key;
    private final CountDownLatch ready = new CountDownLatch(1);
    private final CountDownLatch finish = new CountDownLatch(1); // never counted down

    WizardTask(String key) {
      this.key = key;
    }

    @Override
    public void run() {
      WizardScreen screen = new WizardScreen(3);
      screen.destroyed = true;
      Watcher.watchLeak(screen, key, "WizardScreen destroyed");
      ready.countDown();
      while (true) {
        try {
          finish.await();
          break;
        } catch (InterruptedException e) {
          // keep waiting
        }
      }
      Reference.reachabilityFence(screen);
    }
  }

  static void build(int scenario, int n) throws InterruptedException {
    WizardTask task = new WizardTask(Keys.leak(scenario, n));
    Thread worker = new Thread(task, THREAD_NAME);
    worker.setDaemon(true);
    worker.start();
    task.ready.await();
  }
}
