"""``python -m tmasim``: the ``tmasim`` command."""

from tmasim.cli import main

raise SystemExit(main())
