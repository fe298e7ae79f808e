"""The driver side of a sweep: Ray driver, the loops of the searches (passes, halving, local search), the
Jobs API, metrics, preflight, and what the commands print."""
