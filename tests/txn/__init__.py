"""Tests of cudatx.txn: transactions applied and rolled back, the store, the running
processes, hardening."""
