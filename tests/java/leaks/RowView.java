package leaktest;

/** A list row view; detached rows stay in {@link Adapter#rows}. */
final class RowView {
  final int position;
  boolean detached;

  RowView(int position) {
    this.position = position;
  }
}
