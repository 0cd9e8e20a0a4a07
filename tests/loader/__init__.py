"""Tests of cudatx.loader: the loader model, judged by glibc's real loader."""
