import sys

from controller.cli import main

sys.exit(main(["run", *sys.argv[1:]]))
