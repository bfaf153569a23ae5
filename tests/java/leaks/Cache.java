package leaktest;

/** A fixed-size static cache; slot 5 keeps a destroyed PhotoScreen. */
final class Cache {
  static final Object[] slots = new Object[8];

  private Cache() {}
}
