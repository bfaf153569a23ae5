package leaktest;

/** A screen referenced only by a local variable of a blocked worker thread. */
final class WizardScreen {
  final int steps;
  boolean destroyed;

  WizardScreen(int steps) {
    this.steps = steps;
  }
}
