from npudiag.cli import main

main()
