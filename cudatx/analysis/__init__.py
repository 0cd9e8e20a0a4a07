"""Stage 4, analysis: what an `Environment` (the scan's joined facts) means for its users:
who owns each file and what is hollow (`ownership`), CUDA majors and mixes (`cuda`), what is
broken now and what was broken before a change (`broken`, `problems`), what cudatx does not
read (`coverage`), and the reports `doctor`, `why` and `graph` build from them. Reads
models, returns models; never prints (docs/architecture.md, "The stages")."""
