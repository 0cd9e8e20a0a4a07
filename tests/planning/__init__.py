"""Tests of cudatx.planning: removal plans, install/sync, requirements files, check-requirements."""
