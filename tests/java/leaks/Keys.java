package leaktest;

/**
 * The fixed watch keys. Scenario numbers: 1 static_field, 2 listener_list, 3 thread,
 * 4 array_slot, 5 map_value, 6 local_only, 7 multi, 8 no_leak.
 * Leaks: 11111111-1111-1111-1111-0000000000SN (S = scenario, N = 1..4);
 * released (cleared) object: 22222222-2222-2222-2222-0000000000S0;
 * watched but not yet retained: 33333333-3333-3333-3333-0000000000S0.
 */
final class Keys {
  private Keys() {}

  static String leak(int scenario, int n) {
    return "11111111-1111-1111-1111-0000000000" + scenario + n;
  }

  static String released(int scenario) {
    return "22222222-2222-2222-2222-0000000000" + scenario + "0";
  }

  static String notYetRetained(int scenario) {
    return "33333333-3333-3333-3333-0000000000" + scenario + "0";
  }
}
