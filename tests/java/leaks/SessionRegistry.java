package leaktest;

import java.util.HashMap;

/** A static session map whose "checkout" entry is never removed. */
final class SessionRegistry {
  static final HashMap<String, Object> sessions = new HashMap<>();

  private SessionRegistry() {}
}
