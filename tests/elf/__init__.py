"""Tests of cudatx.elf: the ELF reader and the ld.so cache."""
