package leaktest;

/** Strongly holds the screen on display ({@link VisibleScreen}); part of every scenario. */
final class Navigator {
  static VisibleScreen current;

  private Navigator() {}
}
