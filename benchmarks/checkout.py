"""Put the checkout these benchmarks live in first on ``sys.path``, so that they time its
``tmasim``, not whichever copy is installed. Every benchmark imports this before ``tmasim``."""

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])
if sys.path[:1] != [ROOT]:
    sys.path.insert(0, ROOT)
