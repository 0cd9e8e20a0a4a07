"""Stage 2, ELF: what the dynamic loader reads of a file (DT_NEEDED, RPATH/RUNPATH, version
needs and definitions, dynamic symbols), of `/etc/ld.so.cache` and of this machine's ld.so.
`reader` is the only module that parses ELF through a library
(docs/architecture.md, "The stages")."""
