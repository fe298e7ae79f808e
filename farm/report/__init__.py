"""The report of a sweep: built from records, checked, rendered as text/markdown/json, plotted."""
