package leaktest;

/** A screen cached in a static array slot ({@link Cache#slots}). */
final class PhotoScreen {
  final String photo;
  boolean destroyed;

  PhotoScreen(String photo) {
    this.photo = photo;
  }
}
