"""``python -m tmasim.validation validate|calibrate ...``: the subcommands before ``tmasim`` has them."""

from tmasim.validation.command import main

raise SystemExit(main())
