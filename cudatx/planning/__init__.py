"""Stage 5, planning: a proposed change (remove, install, sync, a requirements file)
simulated on the environment's files and judged: which distributions a spec names
(`selection`), uv's dry run and staged wheels (`stage`, `resolve`), the simulated environment
(`simulate`), the diff of every load before and after (`diff`), repairs (`plan`), the
`Proposal` a transaction applies (`change`), and the pre-commit check of a requirements file
(`checkreq`, `reqfiles/`). Nothing here changes the environment (docs/architecture.md)."""
