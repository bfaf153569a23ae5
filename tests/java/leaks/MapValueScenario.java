package leaktest;

/**
 * map_value: class leaktest.SessionRegistry --static sessions--> java.util.HashMap --table-->
 * java.util.HashMap$Node[] --[13]--> java.util.HashMap$Node --value--> leaktest.CheckoutScreen.
 *
 * <p>Slot: h = "checkout".hashCode() = 1536904518, (h ^ (h >>> 16)) & 15 = 13 for the default
 * table of 16. The other keys land elsewhere ("home" in 15, "profile" in 7), so the checkout
 * node is the only node of bucket 13 (reached through the array, not through a {@code next}).
 * Only put() is used: no keySet/values/entrySet views exist.
 */
final class MapValueScenario {
  private MapValueScenario() {}

  static void build(int scenario, int n) {
    SessionRegistry.sessions.put("home", "home-session");
    CheckoutScreen screen = new CheckoutScreen("cart-42");
    SessionRegistry.sessions.put("checkout", screen);
    SessionRegistry.sessions.put("profile", "profile-session");
    screen.destroyed = true;
    Watcher.watchLeak(screen, Keys.leak(scenario, n), "CheckoutScreen destroyed");
  }
}
