"""The scenario's parts that the engine and the workloads read: the pipeline and the run options
(``parts``) and SM drift (``drift``), frozen and checked on construction. Below the engine, so that
the scenario (``tmasim.inputs``), which parses the workloads, can sit above them."""
