package leaktest;

/**
 * array_slot: class leaktest.Cache --static slots--> java.lang.Object[] --[5]-->
 * leaktest.PhotoScreen.
 */
final class ArraySlotScenario {
  private ArraySlotScenario() {}

  static void build(int scenario, int n) {
    Cache.slots[1] = "thumbnail-cache";
    Cache.slots[2] = Integer.valueOf(4096);
    PhotoScreen screen = new PhotoScreen("IMG_0005.jpg");
    Cache.slots[5] = screen;
    screen.destroyed = true;
    Watcher.watchLeak(screen, Keys.leak(scenario, n), "PhotoScreen destroyed");
  }
}
