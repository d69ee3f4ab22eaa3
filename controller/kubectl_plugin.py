"""`kubectl quotagate`: inspect queues and Workloads (placeholder until issue 9 lands)."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    print("kubectl quotagate: not implemented yet", file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
