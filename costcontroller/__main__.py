import sys

from costcontroller.command import main

sys.exit(main())
