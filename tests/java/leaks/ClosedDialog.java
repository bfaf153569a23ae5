package leaktest;

/** A dialog that was dismissed but is still referenced by a running thread. */
final class ClosedDialog {
  final String message;
  boolean dismissed;

  ClosedDialog(String message) {
    this.message = message;
  }
}
