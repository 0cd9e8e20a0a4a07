"""Stage 3, loader: glibc's dynamic loader replayed on the files as they are, or as a
simulated change would leave them: the search of elf/dl-load.c (`process`), the version and
symbol checks of elf/dl-version.c and elf/dl-lookup.c (`binding`), one load root per process
with its preloads and run-time loads (`roots`), over a `FileView` (`fileview`)
(docs/loader-model.md)."""
