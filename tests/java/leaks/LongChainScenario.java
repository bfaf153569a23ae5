package leaktest;

/**
 * long_chain: class leaktest.LongChainScenario --static head--> Node --next--> ... (12,000
 * nodes) --value--> leaktest.DetailScreen. Its leak trace has 12,002 elements, more than a
 * device's traces report may hold (10,000 a trace): only a heap report can carry it, and the
 * server must still show it. No expected JSON: the server's tests check what it makes of it.
 */
final class LongChainScenario {
  static final class Node {
    Node next;
    Object value;
  }

  static Node head;

  private LongChainScenario() {}

  static void build(int scenario, int length) {
    head = new Node();
    Node cur = head;
    for (int i = 1; i < length; i++) {
      cur.next = new Node();
      cur = cur.next;
    }
    DetailScreen screen = new DetailScreen("far away");
    cur.value = screen;
    screen.destroy();
    Watcher.watchLeak(screen, Keys.leak(scenario, 1), "DetailScreen destroyed");
  }
}
