package leaktest;

/** A screen kept as a value of a static session map. */
final class CheckoutScreen {
  final String cartId;
  boolean destroyed;

  CheckoutScreen(String cartId) {
    this.cartId = cartId;
  }
}
