"""The pieces of selection (farm.analysis.select is its entry point): models, rules, stepwise, comparisons,
machines, engines, and the capacity ranking (capacity, capacity_models)."""
