package leaktest;

/** A screen that is watched after it is destroyed and then properly released (no leak). */
final class ReleasedScreen {
  final String name;
  boolean destroyed;

  ReleasedScreen(String name) {
    this.name = name;
  }
}
