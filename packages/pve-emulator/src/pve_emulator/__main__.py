"""``python -m pve_emulator serve ...``"""

from pve_emulator.cli import main

raise SystemExit(main())
