"""Tests of cudatx.analysis: ownership and CUDA facts, doctor, the graph and its renderings."""
