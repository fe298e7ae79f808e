"""Pure analysis: results and run records, statistics, selection, the searches' planners (the pass plan,
halving, the local search, capacity), the reference results."""
