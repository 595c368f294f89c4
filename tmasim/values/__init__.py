"""Values in and out: a raw TOML value read and checked (``fields``), quantities with units at the
boundary (``units``, ``unit_factors``), and quantities written for people (``format``). Below every
other room."""
