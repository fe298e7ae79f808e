"""The study: its schema (spec), engine-neutral knobs, the grid and the trials it expands to."""
