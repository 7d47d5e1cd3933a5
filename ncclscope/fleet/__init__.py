"""Fleet mode: many hosts' results judged together, and the fleet page."""
