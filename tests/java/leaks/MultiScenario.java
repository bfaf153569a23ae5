package leaktest;

/**
 * multi: three leak groups at once.
 * <ul>
 *   <li>class leaktest.StaticHolder --static leaked--> leaktest.DetailScreen (key ...71);</li>
 *   <li>class leaktest.Cache --static slots--> java.lang.Object[] --[5]--> leaktest.PhotoScreen
 *       (key ...72);</li>
 *   <li>class leaktest.Adapter --static rows--> java.util.ArrayList --elementData-->
 *       java.lang.Object[] --[1] and [3]--> leaktest.RowView (keys ...73 and ...74): one group,
 *       count 2.</li>
 * </ul>
 */
final class MultiScenario {
  private MultiScenario() {}

  static void build(int scenario) {
    StaticFieldScenario.build(scenario, 1);
    ArraySlotScenario.build(scenario, 2);
    Adapter.rows.add(new RowView(0)); // index 0, attached, not watched
    RowView first = new RowView(1);
    Adapter.rows.add(first); // index 1
    Adapter.rows.add(new RowView(2)); // index 2, attached, not watched
    RowView second = new RowView(3);
    Adapter.rows.add(second); // index 3
    first.detached = true;
    second.detached = true;
    Watcher.watchLeak(first, Keys.leak(scenario, 3), "RowView detached");
    Watcher.watchLeak(second, Keys.leak(scenario, 4), "RowView detached");
  }
}
