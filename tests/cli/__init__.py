"""Tests of cudatx.cli: the command line as a user meets it."""
