"""Stage 1, discover: what is installed and how Python and the packages load it, read from
disk and from the target interpreter: the interpreter (`target`), distributions and their
RECORDs (`dists`), the owners of files, one module each (`owners/`: RECORDs, conda's records,
dpkg's and rpm's databases), the site walk
(`sitewalk`), what packages load by hand (`preloads`, `handloads`, `frameworks/`) and traced
runs (`traces`, `lddebug`). Nothing here resolves a load; the loader stage does
(docs/architecture.md, "The stages")."""
