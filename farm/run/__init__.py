"""The driver side of a sweep: Ray driver, passes, the Jobs API, metrics, preflight, views."""
