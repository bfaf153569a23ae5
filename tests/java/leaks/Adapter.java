package leaktest;

import java.util.ArrayList;

/** A static adapter that never drops its detached rows. */
final class Adapter {
  static final ArrayList<RowView> rows = new ArrayList<>();

  private Adapter() {}
}
