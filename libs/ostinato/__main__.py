import sys

from ostinato.cli import main

sys.exit(main())
