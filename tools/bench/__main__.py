"""`python -m tools.bench SCENARIO.yaml --simulate|--live|--api-floor ...`"""

import sys

from tools.bench.command import main

sys.exit(main())
