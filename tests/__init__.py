"""cudatx's test suite: one subpackage per pipeline stage (as cudatx/ is laid out), the
shared helpers in tests/support/, and the tests of top-level modules and of the project here."""
