package leaktest;

import java.util.concurrent.CountDownLatch;

/**
 * A daemon thread that keeps polling for a dialog that was already dismissed. The dialog is
 * reachable only through this thread object's field {@code dialog}: run() never copies it into
 * a local variable, so no Java frame references it.
 */
final class PollingThread extends Thread {
  final ClosedDialog dialog;
  private final CountDownLatch started = new CountDownLatch(1);
  private final CountDownLatch stop = new CountDownLatch(1); // never counted down

  PollingThread(ClosedDialog dialog) {
    super("dialog-poller");
    this.dialog = dialog;
    setDaemon(true);
  }

  void startAndWait() throws InterruptedException {
    start();
    started.await();
  }

  @Override
  public void run() {
    started.countDown();
    while (true) {
      try {
        stop.await();
        return;
      } catch (InterruptedException e) {
        // keep polling
      }
    }
  }
}
