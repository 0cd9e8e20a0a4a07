from cudatx.cli import main

main()
