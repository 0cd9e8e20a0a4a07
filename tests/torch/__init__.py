"""The slow tests: cudatx on a real torch 2.14.1 environment (tests/support/torch_env.py)."""
