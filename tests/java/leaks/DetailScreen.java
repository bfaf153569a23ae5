package leaktest;

/** A screen that leaks through a static field ({@link StaticHolder#leaked}). */
final class DetailScreen {
  final String title;
  boolean destroyed;

  DetailScreen(String title) {
    this.title = title;
  }

  void destroy() {
    destroyed = true;
  }
}
