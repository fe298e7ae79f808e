"""Where a sweep is kept: MLflow (the tag and artifact names in one module)."""
