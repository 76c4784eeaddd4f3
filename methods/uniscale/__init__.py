"""UniScale: one contextual bandit over (model x test-time-scaling setting)."""
