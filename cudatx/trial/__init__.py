"""The trial: the planned change made in a shadow of the environment and judged by the
real interpreter before and after (docs/trial.md)."""
