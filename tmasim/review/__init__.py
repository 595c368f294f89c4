"""Review side: figures, traces, reports and animations, built from result tables only."""
