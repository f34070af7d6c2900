"""Policy learning on policy environments: PPO, homotopy schedules, training runs (docs/policy.md)."""
