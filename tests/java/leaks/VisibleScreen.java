package leaktest;

/** A screen that is watched but still legitimately in use: not yet retained, not a leak. */
final class VisibleScreen {
  final String name;

  VisibleScreen(String name) {
    this.name = name;
  }
}
