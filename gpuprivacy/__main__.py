import sys

from gpuprivacy.cli import main

sys.exit(main())
