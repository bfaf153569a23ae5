package leaktest;

/** Classic static-field leak: the last opened detail screen is cached forever. */
final class StaticHolder {
  static DetailScreen leaked;

  private StaticHolder() {}
}
