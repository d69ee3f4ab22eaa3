import sys

from image.build import main

sys.exit(main())
