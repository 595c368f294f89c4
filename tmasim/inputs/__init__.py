"""Scenario input: what a scenario is and how it is read (``scenario``: the frozen tree, TOML,
``--set`` overrides), its table kept as written (``raw``), CUTLASS kernel names as scenarios
(``cutlass_names``), each field's role in a sweep (``field_roles``) and the field reference page
written from the definitions (``reference``)."""
