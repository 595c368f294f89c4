"""Results and their formats: what a run returns (``result``), its summary for people
(``summary``), how far to trust it (``trust``, from the validation's committed figures), output
paths checked and files written whole (``paths``), and tmasim's own files read back
(``read_back``)."""
