"""Tests of cudatx.demo: the demo environment and the one wheel writer."""
