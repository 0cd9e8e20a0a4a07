"""Tests of cudatx.discover: the target interpreter and the installed distributions."""
