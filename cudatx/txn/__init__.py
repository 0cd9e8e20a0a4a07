"""Stage 7, transactions: a `Proposal` applied through uv with a journal and a snapshot in
the environment's own store, under its lock, verified, and rolled back on failure, an
interrupt or `cudatx rollback` (`apply`, `journal`, `store`, `snapshot`, `rollback`,
`verify`); which processes map what a change takes away (`running`); traced runs (`trace`)
(docs/reliability.md)."""
