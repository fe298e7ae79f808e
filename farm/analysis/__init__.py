"""Pure analysis: run records, statistics, selection, the pass plan, the reference results."""
